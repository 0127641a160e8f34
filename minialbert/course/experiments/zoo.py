"""The course model zoo: the named pretraining runs the replication lessons share, shipped and cached.

Every entry (zoo_entries.py) is the scale's ALBERT (or its BERT twin) trained with the scale's one
recipe on the same data for the same number of steps; entries differ only in what their name says
(objective, architecture, sharing, embedding size, seed, length-balanced pairs, a lesson's or a long
budget, ALBERT's own optimizer at twice the width), so any two of them can be compared. An entry is a
normal run directory (config.json, metrics.jsonl, checkpoints/, evaluation.json) named <name>-<key>,
where key hashes the model config, the training arguments, the training data's key and RECIPE_VERSION.
It lives in one of two places:

    zoo/v<ZOO_FORMAT>/<scale>/<name>-<key>     shipped with the repository (course scale): weights
                                               only, every file listed with its sha256 in the
                                               folder's MANIFEST.json and checked when read
    cache_dir()/zoo/<scale>/<name>-<key>       built here by `python -m minialbert zoo`

`load` uses the shipped entry when its key matches the recipe, else the built one, and never trains
silently: where neither exists it raises ZooEntryMissing, naming the command and its cost (only
scales whose whole zoo takes seconds, `zoo_on_demand`, build on demand, saying so). A changed
recipe gets a new key, so it can never load stale weights. `zoo --rebuild NAME` retrains an entry
from scratch and compares its weights with the shipped ones; `zoo --ship` copies built entries into
the shipped folder (zoo_ship.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ...checkpoint import (
    load_checkpoint,
    newest_verified_checkpoint,
    read_json,
    recover_run,
    step_checkpoints,
)
from ...config import AlbertConfig
from ...download import cache_dir, sha256_of, write_json
from ...evaluation import MLMBaselines, evaluate_pretraining, pretraining_evaluator
from ...model import AlbertForPretraining
from ...pretraining_dataset import PretrainingDataset
from ...run_directory import read_metrics, run_lock
from ...train import RunOptions, TrainArgs, pretrain
from ..data import course_pretraining_data, pretraining_data_key
from ..scale import Models, Recipe, Scale, ZooBudget
from .zoo_entries import ENTRIES, Entry

RECIPE_VERSION = 3        # bump when a code change alters what the same settings train to
ZOO_FORMAT = 1            # the shipped folder's layout (zoo/v<ZOO_FORMAT>/)
SHIPPED_ROOT = Path(__file__).resolve().parents[3] / "zoo" / f"v{ZOO_FORMAT}"
SHIPPED_MANIFEST = "MANIFEST.json"   # {"entries": {name: dir name}, "files": {path: sha256}, ...}
CURVE_EXAMPLES = 10_000              # held-out examples per evaluation along training (all when fewer)
# Optimizers keyed by the name they had when the entries trained with them were keyed (optim.py: LAMB with
# one trust ratio for the fused q, k, v weight was "lamb" until LAMB took one per variable).
KEYED_AS = {"lamb-fused-qkv": "lamb"}
# Arguments that only change how often a run reports or saves, not the weights it ends with.
NOT_IN_KEY = ("eval_every", "eval_examples", "checkpoint_every", "keep_last")


def entry(name: str) -> Entry:
    if name not in ENTRIES:
        raise ValueError(f"unknown zoo entry {name!r}; choose one of {', '.join(ENTRIES)}")
    return ENTRIES[name]


def entry_config(e: Entry, models: Models) -> AlbertConfig:
    return models.config(e.arch, **dict(e.changes))


def entry_args(e: Entry, recipe: Recipe, budget: ZooBudget) -> TrainArgs:
    steps = {"zoo": budget.steps, "lesson": recipe.pretrain_steps, "long": 4 * budget.steps,
             "trunk": budget.steps // 2, "branch": max(1, budget.steps // 4)}[e.budget]
    eval_every = max(1, steps // budget.evals)
    warmup = min(steps, round(recipe.warmup_steps * e.warmup_factor))
    # Every evaluation's checkpoint is kept: the lessons study how a model changes along training. The
    # evaluations along training read a fixed sample of the held-out split; evaluation.json all of it.
    return recipe.train_args(objective=e.objective, seed=e.seed, steps=steps, eval_every=eval_every,
                             lr=recipe.learning_rate * e.lr_factor, warmup=warmup,
                             optimizer=e.optimizer or recipe.optimizer,
                             checkpoint_every=eval_every, keep_last=budget.evals + 1,
                             eval_examples=min(CURVE_EXAMPLES, recipe.eval_examples or CURVE_EXAMPLES))


class ZooEntryMissing(FileNotFoundError):
    """A zoo entry is neither shipped for the scale's recipe nor built in the cache."""


