"""FlashAttention-style fused attention in Triton for right-padded encoder batches.

Forward: a program keeps one BLOCK_M tile of queries on chip and streams BLOCK_N tiles of keys and
values past it, keeping a running max and sum per row (the online softmax, in base 2), so the N x N
score matrix never reaches memory. It saves the log-sum-exp (base 2) for the backward.
Backward (FlashAttention-2, non-causal): delta = rowsum(dO * O); one kernel streams query tiles past a
key tile to build dK and dV, another streams key tiles past a query tile to build dQ; both recompute
P from the saved log-sum-exp instead of storing it.

Key padding: sequence b has key_lengths[b] real tokens followed by padding. Key tiles past the length
are never visited (work scales with the real length), the one partial tile is masked, padded query
rows output zeros and get zero gradients, and whatever the padding holds (even NaN) never reaches a
real output. A length of 0 is allowed: that sequence's outputs and gradients are all zeros.

Layout: q, k, v, o are contiguous (B, h, N, d); the log-sum-exp and delta are (B, h, N) float32.

This file is version 1. fused_attention(..., version=2) runs flash_attention_v2 instead: the same maths with
fewer launches, no host reads and a 5-product backward (its docstring says what changed and why). The default
stays 1 until a GPU measurement shows version 2 ahead.
"""

from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable
from triton import knobs

from .flash_attention_v2 import DEFAULT_DQ, DQ_MODES, attention_v2
from .tiles import DKDV_TILES, DQ_TILES, FWD_TILES, autotune_configs

INTERPRET = knobs.runtime.interpret     # read once: kernels below are defined in this mode
FIXED_BLOCK = 32                        # tiles where nothing is autotuned: interpreter, and float32
# Fixed tiles launch on a GPU with 8 warps and 2 stages, not Triton's default 4 and 3: with 3 stages the
# float32 backward at d=128 asks 100 KiB of shared memory, more than an L4 block may have (99 KiB), and with
# 4 warps the float32 dK/dV spills registers from d=64; with 8, float32 spills only at d=128 on sm_89/sm_90
# and by 8 bytes in dK/dV at d=32 on sm_89 (assets/benchmarks/kernel_report.json).
FIXED_WARPS, FIXED_STAGES = 8, 2
HEAD_DIMS = (16, 32, 64, 128)
MAX_HEAD_DIM_BELOW_SM80 = 64            # a T4 (sm_75): at d=128 some kernels have no tile that fits
MAX_PROGRAMS = 65535                    # CUDA's limit on the grid's second axis (batch x heads)
LOG2E = 1.4426950408889634              # exp(x) = exp2(x * log2(e))
VERSIONS = (1, 2)                       # 2: flash_attention_v2 (fewer launches, a 5-product backward)
DEFAULT_VERSION = 1                     # changes only when a GPU measurement shows version 2 ahead


