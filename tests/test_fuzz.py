"""Property-based fuzzing (hypothesis): configs, input batches, texts and damaged files.

For every generated case the package must give a correct result or a clear error of an expected type
whose message names the problem; never a silent wrong result, and never lose the last good
checkpoint. Examples are derandomized so CI is reproducible.
"""

import dataclasses
import math
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_tokenizer import SENTENCES
from test_train import TINY, args, synthetic_examples

from minialbert import download
from minialbert.checkpoint import CHECKPOINT_FILES, MANIFEST, find_checkpoint, load_checkpoint
from minialbert.config import ACTIVATIONS, SHARING, AlbertConfig
from minialbert.costs import count_parameters
from minialbert.inputs import check_batch
from minialbert.model import IGNORE_INDEX, AlbertForPretraining, AlbertModel
from minialbert.pretraining_data import PretrainingDataset
from minialbert.tokenizer import Tokenizer
from minialbert.train import RunOptions, pretrain


def fuzz(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


FIELDS = [f.name for f in dataclasses.fields(AlbertConfig)]
BAD_VALUES = [0, -1, 2.5, None, "3", "all", True, False, math.nan, math.inf, -math.inf, 1.0, [1], 1e-30]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here runs on one thread (conftest.one_thread)."""


# ---------------------------------------------------------------------------- configs
@st.composite
def config_fields(draw) -> dict:
    """Small, mostly valid AlbertConfig fields; one field in three gets an odd or invalid value."""
    heads, layers = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    fields = dict(vocab_size=draw(st.integers(5, 40)), embedding_size=draw(st.integers(1, 12)),
                  hidden_size=heads * draw(st.integers(1, 6)), num_layers=layers, num_heads=heads,
                  intermediate_size=draw(st.integers(1, 24)), hidden_act=draw(st.sampled_from(ACTIVATIONS)),
                  hidden_dropout_prob=draw(st.floats(0, 0.9)), attention_dropout_prob=draw(st.floats(0, 0.9)),
                  classifier_dropout_prob=draw(st.floats(0, 0.9)),
                  max_position_embeddings=draw(st.integers(1, 12)), type_vocab_size=draw(st.integers(1, 3)),
                  layer_norm_eps=draw(st.floats(1e-12, 1e-2)),
                  initializer_range=draw(st.floats(1e-3, 1.0) | st.floats(1.0, 1e300)),   # large: refused
                  sharing=draw(st.sampled_from(SHARING)), embedding_projection=draw(st.booleans()),
                  attention_backend=draw(st.sampled_from(["math", "sdpa"])),
                  pad_token_id=draw(st.integers(0, 4)))
    if fields["sharing"] == "all" and draw(st.booleans()):
        divisors = [d for d in range(1, layers + 1) if layers % d == 0]
        fields["num_hidden_groups"] = draw(st.sampled_from(divisors))
        fields["inner_group_num"] = draw(st.integers(1, 2))
    if not fields["embedding_projection"] and draw(st.booleans()):
        fields["embedding_size"] = fields["hidden_size"]
    if draw(st.integers(0, 2)) == 0:
        fields[draw(st.sampled_from(FIELDS))] = draw(st.sampled_from(BAD_VALUES))
    return fields


@fuzz(1000)
@given(config_fields())
def test_configs_build_what_they_say_or_name_the_field(fields):
    try:
        cfg = AlbertConfig(**fields)
    except ValueError as e:
        event("refused")
        assert any(name in str(e) for name in FIELDS), str(e)
        return
    event("built")
    assert dataclasses.replace(cfg) == cfg == AlbertConfig.from_dict(cfg.to_dict())
    model = AlbertModel(cfg).eval()
    assert sum(p.numel() for p in model.parameters()) == count_parameters(cfg)
    stored = {id(layer) for group in model.encoder.groups for layer in group}
    assert len(stored) == cfg.num_hidden_groups * cfg.inner_group_num
    n = min(5, cfg.max_position_embeddings)
    ids = torch.randint(0, cfg.vocab_size, (2, n))
    with torch.no_grad():
        out = model(ids, torch.randint(0, cfg.type_vocab_size, (2, n)), output_hidden_states=True)
    assert out.last_hidden_state.shape == (2, n, cfg.hidden_size)
    assert len(out.hidden_states) == cfg.num_layers + 1
    assert torch.isfinite(out.last_hidden_state).all() and torch.isfinite(out.pooled_output).all()


# ---------------------------------------------------------------------------- input batches
V, TYPES, MAX_LEN = TINY.vocab_size, TINY.type_vocab_size, TINY.max_position_embeddings


@pytest.fixture(scope="module")
def twins():
    """The same tiny model on the math and sdpa attention backends (and with a sentence head)."""
    torch.manual_seed(0)
    math_model = AlbertForPretraining(TINY.replace(attention_backend="math")).eval()
    sdpa_model = AlbertForPretraining(TINY.replace(attention_backend="sdpa")).eval()
    sdpa_model.load_state_dict(math_model.state_dict())
    return math_model, sdpa_model


def tensor(draw, shape, values, dtype):
    return torch.tensor(draw(st.lists(values, min_size=math.prod(shape), max_size=math.prod(shape))),
                        dtype=torch.float64).reshape(shape).to(dtype)


@st.composite
def batches(draw) -> dict:
    """Input batches, mostly valid: odd dtypes, shapes that disagree, ids out of range, odd masks."""
    B, N = draw(st.sampled_from([0] + [1, 2, 3] * 3)), draw(st.sampled_from([0, MAX_LEN + 1] + [1, 3, 6] * 4))

    def odd() -> bool:                                                  # one part in six is odd
        return draw(st.integers(0, 5)) == 0

    def other():
        return draw(st.sampled_from([(B, N + 1), (N,)])) if odd() else (B, N)

    def dtype():
        return draw(st.sampled_from([torch.int32, torch.float32, torch.bool])) if odd() else torch.int64

    ids = st.integers(-1, V) if odd() else st.integers(0, V - 1)
    batch = {"input_ids": tensor(draw, (B, N), ids, dtype())}
    if draw(st.booleans()):
        batch["token_type_ids"] = tensor(draw, other(), st.integers(0, TYPES - (not odd())), dtype())
    if draw(st.booleans()):
        additive = st.sampled_from([0.0, -10000.0])                        # HF's additive masks
        values = draw(st.sampled_from([additive, st.integers(-1, 2)])) if odd() else st.integers(0, 1)
        batch["attention_mask"] = tensor(draw, other(), values, draw(st.sampled_from(
            [torch.int64, torch.bool, torch.float32])))
    if draw(st.booleans()):
        labels = st.sampled_from([IGNORE_INDEX, 0, 7, V - 1] + ([V, -1] if odd() else []))
        batch["mlm_labels"] = tensor(draw, other(), labels, dtype())
    if draw(st.booleans()):
        batch["sentence_labels"] = tensor(draw, (B + 1,) if odd() else (B,),
                                          st.integers(-1, 2) if odd() else st.integers(0, 1), dtype())
    return batch


def expected_valid(batch: dict) -> bool:
    """An oracle written independently of the model's checks."""
    ids = batch["input_ids"]
    B, N = ids.shape

    def ids_ok(t, high, ignore=None, dtypes=(torch.int64, torch.int32)):
        values = t[t != ignore] if ignore is not None else t
        return t.dtype in dtypes and (values.numel() == 0 or (
            values.min() >= 0 and values.max() < high))

    ok = B > 0 and N > 0 and N <= MAX_LEN and ids_ok(ids, V)
    if "token_type_ids" in batch:
        ok &= batch["token_type_ids"].shape == ids.shape and ids_ok(batch["token_type_ids"], TYPES)
    if "attention_mask" in batch:
        mask = batch["attention_mask"]
        ok &= mask.shape == ids.shape and bool(((mask == 0) | (mask == 1)).all())
    if "mlm_labels" in batch:
        ok &= batch["mlm_labels"].shape == ids.shape and ids_ok(batch["mlm_labels"], V, IGNORE_INDEX,
                                                                              (torch.int64,))
    if "sentence_labels" in batch:
        ok &= batch["sentence_labels"].shape == (B,) and ids_ok(batch["sentence_labels"], 2, None,
                                                                   (torch.int64,))
    return bool(ok)


@fuzz(500)
@given(batches())
def test_checked_batches_give_finite_agreeing_outputs_or_a_named_error(twins, batch):
    math_model, sdpa_model = twins
    valid = expected_valid(batch)
    try:
        check_batch(math_model.config, **batch)
    except ValueError as e:
        event("refused")
        assert not valid, f"valid batch refused: {e}"
        assert any(name in str(e) for name in (*batch, "empty batch", "sequence length")), str(e)
        return
    event("accepted")
    assert valid, f"invalid batch accepted: {batch}"
    with torch.no_grad():
        out, twin = math_model(**batch), sdpa_model(**batch)
    for a, b in ((out.last_hidden_state, twin.last_hidden_state), (out.mlm_logits, twin.mlm_logits)):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    if out.loss is not None:
        assert torch.isfinite(out.loss)


# ---------------------------------------------------------------------------- texts
@pytest.fixture(scope="module")
def tok():
    return Tokenizer.train(SENTENCES, vocab_size=120)


texts = st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(st.characters(), st.sampled_from(["\ud800", "\udfff", "[MASK]", "  ", "é"])),
             max_size=30).map("".join),
    st.sampled_from(SENTENCES),
    st.one_of(st.none(), st.integers(), st.binary(max_size=8)))


