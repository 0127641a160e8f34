"""What the compiler makes of the fused-attention kernels on T4, A100, L4/RTX 40 and H100/H200, without a GPU.

Compiles every kernel of minialbert/kernels/flash_attention.py (forward, delta, dK/dV, dQ) and of
flash_attention_v2.py (forward, the 5-product backward, dQ's scaling) under every tile configuration it may
launch with (each tuned config for float16/bfloat16, the fixed 32 x 32 tiles for float32), for each head dim
and for sm_80, sm_89 and sm_90 (and sm_75, the T4, in float16), and records per compile: registers, shared
memory, spills (stack/local memory), tensor-core instructions in the PTX and SASS, whether a block can
launch, and the theoretical occupancy (minialbert.kernels.compile_report). Compiler facts, not timings.

    python benchmarks/kernel_report.py                  # 1,364 compiles (828 of version 1: 13 min on 2 cores)
    python benchmarks/kernel_report.py --workers 8      # more processes on a bigger machine
    python benchmarks/kernel_report.py --update         # compile only what the report lacks (same Triton)

Writes assets/benchmarks/kernel_report.json (one record per line) and prints one line per kernel, target
and dtype.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
import triton

from minialbert.download import atomic_write
from minialbert.kernels import compile_report

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "assets" / "benchmarks" / "kernel_report.json"
KIB = 1024


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=None, help="compile processes (default: one per CPU core)")
    p.add_argument("--out", type=Path, default=OUT, help="JSON file to write (default: %(default)s)")
    p.add_argument("--update", action="store_true",
                   help="keep the records of --out made with this Triton; compile only the new variants")
    return p.parse_args(argv)


def environment() -> dict:
    """The compiler versions behind the numbers: Triton and the ptxas it ships, torch, Python."""
    ptxas = compile_report.TRITON_BIN / "ptxas"
    version = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True).stdout.strip()
    return {"triton": triton.__version__, "ptxas": version.splitlines()[-2] if version else "unknown",
            "torch": torch.__version__, "python": platform.python_version(),
            "made_at_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")}


def summary_lines(records: list[dict]) -> list[str]:
    """One line per (kernel, target, dtype) over its configs and head dims: ranges and counts."""
    lines = [f"{'kernel':<11} {'target':<6} {'dtype':<9} {'compiles':>8} {'registers':>10} "
             f"{'shared KiB':>11} {'spill':>5} {'no fit':>6} {'tensor-core instr.':>19} {'occupancy':>10}"]
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["kernel"], r["target"], r["dtype"]), []).append(r)
    for (kernel, target, dtype), group in groups.items():
        ok = [r for r in group if r["error"] is None]
        regs = [r["registers"] for r in ok]
        shared = [r["shared_bytes"] / KIB for r in ok]
        occupancy = [r["occupancy"]["occupancy"] for r in ok if r["occupancy"]]
        tensor = {name: sum(r["ptx"][name] for r in ok) for name in compile_report.TENSOR_CORE_PTX}
        used = "+".join(name for name, n in tensor.items() if n) or "none (FMA)"
        failed = f" ({len(group) - len(ok)} failed to compile)" if len(ok) < len(group) else ""
        lines.append(f"{kernel:<11} {target:<6} {dtype:<9} {len(group):>8} {min(regs):>4}-{max(regs):<5} "
                     f"{min(shared):>5.0f}-{max(shared):<5.0f} {sum(r['spills'] for r in ok):>5} "
                     f"{sum(not r['fits'] for r in ok):>6} {used:>19} "
                     f"{min(occupancy):>4.0%}-{max(occupancy):<4.0%}{failed}")
    return lines


def kept_records(path: Path) -> tuple[dict, int]:
    """The records of an earlier report by variant, if it was made with this Triton (else none), and the
    seconds its compiles took."""
    if not path.exists():
        return {}, 0
    report = json.loads(path.read_text())
    if report["environment"]["triton"] != triton.__version__:
        return {}, 0
    fields = compile_report.Variant.__dataclass_fields__
    kept = {compile_report.Variant(**{name: r[name] for name in fields}): r for r in report["records"]}
    return kept, report["compile_seconds"]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    variants = compile_report.all_variants()
    kept, earlier_seconds = kept_records(args.out) if args.update else ({}, 0)
    todo = [v for v in variants if v not in kept]
    targets = ", ".join(compile_report.TARGETS)
    print(f"compiling {len(todo)} kernel variants for {targets} ({len(kept)} kept) ...", flush=True)
    start = time.perf_counter()
    compiled = dict(zip(todo, compile_report.compile_variants(todo, workers=args.workers)))
    records = [kept.get(v) or compiled[v] for v in variants]
    seconds = time.perf_counter() - start
    report = {
        "note": "compiler facts (triton.compile + ptxas for each target, read with cuobjdump), not timings",
        "environment": environment(),
        "compile_seconds": round(seconds) + earlier_seconds,    # summed over --update runs
        "compiled_in_last_run": len(todo),
        "limits": {name: asdict(limits) for name, limits in compile_report.TARGETS.items()},
        "records": records,
    }
    body = ",\n".join(json.dumps(r) for r in records)          # one record per line: readable diffs
    text = json.dumps({**report, "records": []}, indent=1)
    text = text.replace('"records": []', f'"records": [\n{body}\n]') + "\n"
    atomic_write(args.out, text.encode())
    print("\n".join(summary_lines(records)))
    print(f"{len(todo)} compiles in {seconds / 60:.1f} min ({len(records) - len(todo)} kept): {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
