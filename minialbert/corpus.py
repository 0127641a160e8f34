"""Corpora as documents of sentences: the embedded `pydocs` corpus and WikiText-2/103.

`pydocs` is the English prose that ships inside every CPython: the language-reference topics
(`pydoc_data.topics`, a plain dict of strings) and the standard library's docstrings, read
with `ast` from the running interpreter's own files (nothing imported or executed). It needs
no network, and it is read at run time, never copied into the repository.

WikiText is downloaded (pinned revision, sha256-checked) from the HuggingFace hub and
streamed document by document, so memory stays bounded on WikiText-103.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import re
import sys
import sysconfig
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .download import cache_dir, download, read_checked, write_checked

__all__ = ["Document", "PACKAGES", "cache_dir", "corpus_stats", "documents", "package_documents",
           "pydocs_documents", "split_sentences", "wikitext_documents", "SPLITS"]

SPLITS = ("train", "valid", "test")
PYDOCS_FORMAT = 4                       # bump when the parsing rules change: invalidates caches


@dataclass(frozen=True)
class Document:
    """One document: a title and its sentences in reading order (SOP needs that order)."""

    title: str
    sentences: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# Sentence splitting

# words whose trailing period never ends a sentence ("e.g. Python", "Mr. Smith")
_ABBREVIATIONS = {"e.g", "i.e", "cf", "vs", "mr", "mrs", "ms", "dr", "st", "no", "fig", "approx", "resp",
                  "al", "ca", "viz", "jr", "sr", "prof", "ed", "vol", "ch", "sec", "p", "pp"}
# a candidate boundary: end punctuation, optional closing quotes/brackets, whitespace, and a
# sentence-like start (capital, digit, quote or bracket)
_INITIALS = re.compile(r"^([A-Z]|([A-Za-z]\.)+[A-Za-z])$")    # "J. Smith", "U.S. Army", "e.g. X"
_BOUNDARY = re.compile(r"""[.!?]["')\]]*\s+(?=["'(\[]?[A-Z0-9])""")


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences with a few rules that suit technical English.

    A sentence ends at '.', '!' or '?' followed by whitespace and a capital, digit or quote.
    Periods inside tokens (os.path.join, 3.11) never split, nor do abbreviations such as "e.g.",
    "i.e." or "U.S." and single-letter initials.
    """
    text = " ".join(text.split())
    sentences, start = [], 0
    for m in _BOUNDARY.finditer(text):
        before = text[start:m.start() + 1]
        last_word = before.rsplit(None, 1)[-1].rstrip(".!?\"')]").lstrip("\"'([")
        if text[m.start()] == "." and (last_word.lower() in _ABBREVIATIONS or _INITIALS.match(last_word)):
            continue
        sentences.append(text[start:m.end()].strip())
        start = m.end()
    if text[start:].strip():
        sentences.append(text[start:].strip())
    return sentences


# ---------------------------------------------------------------------------------------------
# The embedded corpus: pydocs

# stdlib directories (any path component) that hold tests, tools or data rather than prose
_SKIP_DIRS = {"test", "tests", "idle_test", "idlelib", "site-packages", "dist-packages", "turtledemo",
              "ensurepip", "lib-dynload", "__pycache__", "encodings", "pydoc_data", "__phello__"}
_MIN_WORDS, _MAX_WORDS = 3, 100        # shorter "sentences" are headings, longer ones are lists
_MIN_SENTENCES = 3                      # smaller docstrings are merged into their module's document
_UNDERLINE = re.compile(r"^\s*([-=*~^+#\"'`])\1{2,}\s*$")
_TABLE = re.compile(r"^\s*(\+[-=+]+\+?|\|.*|=+( +=+)+)\s*$")  # grid-table rows, simple-table borders
_ITEM = re.compile(r"^([-*+] |\d+[.)] |[\w.\[\]()*]+\s+--\s)")  # a list item starts a new paragraph
_CODE_MARKERS = (">>>", "...", "$ ", "% ")


def clean_paragraphs(text: str) -> list[str]:
    """Prose paragraphs of a docstring or help topic: code, tables and grammar dropped, whitespace
    normalised.

    Drops indented blocks (code samples, grammar, argument tables), doctests and tables (up to
    the next blank line), grammar productions (`::=`), headings (a line over an underline)
    and the underlines themselves. List items become paragraphs of their own.
    """
    lines = inspect.cleandoc(text).splitlines()
    paragraphs, current, in_block = [], [], False
    for i, line in enumerate(lines):
        # a table or a doctest (prompt lines and their output) runs to the next blank line
        in_block = bool(line.strip()) and (in_block or _TABLE.match(line) is not None
                                           or line.startswith(">>>"))
        is_heading = i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) is not None
        if (current and _ITEM.match(line)) or in_block or not line.strip() or line[:1].isspace():
            if current:
                paragraphs.append(" ".join(current))
                current = []
        if (in_block or not line.strip() or line[:1].isspace() or _UNDERLINE.match(line) or is_heading
                or line.startswith(_CODE_MARKERS) or "::=" in line):
            continue
        current.append(line.strip())
    if current:
        paragraphs.append(" ".join(current))
    # "as follows::" introduces a (dropped) code block: keep the sentence, drop the marker
    return [" ".join(p.replace("::", ":").split()) for p in paragraphs]


def _is_prose(sentence: str) -> bool:
    """Most words are ordinary words (drops lists of CONSTANTS, signatures, fragments), no doctest
    prompt or grammar production anywhere."""
    if ">>>" in sentence or "::=" in sentence:
        return False
    words = sentence.split()
    plain = sum(w.strip(".,;:!?()\"'").isalpha() and not w.isupper() for w in words)
    return _MIN_WORDS <= len(words) <= _MAX_WORDS and plain >= len(words) / 2


def prose_sentences(text: str) -> list[str]:
    """Clean a docstring/topic and split it into sentences that read as prose."""
    return [s for p in clean_paragraphs(text) for s in split_sentences(p) if _is_prose(s)]


def _topic_documents() -> list[Document]:
    """One document per language-reference topic (pydoc_data.topics is a data dict, not code)."""
    from pydoc_data.topics import topics
    return [Document(f"topic:{name}", tuple(prose_sentences(topics[name]))) for name in sorted(topics)]


def _stdlib_files(root: Path) -> list[Path]:
    """Sorted .py files of the stdlib directory, without tests, tools and data packages."""
    files = []
    for folder, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in _SKIP_DIRS and not d.startswith("config-")]
        files += [Path(folder) / n for n in names if n.endswith(".py") and n != "__main__.py"
                  and not n.startswith("_sysconfigdata")]
    return sorted(files)


def _module_documents(path: Path, root: Path) -> list[Document]:
    """Documents from one module: its docstring, one per class (with its methods), and its functions.

    Docstrings with fewer than _MIN_SENTENCES sentences join the module's own document, so tiny
    docstrings do not become tiny documents.
    """
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):       # e.g. lib2to3 fixtures in Python 2 syntax
        return []
    rel = path.relative_to(root).with_suffix("")
    module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
    module_sents = prose_sentences(ast.get_docstring(tree) or "")
    function_sents: list[str] = []
    docs = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            sents = prose_sentences(ast.get_docstring(node) or "")
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    sents += prose_sentences(ast.get_docstring(item) or "")
            if len(sents) >= _MIN_SENTENCES:
                docs.append(Document(f"{module}.{node.name}", tuple(sents)))
            else:
                module_sents += sents
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function_sents += prose_sentences(ast.get_docstring(node) or "")
    if len(function_sents) >= _MIN_SENTENCES:
        docs.append(Document(f"{module} (functions)", tuple(function_sents)))
    else:
        module_sents += function_sents
    if len(module_sents) >= 2:
        docs.append(Document(module, tuple(module_sents)))
    return docs


def _hash(text: str, salt: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{salt}:{text}".encode()).digest()[:8], "big")


def split_of(title: str) -> str:
    """train/valid/test (90/5/5) from a hash of the title: stable whatever else the corpus holds."""
    bucket = _hash(title, "split") % 100
    return "train" if bucket < 90 else "valid" if bucket < 95 else "test"


def _merged_in_order(docs: Iterable[Document]) -> list[Document]:
    """One document per title (a name defined twice is one document), in a fixed pseudo-random
    order (hash of the title)."""
    merged: dict[str, list[str]] = {}
    for doc in docs:
        merged.setdefault(doc.title, []).extend(doc.sentences)
    kept = [Document(t, tuple(s)) for t, s in merged.items() if len(s) >= 2]
    return sorted(kept, key=lambda d: (_hash(d.title, "order"), d.title))


def _cached(path: Path, build: Callable[[], list[Document]]) -> list[Document]:
    """Documents from a checksummed JSON cache file, or built and written there."""
    if (raw := read_checked(path)) is not None:        # None: missing or damaged (then reported)
        return [Document(d["title"], tuple(d["sentences"])) for d in json.loads(raw.decode("utf-8"))]
    docs = build()
    data = [{"title": d.title, "sentences": list(d.sentences)} for d in docs]
    write_checked(path, json.dumps(data, ensure_ascii=False).encode())
    return docs


def _build_pydocs() -> list[Document]:
    """Parse the whole corpus: language-reference topics and stdlib docstrings."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return _merged_in_order(_topic_documents() + [d for f in _stdlib_files(root)
                                                   for d in _module_documents(f, root)])


