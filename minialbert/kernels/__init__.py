"""Triton kernels, imported only on demand (attention_backend="triton"): minialbert works without triton."""

try:
    import triton  # noqa: F401
except ImportError as err:  # pragma: no cover - depends on the machine
    raise ImportError("minialbert.kernels needs triton (`pip install triton`, Linux); "
                      "without it use attention_backend='sdpa'") from err

from .attention import (
    DEFAULT_VERSION,
    INTERPRET,
    VERSIONS,
    fused_attention,
    reference_attention,
    tiled_attention,
)

__all__ = ["DEFAULT_VERSION", "INTERPRET", "VERSIONS", "fused_attention", "reference_attention",
           "tiled_attention"]
