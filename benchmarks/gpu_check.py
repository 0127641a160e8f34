"""`make gpu-check`'s last step, on a CUDA GPU: one gpu-scale zoo entry and its smoothness figure.

After the kernel tests and benchmarks/attention.py, this trains (or reads, when it is already built) the
zoo entry albert-sop at the gpu scale (H = 768, 12 layers, 256 positions, 6000 pieces), reads its
held-out evaluation and its training time per step, measures the layer-wise L2 / angle curves of the
paper's smoothness figure on the scale's held-out test sequences, and writes it all, with the GPU's name
and the library versions, to assets/benchmarks/gpu_check_<gpu>.json (the figure beside it:
assets/figures/gpu_check_<gpu>_layer_transitions.{png,json}).

    python benchmarks/gpu_check.py                 # on a CUDA GPU; without one: refuses in one line, exit 2
    MINIALBERT_DRY_RUN=1 python benchmarks/gpu_check.py --out DIR
                                                   # any machine: the gpu scale's dry run (2 steps of batch 2,
                                                   # 5 sequences) to check this script; its numbers measure
                                                   # nothing, and it writes to DIR (default: a temporary
                                                   # folder), never to assets/

The entry is built in the cache like any zoo entry (`python -m minialbert zoo --only albert-sop --scale
gpu` builds the same one); a second run reads it and measures the smoothness again.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
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

from minialbert import zoo  # noqa: E402
from minialbert.download import write_json  # noqa: E402
from minialbert.scale import DRY_RUN_SUFFIX, SCALES, Scale, current_scale  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ENTRY = "albert-sop"
LIBRARIES = ("torch", "triton", "transformers", "numpy", "sentencepiece", "safetensors")
DRY_NOTE = ("a dry run (MINIALBERT_DRY_RUN=1): the gpu scale's code paths at its real shapes with every step "
            "count and sample size capped; these numbers measure nothing")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", choices=list(SCALES), default="gpu",
                   help="the scale of the zoo entry (default: gpu; $MINIALBERT_DRY_RUN=1 shortens it)")
    p.add_argument("--out", type=Path, default=None,
                   help="folder for benchmarks/ and figures/ (default: assets/; in a dry run a temporary "
                        "folder)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p.parse_args(argv)


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
           "host": platform.node(), "machine": platform.machine(),
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


def step_seconds(records: list[dict]) -> dict:
    """Training seconds per step from an entry's metrics (the train records' cumulative `seconds`, held-out
    evaluations excluded): the mean over the run and the median of step-to-step differences (which leaves
    out the first step's warm-up and the occasional checkpoint)."""
    train = sorted((r["step"], r["seconds"]) for r in records if r.get("split") == "train" and "seconds" in r)
    if not train:
        return {"steps": 0, "seconds": None, "mean": None, "median": None}
    steps, seconds = train[-1]
    diffs = [(b - a) / (j - i) for (i, a), (j, b) in zip(train, train[1:]) if j > i]
    return {"steps": steps, "seconds": seconds, "mean": seconds / steps,
            "median": statistics.median(diffs) if diffs else seconds / steps}


def zoo_entry(scale: Scale, progress: bool) -> dict:
    """Build the entry if it is missing (training on the GPU) and read what it measured."""
    start = time.perf_counter()
    zoo.build([ENTRY], scale, progress=progress)
    row = zoo.status(scale, [ENTRY])[0]
    args = zoo.entry_args(zoo.entry(ENTRY), scale)
    cfg = zoo.entry_config(zoo.entry(ENTRY), scale)
    return {"name": ENTRY, "dir": row["dir"], "state": row["state"],
            "build_seconds_this_run": round(time.perf_counter() - start, 1),
            "model": {"preset": scale.albert_preset, "hidden_size": cfg.hidden_size,
                      "num_layers": cfg.num_layers, "embedding_size": cfg.embedding_size,
                      "vocab_size": cfg.vocab_size, "max_position_embeddings": cfg.max_position_embeddings,
                      "sharing": cfg.sharing},
            "train": {"steps": args.steps, "batch_size": args.batch_size, "optimizer": args.optimizer,
                      "lr": args.lr, "seq_len": scale.max_seq_len},
            "seconds_per_step": step_seconds(zoo.metrics(ENTRY, scale)),
            "heldout_evaluation": zoo.evaluation(ENTRY, scale)}


def smoothness(scale: Scale, device: torch.device, figure: Path, progress: bool) -> dict:
    """The entry's layer-wise L2 / angle curves on the scale's held-out test sequences (lesson 06's
    definition and sample), saved as a figure with its numbers; returns the numbers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minialbert.analysis import DEFINITION, heldout_batches, interval_note, layer_transitions
    from minialbert.course import course_pretraining_data
    from minialbert.plots import plot_layer_transitions, save_figure

    batches = heldout_batches(course_pretraining_data("mlm", "test", scale), scale.smoothness_sequences,
                              scale.smoothness_batch)
    model = zoo.load(ENTRY, scale, progress=False).to(device)
    start = time.perf_counter()
    result = layer_transitions(model, batches, progress=progress).to_dict()
    seconds = time.perf_counter() - start
    axes = plot_layer_transitions({ENTRY: result})
    numbers = {"definition": DEFINITION, "sequences": result["sequences"],
               "interval": interval_note(result["sequences"]), "split": "test", "tokens": "all",
               "standardize": False, "scale": scale.name, "device": device.type, "seconds": round(seconds, 2),
               "checkpoints": {ENTRY: str(zoo.entry_dir(zoo.entry(ENTRY), scale))},
               "results": {ENTRY: result}}
    path = save_figure(axes[0].figure, figure.name, numbers, figure.parent)
    plt.close(axes[0].figure)
    return {**numbers, "figure": str(path)}


def run(scale: Scale, out: Path, progress: bool = True) -> Path:
    """The check at `scale`; returns the JSON file written under out/benchmarks."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env = environment(device)
    name = f"gpu_check_{slug(env, is_dry(scale))}"
    entry = zoo_entry(scale, progress)
    curves = smoothness(scale, device, out / "figures" / f"{name}_layer_transitions", progress)
    record = {"what": "make gpu-check: one gpu-scale zoo entry (held-out evaluation, training seconds per "
                      "step) and its layer-wise smoothness (benchmarks/gpu_check.py)",
              "dry_run": is_dry(scale), "scale": scale.name, "environment": env, "zoo_entry": entry,
              "smoothness": curves}
    if is_dry(scale):
        record["note"] = DRY_NOTE
    return write_json(out / "benchmarks" / f"{name}.json", record)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scale = current_scale(args.scale)
    problem = refusal(scale)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    out = args.out or (Path(tempfile.mkdtemp(prefix="gpu-check-")) if is_dry(scale) else REPO / "assets")
    path = run(scale, out, progress=not args.quiet)
    print(f"wrote {path}" + (f" ({DRY_NOTE})" if is_dry(scale) else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
