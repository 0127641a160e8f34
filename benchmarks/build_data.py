"""Time building the course pretraining set: first time (empty cache) and from cache (a new process).

The first build parses the embedded corpus, trains the SentencePiece tokenizer and builds the
examples; the cached one reads them back. Each run is a fresh Python process on a fresh cache
directory, so no in-memory state helps. Targets: <= 60 s first time, <= 2 s cached.

    python benchmarks/build_data.py                    # course scale, SOP examples
    python benchmarks/build_data.py --scale ci --objective nsp
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

FIRST_TARGET_S, CACHED_TARGET_S = 60.0, 2.0


def child(objective: str) -> None:
    """Build (or load) the set in this process; print what it took as JSON."""
    t0 = time.perf_counter()
    from minialbert.course.data import course_pretraining_data  # imports torch: timed apart
    from minialbert.course.scale import current_scale
    t1 = time.perf_counter()
    dataset = course_pretraining_data(objective, "train", current_scale().data)
    t2 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "build_s": t2 - t1, "examples": len(dataset),
                      "tokens": dataset.input_ids.numel()}))


def run_child(objective: str, env: dict[str, str]) -> dict:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", "--objective", objective], env=env,
                         check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="course", choices=["ci", "course", "gpu"])
    parser.add_argument("--objective", default="sop", choices=["mlm", "nsp", "sop"])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.objective)
        return

    with tempfile.TemporaryDirectory(prefix="minialbert-bench-") as cache:
        env = {**os.environ, "MINIALBERT_CACHE": cache, "MINIALBERT_SCALE": args.scale}
        first = run_child(args.objective, env)
        cached = run_child(args.objective, env)
    print(f"scale={args.scale} objective={args.objective}: {first['examples']} examples, "
          f"{first['tokens']} tokens (cpu count {os.cpu_count()})")
    for name, r, target in (("first time", first, FIRST_TARGET_S), ("from cache", cached, CACHED_TARGET_S)):
        verdict = "OK" if r["build_s"] <= target else "MISSED"
        print(f"{name:>10}: {r['build_s']:6.2f} s  (target <= {target:.0f} s: {verdict}); "
              f"import {r['import_s']:.2f} s, whole process {r['process_s']:.2f} s")


if __name__ == "__main__":
    main()
