"""Host time per fused-attention call, measured without a GPU: Triton's dispatch against direct launches.

Triton's interpreter cannot show a compiled launch's host side. The recording driver can
(minialbert/kernels/recording_driver.py): the kernels compile for sm_90 and every launch goes through
Triton's real host path into a recorder instead of the GPU. What is timed is all a call does on the host:
autograd, our Python, torch's allocations, Triton's dispatch; what is not is the GPU's work and the CUDA
driver's own launch call (the same per launch either way). The tensors are small CPU tensors, so that the
torch operations around the kernels (autograd's copies) cost little CPU work; on a GPU they are launches.

Rows, each the best of --repeats timings of --number calls, all in one process:
- "one launch": version 2's forward kernel, through Triton's dispatch (kernel[grid](...)) and direct
  (kernels/launching.py, after its first call);
- "forward+backward": one call as the model makes it (q, k, v views of one projection, the output read back
  as (B, N, h * d)), through the autograd glue fused_attention uses (its input checks, which refuse CPU
  tensors outside the interpreter, are left out): version 1 (Triton's dispatch and its autotuner), version
  2 through Triton's dispatch, version 2 direct, and version 2 direct with dQ mode "two_phase" (one backward
  launch instead of two).
Ratios are against an anchor measured in the same run: the launch through Triton's dispatch, and version
2 (dQ mode "atomic") through Triton's dispatch. Tuning and autotuning
have nothing to time here: every candidate takes equally long, and the first is kept.

    python benchmarks/kernel_host_time.py     # prints a table, writes assets/benchmarks/kernel_host_time.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import timeit
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROWS = ((1, "atomic", False), (2, "atomic", False), (2, "atomic", True), (2, "two_phase", True))  # direct?


def best_microseconds(calls: dict, number: int, repeats: int) -> dict:
    """{name: best time per call in microseconds}; the repeats take turns, so that a slow spell of the
    machine falls on every row alike."""
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(repeats):
        for name, call in calls.items():
            best[name] = min(best[name], timeit.timeit(call, number=number) / number * 1e6)
    return best


def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def model_like_call(version: int, dq: str, B: int = 1, h: int = 2, N: int = 32, d: int = 16):
    """A forward+backward as the model makes it, after a first call (compiles, tunes); -> the call."""
    import torch

    from minialbert.kernels.attention import FusedAttention

    projection = torch.randn(B, N, 3 * h * d, dtype=torch.float16, requires_grad=True)
    grad_out = torch.randn(B, N, h * d, dtype=torch.float16)
    lengths = torch.full((B,), N, dtype=torch.int32)

    def call():
        q, k, v = projection.view(B, N, 3, h, d).permute(2, 0, 3, 1, 4)        # 3 x (B, h, N, d) views
        if version == 1:
            q, k, v = (t.contiguous() for t in (q, k, v))                       # as fused_attention does
        out = FusedAttention.apply(q, k, v, lengths, d ** -0.5, version, None, dq)
        out.transpose(1, 2).reshape(B, N, h * d).backward(grad_out)
        projection.grad = None
    call()
    return call


def one_launch():
    """Version 2's forward kernel with fixed tiles, as its forward launches it; -> (arguments, options)."""
    import torch

    from minialbert.kernels import flash_attention_v2 as v2

    B, h, N, d = 1, 2, 32, 16
    q, k, v = torch.randn(3, B, N, h, d, dtype=torch.float16).transpose(2, 3)
    o, lse = v2.seq_major(B, h, N, d, q), torch.empty((B, h, N), dtype=torch.float32)
    args = (q, k, v, o, lse, torch.full((B,), N, dtype=torch.int32), 0.25 * v2.LOG2E, *q.stride()[:3],
            *o.stride()[:3], N, h)
    options = dict(HEAD_DIM=d, BLOCK_M=32, BLOCK_N=32, PRECISION="tf32", TMA=False, num_warps=4, num_stages=2)
    return (v2.attn_fwd_v2, (1, B * h), *args), options


def with_direct(direct: bool, call):
    """`call` with launching.DIRECT set as given while it runs."""
    from minialbert.kernels import launching

    def switched():
        launching.DIRECT = direct
        call()
    return switched


def measure(number: int, repeats: int) -> dict:
    import torch
    import triton
    import triton.testing

    from minialbert.kernels import launching, recording_driver

    recording = recording_driver.install()
    triton.testing.do_bench_cudagraph = lambda call, **_: call() or 1.0   # tuning: nothing to time here

    positional, options = one_launch()
    kernel, grid, *args = positional
    launching.launch(*positional, **options)                                # compiles, is remembered
    launch_rows = best_microseconds({"Triton's dispatch": lambda: kernel[grid](*args, **options),
                                     "direct": lambda: launching.launch(*positional, **options)},
                                    number, repeats)

    calls, launches = {}, {}
    for version, dq, direct in ROWS:
        calls[version, dq, direct] = with_direct(direct, model_like_call(version, dq))
        recording.launches.clear()
        calls[version, dq, direct]()
        launches[version, dq, direct] = len(recording.launches)
    call_rows = best_microseconds(calls, number, repeats)
    recording.launches.clear()

    anchor, v2_anchor = launch_rows["Triton's dispatch"], call_rows[2, "atomic", False]
    return {
        "note": "host time per call, microseconds (best of repeats); the kernels compile for sm_90 and "
                "launch into a recorder: no GPU work, no CUDA launch call",
        "cpu": cpu_name(), "python": platform.python_version(),
        "torch": torch.__version__, "triton": triton.__version__, "number": number, "repeats": repeats,
        "one_launch": [{"way": way, "us": round(us, 2), "ratio": round(us / anchor, 3)}
                       for way, us in launch_rows.items()],
        "forward_backward": [{"version": version, "dq": dq if version == 2 else None,
                              "way": "direct" if direct else "Triton's dispatch",
                              "launches": launches[version, dq, direct], "us": round(us, 1),
                              "ratio_to_v2_dispatch": round(us / v2_anchor, 3)}
                             for (version, dq, direct), us in call_rows.items()],
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--number", type=int, default=2000, help="calls per timing (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=7, help="timings; the best counts (default: %(default)s)")
    p.add_argument("--out", type=Path, default=REPO / "assets",
                   help="folder: writes OUT/benchmarks/kernel_host_time.json (default: %(default)s)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        sys.exit("kernel_host_time.py: unset TRITON_INTERPRET: it times Triton's compiled launch path")
    warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
    result = measure(args.number, args.repeats)
    print(f"{'one launch':<38} {'us':>7} {'ratio':>6}")
    for r in result["one_launch"]:
        print(f"{r['way']:<38} {r['us']:>7.2f} {r['ratio']:>6.2f}")
    print(f"\n{'forward+backward':<38} {'launches':>8} {'us':>7} {'ratio to v2 dispatch':>21}")
    for r in result["forward_backward"]:
        name = f"version {r['version']}" + (f" ({r['dq']})" if r["dq"] else "") + f", {r['way']}"
        print(f"{name:<38} {r['launches']:>8} {r['us']:>7.1f} "
              f"{r['ratio_to_v2_dispatch']:>21.2f}")
    record = args.out / "benchmarks" / "kernel_host_time.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    partial = record.with_suffix(".json.partial")
    partial.write_text(json.dumps(result, indent=1) + "\n")
    partial.replace(record)
    print(f"wrote {record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
