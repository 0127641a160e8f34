"""Lesson 05's pieces: training (the losses, LAMB, the schedule, the step and the loop)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from ...config import IGNORE_INDEX
from ...evaluation import evaluate_pretraining, pretraining_evaluator, summary_record
from ...model import AlbertForPretraining, AlbertForSequenceClassification
from ...optim import NO_DECAY, Lamb, make_optimizer, param_groups, trust_ratio, warmup_linear_decay
from ...train import RunOptions, TrainArgs, pretrain, train_step
from ..experiments.synthetic import permutation_chains
from .checking import CHECK_CONFIG, Piece, difference, pretraining_batch, randn, short
from .mistakes import left_out_operation, pattern


def _trust_ratio_inputs(g, trial):
    weight = randn(g, 6, 4) * (0 if trial == 2 else 1)      # trial 2: a zero tensor (a fresh bias)
    return weight, randn(g, 6, 4) * 0.01


def _mask_accuracy(logits, labels):
    """[MASK] accuracy as evaluation.evaluate_pretraining counts it: argmax hits over predicted positions."""
    return (logits.argmax(dim=-1) == labels).double().mean().item()


def _mask_accuracy_inputs(g, trial):
    return randn(g, 30, 8), torch.randint(0, 8, (30,), generator=g)


def _unigram_accuracy(train_targets, heldout_targets):
    """evaluation.MLMBaselines' unigram guess: the training split's most frequent target (ties: the
    smallest id), scored on the held-out targets."""
    guess = torch.bincount(train_targets).argmax()
    return (heldout_targets == guess).double().mean().item()


def _unigram_inputs(g, trial):
    skewed = lambda n: torch.multinomial(torch.tensor([1.0, 3, 2, 2, 1, 4, 1]), n, True, generator=g)
    return skewed(60), skewed(40)


def _package_step(model, batch, optimizer, scheduler, clip_norm):
    """train.train_step on one batch, called as the lesson's piece is: returns the loss (a float)."""
    args = SimpleNamespace(clip_norm=clip_norm, objective="sop")
    return train_step(model, model, [batch], optimizer, scheduler, args)["loss"]


def _training_step_check(step_fn, g, trial) -> tuple[str | None, float]:
    """Three steps of the learner's training_step and of train.train_step from the same weights on the
    same batches: the losses and the final weights must agree. When they do not, the package's step run
    with one operation left out that gives the learner's result is named (mistakes.left_out_operation)."""
    torch.manual_seed(trial)
    cfg = CHECK_CONFIG.replace(classifier_dropout_prob=0.0)
    start = AlbertForPretraining(cfg, sentence_task="sop").state_dict()

    def build():
        model = AlbertForPretraining(cfg, sentence_task="sop")
        model.load_state_dict(start)
        optimizer = make_optimizer("adamw", model, lr=0.05, weight_decay=0.1)    # a decay that shows
        return model, optimizer, warmup_linear_decay(optimizer, warmup_steps=1, total_steps=4)

    clip_norm = 0.5                                            # a small clip, so clipping matters
    batches = [pretraining_batch(g, cfg) for _ in range(3)]
    (mine, *yours), (package, *theirs) = build(), build()
    losses = []
    for step, batch in enumerate(batches, start=1):
        losses.append(step_fn(mine, batch, *yours, clip_norm))
        if (problem := difference(losses[-1], _package_step(package, batch, *theirs, clip_norm))) is not None:
            return (f"step {step}: the loss differs: {problem}"
                    + left_out_operation(build, batches, losses, mine, clip_norm)), 0.0
    expected = dict(package.named_parameters())
    for name, p in mine.named_parameters():
        if (problem := difference(p, expected[name])) is not None:
            return (f"after 3 steps the losses agree but {name} differs: {problem}"
                    + left_out_operation(build, batches, losses, mine, clip_norm)), 0.0
    return None, 0.0


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
    return randn(g, B, N, V) * 2, labels


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
    w, grad = randn(g, 5, 4).double(), randn(g, 5, 4).double() * 0.1
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


def _package_excluded(name: str) -> bool:
    """optim.param_groups' rule: a parameter whose name holds one of NO_DECAY gets neither weight decay
    nor the trust ratio."""
    return any(part in name for part in NO_DECAY)


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
            return f"excluded({name!r}) returned {short(yours)}, not True or False", 0.0
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
            said = _schedule_pattern(factor_fn, warmup, total)
            return f"warmup {warmup}, total {total}, step {step}: {problem}{said}", 0.0
    return None, 0.0


