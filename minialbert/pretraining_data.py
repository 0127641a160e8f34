"""ALBERT's pretraining examples: sentence-order (SOP) and next-sentence (NSP) pairs, masked.

Reading order (after masking.py, which masks one sequence with `ngram_mask`): cutting documents
into segments (`sentence_order_pairs` and `next_sentence_pairs`, exactly as google-research/albert's
create_pretraining_data.py cuts them; `single_segments` for MLM alone; the course's earlier cut, a named
variant; `length_balanced` against a length shortcut), building and caching a whole dataset
(`build_examples`, stored as pretraining_dataset.py's `PretrainingDataset`; the course's own sets are
corpus/course_data.py's), and batching it (`collate`, `make_dataloader`). Every random choice comes from
one seeded `random.Random`: for the same generator the pairs are the official script's, in its order
(it masks each pair with the same generator as it goes; we mask afterwards, from our own draws).

Where the official SOP differs from the paper's description ("two consecutive segments, swapped"): a
chunk that closes with one sentence (a long sentence, or a document's last) gets B from a random other
document, labelled 1 (not in order), as NSP's negatives are; and the target length is drawn once per
document, so a document's chunks all aim at one length.
"""

from __future__ import annotations

import concurrent.futures
import gc
import hashlib
import json
import multiprocessing
import os
import random
import sys
import time
import warnings
from array import array
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from .config import IGNORE_INDEX
from .download import cache_dir
from .masking import MASK_RATE, MAX_NGRAM, MaskingVocab, ngram_mask
from .pretraining_dataset import FORMAT_VERSION, PretrainingDataset, check_objective, concatenate
from .sentences import Document
from .tokenizer import CLS_ID, PAD_ID, SEP_ID, Tokenizer

SHORT_SEQ_PROB = 0.1                    # how often an example aims at a random shorter length
COURSE_SEED = 12345                     # the official script's default random_seed
MIN_SHARD_DOCUMENTS = 16                # a sharded build's fewest documents per shard (NSP draws its
                                        # random next segments from the other documents of the shard)


# ---------------------------------------------------------------------------------------------
# Segments: documents (lists of token-id sentences) -> A/B pairs with a sentence label

class Segments(NamedTuple):
    """The text of one example before specials and masking are added."""

    a: list[int]                # first segment (token ids, no specials)
    b: list[int] | None         # second segment; None for single-segment (MLM-only) examples
    label: int | None           # SOP: 1 = swapped; NSP: 1 = B is from another document; mlm: None
    document: int = 0           # index of the document A comes from (held-out intervals resample documents)


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
                label = 1
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
                label, a, b = 1, _flat(chunk[a_end:]), a            # SOP: swapped
            else:
                label, b = 0, _flat(chunk[a_end:])
            truncate_seq_pair(a, b, max_tokens, rng)
            examples.append(Segments(a, b, label, d))
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
        return Segments(a, b, 1, d), len(chunk) - a_end     # B's sentences go back

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


# ---------------------------------------------------------------------------------------------
# Building (and caching) a dataset

def examples_from_token_documents(documents: Sequence[Sequence[Sequence[int]]], vocab: MaskingVocab,
                                  objective: str, max_seq_len: int, seed: int, dupe_factor: int = 1,
                                  short_seq_prob: float = SHORT_SEQ_PROB, mask_rate: float = MASK_RATE,
                                  balance_lengths: bool = False,
                                  segmenting: str = OFFICIAL) -> PretrainingDataset:
    """Segment, add specials and mask token-id documents; dupe_factor passes give new cuts and masks.

    balance_lengths keeps, in every pass, only the `length_balanced` pairs (nsp and sop only).
    segmenting names how documents are cut (SEGMENTINGS; the official code's by default).
    """
    check_objective(objective)
    check_segmenting(segmenting)
    if balance_lengths and objective == "mlm":
        raise ValueError("balance_lengths balances the labels of pairs; objective 'mlm' has no pairs")
    if max_seq_len < 5:
        raise ValueError(f"max_seq_len={max_seq_len} leaves no room for [CLS] A [SEP] B [SEP]; use >= 5")
    if dupe_factor < 1:
        raise ValueError(f"dupe_factor must be >= 1, got {dupe_factor}")
    documents = [[list(s) for s in doc if s] for doc in documents]
    documents = [doc for doc in documents if doc]
    rng = random.Random(seed)
    ids, labels, types = array("i"), array("i"), array("B")        # flat over every example's tokens
    offsets, sentence_labels, document_ids = array("q", [0]), array("q"), array("i")
    with _collector_paused():
        for _ in range(dupe_factor):
            segments = SEGMENTINGS[segmenting][objective](documents, max_seq_len, rng, short_seq_prob)
            if balance_lengths:
                kept = length_balanced([(len(s.a), len(s.b)) for s in segments], [s.label for s in segments],
                                       rng)
                segments = [segments[i] for i in kept]
            for seg in segments:
                tokens = [CLS_ID, *seg.a, SEP_ID] + ([] if seg.b is None else [*seg.b, SEP_ID])
                masked = ngram_mask(tokens, vocab, rng, mask_rate)
                ids.extend(masked.input_ids)
                labels.extend(masked.mlm_labels)
                types.extend([0] * (len(seg.a) + 2) + [1] * (len(tokens) - len(seg.a) - 2))
                offsets.append(len(ids))
                document_ids.append(seg.document)
                if seg.label is not None:
                    sentence_labels.append(seg.label)
    return PretrainingDataset(_tensor(ids), _tensor(types), _tensor(labels), _tensor(offsets),
                              None if objective == "mlm" else _tensor(sentence_labels), objective,
                              max_seq_len, _tensor(document_ids))


@contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector. A build makes millions of small lists, none in a cycle,
    beside the long-lived documents; each automatic collection would walk all of them again, for
    nothing (reference counting still frees every list as soon as it is dropped)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _tensor(values: array) -> torch.Tensor:
    """An array's copy as a tensor of the same item type (much faster than from a list)."""
    dtypes = {"B": torch.uint8, "i": torch.int32, "q": torch.int64}
    if not values:
        return torch.zeros(0, dtype=dtypes[values.typecode])
    return torch.frombuffer(values, dtype=dtypes[values.typecode]).clone()


def build_examples(documents: Sequence[Document], tokenizer: Tokenizer, objective: str, max_seq_len: int,
                   seed: int, dupe_factor: int = 1, cache: bool = True, mask_rate: float = MASK_RATE,
                   balance_lengths: bool = False, digest: str | None = None, shards: int = 0,
                   workers: int | None = None, segmenting: str = OFFICIAL) -> PretrainingDataset:
    """Documents -> masked pretraining examples, cached under cache_dir()/pretraining.

    The cache key (examples_key) hashes the tokenizer model, the documents and every setting, so a
    change to any of them builds afresh. A damaged cache file is reported and rebuilt, never trusted.
    digest: the documents' recorded hash where one names them (a pinned corpus); None: hash them here.
    shards: 0 draws every example from one random stream, as the official script does (one core);
    n > 0 cuts the documents into n contiguous shards (fewer where a shard would hold under
    MIN_SHARD_DOCUMENTS), each with its own stream (`build_shard`), built
    by `workers` processes (None: every core this process may use) and joined in shard order: the same
    bytes for any number of workers. NSP's random next segments then come from the pair's own shard.
    The workers are spawned (they import minialbert afresh): a script that builds a sharded set runs
    its work under `if __name__ == "__main__":`, as multiprocessing asks.
    """
    check_objective(objective)
    check_segmenting(segmenting)
    path = None
    if cache:
        key = examples_key(digest or documents_digest(documents), tokenizer, objective, max_seq_len, seed,
                           dupe_factor, mask_rate, balance_lengths, shards, segmenting)
        name = f"{objective}-balanced" if balance_lengths else objective
        path = cache_dir() / "pretraining" / f"{name}-{key[:24]}.safetensors"
        if path.exists():
            try:
                cached = PretrainingDataset.load(path)
                if (cached.objective, cached.max_seq_len) != (objective, max_seq_len):   # not in the checksum
                    raise ValueError(f"pretraining cache {path} holds {cached.objective} examples of up to "
                                     f"{cached.max_seq_len} tokens, not the {objective} / {max_seq_len} its "
                                     "name promises")
                return cached
            except ValueError as e:
                warnings.warn(f"{e}; rebuilding it", stacklevel=2)
    settings = dict(objective=objective, max_seq_len=max_seq_len, dupe_factor=dupe_factor,
                    mask_rate=mask_rate, balance_lengths=balance_lengths, segmenting=segmenting)
    if shards:
        dataset = _build_shards(documents, tokenizer, seed, shards, workers, settings)
    else:
        token_docs = [[tokenizer.encode(s) for s in doc.sentences] for doc in documents]
        dataset = examples_from_token_documents(token_docs, MaskingVocab.from_tokenizer(tokenizer), seed=seed,
                                                **settings)
    if path is not None:
        dataset.save(path)
    return dataset


def build_shard(sentences: list[tuple[str, ...]], tokenizer_proto: bytes, shard_seed: int,
                settings: dict) -> PretrainingDataset:
    """One shard of a sharded build: its documents' sentences tokenized, segmented and masked with its
    own random stream (a top-level function, so worker processes can run it)."""
    tokenizer = Tokenizer(tokenizer_proto)
    token_docs = [[tokenizer.encode(s) for s in doc] for doc in sentences]
    return examples_from_token_documents(token_docs, MaskingVocab.from_tokenizer(tokenizer), seed=shard_seed,
                                         **settings)


