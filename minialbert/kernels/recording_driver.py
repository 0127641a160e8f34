"""RecordingDriver: Triton's compiled path without a GPU: kernels compile for one, launches are recorded.

Triton's interpreter runs kernels on the CPU, but it skips everything a compiled launch does on the host:
binding the arguments, specializing them, looking up the compiled kernel, calling the launcher. With this
driver active (install(), in a process that imported triton without TRITON_INTERPRET), `kernel[grid](...)`
does all of that for real: it compiles for the driver's target (Triton ships ptxas, no GPU needed) and
calls a launcher that appends its arguments to `launches` instead of starting the GPU. Nothing runs, so
outputs stay unwritten and every candidate an autotuner times takes equally long. What it measures is host
time (benchmarks/kernel_host_time.py) and what was launched with which arguments
(tests/test_kernel_launch.py). The tensors are CPU tensors.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import torch
from triton.backends.compiler import GPUTarget
from triton.runtime import driver

HOPPER = GPUTarget("cuda", 90, 32)
HOPPER_SHARED_MEMORY = 232448           # bytes a block may use on an H100/H200 (227 KiB)


class RecordingDriver:
    """A Triton driver for `target` whose launcher records (grid x, y, z, stream, function, metadata,
    launch metadata, enter hook, exit hook, *kernel arguments) in `launches`."""

    def __init__(self, target: GPUTarget = HOPPER, shared_memory: int = HOPPER_SHARED_MEMORY):
        self.target = target
        self.launches: list[tuple] = []
        loaded = itertools.count()
        self.utils = SimpleNamespace(      # load_binary: (module, function, registers, spills, max threads)
            load_binary=lambda name, binary, shared, device: ("module", f"{name}#{next(loaded)}", 0, 0, 1024),
            get_device_properties=lambda device: {"max_shared_mem": shared_memory},
            unload_module=lambda module: None)

    def launcher_cls(self, source, metadata):
        return lambda *arguments: self.launches.append(arguments)

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int) -> int:
        return 0

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def get_benchmarker(self):
        """Triton's autotuners time candidates with this: nothing runs, so every time is equal (1.0) and
        they keep their first candidate."""
        def equal_times(kernel_call, quantiles=None, **_):
            kernel_call()
            return [1.0] * len(quantiles) if quantiles else 1.0
        return equal_times


def install(target: GPUTarget = HOPPER) -> RecordingDriver:
    """Make a RecordingDriver Triton's active driver for the rest of this process, and return it."""
    from triton import knobs
    if knobs.runtime.interpret:
        raise RuntimeError("the recording driver needs Triton's compiled path: start Python without "
                           "TRITON_INTERPRET (kernels defined under it never reach a driver)")
    recording = RecordingDriver(target)
    driver.set_active(recording)
    return recording
