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

The zoo is bound to one scale at the edge, `zoo = Zoo(scale)`, and its methods read that scale. `zoo.load`
uses the shipped entry when its key matches the recipe, else the built one, and never trains silently:
where neither exists it raises ZooEntryMissing, naming the command and its cost (only scales whose whole
zoo takes seconds, `zoo_on_demand`, build on demand, saying so). A changed recipe gets a new key, so it
can never load stale weights. `zoo --rebuild NAME` retrains an entry from scratch and compares its
weights with the shipped ones; `zoo --ship` copies built entries into the shipped folder (zoo_ship.py).
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


def entry_seq_len(e: Entry, models: Models) -> int:
    """Tokens per pretraining example of an entry: its model's positions (the scale's, unless changed)."""
    return entry_config(e, models).max_position_embeddings


def shipped_folder(scale_name: str) -> Path:
    """The repository's folder of a scale's shipped entries and their MANIFEST.json."""
    return SHIPPED_ROOT / scale_name


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


def _steps_done(run_dir: Path) -> int:
    """Steps of the entry's newest checkpoint that verifies against its checksums; 0 if there is none."""
    ckpt = newest_verified_checkpoint(run_dir)
    return read_json(ckpt / "trainer_state.json")["step"] if ckpt else 0


def available(row: dict) -> bool:
    return row["state"] in ("shipped", "built")


def _minutes(minutes: float | None) -> str:
    return "time not measured at this scale" if minutes is None else f"about {minutes:.0f} min on 2 cores"


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


