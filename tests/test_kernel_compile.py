"""The fused-attention kernels compiled for T4 (sm_75), A100 (sm_80), L4/RTX 40 (sm_89) and H100/H200 (sm_90).

Triton compiles ahead of time for any target; minialbert.kernels.compile_report reads what came out
(registers, spills, shared memory, tensor-core instructions, occupancy), and the committed
assets/benchmarks/kernel_report.json holds the full cross product (every kernel, autotune config, target,
dtype and head dim: over 800 compiles, `python benchmarks/kernel_report.py`, too slow for CI).

Here, within a CI budget of a few minutes, we compile live:
- every kernel (forward, delta, dK/dV, dQ) for every target in every dtype at the widest head dim (the most
  registers and shared memory), with the float16/bfloat16 config the report finds riskiest there;
- every autotune config where the report finds it closest to spilling (most bytes spilled, then most
  registers, then most shared memory, over the targets, dtypes and head dims where autotuning may pick it):
  spills come from register pressure, so that is where a change in Triton or in the kernel shows first.
The rules: everything compiles; an autotune config never spills where it can launch (a config that cannot
launch on a GPU, for lack of shared memory, is skipped there by the autotuner); the fixed launches (float32,
the delta kernel) can launch on every target, since nothing would skip them (float32 is the exact, slow path:
its few spills, mostly at d=128, are reported, not failed); half-precision tiles use tensor cores. Then the
committed report: it covers today's configs with today's Triton and follows the same rules.
Both versions are covered (version 2: flash_attention_v2's forward, backward and dQ-scaling kernels). The T4
(sm_75) is compiled for in float16 only (bfloat16 is refused there): Triton 3.9 multiplies tiles there with
FMA instructions, not tensor cores, and every tile spills, so for sm_75 the rules are only that everything
compiles and that every shape it accepts has a config that can launch (at d=128 some kernels have none in a
T4's 64 KiB of shared memory, so fused_attention refuses d=128 below sm_80); its facts are in the report.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
import triton

from minialbert.kernels import attention, compile_report, flash_attention
from minialbert.kernels.compile_report import TARGETS, Variant
from minialbert.kernels.tiles import BWD_TILES_V2, FWD_TILES_V2

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(REPO, "assets", "benchmarks", "kernel_report.json")
WIDEST = max(flash_attention.HEAD_DIMS)
DOT_KERNELS = ("fwd", "dkdv", "dq", "fwd_v2", "fwd_v2_tma", "bwd_v2", "bwd_v2_tma")   # they multiply tiles
NO_TENSOR_CORES = ("sm_75",)                    # Triton 3.9 emits FMA for the T4 (see the module doc)
VERSION_2_FITTED = ("sm_80", "sm_90")           # version 2's tile tables keep to no spills on these targets


def spill_rule_applies(record: dict) -> bool:
    """Where a tuned config must not spill: every target but the T4 for version 1, A100 and H100 for
    version 2 (its sm_89 spills, a few bytes at d=64 and d=128, are reported in the JSON, not failed)."""
    if record["target"] in NO_TENSOR_CORES:
        return False
    return record["kernel"] not in compile_report.VERSION_2 or record["target"] in VERSION_2_FITTED
HALF = ("float16", "bfloat16")
# The tensor-core instruction each target's PTX must use for half-precision tiles (Triton's choice).
TENSOR_CORE = {"sm_80": "mma.sync", "sm_89": "mma.sync", "sm_90": "wgmma"}
COMPILE_WORKERS = 2                             # the CI machine's cores


def load_report() -> dict:
    with open(REPORT) as f:
        return json.load(f)


def variant_of(record: dict) -> Variant:
    return Variant(**{name: record[name] for name in Variant.__dataclass_fields__})


def risk(record: dict) -> tuple:
    """How close a compile is to spilling: bytes already spilled, then registers, then shared memory."""
    return (record["stack_bytes"] + record["local_bytes"], record["registers"], record["shared_bytes"])


def riskiest(records: list[dict]) -> Variant:
    launchable = [r for r in records if r["error"] is None and r["fits"]]
    compiled = [r for r in records if r["error"] is None]       # a T4 at d=128: nothing launches (refused)
    return variant_of(max(launchable or compiled, key=risk))


def live_variants() -> list[Variant]:
    """What the tests compile: every kernel x target x dtype, and every autotune config at its riskiest."""
    by_variant = {variant_of(r): r for r in load_report()["records"]}
    chosen = []
    for kernel in compile_report.KERNELS:
        for target in TARGETS:
            for dtype in compile_report.target_dtypes(target):
                launches = compile_report.launch_variants(kernel, dtype, WIDEST, target)
                known = [by_variant[v] for v in launches if v in by_variant]
                if launches:                    # a Hopper-only kernel has none elsewhere
                    chosen.append(riskiest(known) if known else launches[0])
    for kernel, table in compile_report.AUTOTUNE_TILES.items():
        for tiles, largest_head_dim in table.items():
            seen = [r for v, r in by_variant.items() if v.kernel == kernel and v.autotuned
                    and (v.block_m, v.block_n, v.num_warps, v.num_stages) == tiles]
            if seen:
                chosen.append(riskiest(seen))
            else:                               # not in the report yet (its own test fails): a first guess
                chosen.append(Variant(kernel, "sm_80", "float16", largest_head_dim, *tiles, autotuned=True))
    return list(dict.fromkeys(chosen))          # each compile once


@pytest.fixture(scope="session")
def compiled() -> dict[Variant, dict]:
    """The live compiles, done once for the session in COMPILE_WORKERS processes (no SASS: PTX suffices)."""
    variants = live_variants()
    return dict(zip(variants, compile_report.compile_variants(variants, workers=COMPILE_WORKERS, sass=False)))


def describe(v: Variant) -> str:
    return f"{v.kernel} {v.config} {v.target} {v.dtype} d={v.head_dim}"


def test_every_kernel_compiles_for_every_target_and_dtype(compiled):
    for variant, record in compiled.items():
        assert record["error"] is None, f"{describe(variant)}: {record['error']}"
    covered = {(v.kernel, v.target, v.dtype) for v in compiled}
    tma_kernels = compile_report.TMA_KERNELS
    assert covered == {(k, t, d) for k in compile_report.KERNELS for t in TARGETS
                       for d in compile_report.target_dtypes(t)
                       if k not in tma_kernels or (t == tma_kernels[k] and d in HALF)}
    assert {"fwd_v2", "bwd_v2", "scale_dq_v2"} <= {k for k, _, _ in covered}
    for kernel in tma_kernels:
        assert {(t, d) for k, t, d in covered if k == kernel} == {("sm_90", d) for d in HALF}
    assert {d for k, t, d in covered if t == "sm_75"} == {"float16"}


def test_compiled_kernels_fit_and_do_not_spill(compiled):
    for variant, record in compiled.items():
        gpu = TARGETS[variant.target]
        assert record["registers"] <= gpu.max_registers_per_thread, describe(variant)
        if not variant.autotuned:               # float32 and delta launch directly: nothing skips them
            assert record["fits"], f"{describe(variant)} cannot launch: {record['why_not']}"
        elif record["fits"] and spill_rule_applies(record):   # tuning skips what cannot launch
            spilled = record["stack_bytes"] + record["local_bytes"]
            assert not record["spills"], f"{describe(variant)} spills {spilled} bytes: lower its head dim"
        if record["fits"]:
            assert record["occupancy"]["blocks_per_sm"] >= 1, describe(variant)


def test_compiled_half_precision_tiles_use_tensor_cores(compiled):
    for variant, record in compiled.items():
        if variant.kernel not in DOT_KERNELS or variant.target in NO_TENSOR_CORES:
            continue
        if variant.dtype in HALF:                # sm_90 falls back to mma.sync where a tile is too small for
            used = record["ptx"][TENSOR_CORE[variant.target]]     # a warpgroup's wgmma (32x32, say)
            if variant.target == "sm_90":
                used += record["ptx"]["mma.sync"]
            assert used > 0, f"{describe(variant)}: {record['ptx']}"
        else:                                   # float32 asks for "ieee": exact fp32 FMAs, no TF32 mma
            assert sum(record["ptx"].values()) == 0, f"{describe(variant)}: {record['ptx']}"


def test_compile_report_covers_todays_configs_and_triton():
    report = load_report()
    in_report = [variant_of(r) for r in report["records"]]
    expected = compile_report.all_variants()
    assert len(in_report) == len(expected) and set(in_report) == set(expected), \
        "assets/benchmarks/kernel_report.json is stale: run `python benchmarks/kernel_report.py`"
    assert report["environment"]["triton"] == triton.__version__, "re-run benchmarks/kernel_report.py"


def test_compile_report_has_no_spills_where_autotuning_may_pick():
    records = load_report()["records"]
    assert all(r["error"] is None for r in records), [describe(variant_of(r)) for r in records if r["error"]]
    spilling = [describe(variant_of(r)) for r in records if r["autotuned"] and r["fits"] and r["spills"]
                and spill_rule_applies(r)]
    assert not spilling, f"configs that spill where they can launch: {spilling}"
    fixed = [describe(variant_of(r)) for r in records if not r["autotuned"] and not r["fits"]]
    assert not fixed, f"fixed launches that cannot launch: {fixed}"
    groups: dict[tuple, list[bool]] = {}
    for r in records:
        if r["target"] in NO_TENSOR_CORES and r["head_dim"] > attention.MAX_HEAD_DIM_BELOW_SM80:
            continue                            # fused_attention refuses these (test_kernels.py checks)
        groups.setdefault((r["kernel"], r["target"], r["dtype"], r["head_dim"]), []).append(r["fits"])
    assert all(any(fits) for fits in groups.values()), "some shape has no config that can launch"


def test_compile_occupancy_arithmetic():
    h100 = TARGETS["sm_90"]
    # 128 registers x 32 threads = 4,096 per warp: 16 warps fit the 65,536 registers, so 4 blocks of 4 warps.
    assert compile_report.occupancy(128, 0, 4, h100)["blocks_per_sm"] == 4
    # 255 registers round up to 8,192 per warp (units of 256): 8 warps, 2 blocks of 4.
    assert compile_report.occupancy(255, 0, 4, h100)["blocks_per_sm"] == 2
    # 100 KiB of shared memory (+ 1 KiB reserved) per block: 2 blocks in 228 KiB, 1 in an sm_89's 100 KiB.
    assert compile_report.occupancy(32, 100 * 1024, 4, h100) == {
        "blocks_per_sm": 2, "warps_per_sm": 8, "occupancy": 8 / 64, "limited_by": "shared memory"}
    assert compile_report.launch_problem(32, 100 * 1024, 4, TARGETS["sm_89"]) == \
        "100 KiB shared memory > 99 KiB per block"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on machines without a GPU")
def test_gpu_check_refuses_in_one_line_without_cuda():
    """`make gpu-check` starts with this check: without CUDA it stops with one line saying why."""
    script = os.path.join(REPO, "benchmarks", "attention.py")
    result = subprocess.run([sys.executable, script, "--check-gpu"], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU found" in lines[0] and "make gpu-check" in lines[0], result.stderr


# Version 2 on sm_90 (H100/H200) in what compile_report does not compile:
# - its dQ modes (flash_attention_v2.DQ_MODES), where an H200 lost dQ's atomic adds: every backward tile the
#   table may tune over, at its widest head dim in float16, the tiles of the GPU test that failed, and the
#   fixed float32 tiles, in each mode, plus the partials' summing kernel. Each record counts the PTX's atomic
#   reductions by form: "vector" (red/atom ... .v2/.v4 .f32) and "scalar" (... add.f32);
# - both passes reading their streamed tiles through TMA (Hopper's tensor memory accelerator): every tile of
#   their tables at its widest head dim and at d = 64 (or its widest, if below), in float16 and bfloat16,
#   the backward in the default dQ mode. "tma" counts the PTX's bulk tensor copies.
VERSION_2_WORKER = """
import collections, json, re, sys, warnings
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from minialbert.kernels import compile_report as cr, flash_attention_v2 as v2
from minialbert.kernels.tiles import BWD_TILES_V2, FWD_TILES_V2
warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
ATOMIC = r"^\\s*(?:@!?%p\\d+\\s+)?((?:red|atom)\\.\\S+)"           # the reduction's full opcode