def _schedule_pattern(factor_fn, warmup: int, total: int) -> str:
    """How the learner's whole schedule relates to the package's (mistakes.pattern over the steps), or ''."""
    try:
        yours = torch.tensor([float(factor_fn(step, warmup, total)) for step in range(total + 1)])
    except Exception:
        return ""
    theirs = torch.tensor([_package_lr_factor(step, warmup, total) for step in range(total + 1)])
    return pattern(yours, theirs, (warmup, total), axes=("step",))


def _training_loop_check(loop_fn, g, trial) -> tuple[str | None, float]:
    """The learner's loop and train.pretrain from the same seed on the same data: the same training losses
    step by step, and held-out evaluations at the same steps with the same numbers."""
    cfg = CHECK_CONFIG.replace(vocab_size=30)
    # 7 steps, evaluated at steps 3, 6 and 7 (trial 1: at 4 and 7)
    args = TrainArgs(objective="mlm", steps=7, batch_size=8, lr=0.05, warmup=2, optimizer="adamw",
                     clip_norm=0.5, eval_every=3 + trial % 2, checkpoint_every=0, seed=trial)
    train_data = permutation_chains(64, cfg.vocab_size, length=10, seed=trial)
    valid_data = permutation_chains(24, cfg.vocab_size, length=10, seed=100 + trial)
    theirs = pretrain(cfg, args, train_data, pretraining_evaluator(valid_data, cfg, args),
                      RunOptions(progress=False)).history
    torch.manual_seed(args.seed)                      # what pretrain does before it builds the model
    model = AlbertForPretraining(cfg, sentence_task=None)
    optimizer = make_optimizer(args.optimizer, model, args.lr, args.weight_decay)

    def evaluate(model, data):
        return summary_record(evaluate_pretraining(model, data, max_examples=args.eval_examples,
                                                   batch_size=2 * args.batch_size))

    yours = loop_fn(model, optimizer, _package_lr_factor, train_data, valid_data, args, _package_step,
                    evaluate)
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


PIECES = (
    Piece("trust_ratio", "function", trust_ratio, _trust_ratio_inputs,
          mistakes=(("the inverse ratio ||u|| / ||w||",
                     lambda w, u: torch.where((w.norm() > 0) & (u.norm() > 0), u.norm() / w.norm(), 1.0)),)),
    Piece("mask_accuracy", "function", _mask_accuracy, _mask_accuracy_inputs,
          sizes=lambda logits, labels: {"M": logits.shape[0]}),
    Piece("unigram_accuracy", "function", _unigram_accuracy, _unigram_inputs,
          mistakes=(("guessing the held-out split's most frequent token (a baseline may read only the "
                     "training split)", lambda train, held: _unigram_accuracy(held, held)),)),
    Piece("training_step", "property", _training_step_check, lambda g, trial: (), package=_package_step),
    Piece("mlm_loss", "function", _mlm_loss, _mlm_loss_inputs,
          mistakes=(("averaging over every position (the unpredicted ones counted as zero loss)",
                     lambda lg, lb: F.cross_entropy(lg.flatten(0, 1), lb.flatten(), reduction="sum")
                     / lb.numel()),
                    ("the mean of each sequence's mean (a sequence with one prediction weighs as much as one "
                     "with four)", _mean_of_row_means)),
          sizes=lambda logits, labels: {"M": int((labels != IGNORE_INDEX).sum())}),
    Piece("lamb_update", "function", _lamb_update, _lamb_inputs,
          mistakes=(("Adam's bias correction (the official ALBERT code has none)",
                     lambda *a: _lamb_variant(*a, correct=True)),
                    ("decoupled weight decay outside the trust ratio (AdamW's way, not LAMB's)",
                     lambda *a: _lamb_variant(*a, decoupled=True)),
                    ("the trust ratio applied to a tensor excluded from it (a LayerNorm or bias)",
                     lambda *a: _lamb_variant(*a, always_adapt=True))),
          inner=(("the weight decay", lambda change, w, g, m, v, lr, decay, adapt:
                  _lamb_update(w, g, m, v, lr, float(change(torch.tensor(decay))), adapt)),)),
    Piece("decay_exclusion", "property", _decay_exclusion, lambda g, trial: (), package=_package_excluded),
    Piece("lr_factor", "property", _lr_factor_schedule, lambda g, trial: (), package=_package_lr_factor),
    Piece("training_loop", "property", _training_loop_check, lambda g, trial: ()),
)
