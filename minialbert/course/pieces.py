"""The pieces a learner writes, each checked against the package's own version.

A lesson has the learner write a core piece of ALBERT (a function, or the forward of an nn.Module
whose __init__ the lesson gives) between solution markers; the next cell calls `check`:

    check("attention", attention)
    attention: right: matches the package on 3 random inputs (largest difference 1.2e-07)
    attention: wrong: values differ at [0, 1, 2, 0]: yours 0.4178, the package's 0.3012 (48 of 120
               values differ, by up to 0.29); that is what leaving out the 1/sqrt(d) scale gives
    attention: not written yet; the rest of the lesson uses the package's version

The learner's piece and the package's run on the same random inputs (module pieces with the same
random weights, compared on outputs and on every parameter's gradient); the verdict is one line
naming what differs: the shape, the first differing position, a parameter's name, or a known
mistake the output matches. `check` never raises, so a wrong or missing piece never stops a lesson:
the lesson goes on with the package's version. It returns whether the piece is right.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from ..config import CLS_ID, IGNORE_INDEX, MASK_ID, PAD_ID, SEP_ID, UNK_ID, AlbertConfig
from ..costs import count_parameters, parameter_breakdown
from ..evaluation import evaluate_pretraining, summary_record
from ..experiments.ablation import head_on_pairs
from ..experiments.analysis import transition
from ..experiments.synthetic import permutation_chains
from ..masking import MASK_RATE, MaskingVocab, ngram_mask, ngram_probabilities, whole_words
from ..model import (
    AlbertForPretraining,
    AlbertForSequenceClassification,
    Encoder,
    FactorizedEmbedding,
    MaskedLMHead,
    TransformerLayer,
    math_attention,
    merge_heads,
    split_heads,
)
from ..optim import Lamb, make_optimizer, param_groups, trust_ratio, warmup_linear_decay
from ..train import TrainArgs, pretrain, train_step

# A small model for the checks: every size different, so a swapped dimension shows as a wrong shape.
CHECK_CONFIG = AlbertConfig(vocab_size=50, embedding_size=6, hidden_size=12, num_layers=3, num_heads=3,
                            intermediate_size=20, max_position_embeddings=16)
TRIALS = 3                 # random inputs per check
ATOL, RTOL = 1e-5, 1e-4    # float32 differences below these are rounding


@dataclass(frozen=True)
class Piece:
    """One piece: the package's version, random inputs for it, and the mistakes worth naming.

    function pieces: reference(*inputs) is the package's output; the learner's fn(*inputs) must match.
    module pieces: reference(cfg) builds the package's module; build(cls, cfg, package_module) builds
    the learner's (default: cls(cfg)); both get the same (randomised) weights, matched by name through
    `rename` (package prefix -> learner prefix), and must match in outputs and gradients.
    property pieces: reference(yours, generator, trial) checks what the piece must do (measured shares,
    or the package's training step run beside it) and returns (problem or None, largest difference).
    mistakes: (what the mistake is, a function of the same arguments as the reference giving the
    output it produces); a wrong output that matches one is named.
    """

    name: str
    kind: str                                            # function | module | property
    reference: Callable
    inputs: Callable[[torch.Generator, int], tuple]   # (generator, trial number) -> the arguments
    mistakes: tuple = ()
    build: Callable | None = None
    rename: tuple = ()
    output: Callable = staticmethod(lambda out: out)      # the package module's output -> the tensor compared


def _randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


def _padded_keys(g: torch.Generator, B: int, N: int) -> torch.Tensor:
    """(B, 1, 1, N) bool: row b attends to its first N - b keys (row 0 unpadded)."""
    lengths = torch.tensor([max(1, N - b) for b in range(B)])
    return (torch.arange(N)[None] < lengths[:, None])[:, None, None, :]


# ------------------------------------------------------------------ the package's pieces and their inputs
def _attention_inputs(g, trial):
    B, h, N, d = 3, 2, 5, 4
    return _randn(g, B, h, N, d), _randn(g, B, h, N, d), _randn(g, B, h, N, d), _padded_keys(g, B, N)


def _attention_variant(q, k, v, attend, scale=True, mask=True, dim=-1):
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    if mask:
        scores = scores.masked_fill(~attend, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=dim) @ v


def _layer_inputs(g, trial):
    H = CHECK_CONFIG.hidden_size
    return _randn(g, 3, 5, H), _padded_keys(g, 3, 5)


def _layer_variant(layer: TransformerLayer, x, attend, pre_ln=False, act="tanh", residual=True):
    """The package's layer computed by hand, with one thing changed."""
    a, f = layer.attention, layer.feed_forward
    norm_in = (lambda t, ln: ln(t)) if pre_ln else (lambda t, ln: t)
    norm_out = (lambda t, ln: t) if pre_ln else (lambda t, ln: ln(t))
    q, k, v = (split_heads(t, a.num_heads) for t in a.qkv(norm_in(x, a.LayerNorm)).chunk(3, dim=-1))
    context = a.dense(merge_heads(math_attention(q, k, v, attend)))
    x = norm_out(x * residual + context, a.LayerNorm)
    gelu = (lambda t: F.gelu(t, approximate="tanh")) if act == "tanh" else F.gelu
    return norm_out(x * residual + f.ffn_output(gelu(f.ffn(norm_in(x, f.LayerNorm)))), f.LayerNorm)


def _mlm_head_variant(head: MaskedLMHead, x, act="tanh", norm=True):
    gelu = (lambda t: F.gelu(t, approximate="tanh")) if act == "tanh" else F.gelu
    y = gelu(head.dense(x))
    return (head.LayerNorm(y) if norm else y) @ head.decoder_weight.T + head.bias


def _embedding_inputs(g, trial):
    cfg = CHECK_CONFIG
    ids = torch.randint(0, cfg.vocab_size, (3, 7), generator=g)
    types = torch.randint(0, cfg.type_vocab_size, (3, 7), generator=g)
    return ids, types


def _embedding_parameters(V: int, E: int, H: int) -> int:
    """The package's count: the word table and the E -> H projection of a FactorizedEmbedding."""
    with torch.device("meta"):
        emb = FactorizedEmbedding(CHECK_CONFIG.replace(vocab_size=V, embedding_size=E, hidden_size=H,
                                                       num_heads=1))
    return emb.word_embeddings.weight.numel() + sum(p.numel() for p in emb.projection.parameters())


def _sentence_loss_inputs(g, trial):
    head = nn.Linear(CHECK_CONFIG.hidden_size, 2)
    _randomize(head, g)
    return _randn(g, 4, CHECK_CONFIG.hidden_size), torch.randint(0, 2, (4,), generator=g), head


def _sentence_loss(pooled, labels, head):
    """What AlbertForPretraining adds to the MLM loss: cross-entropy of the head's two scores."""
    return F.cross_entropy(head(pooled).float(), labels)


# ------------------------------------------------------------------ lesson 04: masking and sentence pairs
def _masking_vocab(g) -> MaskingVocab:
    starts = (torch.rand(40, generator=g) < 0.6).tolist()
    return MaskingVocab.from_ids(starts, special_ids={PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID})


def _whole_words_inputs(g, trial):
    vocab = _masking_vocab(g)
    a, b = (torch.randint(5, 40, (n,), generator=g).tolist() for n in (7, 5))
    return [CLS_ID, *a, SEP_ID, *b, SEP_ID], vocab


def _corrupt_shares(corrupt_fn, g, trial) -> tuple[str | None, float]:
    """80/10/10 measured: 30,000 draws at one position of a seeded random.Random."""
    vocab, rng, token, draws = _masking_vocab(g), random.Random(trial), 7, 30_000
    seen = [corrupt_fn(token, vocab, rng) for _ in range(draws)]
    if bad := [t for t in seen if t != token and t != vocab.mask_id and t not in vocab.random_ids]:
        return f"it returned {bad[0]}, which is neither [MASK], the token, nor a non-special id", 0.0
    masked, same = seen.count(vocab.mask_id) / draws, seen.count(token) / draws
    other = 1 - masked - same
    expected_same = 0.1 + 0.1 / len(vocab.random_ids)       # a random draw may hit the token itself
    shares = (masked - 0.8, other - (0.1 - 0.1 / len(vocab.random_ids)), same - expected_same)
    if max(abs(x) for x in shares) > 0.012:                  # about 6 standard errors at 30,000 draws
        return (f"shares over {draws:,} draws: [MASK] {masked:.3f}, another token {other:.3f}, "
                f"unchanged {same:.3f}; ALBERT's are 0.8 / 0.1 / 0.1"), 0.0
    return None, max(abs(x) for x in shares)


def _pair_inputs(g, trial):
    a, b, other = (torch.randint(5, 40, (n,), generator=g).tolist() for n in (4, 3, 5))
    return a, b, other, trial % 2 == 1          # trials alternate: keep / swap (or real / random B)


def _sop_pair(a, b, other, swap):
    """pretraining_data.sentence_order_pairs' rule: label 1 = the two segments swapped."""
    return (b, a, 1) if swap else (a, b, 0)


def _nsp_pair(a, b, other, use_random):
    """pretraining_data.next_sentence_pairs' rule: label 1 = B is text from another document."""
    return (a, other, 1) if use_random else (a, b, 0)


def _package_budget(n_real: int, mask_rate: float) -> int:
    """How many tokens masking.ngram_mask predicts in n_real one-piece words: its budget, measured."""
    vocab = MaskingVocab.from_ids([True] * 10, special_ids={PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID})
    labels = ngram_mask([7] * n_real, vocab, random.Random(0), mask_rate=mask_rate).mlm_labels
    return sum(label != IGNORE_INDEX for label in labels)


def _budget_inputs(g, trial):
    return ((37, 0.15), (3, 0.15), (0, 0.15))[trial % 3]     # 5.55 rounds to 6; 0.45 to 0, raised to 1


def _ngram_draw_shares(draw_fn, g, trial) -> tuple[str | None, float]:
    """p(n) measured: 30,000 draws of n from a seeded random.Random, against ngram_probabilities."""
    max_ngram, rng, draws = 3 + trial % 2, random.Random(trial), 30_000
    seen = [draw_fn(rng, max_ngram) for _ in range(draws)]
    if bad := [n for n in seen if n not in range(1, max_ngram + 1)]:
        return f"it drew n = {bad[0]!r}; n must be an integer from 1 to max_ngram = {max_ngram}", 0.0
    shares = [seen.count(n) / draws for n in range(1, max_ngram + 1)]
    expected = ngram_probabilities(max_ngram)
    largest = max(abs(s - e) for s, e in zip(shares, expected))
    if largest > 0.012:                                       # about 4 standard errors at 30,000 draws
        return (f"shares of n = 1..{max_ngram} over {draws:,} draws: "
                f"{' / '.join(f'{s:.3f}' for s in shares)}; p(n) = (1/n) / sum(1/k) gives "
                f"{' / '.join(f'{e:.3f}' for e in expected)}"), 0.0
    return None, largest


def _span_sequence(g) -> tuple[list[int], MaskingVocab]:
    """[CLS] A [SEP] B [SEP] of random pieces: words of one to three pieces, two segments."""
    vocab = _masking_vocab(g)
    a, b = (torch.randint(5, 40, (int(n),), generator=g).tolist()
            for n in torch.randint(4, 30, (2,), generator=g))
    return [CLS_ID, *a, SEP_ID, *b, SEP_ID], vocab


def _span_placement(mask_fn, g, trial) -> tuple[str | None, float]:
    """ngram_mask's rules on 400 random two-segment sequences: the budget, whole words, specials never
    predicted, labels, and [MASK] shown at about 80% of the predicted positions."""
    predicted = masked = 0
    rng = random.Random(trial)
    for _ in range(400):
        ids, vocab = _span_sequence(g)
        shown, labels = mask_fn(list(ids), vocab, rng)
        if len(shown) != len(ids) or len(labels) != len(ids):
            return (f"for a sequence of {len(ids)} tokens it returned {len(shown)} ids and {len(labels)} "
                    f"labels"), 0.0
        words = whole_words(ids, vocab)
        budget = max(1, round(sum(map(len, words)) * MASK_RATE))
        chosen = [p for p, label in enumerate(labels) if label != IGNORE_INDEX]
        if bad := [p for p in chosen if labels[p] != ids[p]]:
            return f"position {bad[0]}'s label is {labels[bad[0]]}, not the original token {ids[bad[0]]}", 0.0
        if bad := [p for p in chosen if vocab.is_special[ids[p]]]:
            return f"it predicts position {bad[0]}, a special token ({ids[bad[0]]})", 0.0
        if bad := [p for p, t in enumerate(shown) if labels[p] == IGNORE_INDEX and t != ids[p]]:
            return f"it changed position {bad[0]}, which it does not predict", 0.0
        if split := [w for w in words if 0 < sum(labels[p] != IGNORE_INDEX for p in w) < len(w)]:
            return (f"a word of {len(split[0])} pieces at positions {split[0]} is predicted only in part: "
                    f"spans are whole words"), 0.0
        if len(chosen) > budget:
            return (f"{len(chosen)} predicted tokens in {sum(map(len, words))} real ones: the budget is "
                    f"{budget}"), 0.0
        if fits := [w for w in words if labels[w[0]] == IGNORE_INDEX and len(w) <= budget - len(chosen)]:
            return (f"{len(chosen)} of a budget of {budget} predicted, yet the word at {fits[0]} still fits: "
                    f"keep placing spans until no word fits"), 0.0
        predicted += len(chosen)
        masked += sum(shown[p] == vocab.mask_id for p in chosen)
    if abs(masked / predicted - 0.8) > 0.04:                  # about 5 standard errors at ~3,000 positions
        return (f"[MASK] is shown at {masked / predicted:.0%} of the {predicted:,} predicted positions; "
                f"corrupt() shows it at 80%"), 0.0
    return None, 0.0


# ------------------------------------------------------------------ lesson 05: training
def _trust_ratio_inputs(g, trial):
    weight = _randn(g, 6, 4) * (0 if trial == 2 else 1)      # trial 2: a zero tensor (a fresh bias)
    return weight, _randn(g, 6, 4) * 0.01


def _mask_accuracy(logits, labels):
    """[MASK] accuracy as evaluation.evaluate_pretraining counts it: argmax hits over predicted positions."""
    return (logits.argmax(dim=-1) == labels).double().mean().item()


def _mask_accuracy_inputs(g, trial):
    return _randn(g, 30, 8), torch.randint(0, 8, (30,), generator=g)


def _unigram_accuracy(train_targets, heldout_targets):
    """evaluation.MLMBaselines' unigram guess: the training split's most frequent target (ties: the
    smallest id), scored on the held-out targets."""
    guess = torch.bincount(train_targets).argmax()
    return (heldout_targets == guess).double().mean().item()


def _unigram_inputs(g, trial):
    skewed = lambda n: torch.multinomial(torch.tensor([1.0, 3, 2, 2, 1, 4, 1]), n, True, generator=g)
    return skewed(60), skewed(40)


def _training_step_check(step_fn, g, trial) -> tuple[str | None, float]:
    """Three steps of the learner's training_step and of train.train_step from the same weights on the
    same batches: the losses and the final weights must agree."""
    torch.manual_seed(trial)
    cfg = CHECK_CONFIG.replace(classifier_dropout_prob=0.0)
    models = [AlbertForPretraining(cfg, sentence_task="sop") for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    optims = [make_optimizer("adamw", m, lr=0.05) for m in models]
    schedules = [warmup_linear_decay(o, warmup_steps=1, total_steps=4) for o in optims]
    args = SimpleNamespace(clip_norm=0.5, objective="sop")   # a small clip, so clipping matters
    for step in range(3):
        batch = _pretraining_batch(g, cfg)
        yours = step_fn(models[0], batch, optims[0], schedules[0], args.clip_norm)
        theirs = train_step(models[1], models[1], [batch], optims[1], schedules[1], args)["loss"]
        if (problem := difference(yours, theirs)) is not None:
            return f"step {step + 1}: the loss differs: {problem}", 0.0
    theirs = dict(models[1].named_parameters())
    for name, p in models[0].named_parameters():
        if (problem := difference(p, theirs[name])) is not None:
            return f"after 3 steps the losses agree but {name} differs: {problem}", 0.0
    return None, 0.0


def _pretraining_batch(g, cfg: AlbertConfig) -> dict:
    B, N = 4, 9
    ids = torch.randint(5, cfg.vocab_size, (B, N), generator=g)
    ids[:, 0], ids[:, -1] = CLS_ID, SEP_ID
    mask = torch.ones(B, N, dtype=torch.long)
    mask[1, 6:] = 0
    labels = torch.full((B, N), IGNORE_INDEX)
    labels[:, 2:4] = torch.randint(5, cfg.vocab_size, (B, 2), generator=g)
    return {"input_ids": ids * mask, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask,
            "mlm_labels": labels, "sentence_labels": torch.randint(0, 2, (B,), generator=g)}


def _mlm_loss(logits, labels):
    """AlbertForPretraining's masked-LM loss: cross-entropy summed over the predicted positions (labels not
    IGNORE_INDEX), divided by how many there are."""
    predicted = labels != IGNORE_INDEX
    return F.cross_entropy(logits[predicted].float(), labels[predicted], reduction="sum") / predicted.sum()


def _mlm_loss_inputs(g, trial):
    B, N, V = 3, 6, 7
    labels = torch.full((B, N), IGNORE_INDEX)
    for row, count in enumerate((1, 4, 2)):                   # rows predict different numbers of tokens
        at = torch.randperm(N, generator=g)[:count]
        labels[row, at] = torch.randint(0, V, (count,), generator=g)
    return _randn(g, B, N, V) * 2, labels


def _mean_of_row_means(logits, labels):
    rows = [F.cross_entropy(lg[lb != IGNORE_INDEX], lb[lb != IGNORE_INDEX]) for lg, lb in zip(logits, labels)]
    return torch.stack(rows).mean()


def _lamb_update(w, g, m, v, lr, weight_decay, adapt):
    """optim.Lamb's step on one tensor w with gradient g and moments m, v: (new w, new m, new v)."""
    p = nn.Parameter(w.clone())
    optimizer = Lamb([dict(params=[p], weight_decay=weight_decay, layer_adaptation=adapt)], lr=lr)
    optimizer.state[p] = {"exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    p.grad = g.clone()
    optimizer.step()
    state = optimizer.state[p]
    return p.detach(), state["exp_avg"], state["exp_avg_sq"]


def _lamb_inputs(g, trial):
    w, grad = _randn(g, 5, 4).double(), _randn(g, 5, 4).double() * 0.1
    m, v = (torch.zeros_like(w), torch.zeros_like(w)) if trial == 0 else (grad * 0.5, grad ** 2 * 0.3)
    decay, adapt = ((0.1, True), (0.0, False), (0.1, True))[trial % 3]     # trial 1: a LayerNorm or bias
    return w, grad, m, v, 0.1, decay, adapt


def _lamb_variant(w, g, m, v, lr, weight_decay, adapt, correct=False, decoupled=False, always_adapt=False,
                  b1=0.9, b2=0.999, eps=1e-6):
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    m_hat, v_hat = (m / (1 - b1), v / (1 - b2)) if correct else (m, v)      # step 1's bias correction
    u = m_hat / (v_hat.sqrt() + eps) + (0 if decoupled else weight_decay * w)
    if adapt or always_adapt:
        u = u * trust_ratio(w, u)
    return w - lr * u - (lr * weight_decay * w if decoupled else 0), m, v


def _decay_exclusion(excluded_fn, g, trial) -> tuple[str | None, float]:
    """The learner's excluded(name) on every parameter of a model, against optim.param_groups' split."""
    model = (AlbertForPretraining(CHECK_CONFIG, sentence_task="sop"),
             AlbertForSequenceClassification(CHECK_CONFIG, 3),
             AlbertForPretraining(CHECK_CONFIG.replace(embedding_size=12, embedding_projection=False)),
             )[trial % 3]
    _, no_decay = param_groups(model, weight_decay=0.01)
    package = {id(p) for p in no_decay["params"]}
    for name, p in model.named_parameters():
        yours = excluded_fn(name)
        if not isinstance(yours, bool):
            return f"excluded({name!r}) returned {_short(yours)}, not True or False", 0.0
        if yours != (id(p) in package):
            return (f"{name}: yours {'excludes it from' if yours else 'applies'} weight decay and the trust "
                    f"ratio, the package {'excludes it' if not yours else 'applies them'}"), 0.0
    return None, 0.0


def _package_lr_factor(step: int, warmup: int, total: int) -> float:
    """optim.warmup_linear_decay's multiplier of the peak learning rate at `step`."""
    return warmup_linear_decay(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0), warmup,
                               total).lr_lambdas[0](step)


def _lr_factor_schedule(factor_fn, g, trial) -> tuple[str | None, float]:
    """The learner's lr_factor(step, warmup, total) at every step, against optim.warmup_linear_decay's."""
    warmup, total = ((10, 50), (0, 20), (7, 9))[trial % 3]
    for step in range(total + 1):
        yours, theirs = factor_fn(step, warmup, total), _package_lr_factor(step, warmup, total)
        if (problem := difference(float(yours), float(theirs))) is not None:
            return f"warmup {warmup}, total {total}, step {step}: {problem}", 0.0
    return None, 0.0


def _training_loop_check(loop_fn, g, trial) -> tuple[str | None, float]:
    """The learner's loop and train.pretrain from the same seed on the same data: the same training losses
    step by step, and held-out evaluations at the same steps with the same numbers."""
    cfg = CHECK_CONFIG.replace(vocab_size=30)
    # 7 steps, evaluated at steps 3, 6 and 7 (trial 1: at 4 and 7)
    args = TrainArgs(objective="mlm", steps=7, batch_size=8, lr=0.05, warmup=2, optimizer="adamw",
                     clip_norm=0.5, eval_every=3 + trial % 2, checkpoint_every=0, seed=trial)
    train_data = permutation_chains(64, cfg.vocab_size, length=10, seed=trial)
    valid_data = permutation_chains(24, cfg.vocab_size, length=10, seed=100 + trial)
    theirs = pretrain(cfg, args, train_data, valid_data, progress=False).history
    torch.manual_seed(args.seed)                      # what pretrain does before it builds the model
    model = AlbertForPretraining(cfg, sentence_task=None)
    optimizer = make_optimizer(args.optimizer, model, args.lr, args.weight_decay)

    def step(model, batch, optimizer, scheduler, clip_norm):
        return train_step(model, model, [batch], optimizer, scheduler, SimpleNamespace(clip_norm=clip_norm,
                                                                                       objective="mlm"))["loss"]

    def evaluate(model, data):
        return summary_record(evaluate_pretraining(model, data, max_examples=args.eval_examples,
                                                   batch_size=2 * args.batch_size))

    yours = loop_fn(model, optimizer, _package_lr_factor, train_data, valid_data, args, step, evaluate)
    if not isinstance(yours, list) or not all(isinstance(r, dict) and "step" in r for r in yours):
        return "it must return the history: a list of records, dicts with a 'step'", 0.0
    for split, keys in (("train", ("loss",)), ("valid", ("mlm_loss", "mask_accuracy"))):
        mine = [r for r in yours if r.get("split") == split]
        package = [r for r in theirs if r["split"] == split]
        if [r["step"] for r in mine] != [r["step"] for r in package]:
            return (f"its {split!r} records are at steps {[r['step'] for r in mine]}, the package's at "
                    f"{[r['step'] for r in package]}"), 0.0
        for a, b in zip(mine, package):
            for key in keys:
                if (problem := difference(float(a.get(key, math.nan)), float(b[key]))) is not None:
                    return f"step {b['step']}: {split} {key}: {problem}", 0.0
    return None, 0.0


# ------------------------------------------------------------------ lesson 06, 07 and 10
def _transition_inputs(g, trial):
    before = _randn(g, 2, 5, 8).double()
    after = before * 3 if trial == 2 else _randn(g, 2, 5, 8).double()    # trial 2: parallel vectors, angle 0
    return before, after


def _cosine_distance(before, after):
    return (after - before).norm(dim=-1), 1 - F.cosine_similarity(after, before, dim=-1)


def _classifier_inputs(g, trial):
    batch = _pretraining_batch(g, CHECK_CONFIG)
    return batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]


def _unpooled(ref, ids, types, mask):
    return ref.classifier(ref.albert(ids, types, mask).last_hidden_state[:, 0])


def _online_inputs(g, trial):
    N, M, d = 5, 11, 4                          # M not a multiple of the block: the last block is short
    return _randn(g, N, d), _randn(g, M, d) * 2, _randn(g, M, d), 4


def _full_softmax_attention(q, k, v, block):
    """The reference: plain softmax(q k^T / sqrt(d)) v (the package's math_attention), one head."""
    attend = torch.ones(1, 1, 1, k.shape[0], dtype=torch.bool)
    return math_attention(q[None, None], k[None, None], v[None, None], attend)[0, 0]


def _online_variant(q, k, v, block, rescale=True, normalise=True):
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full((q.shape[0], 1), -math.inf)
    l, acc = torch.zeros(q.shape[0], 1), torch.zeros_like(q)
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T * scale
        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        p, alpha = (s - m_new).exp(), (m - m_new).exp() if rescale else torch.ones_like(m)
        l, acc, m = l * alpha + p.sum(-1, keepdim=True), acc * alpha + p @ v[start:start + block], m_new
    return acc / l if normalise else acc


TRITON_BLOCK = 16           # the Triton piece's tiles (tl.dot wants sides of at least 16)
LOG2E = math.log2(math.e)


def _triton_inputs(g, trial):
    N, d = 3 * TRITON_BLOCK, 16                 # three query tiles, three key tiles
    return _randn(g, N, d), _randn(g, N, d) * 2, _randn(g, N, d)


def _triton_online_softmax(kernel, g, trial) -> tuple[str | None, float]:
    """Launch the learner's @triton.jit kernel on one head and compare its output with the package's kernel,
    minialbert.kernels.fused_attention, on the same tiles: in Triton's interpreter on the CPU where the
    kernels are interpreted (no GPU), compiled on the GPU otherwise, float32 products in full float32 in
    both. The kernel's arguments: Q, K, V, O (N, d) float32, n_keys, qk_scale = log2(e) / sqrt(d), and the
    constants HEAD_DIM, BLOCK_M, BLOCK_N; one program per tile of BLOCK_M queries."""
    # triton only here: lesson 10 imports it after choosing the interpreter or a GPU
    from triton import knobs
    from triton.runtime.errors import InterpreterError

    from ..kernels import INTERPRET, fused_attention

    if not callable(getattr(kernel, "fn", None)):
        return "it is not a Triton kernel: put @triton.jit above its def", 0.0
    if not INTERPRET and (stub := re.search(r"raise NotImplementedError\((['\"])(.*?)\1\)", kernel.src)):
        raise NotImplementedError(stub.group(2))        # a compiled kernel cannot raise: its stub says it
    q, k, v = inputs = _triton_inputs(g, trial)
    device = "cpu" if INTERPRET else "cuda"
    (N, d), out = q.shape, torch.zeros_like(q, device=device)
    try:
        with knobs.language.scope():
            knobs.language.fp32_default = "ieee"        # a GPU's default for float32 tl.dot is tf32
            kernel[(N // TRITON_BLOCK,)](*(t.to(device) for t in (q, k, v)), out, N, LOG2E / math.sqrt(d),
                                         HEAD_DIM=d, BLOCK_M=TRITON_BLOCK, BLOCK_N=TRITON_BLOCK)
    except InterpreterError as e:       # the interpreter wraps what the kernel raised: say that instead
        raise (e.__cause__ or e) from None
    theirs = fused_attention(*(t.to(device)[None, None] for t in (q, k, v)), block_m=TRITON_BLOCK,
                             block_n=TRITON_BLOCK)[0, 0]
    out, theirs = out.cpu(), theirs.cpu()
    if (problem := difference(out, theirs)) is not None:
        return problem + _mistake(PIECES["online_softmax_triton"], out, inputs), 0.0
    return None, _largest(out, theirs)


def _softmax_attention_scaled(q, k, v, scale):
    return torch.softmax(q @ k.T * scale, dim=-1) @ v



# ------------------------------------------------------------------ lessons 08 and 09
def _cross_inputs(g, trial):
    head = nn.Linear(CHECK_CONFIG.hidden_size, 2)
    with torch.no_grad():
        head.weight.copy_(_randn(g, 2, CHECK_CONFIG.hidden_size))
        head.bias.copy_(_randn(g, 2) * (trial + 1))          # a bias that grows: a head leaning to one class
    return head, _randn(g, 64, CHECK_CONFIG.hidden_size), torch.randint(0, 2, (64,), generator=g)


def _flipped_classes(head, pooled, labels):
    accuracy, share_1 = head_on_pairs(head, pooled, labels)
    return 1 - accuracy, 1 - share_1


def _share_of_class_0(head, pooled, labels):
    accuracy, share_1 = head_on_pairs(head, pooled, labels)
    return accuracy, 1 - share_1


def _table2_configs(g, trial):
    """Trial 0: BERT-large (nothing shared, no projection); 1: ALBERT-xxlarge (all shared); 2: a random small
    config sharing only attention or only the FFN."""
    if trial < 2:
        return (AlbertConfig.preset(("bert-large", "albert-xxlarge")[trial]),)
    sharing = ("attention", "ffn")[int(torch.randint(0, 2, (1,), generator=g))]
    E, heads, L = (int(x) for x in torch.randint(2, 9, (3,), generator=g))
    return (AlbertConfig(vocab_size=int(torch.randint(50, 500, (1,), generator=g)), embedding_size=E * 4,
                         hidden_size=heads * 8, num_layers=L, num_heads=heads, intermediate_size=heads * 32,
                         sharing=sharing),)


def _layer_parameters(cfg: AlbertConfig) -> int:
    """One layer's attention and FFN parameters, as costs.parameter_breakdown counts them."""
    H, F_ = cfg.hidden_size, cfg.intermediate_size
    return 4 * (H * H + H) + 2 * H + 2 * H * F_ + F_ + H + 2 * H


def _every_layer_stored(cfg: AlbertConfig) -> int:
    parts = parameter_breakdown(cfg)
    return sum(parts.values()) - parts["attention"] - parts["ffn"] + cfg.num_layers * _layer_parameters(cfg)


def _without_position_tables(cfg: AlbertConfig) -> int:
    return count_parameters(cfg) - (cfg.max_position_embeddings + cfg.type_vocab_size) * cfg.embedding_size


def _unfactorized(cfg: AlbertConfig) -> int:
    parts = parameter_breakdown(cfg)
    V, P, T, H = cfg.vocab_size, cfg.max_position_embeddings, cfg.type_vocab_size, cfg.hidden_size
    return sum(parts.values()) - parts["embeddings"] - parts["projection"] + (V + P + T) * H + 2 * H

PIECES: dict[str, Piece] = {p.name: p for p in (
    Piece("embedding_parameters", "function", _embedding_parameters,
          lambda g, trial: tuple(int(n) for n in torch.randint(2, 300, (3,), generator=g)),
          mistakes=(("V x H, the table without factorization", lambda V, E, H: V * H),
                    ("V x E + E x H without the projection's H biases", lambda V, E, H: V * E + E * H))),
    Piece("factorized_embedding", "module", lambda cfg: _eval(FactorizedEmbedding(cfg)), _embedding_inputs),
    Piece("split_heads", "function", split_heads, lambda g, trial: (_randn(g, 2, 5, 12), 3),
          mistakes=(("reshaping to (B, h, N, d) directly instead of (B, N, h, d) then transposing",
                     lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1)),)),
    Piece("merge_heads", "function", merge_heads, lambda g, trial: (_randn(g, 2, 3, 5, 4),),
          mistakes=(("reshaping (B, h, N, d) to (B, N, H) without transposing h and N back first",
                     lambda x: x.reshape(x.shape[0], x.shape[2], -1)),)),
    Piece("attention", "function", math_attention, _attention_inputs,
          mistakes=(("leaving out the 1/sqrt(d) scale", lambda *a: _attention_variant(*a, scale=False)),
                    ("not masking the padded keys", lambda *a: _attention_variant(*a, mask=False)),
                    ("a softmax over the queries (dim=-2) instead of the keys",
                     lambda *a: _attention_variant(*a, dim=-2)))),
    Piece("layer", "module", lambda cfg: _eval(TransformerLayer(cfg)), _layer_inputs,
          rename=(("attention.LayerNorm.", "attention_norm."), ("attention.", ""),
                  ("feed_forward.LayerNorm.", "ffn_norm."), ("feed_forward.", "")),
          mistakes=(("a pre-LN layer (LayerNorm before each block) instead of post-LN",
                     lambda ref, *a: _layer_variant(ref, *a, pre_ln=True)),
                    ("the exact erf GELU instead of ALBERT's tanh approximation",
                     lambda ref, *a: _layer_variant(ref, *a, act="erf")),
                    ("leaving out the residual connections",
                     lambda ref, *a: _layer_variant(ref, *a, residual=False)))),
    Piece("shared_encoder", "module", lambda cfg: _eval(Encoder(cfg)), _layer_inputs,
          rename=(("groups.0.0.", "layer."),),
          output=lambda out: out[0],
          mistakes=(("applying the layer once instead of num_layers times",
                     lambda ref, x, attend: ref.groups[0][0](x, attend)),)),
    Piece("mlm_head", "module", lambda cfg: _eval(MaskedLMHead(cfg, nn.Embedding(cfg.vocab_size,
                                                                                cfg.embedding_size))),
          lambda g, trial: (_randn(g, 3, 5, CHECK_CONFIG.hidden_size),),
          build=lambda cls, cfg, ref: cls(cfg, nn.Embedding(cfg.vocab_size, cfg.embedding_size)),
          rename=(("decoder_weight", "word_embeddings.weight"),),
          mistakes=(("the exact erf GELU instead of the tanh approximation",
                     lambda ref, x: _mlm_head_variant(ref, x, act="erf")),
                    ("leaving out the LayerNorm(E)", lambda ref, x: _mlm_head_variant(ref, x, norm=False)))),
    Piece("sentence_loss", "function", _sentence_loss, _sentence_loss_inputs,
          mistakes=(("the loss summed over the batch instead of averaged",
                     lambda p, y, head: F.cross_entropy(head(p), y, reduction="sum")),)),
    # lesson 04
    Piece("ngram_probabilities", "function", ngram_probabilities, lambda g, trial: (trial + 2,),
          mistakes=(("p(n) proportional to n (long spans favoured)",
                     lambda n: [k / sum(range(1, n + 1)) for k in range(1, n + 1)]),
                    ("equal probabilities", lambda n: [1 / n] * n))),
    Piece("whole_words", "function", whole_words, _whole_words_inputs,
          mistakes=(("counting the special tokens as words",
                     lambda ids, vocab: [[p] for p in range(len(ids))]),)),
    Piece("corrupt", "property", _corrupt_shares, lambda g, trial: ()),
    Piece("sop_pair", "function", _sop_pair, _pair_inputs,
          mistakes=(("label 0 for the swapped order (the package: 1 = swapped)",
                     lambda a, b, o, swap: (b, a, 0) if swap else (a, b, 1)),)),
    Piece("nsp_pair", "function", _nsp_pair, _pair_inputs,
          mistakes=(("label 0 for a random B (the package: 1 = B from another document)",
                     lambda a, b, o, r: (a, o, 0) if r else (a, b, 1)),
                    ("swapping A and B (that is SOP's negative, not NSP's)",
                     lambda a, b, o, r: (b, a, 1) if r else (a, b, 0)))),
    Piece("mask_budget", "function", _package_budget, _budget_inputs,
          mistakes=(("rounding without the minimum of one token", lambda n, rate: round(n * rate)),
                    ("truncating with int() instead of rounding", lambda n, rate: int(n * rate)))),
    Piece("ngram_draw", "property", _ngram_draw_shares, lambda g, trial: ()),
    Piece("span_placement", "property", _span_placement, lambda g, trial: ()),
    # lesson 05
    Piece("trust_ratio", "function", trust_ratio, _trust_ratio_inputs,
          mistakes=(("the inverse ratio ||u|| / ||w||",
                     lambda w, u: torch.where((w.norm() > 0) & (u.norm() > 0), u.norm() / w.norm(), 1.0)),)),
    Piece("mask_accuracy", "function", _mask_accuracy, _mask_accuracy_inputs),
    Piece("unigram_accuracy", "function", _unigram_accuracy, _unigram_inputs,
          mistakes=(("guessing the held-out split's most frequent token (a baseline may read only the "
                     "training split)", lambda train, held: _unigram_accuracy(held, held)),)),
    Piece("training_step", "property", _training_step_check, lambda g, trial: ()),
    Piece("mlm_loss", "function", _mlm_loss, _mlm_loss_inputs,
          mistakes=(("averaging over every position (the unpredicted ones counted as zero loss)",
                     lambda lg, lb: F.cross_entropy(lg.flatten(0, 1), lb.flatten(), reduction="sum")
                     / lb.numel()),
                    ("the mean of each sequence's mean (a sequence with one prediction weighs as much as one "
                     "with four)", _mean_of_row_means))),
    Piece("lamb_update", "function", _lamb_update, _lamb_inputs,
          mistakes=(("Adam's bias correction (the official ALBERT code has none)",
                     lambda *a: _lamb_variant(*a, correct=True)),
                    ("decoupled weight decay outside the trust ratio (AdamW's way, not LAMB's)",
                     lambda *a: _lamb_variant(*a, decoupled=True)),
                    ("the trust ratio applied to a tensor excluded from it (a LayerNorm or bias)",
                     lambda *a: _lamb_variant(*a, always_adapt=True)))),
    Piece("decay_exclusion", "property", _decay_exclusion, lambda g, trial: ()),
    Piece("lr_factor", "property", _lr_factor_schedule, lambda g, trial: ()),
    Piece("training_loop", "property", _training_loop_check, lambda g, trial: ()),
    # lesson 06
    Piece("layer_transition", "function", transition, _transition_inputs,
          mistakes=(("1 - cosine instead of the angle in degrees", _cosine_distance),
                    ("the angle in radians",
                     lambda b, a: (transition(b, a)[0], torch.deg2rad(transition(b, a)[1]))))),
    # lesson 07
    Piece("classifier", "module", lambda cfg: _eval(AlbertForSequenceClassification(cfg, 3)),
          _classifier_inputs, build=lambda cls, cfg, ref: cls(cfg, 3), output=lambda out: out.logits,
          mistakes=(("reading [CLS]'s last hidden state without the pooler (dense + tanh)", _unpooled),)),
    # lesson 08
    Piece("cross_evaluation", "function", head_on_pairs, _cross_inputs,
          mistakes=(("reading the head's class 1 as the other task's class 0 (the classes crossed)",
                     _flipped_classes),
                    ("the share of pairs put in class 0 instead of class 1", _share_of_class_0))),
    # lesson 09
    Piece("table2_parameters", "function", count_parameters, _table2_configs,
          mistakes=(("storing every layer's weights although they are shared", _every_layer_stored),
                    ("leaving out the position and token-type tables", _without_position_tables),
                    ("a V x H embedding table, as if E = H (no factorization)", _unfactorized))),
    # lesson 10
    Piece("online_softmax", "function", _full_softmax_attention, _online_inputs,
          mistakes=(("not rescaling the running sum and accumulator when the maximum grows",
                     lambda *a: _online_variant(*a, rescale=False)),
                    ("not dividing the accumulator by the running sum at the end",
                     lambda *a: _online_variant(*a, normalise=False)))),
    Piece("online_softmax_triton", "property", _triton_online_softmax, lambda g, trial: (),
          mistakes=(("not rescaling the running sum and accumulator when the maximum grows",
                     lambda q, k, v: _online_variant(q, k, v, TRITON_BLOCK, rescale=False)),
                    ("tl.exp instead of tl.exp2 (qk_scale holds log2(e): the scores are in base 2)",
                     lambda q, k, v: _softmax_attention_scaled(q, k, v, LOG2E / math.sqrt(q.shape[-1]))),
                    ("leaving out qk_scale",
                     lambda q, k, v: _softmax_attention_scaled(q, k, v, 1 / LOG2E)))),
)}


def _eval(module: nn.Module) -> nn.Module:
    return module.eval()


def _randomize(module: nn.Module, g: torch.Generator) -> None:
    """Every parameter random (LayerNorm scales and biases too), so that no mix-up hides behind 1s and 0s."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)


# ------------------------------------------------------------------ comparing
def difference(yours, theirs) -> str | None:
    """None when `yours` matches the package's output `theirs`, else what differs, in words."""
    if isinstance(theirs, torch.Tensor):
        if not isinstance(yours, torch.Tensor):
            return f"it returns a {type(yours).__name__}, the package's returns a tensor"
        if tuple(yours.shape) != tuple(theirs.shape):
            return f"shape {tuple(yours.shape)}, the package's is {tuple(theirs.shape)}"
        yours, theirs = yours.detach().double(), theirs.detach().double()
        off = ~torch.isclose(yours, theirs, rtol=RTOL, atol=ATOL, equal_nan=True)
        if not off.any():
            return None
        if theirs.dim() == 0:
            return f"yours {yours.item():.4g}, the package's {theirs.item():.4g}"
        at = [int(i) for i in off.nonzero()[0]]
        return (f"values differ at {at}: yours {yours[tuple(at)].item():.4g}, the package's "
                f"{theirs[tuple(at)].item():.4g} ({int(off.sum())} of {off.numel()} values differ, by up to "
                f"{(yours - theirs).abs().nan_to_num(math.inf).max().item():.2g})")
    if isinstance(theirs, tuple) and theirs and all(isinstance(t, torch.Tensor) for t in theirs):
        if not isinstance(yours, (tuple, list)) or len(yours) != len(theirs):
            return f"it returns {type(yours).__name__}, the package's a tuple of {len(theirs)} tensors"
        for k, (mine, package) in enumerate(zip(yours, theirs)):
            if (problem := difference(mine, package)) is not None:
                return f"output {k + 1} of {len(theirs)}: {problem}"
        return None
    if (floats := _floats(theirs)) is not None:          # float results: equal up to rounding
        if (mine := _floats(yours, strict=False)) is None:
            return f"it returns {_short(yours)}, the package's {_short(theirs)}"
        return difference(mine, floats)
    if yours != theirs:                                    # everything else (ints, lists of ids): exactly
        return f"yours gives {_short(yours)}, the package's {_short(theirs)}"
    return None


def _floats(x, strict: bool = True) -> torch.Tensor | None:
    """A float, a 0-dim tensor or a list of numbers with a float in it, as a float64 tensor; else None
    (strict=False: any number or list of numbers)."""
    numbers = x if isinstance(x, (list, tuple)) else [x]
    if not numbers or not all(isinstance(v, (int, float, torch.Tensor)) and not isinstance(v, bool)
                              and getattr(v, "ndim", 0) == 0 for v in numbers):
        return None
    if strict and not any(isinstance(v, float) or isinstance(v, torch.Tensor) and v.is_floating_point()
                          for v in numbers):
        return None
    values = torch.tensor([float(v) for v in numbers], dtype=torch.float64)
    return values if isinstance(x, (list, tuple)) else values[0]


def _short(x, limit: int = 80) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _largest(yours, theirs) -> float:
    if isinstance(theirs, tuple):
        return max((_largest(y, t) for y, t in zip(yours, theirs)), default=0.0)
    if not isinstance(theirs, torch.Tensor) or not theirs.numel():
        return 0.0
    return (yours.detach().double() - theirs.detach().double()).abs().max().item()


def _learner_name(name: str, rename: tuple) -> str:
    """A package parameter's name as the learner's module calls it."""
    for old, new in rename:
        if name.startswith(old):
            return new + name[len(old):]
    return name


def _load_package_weights(mine: nn.Module, package: nn.Module, rename: tuple) -> str | None:
    """Copy the package module's weights into the learner's by name; None, or what does not fit."""
    theirs = {_learner_name(n, rename): p for n, p in package.named_parameters()}
    yours = dict(mine.named_parameters())
    if missing := sorted(set(theirs) - set(yours)):
        return (f"your module has no parameter {', '.join(missing)} "
                f"(its parameters: {', '.join(yours) or 'none'})")
    if extra := sorted(set(yours) - set(theirs)):
        return f"your module has parameters the package's has not: {', '.join(extra)}"
    for name, p in theirs.items():
        if yours[name].shape != p.shape:
            return f"parameter {name} has shape {tuple(yours[name].shape)}, the package's {tuple(p.shape)}"
    with torch.no_grad():
        for name, p in theirs.items():
            yours[name].copy_(p)
    return None


def _mistake(piece: Piece, yours, inputs: tuple, package=None) -> str:
    """'; that is what <mistake> gives' when the wrong output matches a known mistake's, else ''."""
    for what, variant in piece.mistakes:
        with torch.no_grad():
            wrong = variant(package, *inputs) if package is not None else variant(*inputs)
        if difference(yours, wrong) is None:
            return f"; that is what {what} gives"
    return ""


def _trial_function(piece: Piece, fn: Callable, g: torch.Generator, trial: int) -> tuple[str | None, float]:
    inputs = piece.inputs(g, trial)
    theirs = piece.reference(*inputs)
    yours = fn(*inputs)
    if (problem := difference(yours, theirs)) is not None:
        return problem + _mistake(piece, yours, inputs), 0.0
    return None, _largest(yours, theirs)


def _trial_module(piece: Piece, cls: type, g: torch.Generator, trial: int) -> tuple[str | None, float]:
    package = piece.reference(CHECK_CONFIG)
    _randomize(package, g)
    mine = piece.build(cls, CHECK_CONFIG, package) if piece.build else cls(CHECK_CONFIG)
    if not isinstance(mine, nn.Module):
        return f"it builds a {type(mine).__name__}, not an nn.Module", 0.0
    if (problem := _load_package_weights(mine, package, piece.rename)) is not None:
        return problem, 0.0
    mine.eval()
    inputs = piece.inputs(g, trial)
    theirs, yours = piece.output(package(*inputs)), mine(*inputs)
    if (problem := difference(yours, theirs)) is not None:
        return problem + _mistake(piece, yours, inputs, package), 0.0
    weights = _randn(g, *theirs.shape)                      # a random loss, so every gradient is tested
    (theirs * weights).sum().backward()
    (yours * weights).sum().backward()
    mine_params = dict(mine.named_parameters())
    for name, p in package.named_parameters():
        name = _learner_name(name, piece.rename)
        if (g_yours := mine_params[name].grad) is None:
            return f"parameter {name} gets no gradient: the output does not use it", 0.0
        if (problem := difference(g_yours, p.grad)) is not None:
            return f"the outputs agree but the gradient of {name} differs: {problem}", 0.0
    return None, _largest(yours, theirs)


def _trial_property(piece: Piece, fn: Callable, g: torch.Generator, trial: int) -> tuple[str | None, float]:
    return piece.reference(fn, g, trial)


TRIAL_KINDS = {"function": _trial_function, "module": _trial_module, "property": _trial_property}


def check(name: str, yours, trials: int = TRIALS, seed: int = 0) -> bool:
    """Check the learner's piece against the package's on `trials` random inputs and print one line.

    Never raises for what the learner wrote (a missing piece, an exception, a wrong shape or value):
    the verdict says it. Returns True when the piece is right.
    """
    if name not in PIECES:
        raise ValueError(f"unknown piece {name!r}; the pieces: {', '.join(PIECES)}")
    piece = PIECES[name]
    g = torch.Generator().manual_seed(seed)
    largest = 0.0
    for trial in range(trials):
        try:
            problem, diff = TRIAL_KINDS[piece.kind](piece, yours, g, trial)
        except NotImplementedError as e:
            print(f"{name}: not written yet ({e}); the rest of the lesson uses the package's version")
            return False
        except Exception as e:                    # the learner's code failed: say how, in one line
            message = str(e).splitlines()[0] if str(e) else ""
            print(f"{name}: wrong: your code raised {type(e).__name__}: {message}; the rest of the lesson "
                  "uses the package's version")
            return False
        if problem is not None:
            print(f"{name}: wrong: {problem}")
            return False
        largest = max(largest, diff)
    print(f"{name}: right: matches the package on {trials} random inputs (largest difference {largest:.1g})")
    return True
