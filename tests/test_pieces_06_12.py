"""The pieces lessons 06 to 12 gained beside their first ones: the per-sequence curves and a curve's
oscillation (06), a pair's layout and an accuracy's interval (07), the length rule and an arm's interval
over seeds (08), a whole model's forward operations and the rule "A beats B" (09), our weights under
transformers' names and back, checked by loading (11), and each application's gradient norm and the
shares of a masked batch (12). A learner's right version passes; each named mistake is named."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from test_pieces_08_09 import said

import minialbert as ma
from minialbert.config import CLS_ID, IGNORE_INDEX, MASK_ID, SEP_ID
from minialbert.course.pieces import PIECES, check
from minialbert.course.verdict import t_quantile

# ------------------------------------------------------------------ pieces written as a learner would


def my_transition(before, after):
    cosine = F.cosine_similarity(after, before, dim=-1).clamp(-1, 1)
    return (after - before).norm(dim=-1), torch.rad2deg(torch.arccos(cosine))


def my_sequence_transitions(model, batch):
    with torch.no_grad():
        states = model.albert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                              output_hidden_states=True).hidden_states
    real = batch["attention_mask"].double()                              # (B, N): 1 at a real token
    layers = []
    for before, after in zip(states, states[1:]):
        l2, angle = my_transition(before.double(), after.double())       # (B, N) each
        layers.append(torch.stack([(l2 * real).sum(-1), (angle * real).sum(-1)]) / real.sum(-1))
    return torch.stack(layers, dim=1)                                    # (2, L, B)


def my_oscillation(curve):
    steps = [b - a for a, b in zip(curve, curve[1:])]
    changes = sum(1 for a, b in zip(steps, steps[1:]) if a * b < 0)
    bends = sum(abs(b - a) for a, b in zip(steps, steps[1:]))
    spread = max(curve) - min(curve)
    return changes, (bends / spread if spread else 0.0)


def my_pair_layout(a, b, max_len):
    a, b = list(a), None if b is None else list(b)
    while len(a) + len(b or []) + (2 if b is None else 3) > max_len:
        (a if b is None or len(a) >= len(b) else b).pop()
    ids, types = [CLS_ID] + a + [SEP_ID], [0] * (len(a) + 2)
    if b is not None:
        ids, types = ids + b + [SEP_ID], types + [1] * (len(b) + 1)
    return ids, types


def my_wilson_interval(successes, n):
    if n == 0:
        return 0.0, 1.0
    p, z = successes / n, 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def length_rule(train_lengths, train_labels, test_lengths):
    counts = {}
    for cell, label in zip(train_lengths.tolist(), train_labels.tolist()):
        counts.setdefault(tuple(cell), [0, 0])[label] += 1
    overall = int(train_labels.float().mean() > 0.5)
    best = {cell: overall if zeros == ones else int(ones > zeros) for cell, (zeros, ones) in counts.items()}
    return torch.tensor([best.get(tuple(cell), overall) for cell in test_lengths.tolist()])


def arm_interval(accuracies, intervals):
    n, mean = len(accuracies), sum(accuracies) / len(accuracies)
    if n == 1:
        return mean, intervals[0][0], intervals[0][1]
    spread = math.sqrt(sum((a - mean) ** 2 for a in accuracies) / (n - 1))
    between = t_quantile(n - 1) * spread / math.sqrt(n)
    within = sum((high - low) / 2 for low, high in intervals) / n
    half = math.sqrt(between ** 2 + within ** 2)
    return mean, mean - half, mean + half


def model_flops(cfg, seq_len, predicted):
    N, E, H, F_, V = seq_len, cfg.embedding_size, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    projection = 2 * N * E * H if cfg.embedding_projection else 0
    layer = 8 * N * H * H + 4 * N * N * H + 4 * N * H * F_
    heads = 2 * H * H + 2 * H * 2 + predicted * (2 * H * E + 2 * E * V)
    return projection + cfg.num_layers * layer + heads


def beats(a, b):
    lead, trail = (a, b) if a["value"] >= b["value"] else (b, a)
    apart = lead["ci95"][0] > trail["ci95"][1]
    if min(len(a["seeds"]), len(b["seeds"])) == 1:
        return f"hint: {lead['name']} ahead" if apart else "not separated"
    widest = max(max(arm["seeds"]) - min(arm["seeds"]) for arm in (a, b))
    if apart and lead["value"] - trail["value"] > widest:
        return f"{lead['name']} beats {trail['name']}"
    return "not separated"


def transformers_name(name):
    for pattern, replacement in (
            (r"encoder\.groups\.(\d+)\.(\d+)\.", r"encoder.albert_layer_groups.\1.albert_layers.\2."),
            (r"feed_forward\.LayerNorm\.", "full_layer_layer_norm."), (r"feed_forward\.", ""),
            (r"embeddings\.projection\.", "encoder.embedding_hidden_mapping_in."),
            (r"^mlm_head\.decoder_weight$", "predictions.decoder.weight"), (r"^mlm_head\.", "predictions."),
            (r"^sentence_head\.1\.", "sop_classifier.classifier.")):
        name = re.sub(pattern, replacement, name)
    return name


def to_transformers(model):
    hf_state = {}
    for name, tensor in model.state_dict().items():
        name = transformers_name(name)
        if ".attention.qkv." in name:
            for part, third in zip(("query", "key", "value"), tensor.chunk(3)):
                hf_state[name.replace("qkv", part)] = third
        else:
            hf_state[name] = tensor
    hf_state["predictions.decoder.bias"] = hf_state["predictions.bias"]
    return hf_state


def from_transformers(hf_state, model):
    ours = {}
    for name in model.state_dict():
        theirs = transformers_name(name)
        if ".attention.qkv." in theirs:
            ours[name] = torch.cat([hf_state[theirs.replace("qkv", p)] for p in ("query", "key", "value")])
        else:
            ours[name] = hf_state[theirs]
    model.load_state_dict(ours)
    return model


def layer_gradient_norms(model, batch):
    copy = ma.AlbertForPretraining(model.config.replace(sharing="none"), model.sentence_task).eval()
    state = model.state_dict()
    copy.load_state_dict({k: state[k] if k in state else state[re.sub(r"groups\.\d+\.", "groups.0.", k)]
                          for k in copy.state_dict()})
    copy(**batch).loss.backward()
    return [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item()
            for layer in copy.albert.encoder.groups]


def masking_shares(input_ids, mlm_labels):
    chosen = mlm_labels != IGNORE_INDEX
    real = torch.where(chosen, mlm_labels, input_ids) > MASK_ID
    shown, target = input_ids[chosen], mlm_labels[chosen]
    is_mask, kept = shown == MASK_ID, shown == target
    shares = [s.float().mean() for s in (is_mask, ~is_mask & ~kept, kept)]
    return (chosen.sum() / real.sum(), *shares, (input_ids[real] == MASK_ID).float().mean())


RIGHT = {"transitions_per_sequence": my_sequence_transitions, "curve_oscillation": my_oscillation,
         "pair_layout": my_pair_layout, "wilson_interval": my_wilson_interval, "length_rule": length_rule,
         "arm_interval": arm_interval, "model_flops": model_flops, "beats_rule": beats,
         "to_transformers": to_transformers, "from_transformers": from_transformers,
         "layer_gradient_norms": layer_gradient_norms, "masking_shares": masking_shares}


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_right_piece_passes(capsys, name):
    ok, out = said(capsys, name, RIGHT[name])
    assert ok and out.startswith(f"{name}: right: matches the package on 3 random inputs"), out


PROPERTY_MISTAKES = [(name, what, variant) for name in ("to_transformers", "from_transformers")
                     for what, variant in PIECES[name].mistakes]


@pytest.mark.parametrize("name, what, variant", PROPERTY_MISTAKES, ids=[m[1] for m in PROPERTY_MISTAKES])
def test_each_mistake_in_the_weights_mapping_is_named(capsys, name, what, variant):
    ok, out = said(capsys, name, variant)
    assert not ok and out.startswith(f"{name}: wrong: ") and out.endswith(f"that is what {what} gives\n"), out


def test_a_mapping_that_loads_but_computes_otherwise_is_caught_by_loading(capsys):
    """A learner who transposes the pooler's weight keeps every name and shape (H x H): only the outputs of
    transformers' model, with the weights loaded, can tell."""
    def transposed_pooler(model):
        state = to_transformers(model)
        state["albert.pooler.weight"] = state["albert.pooler.weight"].T
        return state
    ok, out = said(capsys, "to_transformers", transposed_pooler)
    assert not ok and "albert.pooler.weight: values differ" in out


