"""ALBERT's pretraining examples: n-gram masking, SOP/NSP/MLM segments, caching and collation."""

import random
from collections import Counter

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minialbert import AlbertConfig, AlbertForPretraining
from minialbert.corpus import Document
from minialbert.course.data import course_pretraining_data
from minialbert.course.scale import SCALES
from minialbert.masking import (
    MaskingVocab,
    ngram_mask,
    ngram_probabilities,
    official_span_lengths,
    whole_words,
)
from minialbert.model import IGNORE_INDEX
from minialbert.pretraining_data import (
    COURSE_SEED,
    FORMAT_VERSION,
    PretrainingDataset,
    build_examples,
    collate,
    examples_from_token_documents,
    make_dataloader,
    unmasked_ids,
)
from minialbert.segments import OFFICIAL, TWO_SENTENCE_CHUNKS, length_balanced
from minialbert.tokenizer import CLS_ID, MASK_ID, PAD_ID, SEP_ID, Tokenizer

SPECIALS = set(range(5))
V = 4000
# synthetic vocabulary: ids divisible by 3 continue a word, the others start one
VOCAB = MaskingVocab.from_ids([i % 3 != 0 for i in range(V)], SPECIALS)


def unique_id_documents(n_docs=30, seed=0):
    """Documents whose tokens are all distinct and consecutive: an id tells its document and place."""
    rng, docs, next_id = random.Random(seed), [], 5
    for _ in range(n_docs):
        doc = []
        for _ in range(rng.randint(1, 9)):
            n = rng.randint(1, 14)
            doc.append(list(range(next_id, next_id + n)))
            next_id += n
        docs.append(doc)
    assert next_id < V
    return docs


def document_of(docs):
    return {tok: d for d, doc in enumerate(docs) for s in doc for tok in s}


def segments(example):
    """(A, B) token ids before masking, split at the [SEP]s."""
    ids = unmasked_ids(example).tolist()
    assert ids[0] == CLS_ID and ids[-1] == SEP_ID
    first_sep = ids.index(SEP_ID)
    assert example["token_type_ids"].tolist() == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
    return ids[1:first_sep], ids[first_sep + 1:-1]


def is_run(ids):
    return ids == list(range(ids[0], ids[0] + len(ids)))


# --------------------------------------------------------------------------- n-gram masking

def test_ngram_probabilities_are_the_papers():
    assert ngram_probabilities() == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    assert [round(p, 3) for p in ngram_probabilities()] == [0.545, 0.273, 0.182]


@settings(max_examples=200, deadline=None)
@given(body=st.lists(st.integers(0, V - 1), max_size=80), n_pad=st.integers(0, 10),
       seed=st.integers(0, 2**32 - 1), rate=st.sampled_from([0.0, 0.15, 0.5, 1.0]))
def test_masking_never_touches_specials_and_respects_the_budget(body, n_pad, seed, rate):
    ids = [CLS_ID] + body + [SEP_ID] + [PAD_ID] * n_pad
    m = ngram_mask(ids, VOCAB, random.Random(seed), mask_rate=rate)
    n_real = sum(t not in SPECIALS for t in ids)
    budget = max(1, round(n_real * rate)) if n_real and rate else 0
    chosen = [i for i, label in enumerate(m.mlm_labels) if label != IGNORE_INDEX]
    assert all(ids[i] not in SPECIALS for i in chosen)                     # never special or pad
    assert all(m.mlm_labels[i] == ids[i] for i in chosen)                  # labels are the originals
    assert all(m.input_ids[i] == ids[i] for i in range(len(ids)) if i not in chosen)
    assert all(m.input_ids[i] not in SPECIALS - {MASK_ID} for i in chosen)  # random ids are not specials
    assert len(chosen) <= budget
    if budget and min(len(w) for w in whole_words(ids, VOCAB)) <= budget:   # a word fits: some are chosen
        assert chosen
    assert sorted(p for s in m.spans for p in s.positions) == chosen       # spans do not overlap


