"""Arms read on the same held-out [MASK] positions, so that two arms are compared by a paired interval.

Two models scored on different held-out samples can only be compared by their own intervals side by side,
each carrying the noise of which documents it happened to read. Scored on the same positions, what both
share (which documents are hard) cancels in the difference: `mask_hits` gives a model's correctness at
every [MASK] position of chosen examples, with each position's document, and `paired_mask_difference` the
difference of two arms (one or more seeds each) with a document-bootstrap interval
(paired_bootstrap.paired_difference), the interval verdict.py's paired `beats` reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ...config import IGNORE_INDEX
from ...model import AlbertForPretraining
from ...pretraining_data import collate
from ...tokenizer import MASK_ID
from .paired_bootstrap import paired_difference

__all__ = ["mask_hits", "paired_mask_difference", "read_arms"]


@torch.no_grad()
def mask_hits(model: AlbertForPretraining, dataset, indices: Sequence[int], batch_size: int = 64
              ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """The model's correctness at every [MASK] position of the examples at `indices` (row-major order):
    (hits (M,) float, documents (M,), the batches' (input_ids, mlm_labels) for the baselines)."""
    model.eval()
    hits, docs, batches = [], [], []
    for start in range(0, len(indices), batch_size):
        at = indices[start:start + batch_size]
        batch = collate([dataset[i] for i in at])
        out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                    mlm_labels=batch["mlm_labels"])
        predicted = batch["mlm_labels"] != IGNORE_INDEX                                      # (B, N)
        shown_mask = batch["input_ids"][predicted] == MASK_ID                                # (M_all,)
        right = out.mlm_logits.argmax(-1) == batch["mlm_labels"][predicted]
        hits.append(right[shown_mask].float())
        per_example = (predicted & (batch["input_ids"] == MASK_ID)).sum(1)
        docs.append(dataset.document_ids[at].long().repeat_interleave(per_example))
        batches.append((batch["input_ids"], batch["mlm_labels"], shown_mask))
    return torch.cat(hits), torch.cat(docs), batches


def read_arms(models: Mapping[str, AlbertForPretraining], dataset, indices: Sequence[int]
              ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Every model's [MASK] hits on the same examples -> ({name: (M,) hits}, (M,) documents)."""
    hits, documents = {}, None
    for name, model in models.items():
        hits[name], documents, _ = mask_hits(model, dataset, indices)
    return hits, documents


def paired_mask_difference(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor], documents: torch.Tensor,
                           seed: int = 0) -> dict:
    """mean(A) - mean(B) over the same [MASK] positions, each arm given as its seeds' hits (averaged per
    position), with a 95% document-bootstrap interval: {"value", "ci95", "documents", "examples"}."""
    return paired_difference([t.tolist() for t in a], [t.tolist() for t in b], documents.tolist(), seed=seed)