class ShippedEntryDamaged(ValueError):
    """A shipped entry's files disagree with MANIFEST.json (state "damaged"), or the manifest itself is
    missing or unreadable (state "unverifiable"); the message names the file and the fix."""

    def __init__(self, message: str, state: str):
        super().__init__(message)
        self.state = state


def entry_key(e: Entry, scale: Scale) -> str:
    """<name>-<key>: the entry's name and a hash of everything that decides its weights."""
    args = dataclasses.asdict(entry_args(e, scale.recipe, scale.zoo))
    args = {k: v for k, v in args.items() if k not in NOT_IN_KEY}
    args["optimizer"] = KEYED_AS.get(args["optimizer"], args["optimizer"])
    settings = {"config": entry_config(e, scale.models).to_dict(), "args": args, "recipe": RECIPE_VERSION,
                "data": pretraining_data_key(e.objective, "train", scale.data, e.balanced, e.segmenting,
                                             entry_seq_len(e, scale.models))}
    if e.start_from:                                # only when set: the entries from scratch keep their keys
        settings["start_from"] = entry_key(entry(e.start_from), scale)
    return f"{e.name}-{hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]}"


def entry_seq_len(e: Entry, models: Models) -> int:
    """Tokens per pretraining example of an entry: its model's positions (the scale's, unless changed)."""
    return entry_config(e, models).max_position_embeddings


def entry_data(name: str, split: str, scale: Scale) -> PretrainingDataset:
    """The pretraining set an entry trains on ("train") or its held-out pairs, cut the same way ("valid",
    "test"): its objective's examples, at its length, with its segmenting and length balancing."""
    e = entry(name)
    return course_pretraining_data(e.objective, split, scale.data, e.balanced, segmenting=e.segmenting,
                                   max_seq_len=entry_seq_len(e, scale.models))


def cache_entry_dir(e: Entry, scale: Scale) -> Path:
    """Where `python -m minialbert zoo` builds the entry."""
    return cache_dir() / "zoo" / scale.name / entry_key(e, scale)


def shipped_folder(scale_name: str) -> Path:
    """The repository's folder of a scale's shipped entries and their MANIFEST.json."""
    return SHIPPED_ROOT / scale_name


def shipped_entry_dir(e: Entry, scale: Scale) -> Path | None:
    """The entry shipped with the repository for exactly this recipe (None: none is)."""
    path = shipped_folder(scale.name) / entry_key(e, scale)
    return path if path.is_dir() else None


def entry_dir(e: Entry, scale: Scale) -> Path:
    """Where the entry is read from: the shipped folder when it holds this recipe's entry, else the cache."""
    return shipped_entry_dir(e, scale) or cache_entry_dir(e, scale)


def verify_shipped(run_dir: Path) -> None:
    """Check every file of a shipped entry against its folder's MANIFEST.json; a one-line error names a
    damaged, missing or unlisted file."""
    manifest_path = run_dir.parent / SHIPPED_MANIFEST
    try:
        files = json.loads(manifest_path.read_text())["files"]
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise TypeError("its 'files' is not a mapping of paths to sha256")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ShippedEntryDamaged(f"zoo manifest {manifest_path} is missing or damaged ({e}); restore the "
                                  "zoo/ folder from the repository (git checkout -- zoo)",
                                  "unverifiable") from None
    listed = {p for p in files if p.startswith(run_dir.name + "/")}
    present = {str(p.relative_to(run_dir.parent)) for p in run_dir.rglob("*") if p.is_file()}
    if not listed:
        raise ShippedEntryDamaged(f"zoo manifest {manifest_path} lists no file of {run_dir.name}; restore "
                                  "the zoo/ folder from the repository (git checkout -- zoo)", "unverifiable")
    for path in sorted(listed | present):
        if path not in files:
            raise ShippedEntryDamaged(f"zoo file {run_dir.parent / path} is not in {manifest_path}; remove "
                                      "it or restore the zoo/ folder (git checkout -- zoo)", "damaged")
        if path not in present or sha256_of(run_dir.parent / path) != files[path]:
            state = "missing" if path not in present else "damaged (its sha256 differs from the manifest)"
            name = run_dir.name.rsplit("-", 1)[0]
            raise ShippedEntryDamaged(f"zoo file {run_dir.parent / path} is {state}; restore it with "
                                      "`git checkout -- zoo`, or rebuild the entry with "
                                      f"`python -m minialbert zoo --rebuild {name}`", "damaged")


