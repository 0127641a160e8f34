"""Corpora: the embedded pydocs corpus (cleaning, splits, determinism, cache), the sentence
splitter, and WikiText parsing and streaming from files served on loopback."""

import hashlib
import sys
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_download import loopback_server

from minialbert import corpus
from minialbert.corpus import (
    SPLITS,
    Document,
    clean_paragraphs,
    corpus_stats,
    documents,
    pydocs_documents,
    split_of,
    split_sentences,
    wikitext_documents,
    wikitext_lines_to_documents,
)
from minialbert.download import DownloadError


@pytest.fixture(scope="module")
def pydocs_cache(tmp_path_factory):
    """One temporary cache for this module: the corpus is parsed once (a few seconds)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINIALBERT_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield {split: pydocs_documents(split) for split in SPLITS}


def test_pydocs_has_documents_of_prose(pydocs_cache):
    stats = corpus_stats(pydocs_cache["train"])
    assert stats["documents"] > 500 and stats["sentences"] > 5000 and stats["words"] > 50_000
    assert any(d.title.startswith("topic:") for d in pydocs_cache["train"])       # pydoc_data topics
    assert any(d.title.startswith("json") for s in SPLITS for d in pydocs_cache[s])  # stdlib docstrings
    for split in SPLITS:
        for doc in pydocs_cache[split]:
            assert len(doc.sentences) >= 2
            for s in doc.sentences:
                assert ">>>" not in s and "::=" not in s and s == " ".join(s.split()), (doc.title, s)


def test_pydocs_splits_are_disjoint_and_stable(pydocs_cache):
    titles = {split: {d.title for d in pydocs_cache[split]} for split in SPLITS}
    assert not titles["train"] & titles["valid"] and not titles["train"] & titles["test"]
    assert not titles["valid"] & titles["test"]
    assert all(split_of(t) == split for split in SPLITS for t in titles[split])
    total = sum(len(t) for t in titles.values())
    assert 0.85 < len(titles["train"]) / total < 0.95
    assert len(titles["valid"]) > 10 and len(titles["test"]) > 10


def test_pydocs_deterministic_and_cached(pydocs_cache, monkeypatch, tmp_path):
    assert pydocs_documents("valid") == pydocs_cache["valid"]            # from the cache file
    assert pydocs_documents("train", max_documents=7) == pydocs_cache["train"][:7]
    cached = list((corpus.cache_dir() / "corpora").glob("pydocs-py*.json"))
    assert len(cached) == 1 and f"py{sys.version_info.major}.{sys.version_info.minor}" in cached[0].name
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    damaged = tmp_path / "corpora" / cached[0].name
    damaged.parent.mkdir()
    damaged.write_text("{broken json")
    with pytest.warns(UserWarning, match="is damaged"):
        assert pydocs_documents("test") == pydocs_cache["test"]            # rebuilt by a fresh parse
    assert damaged.read_bytes() == cached[0].read_bytes()


def test_unknown_split_and_corpus():
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        pydocs_documents("dev")
    with pytest.raises(ValueError, match="unknown corpus 'ptb'"):
        documents("ptb")


def test_corpus_stats():
    docs = [Document("a", ("One two three.", "Four five.")), Document("b", ("Six.",))]
    assert corpus_stats(docs) == {"documents": 2, "sentences": 3, "words": 6}


@pytest.mark.parametrize("text, expected", [
    ("Call os.path.join here. Then stop.", ["Call os.path.join here.", "Then stop."]),
    ("Use a list, e.g. Python lists work. Fine.", ["Use a list, e.g. Python lists work.", "Fine."]),
    ("That is, i.e. This one. Next!", ["That is, i.e. This one.", "Next!"]),
    ("Sets, lists, etc. are containers. Yes.", ["Sets, lists, etc. are containers.", "Yes."]),
    ("New in version 3.11. Changed in 3.12.1 too.", ["New in version 3.11.", "Changed in 3.12.1 too."]),
    ("Ask J. Smith about it. Done?  Yes.", ["Ask J. Smith about it.", "Done?", "Yes."]),
    ("The U.S. Army left. Then A. B. Cole came.", ["The U.S. Army left.", "Then A. B. Cole came."]),
    ('He said "Stop." Then left.', ['He said "Stop."', "Then left."]),
    ("Returns x.\n  Raises\nValueError otherwise.", ["Returns x.", "Raises ValueError otherwise."]),
    ("no final punctuation", ["no final punctuation"]),
    ("", []),
])
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


@given(st.lists(st.sampled_from(["Use", "os.path.join", "e.g.", "3.11.", "etc.", "J.", "The", "end.", "Why?",
                                  "(Yes.)", '"No."', "x", "\n", "  "]), max_size=30))
def test_split_sentences_loses_no_text(words):
    text = " ".join(words)
    sentences = split_sentences(text)
    assert " ".join(sentences) == " ".join(text.split())
    assert all(s and s == s.strip() for s in sentences)


def test_clean_paragraphs_drops_code_grammar_tables_and_headings():
    text = '''Title line
    ==========

    Some prose that stays. It continues
    on the next line.

    Example::

        x = compute(1)

    >>> print(1)
    1
    assert_stmt ::= "assert" expression

    +------+------+
    | a    | b    |
    +------+------+

    * first item.
    * second item.
    '''
    assert clean_paragraphs(text) == ["Some prose that stays. It continues on the next line.", "Example:",
                                      "* first item.", "* second item."]


WIKI_LINES = ["", " = Alpha = \n", "", " Alpha is a letter . It has 2 @,@ 400 uses @-@ mostly . \n", "",
              " = = History = = \n", "", " It is old . \n", "", " = Beta = \n", "",
              " Beta follows Alpha . Scores were 3 @.@ 5 . \n"]


def test_wikitext_lines_to_documents():
    docs = list(wikitext_lines_to_documents(WIKI_LINES))
    assert docs == [Document("Alpha", ("Alpha is a letter .", "It has 2,400 uses-mostly .", "It is old .")),
                    Document("Beta", ("Beta follows Alpha .", "Scores were 3.5 ."))]


def test_wikitext_title_like_line_inside_article_does_not_split():
    lines = ["", " = Gamma = \n", "", " First . \n", " = not a title = \n", " Second . \n"]
    docs = list(wikitext_lines_to_documents(lines))
    assert [d.title for d in docs] == ["Gamma"]


def test_wikitext_download_and_stream(monkeypatch, tmp_path):
    body = "".join(line if line.endswith("\n") else line + "\n" for line in WIKI_LINES).encode()
    digest = hashlib.sha256(body).hexdigest()
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    monkeypatch.setitem(corpus.WIKITEXT_FILES, "wikitext-2",
                        {split: [(f"tiny/wiki.{split}.raw", len(body), digest)] for split in SPLITS})
    with loopback_server() as server:
        server.serve("/tiny/wiki.train.raw", body)
        stream = wikitext_documents("wikitext-2", "train", base_url=server.url)
        assert isinstance(stream, types.GeneratorType)                     # streamed, not a list
        assert [d.title for d in stream] == ["Alpha", "Beta"]
        assert (tmp_path / "corpora" / "wikitext-2" / "wiki.train.raw").read_bytes() == body
        server.serve("/tiny/wiki.valid.raw", body + b"tampered")
        with pytest.raises(DownloadError, match="expected"):
            list(wikitext_documents("wikitext-2", "valid", base_url=server.url))
    assert not (tmp_path / "corpora" / "wikitext-2" / "wiki.valid.raw").exists()


def test_documents_dispatch_caps_a_stream(monkeypatch):
    fake = (Document(str(i), ("a b c.", "d e f.")) for i in range(100))
    monkeypatch.setattr(corpus, "wikitext_documents", lambda name, split: fake)
    assert [d.title for d in documents("wikitext-103", "train", max_documents=3)] == ["0", "1", "2"]


def test_parquet_without_pyarrow_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyarrow", None)             # import pyarrow now fails
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    with pytest.raises(ImportError, match="pip install pyarrow"):  # before any download is tried
        wikitext_documents("wikitext-103", "train", base_url="http://127.0.0.1:9")
    path = tmp_path / "train-00000-of-00001.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(ImportError, match="pip install pyarrow"):
        list(corpus._file_lines(path))


def test_package_documents_are_prose_split_by_title_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    docs = {split: corpus.package_documents(split, ("tqdm",)) for split in SPLITS}   # a small dependency
    assert sum(len(d) for d in docs.values()) > 5
    for split, split_docs in docs.items():
        for doc in split_docs:
            assert doc.title.startswith("tqdm") and split_of(doc.title) == split and len(doc.sentences) >= 2
            assert all(">>>" not in s for s in doc.sentences)
    (cached,) = (tmp_path / "corpora").glob("pkgdocs-tqdm-*.json")
    assert corpus.package_documents("train", ("tqdm",)) == docs["train"]                # read back
    cached.write_bytes(cached.read_bytes().replace(b"tqdm", b"tqdn", 1))                # damaged: reparsed
    with pytest.warns(UserWarning):
        assert corpus.package_documents("train", ("tqdm",)) == docs["train"]
    with pytest.raises(ValueError, match="not installed"):
        corpus.package_documents("train", ("no_such_package_here",))
