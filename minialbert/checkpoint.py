"""Checkpoints: save, verify, find and load, and the model head a checkpoint records.

A run directory (`out_dir` of a pretraining or fine-tuning run):
    config.json, train_args.json      the model config and the training arguments
    metrics.jsonl                     one JSON record per train step / evaluation
    checkpoints/step-000100/          model.safetensors, config.json, trainer_state.json, optimizer.pt,
                                      manifest.json (the sha256 of each, checked whenever it is read)
    checkpoints/latest                the name of the newest complete, finite checkpoint
    .lock                             held while a run uses the directory (run_directory.py)

A checkpoint's config.json is the model config plus its head (`head_record`), so loading a checkpoint
builds the right model from config.json alone (`build_model`); trainer_state.json is only for resuming.
Every file is written to a temporary name, fsynced and renamed, so a kill leaves either the old
checkpoint or the new one, never half of one.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path

import safetensors
import safetensors.torch
import torch
from torch import nn

from .config import AlbertConfig
from .download import sha256_of, write_json
from .model import AlbertForPretraining, AlbertForSequenceClassification

CHECKPOINT_FILES = ("model.safetensors", "config.json", "trainer_state.json", "optimizer.pt")
# A weights-only checkpoint (the shipped zoo's) leaves the optimizer out: it loads, but cannot resume.
WEIGHTS_FILES = CHECKPOINT_FILES[:3]
MANIFEST = "manifest.json"          # {file: sha256} of CHECKPOINT_FILES, written into the checkpoint
STEP_DIR = re.compile(r"step-\d{6,}")
# What an interrupted save can leave behind, and only that is removed at the next start of the run: a
# checkpoint folder being written (save_checkpoint), a file of write_text_atomic (.NAME.tmp-PID) or of
# download.atomic_write (.NAME.XXXXXXXX.tmp, mkstemp's 8 random characters).
TEMPORARY_CHECKPOINT = re.compile(r"\.tmp-step-\d{6,}-\d+")
TEMPORARY_FILE = re.compile(r"\..+\.(tmp-\d+|[a-z0-9_]{8}\.tmp)")
DAMAGED = "damaged-"                # prefix of a checkpoint set aside by recover_run (kept, never used)
# No trained ALBERT weight comes near this; a larger value is a damaged or diverged checkpoint.
MAX_ABS_WEIGHT = 1e6


class NonFiniteError(FloatingPointError):
    """A loss, gradient or parameter became NaN or infinite: the run stops before saving it."""


# ---------------------------------------------------------------------------- saving
def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    """Replace a small text file atomically and durably (temp file, fsync, rename, fsync the folder)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    _fsync(tmp)
    os.replace(tmp, path)
    _fsync(path.parent)


def _write_checkpoint_files(tmp: Path, model: nn.Module, optimizer, scheduler, state: dict) -> None:
    """Every file of a checkpoint and its manifest into the temporary folder `tmp`, each fsynced."""
    tmp.mkdir()
    safetensors.torch.save_model(model, str(tmp / "model.safetensors"))  # the tied decoder is stored once
    write_json(tmp / "config.json", {**model.config.to_dict(), **head_record(model)})
    write_json(tmp / "trainer_state.json", state)
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rng},
               tmp / "optimizer.pt")
    for f in CHECKPOINT_FILES:
        _fsync(tmp / f)
    write_json(tmp / MANIFEST, {f: sha256_of(tmp / f) for f in CHECKPOINT_FILES})
    _fsync(tmp)


