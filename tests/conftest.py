"""Test-session setup that must happen before anything imports triton.

Without a CUDA GPU the Triton kernels run in Triton's CPU interpreter, which is chosen when a kernel
is defined (`@triton.jit` reads TRITON_INTERPRET). Some libraries the tests use (transformers) import
triton early, so the variable is set here, before any test module is collected.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minialbert.course.scale import ENV_VAR as SCALE_ENV_VAR
from minialbert.download import CACHE_ENV_VAR, cache_dir

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The tests run at ci scale unless told otherwise, as `make test` runs them: a bare `pytest` would otherwise
# execute lessons at course scale, for an hour, writing the course figures committed in assets/figures.
os.environ.setdefault(SCALE_ENV_VAR, "ci")

# `make test` runs the tests in two processes (pytest-xdist, one per core). Each keeps to one thread, and
# the notebook kernels it starts inherit that: two processes of two threads each on two cores spin against
# each other (a lesson then ran six times slower). Two processes building the same zoo entry in one cache
# would meet at its run lock, so the second worker gets a cache of its own; the first keeps the shared
# one, which the notebooks run after the tests then find filled.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    if os.environ["PYTEST_XDIST_WORKER"] != "gw0":
        os.environ[CACHE_ENV_VAR] = f"{cache_dir()}-{os.environ['PYTEST_XDIST_WORKER']}"


@pytest.fixture(scope="session", autouse=True)
def workspace_elsewhere(tmp_path_factory):
    """`check` keeps passing pieces in my_albert/ where it runs; the tests' checks keep theirs in a
    temporary folder, not in the repository (pieces/workspace.py)."""
    from minialbert.course.pieces import workspace
    workspace.DEFAULT = tmp_path_factory.mktemp("my_albert")
    yield
    workspace.DEFAULT = None


@pytest.fixture
def one_thread():
    """Tiny models run fastest on one thread, and much slower when threads fight on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def run_compiled():
    """run_compiled(code, out) -> the JSON that the Python `code` wrote to the path `out` (its argument),
    run in a fresh process without TRITON_INTERPRET: there Triton compiles kernels for GPU targets, as the
    compile and launch tests need, even where the session itself runs them in the interpreter."""
    def run(code: str, out: Path):
        env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
        result = subprocess.run([sys.executable, "-c", code, str(out)], cwd=Path(__file__).parent.parent,
                                env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(Path(out).read_text())
    return run
