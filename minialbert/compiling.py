"""How training compiles the model: the whole forward under torch.compile, or the encoder's layers as CUDA
graphs. train.RunOptions(compile=...) and benchmarks/train_step_gpu.py choose between them.

torch.compile keeps what it compiles on disk (TORCHINDUCTOR_CACHE_DIR, and Triton's kernels under it). Its
C++ compiler writes a graph's library straight to the name the next run looks for, so a run killed while
it writes leaves a half-written file that breaks every later compile of that graph. `compile_cache` keeps
a run's compiled files in the minialbert cache (compile/torch-<version>), marked while a run uses them:
a mark left by a run that did not end means its files may be half-written, and the next run clears them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from .download import cache_dir
from .model import AlbertForPretraining

COMPILE_MODES = ("model", "graphs")    # RunOptions(compile=...): the whole forward; the layers as CUDA graphs
INDUCTOR_CACHE_VAR = "TORCHINDUCTOR_CACHE_DIR"
MARK = "running-"                      # a run's mark in the compile folder: running-<host>-<process id>


def compiled(net: nn.Module, backend: str = "inductor") -> nn.Module:
    """torch.compile(net), with the masked-LM gather (its size M depends on the data) inside the graph:
    this sets torch._dynamo.config.capture_dynamic_output_shape_ops for the process."""
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    return torch.compile(net, backend=backend)


def graphed_layers(model: AlbertForPretraining, backend: str = "inductor") -> None:
    """Compile the encoder's layers in place (nn.Module.compile: the state dict keeps its names) with
    torch.compile's mode "reduce-overhead": on a CUDA GPU their forward and backward then replay as CUDA
    graphs, every kernel launch included, so the host spends no time per layer or per attention call. The
    embeddings and heads stay eager: the masked-LM gather's size depends on the data, which a CUDA graph
    cannot hold. Each new batch shape (B, N) records its own graphs; off CUDA it is torch.compile alone."""
    options = {"mode": "reduce-overhead"} if backend == "inductor" else {"backend": backend}   # tests: eager
    model.albert.encoder.compile(**options)


def mark_name(pid: int) -> str:
    """The mark of the run in process `pid` on this machine."""
    return f"{MARK}{socket.gethostname()}-{pid}"


def left_behind(mark: Path) -> bool:
    """Was the mark left by a run that did not end: a process of this machine that no longer runs, or this
    process (an earlier run in it was interrupted)? Another machine's marks are never judged."""
    host, _, pid = mark.name.removeprefix(MARK).rpartition("-")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return True
    try:
        os.kill(int(pid), 0)                             # signal 0: is it running? (nothing is sent)
    except ProcessLookupError:
        return True
    except PermissionError:                              # another user's process, running
        return False
    return False


@contextlib.contextmanager
def compile_cache(root: Path | None = None) -> Iterator[Path]:
    """Point torch.compile at root/torch-<version> (root: the cache's compile/ folder) while the block runs,
    marked as in use; the mark goes when the block ends, or raises an ordinary error (torch then wrote its
    files whole), and stays when it is interrupted or killed. A folder whose marks were all left behind is
    cleared first, with a one-line warning; one that another run still uses is left as it is."""
    folder = (cache_dir() / "compile" if root is None else root) / f"torch-{torch.__version__}"
    folder.mkdir(parents=True, exist_ok=True)
    marks = list(folder.glob(MARK + "*"))
    if marks and all(left_behind(m) for m in marks):
        runs = ", ".join(m.name.removeprefix(MARK) for m in marks)
        warnings.warn(f"a run that compiled with torch.compile stopped before its end ({runs}), which can "
                      f"leave half-written files: cleared {folder}, so this run compiles afresh",
                      stacklevel=3)
        shutil.rmtree(folder)
        folder.mkdir()
    mark = folder / mark_name(os.getpid())
    mark.touch()
    before = os.environ.get(INDUCTOR_CACHE_VAR)
    os.environ[INDUCTOR_CACHE_VAR] = str(folder)
    try:
        yield folder
        mark.unlink(missing_ok=True)
    except Exception:
        mark.unlink(missing_ok=True)
        raise
    finally:
        if before is None:
            os.environ.pop(INDUCTOR_CACHE_VAR, None)
        else:
            os.environ[INDUCTOR_CACHE_VAR] = before
