"""Host work per fused-attention call, version 1 against version 2: kernel launches, allocations, host reads.

At ALBERT's lengths most of a fused-attention call was time on the host (on an H200): Python, autograd, one
launch per kernel, one allocation per buffer. This counts that work for one forward+backward as the model
calls it: q, k, v are permuted views of one (B, N, 3 * h * d) projection, the output is read back as
(B, N, h * d), and padded key lengths are given. Counted, after one warm-up call (tiles tuned, buffers made):
- Triton launches, by kernel (the launcher of every Triton kernel is wrapped);
- other kernels and allocations torch makes (every aten operation, seen with a TorchDispatchMode: factory
  functions such as empty or full, and the copies .contiguous() or .reshape() make of non-contiguous views);
- host reads: aten's _local_scalar_dense, what .item(), int(t) and bool(t) call (a sync on a GPU).
Counts, not times: they are the same on any machine (here Triton's interpreter runs the kernels on CPU).

    python benchmarks/kernel_host_work.py                 # prints a table, writes JSON under --out
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

REPO = Path(__file__).resolve().parent.parent
ALLOCATING = {"empty", "empty_like", "empty_strided", "full", "full_like", "zeros", "zeros_like", "ones",
              "ones_like", "new_empty", "new_empty_strided", "new_zeros", "new_full", "clone", "_to_copy",
              "cat", "stack"}
NO_WORK = {"view", "_unsafe_view", "permute", "transpose", "t", "unbind", "select", "slice", "split",
           "detach", "alias", "expand", "as_strided", "_reshape_alias", "squeeze", "unsqueeze"}
HOST_READ = "_local_scalar_dense"
KERNELS = ((1, "atomic"), (2, "atomic"), (2, "two_phase"))     # (version, dQ mode): version 1 has one way


class AtenCounter(TorchDispatchMode):
    """Counts the aten operations run inside it, by name ("empty_like", "copy_", ...), except those run
    while `inside_triton` is set (Triton's interpreter copies tensors around to run a kernel on CPU)."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()
        self.inside_triton = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.inside_triton:
            self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def counting_triton_launches(counts: Counter, aten: AtenCounter):
    """Count every Triton launch (compiled or interpreted) by kernel name while inside; `aten` does not
    count what the launch itself does."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    originals = {cls: cls.run for cls in (JITFunction, InterpretedFunction)}

    def counted(original):
        def run(self, *args, **kwargs):
            counts[self.fn.__name__] += 1
            aten.inside_triton = True
            try:
                return original(self, *args, **kwargs)
            finally:
                aten.inside_triton = False
        return run
    for cls, original in originals.items():
        cls.run = counted(original)
    try:
        yield counts
    finally:
        for cls, original in originals.items():
            cls.run = original


def model_like_call(version: int, dq: str = "atomic", B: int = 2, h: int = 2, N: int = 48, d: int = 32,
                    device: str = "cpu", dtype=torch.float16) -> dict:
    """Counts for one forward+backward of fused_attention as the model calls it (after a warm-up call)."""
    from minialbert.kernels import fused_attention

    g = torch.Generator().manual_seed(0)
    projection = torch.randn(B, N, 3 * h * d, generator=g).to(device, dtype).requires_grad_()
    grad_out = torch.randn(B, N, h * d, generator=g).to(device, dtype)
    lengths = torch.tensor([N, N // 3], dtype=torch.int32, device=device)[:B]
    blocks = dict(block_m=16, block_n=16)        # fixed tiles: a tuned shape only looks its tiles up

    def step():
        q, k, v = projection.view(B, N, 3, h, d).permute(2, 0, 3, 1, 4)        # 3 x (B, h, N, d) views
        out = fused_attention(q, k, v, lengths, check_lengths=False, version=version, dq=dq, **blocks)
        out.transpose(1, 2).reshape(B, N, h * d).backward(grad_out)          # what the model reads back
        projection.grad = None

    step()                                                                  # tiles, caches, compiles
    launches, counter = Counter(), AtenCounter()
    with counting_triton_launches(launches, counter), counter:
        step()
    ops = counter.ops
    return {"version": version, "dq": dq if version == 2 else None, "shape": [B, h, N, d],
            "dtype": str(dtype).removeprefix("torch."),
            "triton_launches": sum(launches.values()), "triton_kernels": dict(launches),
            "allocations": sum(n for op, n in ops.items() if op in ALLOCATING),
            "torch_kernels": sum(n for op, n in ops.items() if op not in NO_WORK and op != HOST_READ
                                 and op not in ("empty", "empty_like", "empty_strided", "new_empty")),
            "host_reads": ops[HOST_READ], "aten_ops": dict(ops)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "assets",
                   help="folder: writes OUT/benchmarks/kernel_host_work.json (default: %(default)s)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")          # before triton is first imported
    import triton

    rows = [model_like_call(version, dq, device=device) for version, dq in KERNELS]
    print(f"{'kernel':<20} {'Triton launches':>15} {'torch kernels':>13} {'allocations':>11} "
          f"{'host reads':>10}")
    for r in rows:
        kernel = f"version {r['version']}" + (f", {r['dq']}" if r["dq"] else "")
        print(f"{kernel:<20} {r['triton_launches']:>15} {r['torch_kernels']:>13} {r['allocations']:>11} "
              f"{r['host_reads']:>10}   {r['triton_kernels']}")
    record = args.out / "benchmarks" / "kernel_host_work.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    result = {"note": "counts per forward+backward (after a warm-up call), as the model calls the kernel; "
                      "not times", "device": device, "torch": torch.__version__, "triton": triton.__version__,
              "rows": rows}
    record.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
