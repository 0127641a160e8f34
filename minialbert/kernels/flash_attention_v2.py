"""Fused attention, version 2: version 1's maths with less host time per call and a 5-product backward.

What changed from flash_attention (version 1), and why (at ALBERT's N = 256-512 most of a v1
call was time on the host, and its backward multiplied 7 tiles per tile pair where FlashAttention-2 does 5):
- Backward in one pass. One program per key tile streams the query tiles past it and, for each pair,
  recomputes P (Q K^T), builds dV (P^T dO), dP (dO V^T), dK (dS^T Q) and dQ's share (dS K): 5 products.
  dQ's shares from the key tiles meet in a float32 buffer by atomic adds; delta = rowsum(dO * O) is
  computed in the same loop from the O and dO tiles it already streams, so no delta kernel or buffer.
- Launches and allocations: forward 1 kernel (v1: 1), backward 2 (v1: 3): the pass above, then one that
  scales dQ into the input dtype and writes zeros back into the float32 buffer, which is therefore kept
  per shape and reused (no memset); dQ mode "two_phase" (below) needs only the pass. q, k, v are read
  through their strides (the model's permuted views need no copies), and o, dq, dk, dv are laid out
  (B, N, h, d) so that the model's transpose back to (B, N, h * d) is a view. Key lengths are read on the
  GPU as given (any integer dtype, clamped to [0, N]): nothing is read back to the host.
- Tiles: looked up in a dict per shape; on a GPU the first call of a shape times a few candidates
  (CUDA-graph replays, so launch overhead does not decide) and the winner is launched after.
- Launches skip Triton's per-call dispatch after a kernel's first with the same argument specialization:
  they call the compiled kernel Triton returned (launching.py).
- Hopper (sm_90+, half precision): the candidates of both passes include reading their whole streamed tiles
  (key/value in the forward; query, output and its gradient in the backward) through TMA, tensor
  descriptors the GPU copies by (tuning.hopper_tma); tuning keeps it only where it is faster.

The atomic dQ mode lost whole rows of adds compiled on an H200 at N = 1000 (d = 64 and 128, every launch
setting; assets/benchmarks/kernel_dq_diagnostic_nvidia-h200.json): sm_90's vectorized `red.global.add.v4.f32`.
So the default dQ mode (DEFAULT_DQ) is "two_phase" (no atomics, one backward launch), "atomic" runs only when
named (fused_attention warns on sm_90), and version 1 stays the default kernel. Which mode is right and
fastest on a GPU is unmeasured. backward(..., dq_mode) takes one of DQ_MODES (fused_attention's `dq`):
- "atomic": atomic adds as Triton vectorizes them;
- "scalar": the same adds, but the accumulator's column offsets are multiplied by a run-time step (1) that
  the compiler may not specialize, so it cannot prove them contiguous and emits scalar `red.global.add.f32`;
- "partials": no atomics, deterministic. Each key tile stores its share for each query tile into its own
  slice of a float32 (n_key_tiles, B, N, h, d) buffer (uninitialised: what is read was written), and the
  second launch sums a sequence's real tiles in order. Memory: n_key_tiles times dQ's, in float32.
These three do 5 products per tile pair in one forward and two backward launches. The fourth,
- "two_phase", is Triton's tutorial's way: each backward program, after its key tile's dK and dV, computes
  dQ for the same rows as query tiles, streaming the key tiles past them (3 more products, 7 in all, as in
  version 1). No atomics, no buffer, deterministic, one backward launch.

Padding is handled as in version 1: key tiles past a sequence's length are never visited, query tiles
past it do no work, partial tiles are masked, and what padding holds (even NaN) never reaches a real output.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from . import tuning
from .launching import launch
from .tiles import BWD_TILES_V2, FWD_TILES_V2, TWO_PHASE_TILES_V2, candidate_tiles

LOG2E = 1.4426950408889634              # exp(x) = exp2(x * log2(e))
FIXED_BLOCK, FIXED_WARPS, FIXED_STAGES = 32, 8, 2      # as version 1: fixed tiles (interpreter, float32)
SCALE_BLOCK = 1024                      # elements per program of the dQ scaling (and summing) kernel
DQ_MODES = ("atomic", "scalar", "partials", "two_phase")    # how dQ is summed over key tiles (docstring)
DEFAULT_DQ = "two_phase"                # no atomics: "atomic" lost dQ rows on an H200 (docstring)


@triton.jit
def _fwd_loop(acc, l_i, m_i, q, k_src, v_src, offs_n, lo, hi, kv_len, qk_scale, stride_n,
              BLOCK_N: tl.constexpr, MASKED: tl.constexpr, PRECISION: tl.constexpr, TMA: tl.constexpr):
    """Stream key/value tiles [lo, hi) past the query tile, updating the online softmax (base 2).
    k_src, v_src: the first key/value tile's pointers; with TMA (whole tiles only), the head's descriptors."""
    for start_n in range(lo, hi, BLOCK_N):
        if MASKED:                                                          # the one partial tile
            real_k = start_n + offs_n < kv_len
            k = tl.load(k_src + start_n * stride_n, mask=real_k[:, None], other=0.0)
            v = tl.load(v_src + start_n * stride_n, mask=real_k[:, None], other=0.0)
        elif TMA:                                                           # Hopper's copy engine
            k = k_src.load([start_n, 0])
            v = v_src.load([start_n, 0])
        else:
            k = tl.load(k_src + start_n * stride_n)
            v = tl.load(v_src + start_n * stride_n)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale   # (BM, BN) scores, log2 units
        if MASKED:
            qk = tl.where(real_k[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)  # (BM, d)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attn_fwd_v2(Q, K, V, O, LSE, Lengths, qk_scale, stride_b, stride_h, stride_n,
                o_stride_b, o_stride_h, o_stride_n, N_CTX, N_HEADS,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                PRECISION: tl.constexpr, TMA: tl.constexpr = False):
    """One program per (query tile, batch x head): O = softmax(Q K^T * scale) V and its log-sum-exp.

    TMA (Hopper, sm_90+: tuning.hopper_tma): the whole key/value tiles arrive through tensor descriptors of
    this head's (N, d) rows, made on the GPU, which Hopper's tensor memory accelerator copies into shared
    memory; the one partial tile still loads masked, so padding is never read. Off by default, which compile
    tools that predate it compile.
    """
    start_m, bh = tl.program_id(0), tl.program_id(1)
    b, h = bh // N_HEADS, bh % N_HEADS
    base = b.to(tl.int64) * stride_b + h.to(tl.int64) * stride_h           # q, k, v share strides
    o_base = b.to(tl.int64) * o_stride_b + h.to(tl.int64) * o_stride_h
    length = tl.minimum(tl.maximum(tl.load(Lengths + b), 0), N_CTX).to(tl.int32)
    kv_len = tl.where(start_m * BLOCK_M < length, length, 0)               # padded query tiles: no keys
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)                        # (BM,) query positions
    offs_n, offs_d = tl.arange(0, BLOCK_N), tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + rows[:, None] * stride_n + offs_d[None, :], mask=(rows < N_CTX)[:, None],
                other=0.0)
    k_ptrs = K + base + offs_n[:, None] * stride_n + offs_d[None, :]        # (BN, d) first key tile
    v_ptrs = V + base + offs_n[:, None] * stride_n + offs_d[None, :]

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    full = kv_len // BLOCK_N * BLOCK_N                                      # end of the whole tiles
    if TMA:
        k_src = tl.make_tensor_descriptor(K + base, shape=[N_CTX, HEAD_DIM], strides=[stride_n, 1],
                                          block_shape=[BLOCK_N, HEAD_DIM])
        v_src = tl.make_tensor_descriptor(V + base, shape=[N_CTX, HEAD_DIM], strides=[stride_n, 1],
                                          block_shape=[BLOCK_N, HEAD_DIM])
    else:
        k_src, v_src = k_ptrs, v_ptrs
    acc, l_i, m_i = _fwd_loop(acc, l_i, m_i, q, k_src, v_src, offs_n, 0, full, kv_len, qk_scale, stride_n,
                              BLOCK_N, False, PRECISION, TMA)
    acc, l_i, m_i = _fwd_loop(acc, l_i, m_i, q, k_ptrs, v_ptrs, offs_n, full, kv_len, kv_len, qk_scale,
                              stride_n, BLOCK_N, True, PRECISION, False)

    real = rows < length
    l_safe = tl.where(real, l_i, 1.0)
    out = tl.where(real[:, None], acc / l_safe[:, None], 0.0)               # padded query rows: zeros
    lse = tl.where(real, m_i + tl.log2(l_safe), 0.0)
    tl.store(O + o_base + rows[:, None] * o_stride_n + offs_d[None, :], out.to(O.dtype.element_ty),
             mask=(rows < N_CTX)[:, None])
    tl.store(LSE + bh * N_CTX + rows, lse, mask=rows < N_CTX)


@triton.jit
def _put_dq_share(ptrs, dq, mask, DQ_MODE: tl.constexpr):
    """One key tile's (BM, d) share of a query tile's dQ: added into the float32 accumulator ("atomic",
    "scalar": the pointers decide vector or scalar adds), or stored as this tile's partial ("partials")."""
    if DQ_MODE == "partials":
        tl.store(ptrs, dq, mask=mask)
    else:
        tl.atomic_add(ptrs, dq, mask=mask, sem="relaxed")


