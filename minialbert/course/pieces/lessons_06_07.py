"""The pieces of lessons 06 and 07: one layer's transition, the per-sequence curves and how much a curve
oscillates (06); the classifier, the layout of a sentence pair and an accuracy's interval (07)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...config import CLS_ID, SEP_ID
from ...evaluation import wilson_interval
from ...model import AlbertForPretraining, AlbertForSequenceClassification
from ...tokenizer import pair_layout
from ..experiments.analysis import oscillation, sequence_transitions, total_variation, transition
from .checking import CHECK_CONFIG, Piece, pretraining_batch, randn, randomize


# ------------------------------------------------------------------ lesson 06
def _transition_inputs(g, trial):
    before = randn(g, 2, 5, 8).double()
    after = before * 3 if trial == 2 else randn(g, 2, 5, 8).double()    # trial 2: parallel vectors, angle 0
    return before, after


def _cosine_distance(before, after):
    return (after - before).norm(dim=-1), 1 - F.cosine_similarity(after, before, dim=-1)


def _model_and_batch(g, trial):
    """A random ALBERT of the check's sizes (every weight random) and a batch with a padded row."""
    model = AlbertForPretraining(CHECK_CONFIG).eval()
    randomize(model, g)
    return model, pretraining_batch(g, CHECK_CONFIG)


def _per_sequence(model, batch):
    """The package's curves of one batch, per sequence: (2, L, B)."""
    return sequence_transitions(model, [batch])


def _per_sequence_variant(model, batch, padded=False, pooled=False, radians=False):
    """The per-sequence means with one thing changed: padded positions counted, one mean over the whole
    batch (2, L), or the angle in radians."""
    with torch.no_grad():
        states = model.albert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                              output_hidden_states=True).hidden_states
    weight = torch.ones_like(batch["attention_mask"]) if padded else batch["attention_mask"]
    weight = weight.double()
    layers = []
    for before, after in zip(states, states[1:]):
        l2, angle = transition(before.double(), after.double())
        angle = torch.deg2rad(angle) if radians else angle
        sums = torch.stack([(l2 * weight).sum(-1), (angle * weight).sum(-1)])           # (2, B)
        layers.append(sums.sum(-1) / weight.sum() if pooled else sums / weight.sum(-1))
    return torch.stack(layers, dim=1)


def _curve_inputs(g, trial):
    """Trial 0: a zig-zag; 1: a random curve; 2: a curve that only falls, and flattens (no sign change)."""
    if trial == 2:
        return ([5.0 / (1 + k) + 0.1 * float(torch.rand(1, generator=g)) for k in range(7)],)
    steps = randn(g, 9 if trial == 0 else 12).abs() + 0.1
    signs = torch.tensor([(-1.0) ** k for k in range(len(steps))]) if trial == 0 else torch.sign(randn(g, 12))
    return ((steps * signs).cumsum(0).tolist(),)


def _oscillation(curve):
    """The package's two numbers, in the piece's order: (sign changes, second difference per range)."""
    found = oscillation(curve)
    return found["sign_changes"], found["second_difference"]


def _undivided(curve):
    changes, bends = _oscillation(curve)
    return changes, bends * (max(curve) - min(curve))


def _total_variation_over_range(curve):
    return _oscillation(curve)[0], total_variation(curve) / (max(curve) - min(curve))


# ------------------------------------------------------------------ lesson 07
def _classifier_inputs(g, trial):
    batch = pretraining_batch(g, CHECK_CONFIG)
    return batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]


def _unpooled(ref, ids, types, mask):
    return ref.classifier(ref.albert(ids, types, mask).last_hidden_state[:, 0])


def _pair_inputs(g, trial):
    """Trial 0: B longer than A, cut until the two are as long, then one more; 1: two segments as long, cut
    by an odd number; 2: one sentence, cut."""
    def ids(n):
        return torch.randint(5, CHECK_CONFIG.vocab_size, (n,), generator=g).tolist()
    return ((ids(5), ids(11), 12), (ids(7), ids(7), 12), (ids(15), None, 10))[trial]


