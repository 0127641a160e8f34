"""Scale: the one switch for the sizes of the model and of its pretraining, for lessons, CLI, experiments
and figures. What a lesson measures on top of them (its samples, seeds, fine-tuning runs) is sized in
minialbert/course/lessons.py.

- ci: seconds per notebook (what CI and nbval run)
- course (default): a 2-core laptop CPU, at most ~10 minutes per notebook
- gpu: one GPU, larger and deeper models, longer runs
- any of them with $MINIALBERT_DRY_RUN=1: `<name>-dry`, its model kept, every step count and sample
  size capped (`dry_run`): the gpu scale's code paths at its real shapes, on a CPU in minutes

The scale is resolved once, at the edge (the CLI, `figures`, a lesson's first cell, with
`current_scale()`), and passed down; library code takes a Scale and never reads the environment.
Every model and pretraining size that differs between scales lives here, by name: no code compares a
scale's name (a dry run is known by `is_dry_run`).
The model's vocabulary and positions come from the scale's preset (config.PRESETS), stated once.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, replace

from ..config import PRESETS, AlbertConfig
from ..train import TrainArgs

ENV_VAR = "MINIALBERT_SCALE"


@dataclass(frozen=True)
class Scale:
    name: str
    albert_preset: str          # model sizes (see config.PRESETS); the BERT twin is bert_preset
    bert_preset: str
    corpus: str                 # the pretraining text: "course" (pinned, corpus/) or "pydocs" (embedded)
    max_documents: int | None   # cap on corpus documents used (None = all)
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
    zoo_threads: int = 1        # torch threads of a zoo build: fixed, so a rebuild gives the same bytes
    data_shards: int = 0        # pretraining sets drawn from this many random streams, built on every core
                                # (0: one stream, one core, the official script's order; pretraining_data)
    step_seconds: float = 0.0   # measured seconds per step (time estimates only; 0 = not measured)
    eval_examples: int | None = None   # held-out examples per evaluation of a pretraining run and per
                                       # model in the ablation, a fixed seeded sample (None = all)
    figure_subdir: str = ""     # figures go to assets/figures/<figure_subdir> ("": the committed ones)
    zoo_on_demand: bool = False  # its zoo entries take seconds: zoo.load trains a missing one

    @property
    def is_dry_run(self) -> bool:
        """A dry run of another scale (see `dry_run`): its numbers measure nothing."""
        return self.name.endswith(DRY_RUN_SUFFIX)

    @property
    def base_name(self) -> str:
        """The scale a dry run shortens (its own name for any other scale)."""
        return self.name.removesuffix(DRY_RUN_SUFFIX)

    @property
    def vocab_size(self) -> int:
        """SentencePiece pieces of the course tokenizer: the preset's vocabulary."""
        return PRESETS[self.albert_preset]["vocab_size"]

    @property
    def max_seq_len(self) -> int:
        """Pretraining sequence length: the preset's positions."""
        return PRESETS[self.albert_preset]["max_position_embeddings"]

    def model_config(self, arch: str = "albert", **changes) -> AlbertConfig:
        """The scale's ALBERT (arch="albert") or its BERT twin ("bert"), with some fields changed."""
        presets = {"albert": self.albert_preset, "bert": self.bert_preset}
        if arch not in presets:
            raise ValueError(f"unknown arch {arch!r}; choose albert or bert")
        return AlbertConfig.preset(presets[arch], **changes)


SCALES = {
    # ci reads the small corpus embedded in the package (seconds, no download); the others the pinned one
    "ci": Scale("ci", "ci-albert", "ci-bert", corpus="pydocs", max_documents=300, batch_size=16,
                pretrain_steps=30, learning_rate=2e-3, warmup_steps=5, eval_every=15, zoo_steps=30,
                step_seconds=0.02, figure_subdir="ci", zoo_on_demand=True),
    "course": Scale("course", "course-albert", "course-bert", corpus="course", max_documents=None,
                    batch_size=64, pretrain_steps=12000, learning_rate=3e-3, warmup_steps=300,
                    eval_every=1500, dupe_factor=10, optimizer="adamw", zoo_steps=20000, zoo_evals=8,
                    step_seconds=0.1),
    # gpu: AdamW at 3e-4 with a 10% warmup, not the paper's LAMB at 1.76e-3 (a batch-4,096 rate): on the
    # permutation chains a 12-layer twin left the plateau by step 300 with AdamW and not in 800 steps with
    # LAMB at any rate from 3e-4 to 1e-2 (benchmarks/gpu_recipe_probe.py). On an H200 it stayed on the
    # unigram plateau for 2,173 steps at the paper's initializer_range 0.02 and left it in 2,054 at 0.01 (the
    # gpu presets' value now; assets/benchmarks/gpu_recipe_h200.json), though only just (6.0% [MASK] against
    # unigram 4.6% and the neighbour baseline 12.7%); a 600-step probe of LAMB at 0.01 was leaving it too
    "gpu": Scale("gpu", "gpu-albert", "gpu-bert", corpus="course", max_documents=None, batch_size=128,
                 pretrain_steps=20000, learning_rate=3e-4, warmup_steps=2000, eval_every=1000,
                 dupe_factor=10, optimizer="adamw", zoo_steps=20000, data_shards=64, figure_subdir="gpu"),
}


