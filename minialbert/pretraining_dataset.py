"""Where pretraining examples live: `PretrainingDataset`, every example of one objective stored flat (one
token tensor plus offsets), saved as one safetensors file whose checksum is checked on every load.

pretraining_data.py builds these datasets (segments, masking) and batches them; this module only holds
them: their shapes, their cache file and how consecutive parts join (`concatenate`, for sharded builds).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as save_safetensors
from torch.utils.data import Dataset

from .config import OBJECTIVES, AlbertConfig
from .download import atomic_write

FORMAT_VERSION = 3                      # bump when pretraining_data's recipe changes: old caches stop
                                        # matching (the cache key and the file's metadata hold it)


class PretrainingDataset(Dataset):
    """Masked pretraining examples of one objective, stored as flat tensors plus offsets.

    Example i is positions offsets[i]:offsets[i+1] of the flat tensors; __getitem__ returns
    unpadded 1-D LongTensors and, for nsp/sop, a scalar `sentence_label`. document_ids (E,), where
    known, names the document each example's first segment comes from: examples of one document are
    not independent, so held-out intervals resample documents (evaluation.clustered_proportion).
    """

    def __init__(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, mlm_labels: torch.Tensor,
                 offsets: torch.Tensor, sentence_labels: torch.Tensor | None, objective: str,
                 max_seq_len: int, document_ids: torch.Tensor | None = None) -> None:
        check_objective(objective)
        n_tokens, n_examples = input_ids.numel(), offsets.numel() - 1
        if not (token_type_ids.numel() == mlm_labels.numel() == n_tokens):
            raise ValueError("input_ids, token_type_ids and mlm_labels must have one entry per token")
        if n_examples < 0 or offsets[0] != 0 or offsets[-1] != n_tokens:
            raise ValueError(f"offsets must run from 0 to the {n_tokens} tokens")
        lengths = offsets.diff()
        if n_examples and (lengths.min() < 3 or lengths.max() > max_seq_len):
            raise ValueError(f"example lengths must lie in 3..max_seq_len={max_seq_len}, "
                             f"got {lengths.min()}..{lengths.max()}")
        if (objective == "mlm") != (sentence_labels is None):
            raise ValueError(f"objective {objective!r} {'takes no' if objective == 'mlm' else 'needs'} "
                             "sentence_labels")
        if sentence_labels is not None and sentence_labels.numel() != n_examples:
            raise ValueError(f"{sentence_labels.numel()} sentence_labels for {n_examples} examples")
        if document_ids is not None and document_ids.numel() != n_examples:
            raise ValueError(f"{document_ids.numel()} document_ids for {n_examples} examples")
        self.document_ids = document_ids
        self.input_ids, self.token_type_ids, self.mlm_labels = input_ids, token_type_ids, mlm_labels
        self.offsets, self.sentence_labels = offsets, sentence_labels
        self.objective, self.max_seq_len = objective, max_seq_len
        self._bounds = offsets.tolist()         # Python ints: fast slicing in __getitem__

    def __len__(self) -> int:
        return len(self._bounds) - 1

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"example {i} out of range for {len(self)} examples")
        i %= len(self)
        s, e = self._bounds[i], self._bounds[i + 1]
        example = {"input_ids": self.input_ids[s:e].long(),            # (L,)
                   "token_type_ids": self.token_type_ids[s:e].long(),  # (L,)
                   "mlm_labels": self.mlm_labels[s:e].long()}          # (L,)
        if self.sentence_labels is not None:
            example["sentence_label"] = self.sentence_labels[i].long()  # ()
        return example

    def without_sentence_labels(self) -> PretrainingDataset:
        """The same pairs, masked the same way, for masked LM alone: the sentence labels dropped."""
        return PretrainingDataset(self.input_ids, self.token_type_ids, self.mlm_labels, self.offsets, None,
                                  "mlm", self.max_seq_len, self.document_ids)

    @property
    def lengths(self) -> torch.Tensor:
        """Tokens per example, specials included: (E,)."""
        return self.offsets.diff()

    def checksum(self) -> str:
        """sha256 over every tensor: what the dataset holds, whatever file it came from."""
        return _checksum(self._tensors())

    def _tensors(self) -> dict[str, torch.Tensor]:
        tensors = {"input_ids": self.input_ids, "token_type_ids": self.token_type_ids,
                   "mlm_labels": self.mlm_labels, "offsets": self.offsets}
        if self.sentence_labels is not None:
            tensors["sentence_labels"] = self.sentence_labels
        if self.document_ids is not None:
            tensors["document_ids"] = self.document_ids
        return tensors

    def save(self, path: str | os.PathLike) -> None:
        """Write atomically as safetensors, with a checksum of every tensor in the metadata."""
        tensors = self._tensors()
        meta = {"format": str(FORMAT_VERSION), "objective": self.objective,
                "max_seq_len": str(self.max_seq_len), "sha256": _checksum(tensors)}
        atomic_write(Path(path), save_safetensors(tensors, metadata=meta))

    @classmethod
    def load(cls, path: str | os.PathLike) -> PretrainingDataset:
        """Read a saved dataset; raise ValueError if the file is damaged (bad header, checksum, shapes)."""
        path = Path(path)
        try:
            with safe_open(path, framework="pt") as f:
                meta = f.metadata() or {}
                tensors = {name: f.get_tensor(name) for name in f.keys()}
        except (SafetensorError, OSError, ValueError) as e:
            raise ValueError(f"pretraining cache {path} is not a readable safetensors file ({e}); "
                             "delete it to rebuild") from e
        if meta.get("format") != str(FORMAT_VERSION) or meta.get("sha256") != _checksum(tensors):
            raise ValueError(f"pretraining cache {path} is damaged or from another version "
                             "(checksum mismatch); delete it to rebuild")
        try:
            return cls(tensors["input_ids"], tensors["token_type_ids"], tensors["mlm_labels"],
                       tensors["offsets"], tensors.get("sentence_labels"), meta["objective"],
                       int(meta["max_seq_len"]), tensors.get("document_ids"))
        except (KeyError, ValueError) as e:
            raise ValueError(f"pretraining cache {path} is inconsistent ({e}); delete it to rebuild") from e



def _checksum(tensors: dict[str, torch.Tensor]) -> str:
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)}:".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def check_inputs(objective: str, inputs: str | None) -> None:
    """Raise ValueError unless inputs is None, or names sentence pairs ("nsp", "sop") for objective "mlm"."""
    if inputs is not None and (objective != "mlm" or inputs not in ("nsp", "sop")):
        raise ValueError(f"inputs={inputs!r} needs objective 'mlm' and names 'nsp' or 'sop' pairs")


def check_objective(objective: str) -> None:
    """Raise ValueError unless objective is one of config.OBJECTIVES (mlm, nsp, sop)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")



