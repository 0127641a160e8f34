"""Device and precision chosen in one place (minialbert.device), with the machine's GPUs mocked."""

import pytest
import torch

from minialbert import device as dev


def machine(monkeypatch, cuda: tuple[int, int] | None = None, mps: bool = False, gpus: int = 1) -> None:
    """Pretend this machine has a CUDA GPU of compute capability `cuda`, or Apple's MPS, or neither."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda is not None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus if cuda else 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: cuda)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: f"Mock sm_{cuda[0]}{cuda[1]}")
    monkeypatch.setattr(dev, "mps_available", lambda: mps)


@pytest.mark.parametrize("cuda, mps, device, dtype, scaler", [
    (None, False, "cpu", None, False),                      # a laptop without a GPU
    (None, True, "mps", None, False),                       # Apple silicon: float32 until measured safe
    ((7, 5), False, "cuda", torch.float16, True),           # T4 (free notebooks): fp16 needs a scaler
    ((7, 0), False, "cuda", torch.float16, True),           # V100
    ((8, 0), False, "cuda", torch.bfloat16, False),         # A100
    ((9, 0), False, "cuda", torch.bfloat16, False),         # H100
    ((6, 1), False, "cuda", None, False),                   # Pascal: no tensor cores, float32
])
def test_the_default_device_and_its_precision(monkeypatch, cuda, mps, device, dtype, scaler):
    machine(monkeypatch, cuda, mps)
    chosen = dev.choose_device()
    precision = dev.choose_precision(chosen)
    assert chosen.type == device and precision.dtype == dtype and precision.device_type == device
    assert precision.needs_grad_scaler == scaler
    assert precision.grad_scaler().is_enabled() == scaler
    assert {torch.float16: "fp16", torch.bfloat16: "bf16", None: "fp32"}[dtype] == precision.name
    if cuda:
        assert f"sm_{cuda[0]}{cuda[1]}" in dev.describe(chosen, precision)


def test_cuda_comes_before_mps(monkeypatch):
    machine(monkeypatch, (8, 6), mps=True)
    assert dev.choose_device().type == "cuda"


def test_device_overrides_the_default(monkeypatch):
    machine(monkeypatch, (9, 0), mps=True, gpus=2)
    assert dev.choose_device("cpu") == torch.device("cpu")
    assert dev.choose_device("mps") == torch.device("mps")
    assert dev.choose_device("cuda:1") == torch.device("cuda", 1)
    assert dev.choose_precision("cpu").dtype is None


def test_a_device_the_machine_lacks_is_a_one_line_error(monkeypatch):
    machine(monkeypatch, None, mps=False)
    with pytest.raises(ValueError, match="no CUDA GPU"):
        dev.choose_device("cuda")
    with pytest.raises(ValueError, match="MPS is not available"):
        dev.choose_device("mps")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        dev.choose_device("tpu")
    machine(monkeypatch, (8, 0), gpus=1)
    with pytest.raises(ValueError, match="has 1 CUDA GPU"):
        dev.choose_device("cuda:3")


def test_float32_autocast_is_no_autocast():
    with dev.choose_precision("cpu").autocast():
        y = torch.ones(2, 2) @ torch.ones(2, 2)
    assert y.dtype == torch.float32


def test_the_cli_passes_device_and_compile_down(monkeypatch):
    from minialbert.course.cli import build_parser

    args = build_parser().parse_args(["pretrain", "--out", "run", "--device", "cpu", "--compile"])
    assert args.device == "cpu" and args.compile == "model"
    args = build_parser().parse_args(["zoo", "--compile", "graphs"])
    assert args.device is None and args.compile == "graphs"
    assert build_parser().parse_args(["pretrain", "--out", "run"]).compile is False
