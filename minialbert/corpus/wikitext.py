"""WikiText-2 / WikiText-103 (raw), downloaded from the HuggingFace hub and streamed.

The hub's parquet files at a pinned revision (sizes and sha256 checked by `download`) are read
batch by batch, and their lines grouped into documents as they stream, so memory stays bounded
on WikiText-103. Reading order: the pinned files, the line grouping
(`wikitext_lines_to_documents`), then `wikitext_documents`. Standard library only (pyarrow is
imported when a parquet file is read).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..download import cache_dir, download
from ..sentences import Document, check_split, split_sentences

__all__ = ["WIKITEXT_FILES", "WIKITEXT_REPO", "WIKITEXT_REVISION", "wikitext_documents",
           "wikitext_lines_to_documents"]

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
    check_split(split)
    files = WIKITEXT_FILES[name][split]
    if any(file.endswith(".parquet") for file, _, _ in files):
        _parquet()                              # fail before downloading hundreds of megabytes
    base = base_url or f"{WIKITEXT_REPO}/{WIKITEXT_REVISION}"
    paths = [download(f"{base}/{file}", cache_dir() / "corpora" / name / Path(file).name, sha256=sha,
                      expected_size=size)
             for file, size, sha in files]
    return wikitext_lines_to_documents(line for p in paths for line in _file_lines(p))