def compile_(function, dtype, constants, tiles, runtime_ints=()):
    signature, aligned = cr.launch_signature(function, dtype)
    signature.update({name: "i32" for name in runtime_ints})      # as the JIT launches do_not_specialize
    if constants.get("DQ_MODE") == "two_phase":                    # DQ_ACC is dQ itself, in the input dtype
        signature["DQ_ACC"] = "*" + cr.DTYPES[dtype]
    if "numel" in function.arg_names:                             # B*N*h*d, a multiple of 16 at d >= 16
        aligned[(function.arg_names.index("numel"),)] = [["tt.divisibility", 16]]
    source = ASTSource(function, signature, constexprs=constants, attrs=aligned)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, cr.WARP_SIZE),
                              options=dict(num_warps=tiles[2], num_stages=tiles[3]))
    ptx = compiled.asm["ptx"]
    ops = collections.Counter(re.findall(ATOMIC, ptx, re.M))
    usage = cr.resource_usage(compiled.asm["cubin"])
    return {"dtype": dtype, "config": "%dx%d w%d s%d" % tiles, "head_dim": constants.get("HEAD_DIM"),
            "atomics": dict(ops), "tma": len(re.findall(r"\\bcp\\.async\\.bulk\\.tensor\\.", ptx)),
            "vector": sum(n for op, n in ops.items() if re.search(r"\\.v\\d\\.f32$", op)),
            "scalar": sum(n for op, n in ops.items() if re.search(r"add\\.f32$", op)),
            "tensor_cores": sum(cr.count_instructions(ptx, cr.TENSOR_CORE_PTX).values()),
            "spilled": usage["stack_bytes"] + usage["local_bytes"], "registers": usage["registers"]}