def check_fits(data, cfg: AlbertConfig, what: str = "the data") -> None:
    """`data` against the model's config, once, before training (the steps skip the model's input checks,
    so an id or a position out of range would fail deep inside an embedding): every token id (inputs and
    MLM labels) below vocab_size, every token type below type_vocab_size, no example longer than
    max_position_embeddings. A PretrainingDataset keeps its tokens in flat tensors (one max each); other
    datasets are read once, example by example. ValueError, one line, naming the config's field."""
    names = ("input_ids", "mlm_labels", "token_type_ids", "offsets")
    if all(isinstance(getattr(data, name, None), torch.Tensor) for name in names):
        ids, types, lengths = [data.input_ids, data.mlm_labels], [data.token_type_ids], data.offsets.diff()
    else:
        examples = list(data)
        ids = [ex[name] for ex in examples for name in ("input_ids", "mlm_labels")]
        types = [ex["token_type_ids"] for ex in examples if "token_type_ids" in ex]
        lengths = torch.tensor([ex["input_ids"].shape[-1] for ex in examples])
    top, top_type = (max((int(t.max()) for t in group if t.numel()), default=-1) for group in (ids, types))
    longest = int(lengths.max()) if lengths.numel() else 0
    if top >= cfg.vocab_size:
        raise ValueError(f"{what}: token id {top} >= the model's vocab_size {cfg.vocab_size}: the data was "
                         f"tokenized with a bigger vocabulary; set vocab_size to the tokenizer's size")
    if top_type >= cfg.type_vocab_size:
        raise ValueError(f"{what}: token type {top_type} >= the model's type_vocab_size "
                         f"{cfg.type_vocab_size}; set type_vocab_size to the data's number of segments")
    if longest > cfg.max_position_embeddings:
        raise ValueError(f"{what} holds sequences of {longest} tokens, more than the model's "
                         f"max_position_embeddings {cfg.max_position_embeddings}; set "
                         f"max_position_embeddings to at least {longest}, or build the data at the model's "
                         "length (--scale)")


def concatenate(parts: Sequence[PretrainingDataset], first_documents: Sequence[int]) -> PretrainingDataset:
    """Datasets of consecutive document slices as one; first_documents[i]: the index of part i's first
    document, added to its document_ids."""
    offsets, end = [torch.zeros(1, dtype=torch.int64)], 0
    for part in parts:
        offsets.append(part.offsets[1:] + end)
        end += part.input_ids.numel()
    first = parts[0]
    labels = None if first.sentence_labels is None else torch.cat([p.sentence_labels for p in parts])
    return PretrainingDataset(torch.cat([p.input_ids for p in parts]),
                              torch.cat([p.token_type_ids for p in parts]),
                              torch.cat([p.mlm_labels for p in parts]), torch.cat(offsets), labels,
                              first.objective, first.max_seq_len,
                              torch.cat([p.document_ids + d for p, d in zip(parts, first_documents)]))

