"""Lesson 10's pieces: the online softmax, in PyTorch and as a Triton kernel, each checked against the
package's attention (math_attention, and the fused kernel minialbert.kernels.fused_attention)."""

from __future__ import annotations

import math
import re

import torch

from ...model import math_attention
from .checking import Piece, difference, largest, named_mistake, randn


def _online_inputs(g, trial):
    N, M, d = 5, 11, 4                          # M not a multiple of the block: the last block is short
    return randn(g, N, d), randn(g, M, d) * 2, randn(g, M, d), 4


def _full_softmax_attention(q, k, v, block):
    """The reference: plain softmax(q k^T / sqrt(d)) v (the package's math_attention), one head."""
    attend = torch.ones(1, 1, 1, k.shape[0], dtype=torch.bool)
    return math_attention(q[None, None], k[None, None], v[None, None], attend)[0, 0]


def _online_variant(q, k, v, block, rescale=True, normalise=True):
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full((q.shape[0], 1), -math.inf)
    l, acc = torch.zeros(q.shape[0], 1), torch.zeros_like(q)
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T * scale
        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        p, alpha = (s - m_new).exp(), (m - m_new).exp() if rescale else torch.ones_like(m)
        l, acc, m = l * alpha + p.sum(-1, keepdim=True), acc * alpha + p @ v[start:start + block], m_new
    return acc / l if normalise else acc


TRITON_BLOCK = 16           # the Triton piece's tiles (tl.dot wants sides of at least 16)
LOG2E = math.log2(math.e)


def _triton_inputs(g, trial):
    N, d = 3 * TRITON_BLOCK, 16                 # three query tiles, three key tiles
    return randn(g, N, d), randn(g, N, d) * 2, randn(g, N, d)


def _triton_online_softmax(kernel, g, trial) -> tuple[str | None, float]:
    """Launch the learner's @triton.jit kernel on one head and compare its output with the package's kernel,
    minialbert.kernels.fused_attention, on the same tiles: in Triton's interpreter on the CPU where the
    kernels are interpreted (no GPU), compiled on the GPU otherwise, float32 products in full float32 in
    both. The kernel's arguments: Q, K, V, O (N, d) float32, n_keys, qk_scale = log2(e) / sqrt(d), and the
    constants HEAD_DIM, BLOCK_M, BLOCK_N; one program per tile of BLOCK_M queries."""
    # triton only here: lesson 10 imports it after choosing the interpreter or a GPU
    from triton import knobs
    from triton.runtime.errors import InterpreterError

    from ...kernels import INTERPRET, fused_attention

    if not callable(getattr(kernel, "fn", None)):
        return "it is not a Triton kernel: put @triton.jit above its def", 0.0
    if not INTERPRET and (stub := re.search(r"raise NotImplementedError\((['\"])(.*?)\1\)", kernel.src)):
        raise NotImplementedError(stub.group(2))        # a compiled kernel cannot raise: its stub says it
    q, k, v = inputs = _triton_inputs(g, trial)
    device = "cpu" if INTERPRET else "cuda"
    (N, d), out = q.shape, torch.zeros_like(q, device=device)
    try:
        with knobs.language.scope():
            knobs.language.fp32_default = "ieee"        # a GPU's default for float32 tl.dot is tf32
            kernel[(N // TRITON_BLOCK,)](*(t.to(device) for t in (q, k, v)), out, N, LOG2E / math.sqrt(d),
                                         HEAD_DIM=d, BLOCK_M=TRITON_BLOCK, BLOCK_N=TRITON_BLOCK)
    except InterpreterError as e:       # the interpreter wraps what the kernel raised: say that instead
        raise (e.__cause__ or e) from None
    theirs = fused_attention(*(t.to(device)[None, None] for t in (q, k, v)), block_m=TRITON_BLOCK,
                             block_n=TRITON_BLOCK)[0, 0]
    out, theirs = out.cpu(), theirs.cpu()
    if (problem := difference(out, theirs)) is not None:
        return problem + named_mistake(TRITON_MISTAKES, out, inputs), 0.0
    return None, largest(out, theirs)


def _softmax_attention_scaled(q, k, v, scale):
    return torch.softmax(q @ k.T * scale, dim=-1) @ v


# The Triton piece's mistakes, which _triton_online_softmax names itself (a property piece runs its own check)
TRITON_MISTAKES = (("not rescaling the running sum and accumulator when the maximum grows",
                    lambda q, k, v: _online_variant(q, k, v, TRITON_BLOCK, rescale=False)),
                   ("tl.exp instead of tl.exp2 (qk_scale holds log2(e): the scores are in base 2)",
                    lambda q, k, v: _softmax_attention_scaled(q, k, v, LOG2E / math.sqrt(q.shape[-1]))),
                   ("leaving out qk_scale",
                    lambda q, k, v: _softmax_attention_scaled(q, k, v, 1 / LOG2E)))


PIECES = (
    Piece("online_softmax", "function", _full_softmax_attention, _online_inputs,
          mistakes=(("not rescaling the running sum and accumulator when the maximum grows",
                     lambda *a: _online_variant(*a, rescale=False)),
                    ("not dividing the accumulator by the running sum at the end",
                     lambda *a: _online_variant(*a, normalise=False)))),
    Piece("online_softmax_triton", "property", _triton_online_softmax, lambda g, trial: (),
          mistakes=TRITON_MISTAKES),
)
