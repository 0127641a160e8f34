"""Layer-wise smoothness: parity with values computed from transformers' hidden states, padding,
token choice, standardization, errors, and the smoothness CLI on tiny checkpoints."""

import json
import math
from types import SimpleNamespace

import pytest
import torch
import transformers
from torch import nn

from minialbert import AlbertConfig, AlbertForPretraining, hf
from minialbert.course.commands import main
from minialbert.course.experiments import analysis
from minialbert.course.experiments.analysis import (
    heldout_batches,
    layer_transitions,
    total_variation,
    total_variation_by_fold,
)

V, N = 97, 9
ALBERT_SMALL = dict(vocab_size=V, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                    num_attention_heads=4, intermediate_size=37, max_position_embeddings=24)
BERT_SMALL = dict(vocab_size=V, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=24)


def _hf(cls, config_cls, **config):
    torch.manual_seed(0)
    model = cls(config_cls(**config, attn_implementation="eager"))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():                     # biases and LayerNorms away from their trivial init
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return model.eval()


def _batches(seed=1):
    """Two padded batches (5 sequences of lengths 9, 6, 3, 7, 1) with two segments."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for lengths in ([9, 6, 3], [7, 1]):
        ids = torch.randint(5, V, (len(lengths), N), generator=gen)
        mask = (torch.arange(N)[None] < torch.tensor(lengths)[:, None]).long()
        ids[:, 0] = 2                                                      # [CLS]
        ids[mask == 0] = 0
        types = (torch.arange(N) >= 4).long().expand_as(ids) * mask
        out.append({"input_ids": ids, "token_type_ids": types, "attention_mask": mask})
    return out


def _reference(ref, batches, tokens="all", standardize=False):
    """The definition written out slowly from transformers' own output_hidden_states (float64, arccos)."""
    per_batch = []
    with torch.no_grad():
        for b in batches:
            states = ref(b["input_ids"], attention_mask=b["attention_mask"],
                         token_type_ids=b["token_type_ids"], output_hidden_states=True).hidden_states
            per_batch.append(([h.double() for h in states], b["attention_mask"]))
    keep = lambda mask, i: [0] if tokens == "cls" else [t for t in range(N) if mask[i, t]]
    if standardize:
        layers = len(per_batch[0][0])
        stacked = [torch.stack([states[l][i, t] for states, mask in per_batch
                                for i in range(mask.shape[0]) for t in keep(mask, i)]) for l in range(layers)]
        std = [s.std(dim=0, unbiased=False) for s in stacked]
        per_batch = [([h / s for h, s in zip(states, std)], mask) for states, mask in per_batch]
    l2, angle = [], []                                                    # per sequence: [L]
    for states, mask in per_batch:
        for i in range(mask.shape[0]):
            d, a = [], []
            for before, after in zip(states, states[1:]):
                x, y = before[i, keep(mask, i)], after[i, keep(mask, i)]
                d.append((y - x).norm(dim=-1).mean().item())
                cos = (x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1))
                a.append(torch.rad2deg(torch.arccos(cos.clamp(-1, 1))).mean().item())
            l2.append(d)
            angle.append(a)
    out = {}
    for key, values in (("l2", torch.tensor(l2)), ("angle", torch.tensor(angle))):
        mean, se = values.mean(0), values.std(0) / math.sqrt(len(values))
        out[key], out[f"{key}_ci95"] = mean, torch.stack([mean - 1.96 * se, mean + 1.96 * se], dim=1)
    return out


def _assert_matches(result, expected, atol=1e-5):
    for key in ("l2", "angle", "l2_ci95", "angle_ci95"):
        torch.testing.assert_close(torch.tensor(getattr(result, key), dtype=torch.float64),
                                   expected[key].double(), atol=atol, rtol=0)


@pytest.mark.parametrize("family", ["albert", "bert"])
@pytest.mark.parametrize("tokens, standardize", [("all", False), ("cls", False), ("all", True)])
def test_matches_transformers_hidden_states(family, tokens, standardize):
    ref = (_hf(transformers.AlbertModel, transformers.AlbertConfig, **ALBERT_SMALL) if family == "albert"
           else _hf(transformers.BertModel, transformers.BertConfig, **BERT_SMALL))
    ours = hf.from_hf(ref.state_dict(), ref.config.to_dict())
    batches = _batches()
    result = layer_transitions(ours, batches, tokens=tokens, standardize=standardize)
    assert result.layers == [1, 2, 3] and result.sequences == 5
    _assert_matches(result, _reference(ref, batches, tokens, standardize))
    json.dumps(result.to_dict())                                          # JSON-ready as it is


