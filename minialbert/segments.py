"""Cutting documents (lists of token-id sentences) into pretraining segments: A/B pairs with a sentence
label, or single segments for MLM alone (pretraining_data.py masks and stores them).

`sentence_order_pairs` (SOP) and `next_sentence_pairs` (NSP) cut exactly as google-research/albert's
create_pretraining_data.py (`create_instances_from_document`): for the same `random.Random`, the same
(A, B, label) instances in the same order, the same draws. Where the official SOP differs from the
paper's description ("two consecutive segments, swapped"): a chunk that closes with one sentence (a long
sentence, or a document's last) gets B from a random other document, labelled 1 (not in order), as
NSP's negatives are; and the target length is drawn once per document, so a document's chunks all aim at
one length. The official script has no MLM-only examples: `single_segments` is the course's. The course's
earlier cut ("two-sentence-chunks", which the shipped 32-token zoo was built on) is kept as a named
variant (SEGMENTINGS), never the default. `length_balanced` picks pairs whose lengths carry no cue.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import NamedTuple

SHORT_SEQ_PROB = 0.1                    # how often an example aims at a random shorter length



class Segments(NamedTuple):
    """The text of one example before specials and masking are added."""

    a: list[int]                # first segment (token ids, no specials)
    b: list[int] | None         # second segment; None for single-segment (MLM-only) examples
    label: int | None           # SOP: 1 = swapped, or B from another document; NSP: 1 = B from another
    document: int = 0           # index of the document A comes from (held-out intervals resample documents)
    other_document: bool = False  # B comes from another document (NSP's negatives; official SOP's too)


def _target_length(rng: random.Random, max_tokens: int, short_seq_prob: float) -> int:
    """Usually fill the sequence; short_seq_prob of the time aim shorter (closer to fine-tuning inputs)."""
    return rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens


def truncate_seq_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Trim the longer segment, one token at a time from a random end, until both fit (in place).

    (Ties trim b. Counting the cuts and slicing once gives the same result as deleting token by token.)
    """
    n_a, n_b = len(a), len(b)
    a_front = b_front = 0                       # tokens cut from the front of a and of b
    while n_a + n_b > max_tokens:
        front = rng.random() < 0.5
        if n_a > n_b:
            n_a -= 1
            a_front += front
        else:
            n_b -= 1
            b_front += front
    a[:] = a[a_front:a_front + n_a]
    b[:] = b[b_front:b_front + n_b]


def _flat(sentences: Sequence[Sequence[int]]) -> list[int]:
    return [tok for sentence in sentences for tok in sentence]


def _chunked(documents: Sequence[Sequence[Sequence[int]]], max_tokens: int, rng: random.Random,
             short_seq_prob: float, min_sentences: int,
             make_example: Callable[[list[Sequence[int]], int, int], tuple[Segments, int]]) -> list[Segments]:
    """The chunking loop all three segmenters share (the official script's): whole sentences of one
    document gather into a chunk until it reaches a random target length and holds min_sentences;
    make_example(chunk, target, document) turns it into Segments and says how many of the chunk's last
    sentences it did not use, which start the next chunk. A document's last chunk with too few
    sentences is dropped. The order of the random draws decides every example, so it is this one.
    """
    examples = []
    for d, doc in enumerate(documents):
        chunk: list[Sequence[int]] = []
        chunk_tokens = 0
        target = _target_length(rng, max_tokens, short_seq_prob)
        i = 0
        while i < len(doc):
            chunk.append(doc[i])
            chunk_tokens += len(doc[i])
            if i < len(doc) - 1 and (chunk_tokens < target or len(chunk) < min_sentences):
                i += 1
                continue
            if len(chunk) >= min_sentences:
                segments, unused = make_example(chunk, target, d)
                examples.append(segments)
                i -= unused                             # put the unused sentences back
            chunk, chunk_tokens = [], 0
            target = _target_length(rng, max_tokens, short_seq_prob)
            i += 1
    return examples


