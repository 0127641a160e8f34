"""Fused attention throughput: our Triton kernels (versions 1 and 2) vs torch SDPA's backends, on one GPU.

TFLOP/s by the usual convention: forward 4 * B * heads * N^2 * d, backward 2.5x the forward. Padded
batches report both the effective FLOPs (real lengths: 4 * heads * d * sum_b L_b^2) and the padded FLOPs
(as if every sequence had length N). Shapes are ALBERT's: head dim 64 with 12 and 16 heads, and head dim
128 with 16 heads; N from 128 to 4096 at a fixed token budget per batch (B = tokens / N); unpadded and
with lengths uniform in [N/4, N]; forward and forward+backward; bfloat16 and float16. SDPA runs with
each backend it has (flash takes no mask, so it runs only unpadded; efficient and cuDNN take the
padding mask), and "SDPA best" is the fastest of them per case. Our kernel runs once per version
(`--versions 1 2`: providers ours-v1, ours-v2; "ours" means every version asked for), and version 2 once per
way its backward sums dQ (`--dq-modes atomic scalar partials two_phase`: ours-v2, ours-v2-scalar,
ours-v2-partials, ours-v2-two_phase; flash_attention_v2 says what each is; default: atomic only).

Every provider is timed twice: with triton.testing.do_bench (each call launched from Python, as a training
step does) and with do_bench_cudagraph (the same calls replayed as a CUDA graph: the GPU's time alone). The
host share, 1 - graph / plain, is the part of a call spent on the host (Python, autograd, launches).
The JSON's "version_2_tuned" says what version 2's tuning picked per shape: the tiles, and on Hopper
whether each pass reads its streamed tiles through TMA (minialbert/kernels/tuning.py).

    python benchmarks/attention.py              # on a CUDA GPU: writes assets/benchmarks/attention_<gpu>.json
                                                # and assets/figures/attention_<gpu>.{png,json}
    python benchmarks/attention.py --dtypes bfloat16 --seq-lens 512 1024 --passes fwd   # a subset
    python benchmarks/attention.py --dtypes bfloat16 --head-configs 12x64 --seq-lens 256 512 1024 4096 \
        --versions 1 2 --providers ours sdpa-flash sdpa-cudnn --out DIR    # both versions; JSON under DIR
    python benchmarks/attention.py --dry-run    # no GPU: tiny shapes through Triton's interpreter to check
                                                # the harness only (shape options ignored); writes nothing
                                                # to assets/
    python benchmarks/attention.py --check-gpu  # measure nothing: exit 0 if a CUDA GPU can run the kernels
                                                # compiled, else say why in one line and exit 2 (gpu-check)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from minialbert.download import atomic_write

REPO = Path(__file__).resolve().parent.parent
PEAK_TFLOPS = 989.0               # NVIDIA's H100 SXM and H200 datasheets: dense bf16/fp16 peak (not measured)
BACKWARD_FACTOR = 2.5             # convention: backward = 2.5x forward FLOPs
PROVIDERS = ("ours", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math")   # ours: one per --versions
DQ_MODES = ("atomic", "scalar", "partials", "two_phase")   # flash_attention_v2.DQ_MODES; atomic: ours-v2
OURS = ("ours-v1", "ours-v2", *(f"ours-v2-{mode}" for mode in DQ_MODES[1:]))
GOALS = {                         # the kernel's speed goals: ours / SDPA's best (cuDNN on the H100 so far)
    ("fwd", "padded"): ("SDPA best", 1.0),
    ("fwd", "none"): ("SDPA best", 0.9),
    ("fwd+bwd", "padded"): ("SDPA best", 1.0),
    ("fwd+bwd", "none"): ("SDPA best", 0.9),
}


def repository_path(path: Path) -> str | None:
    """`path` relative to the repository, or None outside it: a record names no folder of one machine."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=16384, help="tokens per batch: B = tokens // N")
    p.add_argument("--seq-lens", type=int, nargs="+", default=[128, 256, 512, 1024, 2048, 4096])
    p.add_argument("--head-configs", nargs="+", default=["12x64", "16x64", "16x128"],
                   help="HEADSxHEAD_DIM entries")
    p.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"], choices=["bfloat16", "float16"])
    p.add_argument("--passes", nargs="+", default=["fwd", "fwd+bwd"], choices=["fwd", "fwd+bwd"])
    p.add_argument("--paddings", "--padding", nargs="+", default=["none", "padded"],
                   choices=["none", "padded", "ragged"], help="ragged is another name for padded")
    p.add_argument("--providers", nargs="+", default=list(PROVIDERS), choices=PROVIDERS + OURS)
    p.add_argument("--versions", nargs="+", type=int, default=[1, 2], choices=[1, 2],
                   help="versions of our kernel that the provider 'ours' runs (ours-v1, ours-v2)")
    p.add_argument("--dq-modes", nargs="+", default=["atomic"], choices=DQ_MODES,
                   help="how version 2 sums dQ, one provider each: atomic (ours-v2), scalar "
                        "(ours-v2-scalar), partials (ours-v2-partials), two_phase (ours-v2-two_phase)")
    p.add_argument("--no-graphs", action="store_true", help="time with do_bench only (no CUDA-graph replays)")
    p.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS,
                   help="peak used for the fraction column (default: H100 SXM / H200 datasheet dense bf16)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None,
                   help="folder for the JSON and plot (default: assets/; --dry-run: a temporary folder)")
    p.add_argument("--dry-run", action="store_true",
                   help="tiny shapes, Triton interpreter on CPU: checks the harness, measures nothing")
    p.add_argument("--check-gpu", action="store_true",
                   help="measure nothing: say whether this machine can run the GPU benchmark (exit 0 or 2)")
    args = p.parse_args(argv)
    for hc in args.head_configs:
        if not re.fullmatch(r"\d+x\d+", hc):
            p.error(f"--head-configs entry {hc!r} must look like 12x64 (heads x head_dim)")
    bad = [n for n in args.seq_lens if n < 4 or args.tokens // n < 1]
    if bad:
        p.error(f"--seq-lens {bad}: each N must be >= 4 and <= --tokens {args.tokens}")
    args.paddings = list(dict.fromkeys("padded" if x == "ragged" else x for x in args.paddings))
    v2 = ["ours-v2" if mode == "atomic" else f"ours-v2-{mode}" for mode in args.dq_modes]
    ours = [x for n in args.versions for x in (v2 if n == 2 else [f"ours-v{n}"])]
    expand = {"ours": ours, "ours-v2": v2}
    args.providers = list(dict.fromkeys(x for p_ in args.providers for x in expand.get(p_, [p_])))
    return args


def gpu_problem() -> str | None:
    """Why the kernels cannot run compiled on a GPU here, in one line; None when they can."""
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a build without CUDA"
        return (f"no CUDA GPU found (torch {torch.__version__}, {build}): `make gpu-check` needs a machine "
                "with an NVIDIA GPU and the CUDA build of torch")
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return "TRITON_INTERPRET is set: unset it so that the kernels run compiled on the GPU"
    return None


def attention_flops(B: int, heads: int, N: int, d: int, lengths: list[int] | None, passes: str) -> dict:
    """Effective (real lengths) and padded FLOPs of one call, forward 4*B*h*N^2*d, backward 2.5x that."""
    factor = 1.0 + (BACKWARD_FACTOR if passes == "fwd+bwd" else 0.0)
    padded = 4 * B * heads * N * N * d * factor
    effective = padded if lengths is None else 4 * heads * d * sum(L * L for L in lengths) * factor
    return {"effective": effective, "padded": padded}


def make_lengths(B: int, N: int, padding: str, gen: torch.Generator) -> list[int] | None:
    """None (no padding) or B lengths uniform in [N/4, N]."""
    if padding == "none":
        return None
    return torch.randint(max(1, N // 4), N + 1, (B,), generator=gen).tolist()


def make_call(provider: str, q, k, v, lengths: list[int] | None):
    """A zero-argument function computing the attention output with `provider`, or raise if unsupported."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from minialbert.kernels import fused_attention

    B, _, N, _ = q.shape
    if provider in OURS:
        key_lengths = None if lengths is None else torch.tensor(lengths, dtype=torch.int32, device=q.device)
        version, _, dq = provider.removeprefix("ours-v").partition("-")    # "2-partials": version 2, partials
        return lambda: fused_attention(q, k, v, key_lengths, check_lengths=False, version=int(version),
                                       dq=dq or "atomic")
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[provider.removeprefix("sdpa-")]
    mask = None
    if lengths is not None:
        lens = torch.tensor(lengths, device=q.device)
        mask = (torch.arange(N, device=q.device) < lens[:, None])[:, None, None, :]    # (B, 1, 1, N)
        if provider == "sdpa-flash":
            raise ValueError("flash attention takes no padding mask")

    def call():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return call


def check_output(out: torch.Tensor, q, k, v, lengths: list[int] | None) -> None:
    """Provider output vs the float32 reference on real rows (a harness check, loose for half precision)."""
    from minialbert.kernels import reference_attention

    key_lengths = None if lengths is None else torch.tensor(lengths, device=q.device)
    ref = reference_attention(q.float(), k.float(), v.float(), key_lengths)
    B, _, N, _ = q.shape
    real = torch.arange(N, device=q.device) < (torch.full((B,), N, device=q.device) if key_lengths is None
                                               else key_lengths)[:, None]
    sel = real[:, None, :, None].expand_as(ref)
    torch.testing.assert_close(out.float()[sel], ref[sel], atol=2e-2, rtol=2e-2)


def timers(dry_run: bool, graphs: bool) -> dict:
    """Milliseconds per call, by name: "plain", triton's do_bench (CUDA events, L2 flushed), and "graph",
    do_bench_cudagraph (replays of a CUDA graph of the calls: no host time); wall clock in a dry run."""
    if dry_run:
        def wall(fn):
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(times)
        return {"plain": wall, "graph": wall} if graphs else {"plain": wall}
    import triton.testing
    plain = {"plain": lambda fn: triton.testing.do_bench(fn, warmup=10, rep=40)}    # short: a 2-minute budget
    return {**plain, "graph": lambda fn: triton.testing.do_bench_cudagraph(fn, rep=20)} if graphs else plain


def bench_case(provider, q, k, v, do, lengths, passes, measures: dict) -> dict:
    """Milliseconds per call of `provider` by each timer (None where that timer failed, with its error)."""
    call = make_call(provider, q, k, v, lengths)
    if passes == "fwd":
        def step():
            with torch.no_grad():
                return call()
    else:
        def step():
            out = call()
            out.backward(do)
            q.grad = k.grad = v.grad = None
    check_output(call().detach(), q, k, v, lengths)
    times, errors = {}, {}
    for name, measure in measures.items():
        try:
            times[name] = measure(step)
        except (RuntimeError, ValueError) as err:
            if name == "plain":
                raise
            times[name], errors[name] = None, f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
    return {"times": times, "errors": errors}


def environment(dry_run: bool) -> dict:
    import triton

    env = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
           "measured_at_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
           "host": platform.node()}
    if dry_run:
        return {**env, "gpu": "no GPU (dry run: Triton interpreter on CPU, timings are not measurements)",
                "driver": None, "cuda": None}
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        driver = "unknown (nvidia-smi not available)"
    return {**env, "gpu": torch.cuda.get_device_name(), "driver": driver, "cuda": torch.version.cuda}


def run(args: argparse.Namespace) -> list[dict]:
    device = "cpu" if args.dry_run else "cuda"
    measures = timers(args.dry_run, not args.no_graphs)
    gen = torch.Generator().manual_seed(args.seed)
    rows = []
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        for hc in args.head_configs:
            heads, d = map(int, hc.split("x"))
            for N in args.seq_lens:
                B = args.tokens // N
                for padding in args.paddings:
                    lengths = make_lengths(B, N, padding, gen)
                    q, k, v, do = (torch.randn(B, heads, N, d, generator=gen).to(device, dtype)
                                   for _ in range(4))
                    q, k, v = (t.requires_grad_() for t in (q, k, v))
                    for passes in args.passes:
                        flops = attention_flops(B, heads, N, d, lengths, passes)
                        for provider in args.providers:
                            row = {"dtype": dtype_name, "heads": heads, "head_dim": d, "seq_len": N,
                                   "batch": B, "padding": padding,
                                   "mean_length": N if lengths is None else sum(lengths) / B,
                                   "pass": passes, "provider": provider,
                                   "flops_effective": flops["effective"], "flops_padded": flops["padded"],
                                   "ms": None, "tflops_effective": None, "tflops_padded": None,
                                   "ms_graph": None, "host_share": None, "graph_error": None, "error": None}
                            try:
                                found = bench_case(provider, q, k, v, do, lengths, passes, measures)
                                ms, graph = found["times"]["plain"], found["times"].get("graph")
                                row.update(ms=ms, tflops_effective=flops["effective"] / ms / 1e9,
                                           tflops_padded=flops["padded"] / ms / 1e9, ms_graph=graph,
                                           host_share=None if graph is None else 1 - graph / ms,
                                           graph_error=found["errors"].get("graph"))
                            except (RuntimeError, ValueError, NotImplementedError) as err:
                                row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
                                if not args.dry_run:
                                    torch.cuda.empty_cache()
                            rows.append(row)
                            print(format_row(row), flush=True)
    return rows


def format_row(row: dict) -> str:
    head = (f"{row['dtype']:>8} h{row['heads']:<2} d{row['head_dim']:<3} N={row['seq_len']:<5} "
            f"B={row['batch']:<4} pad={row['padding']:<6} {row['pass']:<7} {row['provider']:<16}")
    if row["error"]:
        return f"{head} unavailable ({row['error'][:80]})"
    graph = ("" if row["ms_graph"] is None
             else f"  graph {row['ms_graph']:8.3f} ms, host {row['host_share']:4.0%}")
    return (f"{head} {row['ms']:9.3f} ms  {row['tflops_effective']:7.1f} TFLOP/s effective"
            f"  {row['tflops_padded']:7.1f} padded{graph}")


def summarize(rows: list[dict], peak: float) -> list[dict]:
    """Per case and version of ours: the ratio to SDPA's best backend (and to flash), timed plainly and as
    CUDA graphs, the host share of both, the fraction of peak, and the kernel's speed goal (GOALS)."""
    cases: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        key = (r["dtype"], r["heads"], r["head_dim"], r["seq_len"], r["padding"], r["pass"])
        cases.setdefault(key, {})[r["provider"]] = r
    summary = []
    for (dtype, heads, d, N, padding, passes), by in cases.items():
        sdpa = {p: r for p, r in by.items() if p.startswith("sdpa-") and p != "sdpa-math" and r["ms"]}
        if not sdpa:
            continue
        best_name, best = min(sdpa.items(), key=lambda kv: kv[1]["ms"])
        graphs = [r["ms_graph"] for r in sdpa.values() if r["ms_graph"]]
        for provider in OURS:
            ours = by.get(provider)
            if not ours or ours["ms"] is None:
                continue
            best_graph = min(graphs) if graphs and ours["ms_graph"] else None
            entry = {"dtype": dtype, "heads": heads, "head_dim": d, "seq_len": N, "padding": padding,
                     "pass": passes, "provider": provider,
                     "ours_tflops": ours["tflops_effective"], "sdpa_best": best_name,
                     "sdpa_best_tflops": best["tflops_effective"],
                     "ratio_vs_sdpa_best": best["ms"] / ours["ms"],
                     "ratio_vs_flash": (by["sdpa-flash"]["ms"] / ours["ms"]
                                        if by.get("sdpa-flash", {}).get("ms") else None),
                     "ratio_vs_sdpa_best_graph": best_graph and best_graph / ours["ms_graph"],
                     "host_share": ours["host_share"], "sdpa_best_host_share": best["host_share"],
                     "fraction_of_peak": ours["tflops_effective"] / peak}
            target, goal = GOALS[(passes, padding)]
            ratio = entry["ratio_vs_flash"] if target == "sdpa-flash" else entry["ratio_vs_sdpa_best"]
            entry.update(goal=f">= {goal}x {target}", goal_met=None if ratio is None else ratio >= goal)
            summary.append(entry)
    return summary


def print_summary(summary: list[dict], peak: float) -> None:
    print(f"\nours vs SDPA's best backend (ratio > 1: ours faster), timed plainly and as CUDA graphs; host: "
          f"1 - graph/plain; peak {peak:.0f} TFLOP/s")
    print(f"{'dtype':>8} {'h x d':>6} {'N':>5} {'padding':<6} {'pass':<7} {'ours':<16} {'TFLOP/s':>7} "
          f"{'best SDPA':<14} {'ratio':>5} {'graph':>5} {'host':>5} {'SDPA host':>9}  goal")
    fmt = lambda x, spec: "-" if x is None else format(x, spec)                        # noqa: E731
    for s in summary:
        print(f"{s['dtype']:>8} {s['heads']:>3}x{s['head_dim']:<3} {s['seq_len']:>5} {s['padding']:<6} "
              f"{s['pass']:<7} {s['provider']:<16} {s['ours_tflops']:7.1f} {s['sdpa_best']:<14} "
              f"{s['ratio_vs_sdpa_best']:5.2f} {fmt(s['ratio_vs_sdpa_best_graph'], '5.2f')} "
              f"{fmt(s['host_share'], '5.0%')} {fmt(s['sdpa_best_host_share'], '9.0%')}  "
              f"{s['goal']}: {'met' if s['goal_met'] else 'NOT met'}")
    met = sum(bool(s["goal_met"]) for s in summary)
    print(f"goals met in {met} of {len(summary)} cases")


def plot(rows: list[dict], env: dict, name: str, directory: Path) -> Path:
    """Effective TFLOP/s vs N, a panel per (padding, pass), first dtype only; saved with its numbers."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minialbert.course.plots import save_figure

    dtype = rows[0]["dtype"]
    paddings = sorted({r["padding"] for r in rows}, key=["none", "padded"].index)
    passes = sorted({r["pass"] for r in rows}, key=["fwd", "fwd+bwd"].index)
    fig, axes = plt.subplots(len(paddings), len(passes), figsize=(5.5 * len(passes), 3.8 * len(paddings)),
                             squeeze=False, sharex=True)
    series = {}
    for i, padding in enumerate(paddings):
        for j, pss in enumerate(passes):
            ax = axes[i][j]
            for hc_style, hc in zip(("-", "--", ":"), sorted({(r["heads"], r["head_dim"]) for r in rows})):
                sel = [r for r in rows if r["dtype"] == dtype and r["padding"] == padding and r["pass"] == pss
                       and (r["heads"], r["head_dim"]) == hc and r["ms"]]
                for provider, color in (("ours-v1", "C3"), ("ours-v2", "C1"), ("ours-v2-scalar", "C2"),
                                        ("ours-v2-partials", "C4"), ("ours-v2-two_phase", "C5"),
                                        ("SDPA best", "C0"), ("sdpa-math", "C7")):
                    pts = {}
                    for r in sel:
                        if (provider == "SDPA best" and r["provider"].startswith("sdpa-")
                                and r["provider"] != "sdpa-math") or r["provider"] == provider:
                            pts[r["seq_len"]] = max(pts.get(r["seq_len"], 0.0), r["tflops_effective"])
                    if not pts:
                        continue
                    xs = sorted(pts)
                    label = f"{provider}, {hc[0]} heads x d{hc[1]}"
                    ax.plot(xs, [pts[x] for x in xs], hc_style, color=color, marker="o", ms=3, label=label)
                    series[f"{padding}/{pss}/{label}"] = {"seq_len": xs,
                                                          "tflops_effective": [pts[x] for x in xs]}
            ax.set_xscale("log", base=2)
            lengths = "none" if padding == "none" else "lengths ~ U[N/4, N]"
            ax.set_title(f"{pss}, padding: {lengths}", fontsize=10)
            ax.set_xlabel("sequence length N")
            ax.set_ylabel("effective TFLOP/s")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Fused attention, {dtype}, {env['gpu']} (measured {env['measured_at_utc']} UTC)",
                 fontsize=10)
    fig.tight_layout()
    path = save_figure(fig, name, {"dtype": dtype, "environment": env, "series": series}, directory)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.check_gpu:
        problem = gpu_problem()
        if problem:
            print(problem, file=sys.stderr)
            return 2
        print(f"CUDA GPU: {torch.cuda.get_device_name()}")
        return 0
    if args.dry_run:
        if not torch.cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")     # before triton is first imported
        args.tokens, args.seq_lens, args.head_configs, args.dtypes = 80, [40], ["2x32"], ["float16"]
    elif not torch.cuda.is_available():
        print("no CUDA GPU found: this benchmark measures GPU kernels. Run `python benchmarks/attention.py` "
              "on a machine with a CUDA GPU, or check the harness here with --dry-run.", file=sys.stderr)
        return 2
    env = environment(args.dry_run)
    print(f"# {env['gpu']} | driver {env['driver']} | torch {env['torch']} | triton {env['triton']}")
    rows = run(args)
    if not any(r["ms"] for r in rows):
        print("every case failed; nothing written", file=sys.stderr)
        return 1
    summary = summarize(rows, args.peak_tflops)
    from minialbert.kernels.tuning import tuned_tiles  # triton is set up by now

    slug = "dry-run" if args.dry_run else re.sub(r"[^a-z0-9]+", "-", env["gpu"].lower()).strip("-")
    out = args.out or (Path(tempfile.mkdtemp(prefix="attention-")) if args.dry_run else REPO / "assets")
    result = {"environment": env, "peak_tflops": args.peak_tflops,
              "peak_source": ("NVIDIA datasheets (H100 SXM and H200): dense bf16/fp16, not measured"
                              if args.peak_tflops == PEAK_TFLOPS else "given with --peak-tflops"),
              "flop_convention": "forward 4*B*heads*N^2*d, backward 2.5x forward; effective: real lengths",
              "args": {k: (repository_path(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "rows": rows, "summary": summary, "version_2_tuned": tuned_tiles()}
    record = out / "benchmarks" / f"attention_{slug}.json"
    atomic_write(record, (json.dumps(result, indent=1) + "\n").encode())
    figure = plot(rows, env, f"attention_{slug}", out / "figures")
    print(f"wrote {record} and {figure}")
    if args.dry_run:
        print("\nDRY RUN: interpreter wall-clock times on CPU, not measurements; the lines below only "
              "exercise the summary code")
    print_summary(summary, args.peak_tflops)
    return 0


if __name__ == "__main__":
    sys.exit(main())
