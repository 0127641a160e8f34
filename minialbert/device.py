"""Where a model runs and in which precision, chosen in one place.

The device: CUDA, then Apple's MPS, then the CPU, unless `--device` names one. The precision follows
from the device: bfloat16 autocast on GPUs that have it (compute capability 8.0 and later: A100,
RTX 30xx, H100), float16 autocast with a gradient scaler on older GPUs (sm_70 V100, sm_75 T4: float16
gradients underflow without scaling), float32 on the CPU and on MPS. The CLI and the zoo resolve both
once and pass them down.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch

DEVICE_TYPES = ("cuda", "mps", "cpu")
BF16_CAPABILITY = (8, 0)      # Ampere and later compute in bfloat16 at full speed
FP16_CAPABILITY = (7, 0)      # Volta and Turing: float16 tensor cores, no bfloat16
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT")


def mps_available() -> bool:
    return hasattr(torch.backends, "mps") and torch.backends.mps.is_available()


def choose_device(requested: str | None = None) -> torch.device:
    """`requested` ('cuda', 'cuda:1', 'mps', 'cpu') if this machine has it; else CUDA, MPS, CPU in turn."""
    if requested is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if mps_available() else "cpu")
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {requested!r}; choose one of {', '.join(DEVICE_TYPES)}") from None
    if device.type not in DEVICE_TYPES:
        raise ValueError(f"unknown device {requested!r}; choose one of {', '.join(DEVICE_TYPES)}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {requested!r} asked for, but this machine has no CUDA GPU visible to "
                         f"torch {torch.__version__}; leave --device out to use what it has")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {requested!r} asked for, but this machine has "
                         f"{torch.cuda.device_count()} CUDA GPU(s)")
    if device.type == "mps" and not mps_available():
        raise ValueError("device 'mps' asked for, but Apple's MPS is not available here; "
                         "leave --device out to use what this machine has")
    return device


def check_torchrun_variables() -> None:
    """The variables torchrun sets for each process, checked before torch.distributed reads them: each an
    integer (torch would say only "invalid literal for int()"), RANK in 0..WORLD_SIZE-1 and LOCAL_RANK in
    0..LOCAL_WORLD_SIZE-1 (a rank beyond the world waits forever for processes that never come),
    MASTER_PORT a port. One line naming the variable; the launcher's settings, read here only."""
    values = {}
    for name in TORCHRUN_VARIABLES:
        text = os.environ.get(name)
        if text is None:
            continue
        try:
            values[name] = int(text)
        except ValueError:
            raise ValueError(f"{name}={text!r} is not an integer; torchrun sets it for each process (launch "
                             "with `torchrun --nproc-per-node N -m minialbert pretrain ...`)") from None
    for rank, size in (("RANK", "WORLD_SIZE"), ("LOCAL_RANK", "LOCAL_WORLD_SIZE")):
        processes = values.get(size)
        if processes is not None and processes < 1:
            raise ValueError(f"{size}={processes} is not a number of processes (1 or more)")
        if values.get(rank, 0) < 0:
            raise ValueError(f"{rank}={values[rank]} is not a rank (0 or more)")
        if processes is not None and values.get(rank, 0) >= processes:
            raise ValueError(f"{rank}={values[rank]} is not a rank of {size}={processes} processes (0 to "
                             f"{processes - 1})")
    if not 0 < values.get("MASTER_PORT", 1) < 2**16:
        raise ValueError(f"MASTER_PORT={values['MASTER_PORT']} is not a port (1 to 65535)")


@dataclass(frozen=True)
class Precision:
    """How a device computes: `autocast()` around forward passes, a gradient scaler for float16."""
    device_type: str
    dtype: torch.dtype | None          # the autocast dtype; None = plain float32

    @property
    def name(self) -> str:
        return {torch.bfloat16: "bf16", torch.float16: "fp16", None: "fp32"}[self.dtype]

    @property
    def needs_grad_scaler(self) -> bool:
        return self.dtype == torch.float16

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def grad_scaler(self) -> torch.amp.GradScaler:
        """A scaler for float16 training (kept across steps); a pass-through for the other precisions."""
        return torch.amp.GradScaler(self.device_type, enabled=self.needs_grad_scaler)


def choose_precision(device: torch.device | str) -> Precision:
    """bf16 autocast on sm_80+, fp16 autocast (with a gradient scaler) on sm_70/sm_75, float32 elsewhere."""
    device = torch.device(device)
    if device.type != "cuda":
        return Precision(device.type, None)           # CPU, and MPS until measured safe in half precision
    capability = torch.cuda.get_device_capability(device)
    if capability >= BF16_CAPABILITY:
        return Precision("cuda", torch.bfloat16)
    if capability >= FP16_CAPABILITY:
        return Precision("cuda", torch.float16)
    return Precision("cuda", None)                    # pre-Volta: no tensor cores to gain from


def describe(device: torch.device, precision: Precision) -> str:
    """One line for logs: 'cuda (NVIDIA H100 80GB HBM3, sm_90), bf16 autocast'."""
    where = str(device)
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        where += f" ({torch.cuda.get_device_name(device)}, sm_{major}{minor})"
    how = "float32" if precision.dtype is None else f"{precision.name} autocast"
    return f"{where}, {how}" + (" with a gradient scaler" if precision.needs_grad_scaler else "")