launches = [("float16", d, tiles) for tiles, d in BWD_TILES_V2.items()]
launches.append(("float16", 64, (64, 64, 8, 2)))                # the H200's failing test: 64x64 at d=64
launches.append(("float32", 64, (v2.FIXED_BLOCK, v2.FIXED_BLOCK, v2.FIXED_WARPS, v2.FIXED_STAGES)))
found = {mode: [] for mode in v2.DQ_MODES}
for mode in v2.DQ_MODES:
    for dtype, d, tiles in launches:
        constants = dict(HEAD_DIM=d, BLOCK_M=tiles[0], BLOCK_N=tiles[1], DQ_MODE=mode,
                         PRECISION="ieee" if dtype == "float32" else "tf32")
        found[mode].append(compile_(v2.attn_bwd_v2, dtype, constants, tiles, ["dq_col_step"]))
found["sum_dq_partials_v2"] = [compile_(v2.sum_dq_partials_v2, dtype, dict(BLOCK_N=64, BLOCK=v2.SCALE_BLOCK),
                                        (v2.SCALE_BLOCK, 64, 4, 3)) for dtype in ("float16", "float32")]
tma = [{"pass": name, **compile_(kernel, dtype, dict(HEAD_DIM=d, BLOCK_M=tiles[0], BLOCK_N=tiles[1],
                                                    PRECISION="tf32", TMA=True), tiles, runtime_ints)}
       for name, kernel, table, runtime_ints in (("fwd", v2.attn_fwd_v2, FWD_TILES_V2, ()),
                                                 ("bwd", v2.attn_bwd_v2, BWD_TILES_V2, ["dq_col_step"]))
       for tiles, widest in table.items() for d in sorted({min(64, widest), widest})
       for dtype in ("float16", "bfloat16")]
