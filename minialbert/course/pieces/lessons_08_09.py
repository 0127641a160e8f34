"""The pieces of lessons 08 and 09: a sentence head read on the other task's pairs, the rule that reads only
the segment lengths, and an arm's interval over its seeds (08); Table 2's parameter count, a whole model's
forward operations, and the rule "A beats B" (09)."""

from __future__ import annotations

import math

import torch
from torch import nn

from ...config import AlbertConfig
from ...costs import count_parameters, forward_flops, parameter_breakdown
from ..experiments.ablation import head_on_pairs
from ..experiments.shortcut_rule import majority_by_cell
from ..verdict import arm_over_seeds, t_quantile, verdict
from .checking import CHECK_CONFIG, Piece, randn


# ------------------------------------------------------------------ lesson 08
def _cross_inputs(g, trial):
    head = nn.Linear(CHECK_CONFIG.hidden_size, 2)
    with torch.no_grad():
        head.weight.copy_(randn(g, 2, CHECK_CONFIG.hidden_size))
        head.bias.copy_(randn(g, 2) * (trial + 1))          # a bias that grows: a head leaning to one class
    return head, randn(g, 64, CHECK_CONFIG.hidden_size), torch.randint(0, 2, (64,), generator=g)


def _flipped_classes(head, pooled, labels):
    accuracy, share_1 = head_on_pairs(head, pooled, labels)
    return 1 - accuracy, 1 - share_1


def _share_of_class_0(head, pooled, labels):
    accuracy, share_1 = head_on_pairs(head, pooled, labels)
    return accuracy, 1 - share_1


def _length_inputs(g, trial):
    """Training pairs (len A, len B) whose label leans on the lengths, label 1 the more frequent overall and
    one cell tied on purpose; held-out pairs in that cell and in cells no training pair fell in."""
    lengths = torch.randint(1, 5, (200, 2), generator=g)
    lean = torch.sigmoid((lengths[:, 0] - lengths[:, 1]).float() + 0.5)          # longer A: more often 1
    labels = (torch.rand(200, generator=g) < lean).long()
    test = torch.cat([torch.randint(1, 6, (60, 2), generator=g), torch.tensor([[9, 9], [7, 7], [2, 8]])])
    tied = torch.tensor([[9, 9], [9, 9]])                                        # one pair of each label
    return torch.cat([lengths, tied]), torch.cat([labels, torch.tensor([0, 1])]), test


def _undecided(train, labels, test) -> torch.Tensor:
    """(E',) bool: the held-out pairs whose cell holds as many training pairs of each label (or none)."""
    counts = {}
    for cell, label in zip(train.tolist(), labels.tolist()):
        counts.setdefault(tuple(cell), [0, 0])[label] += 1
    return torch.tensor([len(set(counts.get(tuple(cell), [0, 0]))) == 1 for cell in test.tolist()])


def _undecided_as_0(train, labels, test):
    return torch.where(_undecided(train, labels, test), 0, majority_by_cell(train, labels, test))


def _least_frequent(train, labels, test):
    decided = ~_undecided(train, labels, test)
    predicted = majority_by_cell(train, labels, test)
    return torch.where(decided, 1 - predicted, predicted)


def _arm_inputs(g, trial):
    """Each seed's accuracy and its own 95% interval: trial 0, three seeds; 1, one seed; 2, five seeds."""
    n = (3, 1, 5)[trial]
    accuracies = (0.52 + 0.02 * randn(g, n)).tolist()
    halves = (0.005 + 0.01 * torch.rand(n, generator=g)).tolist()
    return accuracies, [(a - h, a + h) for a, h in zip(accuracies, halves)]


def _arm(accuracies, intervals):
    """The package's arm (verdict.arm_over_seeds) as (mean, low, high)."""
    arm = arm_over_seeds("arm", [{"accuracy": a, "ci95": list(c)} for a, c in zip(accuracies, intervals)])
    return (arm["value"], *arm["ci95"])


def _arm_variant(accuracies, intervals, z=None, divisor=-1, noise=True):
    """An arm's interval with one thing changed: 1.96 for the t quantile, the spread over n instead of n - 1,
    or without the held-out set's own noise (the seeds' half-widths)."""
    n, mean = len(accuracies), sum(accuracies) / len(accuracies)
    if n == 1:
        return _arm(accuracies, intervals)
    spread = math.sqrt(sum((a - mean) ** 2 for a in accuracies) / (n + divisor))
    between = (z or t_quantile(n - 1)) * spread / math.sqrt(n)
    within = sum((high - low) / 2 for low, high in intervals) / n if noise else 0.0
    half = math.sqrt(between ** 2 + within ** 2)
    return mean, mean - half, mean + half


def _union(accuracies, intervals):
    return sum(accuracies) / len(accuracies), min(c[0] for c in intervals), max(c[1] for c in intervals)


# ------------------------------------------------------------------ lesson 09
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


def _flops_inputs(g, trial):
    """Trial 0: ALBERT-xxlarge (one layer, run 12 times); 1: BERT-large (no projection); 2: a small config
    sharing only one block; each with a sequence length and the positions the MLM head reads."""
    if trial < 2:
        return AlbertConfig.preset(("albert-xxlarge", "bert-large")[trial]), 128, 20
    cfg = _table2_configs(g, trial)[0]
    return cfg, int(torch.randint(8, 65, (1,), generator=g)), int(torch.randint(1, 9, (1,), generator=g))


