"""How long each lesson takes a new reader: every lesson run top to bottom from a fresh clone.

Clones the repository at HEAD into a temporary directory, points MINIALBERT_CACHE at an empty
folder, and executes lessons 00-12 in order at one scale (course by default), each in a fresh
kernel, with this environment's Python but the clone's package (PYTHONPATH). One-time costs (the
corpus download and build, the tokenizer) land on the first lesson that needs them, as they would
for a reader. The shipped zoo is part of the clone, so lessons that read it do not train.

    python benchmarks/lesson_times.py                   # all lessons, course scale (about an hour)
    python benchmarks/lesson_times.py --write-boxes     # ... and put the times in the lessons' boxes
    python benchmarks/lesson_times.py --keep-outputs    # ... and keep the executed lessons (their outputs)
    python benchmarks/lesson_times.py --lessons 02 03 --scale ci   # a quick look (writes nothing)
    python benchmarks/lesson_times.py --lessons 07 08 --update --write-boxes   # re-time two lessons

A partial run cannot pay the one-time costs where a reader pays them (lesson 01 builds the corpus), so
`--update` first copies this machine's built course corpus (`corpora/` of the cache) into the empty
cache, unless lesson 01 is among those named (it then builds the corpus, as a reader's first lesson
does), times the lessons named, and replaces their entries in the JSON, which records for each the
commit, the date and what the cache held. Anything else a lesson finds missing (the
pretraining examples earlier lessons would have cached) it builds itself, inside its time.

Writes assets/benchmarks/lesson_times.json (course scale, all lessons only). `--write-boxes` then
rewrites the Time line of each lesson's opening box from that JSON; tests/test_notebook_files.py
checks that boxes and JSON agree. `--keep-outputs` copies each executed lesson, cleaned, over the
committed one (so one run both times the lessons and refreshes their outputs; it refuses when
notebooks/ has uncommitted changes). Measure only when nothing else runs on the machine: a lesson's two
torch threads beside one more busy thread can run several times slower.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from minialbert.course.notebooks import clean_notebook, lessons, notebook_text, read_notebook
from minialbert.download import atomic_write, cache_dir

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "assets" / "benchmarks" / "lesson_times.json"
TIME_LINE = re.compile(r"^> - \*\*Time:\*\* .*$", re.MULTILINE)


def box_time(seconds: float, record: dict) -> str:
    """The Time line of a lesson's opening box for a measured wall time."""
    return (f"> - **Time:** about {math.ceil(seconds / 60)} min at {record['scale']} scale on "
            f"{record['cores']} CPU cores, from a fresh clone")


def run_lessons(numbers: list[str] | None, scale: str, timeout: int, keep_outputs: bool,
                corpus_built: bool = False) -> tuple[dict, str]:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    times = {}
    with tempfile.TemporaryDirectory(prefix="minialbert-lessons-") as tmp:
        clone, cache = Path(tmp) / "clone", Path(tmp) / "cache"
        if corpus_built:
            corpora = cache_dir() / "corpora"
            if not any(corpora.glob("course-*.json")):
                sys.exit(f"--update needs the course corpus built in {corpora}: run lesson 01 (or any "
                         "course command) once first")
            shutil.copytree(corpora, cache / "corpora")
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", commit], check=True)
        env = {**os.environ, "MINIALBERT_SCALE": scale, "MINIALBERT_CACHE": str(cache),
               "PYTHONPATH": str(clone)}
        env.pop("MINIALBERT_DRY_RUN", None)
        for path in lessons(clone / "notebooks"):
            if numbers and path.stem[:2] not in numbers:
                continue
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                            "--inplace", f"--ExecutePreprocessor.timeout={timeout}", str(path)],
                           env=env, cwd=clone, check=True, capture_output=True)
            times[path.stem] = round(time.perf_counter() - start, 1)
            print(f"{path.stem}: {times[path.stem]:.0f} s", flush=True)
            if keep_outputs:
                executed = notebook_text(clean_notebook(read_notebook(path)))
                atomic_write(ROOT / "notebooks" / path.name, executed.encode())
    return times, commit


def write_boxes(record: dict) -> None:
    for path in lessons(ROOT / "notebooks"):
        seconds = record["seconds"].get(path.stem)
        if seconds is None:
            continue
        nb = read_notebook(path)
        first = next(c for c in nb.cells if c.cell_type == "markdown")
        first.source, found = TIME_LINE.subn(box_time(seconds, record), first.source)
        if found != 1:
            raise ValueError(f"{path.name}: its first markdown cell has no '> - **Time:**' line")
        atomic_write(path, notebook_text(clean_notebook(nb)).encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="course")
    parser.add_argument("--lessons", nargs="*", help="two-digit lesson numbers (default: all)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    parser.add_argument("--write-boxes", action="store_true")
    parser.add_argument("--keep-outputs", action="store_true")
    parser.add_argument("--update", action="store_true",
                        help="with --lessons: start from the built corpus and replace those lessons' times")
    args = parser.parse_args()
    if args.update and not (args.lessons and args.scale == "course"):
        sys.exit("--update re-times the lessons named with --lessons, at course scale")
    record = json.loads(OUT.read_text()) if args.update else None    # the record --update amends
    if record and record["cores"] != os.cpu_count():
        sys.exit(f"{OUT.name} was measured on another number of cores: re-time every lesson instead")
    if args.keep_outputs and subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "notebooks"],
                                            capture_output=True, text=True, check=True).stdout.strip():
        sys.exit("notebooks/ has uncommitted changes: commit them first (--keep-outputs overwrites lessons)")
    corpus_built = args.update and "01" not in args.lessons
    times, commit = run_lessons(args.lessons, args.scale, args.timeout, args.keep_outputs, corpus_built)
    print(f"total: {sum(times.values()) / 60:.1f} min over {len(times)} lessons")
    if record:
        record["seconds"].update(times)
        record.setdefault("retimed", {}).update({stem: {
            "commit": commit, "date": time.strftime("%Y-%m-%d"),
            "cache": "the course corpus already built (lesson 01's one-time cost)" if corpus_built
            else "empty"} for stem in times})
    elif args.lessons or args.scale != "course":
        return                                    # a partial or non-course run is a look, not the record
    else:
        record = {"scale": args.scale, "commit": commit, "cores": os.cpu_count(),
                  "machine": platform.machine(), "python": platform.python_version(),
                  "date": time.strftime("%Y-%m-%d"), "seconds": times}
    atomic_write(OUT, (json.dumps(record, indent=1) + "\n").encode())
    print(f"wrote {OUT.relative_to(ROOT)}")
    if args.write_boxes:
        write_boxes(record)


if __name__ == "__main__":
    main()
