"""The run directory's life: the lock a run holds, its first files, its metrics.

A run directory (`out_dir` of a pretraining or fine-tuning run) holds config.json and train_args.json
(the model config and the training arguments), metrics.jsonl (one JSON record per train step or
evaluation), checkpoints/ (checkpoint.py's) and .lock, held (flock, with the PID) while a run uses it.
Nothing is written before the first step has succeeded (start_run_files), so a run that fails at its
start leaves the directory as it found it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import warnings
from pathlib import Path

from .checkpoint import TEMPORARY_CHECKPOINT, TEMPORARY_FILE, NonFiniteError
from .config import AlbertConfig
from .download import atomic_write, write_json

LOCK_FILE = ".lock"


class RunLockedError(OSError):
    """Another live process holds the run directory's lock."""



@contextlib.contextmanager
def run_lock(run_dir: Path):
    """Hold run_dir/.lock while a run uses the directory (created if missing, removed again if the
    run leaves it empty). The flock dies with its process, so a stale lock file is simply taken over."""
    import fcntl  # POSIX; imported here so the module still imports elsewhere

    created = not run_dir.exists()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot use {str(run_dir)!r} as a run directory: {e.strerror}") from None
    path = run_dir / LOCK_FILE
    while True:
        f = open(path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            owner = f.read().strip() or "unknown"
            f.close()
            raise RunLockedError(f"{run_dir} is in use by another run (PID {owner}, lock {path}); wait "
                                 f"for it to finish or choose another output directory") from None
        if path.exists() and os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
            break                                # not unlinked by a previous holder meanwhile
        f.close()
    try:
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
        _remove_temporaries(run_dir)
        yield
    finally:
        path.unlink(missing_ok=True)
        f.close()
        if created and not any(run_dir.iterdir()):
            run_dir.rmdir()


def _remove_temporaries(run_dir: Path) -> None:
    """Delete the temporary files and checkpoint folders an interrupted save left behind (we hold the
    lock, so no save of ours is under way), saying so in one line; nothing else is touched."""
    checkpoints = run_dir / "checkpoints"
    folders = [p for p in checkpoints.glob(".tmp-step-*") if TEMPORARY_CHECKPOINT.fullmatch(p.name)
               and p.is_dir() and not p.is_symlink()]
    files = [p for folder in (run_dir, checkpoints) for p in folder.glob(".*tmp*")
             if TEMPORARY_FILE.fullmatch(p.name) and (p.is_file() or p.is_symlink())]
    for path in folders:
        shutil.rmtree(path)
    for path in files:
        path.unlink()
    if folders or files:
        names = ", ".join(str(p.relative_to(run_dir)) for p in [*folders, *files])
        warnings.warn(f"removed what an interrupted save left in {run_dir}: {names}", stacklevel=4)


def start_run_files(out_dir: Path, cfg: AlbertConfig, args, history: list[dict]):
    """Write config.json, train_args.json (a dataclass) and metrics.jsonl once the first step has
    succeeded; -> the metrics file, open for appending. A crashed run may have logged past its last
    checkpoint: the metrics keep only what the checkpoint saw."""
    metrics = out_dir / "metrics.jsonl"
    if metrics.exists() and not history:
        lines = sum(1 for line in metrics.read_text(errors="replace").splitlines() if line.strip())
        if lines:
            warnings.warn(f"{metrics} holds {lines} records of an earlier run that saved no checkpoint; "
                          "replacing them", stacklevel=3)
    write_json(out_dir / "config.json", cfg.to_dict())
    write_json(out_dir / "train_args.json", dataclasses.asdict(args))
    atomic_write(metrics, "".join(json.dumps(r) + "\n" for r in history).encode())   # one record a line
    return open(metrics, "a")


def record_metrics(record: dict, history: list[dict], log_file, callbacks) -> None:
    """Append a metrics record to the history, to metrics.jsonl (if open) and pass it to callbacks."""
    history.append(record)
    if log_file is not None:
        log_file.write(json.dumps(record, allow_nan=False) + "\n")
        log_file.flush()
    for cb in callbacks:
        cb(record)


def read_metrics(run_dir: str | Path) -> list[dict]:
    """The records of a run's metrics.jsonl."""
    path = Path(run_dir) / "metrics.jsonl"
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"metrics file {path} is damaged at line {number} ({e})") from None
    return records


class RunDirectory:
    """A run directory's life, held for the length of a run: its lock (taken on entry, released on exit),
    its first files (written with the first record), its metrics (one line a record, every record checked
    finite first) and when a checkpoint is due. out_dir None keeps nothing on disk; writes=False (the
    processes of a distributed run but the first) reads the directory without locking or writing it.

        with RunDirectory(out_dir, cfg, args, callbacks) as run:
            run.history = restored history          # a resumed run's records so far
            run.record({"step": 1, "split": "train", ...})
            if run.checkpoint_due(step): save_checkpoint(...)
    """

    def __init__(self, out_dir: Path | None, cfg: AlbertConfig, args, callbacks=(), writes: bool = True):
        self.out_dir, self.cfg, self.args, self.callbacks = out_dir, cfg, args, callbacks
        self.writes = writes and out_dir is not None
        self.history: list[dict] = []
        self._log = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> RunDirectory:
        if self.writes:
            self._stack.enter_context(run_lock(self.out_dir))
        return self

    def __exit__(self, *exc) -> None:
        if self._log is not None:
            self._log.close()
        self._stack.close()

    def record(self, record: dict) -> None:
        """Check a metrics record, then keep it (the first one writes the run's first files)."""
        bad = [k for k, v in record.items() if isinstance(v, float) and not math.isfinite(v)]
        if bad:
            values = ", ".join(f"{k} = {record[k]}" for k in bad)
            raise NonFiniteError(f"step {record['step']}: non-finite {record['split']} {values}; the run "
                                 f"stopped and nothing non-finite was saved (lower the learning rate or "
                                 f"check the data)")
        if self.writes and self._log is None:
            self._log = start_run_files(self.out_dir, self.cfg, self.args, self.history)
        record_metrics(record, self.history, self._log, self.callbacks)

    def checkpoint_due(self, step: int) -> bool:
        """At the last step, and every args.checkpoint_every steps, when the run keeps a directory."""
        every = self.args.checkpoint_every
        return self.out_dir is not None and (step == self.args.steps or bool(every and step % every == 0))