@triton.jit
def _fwd_kv_loop(acc, l_i, m_i, q, k_base, v_base, offs_n, offs_d, lo, hi, kv_len, qk_scale,
                 HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
                 PRECISION: tl.constexpr):
    """Stream key/value tiles [lo, hi) past the query tile, updating the online softmax state."""
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n                                             # (BN,) key positions
        kv_offs = cols[:, None] * HEAD_DIM + offs_d[None, :]                # (BN, d)
        if MASKED:                                                          # the one partial tile
            real_k = cols < kv_len
            k = tl.load(k_base + kv_offs, mask=real_k[:, None], other=0.0)
            v = tl.load(v_base + kv_offs, mask=real_k[:, None], other=0.0)
        else:
            k = tl.load(k_base + kv_offs)
            v = tl.load(v_base + kv_offs)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale   # (BM, BN) scores, log2 units
        if MASKED:
            qk = tl.where(real_k[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))                              # running max
        p = tl.exp2(qk - m_new[:, None])                                    # (BM, BN)
        alpha = tl.exp2(m_i - m_new)                                        # rescales the old sum
        l_i = l_i * alpha + tl.sum(p, 1)                                    # running sum
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)  # (BM, d)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, O, LSE, Lengths, qk_scale, N_CTX, N_HEADS,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              PRECISION: tl.constexpr):
    """One program per (query tile, batch x head): O = softmax(Q K^T * scale) V and its log-sum-exp."""
    start_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh.to(tl.int64) * N_CTX * HEAD_DIM
    length = tl.minimum(tl.maximum(tl.load(Lengths + bh // N_HEADS), 0), N_CTX)
    kv_len = tl.where(start_m * BLOCK_M < length, length, 0)               # padded query tiles: no keys
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)                        # (BM,) query positions
    offs_n, offs_d = tl.arange(0, BLOCK_N), tl.arange(0, HEAD_DIM)
    q_offs = rows[:, None] * HEAD_DIM + offs_d[None, :]                     # (BM, d)
    q = tl.load(Q + base + q_offs, mask=(rows < N_CTX)[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    full = kv_len // BLOCK_N * BLOCK_N                                      # end of the whole tiles
    acc, l_i, m_i = _fwd_kv_loop(acc, l_i, m_i, q, K + base, V + base, offs_n, offs_d, 0, full, kv_len,
                                 qk_scale, HEAD_DIM, BLOCK_N, False, PRECISION)
    acc, l_i, m_i = _fwd_kv_loop(acc, l_i, m_i, q, K + base, V + base, offs_n, offs_d, full, kv_len,
                                 kv_len, qk_scale, HEAD_DIM, BLOCK_N, True, PRECISION)

    real = rows < length
    l_safe = tl.where(real, l_i, 1.0)
    out = tl.where(real[:, None], acc / l_safe[:, None], 0.0)               # padded query rows: zeros
    lse = tl.where(real, m_i + tl.log2(l_safe), 0.0)
    tl.store(O + base + q_offs, out.to(O.dtype.element_ty), mask=(rows < N_CTX)[:, None])
    tl.store(LSE + bh * N_CTX + rows, lse, mask=rows < N_CTX)


@triton.jit
def _attn_bwd_delta(O, DO, Delta, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta_i = sum_d dO_id * O_id: the term every row of dS subtracts (zero on padded rows)."""
    start_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh.to(tl.int64) * N_CTX * HEAD_DIM
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = rows[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    o = tl.load(O + base + offs, mask=(rows < N_CTX)[:, None], other=0.0).to(tl.float32)
    do = tl.load(DO + base + offs, mask=(rows < N_CTX)[:, None], other=0.0).to(tl.float32)
    tl.store(Delta + bh * N_CTX + rows, tl.sum(o * do, 1), mask=rows < N_CTX)


@triton.jit
def _bwd_dkdv_loop(dk, dv, k, v, q_base, do_base, lse_base, delta_base, offs_m, offs_d, lo, hi, q_len,
                   qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
                   PRECISION: tl.constexpr):
    """Stream query tiles [lo, hi) past one key tile, accumulating its dK and dV."""
    for start_m in range(lo, hi, BLOCK_M):
        rows = start_m + offs_m                                             # (BM,) query positions
        q_offs = rows[:, None] * HEAD_DIM + offs_d[None, :]
        if MASKED:                                                          # the one partial query tile
            real_q = rows < q_len
            q = tl.load(q_base + q_offs, mask=real_q[:, None], other=0.0)
            do = tl.load(do_base + q_offs, mask=real_q[:, None], other=0.0)
            lse = tl.load(lse_base + rows, mask=real_q, other=0.0)
            delta = tl.load(delta_base + rows, mask=real_q, other=0.0)
        else:
            q = tl.load(q_base + q_offs)
            do = tl.load(do_base + q_offs)
            lse = tl.load(lse_base + rows)
            delta = tl.load(delta_base + rows)
        qkT = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale  # (BN, BM)
        pT = tl.exp2(qkT - lse[None, :])                                    # P^T, recomputed
        if MASKED:
            pT = tl.where(real_q[None, :], pT, 0.0)
        dv += tl.dot(pT.to(do.dtype), do, input_precision=PRECISION)       # dV = P^T dO
        dpT = tl.dot(v, tl.trans(do), input_precision=PRECISION)           # (BN, BM) dP^T = V dO^T
        dsT = pT * (dpT - delta[None, :])                                   # dS = P * (dP - delta)
        dk += tl.dot(dsT.to(q.dtype), q, input_precision=PRECISION)        # dK = dS^T Q (times scale)
    return dk, dv


@triton.jit
def _attn_bwd_dkdv(Q, K, V, DO, LSE, Delta, DK, DV, Lengths, sm_scale, qk_scale, N_CTX, N_HEADS,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   PRECISION: tl.constexpr):
    """One program per (key tile, batch x head): dK and dV of that tile, queries streamed past it."""
    start_n, bh = tl.program_id(0), tl.program_id(1)
    base = bh.to(tl.int64) * N_CTX * HEAD_DIM
    length = tl.minimum(tl.maximum(tl.load(Lengths + bh // N_HEADS), 0), N_CTX)
    q_len = tl.where(start_n * BLOCK_N < length, length, 0)                # padded key tiles: no queries
    cols = start_n * BLOCK_N + tl.arange(0, BLOCK_N)                        # (BN,) key positions
    offs_m, offs_d = tl.arange(0, BLOCK_M), tl.arange(0, HEAD_DIM)
    kv_offs = cols[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(K + base + kv_offs, mask=(cols < N_CTX)[:, None], other=0.0)
    v = tl.load(V + base + kv_offs, mask=(cols < N_CTX)[:, None], other=0.0)

    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    full = q_len // BLOCK_M * BLOCK_M
    dk, dv = _bwd_dkdv_loop(dk, dv, k, v, Q + base, DO + base, LSE + bh * N_CTX, Delta + bh * N_CTX,
                            offs_m, offs_d, 0, full, q_len, qk_scale, HEAD_DIM, BLOCK_M, False, PRECISION)
    dk, dv = _bwd_dkdv_loop(dk, dv, k, v, Q + base, DO + base, LSE + bh * N_CTX, Delta + bh * N_CTX,
                            offs_m, offs_d, full, q_len, q_len, qk_scale, HEAD_DIM, BLOCK_M, True, PRECISION)

    real = (cols < length)[:, None]                                         # padded keys: zero gradient
    tl.store(DK + base + kv_offs, tl.where(real, dk * sm_scale, 0.0).to(DK.dtype.element_ty),
             mask=(cols < N_CTX)[:, None])
    tl.store(DV + base + kv_offs, tl.where(real, dv, 0.0).to(DV.dtype.element_ty),
             mask=(cols < N_CTX)[:, None])


@triton.jit
def _bwd_dq_loop(dq, q, do, lse, delta, k_base, v_base, offs_n, offs_d, lo, hi, kv_len, qk_scale,
                 HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
                 PRECISION: tl.constexpr):
    """Stream key/value tiles [lo, hi) past one query tile, accumulating its dQ."""
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_offs = cols[:, None] * HEAD_DIM + offs_d[None, :]
        if MASKED:
            real_k = cols < kv_len
            k = tl.load(k_base + kv_offs, mask=real_k[:, None], other=0.0)
            v = tl.load(v_base + kv_offs, mask=real_k[:, None], other=0.0)
        else:
            k = tl.load(k_base + kv_offs)
            v = tl.load(v_base + kv_offs)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale   # (BM, BN)
        p = tl.exp2(qk - lse[:, None])                                      # P, recomputed
        if MASKED:
            p = tl.where(real_k[None, :], p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)             # (BM, BN) dP = dO V^T
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)         # dQ = dS K (times scale)
    return dq


@triton.jit
def _attn_bwd_dq(Q, K, V, DO, LSE, Delta, DQ, Lengths, sm_scale, qk_scale, N_CTX, N_HEADS,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 PRECISION: tl.constexpr):
    """One program per (query tile, batch x head): dQ of that tile, keys streamed past it."""
    start_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh.to(tl.int64) * N_CTX * HEAD_DIM
    length = tl.minimum(tl.maximum(tl.load(Lengths + bh // N_HEADS), 0), N_CTX)
    kv_len = tl.where(start_m * BLOCK_M < length, length, 0)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n, offs_d = tl.arange(0, BLOCK_N), tl.arange(0, HEAD_DIM)
    q_offs = rows[:, None] * HEAD_DIM + offs_d[None, :]
    real = rows < length
    q = tl.load(Q + base + q_offs, mask=real[:, None], other=0.0)
    do = tl.load(DO + base + q_offs, mask=real[:, None], other=0.0)
    lse = tl.load(LSE + bh * N_CTX + rows, mask=real, other=0.0)
    delta = tl.load(Delta + bh * N_CTX + rows, mask=real, other=0.0)

    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    full = kv_len // BLOCK_N * BLOCK_N
    dq = _bwd_dq_loop(dq, q, do, lse, delta, K + base, V + base, offs_n, offs_d, 0, full, kv_len,
                      qk_scale, HEAD_DIM, BLOCK_N, False, PRECISION)
    dq = _bwd_dq_loop(dq, q, do, lse, delta, K + base, V + base, offs_n, offs_d, full, kv_len, kv_len,
                      qk_scale, HEAD_DIM, BLOCK_N, True, PRECISION)
    tl.store(DQ + base + q_offs, tl.where(real[:, None], dq * sm_scale, 0.0).to(DQ.dtype.element_ty),
             mask=(rows < N_CTX)[:, None])


def _tried_at(tiles: dict, configs: list, named_args: dict, **meta) -> list:
    """triton.autotune's early_config_prune: keep the configs tried at this launch's HEAD_DIM."""
    tried = {str(c) for c in autotune_configs(tiles, meta["HEAD_DIM"])}
    return [c for c in configs if str(c) in tried]


def _autotuned(kernel, tiles: dict):
    """`kernel` timed over its tile table (every config tried at some head dim), pruned per HEAD_DIM."""
    prune = {"early_config_prune": functools.partial(_tried_at, tiles)}
    configs = autotune_configs(tiles, min(HEAD_DIMS))
    return triton.autotune(configs, key=["N_CTX", "HEAD_DIM"], prune_configs_by=prune)(kernel)


if not INTERPRET:
    _TUNED = {kernel: _autotuned(kernel, tiles) for kernel, tiles in
              ((_attn_fwd, FWD_TILES), (_attn_bwd_dkdv, DKDV_TILES), (_attn_bwd_dq, DQ_TILES))}


def _launch(kernel, tiles_over: str, N: int, BH: int, blocks: tuple[int, int] | None, *args, **meta):
    """Run `kernel` with one program per tile of `tiles_over` ("BLOCK_M" or "BLOCK_N") per batch x head."""
    if blocks is None:                                  # GPU without fixed tiles: autotuned
        _TUNED[kernel][lambda m: (triton.cdiv(N, m[tiles_over]), BH)](*args, **meta)
    else:
        block_m, block_n = blocks
        grid = (triton.cdiv(N, block_m if tiles_over == "BLOCK_M" else block_n), BH)
        kernel[grid](*args, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=FIXED_WARPS, num_stages=FIXED_STAGES,
                     **meta)


class FusedAttention(torch.autograd.Function):
    """Autograd glue: forward saves (q, k, v, o, lse, lengths); backward recomputes P tile by tile."""

    @staticmethod
    def forward(ctx, q, k, v, lengths, sm_scale, blocks):
        B, h, N, d = q.shape
        o = torch.empty_like(q)
        lse = torch.empty((B, h, N), device=q.device, dtype=torch.float32)  # base-2 log-sum-exp
        precision = "ieee" if q.dtype == torch.float32 else "tf32"         # fp32 stays exact fp32
        _launch(_attn_fwd, "BLOCK_M", N, B * h, blocks, q, k, v, o, lse, lengths, sm_scale * LOG2E, N, h,
                HEAD_DIM=d, PRECISION=precision)
        ctx.save_for_backward(q, k, v, o, lse, lengths)
        ctx.sm_scale, ctx.blocks, ctx.precision = sm_scale, blocks, precision
        return o

    @staticmethod
    @once_differentiable
    def backward(ctx, do):
        q, k, v, o, lse, lengths = ctx.saved_tensors
        B, h, N, d = q.shape
        do = do.contiguous()
        delta = torch.empty_like(lse)
        _attn_bwd_delta[(triton.cdiv(N, 64), B * h)](o, do, delta, N, HEAD_DIM=d, BLOCK_M=64)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        scales = (ctx.sm_scale, ctx.sm_scale * LOG2E, N, h)
        _launch(_attn_bwd_dkdv, "BLOCK_N", N, B * h, ctx.blocks, q, k, v, do, lse, delta, dk, dv, lengths,
                *scales, HEAD_DIM=d, PRECISION=ctx.precision)
        _launch(_attn_bwd_dq, "BLOCK_M", N, B * h, ctx.blocks, q, k, v, do, lse, delta, dq, lengths,
                *scales, HEAD_DIM=d, PRECISION=ctx.precision)
        return dq, dk, dv, None, None, None


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
    lengths to [0, N] on the GPU), launches three kernels per forward+backward and does 5 products.
    dq: how version 2's backward sums dQ over key tiles, one of DQ_MODES (flash_attention_v2 says what
    each does); version 1 has one way and ignores it.
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
        return attention_v2(q, k, v, lengths, float(sm_scale), blocks, dq)
    lengths = _check_lengths(key_lengths, B, N, q.device, check_lengths is not False)
    q, k, v = (t.contiguous() for t in (q, k, v))       # the model passes permuted views
    return FusedAttention.apply(q, k, v, lengths, float(sm_scale), blocks)


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