def _document_pairs(documents: Sequence[Sequence[Sequence[int]]], d: int, max_tokens: int,
                    rng: random.Random, short_seq_prob: float, random_next: bool) -> list[Segments]:
    """The official create_instances_from_document (google-research/albert), masking off, for document d.

    The target length is drawn once per document (max_tokens, or short_seq_prob of the time a random
    shorter one). Whole sentences gather into a chunk until it reaches the target or the document ends;
    A is the chunk's first a_end sentences (a random cut where the chunk holds two or more). B is then
    - text from a random other document, label 1, when the chunk holds one sentence (in SOP mode too),
      or, with random_next (NSP), half the time: sentences from a random start until B reaches the
      target minus A's length; the chunk's unused sentences are put back;
    - otherwise the rest of the chunk: without random_next (SOP) swapped with A half the time (label 1),
      else in order (label 0).
    Both are cut to max_tokens by truncate_seq_pair. The order of the random draws is the official one.
    """
    doc = documents[d]
    target = max_tokens
    if rng.random() < short_seq_prob:
        target = rng.randint(2, max_tokens)
    examples: list[Segments] = []
    chunk: list[Sequence[int]] = []
    chunk_tokens = 0
    i = 0
    while i < len(doc):
        chunk.append(doc[i])
        chunk_tokens += len(doc[i])
        if i == len(doc) - 1 or chunk_tokens >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            a = _flat(chunk[:a_end])
            if len(chunk) == 1 or (random_next and rng.random() < 0.5):
                label, other_document = 1, True
                for _ in range(10):                     # any document but this one, almost surely
                    other = rng.randint(0, len(documents) - 1)
                    if other != d:
                        break
                b: list[int] = []
                for sentence in documents[other][rng.randint(0, len(documents[other]) - 1):]:
                    b.extend(sentence)
                    if len(b) >= target - len(a):
                        break
                i -= len(chunk) - a_end                 # put the unused sentences back
            elif not random_next and rng.random() < 0.5:
                label, other_document, a, b = 1, False, _flat(chunk[a_end:]), a      # SOP: swapped
            else:
                label, other_document, b = 0, False, _flat(chunk[a_end:])
            truncate_seq_pair(a, b, max_tokens, rng)
            examples.append(Segments(a, b, label, d, other_document))
            chunk, chunk_tokens = [], 0
        i += 1
    return examples


def sentence_order_pairs(documents: Sequence[Sequence[Sequence[int]]], max_seq_len: int,
                         rng: random.Random, short_seq_prob: float = SHORT_SEQ_PROB) -> list[Segments]:
    """SOP as the official code builds it: two consecutive runs of whole sentences of one document,
    swapped half the time (label 1), and a random other document's text as B (label 1) where a chunk
    holds one sentence (`_document_pairs`). Label 1 therefore means "not A then B"."""
    return [pair for d in range(len(documents))
            for pair in _document_pairs(documents, d, max_seq_len - 3, rng, short_seq_prob, False)]


def next_sentence_pairs(documents: Sequence[Sequence[Sequence[int]]], max_seq_len: int,
                        rng: random.Random, short_seq_prob: float = SHORT_SEQ_PROB) -> list[Segments]:
    """NSP (BERT) as the official code builds it: A as in SOP; half the time (and always where a chunk
    holds one sentence) B is text from a random other document (label 1), else the rest of the chunk."""
    if len(documents) < 2:
        raise ValueError(f"NSP needs at least 2 documents to draw random next segments, got {len(documents)}")
    return [pair for d in range(len(documents))
            for pair in _document_pairs(documents, d, max_seq_len - 3, rng, short_seq_prob, True)]


def two_sentence_chunk_sop_pairs(documents: Sequence[Sequence[Sequence[int]]], max_seq_len: int,
                         rng: random.Random, short_seq_prob: float = SHORT_SEQ_PROB) -> list[Segments]:
    """The course's earlier SOP (segmenting "two-sentence-chunks", the shipped 32-token zoo's): a chunk of
    at least two sentences (`_chunked`: a target drawn per chunk) is cut at a random sentence boundary into
    A and B, swapped half the time (label 1), both cut to the target. No random-document negatives; a
    document's last lone sentence is dropped."""
    def swapped_or_not(chunk: list[Sequence[int]], target: int, d: int) -> tuple[Segments, int]:
        a_end = rng.randint(1, len(chunk) - 1)
        a, b = _flat(chunk[:a_end]), _flat(chunk[a_end:])
        swapped = rng.random() < 0.5
        if swapped:
            a, b = b, a
        truncate_seq_pair(a, b, target, rng)
        return Segments(a, b, int(swapped), d), 0

    return _chunked(documents, max_seq_len - 3, rng, short_seq_prob, 2, swapped_or_not)  # CLS A SEP B SEP