def _ours(seed=0, **changes):
    torch.manual_seed(seed)
    cfg = AlbertConfig(vocab_size=V, embedding_size=16, hidden_size=32, num_layers=4, num_heads=4,
                       intermediate_size=48, max_position_embeddings=32, hidden_dropout_prob=0.0,
                       attention_dropout_prob=0.0, **changes)
    return AlbertForPretraining(cfg).eval()


def test_padding_and_batching_do_not_change_the_numbers():
    model = _ours()
    batches = _batches()
    expected = layer_transitions(model, batches)
    repadded = []
    for b in batches:                                                     # 5 more padding columns
        pad = lambda t: torch.cat([t, torch.zeros(t.shape[0], 5, dtype=t.dtype)], dim=1)
        repadded.append({k: pad(v) for k, v in b.items()})
    singles = [{k: v[i:i + 1] for k, v in b.items()} for b in batches for i in range(len(b["input_ids"]))]
    singles = [{k: v[:, :int(s["attention_mask"].sum())] for k, v in s.items()} for s in singles]  # no pads
    for other in (repadded, singles):
        for standardize in (False, True):
            got = layer_transitions(model, other, standardize=standardize)
            want = expected if not standardize else layer_transitions(model, batches, standardize=True)
            for key in ("l2", "angle", "l2_ci95", "angle_ci95"):
                torch.testing.assert_close(torch.tensor(getattr(got, key)), torch.tensor(getattr(want, key)),
                                           atol=1e-5, rtol=0)


class ScriptedEncoder(nn.Module):
    """Returns hidden states we choose: h_0 = e1 on every token; h_1 = e2 on [CLS] (90 degrees,
    distance sqrt 2) and e1 + e2 elsewhere (45 degrees, distance 1); padding holds junk."""

    def __init__(self):
        super().__init__()
        self.unused = nn.Parameter(torch.zeros(1))                       # gives the device

    def forward(self, ids, types, mask, output_hidden_states=False):
        B, n = ids.shape
        e1, e2 = torch.eye(4)[0], torch.eye(4)[1]
        h0 = e1.expand(B, n, 4).clone()
        h1 = (e1 + e2).expand(B, n, 4).clone()
        h1[:, 0] = e2
        h0[mask == 0], h1[mask == 0] = 100.0, -100.0
        return SimpleNamespace(hidden_states=(h0, h1))


def test_cls_and_all_differ_as_constructed():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    batch = {"input_ids": torch.ones_like(mask), "attention_mask": mask}
    cls = layer_transitions(ScriptedEncoder(), [batch], tokens="cls")
    every = layer_transitions(ScriptedEncoder(), [batch], tokens="all")
    assert cls.l2 == pytest.approx([math.sqrt(2)]) and cls.angle == pytest.approx([90.0])
    # per sequence: L2 (sqrt2 + 2) / 3 and (sqrt2 + 3) / 4; angles (90 + 2*45) / 3 = 60, (90 + 3*45) / 4
    assert every.l2 == pytest.approx([((math.sqrt(2) + 2) / 3 + (math.sqrt(2) + 3) / 4) / 2])
    assert every.angle == pytest.approx([(60 + 56.25) / 2])
    assert cls.l2_ci95[0] == pytest.approx([math.sqrt(2)] * 2)           # identical sequences: no spread


class ScaledDimensions(nn.Module):
    """A model whose every hidden state has each dimension multiplied by a different factor per layer."""

    def __init__(self, model):
        super().__init__()
        self.inner = model.albert
        gen = torch.Generator().manual_seed(3)
        shape = (model.config.num_layers + 1, model.config.hidden_size)
        self.factors = torch.rand(shape, generator=gen) * 10 + 0.1

    def forward(self, *args, **kwargs):
        out = self.inner(*args, **kwargs)
        return SimpleNamespace(hidden_states=tuple(h * f for h, f in zip(out.hidden_states, self.factors)))


