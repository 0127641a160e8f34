"""The SentencePiece tokenizer: ALBERT's special ids and normalisation, round trips, pair layout,
deterministic training, the cached course tokenizer and clear errors for bad model files. The WordPiece
tokenizer: the same ids and pairs as transformers' BertTokenizer, and clear errors for bad vocab.txt files."""

import hashlib
import io
import os
import random
import string
import subprocess
import sys
import unicodedata

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minialbert.corpus import pydocs_documents
from minialbert.course.data import course_tokenizer
from minialbert.course.scale import current_scale
from minialbert.tokenizer import (
    CLS_ID,
    MASK_ID,
    PAD_ID,
    SEP_ID,
    UNK_ID,
    Tokenizer,
    WordPieceTokenizer,
    normalize,
)

WORDS = ("the a module class function returns raises value error list dict string bytes file socket "
         "object method attribute default argument keyword number integer float encoding decoding "
         "parser token thread process queue lock event timeout buffer stream reader writer path name "
         "python interpreter import package archive compressed binary text network server client").split()
SENTENCES = [" ".join(random.Random(i).choices(WORDS, k=8)).capitalize() + "." for i in range(400)]


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.train(SENTENCES, vocab_size=120)


def test_special_ids_are_albert_s(tok):
    assert (PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID) == (0, 1, 2, 3, 4)
    assert [tok.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert tok.special_ids == {0, 1, 2, 3, 4} and tok.vocab_size == len(tok) == 120
    # control symbols have fixed ids but are never produced from text
    assert not set(tok.encode("[CLS] [SEP] [MASK] <pad> <unk>")) & tok.special_ids


def test_normalize_lowercases_and_strips_accents():
    assert normalize("  Café  NAÏVE\tÅngström ``quoted''  ") == 'cafe naive angstrom "quoted"'
    assert normalize("") == ""
    assert normalize("Plain ASCII, Mixed Case:  ok") == "plain ascii, mixed case: ok"   # the ASCII fast path


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet=string.printable, max_size=40),
                 st.text(alphabet=st.characters(codec="utf-8"), max_size=40)))
def test_normalize_fast_path_matches_the_full_rule(text):
    collapsed = unicodedata.normalize("NFKD", " ".join(text.split()).replace("``", '"').replace("''", '"'))
    full = "".join(c for c in collapsed if not unicodedata.combining(c)).lower()
    assert normalize(text) == full


def test_decode_skips_pad_cls_sep_and_shows_mask(tok):
    json, module = tok.encode("json"), tok.encode("module")
    assert tok.decode([CLS_ID, *json, *module, SEP_ID, PAD_ID, PAD_ID]) == "json module"
    assert tok.decode([CLS_ID, *json, MASK_ID, *module, SEP_ID]) == "json [MASK] module"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([120])


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=string.ascii_letters + string.digits + string.punctuation + " \t\n", max_size=80))
def test_round_trip_ascii(tok, text):
    # every printable ASCII character has a piece, so ASCII round-trips up to normalisation
    assert tok.decode(tok.encode(text)).split() == normalize(text).split()
    assert UNK_ID not in tok.encode(text)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_unicode_never_crashes(tok, text):
    ids = tok.encode(text)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert isinstance(tok.decode(ids), str) and len(tok.pieces(text)) == len(ids)


def test_empty_string(tok):
    assert tok.encode("") == [] and tok.pieces("") == [] and tok.decode([]) == ""
    assert tok.encode_pair("", "") == ([CLS_ID, SEP_ID, SEP_ID], [0, 0, 1])


def test_pair_layout_and_token_types(tok):
    a, b = tok.encode("json module"), tok.encode("binary objects")
    ids, types = tok.encode_pair("json module", "binary objects")
    assert ids == [CLS_ID, *a, SEP_ID, *b, SEP_ID]
    assert types == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert tok.encode_pair(a) == ([CLS_ID, *a, SEP_ID], [0] * (len(a) + 2))


@given(st.integers(0, 40), st.integers(0, 40), st.integers(5, 50))
def test_pair_truncation_removes_from_the_longer_side(tok, n_a, n_b, max_len):
    a, b = list(range(10, 10 + n_a)), list(range(60, 60 + n_b))   # ids below vocab_size 120
    ids, types = tok.encode_pair(a, b, max_len=max_len)
    assert len(ids) == len(types) <= max_len
    kept_a, kept_b = types.count(0) - 2, types.count(1) - 1
    assert ids[1:1 + kept_a] == a[:kept_a] and ids[2 + kept_a:-1] == b[:kept_b]     # prefixes kept
    if n_a + n_b + 3 > max_len:
        assert len(ids) == max_len
        assert abs(kept_a - kept_b) <= 1 or min(kept_a, kept_b) == min(n_a, n_b)   # longer side cut
    else:
        assert (kept_a, kept_b) == (n_a, n_b)


