"""minialbert: ALBERT (A Lite BERT, Lan et al. 2019) from scratch in PyTorch."""

from . import hf
from .config import PRESETS, AlbertConfig
from .costs import count_parameters, forward_flops, parameter_breakdown
from .model import AlbertForPretraining, AlbertForSequenceClassification, AlbertModel, use_kernel_version

__all__ = ["PRESETS", "AlbertConfig", "AlbertModel", "AlbertForPretraining",
           "AlbertForSequenceClassification", "count_parameters",
           "forward_flops", "parameter_breakdown", "use_kernel_version", "hf"]
__version__ = "0.1.0"


def __getattr__(name: str):
    """`ma.kernels` imports the Triton kernels on first use, so `import minialbert` never needs triton."""
    if name == "kernels":
        import importlib

        return importlib.import_module(f"{__name__}.kernels")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
