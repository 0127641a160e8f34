"""The gpu scale, end to end on a CPU: MINIALBERT_SCALE=gpu MINIALBERT_DRY_RUN=1.

The dry run keeps the gpu scale's model (H = 768, 12 layers, 6000 pieces, 256 positions) and caps
every step count and sample size (minialbert.course.scale.DRY_RUN), so the CLI paths below run the gpu
scale's real shapes in seconds per step. Selected with `pytest -k gpu_dry_run`; the slow ones still
run in `make test`. Every run writes into a temporary cache, never ~/.cache/minialbert.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minialbert.course.commands import main
from minialbert.course.experiments.ablation import heldout, sampled
from minialbert.course.figures import make_figures
from minialbert.course.lessons import lesson_sizes
from minialbert.course.plots import ROOT, figure_dir
from minialbert.course.scale import (
    DRY_RUN,
    DRY_RUN_SUFFIX,
    DRY_RUN_VAR,
    ENV_VAR,
    SCALES,
    current_scale,
    dry_run,
)
from minialbert.evaluation import evaluation_sample

GPU = SCALES["gpu"]
# Fields a dry run keeps from its scale, and why; every other field must be in DRY_RUN (capped).
KEPT = {"name": "set by dry_run: <name>-dry", "figure_subdir": "set by dry_run: <subdir>-dry",
        "albert_preset": "the model's sizes", "bert_preset": "the BERT twin's sizes",
        "learning_rate": "not a size", "mask_rate": "a share, not a size", "optimizer": "not a size",
        "zoo_threads": "torch threads of a zoo build (same bytes on a rebuild), not a size",
        "data_shards": "the pretraining sets' random streams (their layout), not a size"}
# The lessons' sizes a dry run keeps (course/lessons.py, dry_run_sizes), and why; every other count is capped.
LESSON_KEPT = {"speed.presets": "names of the models lesson 09 times (speed.repeats caps the work)",
               "downstream.finetune.seed": "a seed, not a size",
               "downstream.finetune.patience": "evaluations without progress, not a size",
               **{f"order_control.{f}": "the positive control's model, not a count of steps or samples"
                  for f in ("vocab_size", "embedding_size", "hidden_size", "num_layers", "num_heads",
                            "intermediate_size")},
               "order_control.context_sentences": "the downstream question's context, not a count of samples",
               "long_text.context_sentences": "the downstream question's context, not a count of samples"}
# Caps above CAP: a corpus cap the 6000-piece tokenizer needs, lengths and sizes that are not counts
# of steps or samples, and a divisor (larger is smaller).
CAP = 16
BOUNDS = {"max_documents": 800, "order_control.train_documents": 200,    # text enough for its tokenizer
          "order_control.max_seq_len": GPU.data.max_seq_len,
          "long_text.choice.max_seq_len": GPU.data.max_seq_len,
          "attention.kernel_check_len": 130, "tokenizers.vocab_sizes": GPU.data.vocab_size,
          "attention.seq_lens": GPU.data.max_seq_len, "downstream.finetune.max_seq_len": GPU.data.max_seq_len}
AT_LEAST = {"narrow_by": 8}


def leaves(obj, prefix: str = ""):
    """(dotted name, value) of every field of a dataclass, nested dataclasses walked."""
    for f in dataclasses.fields(obj):
        value, name = getattr(obj, f.name), prefix + f.name
        if dataclasses.is_dataclass(value):
            yield from leaves(value, name + ".")
        else:
            yield name, value


def assert_capped(field: str, value, real) -> None:
    """A dry run's `field` is a small count (at most CAP, or its BOUNDS), no larger than the real scale's."""
    if isinstance(value, bool) or isinstance(value, float | str):
        return
    if field in AT_LEAST:
        assert value >= max(AT_LEAST[field], real), field
        return
    bound = BOUNDS.get(field, CAP)
    assert isinstance(value, int | tuple), f"{field} = {value!r}: a dry run caps it with a number"
    for v in value if isinstance(value, tuple) else (value,):
        assert isinstance(v, int) and 1 <= v <= bound, f"{field} = {value!r} is not capped at {bound}"
    if isinstance(value, tuple):
        assert 1 <= len(value) <= 2, f"{field} = {value!r}: at most two points in a dry run"
    elif real is not None:
        assert value <= real, f"{field} = {value} is larger than the gpu scale's {real}"


def finite(value) -> bool:
    """Every number in a JSON value is finite (and there is at least one)."""
    numbers = []

    def walk(v):
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return
        if isinstance(v, int | float):
            numbers.append(float(v))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list | tuple):
            for x in v:
                walk(x)
    walk(value)
    return bool(numbers) and all(math.isfinite(x) for x in numbers)


def test_gpu_dry_run_scale_keeps_the_model_and_caps_every_size(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "gpu")
    monkeypatch.setenv(DRY_RUN_VAR, "1")
    dry = current_scale()
    assert dry.name == "gpu" + DRY_RUN_SUFFIX and dry.figure_subdir == "gpu" + DRY_RUN_SUFFIX
    assert dry.models == GPU.models
    sizes = (dry.data.max_seq_len, dry.data.vocab_size)
    assert sizes == (GPU.data.max_seq_len, GPU.data.vocab_size) == (256, 6000)
    cfg = dry.model_config("albert")
    assert (cfg.hidden_size, cfg.num_layers, cfg.max_position_embeddings) == (768, 12, 256)
    assert dry.data.corpus == "pydocs" and dry.zoo.on_demand and dry.is_dry_run and dry.base_name == "gpu"
    assert not GPU.is_dry_run and not GPU.zoo.on_demand
    # one switch, resolved at the edge: the name of a dry run resolves to it, and it is idempotent
    assert current_scale(dry.name) == dry == dry_run(dry) == current_scale("gpu")
    monkeypatch.setenv(DRY_RUN_VAR, "0")
    assert current_scale() is GPU and current_scale(dry.name) == dry
    monkeypatch.delenv(DRY_RUN_VAR)
    assert current_scale() is GPU

    names = set(GPU.fields())                    # every field of every part, flat (Scale.of's keywords)
    assert not set(DRY_RUN) & set(KEPT)
    assert names == set(DRY_RUN) | set(KEPT), (
        f"every Scale field is capped by DRY_RUN or kept on purpose (KEPT); not decided: "
        f"{sorted(names - set(DRY_RUN) - set(KEPT))}")
    for field in sorted(names - set(KEPT)):
        assert_capped(field, dry.fields()[field], GPU.fields()[field])


def test_gpu_dry_run_caps_what_every_lesson_measures(monkeypatch):
    """Every count of the lessons' sizes is capped in a dry run, except those kept on purpose."""
    monkeypatch.setenv(ENV_VAR, "gpu")
    monkeypatch.setenv(DRY_RUN_VAR, "1")
    dry, real = lesson_sizes(current_scale()), dict(leaves(lesson_sizes(GPU)))
    assert not dry.read_results
    capped = 0
    for field, value in leaves(dry):
        if field in LESSON_KEPT:
            assert value == real[field], f"{field}: kept from the gpu scale ({LESSON_KEPT[field]})"
            continue
        assert_capped(field, value, real[field])
        capped += value != real[field]
    assert capped >= 25, f"only {capped} of the lessons' sizes differ from the gpu scale's in a dry run"


