"""fused_attention: the one entry to the Triton kernels, for both versions, eager or under torch.compile.

It checks its inputs once, with one-line errors, and resolves what the kernels take: the key lengths, the
tiles, the layout. Then the version's forward and backward (flash_attention.py, flash_attention_v2.py) run
as one of two equivalent pieces of autograd glue:
- eagerly, FusedAttention, a torch.autograd.Function: the least host time per call;
- under torch.compile, the operator torch.ops.minialbert.fused_attention (and its backward), which the
  compiler treats as one opaque call with a known output shape. It does not trace into the kernels' Python
  (tile lookup and tuning, buffers kept per shape), which it cannot follow, so a model with
  attention_backend="triton" (either kernel version) compiles as one graph. Its host time does not matter
  there: with mode="reduce-overhead" the whole graph, these launches included, replays as a CUDA graph.
"""

from __future__ import annotations

import functools
import math
import warnings

import torch
from torch.autograd.function import once_differentiable

from . import flash_attention, flash_attention_v2
from .flash_attention import FIXED_BLOCK, HEAD_DIMS, INTERPRET, LOG2E
from .flash_attention_v2 import DEFAULT_DQ, DQ_MODES

VERSIONS = (1, 2)                       # 2: flash_attention_v2 (fewer launches, a 5-product backward)
DEFAULT_VERSION = 1                     # changes only when a GPU measurement shows version 2 ahead
MAX_HEAD_DIM_BELOW_SM80 = 64            # a T4 (sm_75): at d=128 some kernels have no tile that fits
MAX_PROGRAMS = 65535                    # CUDA's limit on the grid's second axis (batch x heads)


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    key_lengths: torch.Tensor | None = None, sm_scale: float | None = None, *,
                    block_m: int | None = None, block_n: int | None = None,
                    check_lengths: bool | None = None, version: int = DEFAULT_VERSION,
                    dq: str = DEFAULT_DQ) -> torch.Tensor:
    """softmax(q k^T * sm_scale) v on (B, h, N, d) tensors, ignoring keys at positions >= key_lengths[b].

    key_lengths: (B,) integers in [0, N] (None = no padding); rows past the length come out as zeros.
    sm_scale defaults to 1/sqrt(d). block_m/block_n fix the query/key tile sizes (powers of two >= 16);
    by default they are autotuned on a GPU for float16/bfloat16, else 32. check_lengths reads the
    lengths back to validate them (a host sync on GPU); pass False when they are known to be valid.
    version 1 is the first kernel (four launches per forward+backward, a 7-product backward); version 2
    (flash_attention_v2) reads nothing back by default (check_lengths=None: v1 checks, v2 clamps the
    lengths to [0, N] on the GPU) and, with its default dq, launches two kernels per forward+backward.
    dq: how version 2's backward sums dQ over key tiles, one of DQ_MODES (flash_attention_v2 says what
    each does; the default, "two_phase", uses no atomics; "atomic" warns on sm_90, where it lost rows);
    version 1 has one way and ignores it.
    """
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    if dq not in DQ_MODES:
        raise ValueError(f"dq must be one of {DQ_MODES}, got {dq!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a 4-D tensor (B, heads, N, head_dim), got {got}")
    if not (q.shape == k.shape == v.shape):
        raise ValueError(f"q, k, v must have the same shape (self-attention), got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    B, h, N, d = q.shape
    if min(B, h, N) == 0:
        raise ValueError(f"q has an empty dimension: shape {tuple(q.shape)}")
    if B * h > MAX_PROGRAMS:
        raise ValueError(f"batch x heads = {B * h} exceeds {MAX_PROGRAMS} (CUDA's grid limit); "
                         "split the batch into smaller ones")
    if d not in HEAD_DIMS:
        raise ValueError(f"head_dim {d} is not supported; use one of {HEAD_DIMS}")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"q, k, v must share one dtype among float16, bfloat16, float32; got "
                         f"{q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if not INTERPRET:
        if not torch.cuda.is_available():
            raise RuntimeError("fused_attention needs a CUDA GPU, or Triton's CPU interpreter: set the "
                               "environment variable TRITON_INTERPRET=1 before Python imports triton "
                               "(e.g. `TRITON_INTERPRET=1 python script.py`), "
                               "or use attention_backend='sdpa'")
        if q.device.type != "cuda":
            raise ValueError(f"fused_attention runs on CUDA tensors; q is on {q.device}: "
                             "move q, k, v to 'cuda'")
        if _capability(q.device) < (8, 0) and (q.dtype == torch.bfloat16 or d > MAX_HEAD_DIM_BELOW_SM80):
            major, minor = _capability(q.device)
            problem = ("bfloat16 needs compute capability 8.0 or newer (Ampere)" if q.dtype == torch.bfloat16
                       else f"head_dim {d} needs compute capability 8.0 or newer (no tile fits 64 KiB of "
                            "shared memory)")
            raise ValueError(f"{problem}; this GPU has {major}.{minor}: use "
                             f"{'float16' if q.dtype == torch.bfloat16 else 'head_dim <= 64'} or "
                             "attention_backend='sdpa'")
        warn_if_atomic_dq_on_hopper(version, dq, _capability(q.device))
    elif q.dtype == torch.bfloat16:
        raise ValueError("bfloat16 needs a CUDA GPU: Triton's interpreter computes bfloat16 dot products "
                         "wrongly; use float16 or float32 on CPU")
    if (block_m is None) != (block_n is None):
        raise ValueError("give both block_m and block_n, or neither")
    blocks = (block_m, block_n) if block_m is not None else None
    if blocks is None and (INTERPRET or q.dtype == torch.float32):     # float32 checks, it is not fast
        blocks = (FIXED_BLOCK, FIXED_BLOCK)
    if blocks is not None and any(b < 16 or b & (b - 1) for b in blocks):
        raise ValueError(f"block_m and block_n must be powers of two >= 16, got {blocks}")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(d)
    if not (isinstance(sm_scale, (int, float)) and math.isfinite(sm_scale) and sm_scale > 0):
        raise ValueError(f"sm_scale must be a positive finite number, got {sm_scale!r}")
    if version == 2:
        lengths = _lengths_v2(key_lengths, B, N, q.device, bool(check_lengths))
        q, k, v, blocks = flash_attention_v2.one_layout(q, k, v, blocks)
    else:
        lengths = _check_lengths(key_lengths, B, N, q.device, check_lengths is not False)
        q, k, v = (t.contiguous() for t in (q, k, v))   # the model passes permuted views
    if torch.compiler.is_compiling():
        return torch.ops.minialbert.fused_attention(q, k, v, lengths, float(sm_scale), version, blocks, dq)[0]
    return FusedAttention.apply(q, k, v, lengths, float(sm_scale), version, blocks, dq)


def warn_if_atomic_dq_on_hopper(version: int, dq: str, capability: tuple[int, int]) -> None:
    """Version 2's atomic dQ mode lost whole rows of dQ on an H200 (flash_attention_v2): say so on sm_90
    (Python's warnings show it once per calling line)."""
    if version != 2 or dq != "atomic" or capability != (9, 0):
        return
    warnings.warn("dq='atomic' lost whole rows of dQ on an H200 (sm_90: assets/benchmarks/"
                  "kernel_dq_diagnostic_nvidia-h200.json); gradients may be wrong: use the default "
                  f"dq={DEFAULT_DQ!r}", RuntimeWarning, stacklevel=3)


# ---------------------------------------------------------------------------- the autograd glue
def _forward(q, k, v, lengths, sm_scale: float, version: int, blocks):
    """-> o, lse: the version's forward launches. blocks: None, or tiles (a list through the operator)."""
    module = flash_attention_v2 if version == 2 else flash_attention
    return module.forward(q, k, v, lengths, sm_scale, blocks and tuple(blocks))


def _backward(do, q, k, v, o, lse, lengths, sm_scale: float, version: int, blocks, dq_mode: str):
    """-> dq, dk, dv: the version's backward launches (version 1 has one way to build dQ)."""
    blocks = blocks and tuple(blocks)
    if version == 2:
        return flash_attention_v2.backward(do, q, k, v, o, lse, lengths, sm_scale, blocks, dq_mode)
    return flash_attention.backward(do, q, k, v, o, lse, lengths, sm_scale, blocks)


class FusedAttention(torch.autograd.Function):
    """Eager glue: forward saves (q, k, v, o, lse, lengths); backward recomputes P tile by tile."""

    @staticmethod
    def forward(ctx, q, k, v, lengths, sm_scale, version, blocks, dq_mode):
        o, lse = _forward(q, k, v, lengths, sm_scale, version, blocks)
        ctx.save_for_backward(q, k, v, o, lse, lengths)
        ctx.args = (sm_scale, version, blocks, dq_mode)
        return o

    @staticmethod
    @once_differentiable
    def backward(ctx, do):
        dq, dk, dv = _backward(do, *ctx.saved_tensors, *ctx.args)
        return dq, dk, dv, None, None, None, None, None


# The same glue as operators torch.compile calls without looking inside. Tile lists travel as int[]. The
# kernels read q, k, v (and o, do) through the strides fused_attention resolved, so the compiler must hand
# them over with exactly the strides they had when traced: needs_exact_strides (a torch without that tag keeps
# at least the strides' order).
EXACT = (getattr(torch.Tag, "needs_exact_strides", torch.Tag.needs_fixed_stride_order),)


@torch.library.custom_op("minialbert::fused_attention", mutates_args=(), tags=EXACT, schema=(
    "(Tensor q, Tensor k, Tensor v, Tensor lengths, float sm_scale, int version, int[]? blocks, str dq_mode)"
    " -> (Tensor, Tensor)"))
def attention_op(q, k, v, lengths, sm_scale, version, blocks, dq_mode):
    return _forward(q, k, v, lengths, sm_scale, version, blocks)


@attention_op.register_fake
def _(q, k, v, lengths, sm_scale, version, blocks, dq_mode):     # shapes and layouts, nothing run
    B, h, N, d = q.shape
    o = torch.empty_like(q) if version == 1 else flash_attention_v2.seq_major(B, h, N, d, q)
    return o, q.new_empty((B, h, N), dtype=torch.float32)


@torch.library.custom_op("minialbert::fused_attention_backward", mutates_args=(), tags=EXACT, schema=(
    "(Tensor do, Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor lengths, float sm_scale, "
    "int version, int[]? blocks, str dq_mode) -> (Tensor, Tensor, Tensor)"))
def attention_backward_op(do, q, k, v, o, lse, lengths, sm_scale, version, blocks, dq_mode):
    return _backward(do, q, k, v, o, lse, lengths, sm_scale, version, blocks, dq_mode)


@attention_backward_op.register_fake
def _(do, q, k, v, o, lse, lengths, sm_scale, version, blocks, dq_mode):   # gradients laid out as o
    return tuple(torch.empty_like(o) for _ in range(3))


def _setup_context(ctx, inputs, output):
    q, k, v, lengths, sm_scale, version, blocks, dq_mode = inputs
    o, lse = output
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, o, lse, lengths)
    ctx.args = (sm_scale, version, blocks, dq_mode)


