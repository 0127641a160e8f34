"""Shipping the course model zoo: built entries copied into the repository's zoo/ folder (for maintainers).

`python -m minialbert zoo --ship` writes zoo/v<ZOO_FORMAT>/<scale>/: each entry's weights only (no
optimizer state), the final checkpoint (and, for ALL_CHECKPOINTS entries, the log-spaced ones along
training that lesson 06 reads), its metrics thinned to what a curve needs, and the folder's
MANIFEST.json with every file's sha256, which zoo.verify_shipped checks whenever an entry is read.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch

from ...checkpoint import MANIFEST, WEIGHTS_FILES, read_json, step_checkpoints
from ...download import atomic_write, sha256_of, write_json
from ...run_directory import read_metrics
from .zoo import (
    RECIPE_VERSION,
    SHIPPED_MANIFEST,
    ZOO_FORMAT,
    Zoo,
    ZooEntryMissing,
    available,
    shipped_folder,
)

ALL_CHECKPOINTS = ("albert-sop",)    # entries shipped with checkpoints along training (lesson 06): the final
                                     # one and those at 1/2, 1/4, 1/8 ... of its steps (a log-spaced look)
SHIPPED_TRAIN_EVERY = 10             # shipped metrics.jsonl keeps every 10th train step (and all evaluations)


def log_spaced(step: int, final: int) -> bool:
    """Whether a checkpoint at `step` is one of final, final/2, final/4, ... (shipped along training)."""
    ratio = final / step
    return ratio == int(ratio) and int(ratio) & (int(ratio) - 1) == 0


def shipped_metrics(records: list[dict]) -> list[dict]:
    """The records a shipped entry keeps: every evaluation, the first and last train steps and every
    SHIPPED_TRAIN_EVERY-th one in between (curves drawn from them are the same to the eye)."""
    last = max((r["step"] for r in records if r["split"] == "train"), default=0)
    return [r for r in records if r["split"] != "train" or r["step"] in (1, last)
            or r["step"] % SHIPPED_TRAIN_EVERY == 0]


def ship(names: Sequence[str] | None, zoo: Zoo) -> Path:
    """Copy built entries into the shipped folder (weights only: no optimizer state; only the final
    checkpoint except for ALL_CHECKPOINTS entries; metrics thinned by shipped_metrics) and rewrite its
    MANIFEST.json. Entries of other
    keys (an older recipe) are removed from the folder. Returns the folder."""
    folder = shipped_folder(zoo.scale_name)
    rows = zoo.status(names)
    unbuilt = [r["name"] for r in rows if not available(r)]
    if unbuilt:
        raise ZooEntryMissing(f"cannot ship entries that are not built: {', '.join(unbuilt)}; build them "
                              "with `python -m minialbert zoo` first")
    folder.mkdir(parents=True, exist_ok=True)
    keys = {r["name"]: Path(r["dir"]).name for r in zoo.status()}    # <name>-<key>, shipped or cached
    for old in folder.iterdir():
        if old.is_dir() and old.name not in keys.values():
            shutil.rmtree(old)
    for row in rows:
        if row["state"] == "shipped":
            continue
        source, target = Path(row["dir"]), folder / Path(row["dir"]).name
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for name in ("config.json", "train_args.json", "evaluation.json"):
            shutil.copy2(source / name, tmp / name)
        atomic_write(tmp / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in shipped_metrics(
            read_metrics(source))).encode())
        kept = step_checkpoints(source)[::-1]                          # oldest first
        steps = [int(c.name.removeprefix("step-")) for c in kept]
        if row["name"] in ALL_CHECKPOINTS:
            kept = [c for c, step in zip(kept, steps) if log_spaced(step, steps[-1])]
        else:
            kept = kept[-1:]
        for ckpt in kept:
            (tmp / "checkpoints" / ckpt.name).mkdir(parents=True)
            files = {}
            for name in WEIGHTS_FILES:
                target_file = tmp / "checkpoints" / ckpt.name / name
                if name == "trainer_state.json":      # its copy of every metrics record is only for resuming
                    state = read_json(ckpt / name)
                    write_json(target_file, {k: v for k, v in state.items() if k != "metrics"})
                else:
                    shutil.copy2(ckpt / name, target_file)
                files[name] = sha256_of(target_file)
            write_json(tmp / "checkpoints" / ckpt.name / MANIFEST, files)
        atomic_write(tmp / "checkpoints" / "latest", kept[-1].name.encode())
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    write_manifest(folder, keys, zoo.scale_name)
    return folder


def unship(names: Sequence[str], zoo: Zoo) -> Path:
    """Remove shipped entries from the repository's zoo/ folder (their weights can be rebuilt with
    `zoo --only NAME`; what they measured stays in the results that cite it) and rewrite MANIFEST.json.
    Only folders the manifest lists are removed. Returns the folder."""
    folder = shipped_folder(zoo.scale_name)
    listed = json.loads((folder / SHIPPED_MANIFEST).read_text())["entries"]
    missing = [name for name in names if name not in listed]
    if missing:
        raise ZooEntryMissing(f"{folder / SHIPPED_MANIFEST}: no shipped entry {', '.join(missing)}")
    for name in names:
        if (folder / listed[name]).exists():
            shutil.rmtree(folder / listed[name])
    write_manifest(folder, {name: key for name, key in listed.items() if name not in names}, zoo.scale_name)
    return folder


def write_manifest(folder: Path, keys: dict[str, str], scale_name: str) -> None:
    """MANIFEST.json of the shipped folder: its entries (name -> folder) and every file's sha256."""
    entries = {name: key for name, key in keys.items() if (folder / key).is_dir()}
    files = {str(p.relative_to(folder)): sha256_of(p) for key in sorted(entries.values())
             for p in sorted((folder / key).rglob("*")) if p.is_file()}
    write_json(folder / SHIPPED_MANIFEST, {"format": ZOO_FORMAT, "scale": scale_name,
                                           "recipe": RECIPE_VERSION, "torch": torch.__version__,
                                           "entries": entries, "files": files})