def _pydocs_all() -> list[Document]:
    """The parsed corpus, cached as JSON per Python version (the stdlib's text differs by version)."""
    version = ".".join(map(str, sys.version_info[:3]))
    return _cached(cache_dir() / "corpora" / f"pydocs-py{version}-v{PYDOCS_FORMAT}.json", _build_pydocs)


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")


def pydocs_documents(split: str = "train", max_documents: int | None = None) -> list[Document]:
    """The embedded corpus: one split, in a fixed order whose prefixes are fair samples.

    max_documents keeps the first documents of that order (scales use it to shrink the corpus).
    """
    _check_split(split)
    docs = [d for d in _pydocs_all() if split_of(d.title) == split]
    return docs if max_documents is None else docs[:max_documents]


# The course's own dependencies (pinned in constraints.txt; sympy comes with torch) hold about five
# times more docstring prose than the standard library: more text for pretraining, same parser.
PACKAGES = ("numpy", "torch", "matplotlib", "sympy")


def _package_all(package: str) -> list[Document]:
    """One installed package's docstring documents, parsed with `ast` (nothing of it imported),
    cached as JSON per package version."""
    from importlib import metadata, util

    spec = util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ValueError(f"package {package!r} is not installed; its docstrings cannot be read")
    folder = Path(spec.origin).parent

    def build() -> list[Document]:
        files = sorted(f for f in folder.rglob("*.py") if not {"test", "tests", "testing"} & set(f.parts))
        return _merged_in_order(d for f in files for d in _module_documents(f, folder.parent))

    version = metadata.version(package)
    return _cached(cache_dir() / "corpora" / f"pkgdocs-{package}-{version}-v{PYDOCS_FORMAT}.json", build)


