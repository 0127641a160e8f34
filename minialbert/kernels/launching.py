"""launch(kernel, grid, *args, **kwargs): kernel[grid](*args, **kwargs), with Triton's dispatch done once.

On every `kernel[grid](...)` call Triton binds the arguments, works out how it specializes them (each
tensor's dtype and 16-byte alignment, each integer's value class: 1, a multiple of 16, 32 or 64 bits),
hashes that with the options into a cache key, finds the compiled kernel, and only then launches it.
launch() lets Triton do that the first time an argument specialization is seen, keeps the compiled kernel
Triton returns, and afterwards calls it directly (CompiledKernel's own `[grid](*params)`, which takes the
current stream and runs the launch hooks as Triton would). Measured without a GPU
(benchmarks/kernel_host_time.py: the kernels compile for sm_90 and launch into a recorder), a direct launch
takes about two thirds of the host time of Triton's, and version 2 launches three kernels per layer's
forward+backward.

What decides which compiled kernel fits is summed up per call as: the current device (Triton keeps compiled
kernels per device); each tensor's dtype and 16-byte alignment; each integer's value; for the rest (floats,
None) only the type; and the keyword options. Equal summaries mean Triton would pick the same compiled
kernel, so a direct launch passes the launcher exactly the arguments Triton's would
(tests/test_kernel_launch.py records both).

In Triton's interpreter there is nothing compiled to keep: launch() is kernel[grid](...) there, and so it is
everywhere while DIRECT is False (benchmarks set it to time Triton's own dispatch).
"""

from __future__ import annotations

import torch
from triton import knobs
from triton.runtime import driver

INTERPRET = knobs.runtime.interpret     # read once, as the kernels were defined in this mode
DIRECT = True                           # False: every launch through Triton's dispatch
_COMPILED: dict[tuple, tuple] = {}      # (kernel id, device, specialization, *options) -> (compiled, params)


def launch(kernel, grid: tuple, *args, **kwargs) -> None:
    """Launch `kernel` on `grid` (one to three program counts), as kernel[grid](*args, **kwargs) would."""
    if INTERPRET or not DIRECT:
        kernel[grid](*args, **kwargs)
        return
    key = (id(kernel), driver.active.get_current_device(), specialization(args), *kwargs.items())
    known = _COMPILED.get(key)
    if known is None:
        keyword_params = kernel.arg_names[len(args):]
        if missing := [name for name in keyword_params if name not in kwargs]:
            raise TypeError(f"launch({kernel.fn.__name__}): give every parameter after the positional ones "
                            f"by keyword (a direct launch passes them on in order); missing {missing}")
        _COMPILED[key] = (kernel[grid](*args, **kwargs), keyword_params)    # Triton's way, compiling if new
        return
    compiled, keyword_params = known
    compiled[(*grid, 1, 1)[:3]](*args, *map(kwargs.__getitem__, keyword_params))


def specialization(args: tuple) -> tuple:
    """What of `args` a compiled kernel depends on: each tensor's dtype and 16-byte alignment, each integer's
    value, the type of anything else."""
    return tuple([(arg.dtype, arg.data_ptr() & 15 == 0) if isinstance(arg, torch.Tensor)
                  else arg if isinstance(arg, int) else type(arg) for arg in args])
