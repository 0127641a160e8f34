"""Per-layer gradient norms when the layers share their weights.

An unshared stack has one gradient per layer. A shared layer has one gradient: the sum of what each of
its applications contributes. To see each contribution, untie it: copy the shared weights into one layer
per application (the same function, so the same loss and the same backward pass) and read each copy's
gradient; their sum is the shared layer's gradient. Lesson 12 measures both kinds of stack against the
claim that ALBERT attenuates its gradients layer by layer.
"""

from __future__ import annotations

import re

import torch

from ...model import AlbertForPretraining

LAYER = re.compile(r"(albert\.encoder\.groups\.)(\d+)(\..*)")


def untied(model: AlbertForPretraining) -> AlbertForPretraining:
    """The same function as `model`, in eval mode, with every application of a layer given its own copy of
    that layer's weights (sharing="none"); the model itself is left as it is."""
    cfg, encoder = model.config, model.albert.encoder
    if cfg.inner_group_num != 1:
        raise ValueError(f"inner_group_num={cfg.inner_group_num}: an application runs several layers, so "
                         f"one copy per application is not one layer; untie models with inner_group_num=1")
    copy = AlbertForPretraining(cfg.replace(sharing="none"), model.sentence_task).eval()
    state = model.state_dict()

    def source(key: str) -> str:             # application i reads the layer of its group
        found = LAYER.fullmatch(key)
        return key if found is None else f"{found[1]}{encoder.group_of(int(found[2]))}{found[3]}"

    copy.load_state_dict({key: state[source(key)] for key in copy.state_dict()})
    return copy


def application_gradient_norms(model: AlbertForPretraining, batch: dict) -> list[float]:
    """One backward pass of the pretraining loss on `batch`: the L2 norm of each application's gradient, all
    tensors of its layer together. Unshared, each layer's own gradient; shared, each application's
    contribution to the one gradient. Computed on the untied copy, so `model` keeps its gradients; with
    gradients on even where the caller turned them off."""
    copy = untied(model)
    with torch.enable_grad():
        copy(**batch).loss.backward()
    return [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item()
            for layer in copy.albert.encoder.groups]