@settings(max_examples=100, deadline=None)
@given(body=st.lists(st.integers(5, V - 1), min_size=1, max_size=60), seed=st.integers(0, 2**32 - 1))
def test_spans_are_whole_words_within_one_segment(body, seed):
    cut = len(body) // 2
    ids = [CLS_ID] + body[:cut] + [SEP_ID] + body[cut:] + [SEP_ID]
    m = ngram_mask(ids, VOCAB, random.Random(seed))
    for span in m.spans:
        lo, hi = span.positions[0], span.positions[-1]
        assert list(span.positions) == list(range(lo, hi + 1))               # contiguous
        assert SEP_ID not in ids[lo:hi + 1]                                   # inside one segment
        starts = [p for p in span.positions if VOCAB.is_word_start[ids[p]] or ids[p - 1] in SPECIALS]
        assert len(starts) == span.words and starts[0] == lo                  # n whole words ...
        assert hi + 1 == len(ids) or VOCAB.is_word_start[ids[hi + 1]] or ids[hi + 1] in SPECIALS  # ... ending


def test_masked_fraction_span_lengths_and_80_10_10_on_a_large_sample():
    rng = random.Random(0)
    spans, kinds, n_chosen, n_real = Counter(), Counter(), 0, 0
    for _ in range(300):
        body = [rng.randrange(5, V) for _ in range(rng.randint(300, 600))]
        ids = [CLS_ID] + body + [SEP_ID]
        m = ngram_mask(ids, VOCAB, rng)
        spans.update(s.words for s in m.spans)
        n_real += len(body)
        for orig, seen, label in zip(ids, m.input_ids, m.mlm_labels):
            if label != IGNORE_INDEX:
                n_chosen += 1
                kinds["mask" if seen == MASK_ID else "kept" if seen == orig else "random"] += 1
    assert n_chosen / n_real == pytest.approx(0.15, abs=0.002)
    total = sum(spans.values())                                              # ~ 25k spans
    observed = [spans[n] for n in (1, 2, 3)]
    expected = [p * total for p in ngram_probabilities()]
    chi2 = sum((o - e) ** 2 / e for o, e in zip(observed, expected))
    assert chi2 < 13.8, (observed, expected)                                 # p = 0.001, 2 dof
    assert kinds["mask"] / n_chosen == pytest.approx(0.8, abs=0.01)
    assert kinds["random"] / n_chosen == pytest.approx(0.1, abs=0.01)
    assert kinds["kept"] / n_chosen == pytest.approx(0.1, abs=0.01)


def test_masking_rejects_ids_outside_the_vocabulary():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        ngram_mask([CLS_ID, V + 7, SEP_ID], VOCAB, random.Random(0))


# --------------------------------------------------------------------------- segments

def test_sop_label_1_means_swapped_or_from_another_document_as_the_official_code_cuts():
    """Label 0: A then B of one document. Label 1: swapped, or (a chunk of one sentence) B from another
    document, as the official code does in SOP mode too; the earlier cut has only swaps."""
    docs = unique_id_documents()
    doc_of = document_of(docs)
    for segmenting, other_share in ((OFFICIAL, (0.01, 0.5)), (TWO_SENTENCE_CHUNKS, (0.0, 0.0))):
        ds = examples_from_token_documents(docs, VOCAB, "sop", max_seq_len=40, seed=1, dupe_factor=3,
                                           segmenting=segmenting)
        labels = ds.sentence_labels.tolist()
        assert 0.35 < sum(labels) / len(labels) < 0.65
        from_other = 0
        for example, label in zip(ds, labels):
            a, b = segments(example)
            assert is_run(a) and is_run(b)                        # contiguous text (ends may be trimmed)
            if {doc_of[t] for t in a + b} != {doc_of[a[0]]}:      # B from another document
                assert label == 1 and {doc_of[t] for t in b} != {doc_of[a[0]]}
                from_other += 1
                continue
            first, second = (b, a) if label == 1 else (a, b)
            assert first[-1] < second[0]                          # first really comes first
        assert other_share[0] <= from_other / len(labels) <= other_share[1], segmenting


def cell_counts(ds):
    """{(len A, len B): [pairs of label 0, pairs of label 1]}."""
    counts = {}
    for example in ds:
        a, b = segments(example)
        counts.setdefault((len(a), len(b)), [0, 0])[int(example["sentence_label"])] += 1
    return counts