def test_gpu_dry_run_sampled_heldout_is_a_subset(monkeypatch, tmp_path):
    """The ablation's held-out sets at a dry run: scale.recipe.eval_examples of the pairs, seeded, intact."""
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    scale = dry_run(SCALES["ci"])                       # ci's sizes: seconds; the rule is the same
    for objective in ("mlm", "sop"):
        data = heldout(objective, scale.data, scale.recipe.eval_examples)
        assert len(data) == scale.recipe.eval_examples
        full = heldout(objective, scale.data, None)
        assert sampled(full, None) is full and sampled(full, len(full) + 1) is full
        at = evaluation_sample(full, scale.recipe.eval_examples)
        for j, i in enumerate(at):
            assert data[j].keys() == full[i].keys()
            assert all(torch.equal(data[j][k], full[i][k]) for k in data[j])


@pytest.fixture(scope="module")
def gpu_dry(tmp_path_factory):
    """A temporary cache and the gpu scale in dry-run mode, for the whole module."""
    root = tmp_path_factory.mktemp("gpu_dry_run")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINIALBERT_CACHE", str(root / "cache"))
        mp.setenv(ENV_VAR, "gpu")
        mp.setenv(DRY_RUN_VAR, "1")
        yield root


def run(argv: list[str], capsys) -> dict | None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, f"{' '.join(argv)} failed: {err[-2000:]}"
    start = out.find("{")
    return json.loads(out[start:]) if start >= 0 and out.rstrip().endswith("}") else None


