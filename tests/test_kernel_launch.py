"""Version 2's direct launches (kernels/launching.py) hand the launcher what Triton's own launches would.

The worker runs in a fresh process without TRITON_INTERPRET, with the recording driver active: the kernels
compile for sm_90 and every launch's arguments are recorded instead of run (kernels/recording_driver.py).
It runs the model's forward+backward three times with the same shapes: first through Triton's dispatch
(which compiles and is remembered), then directly, then through Triton's dispatch again; then once with
q, k, v 2 bytes off 16-byte alignment, which Triton compiles differently, so it must not launch directly.
The host-time benchmark built on the same driver (benchmarks/kernel_host_time.py) is run once, briefly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minialbert.kernels import launching

REPO = Path(__file__).resolve().parent.parent

WORKER = """
import json, sys, warnings
import torch
warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
from triton.runtime.jit import JITFunction
from minialbert.kernels import flash_attention_v2 as v2, launching, recording_driver
recording = recording_driver.install()
dispatched = []
triton_run = JITFunction.run
JITFunction.run = lambda self, *a, **kw: dispatched.append(self.fn.__name__) or triton_run(self, *a, **kw)

def described(value):
    if isinstance(value, torch.Tensor):
        return ["tensor", list(value.shape), list(value.stride()), str(value.dtype), value.data_ptr() % 16]
    if type(value).__name__ == "LazyDict":         # launch metadata: made anew for each launch
        return "launch metadata"
    return value if isinstance(value, (int, float, str, type(None))) else repr(value)

def forward_backward(offset=0, direct=True):
    launching.DIRECT = direct
    B, h, N, d = 2, 2, 64, 64
    qkv = torch.randn(B * N * 3 * h * d + offset, dtype=torch.float16)[offset:].view(B, N, 3 * h * d)
    q, k, v = (t.view(B, N, h, d).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
    lengths = torch.tensor([N, N // 2], dtype=torch.int32)
    blocks = (64, 64, 4, 3)
    dispatched.clear()
    recording.launches.clear()
    o, lse = v2.forward(q, k, v, lengths, 0.125, blocks)
    v2.backward(torch.empty_like(o), q, k, v, o, lse, lengths, 0.125, blocks, "atomic")   # 3 launches
    return {"dispatched": list(dispatched), "launches": [[described(a) for a in launch]
                                                         for launch in recording.launches]}

calls = [forward_backward(), forward_backward(), forward_backward(direct=False),
         forward_backward(offset=1)]
try:
    launching.launch(v2.scale_dq_v2, (1,), torch.empty(16), torch.empty(16), 1.0, 16)
    error = None
except TypeError as err:
    error = str(err)
json.dump({"calls": calls, "error": error}, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, run_compiled) -> dict:
    return run_compiled(WORKER, tmp_path_factory.mktemp("launches") / "launches.json")


def test_direct_launches_pass_the_launcher_what_tritons_would(recorded):
    first, direct, again, _ = recorded["calls"]
    kernels = ["attn_fwd_v2", "attn_bwd_v2", "scale_dq_v2"]
    assert first["dispatched"] == kernels == again["dispatched"]
    assert direct["dispatched"] == []                           # Triton's dispatch skipped, every launch
    assert len(direct["launches"]) == 3
    assert direct["launches"] == first["launches"] == again["launches"]
    grid, function = direct["launches"][0][:3], direct["launches"][0][4]
    assert grid == [1, 4, 1] and function.startswith("attn_fwd_v2#")      # 64 queries / 64, B x h = 4


def test_another_alignment_goes_through_tritons_dispatch(recorded):
    """2 bytes off alignment, q, k, v lose Triton's divisibility hint: it compiles other kernels (another
    loaded function), and the direct path must not launch the aligned ones with them. dQ's scaling takes
buffers made here, aligned as before, so it still launches directly."""
    first, _, _, misaligned = recorded["calls"]
    q_k_v = [arg[4] for arg in misaligned["launches"][0] if isinstance(arg, list)][:3]
    assert q_k_v == [2, 2, 2]                                   # their addresses modulo 16
    assert misaligned["dispatched"] == ["attn_fwd_v2", "attn_bwd_v2"]   # dQ's scaling: same arguments
    functions = [[launch[4] for launch in call["launches"]] for call in (first, misaligned)]
    assert functions[0][:2] != functions[1][:2] and functions[0][2] == functions[1][2]


def test_a_kernel_parameter_left_to_its_default_is_refused(recorded):
    assert recorded["error"] == ("launch(scale_dq_v2): give every parameter after the positional ones by "
                                 "keyword (a direct launch passes them on in order); missing ['BLOCK']")


def test_specialization_keeps_what_triton_specializes_on():
    """Each tensor's dtype and 16-byte alignment, each integer's value, other values' types."""
    x = torch.zeros(64, dtype=torch.float16)
    assert launching.specialization((x, 16, 0.5, None)) == ((torch.float16, True), 16, float, type(None))
    assert launching.specialization((x[1:],)) != launching.specialization((x,))         # 2 bytes off
    assert launching.specialization((x[8:],)) == launching.specialization((x,))         # 16 bytes off
    assert launching.specialization((x.float(),)) != launching.specialization((x,))
    assert launching.specialization((1,)) != launching.specialization((2,))
    assert launching.specialization((0.5,)) == launching.specialization((2.0,))


def run_host_time_benchmark(out: Path, interpret: bool) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    command = [sys.executable, "benchmarks/kernel_host_time.py", "--number=5", "--repeats=1", f"--out={out}"]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_host_time_benchmark_times_each_way_in_one_run(tmp_path):
    """Its rows, their launch counts and ratios against the anchor of the same run (the times themselves
    are the committed record's business, not a test's)."""
    result = run_host_time_benchmark(tmp_path, interpret=False)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / "benchmarks" / "kernel_host_time.json").read_text())
    assert [r["way"] for r in record["one_launch"]] == ["Triton's dispatch", "direct"]
    assert record["one_launch"][0]["ratio"] == 1.0
    rows = [(r["version"], r["dq"], r["way"], r["launches"]) for r in record["forward_backward"]]
    assert rows == [(1, None, "Triton's dispatch", 4), (2, "atomic", "Triton's dispatch", 3),
                    (2, "atomic", "direct", 3), (2, "two_phase", "direct", 2)]
    assert record["forward_backward"][1]["ratio_to_v2_dispatch"] == 1.0
    assert all(r["us"] > 0 for r in record["one_launch"] + record["forward_backward"])


def test_host_time_benchmark_refuses_the_interpreter(tmp_path):
    result = run_host_time_benchmark(tmp_path, interpret=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == ("kernel_host_time.py: unset TRITON_INTERPRET: it times "
                                                      "Triton's compiled launch path")
    assert not (tmp_path / "benchmarks").exists()