def test_length_balanced_sop_pairs_leave_the_lengths_no_cue():
    docs = unique_id_documents(100, seed=3)
    doc_of = document_of(docs)
    plain = examples_from_token_documents(docs, VOCAB, "sop", max_seq_len=16, seed=1, dupe_factor=2)
    # The recipe's pairs carry a cue: some (len A, len B) cells hold mostly one label.
    assert sum(abs(zero - one) for zero, one in cell_counts(plain).values()) > 0.1 * len(plain)
    build = lambda: examples_from_token_documents(docs, VOCAB, "sop", max_seq_len=16, seed=1,  # noqa: E731
                                                  dupe_factor=2, balance_lengths=True)
    balanced = build()
    assert all(zero == one for zero, one in cell_counts(balanced).values())
    assert 0.5 * len(plain) < len(balanced) < len(plain)
    assert torch.equal(balanced.input_ids, build().input_ids)            # seeded
    for example in balanced:                                             # still sentence-order pairs
        a, b = segments(example)
        if len({doc_of[t] for t in a + b}) > 1:                          # B from another document
            assert int(example["sentence_label"]) == 1
            continue
        first, second = (b, a) if int(example["sentence_label"]) else (a, b)
        assert is_run(first) and is_run(second) and first[-1] < second[0]


def test_length_balanced_keeps_equal_labels_per_cell_and_checks_its_input():
    lengths = [(3, 5), (3, 5), (3, 5), (5, 3), (2, 2), (2, 2)]
    labels = [0, 0, 1, 1, 1, 1]
    kept = length_balanced(lengths, labels, random.Random(0))
    assert kept == sorted(kept) and 2 in kept and len(kept) == 2 and kept[0] in (0, 1)
    assert length_balanced(lengths, labels, random.Random(0)) == kept
    with pytest.raises(ValueError, match="6 length pairs for 5 labels"):
        length_balanced(lengths, labels[:5], random.Random(0))
    with pytest.raises(ValueError, match="labels 0 and 1, got \\[0, 2\\]"):
        length_balanced(lengths, [0, 2, 0, 0, 0, 0], random.Random(0))
    with pytest.raises(ValueError, match="objective 'mlm' has no pairs"):
        examples_from_token_documents(unique_id_documents(), VOCAB, "mlm", 40, 0, balance_lengths=True)


def test_nsp_negatives_come_from_another_document():
    docs = unique_id_documents()
    doc_of = document_of(docs)
    ds = examples_from_token_documents(docs, VOCAB, "nsp", max_seq_len=40, seed=2, dupe_factor=3)
    labels = ds.sentence_labels.tolist()
    assert 0.35 < sum(labels) / len(labels) < 0.65
    for example, label in zip(ds, labels):
        a, b = segments(example)
        assert is_run(a) and len({doc_of[t] for t in a}) == 1
        if label == 1:
            assert len({doc_of[t] for t in b}) == 1 and doc_of[b[0]] != doc_of[a[0]]
        else:
            assert is_run(b) and doc_of[b[0]] == doc_of[a[0]] and a[-1] < b[0]


@settings(max_examples=40, deadline=None)
@given(max_seq_len=st.integers(5, 48), objective=st.sampled_from(["mlm", "nsp", "sop"]),
       seed=st.integers(0, 1000))
def test_no_example_exceeds_max_seq_len(max_seq_len, objective, seed):
    docs = unique_id_documents(12, seed=seed)
    ds = examples_from_token_documents(docs, VOCAB, objective, max_seq_len, seed)
    assert len(ds) > 0 and int(ds.lengths.max()) <= max_seq_len
    assert (ds.sentence_labels is None) == (objective == "mlm")
    for example in ds:
        ids = example["input_ids"].tolist()
        assert ids[0] == CLS_ID and ids[-1] == SEP_ID
        assert ids.count(SEP_ID) == (1 if objective == "mlm" else 2) and MASK_ID not in unmasked_ids(example)


def test_short_sequences_about_10_percent_of_the_time():
    docs = [[[5 + (i * 7 + j) % 3000 for j in range(12)] for i in range(1000)] for _ in range(5)]
    ds = examples_from_token_documents(docs, VOCAB, "sop", max_seq_len=128, seed=0, dupe_factor=3)
    short = (ds.lengths < 128).float().mean().item()    # all but short targets and document tails fill 128
    assert 0.07 < short < 0.13


def test_same_seed_same_examples_other_seed_other_examples():
    docs = unique_id_documents()
    build = lambda seed: examples_from_token_documents(docs, VOCAB, "sop", 40, seed)  # noqa: E731
    a, b, c = build(7), build(7), build(8)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.mlm_labels, b.mlm_labels)
    assert torch.equal(a.sentence_labels, b.sentence_labels)
    assert a.input_ids.shape != c.input_ids.shape or not torch.equal(a.input_ids, c.input_ids)


