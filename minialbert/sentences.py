"""Documents of sentences, the lowest layer of the corpora: `Document`, the three splits, the
sentence splitter, the split of a document (by a hash of its title) and corpus statistics.

Every corpus module builds on this one (read it first): `prose.py` turns files into paragraphs
and sentences, `sources.py` fetches the course's pinned archives, `pydocs.py` reads the embedded
corpus, `wikitext.py` streams WikiText, and `corpus.py` assembles the corpora. Standard library
only.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

__all__ = ["Document", "SPLITS", "check_split", "corpus_stats", "split_of", "split_sentences",
           "title_hash"]

SPLITS = ("train", "valid", "test")


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
# Splits and statistics

def title_hash(text: str, salt: str) -> int:
    """A stable 64-bit hash of a title (salted: one salt for the split, another for the order)."""
    return int.from_bytes(hashlib.sha256(f"{salt}:{text}".encode()).digest()[:8], "big")


def split_of(title: str) -> str:
    """train/valid/test (90/5/5) from a hash of the title: stable whatever else the corpus holds."""
    bucket = title_hash(title, "split") % 100
    return "train" if bucket < 90 else "valid" if bucket < 95 else "test"


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")


def corpus_stats(docs) -> dict[str, int]:
    """Size of a corpus: documents, sentences and whitespace-separated words."""
    docs = list(docs)
    sentences = [s for d in docs for s in d.sentences]
    return {"documents": len(docs), "sentences": len(sentences),
            "words": sum(len(s.split()) for s in sentences)}