def save_checkpoint(run_dir: Path, model: nn.Module, optimizer, scheduler, state: dict,
                    keep_last: int) -> Path:
    """Write checkpoints/step-NNNNNN atomically (temp dir, fsync, rename), point `latest` at it, prune.

    The checkpoint carries manifest.json, the sha256 of each file; a model with a parameter that is
    NaN, infinite or above MAX_ABS_WEIGHT is refused, so `latest` only ever names a checkpoint that
    verifies and loads.
    """
    bad = [name for name, p in model.named_parameters() if not (p.abs() <= MAX_ABS_WEIGHT).all()]
    if bad:
        raise NonFiniteError(f"step {state['step']}: parameters {bad[:3]} hold NaN, infinity or values above "
                             f"{MAX_ABS_WEIGHT:g}; not saving a checkpoint")
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{state['step']:06d}"
    tmp = root / f".tmp-{name}-{os.getpid()}"           # matches TEMPORARY_CHECKPOINT
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _write_checkpoint_files(tmp, model, optimizer, scheduler, state)
    except KeyboardInterrupt:
        shutil.rmtree(tmp, ignore_errors=True)   # Ctrl-C mid-save: the previous checkpoint stays the latest
        raise
    except (OSError, RuntimeError) as e:
        shutil.rmtree(tmp, ignore_errors=True)   # never leave half a checkpoint filling the disk
        free = shutil.disk_usage(root).free
        # torch.save reports a full disk as RuntimeError("... unexpected pos ...")
        full = getattr(e, "errno", None) == errno.ENOSPC or (isinstance(e, RuntimeError) and free < 2**20)
        if not full and not isinstance(e, OSError):
            raise
        last = find_checkpoint(run_dir)
        kept = f"the last good checkpoint is {last.name}" if last else "no checkpoint was saved before"
        problem = f"no space left on the device ({free / 2**20:.1f} MiB free)" if full else (e.strerror or e)
        raise OSError(f"{problem} while writing checkpoint {root / name}; {kept}") from None
    final = root / name
    if final.exists():                      # left by a run that crashed before updating `latest`
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync(root)
    write_text_atomic(root / "latest", name + "\n")
    # Prune older checkpoints only: newer ones are left by a run resumed with resume_from from an
    # earlier step, and are replaced when this run reaches them.
    for old in sorted(p for p in root.glob("step-*") if p.name <= name)[:-keep_last]:
        shutil.rmtree(old)
    return final


# ---------------------------------------------------------------------------- finding and checking
def read_json(path: Path) -> dict:
    """A checkpoint's JSON file; errors name the file and say whether it is missing or damaged."""
    if not path.exists():
        raise FileNotFoundError(f"checkpoint file {path} is missing; the checkpoint is incomplete")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"checkpoint file {path} is corrupt or truncated (not valid JSON: {e})") from None


def verify_checkpoint(ckpt: Path) -> None:
    """Check each file of a checkpoint against the sha256 in its manifest; ValueError naming a damaged one."""
    manifest = read_json(ckpt / MANIFEST)
    if not isinstance(manifest, dict) or sorted(manifest) not in (sorted(CHECKPOINT_FILES),
                                                                  sorted(WEIGHTS_FILES)):
        raise ValueError(f"checkpoint file {ckpt / MANIFEST} is damaged (it must list "
                         f"{', '.join(CHECKPOINT_FILES)}, or all but optimizer.pt)")
    for name in manifest:
        path = ckpt / name
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint file {path} is missing; the checkpoint is incomplete")
        if sha256_of(path) != manifest[name]:
            raise ValueError(f"checkpoint file {path} is damaged (its sha256 differs from {MANIFEST}); "
                             f"resume from an earlier checkpoint (resume_from / --resume-from) or start over")


def earlier_checkpoints(ckpt: Path) -> list[Path]:
    """The step directories beside `ckpt` that are older than it, newest first."""
    return [p for p in step_checkpoints(ckpt.parent.parent) if p.name < ckpt.name]


def step_checkpoints(run_dir: Path) -> list[Path]:
    """The run's checkpoints/step-N directories, newest first (whatever `latest` says)."""
    root = Path(run_dir) / "checkpoints"
    return sorted((p for p in root.glob("step-*") if STEP_DIR.fullmatch(p.name)), reverse=True)


def newest_verified_checkpoint(run_dir: Path) -> Path | None:
    """The newest step directory of a run that verifies against its manifest (read-only)."""
    for ckpt in step_checkpoints(run_dir):
        try:
            verify_checkpoint(ckpt)
            return ckpt
        except (ValueError, FileNotFoundError):
            continue
    return None


def recover_run(run_dir: Path) -> Path | None:
    """The newest verified checkpoint of a run directory, made its `latest` (None: there is none).

    Every newer checkpoint that fails verification is set aside as checkpoints/damaged-step-N (kept
    for inspection, never loaded) and reported; verified checkpoints are never touched. Call it
    holding the run's lock.
    """
    root = Path(run_dir) / "checkpoints"
    for ckpt in step_checkpoints(run_dir):
        try:
            verify_checkpoint(ckpt)
        except (ValueError, FileNotFoundError) as e:
            aside = root / f"{DAMAGED}{ckpt.name}"
            shutil.rmtree(aside, ignore_errors=True)
            os.rename(ckpt, aside)
            warnings.warn(f"{e}; set aside as {aside.name}", stacklevel=2)
            continue
        latest = root / "latest"
        if not latest.exists() or latest.read_bytes() != f"{ckpt.name}\n".encode():
            write_text_atomic(latest, ckpt.name + "\n")
        return ckpt
    (root / "latest").unlink(missing_ok=True)                # names nothing usable
    return None


