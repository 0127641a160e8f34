"""The course model zoo: the named pretraining runs the replication lessons share, built once and cached.

Every entry is the scale's ALBERT (or its BERT twin) trained with the scale's one recipe on the
same data for the same number of steps; entries differ only in what their name says (objective,
architecture, sharing, embedding size, seed, length-balanced pairs, a lesson's or a long budget),
so any two of them can be compared. An entry is a
normal run directory (config.json, metrics.jsonl, checkpoints/, evaluation.json) under

    cache_dir()/zoo/<scale>/<name>-<key>

where key hashes the model config, the training arguments, the training data and RECIPE_VERSION:
a changed recipe trains a new entry, an unchanged one is reused, and a killed build resumes from
the entry's last checkpoint. `python -m minialbert zoo` builds what is missing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .checkpoint import (
    STEP_DIR,
    load_checkpoint,
    newest_verified_checkpoint,
    read_json,
    read_metrics,
    recover_run,
    run_lock,
)
from .config import AlbertConfig
from .course import course_pretraining_data
from .download import cache_dir, write_json
from .evaluation import MLMBaselines, evaluate_pretraining
from .model import AlbertForPretraining
from .scale import Scale
from .train import TrainArgs, pretrain

RECIPE_VERSION = 2        # bump when a code change alters what the same settings train to
# Arguments that only change how often a run reports or saves, not the weights it ends with.
NOT_IN_KEY = ("eval_every", "eval_examples", "checkpoint_every", "keep_last")


@dataclass(frozen=True)
class Entry:
    name: str
    objective: str                    # mlm | nsp | sop
    about: str
    arch: str = "albert"              # albert | bert (the scale's BERT twin: no sharing, E = H)
    changes: tuple = ()               # config fields changed from the preset: ((field, value), ...)
    seed: int = 0
    budget: str = "zoo"               # zoo: scale.zoo_steps; lesson: scale.pretrain_steps (lesson 05);
                                      # long: 4 x scale.zoo_steps (the schedule stretched, not continued)
    balanced: bool = False            # train on length-balanced pairs (pretraining_data.length_balanced)


ENTRIES: dict[str, Entry] = {e.name: e for e in (
    Entry("albert-sop", "sop", "ALBERT as the paper trains it: MLM + sentence-order prediction"),
    Entry("albert-nsp", "nsp", "ALBERT with BERT's next-sentence prediction instead of SOP"),
    Entry("albert-mlm", "mlm", "ALBERT with MLM alone, no sentence objective"),
    Entry("bert-nsp", "nsp", "the BERT twin (no sharing, E = H) trained as BERT was: MLM + NSP", arch="bert"),
    Entry("bert-sop", "sop", "the BERT twin with ALBERT's objective: differs from albert-sop only in "
                             "sharing and factorization", arch="bert"),
    Entry("lesson-albert-sop", "sop", "lesson 05's own short run of albert-sop's recipe, with two layers "
                                      "(fewer layers leave the plateau in fewer steps)",
          changes=(("num_layers", 2),), budget="lesson"),
    # The paper's Table 4 (what to share) and Table 3 (embedding size E under all-sharing), at course
    # width: albert-sop is the all-shared E = 32 point and bert-sop the not-shared E = H point.
    Entry("albert-share-attention", "sop", "albert-sop sharing only the attention sublayer across layers "
                                           "(each layer its own FFN)", changes=(("sharing", "attention"),)),
    Entry("albert-share-ffn", "sop", "albert-sop sharing only the FFN sublayer across layers (each layer its "
                                     "own attention)", changes=(("sharing", "ffn"),)),
    Entry("albert-share-none", "sop", "albert-sop with nothing shared (keeps the factorized E = 32 "
                                      "embedding)", changes=(("sharing", "none"),)),
    Entry("albert-e16", "sop", "albert-sop with a narrower embedding, E = 16",
          changes=(("embedding_size", 16),)),
    Entry("albert-e64", "sop", "albert-sop with E = H = 64 (still projected E -> H, as transformers does)",
          changes=(("embedding_size", 64),)),
    # The NSP vs SOP ablation (the paper's Table 5) needs more than one seed per arm: seed 0 is the
    # entry above, these differ from it only in the seed (initialisation, data order, masking).
    *(Entry(f"albert-{objective}-seed{seed}", objective, f"albert-{objective} with seed {seed}", seed=seed)
      for objective in ("mlm", "nsp", "sop") for seed in (1, 2)),
    # The ablation's fourth arm: SOP on pairs whose segment lengths say nothing about the order. At 32
    # tokens the recipe's SOP pairs carry a length cue (a rule on the two lengths alone scores 55%).
    *(Entry(f"albert-sop-balanced{f'-seed{seed}' if seed else ''}", "sop",
            f"albert-sop trained on length-balanced pairs{f', seed {seed}' if seed else ''} (no length cue)",
            seed=seed, balanced=True) for seed in (0, 1, 2)),
    Entry("albert-sop-balanced-long", "sop", "albert-sop-balanced trained four times longer: does SOP "
                                             "without a length cue need more compute?",
          balanced=True, budget="long"),
)}


def entry(name: str) -> Entry:
    if name not in ENTRIES:
        raise ValueError(f"unknown zoo entry {name!r}; choose one of {', '.join(ENTRIES)}")
    return ENTRIES[name]


def entry_config(e: Entry, scale: Scale) -> AlbertConfig:
    return scale.model_config(e.arch, **dict(e.changes))


def entry_args(e: Entry, scale: Scale) -> TrainArgs:
    steps = {"zoo": scale.zoo_steps, "lesson": scale.pretrain_steps, "long": 4 * scale.zoo_steps}[e.budget]
    eval_every = max(1, steps // scale.zoo_evals)
    # Every evaluation's checkpoint is kept: the lessons study how a model changes along training.
    return TrainArgs.from_scale(scale, objective=e.objective, seed=e.seed, steps=steps, eval_every=eval_every,
                                checkpoint_every=eval_every, keep_last=scale.zoo_evals + 1)


def entry_dir(e: Entry, scale: Scale) -> Path:
    """Where the entry lives: its name and a key over everything that decides its weights."""
    args = {k: v for k, v in dataclasses.asdict(entry_args(e, scale)).items() if k not in NOT_IN_KEY}
    data = course_pretraining_data(e.objective, "train", scale, e.balanced)
    settings = {"config": entry_config(e, scale).to_dict(), "args": args, "data": data.checksum(),
                "recipe": RECIPE_VERSION}
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir() / "zoo" / scale.name / f"{e.name}-{key}"


def _steps_done(run_dir: Path) -> int:
    """Steps of the entry's newest checkpoint that verifies against its checksums; 0 if there is none."""
    ckpt = newest_verified_checkpoint(run_dir)
    return read_json(ckpt / "trainer_state.json")["step"] if ckpt else 0


