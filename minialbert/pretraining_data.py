"""ALBERT's pretraining examples: sentence-order (SOP) and next-sentence (NSP) pairs, masked.

Reading order (after masking.py, which masks one sequence with `ngram_mask`, and segments.py, which cuts
documents into pairs exactly as google-research/albert's create_pretraining_data.py does): building and
caching a whole dataset (`build_examples`, stored as pretraining_dataset.py's `PretrainingDataset`; the
course's own sets are course/data.py's), and batching it (`collate`, `make_dataloader`). Every
random choice comes from one seeded `random.Random`: for the same generator the pairs are the official
script's, in its order (it masks each pair with the same generator as it goes; we mask afterwards).
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
from collections.abc import Sequence
from contextlib import contextmanager

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from .config import IGNORE_INDEX
from .download import cache_dir
from .masking import MASK_RATE, MAX_NGRAM, MaskingVocab, ngram_mask
from .pretraining_dataset import FORMAT_VERSION, PretrainingDataset, check_objective, concatenate
from .segments import (
    OFFICIAL,
    SEGMENTINGS,
    SHORT_SEQ_PROB,
    TWO_SENTENCE_CHUNKS,
    check_segmenting,
    length_balanced,
)
from .sentences import Document
from .tokenizer import CLS_ID, PAD_ID, SEP_ID, Tokenizer

COURSE_SEED = 12345                     # the official script's default random_seed
MIN_SHARD_DOCUMENTS = 16                # a sharded build's fewest documents per shard (NSP draws its
                                        # random next segments from the other documents of the shard)


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
