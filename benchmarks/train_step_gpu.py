"""One pretraining step on a CUDA GPU: minialbert's backends and torch.compile against transformers.

At the gpu scale's config (gpu-albert preset, batch 128 x 256, 15% of real tokens predicted, SOP head,
bf16 autocast, AdamW + clip 1.0 for all), on full batches and ragged ones (lengths uniform in [64, 256],
right-padded), in one run. Ours is the trainer's own `train_step`; transformers' AlbertForPreTraining
takes the same step with its own loss. Reported per contender and batch kind: median ms/step, real
(unpadded) tokens/s, peak GiB, host syncs per step (torch.profiler counts of aten::_local_scalar_dense
and cudaStreamSynchronize over a few steps), and ratios against transformers and against ours-sdpa.
Each of our backends also runs compiled two ways: "+compile", the whole forward under torch.compile,
and "+graphs", the encoder's layers replayed as CUDA graphs (compiling.graphed_layers), where launches
cost no host time: what closes the Triton kernels' host gap, if anything does. Their rows count the CUDA
graphs inductor declined to record (cudagraph_skips; its log says why): 0 for "+graphs" means the layers
did replay.

    python benchmarks/train_step_gpu.py                 # writes assets/benchmarks/train_step_<gpu>.json
    python benchmarks/train_step_gpu.py --out DIR       # writes DIR/train_step_<gpu>.json
    python benchmarks/train_step_gpu.py --dry-run       # CPU, tiny shapes: checks the harness only

About 1-2 minutes on an H100 without the compiled contenders; each of those compiles for about a minute
(raise --budget-s to reach them all).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from gpu_check import environment, slug
from torch._dynamo.utils import counters
from train_step import hf_model

import minialbert as ma
from minialbert.compiling import compiled, graphed_layers
from minialbert.device import Precision
from minialbert.download import write_json
from minialbert.optim import warmup_linear_decay
from minialbert.train import TrainArgs, train_step

REPO = Path(__file__).resolve().parent.parent
SYNC_EVENTS = ("aten::_local_scalar_dense", "cudaStreamSynchronize")
# A backend alone, "+compile" (the whole forward under torch.compile) or "+graphs" (the encoder's layers as
# CUDA graphs, compiling.graphed_layers). Compiling takes longest: those come last.
BACKENDS = ("sdpa", "triton", "triton-v2")
CONTENDERS = ("sdpa", "transformers", "triton", "triton-v2",
              *(f"{backend}+{how}" for how in ("compile", "graphs") for backend in BACKENDS))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="gpu-albert")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--min-len", type=int, default=64,
                   help="ragged batches: lengths uniform in [min-len, seq-len]")
    p.add_argument("--mask-rate", type=float, default=0.15)
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per contender and batch kind")
    p.add_argument("--steps", type=int, default=10, help="timed steps per contender and batch kind")
    p.add_argument("--profiled", type=int, default=3, help="steps profiled for host syncs")
    p.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=CONTENDERS)
    p.add_argument("--budget-s", type=float, default=60.0,
                   help="contenders not started this many seconds into the run are skipped (and recorded "
                        "as skipped), so that torch.compile's minute of compiling fits in two minutes")
    p.add_argument("--out", type=Path, default=None,
                   help="directory for the JSON (default assets/benchmarks)")
    p.add_argument("--dry-run", action="store_true",
                   help="CPU, tiny shapes, float32: checks the harness, times nothing")
    args = p.parse_args(argv)
    if args.dry_run:
        args.preset, args.batch_size, args.seq_len, args.min_len = "ci-albert", 4, 32, 16
        args.warmup, args.steps, args.profiled = 1, 2, 1
    if not 1 <= args.min_len <= args.seq_len:
        p.error(f"--min-len {args.min_len} must lie in [1, --seq-len {args.seq_len}]")
    return args


def commit() -> str | None:
    """The checkout's commit (None where git cannot say)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def make_batch(cfg: ma.AlbertConfig, args, ragged: bool, seed: int, device) -> dict:
    """A collate-style batch: right-padded, 15% of real tokens predicted, two segments, SOP labels."""
    g = torch.Generator().manual_seed(seed)
    B, N = args.batch_size, args.seq_len
    lengths = (torch.randint(args.min_len, N + 1, (B,), generator=g) if ragged
               else torch.full((B,), N))
    real = torch.arange(N)[None] < lengths[:, None]                             # (B, N)
    input_ids = torch.randint(5, cfg.vocab_size, (B, N), generator=g).masked_fill(~real, cfg.pad_token_id)
    predicted = (torch.rand(B, N, generator=g) < args.mask_rate) & real
    batch = {"input_ids": input_ids,
             "token_type_ids": (torch.arange(N)[None] >= lengths[:, None] // 2).long() & real,
             "attention_mask": real.long(),
             "mlm_labels": torch.where(predicted, input_ids, torch.full_like(input_ids, -100)),
             "sentence_labels": torch.randint(0, 2, (B,), generator=g)}
    return {k: v.to(device) for k, v in batch.items()}


def adamw(model, targs: TrainArgs, device) -> torch.optim.AdamW:
    """The one optimizer, fused: its step counts stay on the device (the for-each AdamW reads each
    parameter's step count back with .item(), which the profiler would count against both models)."""
    return torch.optim.AdamW(model.parameters(), lr=targs.lr, weight_decay=targs.weight_decay, fused=True)


def build(name: str, cfg: ma.AlbertConfig, device, precision: Precision, targs: TrainArgs, dry_run: bool):
    """-> a function running one training step on a batch (it reads back the loss it would log)."""
    torch.manual_seed(0)
    if name == "transformers":
        model = hf_model(cfg).to(device).train()
        opt = adamw(model, targs, device)
        sched = warmup_linear_decay(opt, targs.warmup, targs.steps)

        def hf_step(b):
            with precision.autocast():
                loss = model(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"],
                             attention_mask=b["attention_mask"], labels=b["mlm_labels"],
                             sentence_order_label=b["sentence_labels"]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), targs.clip_norm)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            loss.item()                                   # what a loop logs: one read, as ours
        return hf_step
    backend, _, how = name.partition("+")
    kernel, _, version = backend.partition("-v")                  # "triton-v2": the kernel's version 2
    model = ma.AlbertForPretraining(cfg.replace(attention_backend=kernel), "sop").to(device).train()
    if version:
        ma.use_kernel_version(model, int(version))
    net, compiler = model, "eager" if dry_run else "inductor"     # the dry run checks graphs, not inductor
    if how == "compile":
        net = compiled(model, backend=compiler)
    elif how == "graphs":
        graphed_layers(model, backend=compiler)
    opt = adamw(model, targs, device)
    sched = warmup_linear_decay(opt, targs.warmup, targs.steps)

    def ours_step(b):
        train_step(net, model, [b], opt, sched, targs, precision=precision)
    return ours_step


