"""Lesson 05's model is the learner's: `check` keeps each passing piece of lessons 02-04 in a workspace,
learner_model builds ALBERT from it (the package's where a piece is missing or fails), the package's
training loop trains it, and every piece of the learner's is called while it trains."""

import dataclasses
import textwrap
from collections import Counter

import pytest
import torch

from minialbert.config import AlbertConfig
from minialbert.course.experiments.synthetic import permutation_chains
from minialbert.course.learner_model import NAMES, learner_masking, learner_model
from minialbert.course.pieces import check
from minialbert.masking import MaskingVocab
from minialbert.model import PretrainingOutput
from minialbert.optim import make_optimizer, warmup_linear_decay
from minialbert.pretraining_data import collate
from minialbert.train import StepBatches, TrainArgs, train_step

# Lessons 02-04's pieces as a learner writes them in the notebooks (the lessons' solutions).
LEARNER = '''
import math
import random
from itertools import accumulate

import torch
import torch.nn.functional as F
from torch import nn

from minialbert.config import IGNORE_INDEX
from minialbert.masking import corrupt, ngram_probabilities, whole_words
from minialbert.model import TransformerLayer


class MyFactorizedEmbedding(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        E = cfg.embedding_size
        self.word_embeddings = nn.Embedding(cfg.vocab_size, E, padding_idx=cfg.pad_token_id)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, E)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, E)
        self.LayerNorm = nn.LayerNorm(E, eps=cfg.layer_norm_eps)
        self.projection = nn.Linear(E, cfg.hidden_size)

    def forward(self, input_ids, token_type_ids):
        positions = torch.arange(input_ids.shape[1])
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.token_type_embeddings(token_type_ids))
        return self.projection(self.LayerNorm(x))


def embedding_parameters(V, E, H):
    return V * E + E * H + H


def split_heads(x, num_heads):
    B, N, H = x.shape
    return x.view(B, N, num_heads, H // num_heads).transpose(1, 2)


def merge_heads(x):
    B, h, N, d = x.shape
    return x.transpose(1, 2).reshape(B, N, h * d)


def attention(q, k, v, attend):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~attend, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1) @ v


def unscaled_attention(q, k, v, attend):          # the 1/sqrt(d) left out
    scores = q @ k.transpose(-2, -1)
    scores = scores.masked_fill(~attend, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1) @ v


class MyLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, F_ = cfg.hidden_size, cfg.intermediate_size
        self.num_heads = cfg.num_heads
        self.qkv = nn.Linear(H, 3 * H)
        self.dense = nn.Linear(H, H)
        self.attention_norm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
        self.ffn = nn.Linear(H, F_)
        self.ffn_output = nn.Linear(F_, H)
        self.ffn_norm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)

    def forward(self, x, attend):
        q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
        x = self.attention_norm(x + self.dense(merge_heads(attention(q, k, v, attend))))
        return self.ffn_norm(x + self.ffn_output(F.gelu(self.ffn(x), approximate="tanh")))


class MyEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.num_layers = cfg.num_layers
        self.layer = TransformerLayer(cfg)

    def forward(self, x, attend):
        for _ in range(self.num_layers):
            x = self.layer(x, attend)
        return x


class MyMLMHead(nn.Module):
    def __init__(self, cfg, word_embeddings):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.embedding_size)
        self.LayerNorm = nn.LayerNorm(cfg.embedding_size, eps=cfg.layer_norm_eps)
        self.word_embeddings = word_embeddings
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, x):
        x = self.LayerNorm(F.gelu(self.dense(x), approximate="tanh"))
        return x @ self.word_embeddings.weight.T + self.bias


def sentence_loss(pooled, labels, head):
    return F.cross_entropy(head(pooled), labels)


def my_whole_words(input_ids, vocab):
    words, after_special = [], True
    for position, token in enumerate(input_ids):
        if vocab.is_special[token]:
            after_special = True
            continue
        if after_special or vocab.is_word_start[token]:
            words.append([position])
        else:
            words[-1].append(position)
        after_special = False
    return words


def my_ngram_probabilities(max_n):
    weights = [1 / n for n in range(1, max_n + 1)]
    return [w / sum(weights) for w in weights]


def my_corrupt(token, vocab, rng):
    r = rng.random()
    if r < 0.8:
        return vocab.mask_id
    if r < 0.9:
        return vocab.random_ids[rng.randrange(len(vocab.random_ids))]
    return token


def my_mask_budget(n_real, mask_rate):
    return max(1, round(n_real * mask_rate)) if n_real and mask_rate > 0 else 0


def my_draw_ngram(rng, max_ngram):
    return rng.choices(range(1, max_ngram + 1), weights=ngram_probabilities(max_ngram))[0]


def my_ngram_mask(ids, vocab, rng, mask_rate=0.15, max_ngram=3):
    words = my_whole_words(ids, vocab)
    budget = my_mask_budget(sum(map(len, words)), mask_rate)
    specials_before = list(accumulate(vocab.is_special[t] for t in ids))
    segment = [specials_before[w[0]] for w in words]
    free = [True] * len(words)

    def fits(start, n, room):
        return (segment[start] == segment[start + n - 1] and all(free[start:start + n])
                and sum(len(w) for w in words[start:start + n]) <= room)

    def random_start(n, room):
        fitting = [s for s in range(len(words) - n + 1) if fits(s, n, room)]
        return fitting[rng.randrange(len(fitting))] if fitting else None

    masked, labels, n_masked = list(ids), [IGNORE_INDEX] * len(ids), 0
    while n_masked < budget:
        n = my_draw_ngram(rng, max_ngram)
        start = random_start(n, budget - n_masked)
        while start is None and n > 1:
            n -= 1
            start = random_start(n, budget - n_masked)
        if start is None:
            break
        for p in [p for w in words[start:start + n] for p in w]:
            labels[p] = ids[p]
            masked[p] = my_corrupt(ids[p], vocab, rng)
            n_masked += 1
        free[start:start + n] = [False] * n
    return masked, labels


def my_sop_pair(a, b, other, swap):
    return (b, a, 1) if swap else (a, b, 0)


def my_nsp_pair(a, b, other, use_random):
    return (a, other, 1) if use_random else (a, b, 0)


PIECES = {"factorized_embedding": MyFactorizedEmbedding, "embedding_parameters": embedding_parameters,
          "split_heads": split_heads, "merge_heads": merge_heads, "attention": attention, "layer": MyLayer,
          "shared_encoder": MyEncoder, "mlm_head": MyMLMHead, "sentence_loss": sentence_loss,
          "whole_words": my_whole_words, "ngram_probabilities": my_ngram_probabilities,
          "corrupt": my_corrupt, "mask_budget": my_mask_budget, "ngram_draw": my_draw_ngram,
          "span_placement": my_ngram_mask, "sop_pair": my_sop_pair, "nsp_pair": my_nsp_pair}
'''