def _build_shards(documents: Sequence[Document], tokenizer: Tokenizer, seed: int, shards: int,
                  workers: int | None, settings: dict) -> PretrainingDataset:
    """build_shard over `shards` contiguous slices of the documents in `workers` processes, joined in
    order; one progress line on stderr per tenth of the shards."""
    shards = max(1, min(shards, len(documents) // MIN_SHARD_DOCUMENTS))
    if not workers:                              # every core this process may use (macOS: all cores)
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    cuts = [len(documents) * k // shards for k in range(shards + 1)]
    jobs = [([d.sentences for d in documents[a:b]], tokenizer.model_proto, seed * 1_000_003 + k, settings)
            for k, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    start, label = time.perf_counter(), f"[pretraining data] {settings['objective']}"
    if workers == 1:
        parts = [build_shard(*job) for job in jobs]
    else:
        # spawn: the workers import minialbert afresh, whatever threads or CUDA state this process holds
        with concurrent.futures.ProcessPoolExecutor(min(workers, shards),
                                                    mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(build_shard, *job) for job in jobs]
            for done, _ in enumerate(concurrent.futures.as_completed(futures), 1):
                if done * 10 // shards != (done - 1) * 10 // shards:
                    seconds = time.perf_counter() - start
                    sys.stderr.write(f"{label}: {done}/{shards} shards of {len(documents):,} documents on "
                                     f"{min(workers, shards)} processes, {seconds:.0f} s\n")
            parts = [f.result() for f in futures]
    return concatenate(parts, cuts[:-1])


def documents_digest(documents: Sequence[Document]) -> str:
    """sha256 of documents' titles and sentences, in order."""
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(json.dumps([doc.title, list(doc.sentences)], ensure_ascii=False).encode())
    return digest.hexdigest()


def examples_key(digest: str, tokenizer: Tokenizer, objective: str, max_seq_len: int, seed: int,
                 dupe_factor: int, mask_rate: float, balance_lengths: bool, shards: int = 0,
                 segmenting: str = OFFICIAL) -> str:
    """What decides a pretraining set's examples: the documents (their digest), the tokenizer and every
    setting, hashed; the same key always builds the same examples."""
    settings = {"format": FORMAT_VERSION, "objective": objective, "max_seq_len": max_seq_len, "seed": seed,
                "dupe_factor": dupe_factor, "mask_rate": mask_rate, "max_ngram": MAX_NGRAM,
                "short_seq_prob": SHORT_SEQ_PROB, "documents": digest}
    if balance_lengths:                         # only when set: the unbalanced caches keep their keys
        settings["balance_lengths"] = True
    if shards:                                  # likewise: the one-stream sets keep their keys
        settings["shards"] = shards
    if objective != "mlm" and segmenting != TWO_SENTENCE_CHUNKS:   # likewise: the pairs the shipped zoo
        settings["segmenting"] = segmenting                        # was built on keep their keys
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    key.update(hashlib.sha256(tokenizer.model_proto).digest())
    return key.hexdigest()


# ---------------------------------------------------------------------------------------------
# Batches

def unmasked_ids(example: dict[str, torch.Tensor]) -> torch.Tensor:
    """The example's tokens before masking: the label wherever one is predicted."""
    labels = example["mlm_labels"]
    return torch.where(labels != IGNORE_INDEX, labels, example["input_ids"])


def collate(examples: Sequence[dict[str, torch.Tensor]], pad_id: int = PAD_ID) -> dict[str, torch.Tensor]:
    """Right-pad examples to the longest one: the batch dict AlbertForPretraining(**batch) takes.

    attention_mask is 1 on real tokens and 0 on padding; mlm_labels is IGNORE_INDEX on padding.
    """
    if not examples:
        raise ValueError("cannot collate an empty list of examples")
    n = max(len(ex["input_ids"]) for ex in examples)
    batch = len(examples)
    input_ids = torch.full((batch, n), pad_id, dtype=torch.long)             # (B, N)
    token_type_ids = torch.zeros((batch, n), dtype=torch.long)               # (B, N)
    attention_mask = torch.zeros((batch, n), dtype=torch.long)               # (B, N)
    mlm_labels = torch.full((batch, n), IGNORE_INDEX, dtype=torch.long)      # (B, N)
    for b, ex in enumerate(examples):
        length = len(ex["input_ids"])
        input_ids[b, :length] = ex["input_ids"]
        token_type_ids[b, :length] = ex["token_type_ids"]
        attention_mask[b, :length] = 1
        mlm_labels[b, :length] = ex["mlm_labels"]
    out = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
           "mlm_labels": mlm_labels}
    has_label = ["sentence_label" in ex for ex in examples]
    if all(has_label):
        out["sentence_labels"] = torch.stack([ex["sentence_label"].long() for ex in examples])  # (B,)
    elif any(has_label):
        raise ValueError("some examples have a sentence_label and some do not: mix of objectives?")
    return out


def make_dataloader(dataset: Dataset, batch_size: int, shuffle: bool = True, seed: int = 0,
                    drop_last: bool = True, sampler: Sampler | None = None) -> DataLoader:
    """A DataLoader of collated batches in a seeded order; num_workers=0 works in notebooks on every OS.

    A sampler (e.g. DistributedSampler) replaces shuffling and decides the order itself.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if drop_last and sampler is None and len(dataset) < batch_size:
        raise ValueError(f"the dataset has {len(dataset)} examples, fewer than batch_size={batch_size}, "
                         "so drop_last=True would give no batch: lower batch_size or set drop_last=False")
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle and sampler is None, sampler=sampler,
                      drop_last=drop_last, collate_fn=collate, num_workers=0, generator=generator)
