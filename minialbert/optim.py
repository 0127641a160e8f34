"""The optimiser ALBERT was pretrained with: LAMB, plus linear warmup then linear decay.

LAMB (You et al. 2019) is Adam with a per-tensor "trust ratio": every tensor's step is rescaled so
that its size is proportional to the tensor's own norm, which keeps very large batches stable.
We follow the official ALBERT code (lamb_optimizer.py, optimization.py): beta 0.9/0.999, eps 1e-6,
weight decay 0.01 added to the update, no bias correction, and LayerNorm weights and all biases
excluded from both the weight decay and the trust ratio. The official code (and transformers) keep the
query, key and value projections as three variables, each with its own trust ratio; our attention fuses
them into one (3H, H) weight (model.py, `qkv`), so LAMB splits its trust ratio into three, one per block of
H rows ("lamb"). The course's earlier LAMB gave the fused weight one ratio ("lamb-fused-qkv", kept for the
shipped entry trained with it).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

OPTIMIZERS = ("lamb", "adamw", "lamb-fused-qkv")      # make_optimizer's names (module docstring)
FUSED = {"qkv.weight": 3}           # fused parameters (by name ending) -> how many variables they hold

NO_DECAY = ("LayerNorm", "layer_norm", "bias")   # the official exclude_from_weight_decay patterns


def param_groups(model: nn.Module, weight_decay: float, split_fused: bool = False) -> list[dict]:
    """Groups by parameter name: decayed and trust-ratio adapted, or neither (LayerNorm, biases, last).
    With split_fused, a fused weight (FUSED: q, k, v in one) is a group of its own whose trust ratio is
    taken per variable (`variables`); an optimizer without trust ratios treats it as any decayed weight.

    named_parameters() yields a shared (tied) Parameter once, so the MLM decoder that is tied to
    the word embeddings is optimised once, as part of the embeddings.
    """
    decay, fused, no_decay = [], {}, []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if any(s in name for s in NO_DECAY):
            no_decay.append(p)
        elif split_fused and (n := next((n for end, n in FUSED.items() if name.endswith(end)), 0)):
            fused.setdefault(n, []).append(p)
        else:
            decay.append(p)
    return [dict(params=decay, weight_decay=weight_decay, layer_adaptation=True),
            *(dict(params=ps, weight_decay=weight_decay, layer_adaptation=True, variables=n)
              for n, ps in fused.items()),
            dict(params=no_decay, weight_decay=0.0, layer_adaptation=False)]


def trust_ratio(weight: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """LAMB's layer-wise trust ratio ||w|| / ||u||: every tensor moves by lr times its own norm (per
    unit of update), whatever its gradient's scale; 1 where either norm is 0 (a fresh zero bias)."""
    w_norm, u_norm = weight.norm(), update.norm()
    return torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)


def split_trust_ratio(weight: torch.Tensor, update: torch.Tensor, variables: int) -> torch.Tensor:
    """trust_ratio per variable of a fused weight: its rows cut into `variables` equal blocks (q, k, v),
    each block's ratio broadcast over its rows: (variables, 1, ...) against the weight viewed in blocks."""
    w, u = weight.unflatten(0, (variables, -1)), update.unflatten(0, (variables, -1))
    dims = tuple(range(1, w.dim()))
    w_norm, u_norm = w.norm(dim=dims, keepdim=True), u.norm(dim=dims, keepdim=True)   # (variables, 1, ...)
    return torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)


class Lamb(torch.optim.Optimizer):
    """LAMB as in the official ALBERT code. Per tensor w with gradient g:

        m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2          (no bias correction)
        u = m / (sqrt(v) + eps) + weight_decay * w
        w = w - lr * r * u,  r = ||w|| / ||u||  (1 if either norm is 0, or layer_adaptation off)

    A group with `variables` = n holds fused weights: r is taken per block of rows (split_trust_ratio).
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
                if group["layer_adaptation"] and group.get("variables", 1) > 1:
                    update = (update.unflatten(0, (group["variables"], -1))
                              * split_trust_ratio(p, update, group["variables"])).flatten(0, 1)
                elif group["layer_adaptation"]:
                    update.mul_(trust_ratio(p, update))
                p.sub_(update, alpha=group["lr"])
        return loss


def make_optimizer(name: str, model: nn.Module, lr: float, weight_decay: float = 0.01,
                   betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6) -> torch.optim.Optimizer:
    """'lamb' (ALBERT's pretraining optimiser) or 'adamw' (BERT's), with the same decay groups;
    'lamb-fused-qkv' is the course's earlier LAMB (one trust ratio for the fused q, k, v weight)."""
    groups = param_groups(model, weight_decay, split_fused=name == "lamb")
    if name in ("lamb", "lamb-fused-qkv"):
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