def test_pair_max_len_too_small(tok):
    with pytest.raises(ValueError, match="max_len 3"):
        tok.encode_pair("a", "b", max_len=3)


def test_word_start_mask(tok):
    mask = tok.word_start_mask()
    assert mask.dtype == torch.bool and mask.shape == (tok.vocab_size,)
    assert not mask[sorted(tok.special_ids)].any()
    for i in range(5, tok.vocab_size):
        assert bool(mask[i]) == tok.id_to_piece(i).startswith("\u2581")
    pieces = tok.pieces("json module")
    assert mask[tok.piece_to_id(pieces[0])]


def test_training_is_deterministic_and_saves(tmp_path):
    path = tmp_path / "a.model"
    first = Tokenizer.train(SENTENCES, vocab_size=100, path=path)
    second = Tokenizer.train(SENTENCES, vocab_size=100)
    assert first.model_proto == second.model_proto
    assert Tokenizer.load(path).model_proto == first.model_proto
    assert [p.name for p in tmp_path.iterdir()] == ["a.model"]                    # no temp files left


def test_models_trained_side_by_side_in_threads_are_the_bytes_of_one_by_one():
    # vocab_sweep (lesson 01, make figures) trains its sizes in threads: SentencePiece releases
    # Python's lock while it trains, and the models must not notice each other.
    from concurrent.futures import ThreadPoolExecutor

    def model_bytes(vocab_size):
        return Tokenizer.train(SENTENCES, vocab_size=vocab_size).model_proto

    sizes = [90, 100, 110, 120]
    alone = [model_bytes(v) for v in sizes]
    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(model_bytes, sizes)) == alone


def test_vocab_too_large_for_corpus_is_a_clear_error():
    with pytest.raises(ValueError, match="smaller vocab_size"):
        Tokenizer.train(SENTENCES[:3], vocab_size=5000)
    with pytest.raises(ValueError, match="too small"):
        Tokenizer.train(SENTENCES, vocab_size=5)


def test_bogus_model_files(tmp_path):
    bogus = tmp_path / "bogus.model"
    bogus.write_bytes(b"this is not a sentencepiece model")
    with pytest.raises(ValueError, match="bogus.model: not a SentencePiece model"):
        Tokenizer.load(bogus)
    with pytest.raises(FileNotFoundError, match="no tokenizer model"):
        Tokenizer.load(tmp_path / "missing.model")


def test_model_with_other_special_ids_is_rejected(tmp_path):
    import sentencepiece as spm

    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SENTENCES), model_writer=writer, vocab_size=100,
                                   minloglevel=2)       # SentencePiece defaults: <unk>=0, <s>=1, </s>=2
    path = tmp_path / "other.model"
    path.write_bytes(writer.getvalue())
    with pytest.raises(ValueError, match="wrong special pieces"):
        Tokenizer.load(path)