def _op_backward(ctx, do, _lse_grad):
    dq, dk, dv = attention_backward_op(do, *ctx.saved_tensors, *ctx.args)
    return dq, dk, dv, None, None, None, None, None


attention_op.register_autograd(_op_backward, setup_context=_setup_context)


# ---------------------------------------------------------------------------- the key lengths
def _check_lengths(key_lengths: torch.Tensor | None, B: int, N: int, device: torch.device,
                   check_range: bool) -> torch.Tensor:
    """(B,) int32 lengths on `device`; all N when there is no padding."""
    if key_lengths is None:
        return torch.full((B,), N, dtype=torch.int32, device=device)
    _validate_lengths(key_lengths, B, N, device, check_range)
    return key_lengths.to(torch.int32).contiguous()


def _validate_lengths(key_lengths, B: int, N: int, device: torch.device, check_range: bool) -> None:
    """A (B,) integer tensor on `device`; with check_range, in [0, N] (a host read on GPU)."""
    if not isinstance(key_lengths, torch.Tensor):
        raise ValueError(f"key_lengths must be a tensor of shape ({B},), got {type(key_lengths).__name__}")
    if key_lengths.shape != (B,):
        raise ValueError(f"key_lengths must have shape ({B},), one length per sequence; "
                         f"got {tuple(key_lengths.shape)}")
    if key_lengths.dtype.is_floating_point or key_lengths.dtype.is_complex or key_lengths.dtype == torch.bool:
        raise ValueError(f"key_lengths must hold integers, got dtype {key_lengths.dtype}")
    if key_lengths.device != device:
        raise ValueError(f"key_lengths is on {key_lengths.device} but q is on {device}; move it there")
    if check_range and bool(((key_lengths < 0) | (key_lengths > N)).any()):
        raise ValueError(f"key_lengths must lie in [0, N={N}], got {key_lengths.tolist()}")