def test_standardize_is_invariant_to_rescaling_dimensions():
    """Dividing by the per-layer, per-dimension std undoes any per-layer rescaling of dimensions;
    without it, both the distance and the angle change."""
    model = _ours(seed=4)
    batches = _batches(seed=5)
    scaled = ScaledDimensions(model)
    plain, plain_scaled = layer_transitions(model, batches), layer_transitions(scaled, batches)
    std, std_scaled = (layer_transitions(m, batches, standardize=True) for m in (model, scaled))
    for key in ("l2", "angle"):
        torch.testing.assert_close(torch.tensor(getattr(std, key)), torch.tensor(getattr(std_scaled, key)),
                                   atol=1e-6, rtol=1e-6)
        assert not torch.allclose(torch.tensor(getattr(plain, key)), torch.tensor(getattr(plain_scaled, key)))
        assert not torch.allclose(torch.tensor(getattr(plain, key)), torch.tensor(getattr(std, key)))


def test_standardize_divides_by_the_std_over_all_tokens_also_for_cls():
    """[CLS]'s h_0 is the same vector in every sequence: a std over [CLS] alone would be 0. The std
    comes from all real tokens, so the [CLS] result equals a hand computation with that std."""
    model, batches = _ours(seed=6), _batches(seed=7)
    with torch.no_grad():
        runs = [model.albert(b["input_ids"], b["token_type_ids"], b["attention_mask"],
                             output_hidden_states=True).hidden_states for b in batches]
    real = [b["attention_mask"].bool() for b in batches]
    std = [torch.cat([h[l][m] for h, m in zip(runs, real)]).double().std(dim=0, unbiased=False)
           for l in range(len(runs[0]))]                                   # per layer: (H,)
    cls = [torch.cat([h[l][:, 0] for h in runs]).double() / std[l] for l in range(len(std))]   # (S, H)
    want_l2 = [(b - a).norm(dim=-1).mean().item() for a, b in zip(cls, cls[1:])]
    got = layer_transitions(model, batches, tokens="cls", standardize=True)
    torch.testing.assert_close(torch.tensor(got.l2), torch.tensor(want_l2), atol=1e-6, rtol=1e-6)
    assert torch.cat([h[0][:, 0] for h in runs]).std(dim=0).max() < 1e-5    # why not over [CLS] alone


def test_total_variation():
    assert total_variation([1.0, 3.0, 2.0, 2.0]) == 3.0
    assert total_variation([5.0]) == 0.0


def test_total_variation_by_fold_is_the_total_variation_of_each_part():
    model, batches = _ours(), _batches()
    folds = total_variation_by_fold(model, batches, folds=2)
    for i in range(2):
        part = layer_transitions(model, batches[i::2])
        assert folds["l2"][i] == pytest.approx(total_variation(part.l2))
        assert folds["angle"][i] == pytest.approx(total_variation(part.angle))
    assert folds["l2"][0] != folds["l2"][1]                   # different data, different values
    with pytest.raises(ValueError, match=f"{len(batches)} batches cannot make 99 folds"):
        total_variation_by_fold(model, batches, folds=99)


def test_sequence_transitions_average_to_layer_transitions():
    model, batches = _ours(), _batches()
    for tokens, standardize in (("all", False), ("cls", True)):
        per = analysis.sequence_transitions(model, batches, tokens=tokens, standardize=standardize)
        summary = layer_transitions(model, batches, tokens=tokens, standardize=standardize)
        assert per.shape == (2, 4, 5) and per.dtype == torch.float64 and per.device.type == "cpu"
        want = torch.tensor([summary.l2, summary.angle], dtype=torch.float64)
        torch.testing.assert_close(per.mean(-1), want)
    first = analysis.sequence_transitions(model, batches[:1])          # batch order is sequence order
    torch.testing.assert_close(analysis.sequence_transitions(model, batches)[..., :3], first)
    with pytest.raises(ValueError, match="empty batch list"):
        analysis.sequence_transitions(model, [])


def test_summarize_sequences_is_the_mean_with_a_normal_interval():
    values = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)           # mean 2.5, sample std 1.29
    per = torch.stack([torch.stack([values, 2 * values]), torch.stack([values, values])])   # (2, L=2, S=4)
    found = analysis.summarize_sequences(per, tokens="cls", standardize=True)
    half = 1.96 * values.std().item() / 2
    assert found.layers == [1, 2] and found.sequences == 4 and found.tokens == "cls" and found.standardize
    assert found.l2 == pytest.approx([2.5, 5.0]) and found.angle == pytest.approx([2.5, 2.5])
    assert found.l2_ci95[0] == pytest.approx([2.5 - half, 2.5 + half])
    assert found.l2_ci95[1] == pytest.approx([5.0 - 2 * half, 5.0 + 2 * half])
    one = analysis.summarize_sequences(per[..., :1])                          # one sequence: no spread
    assert one.l2_ci95 == [[1.0, 1.0], [2.0, 2.0]]
    with pytest.raises(ValueError, match="empty batch list"):
        analysis.summarize_sequences(per[..., :0])


