"""The best guess from one cue alone: in every cell of the cue (a pair's two segment lengths, where its two
segments end), the label seen most often there in training.

Lesson 08 sets every sentence-order number beside this rule (ablation.length_shortcut and end_shortcut):
a model is credited with reading the order only above what the shape of its inputs gives away.
"""

from __future__ import annotations

import torch


def majority_by_cell(train_cells: torch.Tensor, train_labels: torch.Tensor,
                     test_cells: torch.Tensor) -> torch.Tensor:
    """The rule's 0/1 label for every test example: the training label seen most often in its cell; in a
    tied cell, or one no training example fell in, the label seen most often overall (0 on a tie).

    cells: one id per example, (E,), or one row per example, (E, k), such as (len A, len B)."""
    n_train = len(train_cells)
    cells = torch.cat([train_cells, test_cells])
    _, ids = cells.unique(dim=0 if cells.dim() > 1 else None, return_inverse=True)       # one id per cell
    train_ids, test_ids = ids[:n_train], ids[n_train:]
    labels = train_labels.long()
    n = int(ids.max()) + 1 if len(ids) else 0
    ones = torch.zeros(n).index_add_(0, train_ids, labels.float())               # label 1 per cell
    counts = torch.bincount(train_ids, minlength=n).float()                      # examples per cell
    majority = int(labels.float().mean() > 0.5)
    cell_label = torch.where(ones * 2 == counts, majority, (ones * 2 > counts).long())   # unseen: a tie
    return cell_label[test_ids]