# The dry run: every step count and sample size of a scale capped, its model (the preset: widths, depth,
# vocabulary, positions) and so its sequence length kept, so that the gpu scale's code paths (CLI,
# lessons, figures) run end to end on a CPU in minutes. Its numbers measure nothing.
DRY_RUN_VAR = "MINIALBERT_DRY_RUN"
DRY_RUN_VALUES = ("", "0", "1")    # what $MINIALBERT_DRY_RUN may hold: off, off, on
DRY_RUN_SUFFIX = "-dry"
DRY_RUN = dict(
    # The small corpus embedded in the package: no download. 800 of its train documents still train the
    # gpu scale's 6000-piece tokenizer (600 do not: SentencePiece stops at 5992 pieces); fewer
    # documents, or a larger vocabulary, fail with a one-line error naming the scale (course/data.py).
    # What the lessons measure is shortened beside them (course/lessons.py, dry_run_sizes).
    corpus="pydocs", max_documents=800,
    batch_size=2, pretrain_steps=2, warmup_steps=1, eval_every=1, dupe_factor=1, zoo_steps=2, zoo_evals=2,
    step_seconds=0.0, eval_examples=8, zoo_on_demand=True)


def dry_run(scale: Scale) -> Scale:
    """`scale` shortened to a dry run: the fields of DRY_RUN replaced (steps, samples, the corpus), the
    model presets kept, named `<name>-dry` so its zoo entries, caches and figures (assets/figures/
    <figure_subdir>-dry) never mix with the real scale's. A dry-run scale is returned as it is."""
    if scale.is_dry_run:
        return scale
    subdir = f"{scale.figure_subdir or scale.name}{DRY_RUN_SUFFIX}"
    return replace(scale, name=scale.name + DRY_RUN_SUFFIX, figure_subdir=subdir, **DRY_RUN)


def current_scale(name: str | Scale | None = None) -> Scale:
    """The Scale named by `name` (a Scale is returned as it is), else by $MINIALBERT_SCALE, else 'course'.

    Call it at the edge only (CLI, figures, a lesson's first cell) and pass the Scale down.
    """
    if isinstance(name, Scale):
        return name
    source = "argument" if name else ENV_VAR
    name = name or os.environ.get(ENV_VAR, "course")
    # $MINIALBERT_DRY_RUN=1 (unset, empty or 0: off), or a dry run's name (`figures` hands its lessons the
    # name). Any other value is refused: "false" or "no" must not turn the dry run on, nor "yes" leave it off.
    dry_setting = os.environ.get(DRY_RUN_VAR, "")
    if dry_setting not in DRY_RUN_VALUES:
        allowed = ", ".join(map(repr, DRY_RUN_VALUES))
        raise ValueError(f"{DRY_RUN_VAR}={dry_setting!r} is not one of {allowed}: set it to 1 for a dry run, "
                         f"0 or nothing (or unset it) for none")
    dry = dry_setting == "1" or name.endswith(DRY_RUN_SUFFIX)
    name = name.removesuffix(DRY_RUN_SUFFIX)
    if name not in SCALES:
        given = f"{ENV_VAR}={name!r}" if source == ENV_VAR else f"scale {name!r}"
        raise ValueError(f"unknown {given}; choose one of {', '.join(SCALES)}")
    return dry_run(SCALES[name]) if dry else SCALES[name]


def train_args_of(s: Scale, **changes) -> TrainArgs:
    """The scale's training arguments (batch size, steps, lr, warmup, eval cadence), with some changed."""
    base = dict(steps=s.pretrain_steps, batch_size=s.batch_size, lr=s.learning_rate,
                warmup=s.warmup_steps, eval_every=s.eval_every, checkpoint_every=s.eval_every,
                optimizer=s.optimizer, eval_examples=s.eval_examples)
    steps = changes.get("steps", base["steps"])
    if "warmup" not in changes and isinstance(steps, int) and 0 <= steps < base["warmup"]:
        warnings.warn(f"the {s.name} scale's warmup of {base['warmup']} steps is longer than "
                      f"steps={steps}: using warmup={steps} (pass warmup to choose)", stacklevel=2)
        base["warmup"] = steps
    return TrainArgs(**{**base, **changes})
