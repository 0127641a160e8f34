"""Fine-tuning: a classification head on the pooled [CLS] output, and the loop that trains it.

The head is transformers' layout (AlbertForSequenceClassification / BertForSequenceClassification):
dropout on the pooled output, then one Linear `classifier` H -> num_labels. num_labels=1 is
regression (mean squared error on a float target, STS-B style); more labels is classification
(cross-entropy). The encoder comes from a pretraining checkpoint (transfer) or is built from scratch.

The loop reuses the pretraining trainer's pieces (optim.make_optimizer, warmup_linear_decay, the
data order, gradient clipping, atomic checkpoints, the run lock and metrics.jsonl) and adds what
fine-tuning needs: evaluation on the dev split with the task's metric, and early stopping.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .config import AlbertConfig
from .model import AlbertForPretraining, AlbertModel, init_weights


@dataclass
class ClassificationOutput:
    loss: torch.Tensor | None            # cross-entropy (classification) or MSE (regression), if labels given
    logits: torch.Tensor                 # (B, num_labels)
    pooled_output: torch.Tensor          # (B, H): what the head reads


class AlbertForSequenceClassification(nn.Module):
    """Encoder + dropout + Linear(H, num_labels) on the pooled [CLS] output (single sentences or pairs)."""

    def __init__(self, cfg: AlbertConfig, num_labels: int):
        super().__init__()
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
            raise ValueError(f"num_labels must be an integer >= 1 (1 = regression), got {num_labels!r}")
        self.config, self.num_labels = cfg, num_labels
        self.albert = AlbertModel(cfg)
        self.dropout = nn.Dropout(cfg.classifier_dropout_prob)
        self.classifier = nn.Linear(cfg.hidden_size, num_labels)
        self.apply(lambda m: init_weights(m, cfg.initializer_range))

    @classmethod
    def from_pretraining(cls, pretrained: AlbertForPretraining,
                         num_labels: int) -> AlbertForSequenceClassification:
        """Transfer: the pretrained encoder (embeddings, layers, pooler) under a new, freshly initialised
        head. The MLM and SOP/NSP heads are left behind."""
        model = cls(pretrained.config, num_labels)
        model.albert.load_state_dict(pretrained.albert.state_dict())
        return model

    @classmethod
    def from_checkpoint(cls, path: str | Path, num_labels: int) -> AlbertForSequenceClassification:
        """The encoder of a pretraining run (a run directory or one of its step-* directories)."""
        from .train import load_checkpoint

        return cls.from_pretraining(load_checkpoint(path), num_labels)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None,
                labels=None) -> ClassificationOutput:
        """input_ids, token_type_ids, attention_mask: (B, N); labels: (B,) int64 class ids, or float
        targets when num_labels == 1."""
        pooled = self.albert(input_ids, token_type_ids, attention_mask).pooled_output   # (B, H)
        logits = self.classifier(self.dropout(pooled))                                  # (B, num_labels)
        loss = None if labels is None else self.loss(logits, labels)
        return ClassificationOutput(loss, logits, pooled)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if tuple(labels.shape) != tuple(logits.shape[:1]):
            raise ValueError(f"labels must have shape ({logits.shape[0]},), one per example, "
                             f"got {tuple(labels.shape)}")
        if self.num_labels == 1:                                     # regression
            return F.mse_loss(logits.float().squeeze(-1), labels.float())
        if labels.dtype != torch.int64:
            raise ValueError(f"classification labels must be int64 class ids, got {labels.dtype}")
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= self.num_labels):
            raise ValueError(f"labels must be in [0, {self.num_labels}), got values in "
                             f"[{int(labels.min())}, {int(labels.max())}]")
        return F.cross_entropy(logits.float(), labels)