def _pair(a, b, max_len):
    return pair_layout(a, b, max_len, CLS_ID, SEP_ID)


def _pair_variant(a, b, max_len, tie_cuts_b=False, front=False, sep_type=1):
    """The layout with one thing changed: which segment a tie cuts, which end a cut takes, B's [SEP] type."""
    a, b = list(a), None if b is None else list(b)
    while len(a) + len(b or ()) + (2 if b is None else 3) > max_len:
        longer = a if b is None or len(a) > len(b) or (len(a) == len(b) and not tie_cuts_b) else b
        longer.pop(0 if front else -1)
    ids, types = _pair(a, b, len(a) + len(b or ()) + 3)
    if b is not None:
        types[-1] = sep_type
    return ids, types


def _wilson_inputs(g, trial):
    """Trial 0: half of 2,000 right; 1: none of 16 right (p = 0); 2: an empty set."""
    return ((1000, 2000), (0, 16), (0, 0))[trial]


def _interval_variant(change):
    """A wrong interval for n > 0; for an empty set the package's (0, 1), so no variant fails on it."""
    def interval(successes, n):
        return wilson_interval(successes, n) if n == 0 else change(successes, n)
    return interval


def _normal_interval(successes, n):
    p = successes / n
    half = 1.96 * math.sqrt(p * (1 - p) / n)
    return p - half, p + half


_wald = _interval_variant(_normal_interval)
_one_standard_error = _interval_variant(lambda successes, n: wilson_interval(successes, n, z=1.0))


PIECES = (
    # lesson 06
    Piece("layer_transition", "function", transition, _transition_inputs,
          mistakes=(("1 - cosine instead of the angle in degrees", _cosine_distance),
                    ("the angle in radians",
                     lambda b, a: (transition(b, a)[0], torch.deg2rad(transition(b, a)[1]))))),
    Piece("transitions_per_sequence", "function", _per_sequence, _model_and_batch,
          mistakes=(("counting the padded positions in each sequence's mean",
                     lambda m, b: _per_sequence_variant(m, b, padded=True)),
                    ("one mean over every token of the batch instead of one per sequence",
                     lambda m, b: _per_sequence_variant(m, b, pooled=True)),
                    ("the angle in radians", lambda m, b: _per_sequence_variant(m, b, radians=True)))),
    Piece("curve_oscillation", "function", _oscillation, _curve_inputs,
          mistakes=(("the second difference not divided by the curve's range", _undivided),
                    ("the total variation (the sizes of the steps) in place of the changes between steps",
                     _total_variation_over_range))),
    # lesson 07
    Piece("classifier", "module", lambda cfg: AlbertForSequenceClassification(cfg, 3).eval(),
          _classifier_inputs, build=lambda cls, cfg, ref: cls(cfg, 3), output=lambda out: out.logits,
          mistakes=(("reading [CLS]'s last hidden state without the pooler (dense + tanh)", _unpooled),)),
    Piece("pair_layout", "function", _pair, _pair_inputs,
          mistakes=(("cutting B when the two segments are as long (BERT's rule; the course cuts A)",
                     lambda a, b, n: _pair_variant(a, b, n, tie_cuts_b=True)),
                    ("cutting the start of the longer segment instead of its end",
                     lambda a, b, n: _pair_variant(a, b, n, front=True)),
                    ("token type 0 on B's closing [SEP]",
                     lambda a, b, n: _pair_variant(a, b, n, sep_type=0)))),
    Piece("wilson_interval", "function", wilson_interval, _wilson_inputs,
          mistakes=(("the normal interval p ± 1.96 sqrt(p(1 - p) / n), which shrinks to a point at p = 0",
                     _wald),
                    ("one standard error (z = 1, a 68% interval) instead of z = 1.96", _one_standard_error))),
)