# The examples' bytes, recorded when the recipe was last changed on purpose. Every zoo key names its data
# by the recipe, not by these bytes, so a speed-up that changed one byte would silently retrain nothing and
# train on other data: these must only change with FORMAT_VERSION.
RECIPE_SHA256 = {      # (objective, balance_lengths, segmenting): (examples, checksum)
    ("sop", False, TWO_SENTENCE_CHUNKS): (
        334, "99caeea1463bd9138f45d57aaba31e2b8462f474440f5184d088f5824b97dcc5"),
    ("nsp", False, TWO_SENTENCE_CHUNKS): (
        449, "90e64a5914e5ff334919c93e9ffcd3415b8e58429d2116e1c3914130ab5b359f"),
    ("sop", True, TWO_SENTENCE_CHUNKS): (
        98, "0f9c096214836157d0ddc417b97427984f7cc7289c14c14bb35ebee1a970dabc"),
    ("mlm", False, TWO_SENTENCE_CHUNKS): (
        415, "06b575cb2a661d0fbf85947c4c00c38946e46c02a0f375640ff7123f0c65d00d"),
    ("sop", False, OFFICIAL): (425, "afbee724bcf06cea7102f4743c2a69770e8be0028d5778170d8a81b1c097ae54"),
    ("nsp", False, OFFICIAL): (567, "18345c6d761f853bd4879ae027d184cff966be644e363c5732fc6a067f3d1ec4"),
    ("sop", True, OFFICIAL): (138, "0e3754d7469d75bee7bf44fbc6149ffeb17112ad51dccabc5d1300ba13337bb5"),
    ("mlm", False, OFFICIAL): (415, "06b575cb2a661d0fbf85947c4c00c38946e46c02a0f375640ff7123f0c65d00d"),
}


@pytest.mark.parametrize(("objective", "balance_lengths", "segmenting"), list(RECIPE_SHA256))
def test_the_recipe_gives_the_recorded_bytes(objective, balance_lengths, segmenting):
    """The earlier cut's bytes are those the shipped zoo was built from: unchanged by the official one."""
    rng = random.Random(7)
    docs = [[[rng.randrange(5, V) for _ in range(rng.randint(1, 40))] for _ in range(rng.randint(1, 12))]
            for _ in range(60)]
    ds = examples_from_token_documents(docs, VOCAB, objective, 64, COURSE_SEED, dupe_factor=3,
                                       balance_lengths=balance_lengths, segmenting=segmenting)
    assert FORMAT_VERSION == 3, "the recipe changed: record its new bytes here"
    assert (len(ds), ds.checksum()) == RECIPE_SHA256[objective, balance_lengths, segmenting]


def test_bad_settings_give_clear_errors():
    docs = unique_id_documents()
    with pytest.raises(ValueError, match="unknown objective"):
        examples_from_token_documents(docs, VOCAB, "mnli", 40, 0)
    with pytest.raises(ValueError, match="max_seq_len"):
        examples_from_token_documents(docs, VOCAB, "sop", 4, 0)
    with pytest.raises(ValueError, match="at least 2 documents"):
        examples_from_token_documents(docs[:1], VOCAB, "nsp", 40, 0)


# --------------------------------------------------------------------------- batches

def test_collate_pads_masks_and_feeds_the_model():
    ds = examples_from_token_documents(unique_id_documents(), VOCAB, "sop", 40, 0)
    examples = [ds[i] for i in range(6)]
    batch = collate(examples)
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "mlm_labels", "sentence_labels"}
    n = max(len(ex["input_ids"]) for ex in examples)
    assert batch["input_ids"].shape == batch["mlm_labels"].shape == (6, n)
    assert batch["sentence_labels"].shape == (6,) and batch["input_ids"].dtype == torch.long
    for b, ex in enumerate(examples):
        length = len(ex["input_ids"])
        assert batch["attention_mask"][b].tolist() == [1] * length + [0] * (n - length)
        assert torch.equal(batch["input_ids"][b, :length], ex["input_ids"])
        assert (batch["input_ids"][b, length:] == PAD_ID).all()
        assert (batch["mlm_labels"][b, length:] == IGNORE_INDEX).all()
        assert (batch["token_type_ids"][b, length:] == 0).all()
    cfg = AlbertConfig(vocab_size=V, embedding_size=8, hidden_size=16, num_layers=1, num_heads=2,
                       intermediate_size=32, max_position_embeddings=64)
    out = AlbertForPretraining(cfg, sentence_task="sop")(**batch)
    assert torch.isfinite(out.loss) and out.sentence_logits.shape == (6, 2)