def _readable_dir(name: str, scale: Scale) -> Path:
    """The entry's directory, verified if shipped."""
    if (shipped := shipped_entry_dir(entry(name), scale)) is not None:
        verify_shipped(shipped)
        return shipped
    return cache_entry_dir(entry(name), scale)


def _steps_done(run_dir: Path) -> int:
    """Steps of the entry's newest checkpoint that verifies against its checksums; 0 if there is none."""
    ckpt = newest_verified_checkpoint(run_dir)
    return read_json(ckpt / "trainer_state.json")["step"] if ckpt else 0


def status(scale: Scale, names: Sequence[str] | None = None) -> list[dict]:
    """One row per entry: name, steps done of total, its state and the estimated minutes left. The state
    is shipped (every file verified against MANIFEST.json, here: about 0.2 s for the course zoo's 47 MB),
    damaged or unverifiable (shipped, but a file or the manifest is not as shipped: "problem" says which
    and what to do), built, partial or missing."""
    rows = []
    for name in names or ENTRIES:
        e = entry(name)
        steps = entry_args(e, scale.recipe, scale.zoo).steps
        if (shipped := shipped_entry_dir(e, scale)) is not None:
            row = {"name": name, "state": "shipped", "steps_done": steps, "steps": steps, "minutes_left": 0.0,
                   "dir": str(shipped), "about": e.about}
            try:
                verify_shipped(shipped)
            except ShippedEntryDamaged as damage:
                row.update(state=damage.state, problem=str(damage))
            rows.append(row)
            continue
        run_dir = cache_entry_dir(e, scale)
        done = _steps_done(run_dir)
        state = "built" if done >= steps and (run_dir / "evaluation.json").exists() else (
            "partial" if done else "missing")
        # a step costs about in proportion to the layers run (the recipe's step_seconds: the scale's own
        # model's); None: not measured at this scale
        depth = entry_config(e, scale.models).num_layers / scale.model_config(e.arch).num_layers
        seconds = scale.recipe.step_seconds
        minutes = (steps - done) * seconds * depth / 60 if seconds else None
        rows.append({"name": name, "state": state, "steps_done": done, "steps": steps,
                     "minutes_left": minutes, "dir": str(run_dir),
                     "about": e.about})
    return rows


def available(row: dict) -> bool:
    return row["state"] in ("shipped", "built")


def load(name: str, scale: Scale, progress: bool = True,
         callbacks: Iterable[Callable[[dict], None]] = ()) -> AlbertForPretraining:
    """The trained model of a zoo entry, in eval mode: shipped (verified) or built.

    Never trains silently: an entry that is neither raises ZooEntryMissing with the command that
    builds it and its cost, except at scales whose entries take seconds (scale.zoo.on_demand),
    which build it here and say so. The key in the directory name guarantees the weights come from
    exactly the scale's recipe.
    """
    e = entry(name)
    row = status(scale, [name])[0]
    if "problem" in row:
        raise ShippedEntryDamaged(row["problem"], row["state"])
    if not available(row):
        command = f"python -m minialbert zoo --only {name} --scale {scale.name}"
        if not scale.zoo.on_demand:
            raise ZooEntryMissing(
                f"zoo entry {name!r} ({scale.name} scale) is neither shipped for this recipe nor built "
                f"({row['state']}, {row['steps_done']}/{row['steps']} steps); `{command}` trains it "
                f"({_minutes(row['minutes_left'])})")
        print(f"zoo entry {name!r} ({scale.name} scale) is {row['state']}: training "
              f"{row['steps'] - row['steps_done']} steps ({_minutes(row['minutes_left'])}); "
              f"cached in {row['dir']}", flush=True)
        _train(e, scale, cache_entry_dir(e, scale), progress, callbacks)
    return load_checkpoint(newest_verified_checkpoint(_readable_dir(name, scale)))