def package_documents(split: str = "train", packages: tuple[str, ...] = PACKAGES) -> list[Document]:
    """Docstring prose of installed packages, one split (by title hash, as for pydocs), package by
    package. Titles are dotted module paths, so they never collide with the stdlib's."""
    _check_split(split)
    return [d for package in packages for d in _package_all(package) if split_of(d.title) == split]


def corpus_stats(docs) -> dict[str, int]:
    """Size of a corpus: documents, sentences and whitespace-separated words."""
    docs = list(docs)
    sentences = [s for d in docs for s in d.sentences]
    return {"documents": len(docs), "sentences": len(sentences),
            "words": sum(len(s.split()) for s in sentences)}


# ---------------------------------------------------------------------------------------------
# WikiText-2 / WikiText-103 (raw), from the HuggingFace hub

# The hub's parquet files at a pinned commit of Salesforce/wikitext, with their published sizes
# and sha256 (the LFS object ids). WikiText-2 and -103 share the same validation and test files.
WIKITEXT_REPO = "https://huggingface.co/datasets/Salesforce/wikitext/resolve"
WIKITEXT_REVISION = "b08601e04326c79dfdd32d625aee71d232d685c3"
_WT_VALID = ("validation-00000-of-00001.parquet", 657209,
             "204929b7ff9d6184953f867dedb860e40aa69c078fc1e54b3baaa8fb28511c4c")
_WT_TEST = ("test-00000-of-00001.parquet", 732610,
            "5f1bea067869d04849c0f975a2b29c4ff47d867f484f5010ea5e861eab246d91")
