"""Grading a class's submitted student notebooks (`python -m minialbert grade SUBMISSIONS...`).

Each submission runs at ci scale in a process of its own (grade_run.py): a fresh temporary folder holds
its home, its cache and its working folder (a copy of the submission, so a notebook that deletes the files
beside it deletes copies), under a time limit (the whole process group and the kernel are killed when it
is reached) and a memory limit (RLIMIT_AS, inherited by the kernel). The checks it runs log each verdict
to a file the grader reads back ($MINIALBERT_GRADE_LOG, grade_log.py), whatever the notebook prints.

Every piece and self-check question of the submission's lesson (found in the lesson the student version
was made from) gets a verdict: right, wrong, not written, error (the learner's code raised) or not run
(its check never ran: cell deleted, time ran out) for a piece; right, wrong, not answered, error or not run
for a question. A submission that is no notebook, runs out of time or memory, or whose kernel dies gets a
status saying so; the others are graded all the same. grade_table.py writes the table.

This keeps honest mistakes from harming the grading; it is not a sandbox for hostile code (the notebook
runs as the grader's user, with the network and every file that user may touch): docs/instructors.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..download import CACHE_ENV_VAR
from .grade_log import GRADE_LOG_ENV
from .grade_table import Grade, expected_items, graded_items, lesson_of
from .notebooks import parse_notebook
from .scale import ENV_VAR as SCALE_ENV_VAR

SECONDS = 600                      # default time limit per submission (a ci lesson takes under a minute)
MEMORY_MIB = 8192                  # default address-space limit of the kernel (a ci lesson peaks near 2 GiB)
# Settings that would point a run at the grader's own folders instead of its temporary home.
HOME_VARIABLES = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "MPLCONFIGDIR", "IPYTHONDIR",
                  "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "TRITON_CACHE_DIR",
                  "TORCHINDUCTOR_CACHE_DIR", "HF_HOME")
# What a memory error looks like in a cell's error output (Python's, and PyTorch's allocator's).
OUT_OF_MEMORY = ("MemoryError", "can't allocate memory", "not enough memory", "Cannot allocate memory")


@dataclass(frozen=True)
class Limits:
    """What one submission may use: seconds of wall-clock time and MiB of address space."""
    seconds: float = SECONDS
    memory_mib: int = MEMORY_MIB


@dataclass
class Run:
    """What running one submission gave: its status, the cells that raised, and the verdicts logged."""
    status: str
    errors: dict[int, str] = field(default_factory=dict)    # cell index -> "Type: first line"
    logged: list[dict] = field(default_factory=list)        # grade_log lines, in order


def grade(paths: list[Path], lessons_dir: Path = Path("notebooks"), limits: Limits = Limits(),
          seed_cache: Path | None = None, scale: str = "ci",
          progress: Callable[[str], None] | None = None) -> list[Grade]:
    """Run every submission in `paths` (each alone, in its own temporary folder) and grade it; -> one
    Grade per submission, in order. `seed_cache`: a cache folder each run's cache starts with (copied once,
    then hard-linked into each run), so lessons do not rebuild what it holds. `progress` gets one line per
    submission graded."""
    if not Path(lessons_dir).is_dir():
        raise FileNotFoundError(f"--lessons {lessons_dir} is not a folder: run from the repository root or "
                                "pass the lessons' folder, which says what pieces and questions each has")
    if seed_cache is not None and not Path(seed_cache).is_dir():
        raise FileNotFoundError(f"--seed-cache {seed_cache} is not a folder: give a minialbert cache "
                                "(e.g. one a ci run of the lessons filled)")
    grades = []
    with tempfile.TemporaryDirectory(prefix="minialbert-grade-", ignore_cleanup_errors=True) as tmp:
        seed = copy_seed(Path(seed_cache), Path(tmp) / "seed") if seed_cache is not None else None
        for number, path in enumerate(paths):
            start = time.monotonic()
            folder = Path(tmp) / f"{number:04d}"
            grades.append(grade_one(Path(path), folder, lessons_dir, limits, seed, scale))
            shutil.rmtree(folder, ignore_errors=True)         # its home, cache and copies: done with
            if progress is not None:
                progress(f"graded {path}: {grades[-1].status} ({time.monotonic() - start:.0f} s)")
    return grades


def grade_one(path: Path, folder: Path, lessons_dir: Path, limits: Limits, seed: Path | None,
              scale: str) -> Grade:
    """Grade one submission, run in `folder` (made here; the caller removes it)."""
    try:
        nb = parse_notebook(path.read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return Grade(str(path), None, not_a_notebook(path, e), {})
    lesson = lesson_of(nb)
    source = lessons_dir / lesson if lesson else None
    expected = expected_items(source if source is not None and source.is_file() else nb)
    run = run_submission(path, folder, limits, seed, scale)
    return Grade(str(path), lesson, run.status, graded_items(expected, nb, run.logged, run.errors))


def not_a_notebook(path: Path, error: Exception) -> str:
    """The status of a file that cannot be graded: 'not a notebook: <why>' (or 'not a valid notebook')."""
    if isinstance(error, UnicodeDecodeError):
        return "not a notebook: not UTF-8 text"
    if isinstance(error, OSError):
        return f"not a notebook: cannot read it ({error.strerror or type(error).__name__})"
    said = str(error).removeprefix(f"{path} is ")                   # parse_notebook names the file
    return said if said.startswith("not a") else f"not a notebook: {said}"


def copy_seed(source: Path, seed: Path) -> Path:
    """Copy a cache folder once into the grading's own `seed`, its files made read-only (so a run writing
    into a seeded file by mistake fails instead of changing it for the next runs)."""
    shutil.copytree(source, seed, symlinks=True, ignore=shutil.ignore_patterns("*.lock", "*.tmp"))
    for file in seed.rglob("*"):
        if file.is_file() and not file.is_symlink():
            file.chmod(0o444)
    return seed


def run_env(folder: Path, scale: str) -> dict[str, str]:
    """The environment of one run: the grader's, with a home and cache of its own in `folder`, the scale,
    the grade log, and the package importable whatever the home."""
    env = {name: value for name, value in os.environ.items() if name not in HOME_VARIABLES}
    paths = [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]   # the package's folder
    env.update(HOME=str(folder / "home"), MPLBACKEND="agg", PYTHONPATH=os.pathsep.join(p for p in paths if p))
    env.update({CACHE_ENV_VAR: str(folder / "cache"), SCALE_ENV_VAR: scale,
                GRADE_LOG_ENV: str(folder / "grade.jsonl")})
    return env


def memory_limit(mib: int) -> Callable[[], None]:
    """A preexec_fn that limits the child's address space (and its kernel's: children inherit it)."""
    def limit() -> None:
        import resource
        size = mib * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    return limit


def run_submission(path: Path, folder: Path, limits: Limits, seed: Path | None, scale: str) -> Run:
    """Execute the notebook at `path` in a child process (grade_run.py) inside `folder`; -> the Run."""
    work, cache = folder / "work", folder / "cache"
    for made in (work, folder / "home"):
        made.mkdir(parents=True)
    if seed is not None:
        shutil.copytree(seed, cache, symlinks=True, copy_function=os.link)
    notebook = work / path.name
    shutil.copyfile(path, notebook)
    outcome, stderr = folder / "outcome.json", folder / "stderr.txt"
    script = Path(__file__).with_name("grade_run.py")
    command = [sys.executable, "-P", str(script), str(notebook), str(outcome)]
    with open(stderr, "wb") as err:
        child = subprocess.Popen(command, cwd=work, env=run_env(folder, scale), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                                 preexec_fn=memory_limit(limits.memory_mib))
        timed_out = False
        try:
            child.wait(timeout=limits.seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if child.poll() is None:          # out of time, or the grader itself interrupted (Ctrl-C)
                kill_all(child)
    run = Run("", logged=read_log(folder / "grade.jsonl"))
    result = read_outcome(outcome)
    run.errors = {int(cell): line for cell, line in result.get("errors", {}).items()}
    run.status = status(run.errors, result.get("died"), timed_out, child.returncode, stderr, limits)
    return run


def kill_all(child: subprocess.Popen) -> None:
    """Kill the child, its process group, and every process it started (the kernel runs in a session of
    its own, so killing the group alone would leave it running)."""
    import psutil  # installed with ipykernel

    try:
        family = psutil.Process(child.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for process in family:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    child.wait()


def read_log(path: Path) -> list[dict]:
    """The verdicts a run logged (a line that is not a verdict, e.g. cut short by a kill, is skipped)."""
    if not path.exists():
        return []
    logged = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and {"kind", "name", "verdict", "message"} <= entry.keys():
            logged.append({key: str(entry[key]) for key in ("kind", "name", "verdict", "message")})
    return logged


def read_outcome(path: Path) -> dict:
    """What grade_run.py wrote ({'errors': {cell: line}, 'died': line or None}); {} if it wrote nothing."""
    try:
        outcome = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return outcome if isinstance(outcome, dict) else {}


def status(errors: dict[int, str], died: str | None, timed_out: bool, returncode: int | None,
           stderr: Path, limits: Limits) -> str:
    """One line: how the run went (ran / timed out / out of memory / the kernel died / could not run)."""
    memory = [cell for cell, line in errors.items() if any(sign in line for sign in OUT_OF_MEMORY)]
    if timed_out:
        return f"timed out after {limits.seconds:g} s"
    if memory:
        return f"out of memory (limit {limits.memory_mib} MiB) in cell {memory[0]}"
    if died is not None:
        return f"the kernel died: {died}"
    if returncode != 0:
        lines = stderr.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        last = lines[-1][:200] if lines else f"exit status {returncode}"
        if "MemoryError" in last:
            return f"out of memory (limit {limits.memory_mib} MiB): {last}"
        if returncode is not None and returncode < 0:
            return f"killed by signal {-returncode} (out of memory?): {last}"
        return f"could not run: {last}"
    if errors:
        first, many = min(errors), "s" * (len(errors) > 1)
        said = errors[first] if len(errors[first]) <= 100 else errors[first][:97] + "..."
        return f"ran; {len(errors)} cell{many} raised (first: cell {first}, {said})"
    return "ran"
