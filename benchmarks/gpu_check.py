"""`make gpu-check`'s last step, on one CUDA GPU: the gpu-scale albert-sop trained for a time budget.

After the kernel tests and benchmarks/attention.py, this builds the gpu scale's SOP sets (from the
course corpus and the gpu tokenizer, unpacked from a pack where the machine has no network; every core),
times the first steps of the gpu model (H = 768, E = 128, 12 shared layers, 6000 pieces, 256 positions,
batch 128) on this GPU, sizes the run to the steps that fit in --minutes and the scale's warmup and
linear decay to those steps (the scale's warmup share of its steps), trains it, evaluates it on the
held-out split beside the MLM baselines (with the SOP classes' predicted shares, as the zoo does),
measures lesson 06's layer-wise L2 / angle curves on the held-out test sequences, and writes it all,
with the GPU's name and the library versions, to OUT/benchmarks/gpu_check_<gpu>.json (the figure:
OUT/figures/gpu_check_<gpu>_layer_transitions.{png,json}; the JSON names it by its path in the repository,
or none when OUT lies outside it). The last thing it prints is a short table.

    python benchmarks/gpu_check.py --minutes 2.5 --out DIR     # on a CUDA GPU; without one: one line, exit 2
    MINIALBERT_DRY_RUN=1 python benchmarks/gpu_check.py --out DIR
                                                   # any machine: the gpu scale's dry run (2 steps of batch
                                                   # 2, 5 sequences) to check this script; its numbers
                                                   # measure nothing, and it writes to DIR (default: a
                                                   # temporary folder), never to assets/

Without network: `python -m minialbert unpack PACK` first (with $MINIALBERT_CACHE set), PACK made by
`python -m minialbert pack --out PACK` where the course corpus is built (make gpu-check PACK=PACK does it).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention import gpu_problem  # noqa: E402  (benchmarks/attention.py: the refusal make gpu-check starts with)

from minialbert.course.cli import directory, parse_override  # noqa: E402
from minialbert.course.scale import DRY_RUN_SUFFIX, SCALES, Scale, current_scale  # noqa: E402
from minialbert.download import write_json  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ENTRY = "albert-sop"
OBJECTIVE = "sop"
MAX_MINUTES = 7 * 24 * 60       # a week: --minutes beyond it is a typo (and 1e308 overflows the step count)
DEFAULT_MINUTES = 2.5           # training only: with the kernel tests (~1.5 min), the attention benchmark
                                # (~2 min), the data (~0.5 min) and the evaluations, make gpu-check <= 8 min
CALIBRATION_STEPS = 8           # timed on this GPU before the run is sized (a throwaway model)
CURVE_POINTS = 4                # held-out evaluations during the run (the last at its end)
CURVE_EXAMPLES = 2000           # held-out examples each of them scores (a fixed seeded sample)
FINAL_EXAMPLES = 8000           # held-out examples the final evaluation scores (the gpu scale's valid split
                                # has tens of thousands; a dry run's scale caps both at its eval_examples)
LIBRARIES = ("torch", "triton", "transformers", "numpy", "sentencepiece", "safetensors")
DRY_NOTE = ("a dry run (MINIALBERT_DRY_RUN=1): the gpu scale's code paths at its real shapes with every step "
            "count and sample size capped; these numbers measure nothing")


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, `gpu-check: error: ...`, exit status 2."""

    def error(self, message: str):
        sys.stderr.write(f"gpu-check: error: {message} (see `python benchmarks/gpu_check.py --help`)\n")
        raise SystemExit(2)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments, each checked here in one line: a budget in (0, MAX_MINUTES], an --out that is a folder
    (or not there yet), and --set fields the scale's model config takes."""
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", choices=list(SCALES), default="gpu",
                   help="the scale of the run (default: gpu; $MINIALBERT_DRY_RUN=1 shortens it)")
    p.add_argument("--minutes", type=float, default=DEFAULT_MINUTES,
                   help=f"training time budget in minutes (default: {DEFAULT_MINUTES}); the steps that fit, "
                        f"at most the scale's pretrain_steps")
    p.add_argument("--out", type=directory, default=None,
                   help="folder for benchmarks/ and figures/ (default: assets/; in a dry run a temporary "
                        "folder)")
    p.add_argument("--set", dest="overrides", action="append", default=[], type=parse_override,
                   metavar="KEY=VALUE", help="change a field of the model's config, e.g. --set "
                                             "initializer_range=0.01 (repeatable; the JSON's name says so)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    if not (math.isfinite(args.minutes) and 0 < args.minutes <= MAX_MINUTES):
        p.error(f"--minutes must be above 0 and at most {MAX_MINUTES} (a week), got {args.minutes:g}")
    if args.out is not None:                     # the folder, or the nearest of its parents that exists
        there = next(path for path in (args.out, *args.out.absolute().parents) if path.exists())
        if not there.is_dir():
            p.error(f"--out {args.out}: {there} is a file; give a folder for benchmarks/ and figures/")
    scale = current_scale(args.scale)
    try:
        scale.model_config("albert", **dict(args.overrides))
    except ValueError as e:
        p.error(f"--set: {e}")
    return args


def is_dry(scale: Scale) -> bool:
    return scale.name.endswith(DRY_RUN_SUFFIX)


def refusal(scale: Scale) -> str | None:
    """Why this machine cannot run the check, in one line; None when it can. A dry run runs anywhere."""
    if is_dry(scale):
        return None
    problem = gpu_problem()
    return f"gpu-check: {problem}" if problem else None


def versions() -> dict:
    """Python and the libraries that decide the numbers, by their installed versions."""
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def environment(device: torch.device) -> dict:
    """The machine: the GPU's name and capability (None on a CPU), CUDA, cuDNN, the libraries."""
    env = {"device": device.type, "gpu": None, "capability": None, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
           "host": platform.node(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
           "measured_at_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
           "versions": versions()}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["capability"] = "sm_{}{}".format(*torch.cuda.get_device_capability(device))
    return env


def slug(env: dict, dry: bool) -> str:
    """The file-name part: the GPU's name in lower case and dashes; `dry-run` for a dry run."""
    if dry or not env["gpu"]:
        return "dry-run"
    return re.sub(r"[^a-z0-9]+", "-", env["gpu"].lower()).strip("-")


def record_name(env: dict, dry: bool, overrides: list[tuple[str, object]]) -> str:
    """gpu_check_<gpu>, then each changed config field: a variant never overwrites the check's file."""
    changed = "".join(f"_{key}-{value}" for key, value in overrides)
    return f"gpu_check_{slug(env, dry)}{re.sub(r'[^A-Za-z0-9_.-]+', '-', changed)}"


def step_seconds(records: list[dict]) -> dict:
    """Training seconds per step from a run's metrics (the train records' cumulative `seconds`, held-out
    evaluations excluded): the mean over the run and the median of step-to-step differences (which leaves
    out the first step's warm-up and the occasional checkpoint)."""
    train = sorted((r["step"], r["seconds"]) for r in records if r.get("split") == "train" and "seconds" in r)
    if not train:
        return {"steps": 0, "seconds": None, "mean": None, "median": None}
    steps, seconds = train[-1]
    diffs = [(b - a) / (j - i) for (i, a), (j, b) in zip(train, train[1:]) if j > i]
    return {"steps": steps, "seconds": seconds, "mean": seconds / steps,
            "median": statistics.median(diffs) if diffs else seconds / steps}


def budgeted_steps(seconds: float, seconds_per_step: float, most: int) -> int:
    """Optimizer steps that fit in `seconds` at `seconds_per_step` each: at least 1, at most `most`."""
    if not (seconds > 0 and seconds_per_step > 0):
        raise ValueError(f"need a budget and a step time > 0, got {seconds} and {seconds_per_step} s")
    return max(1, min(most, int(seconds / seconds_per_step)))


def budgeted_schedule(scale: Scale, steps: int) -> dict:
    """The scale's recipe sized to `steps`: its warmup share of its own steps (at least one step), then the
    linear decay to 0 at `steps` (train.pretrain's schedule), its peak rate, optimizer and batch."""
    warmup = min(steps, max(1, round(steps * scale.recipe.warmup_steps / scale.recipe.pretrain_steps)))
    return {"steps": steps, "warmup": warmup, "lr": scale.recipe.learning_rate,
            "optimizer": scale.recipe.optimizer, "batch_size": scale.recipe.batch_size,
            "eval_every": max(1, steps // CURVE_POINTS)}


def calibrate(cfg, scale: Scale, train) -> float:
    """Median seconds per optimizer step of the scale's model and batch on this machine (CALIBRATION_STEPS
    of a throwaway model: the median of step-to-step times leaves out the first step's warm-up)."""
    from minialbert.train import RunOptions, pretrain

    steps = min(CALIBRATION_STEPS, max(2, scale.recipe.pretrain_steps))       # a dry run's cap holds here too
    args = scale.recipe.train_args(objective=OBJECTIVE, steps=steps, warmup=1, eval_every=0,
                                checkpoint_every=0)
    result = pretrain(cfg, args, train, options=RunOptions(progress=False))
    return step_seconds(result.history)["median"]


def smoothness(model, scale: Scale, device: torch.device, figure: Path, progress: bool) -> dict:
    """The model's layer-wise L2 / angle curves on the scale's held-out test sequences (lesson 06's
    definition and sample), saved as a figure with its numbers; returns the numbers and the figure's path
    in the repository (None outside it: the record names no folder of one machine)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minialbert.course.data import course_pretraining_data
    from minialbert.course.experiments.analysis import (
        DEFINITION,
        heldout_batches,
        interval_note,
        layer_transitions,
    )
    from minialbert.course.lessons import lesson_sizes
    from minialbert.course.plots import plot_layer_transitions, save_figure

    sizes = lesson_sizes(scale).smoothness                      # lesson 06's sample at this scale
    test_data = course_pretraining_data("mlm", "test", scale.data)
    batches = heldout_batches(test_data, sizes.sequences, sizes.batch_size)
    start = time.perf_counter()
    result = layer_transitions(model.to(device), batches, progress=progress).to_dict()
    seconds = time.perf_counter() - start
    axes = plot_layer_transitions({ENTRY: result})
    numbers = {"definition": DEFINITION, "sequences": result["sequences"],
               "interval": interval_note(result["sequences"]), "split": "test", "tokens": "all",
               "standardize": False, "scale": scale.name, "device": device.type, "seconds": round(seconds, 2),
               "results": {ENTRY: result}}
    path = save_figure(axes[0].figure, figure.name, numbers, figure.parent)
    plt.close(axes[0].figure)
    return {**numbers, "figure": repository_path(path)}


def repository_path(path: Path) -> str | None:
    """`path` relative to the repository, or None outside it."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else None


def left_plateau(evaluation: dict) -> bool:
    """Has the model left the unigram plateau: is its [MASK] accuracy's 95% interval above the unigram
    guess's (what a model that ignores the context scores)?"""
    return evaluation["mlm"]["mask"]["ci95"][0] > evaluation["baselines"]["unigram"]["mask"]["ci95"][1]


def train_budgeted(scale: Scale, minutes: float, progress: bool,
                   overrides: list[tuple[str, object]] = ()) -> tuple[torch.nn.Module, dict]:
    """Build the data, time the first steps, train for `minutes` (on the GPU where there is one, as
    train.pretrain chooses), evaluate beside the baselines; returns the model and the record."""
    from minialbert.course.data import course_pretraining_data
    from minialbert.evaluation import MLMBaselines, evaluate_pretraining, format_report, pretraining_evaluator
    from minialbert.train import RunOptions, pretrain

    seconds = {}
    start = time.perf_counter()
    train = course_pretraining_data(OBJECTIVE, "train", scale.data)          # every core (data_shards)
    valid = course_pretraining_data(OBJECTIVE, "valid", scale.data)
    seconds["data"] = time.perf_counter() - start
    cfg = scale.model_config("albert", **dict(overrides))
    start = time.perf_counter()
    calibrated = calibrate(cfg, scale, train)
    seconds["calibration"] = time.perf_counter() - start
    steps = budgeted_steps(60 * minutes, calibrated, scale.recipe.pretrain_steps)
    plan = budgeted_schedule(scale, steps)
    print(f"gpu-check: data in {seconds['data']:.0f} s; {1000 * calibrated:.1f} ms a step, so {steps} steps "
          f"(warmup {plan['warmup']}, peak lr {plan['lr']:g}, {plan['optimizer']}) in {minutes:g} min",
          file=sys.stderr, flush=True)
    args = scale.recipe.train_args(objective=OBJECTIVE, steps=plan["steps"], warmup=plan["warmup"],
                                eval_every=plan["eval_every"], checkpoint_every=0,
                                eval_examples=scale.recipe.eval_examples or CURVE_EXAMPLES)
    start = time.perf_counter()
    result = pretrain(cfg, args, train, pretraining_evaluator(valid, cfg, args),
                      RunOptions(progress=progress))
    seconds["training_with_evaluations"] = time.perf_counter() - start
    start = time.perf_counter()
    baselines = MLMBaselines.fit(train, cfg.vocab_size)
    evaluation = evaluate_pretraining(result.model, valid, baselines,
                                      max_examples=scale.recipe.eval_examples or FINAL_EXAMPLES,
                                      batch_size=2 * scale.recipe.batch_size, progress=progress)
    seconds["final_evaluation"] = time.perf_counter() - start
    print(format_report(evaluation), file=sys.stderr)
    curve = [{k: r[k] for k in ("step", "mask_accuracy", "mask_loss", "mlm_loss", "sop_accuracy",
                                       "sop_predicted_1")
              if k in r} for r in result.history if r["split"] == "valid"]
    record = {"name": ENTRY, "objective": OBJECTIVE, "budget_minutes": minutes,
              "model": {"preset": scale.models.albert_preset, "hidden_size": cfg.hidden_size,
                        "num_layers": cfg.num_layers, "embedding_size": cfg.embedding_size,
                        "vocab_size": cfg.vocab_size, "max_position_embeddings": cfg.max_position_embeddings,
                        "sharing": cfg.sharing, "initializer_range": cfg.initializer_range,
                        "changed": dict(overrides)},
              "data": {"train_examples": len(train), "valid_examples": len(valid),
                       "shards": scale.data.data_shards},
              "calibration": {"seconds_per_step": calibrated},
              "train": {**plan, "seq_len": scale.data.max_seq_len, "weight_decay": args.weight_decay},
              "seconds_per_step": step_seconds(result.history), "curve": curve,
              "heldout_evaluation": evaluation, "left_plateau": left_plateau(evaluation),
              "seconds": {k: round(v, 1) for k, v in seconds.items()}}
    return result.model, record


def summary(record: dict) -> str:
    """The short table printed last."""
    run, ev = record["run"], record["run"]["heldout_evaluation"]
    mask, unigram = ev["mlm"]["mask"], ev["baselines"]["unigram"]["mask"]
    sop = ev.get("sentence", {})
    shares = " / ".join(f"{100 * v:.0f}%" for v in sop.get("predicted_shares", []))
    curve = next(iter(record["smoothness"]["results"].values()))
    rows = [("device", record["environment"]["gpu"] or record["environment"]["device"]),
            ("steps / warmup / peak lr", f"{run['train']['steps']} / {run['train']['warmup']} / "
                                         f"{run['train']['lr']:g} ({run['train']['optimizer']})"),
            ("ms per step (median)", f"{1000 * run['seconds_per_step']['median']:.1f}"),
            ("[MASK] accuracy [95%]", f"{100 * mask['accuracy']:.1f}% [{100 * mask['ci95'][0]:.1f}, "
                                      f"{100 * mask['ci95'][1]:.1f}] (unigram "
                                      f"{100 * unigram['accuracy']:.1f}%)"),
            ("SOP accuracy, predicted", f"{100 * sop.get('accuracy', float('nan')):.1f}%, shares {shares}"),
            ("left the plateau", "yes" if run["left_plateau"] else "no"),
            ("L2, angle: first -> last layer", f"{curve['l2'][0]:.2f} -> {curve['l2'][-1]:.2f}, "
                                              f"{curve['angle'][0]:.1f} -> {curve['angle'][-1]:.1f} deg"),
            ("seconds", ", ".join(f"{k} {v:.0f}" for k, v in run["seconds"].items())
             + f", total {record['seconds_total']:.0f}")]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def run(scale: Scale, out: Path, minutes: float = DEFAULT_MINUTES, progress: bool = True,
        overrides: list[tuple[str, object]] = ()) -> Path:
    """The check at `scale`; returns the JSON file written under out/benchmarks."""
    start = time.perf_counter()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env = environment(device)
    name = record_name(env, is_dry(scale), overrides)
    model, trained = train_budgeted(scale, minutes, progress, overrides)
    curves = smoothness(model, scale, device, out / "figures" / f"{name}_layer_transitions", progress)
    record = {"what": "make gpu-check: the gpu-scale albert-sop trained for a time budget on this GPU, its "
                      "held-out evaluation beside the baselines and its layer-wise smoothness "
                      "(benchmarks/gpu_check.py)",
              "dry_run": is_dry(scale), "scale": scale.name, "environment": env, "run": trained,
              "smoothness": curves, "seconds_total": round(time.perf_counter() - start, 1)}
    if is_dry(scale):
        record["note"] = DRY_NOTE
    path = write_json(out / "benchmarks" / f"{name}.json", record)
    print(summary(record))
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scale = current_scale(args.scale)
    problem = refusal(scale)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    out = args.out or (Path(tempfile.mkdtemp(prefix="gpu-check-")) if is_dry(scale) else REPO / "assets")
    path = run(scale, out, args.minutes, progress=not args.quiet, overrides=args.overrides)
    print(f"wrote {path}" + (f" ({DRY_NOTE})" if is_dry(scale) else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
