"""The tiles each version's kernels try on a GPU (flash_attention.py, flash_attention_v2.py), and which head
dims each may run at.

Kept apart from the kernels because they are measurements, not algorithm: every entry was compiled for
sm_80, sm_89 and sm_90 (benchmarks/kernel_report.py), and an entry is tried only up to the head dim where
it stops spilling registers.
"""

from __future__ import annotations

import triton

# Version 1, GPU only: each kernel picks its tiles per (N, head dim, dtype) by timing these once. The forward
# and dQ kernels keep a big query tile and stream small key tiles; the dK/dV kernel does the opposite. Each
# entry reads (BLOCK_M, BLOCK_N, num_warps, num_stages): the largest head dim it is tried at. Past it, the
# config spills: its float32 accumulators grow with the head dim (BLOCK x HEAD_DIM per block), and beyond 255
# registers per thread ptxas parks values in local memory, i.e. slow traffic to HBM. Found by compiling every
# entry for sm_80, sm_89 and sm_90 with Triton 3.9 (benchmarks/kernel_report.py writes
# assets/benchmarks/kernel_report.json); tests/test_kernel_compile.py fails on a spill autotuning may pick.
FWD_TILES = {
    (64, 32, 4, 2): 128, (64, 32, 4, 3): 128, (64, 32, 8, 3): 128,
    (64, 64, 4, 2): 128, (64, 64, 4, 3): 128, (64, 64, 8, 3): 128,
    (128, 32, 4, 2): 128, (128, 32, 4, 3): 128, (128, 32, 8, 3): 128,
    (128, 64, 4, 2): 64, (128, 64, 4, 3): 64,           # d=128: spills on every target
    (128, 64, 8, 3): 128,
    (128, 128, 4, 2): 16, (128, 128, 4, 3): 16,         # d=32: spills on every target
    (128, 128, 8, 3): 64,                               # d=128: spills on sm_80
}
DKDV_TILES = {
    (32, 64, 4, 2): 128, (32, 64, 4, 3): 128, (32, 64, 8, 2): 128,
    (32, 128, 4, 2): 64, (32, 128, 4, 3): 64,           # d=128: spills on every target
    (32, 128, 8, 2): 64,                                # d=128: spills on sm_89
    (64, 64, 4, 2): 64,                                 # d=128: spills on sm_80 and sm_89
    (64, 64, 4, 3): 64,                                 # d=128: spills on sm_80
    (64, 64, 8, 2): 128,
    (64, 128, 4, 2): 16,                                # d=32: spills on every target
    (64, 128, 4, 3): 16,                                # d=32: spills on sm_90
    (64, 128, 8, 2): 64,                                # d=128: spills on every target
}
DQ_TILES = {
    (64, 32, 4, 2): 64,                                 # d=128: spills on sm_89
    (64, 32, 4, 3): 128, (64, 32, 8, 2): 128,
    (64, 64, 4, 2): 128, (64, 64, 4, 3): 128,
    (64, 64, 8, 2): 64,                                 # d=128: spills on sm_89
    (128, 32, 4, 2): 64, (128, 32, 4, 3): 64,           # d=128: spills on every target
    (128, 32, 8, 2): 128,
    (128, 64, 4, 2): 32,                                # d=64: spills on sm_80 and sm_89
    (128, 64, 4, 3): 32,                                # d=64: spills on sm_89
    (128, 64, 8, 2): 64,                                # d=128: spills on sm_80
}


# Version 2 (flash_attention_v2.py), GPU only: the tiles its tuning tries the first time a shape runs, as
# (BLOCK_M, BLOCK_N, num_warps, num_stages): the largest head dim each is tried at (past it, it spills on
# sm_80 or sm_90). The forward keeps a big query tile and streams key tiles; the backward program keeps a key
# tile and streams query tiles (in dQ mode "two_phase" then the opposite, for the same rows). Fitted with
# minialbert.kernels.compile_report (assets/benchmarks/kernel_report.json, which also shows sm_89: there the
# 32x64 and 32x128 backward tiles spill 8-16 bytes at d=64, and 128x32 forward tiles at d=128). The 64x64 w4
# and 128x64 w8 forward tiles spill 8 bytes at d=32 on sm_80, so they are not in the table.
FWD_TILES_V2 = {
    (128, 32, 4, 3): 128,
    (128, 64, 4, 3): 64,                                # d=128: spills
}
BWD_TILES_V2 = {
    (16, 64, 8, 2): 128, (32, 32, 8, 2): 128,          # the only ones that hold d=128 on sm_80 without spills
    (32, 64, 4, 2): 64, (32, 128, 8, 2): 64,           # d=128: spill on sm_80 (and sm_90 for 32x64)
    (64, 64, 8, 2): 32, (64, 128, 8, 2): 32,           # d=64: spill on sm_80
}
# The backward in dQ mode "two_phase" holds more (its second phase's dQ tile): the 32x128 and 64x128 tiles
# spill at d=32 on sm_80 (and 32x128 on sm_89) there, so it tries them at d=16 only.
TWO_PHASE_TILES_V2 = {**BWD_TILES_V2, (32, 128, 8, 2): 16, (64, 128, 8, 2): 16}


def candidate_tiles(tiles: dict, head_dim: int) -> list[tuple[int, int, int, int]]:
    """The (BLOCK_M, BLOCK_N, num_warps, num_stages) entries of a tile table tried at `head_dim`."""
    return [config for config, largest_head_dim in tiles.items() if head_dim <= largest_head_dim]


def autotune_configs(tiles: dict, head_dim: int) -> list[triton.Config]:
    """The candidate tiles as the configs triton.autotune tries."""
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
            for m, n, w, s in candidate_tiles(tiles, head_dim)]