def test_curve_measures_on_constructed_curves():
    falling, zigzag = [9.0, 4.0, 2.0, 1.5, 1.0], [5.0, 1.0, 3.0, 1.0, 3.0, 1.0]
    found = analysis.curve_measures([falling, zigzag])                      # from layer 2 on
    assert found["l2"]["sign_changes"] == 0 and found["angle"]["sign_changes"] == len(zigzag) - 3
    assert found["l2"]["last_over_start"] == pytest.approx(0.25)           # 1.0 / 4.0: layer 1 left out
    assert found["l2"]["spread"] == pytest.approx(3.0)
    assert found["angle"]["second_difference"] == pytest.approx(6.0)       # 3 reversals over range 2
    whole = analysis.curve_measures([falling, zigzag], from_layer=1)
    assert whole["l2"]["last_over_start"] == pytest.approx(1 / 9) and whole["angle"]["sign_changes"] == 4
    assert analysis.curve_measures([[1.0, 1.0], [2.0, 2.0]])["l2"]["spread"] == 0.0
    with pytest.raises(ValueError, match="nothing from layer 3 on"):
        analysis.curve_measures([[1.0, 2.0], [1.0, 2.0]], from_layer=3)
    with pytest.raises(ValueError, match="counts layers from 1"):
        analysis.curve_measures([[1.0, 2.0], [1.0, 2.0]], from_layer=0)


def _constructed(per_doc_curves, copies=1):
    """(2, L, S) per-sequence values and their documents: each document's sequences all equal its curve."""
    values, docs = [], []
    for d, curve in enumerate(per_doc_curves):
        for _ in range(copies):
            values.append(torch.tensor([curve, curve], dtype=torch.float64))         # (2, L)
            docs.append(d)
    return torch.stack(values, dim=-1), torch.tensor(docs)


def test_document_bootstrap_resamples_documents_not_sequences():
    zigzag = [1.0, 3.0, 1.0, 3.0, 1.0, 3.0]
    same, docs = _constructed([zigzag] * 8)
    exact = analysis.document_bootstrap(same, docs, reps=200)        # every document alike: no uncertainty
    assert exact["l2"]["sign_changes"] == {"value": 3, "ci95": [3.0, 3.0]}      # layers 2..6
    gen = torch.Generator().manual_seed(0)
    curves = [[3.0, 2.0, 1.5, 1.2] + (torch.randn(2, generator=gen) * 0.3).tolist() for _ in range(12)]
    per, docs = _constructed(curves)
    found = analysis.document_bootstrap(per, docs, reps=300, seed=1)
    for curve in ("l2", "angle"):
        for name, result in found[curve].items():
            low, high = result["ci95"]
            assert low <= result["value"] <= high or name == "sign_changes"   # a count may sit at its edge
        assert found[curve]["sign_changes"]["ci95"][0] == int(found[curve]["sign_changes"]["ci95"][0])
    assert found["l2"]["last_over_start"]["ci95"][1] > found["l2"]["last_over_start"]["ci95"][0]
    assert analysis.document_bootstrap(per, docs, reps=300, seed=1) == found                       # seeded
    # Copies of a sequence inside its document add no evidence: the interval stays the same ...
    copied, copied_docs = _constructed(curves, copies=5)
    flat = lambda r: [x for c in r.values() for m in c.values() for x in (m["value"], *m["ci95"])]
    same_docs = analysis.document_bootstrap(copied, copied_docs, reps=300, seed=1)
    assert flat(same_docs) == pytest.approx(flat(found))
    # ... while calling every copy its own document would narrow it.
    alone = analysis.document_bootstrap(copied, torch.arange(copied.shape[-1]), reps=300, seed=1)
    width = lambda r: r["l2"]["last_over_start"]["ci95"][1] - r["l2"]["last_over_start"]["ci95"][0]
    assert width(alone) < 0.7 * width(found)
    with pytest.raises(ValueError, match="needs one document per sequence"):
        analysis.document_bootstrap(per, docs[:-1])
    with pytest.raises(ValueError, match="reps must be at least 1"):
        analysis.document_bootstrap(per, docs, reps=0)