@fuzz(200)
@given(texts)
def test_texts_encode_to_valid_ids_or_a_named_error(tok, text):
    encodable = isinstance(text, str) and not any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    try:
        ids = tok.encode(text)
    except ValueError as e:
        assert not encodable and ("str" in str(e) or "surrogate" in str(e)), str(e)
        return
    assert encodable
    assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids)
    assert len(tok.pieces(text)) == len(ids)
    assert isinstance(tok.decode(ids), str)
    pair, types = tok.encode_pair(text, text, max_len=16)
    assert len(pair) == len(types) <= 16 and set(types) <= {0, 1}


# ---------------------------------------------------------------------------- damaged files
@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished run with two checkpoints (steps 1 and 2)."""
    out = tmp_path_factory.mktemp("run")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    pretrain(TINY, args(steps=2, warmup=0, checkpoint_every=1, eval_every=0), synthetic_examples(16),
             options=RunOptions(out_dir=out, progress=False))
    torch.set_num_threads(threads)
    return out


def damage(draw, path: Path) -> None:
    """Flip, cut, extend, empty or delete a file, as disks, copies and editors do."""
    size = path.stat().st_size
    how = draw(st.sampled_from(["flip", "flip", "truncate", "append", "empty", "delete"]))
    if how == "delete":
        path.unlink()
        return
    raw = bytearray(path.read_bytes())
    if how == "flip":
        for _ in range(draw(st.integers(1, 4))):
            raw[draw(st.integers(0, size - 1))] ^= 1 << draw(st.integers(0, 7))
    elif how == "truncate":
        raw = raw[:draw(st.integers(0, size - 1))]
    elif how == "append":
        raw += draw(st.binary(min_size=1, max_size=16))
    else:
        raw = b""
    path.write_bytes(bytes(raw))


@fuzz(100)
@given(st.data())
def test_damaged_checkpoints_are_named_and_the_previous_one_still_loads(run_dir, data):
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(shutil.copytree(run_dir, Path(tmp) / "run"))
        latest = find_checkpoint(run)
        name = data.draw(st.sampled_from([*CHECKPOINT_FILES, MANIFEST, "latest"]))
        target = run / "checkpoints" / "latest" if name == "latest" else latest / name
        damage(data.draw, target)
        try:
            model = load_checkpoint(run)
        except (ValueError, FileNotFoundError) as e:
            assert name in str(e) and "\n" not in str(e), str(e)
        else:                   # a harmless change (e.g. a newline cut): the model latest names, intact
            original = load_checkpoint(run_dir / "checkpoints" / find_checkpoint(run).name).state_dict()
            for k, v in model.state_dict().items():
                assert torch.equal(original[k], v), k
        earlier = load_checkpoint(run / "checkpoints" / "step-000001")      # nothing lost
        assert all(torch.isfinite(p).all() for p in earlier.parameters())


@pytest.fixture(scope="module")
def cache_files(tmp_path_factory):
    """A checksummed cache file and a pretraining-data file, with their original contents."""
    root = tmp_path_factory.mktemp("cache")
    checked = download.write_checked(root / "corpus.json", b'[{"title": "t", "sentences": ["a.", "b."]}]')
    data = root / "data.safetensors"
    examples = synthetic_examples(8)
    PretrainingDataset(*_flat(examples), objective="sop", max_seq_len=32).save(data)
    return {checked: checked.read_bytes(), data: data.read_bytes()}, PretrainingDataset.load(data)


def _flat(examples):
    lengths = torch.tensor([len(e["input_ids"]) for e in examples])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    return (torch.cat([e["input_ids"] for e in examples]), torch.cat([e["token_type_ids"] for e in examples]),
            torch.cat([e["mlm_labels"] for e in examples]), offsets,
            torch.stack([e["sentence_label"] for e in examples]))


@fuzz(50)
@given(st.data())
def test_damaged_cache_files_are_never_used(cache_files, data):
    files, original = cache_files
    with tempfile.TemporaryDirectory() as tmp:
        originals = {}
        for path, raw in files.items():
            copy = Path(tmp) / path.name
            copy.write_bytes(raw)
            originals[copy] = raw
            if path.suffix == ".json":
                shutil.copy(path.with_name(path.name + ".sha256"), Path(tmp))
        checked, dataset = originals
        target = data.draw(st.sampled_from([checked, dataset, checked.with_name("corpus.json.sha256")]))
        damage(data.draw, target)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = download.read_checked(checked)
        assert got is None or got == originals[checked]
        try:
            loaded = PretrainingDataset.load(dataset) if dataset.exists() else None
        except ValueError as e:
            assert str(dataset) in str(e)
        else:                   # a harmless change (e.g. header padding): exactly the saved dataset
            if loaded is not None:
                assert (loaded.objective, loaded.max_seq_len) == (original.objective, original.max_seq_len)
                for k, v in original._tensors().items():
                    assert torch.equal(loaded._tensors()[k], v), k
