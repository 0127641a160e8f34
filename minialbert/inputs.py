"""What a batch given to the model must be, checked where data enter: `check_batch`.

The model's forward checks nothing (a check reads values back from the device, every step). Data are
checked once, where they enter: a pretraining set when it is built or loaded (pretraining_dataset.check_fits),
a fine-tuning set when it is encoded, and any batch of your own with `check_batch`. Bad input is then one
clear ValueError naming the tensor, instead of an index error deep in the model or silent nonsense.
"""

from __future__ import annotations

import torch

from .config import IGNORE_INDEX, AlbertConfig

ID_DTYPES = (torch.int64, torch.int32)   # what nn.Embedding indexes with


def check_batch(cfg: AlbertConfig, input_ids, token_type_ids=None, attention_mask=None, mlm_labels=None,
                sentence_labels=None) -> None:
    """Raise ValueError unless the tensors fit a model of `cfg`: dtypes, shapes that agree, ids in range,
    a 0/1 attention mask (right-padded for the Triton kernel, which reads lengths), labels in range."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        got = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"input_ids must be a (batch, length) tensor, got {got}")
    B, N = input_ids.shape
    if B == 0 or N == 0:
        raise ValueError(f"empty batch: input_ids has shape {(B, N)}; give at least one token")
    if N > cfg.max_position_embeddings:
        raise ValueError(f"sequence length {N} exceeds max_position_embeddings "
                         f"{cfg.max_position_embeddings}; truncate the input")
    check_ids("input_ids", input_ids, (B, N), cfg.vocab_size, f"the vocabulary size is {cfg.vocab_size}")
    if token_type_ids is not None:
        check_ids("token_type_ids", token_type_ids, (B, N), cfg.type_vocab_size,
                  f"type_vocab_size is {cfg.type_vocab_size}")
    if attention_mask is not None:
        check_mask(cfg, attention_mask, (B, N))
    if mlm_labels is not None:
        check_labels("mlm_labels", mlm_labels, (B, N), cfg.vocab_size, IGNORE_INDEX)
    if sentence_labels is not None:
        check_labels("sentence_labels", sentence_labels, (B,), 2, None)


def check_ids(name: str, ids, shape: tuple, high: int, what: str) -> None:
    """ids: an integer tensor of `shape` with values in [0, high)."""
    if not isinstance(ids, torch.Tensor) or ids.dtype not in ID_DTYPES:
        got = ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"{name} must be an int64 (or int32) tensor, got {got}")
    if tuple(ids.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(ids.shape)} but input_ids has {shape}; they must agree")
    low, top = (int(v) for v in torch.aminmax(ids))
    if low < 0 or top >= high:
        raise ValueError(f"{name} holds {low if low < 0 else top}, outside [0, {high}) ({what})")


def check_mask(cfg: AlbertConfig, attention_mask, shape: tuple) -> None:
    """A (B, N) mask of 0 (padding) and 1 (real token); right-padded (1...1 0...0) for the Triton kernel."""
    if not isinstance(attention_mask, torch.Tensor) or tuple(attention_mask.shape) != shape:
        got = tuple(attention_mask.shape) if isinstance(attention_mask, torch.Tensor) else attention_mask
        raise ValueError(f"attention_mask must have input_ids' shape {shape}, got {got}")
    if attention_mask.dtype != torch.bool and not ((attention_mask == 0) | (attention_mask == 1)).all():
        raise ValueError(f"attention_mask must hold 0 (padding) and 1 (real token), got values such as "
                         f"{attention_mask.min().item()}; an additive mask (0 / -10000) is not accepted")
    if cfg.attention_backend.startswith("triton"):
        mask = attention_mask.bool()
        mask = mask | ~mask.any(dim=1, keepdim=True)                  # an empty row counts as unpadded
        lengths = mask.sum(dim=1)
        prefix = torch.arange(shape[1], device=mask.device)[None] < lengths[:, None]
        if not torch.equal(prefix, mask):
            raise ValueError(f"attention_backend={cfg.attention_backend!r} needs right-padded batches (mask "
                             "1...1 0...0); use attention_backend='sdpa' for other masks")


def check_labels(name: str, labels, shape: tuple, classes: int, ignore: int | None) -> None:
    """labels: an int64 tensor (what cross_entropy takes) of `shape`, values in [0, classes) or `ignore`."""
    if not isinstance(labels, torch.Tensor) or labels.dtype != torch.int64 or tuple(labels.shape) != shape:
        got = f"{labels.dtype} {tuple(labels.shape)}" if isinstance(labels, torch.Tensor) else type(labels)
        raise ValueError(f"{name} must be an int64 tensor of shape {shape}, got {got}")
    real = labels if ignore is None else labels[labels != ignore]
    if real.numel() and (int(real.min()) < 0 or int(real.max()) >= classes):
        allowed = f"[0, {classes})" + ("" if ignore is None else f" or {ignore} (not predicted)")
        raise ValueError(f"{name} must be in {allowed}, got values in [{int(real.min())}, {int(real.max())}]")
