"""Test-session setup that must happen before anything imports triton.

Without a CUDA GPU the Triton kernels run in Triton's CPU interpreter, which is chosen when a kernel
is defined (`@triton.jit` reads TRITON_INTERPRET). Some libraries the tests use (transformers) import
triton early, so the variable is set here, before any test module is collected.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def one_thread():
    """Tiny models run fastest on one thread, and much slower when threads fight on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