@triton.jit
def _bwd_loop(dk, dv, k, v, real_k, q_src, o_src, do_src, dq_ptrs, lse_ptrs, offs_m, lo, hi, q_len,
              qk_scale, stride_n, o_stride_n, BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
              PRECISION: tl.constexpr, DQ_MODE: tl.constexpr, TMA: tl.constexpr):
    """Stream query tiles [lo, hi) past one key tile: its dK and dV, and each query tile's share of dQ.
    q_src, o_src, do_src: the first query tile's pointers; with TMA (whole tiles only), descriptors."""
    for start_m in range(lo, hi, BLOCK_M):
        if MASKED:                                                          # the one partial query tile
            real_q = start_m + offs_m < q_len
            q = tl.load(q_src + start_m * stride_n, mask=real_q[:, None], other=0.0)
            o = tl.load(o_src + start_m * o_stride_n, mask=real_q[:, None], other=0.0)
            do = tl.load(do_src + start_m * o_stride_n, mask=real_q[:, None], other=0.0)
            lse = tl.load(lse_ptrs + start_m, mask=real_q, other=0.0)
        elif TMA:                                                           # Hopper's copy engine
            q = q_src.load([start_m, 0])
            o = o_src.load([start_m, 0])
            do = do_src.load([start_m, 0])
            lse = tl.load(lse_ptrs + start_m)
        else:
            q = tl.load(q_src + start_m * stride_n)
            o = tl.load(o_src + start_m * o_stride_n)
            do = tl.load(do_src + start_m * o_stride_n)
            lse = tl.load(lse_ptrs + start_m)
        delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)             # (BM,) rowsum(dO * O), fused
        qkT = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale  # 1: (BN, BM) scores^T
        pT = tl.exp2(qkT - lse[None, :])                                    # P^T, recomputed
        if MASKED:
            pT = tl.where(real_k[:, None] & real_q[None, :], pT, 0.0)
        else:
            pT = tl.where(real_k[:, None], pT, 0.0)                         # padded keys: no weight
        dv += tl.dot(pT.to(do.dtype), do, input_precision=PRECISION)       # 2: dV = P^T dO
        dpT = tl.dot(v, tl.trans(do), input_precision=PRECISION)           # 3: (BN, BM) dP^T = V dO^T
        dsT = pT * (dpT - delta[None, :])                                   # dS = P * (dP - delta)
        dk += tl.dot(dsT.to(q.dtype), q, input_precision=PRECISION)        # 4: dK = dS^T Q (times scale)
        if DQ_MODE != "two_phase":                                          # there: phase 2's own loop
            dq = tl.dot(tl.trans(dsT).to(k.dtype), k, input_precision=PRECISION)  # 5: this tile's dS K
            if MASKED:
                _put_dq_share(dq_ptrs + start_m * o_stride_n, dq, real_q[:, None], DQ_MODE)
            else:
                _put_dq_share(dq_ptrs + start_m * o_stride_n, dq, None, DQ_MODE)
    return dk, dv