_capability = functools.cache(torch.cuda.get_device_capability)    # (major, minor) per device, asked once
_FULL_LENGTHS: dict[tuple, torch.Tensor] = {}      # (B, N, device) -> all-N lengths, made once for version 2


def _lengths_v2(key_lengths: torch.Tensor | None, B: int, N: int, device: torch.device,
                check_range: bool) -> torch.Tensor:
    """Version 2's lengths: validated as version 1's, but passed on in their own integer dtype (the kernels
    read int32 or int64: no conversion launch), and for no padding one cached (B,) tensor of N."""
    if key_lengths is None:
        key = (B, N, device)
        if key not in _FULL_LENGTHS:
            _FULL_LENGTHS[key] = torch.full((B,), N, dtype=torch.int32, device=device)
        return _FULL_LENGTHS[key]
    _validate_lengths(key_lengths, B, N, device, check_range)
    return key_lengths.contiguous()


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        key_lengths: torch.Tensor | None = None,
                        sm_scale: float | None = None) -> torch.Tensor:
    """What fused_attention computes, in plain PyTorch with the whole N x N score matrix (the spec)."""
    B, h, N, d = q.shape
    lengths = torch.full((B,), N) if key_lengths is None else key_lengths
    real = torch.arange(N, device=q.device) < lengths.to(q.device)[:, None]        # (B, N)
    scores = q @ k.transpose(-2, -1) * (sm_scale or 1.0 / math.sqrt(d))             # (B, h, N, N)
    scores = scores.masked_fill(~real[:, None, None, :], float("-inf"))
    probs = scores.softmax(dim=-1).masked_fill(~real[:, None, None, :], 0.0)       # length 0: no NaN
    return (probs @ v).masked_fill(~real[:, None, :, None], 0.0)                    # padded rows: zeros


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_lengths: torch.Tensor,
                    block_m: int = 32, block_n: int = 32) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The forward kernel's loops as PyTorch loops (lesson 10): (the output, the base-2 log-sum-exp of each
    query's scores, the number of tile pairs visited). Padded keys are skipped a tile at a time and masked
    inside the partial tile; padded query rows stay zero."""
    B, h, N, d = q.shape
    qk_scale = LOG2E / math.sqrt(d)
    out, lse, visited = torch.zeros_like(q), torch.zeros(B, h, N, dtype=q.dtype), 0
    for b in range(B):
        L = int(key_lengths[b])
        for head in range(h):
            for start_m in range(0, L, block_m):                       # query tiles with real rows only
                q_tile = q[b, head, start_m:start_m + block_m]          # (BM, d): stays on chip
                m_i = torch.full((len(q_tile),), -math.inf, dtype=q.dtype)
                l_i = torch.zeros(len(q_tile), dtype=q.dtype)
                acc = torch.zeros(len(q_tile), d, dtype=q.dtype)
                for start_n in range(0, L, block_n):                   # key tiles with real keys only
                    k_tile = k[b, head, start_n:start_n + block_n]      # (BN, d): streamed past
                    v_tile = v[b, head, start_n:start_n + block_n]
                    s = q_tile @ k_tile.T * qk_scale                    # (BM, BN) scores, log2 units
                    s[:, L - start_n:] = -math.inf                      # the partial tile: keys >= L
                    m_new = torch.maximum(m_i, s.max(dim=1).values)
                    p = torch.exp2(s - m_new[:, None])
                    alpha = torch.exp2(m_i - m_new)
                    l_i = l_i * alpha + p.sum(dim=1)
                    acc = acc * alpha[:, None] + p @ v_tile
                    m_i = m_new
                    visited += 1
                real = min(L - start_m, len(q_tile))                    # rows >= L stay zero
                out[b, head, start_m:start_m + real] = (acc / l_i[:, None])[:real]
                lse[b, head, start_m:start_m + real] = (m_i + torch.log2(l_i))[:real]
    return out, lse, visited