def test_clear_errors():
    model = _ours()
    with pytest.raises(ValueError, match="empty batch list"):
        layer_transitions(model, [])
    with pytest.raises(ValueError, match="empty batch list"):
        layer_transitions(model, [], standardize=True)
    with pytest.raises(ValueError, match="tokens must be one of all, cls, got 'first'"):
        layer_transitions(model, _batches(), tokens="first")
    with pytest.raises(ValueError, match="pass a list, not an iterator"):
        layer_transitions(model, iter(_batches()), standardize=True)


def test_leaves_training_mode_as_it_was():
    model = _ours().train()
    layer_transitions(model, _batches())
    assert model.training


# ---------------------------------------------------------------------------------- CLI (ci scale)
SHRINK = ["--set", "embedding_size=16", "--set", "hidden_size=32", "--set", "num_layers=3",
          "--set", "intermediate_size=64"]


@pytest.fixture(scope="module")
def ci_cache(tmp_path_factory):
    """A private ci-scale cache and one 2-step checkpoint, built once for the CLI tests."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINIALBERT_CACHE", str(cache))
        mp.setenv("MINIALBERT_SCALE", "ci")
        run = cache / "run"
        assert main(["pretrain", "--out", str(run), *SHRINK, "--objective", "mlm", "--steps", "2",
                     "--batch-size", "4", "--warmup", "1", "--eval-every", "0", "--quiet"]) == 0
    return cache, run


@pytest.fixture
def ci_env(ci_cache, monkeypatch):
    cache, run = ci_cache
    monkeypatch.setenv("MINIALBERT_CACHE", str(cache))
    monkeypatch.setenv("MINIALBERT_SCALE", "ci")
    return run


def test_heldout_batches_are_deterministic_and_unmasked(ci_env):
    from minialbert.course.data import course_pretraining_data, course_tokenizer
    from minialbert.course.scale import SCALES
    from minialbert.evaluation import evaluation_sample
    from minialbert.tokenizer import CLS_ID, MASK_ID

    data = course_pretraining_data("mlm", "test", SCALES["ci"].data)
    first, again = heldout_batches(data, 10, batch_size=4), heldout_batches(data, 10, batch_size=4)
    assert [len(b["input_ids"]) for b in first] == [4, 4, 2]
    for a, b in zip(first, again):
        assert all(torch.equal(a[k], b[k]) for k in a)
        assert (a["input_ids"][:, 0] == CLS_ID).all() and not (a["input_ids"] == MASK_ID).any()
    documents = analysis.heldout_documents(data, 10)            # one per sequence, in the batches' order
    assert documents.shape == (10,) and torch.equal(documents, data.document_ids[evaluation_sample(data, 10)])
    seeded = analysis.heldout_documents(data, 10, seed=3)
    assert torch.equal(seeded, data.document_ids[evaluation_sample(data, 10, 3)])
    with pytest.raises(ValueError, match="does not name the document"):
        analysis.heldout_documents(SimpleNamespace(document_ids=None), 10)
    tok = course_tokenizer(SCALES["ci"].data)
    retokenized = heldout_batches(data, 10, batch_size=4, source=tok, target=tok, max_len=16)
    assert max(b["input_ids"].shape[1] for b in retokenized) <= 16
    with pytest.raises(ValueError, match="both source and target"):
        heldout_batches(data, 10, source=tok)


def _tiny_official(directory, vocab_size):
    """A local directory in transformers' format with the course tokenizer as its spiece.model."""
    from minialbert.course.data import course_tokenizer
    from minialbert.course.scale import SCALES

    ref = _hf(transformers.AlbertForMaskedLM, transformers.AlbertConfig,
              **{**ALBERT_SMALL, "vocab_size": vocab_size, "max_position_embeddings": 64})
    ref.save_pretrained(directory)
    course_tokenizer(SCALES["ci"].data).save(directory / "spiece.model")
    return directory


