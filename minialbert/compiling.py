"""How training compiles the model: the whole forward under torch.compile, or the encoder's layers as CUDA
graphs. train.pretrain(compile=...) and benchmarks/train_step_gpu.py choose between them."""

from __future__ import annotations

import torch
from torch import nn

from .model import AlbertForPretraining

COMPILE_MODES = ("model", "graphs")    # pretrain(compile=...): the whole forward; the layers as CUDA graphs


def compiled(net: nn.Module, backend: str = "inductor") -> nn.Module:
    """torch.compile(net), with the masked-LM gather (its size M depends on the data) inside the graph:
    this sets torch._dynamo.config.capture_dynamic_output_shape_ops for the process."""
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    return torch.compile(net, backend=backend)


def graphed_layers(model: AlbertForPretraining, backend: str = "inductor") -> None:
    """Compile the encoder's layers in place (nn.Module.compile: the state dict keeps its names) with
    torch.compile's mode "reduce-overhead": on a CUDA GPU their forward and backward then replay as CUDA
    graphs, every kernel launch included, so the host spends no time per layer or per attention call. The
    embeddings and heads stay eager: the masked-LM gather's size depends on the data, which a CUDA graph
    cannot hold. Each new batch shape (B, N) records its own graphs; off CUDA it is torch.compile alone."""
    options = {"mode": "reduce-overhead"} if backend == "inductor" else {"backend": backend}   # tests: eager
    model.albert.encoder.compile(**options)