def assert_gpu_model(run_dir: Path) -> None:
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["hidden_size"], config["num_layers"], config["max_position_embeddings"],
            config["vocab_size"]) == (768, 12, 256, 6000)


@pytest.mark.slow
def test_gpu_dry_run_pretrain_evaluate_smoothness_finetune(gpu_dry, capsys):
    out = gpu_dry / "pretrain"
    result = run(["pretrain", "--out", str(out), "--quiet"], capsys)
    dry = current_scale()
    assert result["steps"] == dry.recipe.pretrain_steps and finite(result)
    assert result["valid_eval_examples"] == dry.recipe.eval_examples
    assert_gpu_model(out)
    assert (out / "checkpoints").is_dir() and (out / "metrics.jsonl").is_file()

    evaluation = run(["evaluate", "--checkpoint", str(out), "--json"], capsys)
    assert evaluation["examples"] == dry.recipe.eval_examples
    assert evaluation["step"] == dry.recipe.pretrain_steps
    assert finite(evaluation["mlm"]) and 0 <= evaluation["mlm"]["mask"]["accuracy"] <= 1

    figures = gpu_dry / "figures"
    paths = run(["smoothness", "--checkpoint", str(out), "--quiet", "--out", str(figures)], capsys)
    numbers = json.loads(Path(paths["json"]).read_text())
    assert Path(paths["figure"]).stat().st_size > 0 and numbers["scale"] == dry.name
    assert numbers["sequences"] == lesson_sizes(dry).smoothness.sequences      # the sample, capped
    (layers,) = [r["layers"] for r in numbers["results"].values()]
    assert len(layers) == 12 and finite(numbers["results"])

    tuned = run(["finetune", "--task", "shuffled-words", "--checkpoint", str(out), "--labels", "4",
                 "--out", str(gpu_dry / "finetune"), "--quiet"], capsys)
    assert tuned["labels"] == 4 and finite(tuned["dev"]) and finite(tuned["test"])
    records = (gpu_dry / "finetune" / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in records]
    assert max(steps) <= lesson_sizes(dry).downstream.finetune.steps


@pytest.mark.slow
def test_gpu_dry_run_zoo_and_ablation(gpu_dry, capsys):
    summary = gpu_dry / "zoo.json"
    run(["zoo", "--only", "albert-sop", "--quiet", "--out", str(summary)], capsys)
    written = json.loads(summary.read_text())
    (row,) = written["entries"]
    dry = current_scale()
    assert written["scale"] == dry.name and row["state"] == "built" and row["steps"] == dry.zoo.steps
    (entry_dir,) = (gpu_dry / "cache" / "zoo" / dry.name).glob("albert-sop-*")
    assert_gpu_model(entry_dir)
    assert finite(json.loads((entry_dir / "evaluation.json").read_text())["mlm"])

    out = gpu_dry / "ablation"
    run(["ablation", "--arms", "sop", "--no-downstream", "--quiet", "--out", str(out)], capsys)
    result = json.loads((out / "nsp_vs_sop.json").read_text())
    assert (out / "nsp_vs_sop.png").stat().st_size > 0
    assert result["scale"] == dry.name and result["arms"] == ["sop"] and result["seeds"] == [0]
    assert all(h["examples"] == dry.recipe.eval_examples for h in result["heldout"].values())
    assert [r["arm"] for r in result["runs"]] == ["random init", "sop"]
    assert finite(result["summary"])


