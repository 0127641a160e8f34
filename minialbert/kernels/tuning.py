"""How version 2 launches a shape on a GPU: which tiles, and on Hopper whether to read tiles through TMA.

The first call of a shape (per pass, and per dQ mode for the backward) times every candidate as CUDA-graph
replays, so that launch overhead does not decide, keeps the fastest and from then on only looks it up.
Candidates are the tile table's entries for the head dim, each read plainly and, where hopper_tma allows,
through TMA (tensor descriptors Hopper's tensor memory accelerator copies by). Fixed tiles (the
interpreter, float32) never come here.
"""

from __future__ import annotations

import functools
import warnings

import torch
import triton.testing
from triton.runtime.errors import OutOfResources

_CHOSEN: dict[tuple, tuple] = {}    # (pass[, dq mode], *shape_key) -> (tiles, read through TMA?)


def shape_key(q, k, v) -> tuple:
    """What a choice depends on: shape, strides, dtype, device, and 16-byte aligned inputs (TMA's rule)."""
    aligned = q.data_ptr() % 16 == k.data_ptr() % 16 == v.data_ptr() % 16 == 0
    return (q.shape, q.stride(), q.dtype, q.device, aligned)


def chosen(key: tuple) -> tuple | None:
    """The (tiles, tma) chosen for `key` (a pass, its dQ mode for the backward, then shape_key), if any."""
    return _CHOSEN.get(key)


def hopper_tma(q: torch.Tensor) -> bool:
    """Whether the kernels may read tiles through TMA: half precision on a CUDA GPU of compute capability 9.0
    or newer, with strides of 16 bytes' multiples (the model's are, and o's layout is). Alignment of the
    addresses is the last field of shape_key, checked per call."""
    return (q.is_cuda and q.dtype != torch.float32 and torch.cuda.get_device_capability(q.device) >= (9, 0)
            and all(stride * q.element_size() % 16 == 0 for stride in q.stride()[:3]))


def tune(key: tuple, tiles: list, q: torch.Tensor, launch) -> tuple:
    """Time `launch((tiles, tma))` for each of `tiles`, plainly and where allowed through TMA, as CUDA-graph
    replays; remember the fastest for `key` and return it. A choice that fails to launch is left out (tiles
    the GPU cannot hold silently; any other failure, such as a Triton without TMA, with a warning); if every
    one fails, the last failure is raised."""
    ways = (False, True) if key[-1] and hopper_tma(q) else (False,)
    times, failure = {}, None
    for choice in [(t, way) for t in tiles for way in ways]:
        try:
            launch(choice)                          # compiles; tiles the GPU cannot hold fail here
        except OutOfResources as err:
            failure = err
            continue
        except Exception as err:                    # noqa: BLE001 - tuning goes on with the others
            failure = err
            last_line = str(err).strip().split("\n")[-1][:200]
            warnings.warn(f"fused attention version 2: {choice} failed to launch and is left out of tuning "
                          f"({type(err).__name__}: {last_line})", stacklevel=2)
            continue
        times[choice] = triton.testing.do_bench_cudagraph(functools.partial(launch, choice), rep=10)
    if not times:
        raise failure
    _CHOSEN[key] = min(times, key=times.get)
    return _CHOSEN[key]


def tuned_tiles() -> list[dict]:
    """What tuning chose in this process, one record per pass, dQ mode and shape (benchmarks report it)."""
    records = []
    for key, ((block_m, block_n, warps, stages), tma) in _CHOSEN.items():
        shape, _, dtype, _, _ = key[-5:]                # (pass[, dq mode], *shape_key(...))
        records.append({"pass": key[0], "dq": key[1] if key[0] == "bwd" else None, "shape": list(shape),
                        "dtype": str(dtype).removeprefix("torch."),
                        "tiles": f"{block_m}x{block_n} w{warps} s{stages}", "tma": tma})
    return records