def status(scale: Scale, names: Sequence[str] | None = None) -> list[dict]:
    """One row per entry: name, steps done of total, built or not, and the estimated minutes left."""
    rows = []
    for name in names or ENTRIES:
        e = entry(name)
        run_dir, steps = entry_dir(e, scale), entry_args(e, scale).steps
        done = _steps_done(run_dir)
        state = "built" if done >= steps and (run_dir / "evaluation.json").exists() else (
            "partial" if done else "missing")
        minutes = (steps - done) * scale.step_seconds / 60 if scale.step_seconds else None  # None: unmeasured
        rows.append({"name": name, "state": state, "steps_done": done, "steps": steps,
                     "minutes_left": minutes, "dir": str(run_dir),
                     "about": e.about})
    return rows


def load(name: str, scale: Scale, progress: bool = True,
         callbacks: Iterable[Callable[[dict], None]] = ()) -> AlbertForPretraining:
    """The trained model of a zoo entry, in eval mode; trains (or finishes) it first if needed.

    Never trains anything but the named entry with the scale's recipe: the run directory's key
    guarantees the loaded weights come from exactly those settings.
    """
    e = entry(name)
    run_dir = entry_dir(e, scale)
    row = status(scale, [name])[0]
    if row["state"] != "built":
        print(f"zoo entry {name!r} ({scale.name} scale) is {row['state']}: training "
              f"{row['steps'] - row['steps_done']} steps ({_minutes(row['minutes_left'])}); "
              f"cached in {run_dir}", flush=True)
        _train(e, scale, run_dir, progress, callbacks)
    return load_checkpoint(newest_verified_checkpoint(run_dir))