def _model_flops(cfg, seq_len, predicted):
    """The package's count (costs.forward_flops), all parts added."""
    return sum(forward_flops(cfg, seq_len, predicted).values())


def _flops_variant(cfg, seq_len, predicted, stored=False, scores=True, tied=True, factor=1):
    """The count with one thing changed: each stored block counted once, the N^2 attention term left out,
    the vocabulary scored from H dimensions, or a multiply-add as one operation."""
    parts = forward_flops(cfg, seq_len, predicted)
    N, H, V, L = seq_len, cfg.hidden_size, cfg.vocab_size, cfg.num_layers
    if stored:
        parts["attention"] //= L if cfg.sharing in ("all", "attention") else 1
        parts["ffn"] //= L if cfg.sharing in ("all", "ffn") else 1
    if not scores:
        parts["attention"] -= L * 4 * N * N * H
    if not tied:
        parts["mlm_head"] = predicted * 2 * H * V
    return sum(parts.values()) // factor


def _arms(g, trial):
    """Two arms: trial 0, three seeds each, the intervals apart and the gap beyond both spreads; 1, one seed
    each, apart; 2, three seeds each, apart but the gap within one arm's spread. Which arm leads is drawn."""
    def arm(name, centre, seeds, spread):
        values = [centre + spread * (k / max(seeds - 1, 1) - 0.5) for k in range(seeds)]
        mean = sum(values) / len(values)
        return {"name": name, "value": mean, "ci95": [mean - 0.01, mean + 0.01], "seeds": values}
    high = 0.6 + 0.05 * float(torch.rand(1, generator=g))
    low = 0.55 - 0.05 * float(torch.rand(1, generator=g))
    seeds, spreads = ((3, (0.004, 0.006)), (1, (0.0, 0.0)), (3, (0.004, 0.3)))[trial]
    arms = [arm("albert-x", high, seeds, spreads[0]), arm("albert-y", low, seeds, spreads[1])]
    return tuple(arms[::-1] if torch.rand(1, generator=g) < 0.5 else arms)


def _beats(a, b):
    """The package's verdict("beats", a, b): its label."""
    return verdict("beats", a, b).label


def _beats_variant(a, b, spread=True, one_seed_hint=True):
    """The rule with one thing changed: the seed spread ignored, or a lead with one seed called a finding."""
    lead, trail = (a, b) if a["value"] >= b["value"] else (b, a)
    apart = lead["ci95"][0] > trail["ci95"][1]
    if one_seed_hint and min(len(a["seeds"]), len(b["seeds"])) == 1:
        return _beats(a, b)
    widest = max(max(arm["seeds"]) - min(arm["seeds"]) for arm in (a, b)) if spread else 0.0
    return f"{lead['name']} beats {trail['name']}" if apart and lead["value"] - trail["value"] > widest \
        else "not separated"


PIECES = (
    # lesson 08
    Piece("cross_evaluation", "function", head_on_pairs, _cross_inputs,
          mistakes=(("reading the head's class 1 as the other task's class 0 (the classes crossed)",
                     _flipped_classes),
                    ("the share of pairs put in class 0 instead of class 1", _share_of_class_0))),
    Piece("length_rule", "function", majority_by_cell, _length_inputs,
          mistakes=(("answering 0 in a tied cell or one no training pair fell in, instead of the label seen "
                     "most often overall", _undecided_as_0),
                    ("the label seen least often in each cell", _least_frequent),
                    ("reading each pair as (len B, len A)",
                     lambda train, labels, test: majority_by_cell(train.flip(1), labels, test)))),
    Piece("arm_interval", "function", _arm, _arm_inputs,
          mistakes=(("the union of the seeds' own intervals, which is no 95% interval of anything", _union),
                    ("1.96 in place of Student's t with n - 1 degrees of freedom",
                     lambda a, c: _arm_variant(a, c, z=1.96)),
                    ("the seeds' spread divided by n instead of n - 1",
                     lambda a, c: _arm_variant(a, c, divisor=0)),
                    ("leaving out the held-out set's own noise (the seeds' half-widths)",
                     lambda a, c: _arm_variant(a, c, noise=False)))),
    # lesson 09
    Piece("table2_parameters", "function", count_parameters, _table2_configs,
          mistakes=(("storing every layer's weights although they are shared", _every_layer_stored),
                    ("leaving out the position and token-type tables", _without_position_tables),
                    ("a V x H embedding table, as if E = H (no factorization)", _unfactorized))),
    Piece("model_flops", "function", _model_flops, _flops_inputs,
          mistakes=(("counting a shared block once, although the model runs it num_layers times",
                     lambda *a: _flops_variant(*a, stored=True)),
                    ("a multiply and an add counted as one operation (n k m per product, not 2 n k m)",
                     lambda *a: _flops_variant(*a, factor=2)),
                    ("leaving out the attention scores and A V, the N^2 term",
                     lambda *a: _flops_variant(*a, scores=False)),
                    ("scoring the vocabulary from H dimensions, as if the output side were not factorized",
                     lambda *a: _flops_variant(*a, tied=False)))),
    Piece("beats_rule", "function", _beats, _arms,
          mistakes=(("leaving out the seed spread: intervals apart are not enough",
                     lambda a, b: _beats_variant(a, b, spread=False)),
                    ("calling a lead of one seed a finding (with one seed it is at most a hint)",
                     lambda a, b: _beats_variant(a, b, one_seed_hint=False)))),
)