@triton.jit
def _dq_loop(dq, q, do, lse, delta, k_ptrs, v_ptrs, offs_n, lo, hi, kv_len, qk_scale, stride_n,
             BLOCK_N: tl.constexpr, MASKED: tl.constexpr, PRECISION: tl.constexpr):
    """"two_phase", phase 2: stream key/value tiles [lo, hi) past one query tile, adding dS K into its dQ
    (3 products a pair, no atomics). k_ptrs, v_ptrs: the first key/value tile's pointers."""
    for start_n in range(lo, hi, BLOCK_N):
        if MASKED:                                                          # the one partial key tile
            real_k = start_n + offs_n < kv_len
            k = tl.load(k_ptrs + start_n * stride_n, mask=real_k[:, None], other=0.0)
            v = tl.load(v_ptrs + start_n * stride_n, mask=real_k[:, None], other=0.0)
        else:
            k = tl.load(k_ptrs + start_n * stride_n)
            v = tl.load(v_ptrs + start_n * stride_n)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # 1: (BM, BN) scores
        p = tl.exp2(qk - lse[:, None])
        if MASKED:
            p = tl.where(real_k[None, :], p, 0.0)                           # padded keys: no weight
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)            # 2: (BM, BN) dP = dO V^T
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)         # 3: dQ += dS K
    return dq