def test_cli_draws_the_figure(ci_env, tmp_path, capsys):
    official = _tiny_official(tmp_path / "tiny-albert", 1000)
    out = tmp_path / "figs"
    assert main(["smoothness", "--checkpoint", str(ci_env), "--official", str(official), "--tokens", "cls",
                 "--sequences", "12", "--batch-size", "5", "--out", str(out), "--quiet"]) == 0
    numbers = json.loads((out / "layer_transitions_cls.json").read_text())
    assert (out / "layer_transitions_cls.png").stat().st_size > 1000
    assert set(numbers["results"]) == {"run", "tiny-albert"}
    assert numbers["checkpoints"]["tiny-albert"] == {"official": str(official)}
    assert numbers["sequences"] == 12 and numbers["tokens"] == "cls" and "[CLS]" in numbers["definition"]
    for r in numbers["results"].values():
        assert r["layers"] == [1, 2, 3] and r["sequences"] == 12 and len(r["angle_ci95"]) == 3
    printed = capsys.readouterr()
    assert "layer_transitions_cls.png" in printed.out
    swings = numbers["results"]["run"]["oscillation"]["l2"]
    assert f"run: 3 layers; oscillation (sign changes, second difference): L2 {swings['sign_changes']}, " \
           f"{swings['second_difference']:.2f}" in printed.err


@pytest.mark.parametrize("argv, message", [
    (["--checkpoint", "/nonexistent/run"], "--checkpoint /nonexistent/run does not exist"),
    ([], "give at least one --checkpoint or --official"),
    (["--official", "albert-huge-v9"], "neither a local directory nor an official checkpoint"),
])
def test_cli_errors_are_one_line(ci_env, capsys, argv, message):
    assert main(["smoothness", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("minialbert: error:") and message in err and err.count("\n") == 1


def test_cli_official_without_network_is_one_line(ci_env, capsys, monkeypatch):
    monkeypatch.setattr(hf, "HUB_URL", "http://127.0.0.1:9")              # nothing listens: refused at once
    assert main(["smoothness", "--official", "albert-large-v2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("minialbert: error: official model albert-large-v2: download failed")
    assert err.count("\n") == 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_runs_on_the_models_device():
    model = _ours(attention_backend="sdpa")
    on_cpu = layer_transitions(model, _batches(), standardize=True)
    on_gpu = layer_transitions(model.cuda(), _batches(), standardize=True)   # batches stay on the CPU
    torch.testing.assert_close(torch.tensor(on_gpu.l2), torch.tensor(on_cpu.l2), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(torch.tensor(on_gpu.angle), torch.tensor(on_cpu.angle), atol=1e-3, rtol=1e-4)


def test_plot_uses_the_paper_axes_when_asked():
    import matplotlib.pyplot as plt

    from minialbert.course.plots import plot_layer_transitions

    result = layer_transitions(_ours(), _batches()).to_dict()
    for paper_axes, l2_top, angle_top in ((True, 18, 45), (False, None, None)):
        ax_l2, ax_angle = plot_layer_transitions({"a": result, "b": result}, paper_axes=paper_axes)
        assert len(ax_l2.lines) == 2 and len(ax_angle.collections) == 2     # a line and a band per model
        if paper_axes:
            assert ax_l2.get_ylim() == (0, l2_top) and ax_angle.get_ylim() == (0, angle_top)
            assert ax_l2.get_xlim() == (0.5, 24.5)
        else:
            assert ax_l2.get_ylim()[1] >= max(result["l2"])
        plt.close(ax_l2.figure)
    with pytest.raises(ValueError, match="at least one result"):
        plot_layer_transitions({})


def test_oscillation_tells_a_smooth_curve_from_a_jagged_one_and_total_variation_does_not():
    from minialbert.course.experiments.analysis import oscillation, total_variation

    falling = [4.9, 3.0, 2.1, 1.6, 1.35]               # monotone and bent: the shape of a shared ALBERT
    line = [1.0, 2.0, 3.0, 4.0, 5.0]
    zigzag = [1.0, 3.0, 1.5, 3.2, 1.2, 3.1]           # up and down every layer
    assert total_variation(falling) == pytest.approx(max(falling) - min(falling))   # TV = range here
    assert oscillation(falling)["sign_changes"] == 0 and oscillation(line) == {"sign_changes": 0,
                                                                               "second_difference": 0.0}
    assert 0 < oscillation(falling)["second_difference"] < 1
    assert oscillation(zigzag)["sign_changes"] == len(zigzag) - 2
    assert oscillation(zigzag)["second_difference"] > len(zigzag) - 2             # over 1 per reversal
    # rescaling a curve changes neither number (they read its shape, not its size)
    assert oscillation([10 * v for v in zigzag]) == pytest.approx(oscillation(zigzag))
    assert oscillation([2.0, 2.0, 2.0]) == {"sign_changes": 0, "second_difference": 0.0}