def count_syncs(step, batch, n: int, device) -> dict:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(n):
            step(batch)
        if device.type == "cuda":
            torch.cuda.synchronize()                      # cudaDeviceSynchronize: not one of the counted
    counts = dict.fromkeys(SYNC_EVENTS, 0)
    for event in prof.events():
        if event.name in counts:
            counts[event.name] += 1
    return {k: v / n for k, v in counts.items()}


def measure(step, batch, args, device) -> dict:
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(args.warmup):
        step(batch)
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step(batch)
        sync()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
    syncs = count_syncs(step, batch, args.profiled, device)
    ms = statistics.median(times) * 1e3
    real = int(batch["attention_mask"].sum())
    return {"ms": round(ms, 2), "ms_min": round(min(times) * 1e3, 2), "real_tokens": real,
            "real_tokens_per_s": round(real / (ms / 1e3)),
            "peak_gib": None if peak is None else round(peak, 2),
            "host_syncs_per_step": round(sum(syncs.values()), 2), "sync_events_per_step": syncs}


def run(args, save) -> tuple[list[dict], dict]:
    """Every contender on both batch kinds; save(rows, setup) after each contender, so a run cut short
    keeps what it measured."""
    device = torch.device("cpu" if args.dry_run else "cuda")
    precision = Precision("cpu", None) if args.dry_run else Precision("cuda", torch.bfloat16)
    cfg = ma.AlbertConfig.preset(args.preset)
    targs = TrainArgs(optimizer="adamw", steps=1000, batch_size=args.batch_size, lr=1e-4, warmup=100,
                      eval_every=0, checkpoint_every=0)
    start, rows = time.perf_counter(), []
    for name in args.contenders:
        elapsed = time.perf_counter() - start
        skip = None
        if name.startswith("triton") and args.dry_run:
            skip = "the Triton kernels need CUDA (the dry run is CPU)"
        elif elapsed > args.budget_s:
            skip = f"time budget: {elapsed:.0f} s spent, --budget-s {args.budget_s:.0f}"
        step = None
        for kind in ("full", "ragged"):
            row = {"contender": name, "batch": kind}
            if skip or (kind == "ragged" and step is None):
                rows.append({**row, "skipped": skip or "the full batch failed"})
                continue
            try:
                skips = counters["inductor"]["cudagraph_skips"]
                if kind == "full":
                    t0 = time.perf_counter()
                    step = build(name, cfg, device, precision, targs, args.dry_run)
                batch = make_batch(cfg, args, kind == "ragged", seed=1, device=device)
                result = measure(step, batch, args, device)
                if kind == "full":
                    result["first_batch_seconds"] = round(time.perf_counter() - t0, 1)   # includes compiling
                if "+" in name:                       # graphs inductor declined to record (reasons: the log)
                    result["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"] - skips
                rows.append({**row, **result})
            except Exception as err:                      # one contender's failure must not lose the rest
                rows.append({**row, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"})
            print(f"  {name:>17} {kind:>6}: {rows[-1].get('ms', rows[-1].get('error'))}", flush=True)
        step = None                                       # frees the model and its optimizer
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        save(*with_ratios(rows, args, precision, start), partial=True)
    return with_ratios(rows, args, precision, start)


def with_ratios(rows: list[dict], args, precision: Precision, start: float) -> tuple[list[dict], dict]:
    """Rows with their speed against transformers and against ours-sdpa, and the run's setup."""
    for row in rows:
        for anchor, key in (("transformers", "vs_transformers"), ("sdpa", "vs_sdpa")):
            ref = next((r for r in rows if r["contender"] == anchor and r["batch"] == row["batch"]), {})
            if "ms" in row and "ms" in ref:
                row[key] = round(ref["ms"] / row["ms"], 2)     # > 1: faster than the anchor
    return rows, {"preset": args.preset, "batch_size": args.batch_size, "seq_len": args.seq_len,
                  "ragged_lengths": [args.min_len, args.seq_len], "mask_rate": args.mask_rate,
                  "precision": precision.name,
                  "optimizer": "AdamW (fused; lr 1e-4, weight decay 0.01), clip 1.0",
                  "warmup_steps": args.warmup, "timed_steps": args.steps, "profiled_steps": args.profiled,
                  "total_seconds": round(time.perf_counter() - start, 1)}


def print_summary(rows: list[dict]) -> None:
    print(f"\n{'contender':>17} {'batch':>6} {'ms/step':>8} {'real tok/s':>11} {'peak GiB':>8} "
          f"{'syncs':>6} {'vs HF':>6} {'vs sdpa':>7}")
    for r in rows:
        if "ms" not in r:
            print(f"{r['contender']:>17} {r['batch']:>6}  {r.get('skipped') or r.get('error')}")
            continue
        peak = "-" if r["peak_gib"] is None else f"{r['peak_gib']:.1f}"
        print(f"{r['contender']:>17} {r['batch']:>6} {r['ms']:8.1f} {r['real_tokens_per_s']:11,d} "
              f"{peak:>8} {r['host_syncs_per_step']:6.1f} {r.get('vs_transformers', '-'):>6} "
              f"{r.get('vs_sdpa', '-'):>7}")


def main(argv=None) -> int:
    args = parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA GPU found: this benchmark times training steps on a CUDA GPU; "
              "check the harness on CPU with --dry-run", file=sys.stderr)
        return 2
    env = {**environment(torch.device("cpu" if args.dry_run else "cuda")), "commit": commit()}
    versions = env["versions"]
    print(f"# {env['gpu'] or 'no GPU (dry run)'} | torch {versions['torch']} | triton {versions['triton']} | "
          f"transformers {versions['transformers']}", flush=True)
    path = (args.out or REPO / "assets" / "benchmarks") / f"train_step_{slug(env, args.dry_run)}.json"

    def save(rows: list[dict], setup: dict, partial: bool = False) -> None:
        write_json(path, {"environment": env, "setup": setup, "partial": partial, "rows": rows})
    rows, setup = run(args, save)
    save(rows, setup)
    print(f"wrote {path} ({setup['total_seconds']} s of benchmarking)")
    if args.dry_run:
        print("DRY RUN: CPU times of tiny shapes, not measurements")
    print_summary(rows)
    return 0 if any("ms" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