def find_checkpoint(path: str | Path) -> Path | None:
    """A checkpoint directory from a run directory (via checkpoints/latest) or a step directory."""
    path = Path(path)
    if (path / "model.safetensors").exists() or (path / "trainer_state.json").exists():
        return path
    latest = path / "checkpoints" / "latest"
    if not latest.exists():
        return None
    try:
        name = latest.read_text().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{latest} is unreadable ({e}); resume from a step-* directory") from None
    if not STEP_DIR.fullmatch(name):
        raise ValueError(f"{latest} is damaged (it holds {name[:40]!r}, not a step-NNNNNN name); "
                         f"resume from a step-* directory")
    step_dir = latest.parent / name
    if not step_dir.is_dir():
        raise ValueError(f"{latest} points to {step_dir.name}, which does not exist; the run directory "
                         f"is damaged: delete {latest} to start over or point it at a step-* directory")
    return step_dir


def checkpoint_to_resume(out_dir: Path | None, resume: bool, resume_from: str | Path | None) -> Path | None:
    """The verified checkpoint a training run in out_dir starts from (None: from scratch): the one named by
    resume_from, or out_dir's latest when resuming; errors say what to do instead."""
    if resume_from is not None:
        ckpt = find_checkpoint(resume_from)
        if ckpt is None:
            raise FileNotFoundError(f"resume_from {resume_from} is not a checkpoint (no model.safetensors)")
        own = sorted(out_dir.glob("checkpoints/step-*")) if out_dir is not None else []
        if own and ckpt.resolve().parent != (out_dir / "checkpoints").resolve():
            raise FileExistsError(f"{out_dir} already holds a run (checkpoint {own[-1].name}) and {ckpt} "
                                  f"belongs to another run; to branch from it, choose a new output directory")
        verify_checkpoint(ckpt)
        return ckpt
    ckpt = find_checkpoint(out_dir) if out_dir is not None else None
    if resume and ckpt is None:
        raise FileNotFoundError(f"nothing to resume: {out_dir} holds no checkpoint (checkpoints/latest); "
                                f"start without resume")
    if not resume and ckpt is not None:
        raise FileExistsError(f"{out_dir} already holds a run (checkpoint {ckpt.name}); resume it or choose "
                              f"another output directory")
    if resume:
        try:
            verify_checkpoint(ckpt)
        except (ValueError, FileNotFoundError) as e:
            earlier = earlier_checkpoints(ckpt)
            hint = f"; to go back to {earlier[0].name}, resume from {earlier[0]}" if earlier else ""
            raise type(e)(f"{e}{hint}") from None
    return ckpt


def read_config(ckpt: Path, expected: AlbertConfig | None = None) -> tuple[AlbertConfig, dict]:
    """(model config, head record) of a checkpoint; with `expected`, a different config is an error."""
    fields = read_json(ckpt / "config.json")
    if not isinstance(fields, dict):
        raise ValueError(f"checkpoint file {ckpt / 'config.json'} is not a JSON object")
    head = {k: fields.pop(k) for k in HEAD_FIELDS if k in fields}
    try:
        saved = AlbertConfig.from_dict(fields)
    except (TypeError, ValueError) as e:
        raise ValueError(f"checkpoint file {ckpt / 'config.json'} is not a valid AlbertConfig: {e}") from None
    if expected is not None and saved != expected:
        diff = {k: (v, getattr(expected, k)) for k, v in saved.to_dict().items() if getattr(expected, k) != v}
        detail = ", ".join(f"{k}: checkpoint {a!r} vs requested {b!r}" for k, (a, b) in diff.items())
        raise ValueError(f"checkpoint {ckpt} was written for a different model config ({detail}); "
                         f"use the same preset/config or a new output directory")
    return saved, head