class Zoo:
    """The zoo at one scale, bound once at the edge (`zoo = Zoo(scale)`): its entries' keys, folders,
    states, data and trained models. Every method reads the scale given here; an entry is named by its
    name (zoo_entries.ENTRIES)."""

    # the module's helpers that read no scale, so a lesson's `zoo` is the one name it needs
    entry, available = staticmethod(entry), staticmethod(available)
    format_summary = staticmethod(format_summary)

    def __init__(self, scale: Scale):
        self.scale_name, self.models, self.recipe = scale.name, scale.models, scale.recipe
        self.data, self.budget = scale.data, scale.zoo

    def __repr__(self) -> str:
        return f"Zoo({self.scale_name!r})"

    def __eq__(self, other) -> bool:               # the same parts: the same zoo (a cache key)
        return isinstance(other, Zoo) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(tuple(vars(self).values()))

    def entry_config(self, name: str) -> AlbertConfig:
        return entry_config(entry(name), self.models)

    def entry_args(self, name: str) -> TrainArgs:
        return entry_args(entry(name), self.recipe, self.budget)

    def entry_key(self, name: str) -> str:
        """<name>-<key>: the entry's name and a hash of everything that decides its weights."""
        e = entry(name)
        args = dataclasses.asdict(self.entry_args(name))
        args = {k: v for k, v in args.items() if k not in NOT_IN_KEY}
        args["optimizer"] = KEYED_AS.get(args["optimizer"], args["optimizer"])
        settings = {"config": self.entry_config(name).to_dict(), "args": args, "recipe": RECIPE_VERSION,
                    "data": pretraining_data_key(e.inputs or e.objective, "train", self.data, e.balanced,
                                                 e.segmenting, entry_seq_len(e, self.models))}
        if e.start_from:                            # only when set: the entries from scratch keep their keys
            settings["start_from"] = self.entry_key(e.start_from)
        return f"{e.name}-{hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]}"

    def entry_data(self, name: str, split: str) -> PretrainingDataset:
        """The pretraining set an entry trains on ("train") or its held-out pairs, cut the same way
        ("valid", "test"): its objective's examples (or its inputs' pairs, labels dropped), at its length,
        with its segmenting and length balancing."""
        e = entry(name)
        return course_pretraining_data(e.objective, split, self.data, e.balanced, segmenting=e.segmenting,
                                       max_seq_len=entry_seq_len(e, self.models), inputs=e.inputs)

    def cache_entry_dir(self, name: str) -> Path:
        """Where `python -m minialbert zoo` builds the entry."""
        return cache_dir() / "zoo" / self.scale_name / self.entry_key(name)

    def shipped_entry_dir(self, name: str) -> Path | None:
        """The entry shipped with the repository for exactly this recipe (None: none is)."""
        path = shipped_folder(self.scale_name) / self.entry_key(name)
        return path if path.is_dir() else None

    def entry_dir(self, name: str) -> Path:
        """Where the entry is read from: the shipped folder when it holds this recipe's entry, else the
        cache."""
        return self.shipped_entry_dir(name) or self.cache_entry_dir(name)

    def _readable_dir(self, name: str) -> Path:
        """The entry's directory, verified if shipped."""
        if (shipped := self.shipped_entry_dir(name)) is not None:
            verify_shipped(shipped)
            return shipped
        return self.cache_entry_dir(name)

    def status(self, names: Sequence[str] | None = None) -> list[dict]:
        """One row per entry: name, steps done of total, its state and the estimated minutes left. The
        state is shipped (every file verified against MANIFEST.json, here: about 0.2 s for the course
        zoo's 47 MB), damaged or unverifiable (shipped, but a file or the manifest is not as shipped:
        "problem" says which and what to do), built, partial or missing."""
        rows = []
        for name in names or ENTRIES:
            e = entry(name)
            steps = self.entry_args(name).steps
            if (shipped := self.shipped_entry_dir(name)) is not None:
                row = {"name": name, "state": "shipped", "steps_done": steps, "steps": steps,
                       "minutes_left": 0.0, "dir": str(shipped), "about": e.about}
                try:
                    verify_shipped(shipped)
                except ShippedEntryDamaged as damage:
                    row.update(state=damage.state, problem=str(damage))
                rows.append(row)
                continue
            run_dir = self.cache_entry_dir(name)
            done = _steps_done(run_dir)
            state = "built" if done >= steps and (run_dir / "evaluation.json").exists() else (
                "partial" if done else "missing")
            # a step costs about in proportion to the layers run and the positions each reads (the
            # recipe's step_seconds: the scale's own model's); None: not measured at this scale
            own, base = self.entry_config(name), self.models.config(e.arch)
            size = (own.num_layers * own.max_position_embeddings
                    / (base.num_layers * base.max_position_embeddings))
            seconds = self.recipe.step_seconds
            minutes = (steps - done) * seconds * size / 60 if seconds else None
            rows.append({"name": name, "state": state, "steps_done": done, "steps": steps,
                         "minutes_left": minutes, "dir": str(run_dir), "about": e.about})
        return rows

    def load(self, name: str, progress: bool = True,
             callbacks: Iterable[Callable[[dict], None]] = ()) -> AlbertForPretraining:
        """The trained model of a zoo entry, in eval mode: shipped (verified) or built.

        Never trains silently: an entry that is neither raises ZooEntryMissing with the command that
        builds it and its cost, except at scales whose entries take seconds (the budget's on_demand),
        which build it here and say so. The key in the directory name guarantees the weights come from
        exactly the scale's recipe.
        """
        row = self.status([name])[0]
        if "problem" in row:
            raise ShippedEntryDamaged(row["problem"], row["state"])
        if not available(row):
            command = f"python -m minialbert zoo --only {name} --scale {self.scale_name}"
            if not self.budget.on_demand:
                raise ZooEntryMissing(
                    f"zoo entry {name!r} ({self.scale_name} scale) is neither shipped for this recipe nor "
                    f"built ({row['state']}, {row['steps_done']}/{row['steps']} steps); `{command}` trains "
                    f"it ({_minutes(row['minutes_left'])})")
            print(f"zoo entry {name!r} ({self.scale_name} scale) is {row['state']}: training "
                  f"{row['steps'] - row['steps_done']} steps ({_minutes(row['minutes_left'])}); "
                  f"cached in {row['dir']}", flush=True)
            self._train(entry(name), self.cache_entry_dir(name), progress, callbacks)
        return load_checkpoint(newest_verified_checkpoint(self._readable_dir(name)))

    def _train(self, e: Entry, run_dir: Path, progress: bool,
               callbacks: Iterable[Callable[[dict], None]] = (), device: str | None = None,
               compile: bool | str = False) -> None:
        args = self.entry_args(e.name)
        train, valid = self.entry_data(e.name, "train"), self.entry_data(e.name, "valid")
        # a branch starts from its trunk's final weights (the trunk is built first where it is missing)
        start_state = self.load(e.start_from, progress).state_dict() if e.start_from else None
        with run_lock(run_dir):          # a second build of this entry stops here, naming the first's PID
            ckpt = recover_run(run_dir)  # damaged checkpoints set aside (reported); verified ones kept
        done = read_json(ckpt / "trainer_state.json")["step"] if ckpt else 0
        if done < args.steps:
            threads = torch.get_num_threads()
            torch.set_num_threads(e.threads or self.budget.threads)   # float sums depend on it: pin it
            cfg = self.entry_config(e.name)
            options = RunOptions(out_dir=run_dir, resume=ckpt is not None, start_state=start_state,
                                 device=device, compile=compile, callbacks=callbacks, progress=progress)
            try:
                pretrain(cfg, args, train, pretraining_evaluator(valid, cfg, args), options)
            finally:
                torch.set_num_threads(threads)
        model = load_checkpoint(newest_verified_checkpoint(run_dir))
        result = evaluate_pretraining(model, valid, MLMBaselines.fit(train, model.config.vocab_size),
                                      max_examples=self.recipe.eval_examples)        # None: the whole split
        write_json(run_dir / "evaluation.json", result)

    def evaluation(self, name: str) -> dict:
        """The held-out evaluation (with baselines) written when the entry was built."""
        path = self._readable_dir(name) / "evaluation.json"
        if not path.exists():
            raise FileNotFoundError(f"zoo entry {name!r} is not built at {self.scale_name} scale; run "
                                    f"`python -m minialbert zoo --only {name}`")
        try:
            return json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"zoo file {path} is damaged ({e}); delete it and run `python -m minialbert "
                             f"zoo --only {name}` to evaluate the entry again") from None

    def checkpoints(self, name: str) -> dict[int, Path]:
        """step -> checkpoint directory of every checkpoint the entry has kept (one per evaluation), in
        order."""
        kept = reversed(step_checkpoints(self._readable_dir(name)))       # oldest first
        return {int(p.name.removeprefix("step-")): p for p in kept}

    def metrics(self, name: str) -> list[dict]:
        """The entry's metrics.jsonl records (train steps and held-out evaluations)."""
        return read_metrics(self._readable_dir(name))

    def build(self, names: Sequence[str] | None, progress: bool = True, device: str | None = None,
              compile: bool | str = False) -> list[dict]:
        """Build every missing entry (or those named), one after another, with one progress bar; device
        and compile as for train.pretrain (None: CUDA, MPS or CPU; torch.compile off)."""
        rows = self.status(names)
        if damaged := [r["problem"] for r in rows if "problem" in r]:     # training would not repair them
            raise ShippedEntryDamaged(f"{len(damaged)} shipped zoo entries are not as shipped; the first: "
                                      f"{damaged[0]}", "damaged")
        todo = [r for r in rows if not available(r)]
        total = sum(r["steps"] - r["steps_done"] for r in todo)
        with tqdm(total=total, disable=not progress, desc=f"zoo ({self.scale_name})", unit="step") as bar:
            for row in todo:
                if available(self.status([row["name"]])[0]):    # built meanwhile by another process
                    bar.update(row["steps"] - row["steps_done"])
                    continue
                bar.set_postfix_str(row["name"])
                start = time.perf_counter()
                self._train(entry(row["name"]), Path(row["dir"]), progress=False,
                            callbacks=[lambda r: bar.update(1) if r["split"] == "train" else None],
                            device=device, compile=compile)
                row["minutes"] = (time.perf_counter() - start) / 60
        return self.summary(names)

    def rebuild(self, name: str, progress: bool = True, device: str | None = None,
                compile: bool | str = False) -> dict:
        """Retrain an entry from scratch in the cache (a built one is moved aside first) and compare its
        final weights with the shipped entry's: {"name", "sha256", "shipped_sha256", "identical"}."""
        run_dir = self.cache_entry_dir(name)
        if run_dir.exists():
            old = run_dir.with_name(f"{run_dir.name}.replaced-{time.strftime('%Y%m%d-%H%M%S')}")
            run_dir.rename(old)
            print(f"moved the built {name} aside to {old}", flush=True)
        self._train(entry(name), run_dir, progress, device=device, compile=compile)
        mine = sha256_of(newest_verified_checkpoint(run_dir) / "model.safetensors")
        shipped = self.shipped_entry_dir(name)
        theirs = sha256_of(newest_verified_checkpoint(shipped) / "model.safetensors") if shipped else None
        return {"name": name, "sha256": mine, "shipped_sha256": theirs, "identical": mine == theirs}

    def summary(self, names: Sequence[str] | None = None) -> list[dict]:
        """Built entries' held-out numbers: [MASK] accuracy, all predicted, sentence task, minutes
        trained."""
        rows = []
        for row in self.status(names):
            if not available(row):
                rows.append({"name": row["name"], "state": row["state"]})
                continue
            ev = self.evaluation(row["name"])
            records = self.metrics(row["name"])
            train_seconds = max((r["seconds"] for r in records if "seconds" in r), default=0)
            unigram = ev["baselines"]["unigram"]["mask"]
            rows.append({"name": row["name"], "state": row["state"], "steps": row["steps"],
                         "minutes": train_seconds / 60, "mask_accuracy": ev["mlm"]["mask"],
                         "all_accuracy": ev["mlm"]["all"],
                         "neighbour_mask": ev["baselines"]["neighbour"]["mask"],
                         "unigram_mask": unigram, "sentence": ev.get("sentence"),
                         "left_plateau": left_plateau(records, unigram)})
        return rows
