"""The embedded corpus, `pydocs`: the English prose that ships inside every CPython, and the
docstrings of installed packages read the same way.

`pydocs_documents` reads the language-reference topics (`pydoc_data.topics`, a plain dict of
strings) and the standard library's docstrings, parsed with `ast` from the running interpreter's
own files (nothing imported or executed). It needs no network, and it is read at run time, never
copied into the repository. `package_documents` reads the docstrings of installed packages
(PACKAGES: the course's own dependencies). Both are cached as checksummed JSON per Python or
package version. Reading order: documents of one module, the cache, then the two entry points.
Standard library only (and `download.py`, `sentences.py`, `prose.py`).
"""

from __future__ import annotations

import ast
import json
import os
import sys
import sysconfig
from collections.abc import Callable, Iterable
from pathlib import Path

from ..download import cache_dir, read_checked, write_checked
from ..sentences import Document, check_split, split_of, title_hash
from .prose import prose_sentences

__all__ = ["PACKAGES", "PYDOCS_FORMAT", "package_documents", "pydocs_documents"]

PYDOCS_FORMAT = 4                       # bump when the parsing rules change: invalidates caches

# stdlib directories (any path component) that hold tests, tools or data rather than prose
_SKIP_DIRS = {"test", "tests", "idle_test", "idlelib", "site-packages", "dist-packages", "turtledemo",
              "ensurepip", "lib-dynload", "__pycache__", "encodings", "pydoc_data", "__phello__"}
_MIN_SENTENCES = 3                      # smaller docstrings are merged into their module's document


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


def _merged_in_order(docs: Iterable[Document]) -> list[Document]:
    """One document per title (a name defined twice is one document), in a fixed pseudo-random
    order (hash of the title)."""
    merged: dict[str, list[str]] = {}
    for doc in docs:
        merged.setdefault(doc.title, []).extend(doc.sentences)
    kept = [Document(t, tuple(s)) for t, s in merged.items() if len(s) >= 2]
    return sorted(kept, key=lambda d: (title_hash(d.title, "order"), d.title))


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


def pydocs_documents(split: str = "train", max_documents: int | None = None) -> list[Document]:
    """The embedded corpus: one split, in a fixed order whose prefixes are fair samples.

    max_documents keeps the first documents of that order (scales use it to shrink the corpus).
    """
    check_split(split)
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
    check_split(split)
    return [d for package in packages for d in _package_all(package) if split_of(d.title) == split]

