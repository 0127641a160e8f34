"""What the compiler makes of the fused-attention kernels for GPUs we do not have.

Triton compiles ahead of time for any NVIDIA target without a GPU: `triton.compile` turns a kernel, its
argument types and its compile-time constants into PTX and a cubin for, say, sm_90, and the `cuobjdump`
shipped in Triton's wheel reads the cubin's resource usage. This module does that for every kernel of
`flash_attention` and `flash_attention_v2` under every tile configuration it may be launched with, and reads:

- registers per thread, stack and local memory (local memory means register spills),
- shared memory (Triton's dynamic allocation plus the cubin's static part),
- tensor-core instructions: `mma.sync` (Ampere/Ada) and `wgmma` (Hopper) in the PTX, HMMA/HGMMA in the SASS,
- whether a block can launch on the target, and the theoretical occupancy its registers, shared memory
  and warps allow (blocks and warps resident per SM).

These are compiler facts, not timings. One record (a plain dict, JSON-ready) per compile:

    {"kernel": "fwd", "target": "sm_90", "dtype": "float16", "head_dim": 64, "block_m": 128, "block_n": 64,
     "num_warps": 4, "num_stages": 3, "autotuned": True, "function": "_attn_fwd", "config": "128x64 w4 s3",
     "registers": 244, "stack_bytes": 0, "local_bytes": 0, "spills": False,
     "shared_bytes": 66560, "ptx": {"mma.sync": 0, "wgmma": 32}, "tensor_core_shapes": ["wgmma m64n64k16"],
     "sass": {"HMMA": 0, "HGMMA": 32},
     "fits": True, "why_not": None, "occupancy": {"blocks_per_sm": ..., "warps_per_sm": ..., ...},
     "error": None}

Compiling needs Triton in compiled mode, so `compile_variants` runs the compiles in fresh worker processes
(`python -m minialbert.kernels.compile_report`) started without TRITON_INTERPRET (the test suite sets it,
and `@triton.jit` reads it when a kernel is defined): it works the same from pytest, a notebook or a script.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import triton

from . import flash_attention, flash_attention_v2, tiles


@dataclass(frozen=True)
class GPULimits:
    """Per-SM and per-block limits of one compute capability (bytes, registers, warps)."""

    target: str                   # "sm_90"
    capability: int               # 90 = compute capability 9.0
    gpus: str                     # the GPUs people rent with it
    shared_per_sm: int            # bytes of shared memory one SM has at most (the largest carveout)
    shared_per_block: int         # bytes one block may use (the opt-in maximum)
    max_warps_per_sm: int         # resident warps (threads / 32)
    max_blocks_per_sm: int        # resident blocks
    registers_per_sm: int = 64 * 1024           # 32-bit registers in an SM's register file
    registers_per_block: int = 64 * 1024        # at most this many for one block
    max_registers_per_thread: int = 255
    register_unit: int = 256                    # registers are given to a warp in units of 256
    shared_unit: int = 128                      # shared memory is given to a block in units of 128 bytes
    shared_reserved_per_block: int = 1024       # the CUDA runtime keeps 1 KiB per block for itself


KIB = 1024
# NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" table (compute
# capabilities 8.0, 8.9, 9.0), and the Ampere / Ada / Hopper tuning guides: shared memory per SM 164 / 100 /
# 228 KiB, per block 163 / 99 / 227 KiB (opt-in; the 1 KiB a block cannot have is reserved for the system),
# 64K 32-bit registers per SM and per block, at most 255 per thread; resident warps 64 / 48 / 64 and blocks
# 32 / 24 / 32 per SM. Allocation units (256 registers per warp, 128 bytes of shared memory) are those of
# NVIDIA's occupancy calculator for these capabilities.
TARGETS = {
    # Turing (T4), compute capability 7.5: 64 KiB of shared memory per SM and per block, 32 resident warps and
    # 16 blocks per SM, and no 1 KiB kept per block (that reservation starts with 8.0); no bfloat16 tensor
    # cores, so fused_attention refuses bfloat16 there (float16 only).
    "sm_75": GPULimits("sm_75", 75, "T4", shared_per_sm=64 * KIB, shared_per_block=64 * KIB,
                       max_warps_per_sm=32, max_blocks_per_sm=16, shared_reserved_per_block=0),
    "sm_80": GPULimits("sm_80", 80, "A100", shared_per_sm=164 * KIB, shared_per_block=163 * KIB,
                       max_warps_per_sm=64, max_blocks_per_sm=32),
    "sm_89": GPULimits("sm_89", 89, "L4 / L40S / RTX 40", shared_per_sm=100 * KIB, shared_per_block=99 * KIB,
                       max_warps_per_sm=48, max_blocks_per_sm=24),
    "sm_90": GPULimits("sm_90", 90, "H100 / H200", shared_per_sm=228 * KIB, shared_per_block=227 * KIB,
                       max_warps_per_sm=64, max_blocks_per_sm=32),
}
WARP_SIZE = 32

# The kernels under short names (the four of flash_attention, then those of flash_attention_v2: the "_tma"
# ones read their streamed tiles through TMA, which tuning may pick only on Hopper, in half precision:
# tuning.hopper_tma; "bwd_v2_two_phase" is the backward in dQ mode "two_phase", which also computes dQ and
# writes it in the input dtype), and the tile tables the big ones are tuned over (version 1 with
# triton.autotune, version 2 once per shape).
KERNELS = {"fwd": "_attn_fwd", "delta": "_attn_bwd_delta", "dkdv": "_attn_bwd_dkdv", "dq": "_attn_bwd_dq",
           "fwd_v2": "attn_fwd_v2", "fwd_v2_tma": "attn_fwd_v2", "bwd_v2": "attn_bwd_v2",
           "bwd_v2_tma": "attn_bwd_v2", "bwd_v2_two_phase": "attn_bwd_v2", "scale_dq_v2": "scale_dq_v2"}
VERSION_2 = ("fwd_v2", "fwd_v2_tma", "bwd_v2", "bwd_v2_tma", "bwd_v2_two_phase", "scale_dq_v2")
TMA_KERNELS = {"fwd_v2_tma": "sm_90", "bwd_v2_tma": "sm_90"}      # compiled with TMA=True, for one target
AUTOTUNE_TILES = {"fwd": tiles.FWD_TILES, "dkdv": tiles.DKDV_TILES,
                  "dq": tiles.DQ_TILES, "fwd_v2": tiles.FWD_TILES_V2,
                  "fwd_v2_tma": tiles.FWD_TILES_V2, "bwd_v2": tiles.BWD_TILES_V2,
                  "bwd_v2_tma": tiles.BWD_TILES_V2, "bwd_v2_two_phase": tiles.TWO_PHASE_TILES_V2}
DELTA_BLOCK_M = 64                # flash_attention.backward launches _attn_bwd_delta with BLOCK_M=64 and
DELTA_WARPS, DELTA_STAGES = 4, 3  # Triton's default warps and stages
DTYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}   # torch name -> Triton type name
TARGET_DTYPES = {"sm_75": ("float16",)}    # the T4 is compiled for in float16 only; other targets: DTYPES
TENSOR_CORE_PTX = {"mma.sync": r"\bmma\.sync\.", "wgmma": r"\bwgmma\.mma_async\."}  # one count per line
TENSOR_CORE_SHAPE = r"\b(mma\.sync|wgmma\.mma_async)\.\S*?\b(m\d+n\d+k\d+)\b"   # mma.sync.aligned.m16n8k16
TENSOR_CORE_SASS = {"HMMA": r"\bHMMA\.", "HGMMA": r"\bHGMMA\."}
TRITON_BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"   # ptxas, cuobjdump


@dataclass(frozen=True)
class Variant:
    """One compile: a kernel with its tiles, for one target, dtype and head dim."""

    kernel: str                   # a key of KERNELS
    target: str                   # a key of TARGETS
    dtype: str                    # a key of DTYPES
    head_dim: int
    block_m: int
    block_n: int | None           # None for the delta kernel, which has no key tile
    num_warps: int
    num_stages: int
    autotuned: bool               # one of the autotune configs (False: fixed tiles)

    @property
    def config(self) -> str:
        """The tile configuration in one short string: "128x64 w4 s3"."""
        tiles = f"{self.block_m}" if self.block_n is None else f"{self.block_m}x{self.block_n}"
        return f"{tiles} w{self.num_warps} s{self.num_stages}"


def launch_variants(kernel: str, dtype: str, head_dim: int, target: str) -> list[Variant]:
    """Every tile configuration `fused_attention` may launch `kernel` with, for this dtype on a GPU.

    float16/bfloat16: the configs autotuning tries at this head dim (the delta kernel has one fixed launch).
    float32: the FIXED_BLOCK tiles with FIXED_WARPS and FIXED_STAGES (float32 is never autotuned).
    Version 2 likewise: its tile table's candidates at this head dim, fixed tiles for float32, and one fixed
    launch of the dQ scaling kernel (SCALE_BLOCK elements, Triton's default warps and stages). A TMA kernel
    has none on other targets than its own, nor in float32.
    """
    common = dict(kernel=kernel, target=target, dtype=dtype, head_dim=head_dim)
    if kernel in TMA_KERNELS and (target != TMA_KERNELS[kernel] or dtype == "float32"):
        return []                                  # never launched there
    if kernel == "delta":
        return [Variant(**common, block_m=DELTA_BLOCK_M, block_n=None, num_warps=DELTA_WARPS,
                        num_stages=DELTA_STAGES, autotuned=False)]
    if kernel == "scale_dq_v2":
        return [Variant(**common, block_m=flash_attention_v2.SCALE_BLOCK, block_n=None, num_warps=DELTA_WARPS,
                        num_stages=DELTA_STAGES, autotuned=False)]
    if dtype == "float32":
        block = flash_attention.FIXED_BLOCK
        return [Variant(**common, block_m=block, block_n=block, num_warps=flash_attention.FIXED_WARPS,
                        num_stages=flash_attention.FIXED_STAGES, autotuned=False)]
    return [Variant(**common, block_m=m, block_n=n, num_warps=w, num_stages=s, autotuned=True)
            for m, n, w, s in tiles.candidate_tiles(AUTOTUNE_TILES[kernel], head_dim)]


def target_dtypes(target: str) -> tuple[str, ...]:
    """The dtypes compiled for `target`: all of DTYPES, float16 only on the T4 (sm_75)."""
    return TARGET_DTYPES.get(target, tuple(DTYPES))


def all_variants() -> list[Variant]:
    """The full cross product: kernels x launch configs x targets x dtypes x head dims (over 800)."""
    return [variant for kernel in KERNELS for target in TARGETS for dtype in target_dtypes(target)
            for head_dim in flash_attention.HEAD_DIMS
            for variant in launch_variants(kernel, dtype, head_dim, target)]


def launch_signature(function, dtype: str) -> tuple[dict, dict]:
    """Argument types as the JIT sees a real launch, and the 16-byte alignment it assumes of them.

    q, k, v, o and their gradients have the input dtype; the log-sum-exp and delta are float32, lengths
    int32; scales are Python floats (fp32) and sizes ints (i32). Pointers from torch are 16-byte aligned and
    N_CTX is taken to be a multiple of 16 (ALBERT's lengths), which the JIT turns into divisibility hints;
    so are version 2's strides (multiples of the head dim).
    """
    types = {name: f"*{DTYPES[dtype]}" for name in ("Q", "K", "V", "O", "DO", "DQ", "DK", "DV")}
    types.update(LSE="*fp32", Delta="*fp32", DQ_ACC="*fp32", Lengths="*i32", qk_scale="fp32", sm_scale="fp32",
                 N_CTX="i32", N_HEADS="i32", numel="i32")
    types.update({f"{prefix}stride_{axis}": "i32" for prefix in ("", "o_") for axis in "bhn"})
    signature = {name: types.get(name, "constexpr") for name in function.arg_names}
    aligned = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(function.arg_names)
               if signature[name].startswith("*") or name == "N_CTX" or "stride" in name}
    return signature, aligned


def compile_variant(variant: Variant):
    """triton.compile for the variant's target: a CompiledKernel with .asm["ptx"] and .asm["cubin"].

    Needs Triton in compiled mode (TRITON_INTERPRET unset when triton was imported).
    """
    if flash_attention.INTERPRET:
        raise RuntimeError("compiling needs Triton in compiled mode, but this process imported triton with "
                           "TRITON_INTERPRET=1; use compile_variants, which compiles in fresh processes")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    module = flash_attention_v2 if variant.kernel in VERSION_2 else flash_attention
    function = getattr(module, KERNELS[variant.kernel])
    signature, aligned = launch_signature(function, variant.dtype)
    constants = {"HEAD_DIM": variant.head_dim, "BLOCK_M": variant.block_m}
    if variant.kernel == "scale_dq_v2":
        constants = {"BLOCK": variant.block_m}
    if variant.block_n is not None:
        constants.update(BLOCK_N=variant.block_n, PRECISION="ieee" if variant.dtype == "float32" else "tf32")
    if variant.kernel in TMA_KERNELS:
        constants["TMA"] = True
    if variant.kernel == "bwd_v2_two_phase":
        constants["DQ_MODE"] = "two_phase"
        signature["DQ_ACC"] = signature["DQ_ACC"].replace("fp32", DTYPES[variant.dtype])  # dQ itself
    source = ASTSource(function, signature, constexprs=constants, attrs=aligned)
    target = GPUTarget("cuda", TARGETS[variant.target].capability, WARP_SIZE)
    with warnings.catch_warnings():    # Triton 3.9 warns that its FP-fusion default will change; launches
        warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")   # use the same default
        return triton.compile(source, target=target,
                              options={"num_warps": variant.num_warps, "num_stages": variant.num_stages})


def resource_usage(cubin: bytes) -> dict:
    """Registers, stack, local and static shared memory of the cubin's kernel (`cuobjdump -res-usage`).

    cuobjdump prints e.g. "REG:175 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:608 ..." per function.
    """
    text = _cuobjdump(cubin, "-res-usage")
    line = next(line for line in text.splitlines() if "REG:" in line)
    fields = dict(re.findall(r"(\w+):(\d+)", line))
    return {"registers": int(fields["REG"]), "stack_bytes": int(fields["STACK"]),
            "local_bytes": int(fields["LOCAL"]), "static_shared_bytes": int(fields["SHARED"])}


def count_instructions(text: str, patterns: dict[str, str]) -> dict[str, int]:
    """How many lines of `text` (PTX or SASS) match each pattern."""
    return {name: len(re.findall(pattern, text)) for name, pattern in patterns.items()}


def tensor_core_shapes(ptx: str) -> list[str]:
    """The distinct tensor-core instruction shapes in the PTX: ["mma.sync m16n8k16"], ["wgmma m64n64k16"].

    mMnNkK: one instruction multiplies an M x K tile by a K x N tile (per warp for mma.sync, per warpgroup
    of 4 warps for Hopper's wgmma).
    """
    found = {f"{op.removesuffix('.mma_async')} {shape}" for op, shape in re.findall(TENSOR_CORE_SHAPE, ptx)}
    return sorted(found)


def occupancy(registers: int, shared_bytes: int, num_warps: int, gpu: GPULimits) -> dict:
    """Theoretical occupancy: blocks resident per SM as registers, shared memory, warps and blocks allow.

    Returns {"blocks_per_sm", "warps_per_sm", "occupancy" (resident warps / the SM's maximum),
    "limited_by" (the tightest of "registers", "shared memory", "warps", "blocks")}; 0 blocks if one block
    does not fit.
    """
    registers_per_warp = _round_up(registers * WARP_SIZE, gpu.register_unit)
    shared_per_block = _round_up(shared_bytes + gpu.shared_reserved_per_block, gpu.shared_unit)
    limits = {
        "registers": gpu.registers_per_sm // registers_per_warp // num_warps,
        "shared memory": gpu.shared_per_sm // shared_per_block if shared_per_block else gpu.max_blocks_per_sm,
        "warps": gpu.max_warps_per_sm // num_warps,
        "blocks": gpu.max_blocks_per_sm,
    }
    limited_by = min(limits, key=limits.get)
    blocks = limits[limited_by]
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * num_warps,
            "occupancy": blocks * num_warps / gpu.max_warps_per_sm, "limited_by": limited_by}


def launch_problem(registers: int, shared_bytes: int, num_warps: int, gpu: GPULimits) -> str | None:
    """Why one block cannot launch on `gpu` (None if it can): too many registers or too much shared memory."""
    if registers > gpu.max_registers_per_thread:
        return f"{registers} registers per thread > {gpu.max_registers_per_thread}"
    registers_per_warp = _round_up(registers * WARP_SIZE, gpu.register_unit)
    if registers_per_warp * num_warps > gpu.registers_per_block:
        return f"{registers_per_warp * num_warps} registers per block > {gpu.registers_per_block}"
    if shared_bytes > gpu.shared_per_block:
        return f"{shared_bytes / KIB:.0f} KiB shared memory > {gpu.shared_per_block // KIB} KiB per block"
    return None


def inspect_variant(variant: Variant, sass: bool = True) -> dict:
    """Compile one variant and read what the compiler made of it: the record described in the module doc.

    sass=False skips disassembling the cubin (a third of the time; "sass" is then None). A compile error is
    recorded in "error" (with the other facts None) instead of stopping a whole report.
    """
    record = {**asdict(variant), "function": KERNELS[variant.kernel], "config": variant.config}
    try:
        compiled = compile_variant(variant)
    except Exception as err:                        # noqa: BLE001 - any compiler failure is a finding
        return {**record, "error": f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:300]}",
                "registers": None, "spills": None, "fits": False, "occupancy": None}
    gpu = TARGETS[variant.target]
    cubin = compiled.asm["cubin"]
    usage = resource_usage(cubin)
    shared = compiled.metadata.shared + usage.pop("static_shared_bytes")   # dynamic (Triton's) + static
    why_not = launch_problem(usage["registers"], shared, variant.num_warps, gpu)
    return {**record, **usage, "spills": usage["local_bytes"] > 0 or usage["stack_bytes"] > 0,
            "shared_bytes": shared,
            "ptx": count_instructions(compiled.asm["ptx"], TENSOR_CORE_PTX),
            "tensor_core_shapes": tensor_core_shapes(compiled.asm["ptx"]),
            "sass": count_instructions(_cuobjdump(cubin, "-sass"), TENSOR_CORE_SASS) if sass else None,
            "fits": why_not is None, "why_not": why_not,
            "occupancy": None if why_not else occupancy(usage["registers"], shared, variant.num_warps, gpu),
            "error": None}


def compile_variants(variants: list[Variant], workers: int | None = None, sass: bool = True) -> list[dict]:
    """inspect_variant for each variant, in the order given, spread over `workers` fresh processes.

    Each worker is `python -m minialbert.kernels.compile_report JOB OUT`, started without TRITON_INTERPRET
    (so this works from a process that runs the interpreter): it reads {"sass": ..., "variants": [...]} from
    the JSON file JOB and writes its records to the JSON file OUT. Default: one worker per CPU core.
    """
    workers = max(1, min(workers or os.cpu_count() or 1, len(variants)))
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    shares = [list(range(i, len(variants), workers)) for i in range(workers)]   # round robin: even loads
    records: list[dict] = [{}] * len(variants)
    with tempfile.TemporaryDirectory() as tmp:
        processes = []
        for n, share in enumerate(shares):
            job, out = Path(tmp) / f"job{n}.json", Path(tmp) / f"out{n}.json"
            job.write_text(json.dumps({"sass": sass, "variants": [asdict(variants[i]) for i in share]}))
            processes.append(subprocess.Popen([sys.executable, "-m", __name__, str(job), str(out)], env=env))
        for n, (process, share) in enumerate(zip(processes, shares)):
            if process.wait() != 0:
                raise RuntimeError(f"compile worker {n} failed with exit code {process.returncode} (its "
                                   "traceback is printed above)")
            for i, record in zip(share, json.loads((Path(tmp) / f"out{n}.json").read_text())):
                records[i] = record
    return records


def _round_up(value: int, unit: int) -> int:
    return math.ceil(value / unit) * unit


def _cuobjdump(cubin: bytes, flag: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        command = [str(TRITON_BIN / "cuobjdump"), flag, str(path)]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout


if __name__ == "__main__":         # a compile worker for compile_variants: JOB file in, OUT file of records
    job = json.loads(Path(sys.argv[1]).read_text())
    found = [inspect_variant(Variant(**fields), job["sass"]) for fields in job["variants"]]
    Path(sys.argv[2]).write_text(json.dumps(found))
