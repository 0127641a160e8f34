"""Environment check for lesson 00: every dependency's version, the device, the scale."""

from __future__ import annotations

import importlib.metadata
import platform

import torch

REQUIRED = ("torch", "triton", "sentencepiece", "matplotlib", "ipywidgets", "jupyterlab", "nbval", "tqdm",
            "safetensors", "numpy")
OPTIONAL = ("transformers", "pytest", "hypothesis", "ruff")   # dev extras: parity tests and CI


def package_versions(names=REQUIRED + OPTIONAL) -> dict[str, str | None]:
    """Installed version of each distribution, or None when it is missing."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def device_summary() -> str:
    if torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
    return f"cpu: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads"


def check_environment(scale_name: str) -> bool:
    """Print [OK]/[FAIL] per dependency, the device and the scale; True when nothing required is missing."""
    ok = True
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}")
    for name, version in package_versions().items():
        required = name in REQUIRED
        status = "OK" if version else ("FAIL" if required else "missing (dev extra)")
        ok &= bool(version) or not required
        print(f"[{status}] {name} {version or ''}")
    print(f"device: {device_summary()}")
    print(f"scale: {scale_name}")
    return ok