def _train(e: Entry, scale: Scale, run_dir: Path, progress: bool,
           callbacks: Iterable[Callable[[dict], None]] = (), device: str | None = None,
           compile: bool | str = False) -> None:
    args = entry_args(e, scale.recipe, scale.zoo)
    train, valid = entry_data(e.name, "train", scale), entry_data(e.name, "valid", scale)
    # a branch starts from its trunk's final weights (the trunk is built first where it is missing)
    start_state = load(e.start_from, scale, progress).state_dict() if e.start_from else None
    with run_lock(run_dir):          # a second build of this entry stops here, naming the first's PID
        ckpt = recover_run(run_dir)  # damaged checkpoints set aside (reported); verified ones kept
    done = read_json(ckpt / "trainer_state.json")["step"] if ckpt else 0
    if done < args.steps:
        threads = torch.get_num_threads()
        torch.set_num_threads(e.threads or scale.zoo.threads)   # float sums depend on it: pin it
        cfg = entry_config(e, scale.models)
        options = RunOptions(out_dir=run_dir, resume=ckpt is not None, start_state=start_state, device=device,
                             compile=compile, callbacks=callbacks, progress=progress)
        try:
            pretrain(cfg, args, train, pretraining_evaluator(valid, cfg, args), options)
        finally:
            torch.set_num_threads(threads)
    model = load_checkpoint(newest_verified_checkpoint(run_dir))
    result = evaluate_pretraining(model, valid, MLMBaselines.fit(train, model.config.vocab_size),
                                  max_examples=scale.recipe.eval_examples)          # None: the whole split
    write_json(run_dir / "evaluation.json", result)


def _minutes(minutes: float | None) -> str:
    return "time not measured at this scale" if minutes is None else f"about {minutes:.0f} min on 2 cores"


def evaluation(name: str, scale: Scale) -> dict:
    """The held-out evaluation (with baselines) written when the entry was built."""
    path = _readable_dir(name, scale) / "evaluation.json"
    if not path.exists():
        raise FileNotFoundError(f"zoo entry {name!r} is not built at {scale.name} scale; run "
                                f"`python -m minialbert zoo --only {name}`")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"zoo file {path} is damaged ({e}); delete it and run "
                         f"`python -m minialbert zoo --only {name}` to evaluate the entry again") from None


def checkpoints(name: str, scale: Scale) -> dict[int, Path]:
    """step -> checkpoint directory of every checkpoint the entry has kept (one per evaluation), in order."""
    kept = reversed(step_checkpoints(_readable_dir(name, scale)))       # oldest first
    return {int(p.name.removeprefix("step-")): p for p in kept}


def metrics(name: str, scale: Scale) -> list[dict]:
    """The entry's metrics.jsonl records (train steps and held-out evaluations)."""
    return read_metrics(_readable_dir(name, scale))


def build(names: Sequence[str] | None, scale: Scale, progress: bool = True, device: str | None = None,
          compile: bool | str = False) -> list[dict]:
    """Build every missing entry (or those named), one after another, with one progress bar; device and
    compile as for train.pretrain (None: CUDA, MPS or CPU; torch.compile off)."""
    rows = status(scale, names)
    if damaged := [r["problem"] for r in rows if "problem" in r]:     # training would not repair them
        raise ShippedEntryDamaged(f"{len(damaged)} shipped zoo entries are not as shipped; the first: "
                                  f"{damaged[0]}", "damaged")
    todo = [r for r in rows if not available(r)]
    total = sum(r["steps"] - r["steps_done"] for r in todo)
    with tqdm(total=total, disable=not progress, desc=f"zoo ({scale.name})", unit="step") as bar:
        for row in todo:
            if available(status(scale, [row["name"]])[0]):    # built meanwhile by another process
                bar.update(row["steps"] - row["steps_done"])
                continue
            bar.set_postfix_str(row["name"])
            start = time.perf_counter()
            _train(entry(row["name"]), scale, Path(row["dir"]), progress=False,
                   callbacks=[lambda r: bar.update(1) if r["split"] == "train" else None],
                   device=device, compile=compile)
            row["minutes"] = (time.perf_counter() - start) / 60
    return summary(scale, names)