# ---------------------------------------------------------------------------- loading
def load_weights(model: nn.Module, path: Path) -> None:
    """Load model.safetensors into `model`; every tensor must fit (names and shapes)."""
    if not path.exists():
        raise FileNotFoundError(f"checkpoint file {path} is missing; the checkpoint is incomplete")
    try:
        missing, unexpected = safetensors.torch.load_model(model, str(path), strict=False)
    except (safetensors.SafetensorError, OSError) as e:
        raise ValueError(f"checkpoint file {path} is corrupt or truncated ({e})") from None
    except RuntimeError as e:
        raise ValueError(f"checkpoint file {path} does not fit the model (shapes differ: {e})") from None
    missing = [k for k in missing if k != "mlm_head.decoder_weight"]   # tied: stored once as the embeddings
    if missing or unexpected:
        raise ValueError(f"checkpoint file {path} does not fit the model: missing {missing}, "
                         f"unexpected {unexpected} (was it saved for another objective?)")
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not (tensor.abs() <= MAX_ABS_WEIGHT).all():   # NaN fails too
            worst = tensor.abs().nan_to_num(nan=float("inf")).max().item()
            raise ValueError(f"checkpoint file {path} holds unusable weights: {name} reaches {worst:g} "
                             f"(NaN, infinite or above {MAX_ABS_WEIGHT:g}); use an earlier checkpoint")


def load_start_state(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Load a trunk's weights into a fresh model (a branch); only a sentence head may be missing."""
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    wrong = [k for k in state if k not in shapes or state[k].shape != shapes[k]]
    missing = [k for k in shapes if k not in state and not k.startswith("sentence_head.")]
    if wrong or missing:
        raise ValueError(f"start_state does not fit the model: missing {missing}, unknown or of another "
                         f"shape {wrong}")
    model.load_state_dict(state, strict=False)


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """The model of a checkpoint (a run directory or a step directory), verified, in eval mode:
    an AlbertForPretraining or an AlbertForSequenceClassification, as its config.json says."""
    ckpt = find_checkpoint(path)
    if ckpt is None:
        raise FileNotFoundError(f"no checkpoint in {path} (expected model.safetensors or checkpoints/latest)")
    verify_checkpoint(ckpt)
    cfg, head = read_config(ckpt)
    try:
        model = build_model(cfg, head)
    except ValueError as e:
        raise ValueError(f"checkpoint file {ckpt / 'config.json'} names no model minialbert builds "
                         f"({e})") from None
    load_weights(model, ckpt / "model.safetensors")
    return model.to(device).eval()


def load_optimizer_state(path: Path) -> dict:
    """optimizer.pt: {"optimizer", "scheduler", "rng"} as save_checkpoint wrote them."""
    if not path.exists():
        raise FileNotFoundError(f"checkpoint file {path} is missing; the checkpoint is incomplete")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:            # objects that are not tensors or plain data: never ours
        raise ValueError(f"checkpoint file {path} is not an optimizer state minialbert wrote (it holds "
                         f"objects other than tensors and plain data); refusing to load it") from None
    except Exception as e:  # torch raises several types for damaged zip archives
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ValueError(f"checkpoint file {path} is corrupt or truncated "
                         f"({type(e).__name__}: {first})") from None


# What a saved model is, beside its config (a checkpoint's config.json holds both): which class, and
# its sentence head (pretraining) or its number of labels (classification).
HEAD_FIELDS = ("architecture", "sentence_task", "num_labels")


def head_record(model: nn.Module) -> dict:
    """The head of a model, as a checkpoint's config.json records it (see build_model)."""
    if isinstance(model, AlbertForSequenceClassification):
        return {"architecture": "AlbertForSequenceClassification", "num_labels": model.num_labels}
    if isinstance(model, AlbertForPretraining):
        return {"architecture": "AlbertForPretraining", "sentence_task": model.sentence_task}
    raise TypeError(f"cannot record the head of a {type(model).__name__}")


def build_model(cfg: AlbertConfig, head: dict) -> nn.Module:
    """A freshly initialised model of the class and head that `head_record` described."""
    architecture = head.get("architecture")
    if architecture == "AlbertForPretraining":
        return AlbertForPretraining(cfg, sentence_task=head.get("sentence_task"))
    if architecture == "AlbertForSequenceClassification":
        return AlbertForSequenceClassification(cfg, head.get("num_labels"))
    raise ValueError(f"unknown architecture {architecture!r}")
