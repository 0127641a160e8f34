"""The optimiser ALBERT was pretrained with: LAMB, plus linear warmup then linear decay.

LAMB (You et al. 2019) is Adam with a per-tensor "trust ratio": every tensor's step is rescaled so
that its size is proportional to the tensor's own norm, which keeps very large batches stable.
We follow the official ALBERT code (lamb_optimizer.py, optimization.py): beta 0.9/0.999, eps 1e-6,
weight decay 0.01 added to the update, no bias correction, and LayerNorm weights and all biases
excluded from both the weight decay and the trust ratio.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

OPTIMIZERS = ("lamb", "adamw")      # make_optimizer's names

NO_DECAY = ("LayerNorm", "layer_norm", "bias")   # the official exclude_from_weight_decay patterns


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups by parameter name: decayed and trust-ratio adapted, or neither (LayerNorm, biases).

    named_parameters() yields a shared (tied) Parameter once, so the MLM decoder that is tied to
    the word embeddings is optimised once, as part of the embeddings.
    """
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if any(s in name for s in NO_DECAY) else decay).append(p)
    return [dict(params=decay, weight_decay=weight_decay, layer_adaptation=True),
            dict(params=no_decay, weight_decay=0.0, layer_adaptation=False)]


def trust_ratio(weight: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """LAMB's layer-wise trust ratio ||w|| / ||u||: every tensor moves by lr times its own norm (per
    unit of update), whatever its gradient's scale; 1 where either norm is 0 (a fresh zero bias)."""
    w_norm, u_norm = weight.norm(), update.norm()
    return torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)


class Lamb(torch.optim.Optimizer):
    """LAMB as in the official ALBERT code. Per tensor w with gradient g:

        m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2          (no bias correction)
        u = m / (sqrt(v) + eps) + weight_decay * w
        w = w - lr * r * u,  r = ||w|| / ||u||  (1 if either norm is 0, or layer_adaptation off)
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.01, layer_adaptation: bool = True):
        if lr < 0 or eps <= 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"bad LAMB hyper-parameters lr={lr}, betas={betas}, eps={eps}, "
                             f"weight_decay={weight_decay}: need lr >= 0, 0 <= beta < 1, eps > 0")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      layer_adaptation=layer_adaptation))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            (b1, b2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                update = m / (v.sqrt() + eps)
                if wd:
                    update.add_(p, alpha=wd)
                if group["layer_adaptation"]:
                    update.mul_(trust_ratio(p, update))
                p.sub_(update, alpha=group["lr"])
        return loss


def make_optimizer(name: str, model: nn.Module, lr: float, weight_decay: float = 0.01,
                   betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6) -> torch.optim.Optimizer:
    """'lamb' (ALBERT's pretraining optimiser) or 'adamw' (BERT's), with the same two groups."""
    groups = param_groups(model, weight_decay)
    if name == "lamb":
        return Lamb(groups, lr=lr, betas=betas, eps=eps)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")


def warmup_linear_decay(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int) -> LambdaLR:
    """lr x step/warmup for the first warmup_steps, then linear decay to 0 at total_steps.

    Call scheduler.step() after every optimizer.step(). (The official code decays from step 0,
    so its peak is a hair lower; this form reaches the peak exactly at the end of warmup.)
    """
    if not 0 <= warmup_steps <= total_steps or total_steps <= 0:
        raise ValueError(f"need 0 <= warmup_steps ({warmup_steps}) <= total_steps ({total_steps}) "
                         f"and total_steps > 0")

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return LambdaLR(optimizer, factor)