def rebuild(name: str, scale: Scale, progress: bool = True, device: str | None = None,
            compile: bool | str = False) -> dict:
    """Retrain an entry from scratch in the cache (a built one is moved aside first) and compare its
    final weights with the shipped entry's: {"name", "sha256", "shipped_sha256", "identical"}."""
    e = entry(name)
    run_dir = cache_entry_dir(e, scale)
    if run_dir.exists():
        old = run_dir.with_name(f"{run_dir.name}.replaced-{time.strftime('%Y%m%d-%H%M%S')}")
        run_dir.rename(old)
        print(f"moved the built {name} aside to {old}", flush=True)
    _train(e, scale, run_dir, progress, device=device, compile=compile)
    mine = sha256_of(newest_verified_checkpoint(run_dir) / "model.safetensors")
    shipped = shipped_entry_dir(e, scale)
    theirs = sha256_of(newest_verified_checkpoint(shipped) / "model.safetensors") if shipped else None
    return {"name": name, "sha256": mine, "shipped_sha256": theirs, "identical": mine == theirs}


def summary(scale: Scale, names: Sequence[str] | None = None) -> list[dict]:
    """Built entries' held-out numbers: [MASK] accuracy, all predicted, sentence task, minutes trained."""
    rows = []
    for row in status(scale, names):
        if not available(row):
            rows.append({"name": row["name"], "state": row["state"]})
            continue
        ev = evaluation(row["name"], scale)
        records = metrics(row["name"], scale)
        train_seconds = max((r["seconds"] for r in records if "seconds" in r), default=0)
        unigram = ev["baselines"]["unigram"]["mask"]
        rows.append({"name": row["name"], "state": row["state"], "steps": row["steps"],
                     "minutes": train_seconds / 60, "mask_accuracy": ev["mlm"]["mask"],
                     "all_accuracy": ev["mlm"]["all"], "neighbour_mask": ev["baselines"]["neighbour"]["mask"],
                     "unigram_mask": unigram, "sentence": ev.get("sentence"),
                     "left_plateau": left_plateau(records, unigram)})
    return rows


def left_plateau(records: list[dict], unigram: dict) -> int | None:
    """The first held-out evaluation's step whose [MASK] accuracy interval lies wholly above the unigram
    baseline's interval (None: the entry never left the plateau)."""
    for r in records:
        if r.get("split") == "valid" and "mask_ci95" in r and r["mask_ci95"][0] > unigram["ci95"][1]:
            return r["step"]
    return None


def format_summary(rows: list[dict], markdown: bool = False) -> str:
    """The summary as a table for a terminal, or (markdown) for docs/zoo.md."""
    def pct(p):
        return f"{100 * p['accuracy']:.1f}% [{100 * p['ci95'][0]:.1f}, {100 * p['ci95'][1]:.1f}]"
    if markdown:
        head = ("| entry | steps | minutes | held-out `[MASK]` accuracy [95% CI] | unigram / neighbour-count "
                "| all predicted | sentence task (share predicted class 1) | left the plateau at |")
        return "\n".join([head, "|---" * 8 + "|"] + [_markdown_row(r, pct) for r in rows])
    lines = [f"{'entry':22s} {'minutes':>7s} {'[MASK] acc':>20s} {'neighbour':>8s} {'all predicted':>20s} "
             f"{'sentence task (pred. class 1)':>32s}"]
    for r in rows:
        if not available(r):
            lines.append(f"{r['name']:22s} {r['state']}")
            continue
        s = r["sentence"]
        sent = f"{s['task']} {pct(s)} ({100 * s['predicted_shares'][1]:.0f}%)" if s else "-"
        lines.append(f"{r['name']:22s} {r['minutes']:7.1f} {pct(r['mask_accuracy']):>20s} "
                     f"{100 * r['neighbour_mask']['accuracy']:7.1f}% {pct(r['all_accuracy']):>20s} "
                     f"{sent:>32s}")
    return "\n".join(lines)


def _markdown_row(r: dict, pct: Callable[[dict], str]) -> str:
    if not available(r):
        return f"| `{r['name']}` | {r['state']} | | | | | | |"
    s = r["sentence"]
    sentence = f"{s['task'].upper()} {pct(s)} ({100 * s['predicted_shares'][1]:.0f}%)" if s else "-"
    plateau = "never" if r["left_plateau"] is None else f"step {r['left_plateau']:,}"
    return (f"| `{r['name']}` | {r['steps']:,} | {r['minutes']:.1f} | {pct(r['mask_accuracy'])} | "
            f"{100 * r['unigram_mask']['accuracy']:.1f}% / {100 * r['neighbour_mask']['accuracy']:.1f}% | "
            f"{pct(r['all_accuracy'])} | {sentence} | {plateau} |")