def test_collate_mlm_has_no_sentence_labels_and_mixing_objectives_fails():
    mlm = examples_from_token_documents(unique_id_documents(), VOCAB, "mlm", 40, 0)
    sop = examples_from_token_documents(unique_id_documents(), VOCAB, "sop", 40, 0)
    assert "sentence_labels" not in collate([mlm[0], mlm[1]])
    with pytest.raises(ValueError, match="sentence_label"):
        collate([mlm[0], sop[0]])


def test_dataloader_order_is_seeded_and_drop_last_is_checked():
    ds = examples_from_token_documents(unique_id_documents(), VOCAB, "sop", 40, 0)
    first = lambda seed: next(iter(make_dataloader(ds, 4, seed=seed)))["input_ids"]  # noqa: E731
    assert torch.equal(first(3), first(3)) and not torch.equal(first(3), first(4))
    ordered = next(iter(make_dataloader(ds, 4, shuffle=False)))
    assert torch.equal(ordered["input_ids"][0, :len(ds[0]["input_ids"])], ds[0]["input_ids"])
    assert len(make_dataloader(ds, 4)) == len(ds) // 4
    with pytest.raises(ValueError, match="fewer than batch_size"):
        make_dataloader(ds, len(ds) + 1)


# --------------------------------------------------------------------------- building and caching

@pytest.fixture(scope="module")
def tiny_tokenizer():
    rng = random.Random(0)           # made-up words of 1-4 syllables: many split into several pieces
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(300)]
    sentences = [" ".join(rng.choices(words, k=rng.randint(4, 12))).capitalize() + "." for _ in range(600)]
    return Tokenizer.train(sentences, vocab_size=200), sentences


@pytest.fixture
def documents(tiny_tokenizer):
    sentences = tiny_tokenizer[1]
    return [Document(f"doc{d}", tuple(sentences[d * 10:(d + 1) * 10])) for d in range(40)]


def test_build_examples_masks_whole_sentencepiece_words(tiny_tokenizer, documents, monkeypatch, tmp_path):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    tok = tiny_tokenizer[0]
    ds = build_examples(documents, tok, "sop", max_seq_len=48, seed=0, cache=False)
    starts = tok.word_start_mask().tolist()
    assert not list(tmp_path.rglob("*.safetensors"))
    for example in ds:
        original, chosen = unmasked_ids(example).tolist(), (example["mlm_labels"] != IGNORE_INDEX).tolist()
        for p in range(1, len(original) - 1):        # a masked word is masked from its start to its end
            if chosen[p] and not starts[original[p]] and original[p - 1] not in SPECIALS:
                assert chosen[p - 1]
            if chosen[p] and not starts[original[p + 1]] and original[p + 1] not in SPECIALS:
                assert chosen[p + 1]


def _assert_same(a: PretrainingDataset, b: PretrainingDataset):
    for name, t in a._tensors().items():
        assert torch.equal(t, b._tensors()[name]) and t.dtype == b._tensors()[name].dtype
    assert (a.objective, a.max_seq_len) == (b.objective, b.max_seq_len)


def test_cache_round_trip_equals_fresh_build(tiny_tokenizer, documents, monkeypatch, tmp_path):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    tok = tiny_tokenizer[0]
    fresh = build_examples(documents, tok, "nsp", 48, seed=0, cache=False)
    first = build_examples(documents, tok, "nsp", 48, seed=0)
    files = list((tmp_path / "pretraining").glob("*.safetensors"))
    assert len(files) == 1
    _assert_same(fresh, first)
    monkeypatch.setattr("minialbert.pretraining_data.examples_from_token_documents",
                        lambda *a, **k: pytest.fail("rebuilt although a valid cache exists"))
    _assert_same(fresh, build_examples(documents, tok, "nsp", 48, seed=0))
    monkeypatch.undo()
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    build_examples(documents, tok, "nsp", 48, seed=1)             # another setting: another file
    build_examples(documents[:-1], tok, "nsp", 48, seed=0)        # other documents: another file
    assert len(list((tmp_path / "pretraining").glob("*.safetensors"))) == 3


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "garbage"])
def test_a_corrupt_cache_is_reported_and_rebuilt(tiny_tokenizer, documents, monkeypatch, tmp_path, damage):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    tok = tiny_tokenizer[0]
    fresh = build_examples(documents, tok, "sop", 48, seed=0)
    (path,) = (tmp_path / "pretraining").glob("*.safetensors")
    data = bytearray(path.read_bytes())
    if damage == "flip a byte":
        data[-3] ^= 0xFF                         # inside the tensor data: only the checksum sees it
    elif damage == "truncate":
        data = data[:len(data) // 2]
    else:
        data = bytearray(b"not a safetensors file")
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="delete it to rebuild"):
        PretrainingDataset.load(path)
    with pytest.warns(UserWarning, match="rebuilding"):
        rebuilt = build_examples(documents, tok, "sop", 48, seed=0)
    _assert_same(fresh, rebuilt)
    _assert_same(fresh, PretrainingDataset.load(path))           # the good file is back