CFG = AlbertConfig(vocab_size=24, embedding_size=8, hidden_size=16, num_layers=2, num_heads=2,
                   intermediate_size=32, max_position_embeddings=16)
ARGS = TrainArgs(objective="mlm", steps=6, batch_size=8, lr=3e-3, warmup=2, optimizer="lamb", eval_every=0,
                 checkpoint_every=0, seed=0)
CHAIN_VOCAB = MaskingVocab.from_ids([True] * CFG.vocab_size, special_ids=range(5))


def notebook(tmp_path, source: str = LEARNER) -> dict:
    """The learner's notebook: `source` run as __main__ from a file (so their source can be read back)."""
    path = tmp_path / "lesson.py"
    path.write_text(textwrap.dedent(source))
    namespace = {"__name__": "__main__"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A workspace in which the learner's 17 pieces all passed their checks."""
    tmp = tmp_path_factory.mktemp("learner")
    folder = tmp / "my_albert"
    for name, piece in notebook(tmp)["PIECES"].items():
        assert check(name, piece, workspace=folder), name
    return folder


def chains():
    return permutation_chains(64, CFG.vocab_size, 12, seed=0)


def counting(counts: Counter):
    """wrap(name, version): functions that count their calls; classes whose forward counts them."""
    def wrap(name, version):
        if isinstance(version, type):
            forward = version.forward

            def counted(self, *a, **k):
                counts[name] += 1
                return forward(self, *a, **k)
            return type(version.__name__, (version,), {"forward": counted})

        def counted_call(*a, **k):
            counts[name] += 1
            return version(*a, **k)
        return counted_call
    return wrap


def train(model, data, steps=ARGS.steps):
    """The package's training step (train_step) with its optimizer, schedule and batch order: the losses."""
    args = dataclasses.replace(ARGS, steps=steps)
    optimizer = make_optimizer(args.optimizer, model, args.lr, args.weight_decay)
    scheduler = warmup_linear_decay(optimizer, args.warmup, args.steps)
    model.train()
    batches = (collate([data[i] for i in indices]) for indices in StepBatches.for_run(len(data), args))
    return [train_step(model, model, [batch], optimizer, scheduler, args)["loss"] for batch in batches]


def test_check_keeps_a_passing_piece_and_its_imports(workspace, capsys):
    assert sorted(p.stem for p in workspace.glob("*.py")) == sorted(NAMES)
    text = (workspace / "layer.py").read_text()
    assert "class MyLayer(nn.Module):" in text and "import torch.nn.functional as F" in text
    assert "'attention': 'attention'" in text and "'split_heads': 'split_heads'" in text     # CALLS
    masking = (workspace / "span_placement.py").read_text()
    assert "'my_mask_budget': 'mask_budget'" in masking and "from itertools import accumulate" in masking
    assert "IGNORE_INDEX" in masking and "def my_ngram_mask(" in masking


def test_all_pieces_are_the_learners_and_each_is_called_while_the_package_loop_trains(workspace):
    counts = Counter()
    torch.manual_seed(0)
    model, report = learner_model(CFG, workspace, sentence_task=None, wrap=counting(counts))
    assert all(r.yours and not r.why for r in report.rows), str(report)
    assert "17 of 17 are yours" in str(report)
    data = learner_masking(chains(), CHAIN_VOCAB, report.pieces, seed=0)
    losses = train(model, data)
    assert len(losses) == ARGS.steps and all(loss == loss for loss in losses)
    called = {"factorized_embedding", "split_heads", "merge_heads", "attention", "layer", "shared_encoder",
              "mlm_head", "span_placement", "mask_budget", "ngram_draw", "whole_words", "corrupt"}
    assert called <= set(counts), f"not called: {sorted(called - set(counts))}"
    assert counts["layer"] >= ARGS.steps * CFG.num_layers and counts["span_placement"] == len(data)
    assert counts["attention"] == counts["layer"] and counts["shared_encoder"] >= ARGS.steps


def test_the_learners_sentence_loss_is_called_with_a_sentence_task(workspace):
    counts = Counter()
    model, report = learner_model(CFG, workspace, sentence_task="sop", wrap=counting(counts))
    batch = collate([chains()[i] for i in range(4)])
    out = model(**batch, sentence_labels=torch.tensor([0, 1, 0, 1]))
    assert isinstance(out, PretrainingOutput) and out.sentence_loss is not None
    assert counts["sentence_loss"] == 1 and counts["mlm_head"] == 1
    out.loss.backward()
    assert model.embeddings.word_embeddings.weight.grad is not None


def test_a_subtly_wrong_piece_falls_back_and_forced_trains_differently(workspace, tmp_path):
    """Attention without 1/sqrt(d), put in the workspace by hand: reported as failing its check, the model
    uses the package's; forced, the same run gives another loss curve."""
    wrong = tmp_path / "my_albert"
    wrong.mkdir()
    for path in workspace.glob("*.py"):
        (wrong / path.name).write_text(path.read_text())
    text = (wrong / "attention.py").read_text().replace(" / math.sqrt(q.shape[-1])", "")
    assert text != (wrong / "attention.py").read_text()
    (wrong / "attention.py").write_text(text)
    data, cfg = chains(), CFG.replace(initializer_range=0.5)   # scores large enough for the scale to matter
    curves = {}
    for what, folder, force in (("right", workspace, ()), ("fallen back", wrong, ()),
                                ("forced", wrong, ("attention",))):
        torch.manual_seed(0)
        model, report = learner_model(cfg, folder, sentence_task=None, force=force)
        row = next(r for r in report.rows if r.piece == "attention")
        curves[what] = train(model, data)
        if what == "fallen back":
            assert not row.yours and row.why.startswith("fails its check: values differ"), row
            assert "attention" in str(report) and "the package's: fails its check" in str(report)
        if what == "forced":
            assert row.yours and row.why.startswith("fails its check"), row
    assert curves["fallen back"] == pytest.approx(curves["right"], rel=1e-4, abs=1e-5)
    assert max(abs(a - b) for a, b in zip(curves["forced"], curves["right"])) > 0.01, curves


def test_a_failing_then_fixed_piece_leaves_the_fixed_one(tmp_path, capsys):
    ns = notebook(tmp_path)
    folder = tmp_path / "ws"
    assert not check("attention", ns["unscaled_attention"], workspace=folder)
    assert not (folder / "attention.py").exists()
    assert check("attention", ns["attention"], workspace=folder)
    first = (folder / "attention.py").read_text()
    assert not check("attention", ns["unscaled_attention"], workspace=folder)     # a failing one removes it
    assert not (folder / "attention.py").exists()
    assert check("attention", ns["attention"], workspace=folder)
    assert (folder / "attention.py").read_text() == first and "math.sqrt" in first
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[-1].endswith(f"; kept in {folder / 'attention.py'}"), lines
    _, report = learner_model(CFG, folder)
    assert [r.piece for r in report.rows if r.yours] == ["attention"]


def test_without_a_workspace_every_piece_is_the_packages(tmp_path):
    torch.manual_seed(0)
    model, report = learner_model(CFG, tmp_path / "nothing_here", sentence_task=None)
    assert not any(r.yours for r in report.rows) and {r.why for r in report.rows} == {"missing"}
    assert "0 of 17 are yours" in str(report)
    data = learner_masking(chains(), CHAIN_VOCAB, report.pieces, seed=0)
    assert len(train(model, data, steps=2)) == 2


def test_the_package_fallback_is_albert(tmp_path):
    """With no piece of the learner's, the model computes what AlbertForPretraining computes."""
    from minialbert.model import AlbertForPretraining
    torch.manual_seed(0)
    ours, _ = learner_model(CFG, tmp_path / "none", sentence_task=None)
    package = AlbertForPretraining(CFG, sentence_task=None)
    names = {"embeddings.": "albert.embeddings.", "pooler.": "albert.pooler.",
             "encoder.layer.qkv.": "albert.encoder.groups.0.0.attention.qkv.",
             "encoder.layer.dense.": "albert.encoder.groups.0.0.attention.dense.",
             "encoder.layer.attention_norm.": "albert.encoder.groups.0.0.attention.LayerNorm.",
             "encoder.layer.ffn.": "albert.encoder.groups.0.0.feed_forward.ffn.",
             "encoder.layer.ffn_output.": "albert.encoder.groups.0.0.feed_forward.ffn_output.",
             "encoder.layer.ffn_norm.": "albert.encoder.groups.0.0.feed_forward.LayerNorm.",
             "mlm_head.decoder_weight": "albert.embeddings.word_embeddings.weight", "mlm_head.": "mlm_head."}
    theirs = package.state_dict()
    with torch.no_grad():
        for name, p in ours.state_dict(keep_vars=True).items():
            old = next(o for o in names if name.startswith(o))
            p.copy_(theirs[names[old] + name[len(old):]])
    batch = collate([chains()[i] for i in range(4)])
    torch.testing.assert_close(ours(**batch).loss, package(**batch).loss)


def test_masked_predictions_are_what_the_package_scores(workspace):
    """The accuracy pieces read the [MASK] positions: argmax hits there are evaluate_pretraining's."""
    from minialbert.course.learner_model import masked_predictions
    from minialbert.evaluation import evaluate_pretraining
    torch.manual_seed(0)
    model, _ = learner_model(CFG, workspace, sentence_task=None)
    logits, labels = masked_predictions(model, chains(), batch_size=16)
    assert logits.shape == (labels.numel(), CFG.vocab_size)
    package = evaluate_pretraining(model, chains())["mlm"]["mask"]
    assert labels.numel() == package["n"]
    assert (logits.argmax(-1) == labels).double().mean().item() == pytest.approx(package["accuracy"])