def _train(e: Entry, scale: Scale, run_dir: Path, progress: bool,
           callbacks: Iterable[Callable[[dict], None]] = ()) -> None:
    args = entry_args(e, scale)
    train = course_pretraining_data(e.objective, "train", scale, e.balanced)
    valid = course_pretraining_data(e.objective, "valid", scale, e.balanced)
    with run_lock(run_dir):          # a second build of this entry stops here, naming the first's PID
        ckpt = recover_run(run_dir)  # damaged checkpoints set aside (reported); verified ones kept
    done = read_json(ckpt / "trainer_state.json")["step"] if ckpt else 0
    if done < args.steps:
        pretrain(entry_config(e, scale), args, train, valid, out_dir=run_dir, resume=ckpt is not None,
                 callbacks=callbacks, progress=progress)
    model = load_checkpoint(newest_verified_checkpoint(run_dir))
    result = evaluate_pretraining(model, valid, MLMBaselines.fit(train, model.config.vocab_size))
    write_json(run_dir / "evaluation.json", result)


def _minutes(minutes: float | None) -> str:
    return "time not measured at this scale" if minutes is None else f"about {minutes:.0f} min on 2 cores"


def evaluation(name: str, scale: Scale) -> dict:
    """The held-out evaluation (with baselines) written when the entry was built."""
    path = entry_dir(entry(name), scale) / "evaluation.json"
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
    root = entry_dir(entry(name), scale) / "checkpoints"
    found = {int(p.name.removeprefix("step-")): p for p in root.glob("step-*") if STEP_DIR.fullmatch(p.name)}
    return dict(sorted(found.items()))


def metrics(name: str, scale: Scale) -> list[dict]:
    """The entry's metrics.jsonl records (train steps and held-out evaluations)."""
    return read_metrics(entry_dir(entry(name), scale))


def build(names: Sequence[str] | None, scale: Scale,
          progress: bool = True) -> list[dict]:
    """Build every missing entry (or those named), one after another, with one progress bar."""
    todo = [r for r in status(scale, names) if r["state"] != "built"]
    total = sum(r["steps"] - r["steps_done"] for r in todo)
    with tqdm(total=total, disable=not progress, desc=f"zoo ({scale.name})", unit="step") as bar:
        for row in todo:
            bar.set_postfix_str(row["name"])
            start = time.perf_counter()
            _train(entry(row["name"]), scale, Path(row["dir"]), progress=False,
                   callbacks=[lambda r: bar.update(1) if r["split"] == "train" else None])
            row["minutes"] = (time.perf_counter() - start) / 60
    return summary(scale, names)


def summary(scale: Scale, names: Sequence[str] | None = None) -> list[dict]:
    """Built entries' held-out numbers: [MASK] accuracy, all predicted, sentence task, minutes trained."""
    rows = []
    for row in status(scale, names):
        if row["state"] != "built":
            rows.append({"name": row["name"], "state": row["state"]})
            continue
        ev = evaluation(row["name"], scale)
        train_seconds = max((r["seconds"] for r in metrics(row["name"], scale) if "seconds" in r), default=0)
        rows.append({"name": row["name"], "state": "built", "steps": row["steps"],
                     "minutes": train_seconds / 60, "mask_accuracy": ev["mlm"]["mask"],
                     "all_accuracy": ev["mlm"]["all"], "neighbour_mask": ev["baselines"]["neighbour"]["mask"],
                     "unigram_mask": ev["baselines"]["unigram"]["mask"], "sentence": ev.get("sentence")})
    return rows


def format_summary(rows: list[dict]) -> str:
    """The summary as a table for a terminal."""
    def pct(p):
        return f"{100 * p['accuracy']:.1f}% [{100 * p['ci95'][0]:.1f}, {100 * p['ci95'][1]:.1f}]"
    lines = [f"{'entry':22s} {'minutes':>7s} {'[MASK] acc':>20s} {'neighbour':>8s} {'all predicted':>20s} "
             f"{'sentence task (pred. class 1)':>32s}"]
    for r in rows:
        if r["state"] != "built":
            lines.append(f"{r['name']:22s} {r['state']}")
            continue
        s = r["sentence"]
        sent = f"{s['task']} {pct(s)} ({100 * s['predicted_shares'][1]:.0f}%)" if s else "-"
        lines.append(f"{r['name']:22s} {r['minutes']:7.1f} {pct(r['mask_accuracy']):>20s} "
                     f"{100 * r['neighbour_mask']['accuracy']:7.1f}% {pct(r['all_accuracy']):>20s} "
                     f"{sent:>32s}")
    return "\n".join(lines)