# name -> split -> [(file in the hub repository, size in bytes, sha256)]
WIKITEXT_FILES: dict[str, dict[str, list[tuple[str, int | None, str | None]]]] = {
    "wikitext-2": {
        "train": [("wikitext-2-raw-v1/train-00000-of-00001.parquet", 6357543,
                   "e83889baabc497075506f91975be5fac0d45c5290b6b20582c8cd1e853d0c9f7")],
        "valid": [("wikitext-2-raw-v1/" + _WT_VALID[0], *_WT_VALID[1:])],
        "test": [("wikitext-2-raw-v1/" + _WT_TEST[0], *_WT_TEST[1:])],
    },
    "wikitext-103": {
        "train": [("wikitext-103-raw-v1/train-00000-of-00002.parquet", 156987808,
                   "74da360f23826045b3e6ac6375411fdb15f003030aa74f2596ed08b857cb9212"),
                  ("wikitext-103-raw-v1/train-00001-of-00002.parquet", 157088770,
                   "ba090ac30dbf5461e8dcbdd1a1b8e6f3cf9c2c756d64f0c1220450acd514f720")],
        "valid": [("wikitext-103-raw-v1/" + _WT_VALID[0], *_WT_VALID[1:])],
        "test": [("wikitext-103-raw-v1/" + _WT_TEST[0], *_WT_TEST[1:])],
    },
}
_TITLE = re.compile(r"^ = ([^=].*) = $")
_WIKI_ESCAPES = {" @-@ ": "-", " @,@ ": ",", " @.@ ": "."}


def wikitext_lines_to_documents(lines: Iterable[str]) -> Iterator[Document]:
    """Group WikiText lines into documents, streaming.

    A ` = Title = ` line between two blank lines starts a document (the blank-line check keeps
    title-like lines inside tables from splitting an article); ` = = Section = = ` headings and
    blank lines are dropped; each paragraph line is split into sentences.
    """
    title, sentences = None, []
    previous, window = "", iter(lines)
    line = next(window, None)
    while line is not None:
        following = next(window, None)
        text = line.strip()
        m = _TITLE.match(line.rstrip("\n"))
        if m and not previous.strip() and (following is None or not following.strip()):
            if title is not None and sentences:
                yield Document(title, tuple(sentences))
            title, sentences = m.group(1).strip(), []
        elif text and not text.startswith("= "):
            for escaped, plain in _WIKI_ESCAPES.items():
                text = text.replace(escaped, plain)
            sentences += split_sentences(text)
        previous, line = line, following
    if title is not None and sentences:
        yield Document(title, tuple(sentences))


def _parquet():
    """pyarrow.parquet, or an error saying how to install it (the hub ships WikiText as parquet)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError("reading WikiText needs pyarrow (the hub ships it as parquet files): "
                          "pip install pyarrow") from e
    return pq


def _file_lines(path: Path) -> Iterator[str]:
    """Lines of a WikiText file, streamed: parquet (the hub's format, `text` column, batch by
    batch) or plain text (the original wiki.*.raw files)."""
    if path.suffix != ".parquet":
        with open(path, encoding="utf-8") as f:
            yield from f
        return
    for batch in _parquet().ParquetFile(path).iter_batches(batch_size=4096, columns=["text"]):
        yield from batch.column(0).to_pylist()


def wikitext_documents(name: str = "wikitext-2", split: str = "train",
                       base_url: str | None = None) -> Iterator[Document]:
    """Download (and check) the files of one WikiText split, then stream its documents.

    base_url replaces the pinned hub address (tests serve files from loopback).
    """
    if name not in WIKITEXT_FILES:
        raise ValueError(f"unknown corpus {name!r}; choose one of pydocs, {', '.join(WIKITEXT_FILES)}")
    _check_split(split)
    files = WIKITEXT_FILES[name][split]
    if any(file.endswith(".parquet") for file, _, _ in files):
        _parquet()                              # fail before downloading hundreds of megabytes
    base = base_url or f"{WIKITEXT_REPO}/{WIKITEXT_REVISION}"
    paths = [download(f"{base}/{file}", cache_dir() / "corpora" / name / Path(file).name, sha256=sha,
                      expected_size=size)
             for file, size, sha in files]
    return wikitext_lines_to_documents(line for p in paths for line in _file_lines(p))


def documents(name: str = "pydocs", split: str = "train",
              max_documents: int | None = None) -> list[Document] | Iterator[Document]:
    """Documents of a named corpus ('pydocs', 'wikitext-2', 'wikitext-103'): a list or a stream."""
    if name == "pydocs":
        return pydocs_documents(split, max_documents)
    stream = wikitext_documents(name, split)
    if max_documents is None:
        return stream
    return (doc for _, doc in zip(range(max_documents), stream))