def test_course_tokenizer_is_cached(monkeypatch, tmp_path):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    scale = current_scale("ci")
    tok = course_tokenizer(scale.data)
    assert tok.vocab_size == scale.data.vocab_size
    models = list((tmp_path / "tokenizers").glob("*.model"))
    assert len(models) == 1
    # a new process finds the cached model and loads it quickly, with the same vocabulary
    code = ("import time; from minialbert.course.scale import current_scale; "
            "from minialbert.course.data import course_tokenizer; t = time.perf_counter(); "
            "tok = course_tokenizer(current_scale('ci').data); print(time.perf_counter() - t); "
            "print(tok.model_proto.hex())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "MINIALBERT_CACHE": str(tmp_path)}).stdout.split()
    assert float(out[0]) < 2.0, f"cache hit took {out[0]} s"
    assert bytes.fromhex(out[1]) == tok.model_proto
    assert list((tmp_path / "tokenizers").glob("*.model")) == models
    docs = pydocs_documents("train", max_documents=scale.data.max_documents)
    assert tok.encode(docs[0].sentences[0])                                         # it tokenizes the corpus


# ---------------------------------------------------------------------------------- WordPiece
# A small BERT-style vocabulary: specials first (ids 0..4 in a different order from BERT's, to check
# they are read from the file), a few words, pieces, punctuation and two CJK ideographs.
WORDPIECE_VOCAB = ["[UNK]", "[PAD]", "[SEP]", "[CLS]", "[MASK]", "[unused0]", "the", "hello", "world", "cafe",
                   "naive", "un", "##aff", "##able", "run", "##ning", "python", "##s", "don", "t", "'", ",",
                   ".", "!", "?", "$", "(", ")", "5", "##0", "中", "文", "a", "b", "c", "##a", "##b", "##c"]
TRICKY_TEXTS = [
    "Héllo, WÖRLD!", "Café NAÏVE", "cafe\u0301 e\u0301",                 # accents, composed or combining
    "unaffable Unaffable UNAFFABLE", "Running pythons", "don't ($5.00)?!",  # pieces, punctuation
    "xyz hellox the", "unaff", "¿¡hello!? «world» — 'the'",                   # unknown words, Unicode P*
    "a" * 100, "a" * 101, "ab" * 60,                                          # the 100-character limit
    "中文abc中文", "hello中world", "日本",                                    # CJK ideographs
    "  hello \t\n world \u3000 the\u00a0cafe ", "hello\u2028world", "", "   ",   # whitespace
    "hel\x00lo\x07 wor\u200bld\ufffd the\x85", "ﬁ ① Ⅷ", "$^`~{|}@#%&*+-/:;<=>[\\]_",   # control, symbols
]


@pytest.fixture
def vocab_txt(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(WORDPIECE_VOCAB) + "\n", encoding="utf-8")
    return path


def test_wordpiece_special_ids_come_from_the_file(vocab_txt):
    wp = WordPieceTokenizer.load(vocab_txt)
    assert (wp.unk_id, wp.pad_id, wp.sep_id, wp.cls_id, wp.mask_id) == (0, 1, 2, 3, 4)
    assert wp.vocab_size == len(wp) == len(WORDPIECE_VOCAB) and wp.special_ids == {0, 1, 2, 3, 4}
    assert set(wp.encode("[CLS] [SEP] [MASK] [PAD] [UNK]")) == {wp.unk_id}     # never made from text


def test_wordpiece_pieces_and_decode(vocab_txt):
    wp = WordPieceTokenizer.load(vocab_txt)
    assert wp.pieces("Unaffable, RUNNING!") == ["un", "##aff", "##able", ",", "run", "##ning", "!"]
    assert wp.pieces("Héllo 中文x") == ["hello", "中", "文", "[UNK]"]
    assert wp.pieces("a" * 100) == ["a"] + ["##a"] * 99 and wp.pieces("a" * 101) == ["[UNK]"]
    ids = wp.encode("unaffable hello")
    assert wp.decode(ids) == "unaffable hello"
    assert wp.decode([wp.cls_id, *ids, wp.sep_id, wp.pad_id]) == "[CLS] unaffable hello [SEP] [PAD]"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        wp.decode([len(WORDPIECE_VOCAB)])
    assert WordPieceTokenizer.load(vocab_txt, lowercase=False).pieces("Hello hello") == ["[UNK]", "hello"]


def test_wordpiece_ids_match_transformers(vocab_txt):
    transformers = pytest.importorskip("transformers")
    ours = WordPieceTokenizer.load(vocab_txt)
    ref = transformers.BertTokenizer(str(vocab_txt), do_lower_case=True)
    for text in TRICKY_TEXTS:
        assert ours.encode(text) == ref.convert_tokens_to_ids(ref.tokenize(text)), repr(text)


def test_wordpiece_encode_pair_matches_transformers(vocab_txt):
    transformers = pytest.importorskip("transformers")
    ours = WordPieceTokenizer.load(vocab_txt)
    ref = transformers.BertTokenizer(str(vocab_txt), do_lower_case=True)
    for a, b in [("Héllo, WÖRLD!", "unaffable cafe"), ("中文abc", "don't"), ("xyz", "the the the")]:
        expected = ref(a, b)
        assert ours.encode_pair(a, b) == (expected["input_ids"], expected["token_type_ids"])
        expected = ref(a)
        assert ours.encode_pair(a) == (expected["input_ids"], expected["token_type_ids"])
    for n_a in range(1, 7):
        for n_b in range(1, 7):
            a, b = " ".join(["hello"] * n_a), " ".join(["world"] * n_b)
            for max_len in range(5, 16):
                ids, types = ours.encode_pair(a, b, max_len=max_len)
                room = max_len - 3                          # ids left for the two segments
                if n_a > n_b and 2 * n_b > room and room % 2:
                    # Both segments are cut to a tie and one more id must go: we cut A, BERT cuts B.
                    assert (types.count(0) - 2, types.count(1) - 1) == (room // 2, room - room // 2)
                    continue
                want = ref(a, b, truncation=True, max_length=max_len)
                assert (ids, types) == (want["input_ids"], want["token_type_ids"]), (n_a, n_b, max_len)
            expected = ref(a, truncation=True, max_length=n_b + 2)
            assert ours.encode_pair(a, max_len=n_b + 2) == (expected["input_ids"], expected["token_type_ids"])
    with pytest.raises(ValueError, match="max_len 4"):
        ours.encode_pair("a", "b", max_len=4)


def test_wordpiece_bad_vocab_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no WordPiece vocabulary at .*missing.txt"):
        WordPieceTokenizer.load(tmp_path / "missing.txt")
    no_mask = tmp_path / "no_mask.txt"
    no_mask.write_text("\n".join(t for t in WORDPIECE_VOCAB if t != "[MASK]"))
    with pytest.raises(ValueError, match=r"no_mask.txt: .*lacks the special tokens \[MASK\]") as e:
        WordPieceTokenizer.load(no_mask)
    assert "\n" not in str(e.value)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    with pytest.raises(ValueError, match="binary.txt: not a WordPiece vocabulary"):
        WordPieceTokenizer.load(binary)


def test_shipped_tokenizer_is_the_recorded_file_trained_on_the_recorded_corpus(monkeypatch):
    from minialbert.corpus import COURSE_CORPUS_SHA256
    from minialbert.course.data import SHIPPED_TOKENIZERS, shipped_tokenizer_path
    from minialbert.course.scale import SCALES

    assert ("course", SCALES["course"].data.vocab_size) in SHIPPED_TOKENIZERS
    for (corpus, _), (_, corpus_digest) in SHIPPED_TOKENIZERS.items():
        assert corpus == "course" and corpus_digest == COURSE_CORPUS_SHA256   # a new corpus needs a retrain
    scale = SCALES["course"]
    path = shipped_tokenizer_path(scale.data)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SHIPPED_TOKENIZERS["course", 4000][0]
    # the course scale loads it without reading (or building) the corpus
    monkeypatch.setattr("minialbert.course.data.documents",
                        lambda *a: pytest.fail("the corpus was read"))
    tok = course_tokenizer(scale.data)
    assert tok.vocab_size == scale.data.vocab_size == 4000
    text = "The model returns a list of strings."
    assert tok.decode(tok.encode(text)) == text.lower()
    assert shipped_tokenizer_path(scale.replace(max_documents=10).data) is None   # a sample: trained


def test_a_damaged_or_missing_shipped_tokenizer_is_a_one_line_error(monkeypatch, tmp_path):
    from minialbert.course.scale import SCALES

    monkeypatch.setattr("minialbert.course.data.SHIPPED_DIR", tmp_path)
    with pytest.raises(ValueError, match=r"course-4000.model is missing .*restore it"):
        course_tokenizer(SCALES["course"].data)
    (tmp_path / "course-4000.model").write_bytes(b"\x00not a model")
    with pytest.raises(ValueError, match=r"course-4000.model is damaged"):
        course_tokenizer(SCALES["course"].data)


def test_retraining_the_shipped_tokenizer_gives_the_same_bytes():
    """Needs the course corpus (a download and minutes of parsing): runs where it is already built,
    e.g. after `make figures`; `python -m minialbert tokenizer --verify` is the same check."""
    from minialbert.corpus import course_corpus_cached
    from minialbert.course.data import SHIPPED_TOKENIZERS, train_course_tokenizer
    from minialbert.course.scale import SCALES

    if not course_corpus_cached():
        pytest.skip("the course corpus is not built here (python -m minialbert.corpus builds it)")
    retrained = train_course_tokenizer(SCALES["course"].data).model_proto
    assert hashlib.sha256(retrained).hexdigest() == SHIPPED_TOKENIZERS["course", 4000][0]


def test_cli_says_where_the_tokenizer_comes_from(capsys, monkeypatch, tmp_path):
    from minialbert.course.commands import main

    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    assert main(["tokenizer", "--scale", "course"]) == 0
    assert "course scale: 4,000 pieces, shipped at" in capsys.readouterr().out
    assert main(["tokenizer", "--scale", "ci", "--verify"]) == 2
    captured = capsys.readouterr()
    assert "trained on the pydocs corpus and cached" in captured.out
    assert "no tokenizer is shipped for the ci scale" in captured.err
