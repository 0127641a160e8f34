"""FlashAttention-style fused attention in Triton for right-padded encoder batches.

Forward: a program keeps one BLOCK_M tile of queries on chip and streams BLOCK_N tiles of keys and
values past it, keeping a running max and sum per row (the online softmax, in base 2), so the N x N
score matrix never reaches memory. It saves the log-sum-exp (base 2) for the backward.
Backward (non-causal), split into passes: delta = rowsum(dO * O); one kernel streams query tiles past a
key tile to build dK and dV, a separate one streams key tiles past a query tile to build dQ; both
recompute P from the saved log-sum-exp instead of storing it. (FlashAttention-2's backward builds dQ in
the key-tile loop itself, adding each tile's share atomically: flash_attention_v2's atomic dQ mode.)

Key padding: sequence b has key_lengths[b] real tokens followed by padding. Key tiles past the length
are never visited (work scales with the real length), the one partial tile is masked, padded query
rows output zeros and get zero gradients, and whatever the padding holds (even NaN) never reaches a
real output. A length of 0 is allowed: that sequence's outputs and gradients are all zeros.

Layout: q, k, v, o are contiguous (B, h, N, d); the log-sum-exp and delta are (B, h, N) float32.

This file is version 1: its kernels, and forward/backward, which launch them. fused_attention (attention.py)
checks the inputs and calls them; fused_attention(..., version=2) runs flash_attention_v2 instead: the same
maths with fewer launches, no host reads and a 5-product backward (its docstring says what changed and why).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton import knobs

from .tiles import DKDV_TILES, DQ_TILES, FWD_TILES, autotune_configs

INTERPRET = knobs.runtime.interpret     # read once: kernels below are defined in this mode
FIXED_BLOCK = 32                        # tiles where nothing is autotuned: interpreter, and float32
# Fixed tiles launch on a GPU with 8 warps and 2 stages, not Triton's default 4 and 3: with 3 stages the
# float32 backward at d=128 asks 100 KiB of shared memory, more than an L4 block may have (99 KiB), and with
# 4 warps the float32 dK/dV spills registers from d=64; with 8, float32 spills only at d=128 on sm_89/sm_90
# and by 8 bytes in dK/dV at d=32 on sm_89 (assets/benchmarks/kernel_report.json).
FIXED_WARPS, FIXED_STAGES = 8, 2
HEAD_DIMS = (16, 32, 64, 128)
LOG2E = 1.4426950408889634              # exp(x) = exp2(x * log2(e))


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


def forward(q, k, v, lengths, sm_scale: float, blocks: tuple[int, int] | None):
    """-> o (B, h, N, d) and the base-2 log-sum-exp (B, h, N) the backward needs; q, k, v contiguous."""
    B, h, N, d = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((B, h, N), device=q.device, dtype=torch.float32)
    _launch(_attn_fwd, "BLOCK_M", N, B * h, blocks, q, k, v, o, lse, lengths, sm_scale * LOG2E, N, h,
            HEAD_DIM=d, PRECISION=_precision(q))
    return o, lse


def backward(do, q, k, v, o, lse, lengths, sm_scale: float, blocks: tuple[int, int] | None):
    """-> dq, dk, dv: delta, then dK/dV, then dQ, each recomputing P tile by tile from the saved lse."""
    B, h, N, d = q.shape
    do = do.contiguous()
    delta = torch.empty_like(lse)
    _attn_bwd_delta[(triton.cdiv(N, 64), B * h)](o, do, delta, N, HEAD_DIM=d, BLOCK_M=64)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    scales, precision = (sm_scale, sm_scale * LOG2E, N, h), _precision(q)
    _launch(_attn_bwd_dkdv, "BLOCK_N", N, B * h, blocks, q, k, v, do, lse, delta, dk, dv, lengths,
            *scales, HEAD_DIM=d, PRECISION=precision)
    _launch(_attn_bwd_dq, "BLOCK_M", N, B * h, blocks, q, k, v, do, lse, delta, dq, lengths,
            *scales, HEAD_DIM=d, PRECISION=precision)
    return dq, dk, dv


def _precision(q: torch.Tensor) -> str:
    """tl.dot's input precision: float32 stays exact float32; half precision runs on tensor cores."""
    return "ieee" if q.dtype == torch.float32 else "tf32"