@pytest.mark.slow
def test_gpu_dry_run_figures_write_the_dry_runs_folder(gpu_dry):
    """`figures` at the gpu dry run computes a figure on the dry run's data and writes it under
    assets/figures/gpu-dry (ignored by git), never into the committed figures."""
    dry = current_scale()
    (png, numbers) = make_figures(dry, only=["ngram_span_lengths"])
    assert png.parent == figure_dir(dry) == ROOT / "assets" / "figures" / "gpu-dry"  # ignored by git
    written = json.loads(numbers.read_text())
    assert written["scale"] == dry.name and png.stat().st_size > 0 and finite(written["shares"])


# ----------------------------------------------- make gpu-check: its recipe and the budgeted run
REPO = Path(__file__).resolve().parent.parent
GPU_CHECK = REPO / "benchmarks" / "gpu_check.py"


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", GPU_CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_dry_run_make_gpu_check_unpacks_then_runs_the_budgeted_check_last():
    """The recipe, as make expands it for a machine without network (PY=python3, a pack, a budget): the
    one-line refusal first, the pack unpacked, the compiled kernel tests (not the compile-for-target ones),
    the attention benchmark at ALBERT's lengths, then benchmarks/gpu_check.py with the budget; no install."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # make test
    result = subprocess.run(["make", "-n", "--no-print-directory", "gpu-check", "PY=python3", "PACK=pack.bin",
                             "MINUTES=2"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    commands = result.stdout.strip().splitlines()
    assert commands[0] == "python3 benchmarks/attention.py --check-gpu"
    assert commands[1] == "python3 -m minialbert unpack pack.bin"
    assert commands[2] == ("python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py "
                           '-k "not compile and not benchmark"')
    assert commands[3].startswith("python3 benchmarks/attention.py --dtypes bfloat16 --head-configs 12x64 ")
    assert commands[4:] == ["python3 benchmarks/gpu_check.py --minutes 2"], commands


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on machines without a GPU")
def test_gpu_dry_run_gpu_check_refuses_in_one_line_without_cuda(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in (DRY_RUN_VAR, "TRITON_INTERPRET")}
    env["MINIALBERT_CACHE"] = str(tmp_path / "cache")
    result = subprocess.run([sys.executable, str(GPU_CHECK)], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-check: no CUDA GPU found"), result.stderr
    assert "make gpu-check" in lines[0]
    assert not (tmp_path / "cache").exists()                 # refused before any work


def test_gpu_dry_run_gpu_check_step_seconds_and_names():
    check = load_gpu_check()
    records = [{"step": s, "split": "train", "seconds": t}
               for s, t in ((1, 5.0), (2, 6.0), (3, 7.0), (4, 9.0))]
    records.insert(2, {"step": 2, "split": "valid", "seconds": 6.0})
    timing = check.step_seconds(records)
    assert timing == {"steps": 4, "seconds": 9.0, "mean": 2.25, "median": 1.0}
    assert check.step_seconds([])["mean"] is None
    env = {"gpu": "NVIDIA H100 80GB HBM3"}
    assert check.slug(env, dry=False) == "nvidia-h100-80gb-hbm3" and check.slug(env, dry=True) == "dry-run"
    overrides = check.parse_args(["--set", "initializer_range=0.01"]).overrides
    assert overrides == [("initializer_range", 0.01)] and check.parse_args([]).overrides == []
    assert check.record_name(env, False, []) == "gpu_check_nvidia-h100-80gb-hbm3"
    variant = check.record_name(env, False, overrides)
    assert variant == "gpu_check_nvidia-h100-80gb-hbm3_initializer_range-0.01"
    assert check.refusal(dry_run(GPU)) is None               # a dry run runs anywhere
    assert set(check.versions()) == {"python", *check.LIBRARIES}


def test_gpu_dry_run_budgeted_steps_and_schedule():
    """The run is sized to the steps that fit in the budget at the measured step time (at least one, at
    most the scale's), and the scale's warmup share and linear decay to 0 are sized to those steps."""
    from minialbert.optim import warmup_linear_decay

    check = load_gpu_check()
    assert check.budgeted_steps(150.0, 0.064, GPU.recipe.pretrain_steps) == 2343  # 2.5 min at 64 ms a step
    assert check.budgeted_steps(150.0, 0.0641, 10_000) == 2340                   # rounded down: it fits
    assert check.budgeted_steps(1.0, 5.0, 100) == 1 and check.budgeted_steps(1e6, 0.01, 500) == 500
    for bad in ((0.0, 0.1), (10.0, 0.0), (10.0, float("nan"))):
        with pytest.raises(ValueError, match="step time > 0"):
            check.budgeted_steps(*bad, 10)
    plan = check.budgeted_schedule(GPU, 2343)
    share = GPU.recipe.warmup_steps / GPU.recipe.pretrain_steps
    assert plan["warmup"] == round(2343 * share) and plan["steps"] == 2343
    assert (plan["lr"], plan["optimizer"], plan["batch_size"]) == (GPU.recipe.learning_rate,
                                                                   GPU.recipe.optimizer, 128)
    assert plan["eval_every"] == 2343 // check.CURVE_POINTS
    assert check.budgeted_schedule(GPU, 3)["warmup"] == 1                        # never 0 warmup steps
    dry = dry_run(GPU)
    assert check.budgeted_schedule(dry, dry.recipe.pretrain_steps)["warmup"] <= dry.recipe.pretrain_steps
    # the learning rate the run follows: up to the peak at the end of warmup, down to 0 at the last step
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=plan["lr"])
    schedule = warmup_linear_decay(optimizer, plan["warmup"], plan["steps"])
    rates = []
    for _ in range(plan["steps"]):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    peak = rates.index(max(rates))
    assert peak == plan["warmup"] and max(rates) == pytest.approx(plan["lr"])
    assert all(a < b for a, b in zip(rates[:peak], rates[1:peak + 1]))
    assert all(a > b for a, b in zip(rates[peak:], rates[peak + 1:])) and rates[-1] < plan["lr"] / 100


@pytest.mark.slow
def test_gpu_dry_run_gpu_check_writes_its_json(gpu_dry, tmp_path, capsys):
    """The budgeted run at the gpu scale's dry run, end to end: data, step timing, training sized to the
    budget, held-out evaluation beside the baselines, smoothness numbers and figure, the machine, the
    summary table printed last; marked as a dry run that measures nothing, and nothing under assets/."""
    check = load_gpu_check()
    assets = sorted((REPO / "assets" / "benchmarks").iterdir())
    assert check.main(["--out", str(tmp_path), "--quiet", "--minutes", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "measure nothing" in out and "left the plateau" in out and "[MASK] accuracy" in out
    assert sorted((REPO / "assets" / "benchmarks").iterdir()) == assets
    written = json.loads((tmp_path / "benchmarks" / "gpu_check_dry-run.json").read_text())
    dry = current_scale()
    assert written["dry_run"] is True and "measure nothing" in written["note"]
    assert written["scale"] == dry.name
    env = written["environment"]
    assert env["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert env["versions"]["torch"] and env["versions"]["python"]
    run = written["run"]
    assert run["name"] == "albert-sop" and run["budget_minutes"] == 0.5
    assert (run["model"]["hidden_size"], run["model"]["num_layers"]) == (768, 12)
    assert 1 <= run["train"]["steps"] <= dry.recipe.pretrain_steps               # the dry run's cap
    assert run["seconds_per_step"]["steps"] == run["train"]["steps"] and run["seconds_per_step"]["mean"] > 0
    assert run["calibration"]["seconds_per_step"] > 0
    assert run["curve"] and run["curve"][-1]["step"] == run["train"]["steps"]
    evaluation = run["heldout_evaluation"]
    assert finite(evaluation["mlm"]) and set(evaluation["baselines"]) >= {"unigram"}
    assert len(evaluation["sentence"]["predicted_shares"]) == 2
    assert run["left_plateau"] == check.left_plateau(evaluation)
    curves = written["smoothness"]
    (result,) = curves["results"].values()
    assert len(result["layers"]) == 12 and curves["sequences"] == lesson_sizes(dry).smoothness.sequences
    assert finite(curves["results"])
    assert (tmp_path / "figures" / "gpu_check_dry-run_layer_transitions.png").stat().st_size > 0
    assert curves["figure"] is None             # outside the repository: the record names no machine path
    assert check.repository_path(REPO / "assets" / "figures" / "x.png") == "assets/figures/x.png"