def two_sentence_chunk_nsp_pairs(documents: Sequence[Sequence[Sequence[int]]], max_seq_len: int,
                        rng: random.Random, short_seq_prob: float = SHORT_SEQ_PROB) -> list[Segments]:
    """The course's earlier NSP (segmenting "two-sentence-chunks"): A as in two_sentence_chunk_sop_pairs;
    half the time B is text from a different document (label 1), starting at a random sentence; the
    chunk's unused sentences are put back."""
    if len(documents) < 2:
        raise ValueError(f"NSP needs at least 2 documents to draw random next segments, got {len(documents)}")

    def next_or_random(chunk: list[Sequence[int]], target: int, d: int) -> tuple[Segments, int]:
        a_end = rng.randint(1, len(chunk) - 1)
        a = _flat(chunk[:a_end])
        if rng.random() >= 0.5:
            b = _flat(chunk[a_end:])
            truncate_seq_pair(a, b, target, rng)
            return Segments(a, b, 0, d), 0
        other = rng.randrange(len(documents) - 1)
        other += other >= d                         # any document but this one
        b: list[int] = []
        for sentence in documents[other][rng.randrange(len(documents[other])):]:
            b.extend(sentence)
            if len(b) >= target - len(a):
                break
        truncate_seq_pair(a, b, target, rng)
        return Segments(a, b, 1, d, True), len(chunk) - a_end     # B's sentences go back

    return _chunked(documents, max_seq_len - 3, rng, short_seq_prob, 2, next_or_random)  # CLS A SEP B SEP


def single_segments(documents: Sequence[Sequence[Sequence[int]]], max_seq_len: int,
                    rng: random.Random, short_seq_prob: float = SHORT_SEQ_PROB) -> list[Segments]:
    """MLM only: runs of whole sentences filling [CLS] A [SEP], no sentence label."""
    def whole_chunk(chunk: list[Sequence[int]], target: int, d: int) -> tuple[Segments, int]:
        a = _flat(chunk)
        truncate_seq_pair(a, [], target, rng)
        return Segments(a, None, None, d), 0

    return _chunked(documents, max_seq_len - 2, rng, short_seq_prob, 1, whole_chunk)      # [CLS] A [SEP]


# How documents are cut into examples, by name. "official" is google-research/albert's
# create_instances_from_document; "two-sentence-chunks" the course's earlier cut, which the shipped
# 32-token zoo entries were built with (zoo_entries.py names it per entry). MLM-only examples have no
# official counterpart (the official script always builds pairs): both use single_segments.
OFFICIAL = "official"
TWO_SENTENCE_CHUNKS = "two-sentence-chunks"
SEGMENTINGS = {
    OFFICIAL: {"mlm": single_segments, "nsp": next_sentence_pairs, "sop": sentence_order_pairs},
    TWO_SENTENCE_CHUNKS: {"mlm": single_segments, "nsp": two_sentence_chunk_nsp_pairs,
                          "sop": two_sentence_chunk_sop_pairs},
}


def check_segmenting(segmenting: str) -> None:
    if segmenting not in SEGMENTINGS:
        raise ValueError(f"unknown segmenting {segmenting!r}; choose one of {', '.join(SEGMENTINGS)}")


def length_balanced(lengths: Sequence[Sequence[int]], labels: Sequence[int],
                    rng: random.Random) -> list[int]:
    """Indices of the pairs to keep so that segment lengths say nothing about the label: in every
    (len A, len B) cell as many pairs of label 0 as of label 1 (a seeded choice of the more frequent
    label's). Sorted.

    Why: at short sequence lengths a SOP chunk is often one sentence and then the run that crosses the
    target, so the second run is longer on average and a swapped pair tends to have the longer A; a
    classifier reading only the two lengths then beats chance (lesson 08 measures it). Any function of
    the lengths (the [SEP] position, the total length) is at exactly 50% on the kept pairs.
    """
    if len(lengths) != len(labels):
        raise ValueError(f"{len(lengths)} length pairs for {len(labels)} labels")
    if set(labels) - {0, 1}:
        raise ValueError(f"length balancing needs labels 0 and 1, got {sorted(set(labels))}")
    cells: dict[tuple[int, int], tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for i, (cell, label) in enumerate(zip(lengths, labels)):
        cells[tuple(cell)][label].append(i)
    keep = []
    for zeros, ones in cells.values():                 # insertion order: deterministic
        n = min(len(zeros), len(ones))
        keep += rng.sample(zeros, n) + rng.sample(ones, n)
    return sorted(keep)