@triton.jit(do_not_specialize=["dq_col_step"])
def attn_bwd_v2(Q, K, V, O, DO, LSE, DQ_ACC, DK, DV, Lengths, sm_scale, qk_scale, stride_b, stride_h,
                stride_n, o_stride_b, o_stride_h, o_stride_n, N_CTX, N_HEADS, numel,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                PRECISION: tl.constexpr, dq_col_step=1, DQ_MODE: tl.constexpr = "atomic",
                TMA: tl.constexpr = False):
    """One program per (key tile, batch x head): dK, dV of the tile and its float32 shares of dQ.

    o, do, dk and dv share one layout (o_stride_*); q, k and v another (stride_*). DQ_ACC: the (B, N, h, d)
    float32 accumulator ("atomic", "scalar"), or the (n_key_tiles, B, N, h, d) partials ("partials"), whose
    key tiles lie numel = B * N * h * d elements apart, or dQ itself ("two_phase": then, after dK and dV,
    the program computes dQ of the same BLOCK_N query rows by streaming the key tiles past them).
    dq_col_step is 1, given at run time and never specialized: "scalar" multiplies the accumulator's column
    offsets by it. (Its default and DQ_MODE's are the atomic mode, which compile tools that predate the
    modes, like compile_report, then compile.)
    TMA: the whole query, output and output-gradient tiles arrive through descriptors, as in attn_fwd_v2.
    """
    start_n, bh = tl.program_id(0), tl.program_id(1)
    b, h = bh // N_HEADS, bh % N_HEADS
    base = b.to(tl.int64) * stride_b + h.to(tl.int64) * stride_h
    o_base = b.to(tl.int64) * o_stride_b + h.to(tl.int64) * o_stride_h
    length = tl.minimum(tl.maximum(tl.load(Lengths + b), 0), N_CTX).to(tl.int32)
    q_len = tl.where(start_n * BLOCK_N < length, length, 0)                # padded key tiles: no queries
    cols = start_n * BLOCK_N + tl.arange(0, BLOCK_N)                        # (BN,) key positions
    offs_m, offs_d = tl.arange(0, BLOCK_M), tl.arange(0, HEAD_DIM)
    real_k = cols < length                                                  # padding never loaded
    k = tl.load(K + base + cols[:, None] * stride_n + offs_d[None, :], mask=real_k[:, None], other=0.0)
    v = tl.load(V + base + cols[:, None] * stride_n + offs_d[None, :], mask=real_k[:, None], other=0.0)
    q_ptrs = Q + base + offs_m[:, None] * stride_n + offs_d[None, :]        # (BM, d) first query tile
    o_offs = o_base + offs_m[:, None] * o_stride_n + offs_d[None, :]
    lse_ptrs = LSE + bh * N_CTX + offs_m
    if DQ_MODE == "partials":                                               # this key tile's own slice
        dq_ptrs = DQ_ACC + start_n.to(tl.int64) * numel + o_offs
    elif DQ_MODE == "scalar":                                               # columns not provably contiguous
        dq_ptrs = DQ_ACC + o_base + offs_m[:, None] * o_stride_n + offs_d[None, :] * dq_col_step
    else:
        dq_ptrs = DQ_ACC + o_offs

    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    full = q_len // BLOCK_M * BLOCK_M
    if TMA:
        q_src = tl.make_tensor_descriptor(Q + base, shape=[N_CTX, HEAD_DIM], strides=[stride_n, 1],
                                          block_shape=[BLOCK_M, HEAD_DIM])
        o_src = tl.make_tensor_descriptor(O + o_base, shape=[N_CTX, HEAD_DIM], strides=[o_stride_n, 1],
                                          block_shape=[BLOCK_M, HEAD_DIM])
        do_src = tl.make_tensor_descriptor(DO + o_base, shape=[N_CTX, HEAD_DIM], strides=[o_stride_n, 1],
                                           block_shape=[BLOCK_M, HEAD_DIM])
    else:
        q_src, o_src, do_src = q_ptrs, O + o_offs, DO + o_offs
    dk, dv = _bwd_loop(dk, dv, k, v, real_k, q_src, o_src, do_src, dq_ptrs, lse_ptrs,
                       offs_m, 0, full, q_len, qk_scale, stride_n, o_stride_n, BLOCK_M, False, PRECISION,
                       DQ_MODE, TMA)
    dk, dv = _bwd_loop(dk, dv, k, v, real_k, q_ptrs, O + o_offs, DO + o_offs, dq_ptrs, lse_ptrs,
                       offs_m, full, q_len, q_len, qk_scale, stride_n, o_stride_n, BLOCK_M, True,
                       PRECISION, DQ_MODE, False)

    kv_offs = o_base + cols[:, None] * o_stride_n + offs_d[None, :]        # padded keys: zeros (k, v were)
    tl.store(DK + kv_offs, (dk * sm_scale).to(DK.dtype.element_ty), mask=(cols < N_CTX)[:, None])
    tl.store(DV + kv_offs, dv.to(DV.dtype.element_ty), mask=(cols < N_CTX)[:, None])

    if DQ_MODE == "two_phase":          # phase 2: dQ of this program's BLOCK_N query rows, BLOCK_M at a time
        offs_n = tl.arange(0, BLOCK_N)
        k_ptrs = K + base + offs_n[:, None] * stride_n + offs_d[None, :]
        v_ptrs = V + base + offs_n[:, None] * stride_n + offs_d[None, :]
        for start_m in range(start_n * BLOCK_N, start_n * BLOCK_N + BLOCK_N, BLOCK_M):
            rows = start_m + offs_m
            real_q = rows < length                                          # padded rows: dQ zeros
            q_ptrs = Q + base + rows[:, None] * stride_n + offs_d[None, :]
            q = tl.load(q_ptrs, mask=real_q[:, None], other=0.0)
            row_offs = o_base + rows[:, None] * o_stride_n + offs_d[None, :]
            o = tl.load(O + row_offs, mask=real_q[:, None], other=0.0)
            do = tl.load(DO + row_offs, mask=real_q[:, None], other=0.0)
            lse = tl.load(LSE + bh * N_CTX + rows, mask=real_q, other=0.0)
            delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
            kv_len = tl.where(start_m < length, length, 0)
            dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
            full_k = kv_len // BLOCK_N * BLOCK_N
            dq = _dq_loop(dq, q, do, lse, delta, k_ptrs, v_ptrs, offs_n, 0, full_k, kv_len, qk_scale,
                          stride_n, BLOCK_N, False, PRECISION)
            dq = _dq_loop(dq, q, do, lse, delta, k_ptrs, v_ptrs, offs_n, full_k, kv_len, kv_len, qk_scale,
                          stride_n, BLOCK_N, True, PRECISION)
            dq = (dq * sm_scale).to(DQ_ACC.dtype.element_ty)
            tl.store(DQ_ACC + row_offs, dq, mask=(rows < N_CTX)[:, None])