json.dump({"dq_modes": found, "tma": tma}, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def version_2_on_sm90(tmp_path_factory, run_compiled) -> dict:
    """The compiles above, in a fresh process without TRITON_INTERPRET: {"dq_modes": records by mode,
    "tma": records}."""
    return run_compiled(VERSION_2_WORKER, tmp_path_factory.mktemp("version_2") / "records.json")


def test_version_2_reads_tiles_through_tma_on_sm90(version_2_on_sm90):
    """With TMA the whole streamed tiles of both passes come by bulk tensor copies, the products stay on
    Hopper's wgmma, and no tile spills. (Triton 3.9's warp specialization was tried on the forward's loop
    too: its compiler pass asserted, so the kernels do not ask for it.)"""
    records = version_2_on_sm90["tma"]
    tables = {"fwd": FWD_TILES_V2, "bwd": BWD_TILES_V2}
    assert len(records) == 2 * sum(len({min(64, d), d}) for table in tables.values() for d in table.values())
    for r in records:
        where = (f"{r['pass']} {r['dtype']} d={r['head_dim']} {r['config']}: {r['tma']} TMA copies, "
                 f"spilled {r['spilled']}")
        assert r["tma"] > 0 and r["tensor_cores"] > 0 and r["spilled"] == 0, where


def test_version_2_dq_modes_compile_to_vector_scalar_and_no_atomics_on_sm90(version_2_on_sm90):
    """"atomic": Hopper's vectorized red (what lost adds on an H200); "scalar": f32 reductions, never a vector
    form; "partials" and "two_phase": none, and neither does the partials' summing kernel. Half-precision
    tiles keep tensor cores and do not spill in any mode (float32, the exact fixed-tile path, may: its spills
    are in the message only)."""
    for mode, records in version_2_on_sm90["dq_modes"].items():
        for r in records:
            where = (f"{mode} {r['dtype']} d={r['head_dim']} {r['config']}: {r['atomics']}, "
                     f"spilled {r['spilled']} bytes")
            if mode == "atomic":
                assert r["vector"] > 0, where
            elif mode == "scalar":
                assert r["scalar"] > 0 and r["vector"] == 0, where
            else:
                assert r["atomics"] == {}, where
            if r["dtype"] != "float32":
                assert r["spilled"] == 0, where
                assert r["tensor_cores"] > 0 or mode == "sum_dq_partials_v2", where