def test_a_cache_whose_metadata_breaks_its_names_promise_is_rebuilt(tiny_tokenizer, documents, monkeypatch,
                                                                    tmp_path):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    fresh = build_examples(documents, tiny_tokenizer[0], "sop", 48, seed=0)
    (path,) = (tmp_path / "pretraining").glob("*.safetensors")
    t = fresh._tensors()
    PretrainingDataset(t["input_ids"], t["token_type_ids"], t["mlm_labels"], t["offsets"],
                       t["sentence_labels"], "sop", 64).save(path)      # valid checksum, other max_seq_len
    with pytest.warns(UserWarning, match="not the sop / 48 its name promises; rebuilding"):
        _assert_same(fresh, build_examples(documents, tiny_tokenizer[0], "sop", 48, seed=0))


def test_course_pretraining_data_wires_scale_corpus_and_tokenizer(tiny_tokenizer, documents, monkeypatch,
                                                                   tmp_path):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    calls = []
    monkeypatch.setattr("minialbert.course.data.documents",
                        lambda corpus, split, max_documents: calls.append((corpus, split, max_documents))
                        or documents)
    monkeypatch.setattr("minialbert.course.data.course_tokenizer", lambda scale: tiny_tokenizer[0])
    for name in ("ci", "course"):
        scale = SCALES[name]
        ds = course_pretraining_data("nsp", "valid", scale.data)
        assert calls.pop() == (scale.data.corpus, "valid", scale.data.max_documents)  # the scale's own corpus
        assert ds.objective == "nsp" and ds.max_seq_len == scale.data.max_seq_len
        fresh = build_examples(documents, tiny_tokenizer[0], "nsp", scale.data.max_seq_len, COURSE_SEED,
                               dupe_factor=scale.data.dupe_factor, cache=False)
        _assert_same(fresh, ds)
    assert SCALES["ci"].data.corpus == "pydocs" and SCALES["course"].data.corpus == "course"


@pytest.mark.parametrize("objective", ["mlm", "nsp", "sop"])
def test_every_example_names_the_document_its_first_segment_comes_from(objective):
    docs = [[[100 * (d + 1) + i] * 3 for i in range(8)] for d in range(6)]   # doc d: 100 (d + 1) + i
    vocab = MaskingVocab.from_ids([True] * 700, {PAD_ID, 1, CLS_ID, SEP_ID, MASK_ID})
    data = examples_from_token_documents(docs, vocab, objective, 16, seed=0, dupe_factor=2)
    assert data.document_ids.shape == (len(data),)
    for i in range(len(data)):
        ids = unmasked_ids(data[i])
        first = ids[1:(data[i]["token_type_ids"] == 0).sum() - 1]            # segment A
        assert set((first // 100 - 1).tolist()) == {int(data.document_ids[i])}


def test_the_official_placement_keeps_the_budget_and_makes_long_spans_rarer_than_ngram_mask():
    """Lesson 04's comparison: the official rule (shuffled starts, overlapping spans skipped) stays within
    the budget, repeats with its seed, and realises fewer 3-word spans than p(n) and than ngram_mask."""
    vocab = MaskingVocab.from_ids([True] * 50, {PAD_ID, 1, CLS_ID, SEP_ID, MASK_ID})
    draw = random.Random(0)
    sequences = [[CLS_ID] + [draw.randrange(5, 50) for _ in range(40)] + [SEP_ID] for _ in range(300)]
    official, ours = Counter(), Counter()
    for i, ids in enumerate(sequences):
        lengths = official_span_lengths(ids, vocab, random.Random(i))
        assert lengths == official_span_lengths(ids, vocab, random.Random(i))
        assert set(lengths) <= {1, 2, 3} and sum(lengths) <= round(40 * 0.15)    # one-piece words
        official.update(lengths)
        ours.update(s.words for s in ngram_mask(ids, vocab, random.Random(i)).spans)
    share = {name: c[3] / sum(c.values()) for name, c in (("official", official), ("ours", ours))}
    assert share["official"] < share["ours"] and share["official"] < ngram_probabilities(3)[2]