@triton.jit
def scale_dq_v2(DQ_ACC, DQ, sm_scale, numel, BLOCK: tl.constexpr):
    """dq = sm_scale * dq_acc in the input dtype, and dq_acc back to zeros for the next backward."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < numel
    acc = tl.load(DQ_ACC + offs, mask=inside, other=0.0)
    tl.store(DQ + offs, (acc * sm_scale).to(DQ.dtype.element_ty), mask=inside)
    tl.store(DQ_ACC + offs, tl.zeros_like(acc), mask=inside)


@triton.jit
def sum_dq_partials_v2(DQ_ACC, DQ, Lengths, sm_scale, numel, o_stride_b, o_stride_n, N_CTX,
                       BLOCK_N: tl.constexpr, BLOCK: tl.constexpr):
    """dq = sm_scale * the sum of the key tiles' partials ("partials"), for BLOCK of sequence b's (N, h, d)
    elements; zeros on padded rows, which no key tile wrote. Tiles are summed in order: deterministic."""
    start, b = tl.program_id(0), tl.program_id(1)
    length = tl.minimum(tl.maximum(tl.load(Lengths + b), 0), N_CTX).to(tl.int32)
    offs = start * BLOCK + tl.arange(0, BLOCK)                              # (BLOCK,) within sequence b
    real = offs < length * o_stride_n                                       # rows n < length: written
    n_tiles = tl.where(start * BLOCK < length * o_stride_n, tl.cdiv(length, BLOCK_N), 0)  # the real key tiles
    ptrs = DQ_ACC + b.to(tl.int64) * o_stride_b + offs                      # tile 0's partial
    acc = tl.zeros([BLOCK], tl.float32)
    for _ in range(0, n_tiles):
        acc += tl.load(ptrs, mask=real, other=0.0)
        ptrs += numel                                                       # the next key tile's partial
    out = DQ + b.to(tl.int64) * o_stride_b + offs
    tl.store(out, (acc * sm_scale).to(DQ.dtype.element_ty), mask=offs < o_stride_b)


_DQ_ACCUMULATORS: dict[tuple, torch.Tensor] = {}           # (shape, device) -> zeroed float32 dQ buffer


def seq_major(B: int, h: int, N: int, d: int, like: torch.Tensor, dtype=None) -> torch.Tensor:
    """An empty (B, h, N, d) tensor stored as (B, N, h, d): the layout the model reads back as (B, N, h*d)."""
    return torch.empty((B, N, h, d), device=like.device, dtype=dtype or like.dtype).transpose(1, 2)


def _dq_accumulator(o: torch.Tensor) -> torch.Tensor:
    """The zeroed float32 dQ buffer for o's shape, made once: scale_dq_v2 leaves it zeroed after each use."""
    key = (tuple(o.shape), o.device)
    if key not in _DQ_ACCUMULATORS:
        B, h, N, d = o.shape
        _DQ_ACCUMULATORS[key] = seq_major(B, h, N, d, o, torch.float32).zero_()
    return _DQ_ACCUMULATORS[key]