def test_a_loader_that_returns_nothing_says_what_to_return(capsys):
    ok, out = said(capsys, "from_transformers", lambda hf_state, model: None)
    assert not ok and "return the model, with the weights loaded" in out


def test_the_learners_gradient_norms_leave_the_model_as_it_was(capsys):
    """The package's norms come from an untied copy: the model keeps no gradient, whatever the sharing."""
    from minialbert.course.experiments.layer_gradients import application_gradient_norms
    from minialbert.course.pieces.checking import CHECK_CONFIG, pretraining_batch
    model = ma.AlbertForPretraining(CHECK_CONFIG).eval()
    application_gradient_norms(model, pretraining_batch(torch.Generator().manual_seed(0), CHECK_CONFIG))
    assert all(p.grad is None for p in model.parameters())


HEADER = '''
import math
import re

import torch
import torch.nn.functional as F

import minialbert as ma
from minialbert.config import CLS_ID, IGNORE_INDEX, MASK_ID, SEP_ID
from minialbert.course.verdict import t_quantile
'''


def test_each_right_piece_is_kept_in_the_workspace_with_what_it_needs(tmp_path):
    """As in a lesson: the pieces defined in a notebook (run as __main__), each checked; every kept file runs
    on its own (its imports, helpers such as transformers_name and constants such as MASK_ID written in)."""
    import inspect
    import textwrap

    from minialbert.course.pieces.workspace import load
    helpers = [my_transition, transformers_name]
    source = HEADER + "\n\n".join(inspect.getsource(f) for f in [*helpers, *RIGHT.values()])
    lesson = tmp_path / "lesson.py"
    lesson.write_text(textwrap.dedent(source))
    namespace = {"__name__": "__main__"}
    exec(compile(lesson.read_text(), str(lesson), "exec"), namespace)
    folder = tmp_path / "my_albert"
    assert check("layer_transition", namespace["my_transition"], workspace=folder)
    for name, piece in RIGHT.items():
        assert check(name, namespace[piece.__name__], workspace=folder), name
        module = load(name, folder)
        assert module.PIECE.__name__ == piece.__name__
    assert load("transitions_per_sequence", folder).CALLS == {"my_transition": "layer_transition"}


def test_the_curves_are_judged_alone_with_a_wrong_transition_beside_them(capsys, monkeypatch):
    """The learner's curves call their my_transition: a wrong one (radians) fails its own check, and the
    curves' check still says right, since it gives them the package's transition meanwhile."""
    right = my_transition

    def radians(before, after):
        l2, angle = right(before, after)
        return l2, torch.deg2rad(angle)
    monkeypatch.setitem(globals(), "my_transition", radians)
    ok, out = said(capsys, "layer_transition", radians)
    assert not ok and out.endswith("that is what the angle in radians gives\n")
    ok, out = said(capsys, "transitions_per_sequence", my_sequence_transitions)
    assert ok, out
