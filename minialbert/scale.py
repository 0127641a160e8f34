"""MINIALBERT_SCALE: one switch for sizes and step counts in notebooks, CLI and figures.

- ci: seconds per notebook (what CI and nbval run)
- course (default): a 2-core laptop CPU, at most ~10 minutes per notebook
- gpu: one GPU, larger and deeper models, longer runs
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .corpus import PACKAGES

ENV_VAR = "MINIALBERT_SCALE"


@dataclass(frozen=True)
class Scale:
    name: str
    albert_preset: str          # model sizes (see config.PRESETS); the BERT twin is "<x>-bert"
    bert_preset: str
    vocab_size: int             # SentencePiece vocabulary trained on the corpus
    max_documents: int | None   # cap on corpus documents used (None = all)
    max_seq_len: int            # pretraining sequence length
    batch_size: int
    pretrain_steps: int
    learning_rate: float
    warmup_steps: int
    eval_every: int
    dupe_factor: int = 1        # pretraining-data passes over the corpus, each with new cuts and masks
    mask_rate: float = 0.15     # share of real tokens predicted (the paper: 15%)
    optimizer: str = "lamb"     # lamb | adamw
    zoo_steps: int = 0          # steps of every model-zoo entry (one budget, so entries compare)
    zoo_evals: int = 5          # held-out evaluations per zoo run (the curves of the replication lessons)
    step_seconds: float = 0.0   # measured seconds per step (time estimates only; 0 = not measured)
    packages: tuple = ()        # installed packages whose docstrings join the pretraining train split


SCALES = {
    "ci": Scale("ci", "ci-albert", "ci-bert", vocab_size=1000, max_documents=300, max_seq_len=64,
                batch_size=16, pretrain_steps=30, learning_rate=2e-3, warmup_steps=5, eval_every=15,
                zoo_steps=30, step_seconds=0.02),
    "course": Scale("course", "course-albert", "course-bert", vocab_size=4000, max_documents=None,
                    max_seq_len=32, batch_size=64, pretrain_steps=7500, learning_rate=3e-3,
                    warmup_steps=300, eval_every=1500, dupe_factor=10, optimizer="adamw", zoo_steps=12000,
                    zoo_evals=12, step_seconds=0.068, packages=PACKAGES),
    "gpu": Scale("gpu", "gpu-albert", "gpu-bert", vocab_size=6000, max_documents=None, max_seq_len=256,
                 batch_size=128, pretrain_steps=20000, learning_rate=1.76e-3, warmup_steps=1000,
                 eval_every=1000, dupe_factor=10, zoo_steps=20000, packages=PACKAGES),
}


def current_scale(name: str | Scale | None = None) -> Scale:
    """The Scale named by `name` (a Scale is returned as it is), else by $MINIALBERT_SCALE, else 'course'."""
    if isinstance(name, Scale):
        return name
    name = name or os.environ.get(ENV_VAR, "course")
    if name not in SCALES:
        raise ValueError(f"unknown scale {name!r} (from {ENV_VAR} or argument); choose one of "
                         f"{', '.join(SCALES)}")
    return SCALES[name]