def _dq_buffer(o: torch.Tensor, dq_mode: str, block_n: int) -> torch.Tensor:
    """Where dQ's shares meet: the zeroed accumulator kept per shape ("atomic", "scalar"), or a new, unfilled
    (n_key_tiles, B, N, h, d) float32 buffer of one partial per key tile of BLOCK_N keys ("partials")."""
    if dq_mode != "partials":
        return _dq_accumulator(o)
    B, h, N, d = o.shape
    return torch.empty((cdiv(N, block_n), B, N, h, d), device=o.device, dtype=torch.float32)


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) on the host (triton.cdiv is a constexpr function: it costs microseconds per call)."""
    return -(-a // b)


def _grid(N: int, BH: int, block: int) -> tuple[int, int]:
    return (cdiv(N, block), BH)


def one_layout(q, k, v, blocks: tuple[int, int] | None):
    """Version 2's inputs: q, k, v in one layout with contiguous rows (the model's views already are: no
    copy), and fixed tiles as (BLOCK_M, BLOCK_N, warps, stages); None stays None (tuned per shape)."""
    if not (q.stride() == k.stride() == v.stride()) or q.stride(-1) != 1:
        q, k, v = (t.contiguous() for t in (q, k, v))
    return q, k, v, (None if blocks is None else (*blocks[:2], FIXED_WARPS, FIXED_STAGES))


def forward(q, k, v, lengths, sm_scale: float, blocks: tuple[int, int, int, int] | None, tma: bool = False):
    """One launch -> o (B, h, N, d) stored as (B, N, h, d), and the base-2 log-sum-exp (B, h, N).

    blocks None: the tiles, and on a Hopper GPU whether to read key/value tiles through TMA, are timed the
    first time a shape runs and looked up after (tuning.py). Fixed blocks launch with TMA only if `tma`."""
    B, h, N, d = q.shape
    o = seq_major(B, h, N, d, q)
    lse = torch.empty((B, h, N), device=q.device, dtype=torch.float32)
    precision = "ieee" if q.dtype == torch.float32 else "tf32"             # fp32 stays exact fp32
    args = (q, k, v, o, lse, lengths, sm_scale * LOG2E, *q.stride()[:3], *o.stride()[:3], N, h)

    def launch_with(choice):
        (block_m, block_n, warps, stages), tma = choice
        if tma:                                         # the GPU writes its tensor descriptors here
            triton.set_allocator(_descriptor_memory)
        launch(attn_fwd_v2, _grid(N, B * h, block_m), *args, HEAD_DIM=d, BLOCK_M=block_m,
               BLOCK_N=block_n, PRECISION=precision, TMA=tma, num_warps=warps, num_stages=stages)
    if blocks:
        launch_with((blocks, tma))
        return o, lse
    key = ("fwd", *tuning.shape_key(q, k, v))
    launch_with(tuning.chosen(key) or tuning.tune(key, candidate_tiles(FWD_TILES_V2, d), q, launch_with))
    return o, lse


def _descriptor_memory(size: int, alignment: int, stream) -> torch.Tensor:
    """Memory for the tensor descriptors a TMA launch makes on the GPU (triton.set_allocator's hook)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def backward(do, q, k, v, o, lse, lengths, sm_scale: float, blocks: tuple[int, int, int, int] | None,
             dq_mode: str = DEFAULT_DQ, tma: bool = False):
    """Two launches -> dq, dk, dv (laid out as o): the 5-product pass, then dQ's scaling (or summing); one
    for "two_phase", which writes dQ itself. Tiles and TMA are chosen as in forward (tuned per shape, and
    per dq_mode), or fixed by blocks and tma."""
    B, h, N, d = q.shape
    if do.stride() != o.stride():                       # the model's gradient arrives in o's layout
        do = torch.empty_like(o).copy_(do)
    dq, dk, dv = (torch.empty_like(o) for _ in range(3))
    numel = dq.numel()
    precision = "ieee" if q.dtype == torch.float32 else "tf32"

    def launch_with(choice, buffer):
        (block_m, block_n, warps, stages), tma = choice
        if tma:
            triton.set_allocator(_descriptor_memory)
        launch(attn_bwd_v2, _grid(N, B * h, block_n), q, k, v, o, do, lse, buffer, dk, dv, lengths, sm_scale,
               sm_scale * LOG2E, *q.stride()[:3], *o.stride()[:3], N, h, numel, HEAD_DIM=d, BLOCK_M=block_m,
               BLOCK_N=block_n, PRECISION=precision, dq_col_step=1, DQ_MODE=dq_mode, TMA=tma, num_warps=warps,
               num_stages=stages)
    if blocks:
        choice = (blocks, tma)
    else:
        key = ("bwd", dq_mode, *tuning.shape_key(q, k, v))
        choice = tuning.chosen(key)
        if choice is None:                              # tuned on scratch: the accumulator stays zeroed
            candidates = candidate_tiles(TWO_PHASE_TILES_V2 if dq_mode == "two_phase" else BWD_TILES_V2, d)
            if dq_mode == "two_phase":                  # the pass writes dQ itself
                scratch = dq
            elif dq_mode == "partials":                 # the smallest BLOCK_N: the most key tiles
                scratch = _dq_buffer(o, dq_mode, min(block_n for _, block_n, _, _ in candidates))
            else:
                scratch = torch.zeros_like(_dq_accumulator(o))
            choice = tuning.tune(key, candidates, q, functools.partial(launch_with, buffer=scratch))
    if dq_mode == "two_phase":
        launch_with(choice, dq)
        return dq, dk, dv
    block_n = choice[0][1]
    buffer = _dq_buffer(o, dq_mode, block_n)
    launch_with(choice, buffer)
    if dq_mode == "partials":                           # one program per SCALE_BLOCK elements of a sequence
        launch(sum_dq_partials_v2, (cdiv(numel // B, SCALE_BLOCK), B), buffer, dq, lengths, sm_scale,
               numel, o.stride(0), o.stride(2), N, BLOCK_N=block_n, BLOCK=SCALE_BLOCK)
    else:
        launch(scale_dq_v2, (cdiv(numel, SCALE_BLOCK),), buffer, dq, sm_scale, numel,
               BLOCK=SCALE_BLOCK)
    return dq, dk, dv
