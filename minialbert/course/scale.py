"""Scale: the one switch for the sizes of the model and of its pretraining, for lessons, CLI, experiments
and figures, in typed parts: its models (`Models`), how it pretrains (`Recipe`), what its data sets are
made from (`Data`) and the zoo's budget (`ZooBudget`), beside its name and its figures' folder. A function
takes the part it reads. What a lesson measures on top of them (its samples, seeds, fine-tuning runs) is
sized in minialbert/course/lessons.py.

- ci: seconds per notebook (what CI and nbval run)
- course (default): a 2-core laptop CPU, at most ~10 minutes per notebook
- gpu: one GPU, larger and deeper models, longer runs
- any of them with $MINIALBERT_DRY_RUN=1: `<name>-dry`, its model kept, every step count and sample
  size capped (`dry_run`): the gpu scale's code paths at its real shapes, on a CPU in minutes

The scale is resolved once, at the edge (the CLI, `figures`, a lesson's first cell, with
`current_scale()`), and its parts are passed down; the core never sees a Scale, and nothing but this
module reads the environment for it. Every model and pretraining size that differs between scales lives
here, by name: no code compares a scale's name (a dry run is known by `is_dry_run`).
The model's vocabulary and positions come from the scale's preset (config.PRESETS), stated once: the data
part copies them from the models when a Scale is made (`Scale.of`), and a Scale checks they agree.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass

from ..config import PRESETS, AlbertConfig
from ..train import TrainArgs

ENV_VAR = "MINIALBERT_SCALE"


@dataclass(frozen=True)
class Models:
    """The model sizes: the scale's ALBERT and its BERT twin, by preset (config.PRESETS)."""
    albert_preset: str
    bert_preset: str

    @property
    def vocab_size(self) -> int:
        """SentencePiece pieces of the course tokenizer: the preset's vocabulary."""
        return PRESETS[self.albert_preset]["vocab_size"]

    @property
    def max_seq_len(self) -> int:
        """Pretraining sequence length: the preset's positions."""
        return PRESETS[self.albert_preset]["max_position_embeddings"]

    def config(self, arch: str = "albert", **changes) -> AlbertConfig:
        """The ALBERT (arch="albert") or its BERT twin ("bert"), with some fields changed."""
        presets = {"albert": self.albert_preset, "bert": self.bert_preset}
        if arch not in presets:
            raise ValueError(f"unknown arch {arch!r}; choose albert or bert")
        return AlbertConfig.preset(presets[arch], **changes)


@dataclass(frozen=True)
class Recipe:
    """How a pretraining run of the scale trains, and what one of its steps was measured to cost."""
    batch_size: int
    pretrain_steps: int
    learning_rate: float
    warmup_steps: int
    eval_every: int
    optimizer: str = "lamb"     # lamb | adamw
    eval_examples: int | None = None   # held-out examples per evaluation of a pretraining run and per
                                       # model in the ablation, a fixed seeded sample (None = all)
    step_seconds: float = 0.0   # measured seconds per step (time estimates only; 0 = not measured)

    def train_args(self, **changes) -> TrainArgs:
        """The training arguments (batch size, steps, lr, warmup, eval cadence), with some changed."""
        base = dict(steps=self.pretrain_steps, batch_size=self.batch_size, lr=self.learning_rate,
                    warmup=self.warmup_steps, eval_every=self.eval_every, checkpoint_every=self.eval_every,
                    optimizer=self.optimizer, eval_examples=self.eval_examples)
        steps = changes.get("steps", base["steps"])
        if "warmup" not in changes and isinstance(steps, int) and 0 <= steps < base["warmup"]:
            warnings.warn(f"the recipe's warmup of {base['warmup']} steps is longer than "
                          f"steps={steps}: using warmup={steps} (pass warmup to choose)", stacklevel=2)
            base["warmup"] = steps
        return TrainArgs(**{**base, **changes})


@dataclass(frozen=True)
class Data:
    """What the course's tokenizer and pretraining sets are made from (course/data.py)."""
    corpus: str                 # the pretraining text: "course" (pinned, corpus/) or "pydocs" (embedded)
    max_documents: int | None   # cap on corpus documents used (None = all)
    vocab_size: int             # the tokenizer's pieces: the models' vocabulary
    max_seq_len: int            # tokens per pretraining example: the models' positions
    dupe_factor: int = 1        # pretraining-data passes over the corpus, each with new cuts and masks
    mask_rate: float = 0.15     # share of real tokens predicted (the paper: 15%)
    data_shards: int = 0        # pretraining sets drawn from this many random streams, built on every core
                                # (0: one stream, one core, the official script's order; pretraining_data)


@dataclass(frozen=True)
class ZooBudget:
    """What every model-zoo entry of the scale may spend (one budget, so entries compare)."""
    steps: int = 0              # steps of an entry (the zoo's own budget; entries take shares of it)
    evals: int = 5              # held-out evaluations per run (the curves of the replication lessons)
    threads: int = 1            # torch threads of a build: fixed, so a rebuild gives the same bytes
    on_demand: bool = False     # its entries take seconds: zoo.load trains a missing one


# Scale.of's flat keywords: each names one field of one part (the zoo budget's with a zoo_ prefix).
PARTS = {"recipe": Recipe, "data": Data, "zoo": ZooBudget}
PREFIX = {"recipe": "", "data": "", "zoo": "zoo_"}
DERIVED = {"vocab_size", "max_seq_len"}         # the data's, copied from the models


@dataclass(frozen=True)
class Scale:
    name: str
    models: Models
    recipe: Recipe
    data: Data
    zoo: ZooBudget
    figure_subdir: str = ""     # figures go to assets/figures/<figure_subdir> ("": the committed ones)

    def __post_init__(self):
        sizes = (self.models.vocab_size, self.models.max_seq_len)
        if (self.data.vocab_size, self.data.max_seq_len) != sizes:
            raise ValueError(f"scale {self.name!r}: its data's vocab_size and max_seq_len must be its "
                             f"models' {sizes}; make it with Scale.of, which copies them")

    @classmethod
    def of(cls, name: str, albert_preset: str, bert_preset: str, figure_subdir: str = "", **fields) -> Scale:
        """A Scale from flat keywords, each a field of one part (zoo_steps, zoo_evals, zoo_threads and
        zoo_on_demand: the zoo budget's), the data's vocabulary and sequence length taken from the models."""
        models = Models(albert_preset, bert_preset)
        route = {PREFIX[part] + f.name: (part, f.name) for part, kind in PARTS.items()
                 for f in dataclasses.fields(kind) if f.name not in DERIVED}
        if unknown := sorted(set(fields) - set(route)):
            raise TypeError(f"a Scale has no field {', '.join(unknown)}; choose from {', '.join(route)}")
        given = {part: {} for part in PARTS}
        for key, value in fields.items():
            part, field = route[key]
            given[part][field] = value
        data = Data(vocab_size=models.vocab_size, max_seq_len=models.max_seq_len, **given["data"])
        return cls(name, models, Recipe(**given["recipe"]), data, ZooBudget(**given["zoo"]), figure_subdir)

    def fields(self) -> dict:
        """Scale.of's keywords for this scale: every field of every part, flat."""
        flat = dict(name=self.name, **dataclasses.asdict(self.models), figure_subdir=self.figure_subdir)
        for part in PARTS:
            flat.update({PREFIX[part] + k: v for k, v in dataclasses.asdict(getattr(self, part)).items()
                         if k not in DERIVED})
        return flat

    def replace(self, **changes) -> Scale:
        """This scale with some fields changed, named as Scale.of names them (the data's sizes follow the
        models)."""
        return Scale.of(**{**self.fields(), **changes})

    @property
    def is_dry_run(self) -> bool:
        """A dry run of another scale (see `dry_run`): its numbers measure nothing."""
        return self.name.endswith(DRY_RUN_SUFFIX)

    @property
    def base_name(self) -> str:
        """The scale a dry run shortens (its own name for any other scale)."""
        return self.name.removesuffix(DRY_RUN_SUFFIX)

    def model_config(self, arch: str = "albert", **changes) -> AlbertConfig:
        """The scale's ALBERT (arch="albert") or its BERT twin ("bert"), with some fields changed."""
        return self.models.config(arch, **changes)


SCALES = {
    # ci reads the small corpus embedded in the package (seconds, no download); the others the pinned one
    "ci": Scale.of("ci", "ci-albert", "ci-bert", corpus="pydocs", max_documents=300, batch_size=16,
                   pretrain_steps=30, learning_rate=2e-3, warmup_steps=5, eval_every=15, zoo_steps=30,
                   step_seconds=0.02, figure_subdir="ci", zoo_on_demand=True),
    "course": Scale.of("course", "course-albert", "course-bert", corpus="course", max_documents=None,
                       batch_size=64, pretrain_steps=12000, learning_rate=3e-3, warmup_steps=300,
                       eval_every=1500, dupe_factor=10, optimizer="adamw", zoo_steps=20000, zoo_evals=8,
                       step_seconds=0.1),
    # gpu: AdamW at 3e-4 with a 10% warmup, not the paper's LAMB at 1.76e-3 (a batch-4,096 rate): on the
    # permutation chains a 12-layer twin left the plateau by step 300 with AdamW and not in 800 steps with
    # LAMB at any rate from 3e-4 to 1e-2 (benchmarks/gpu_recipe_probe.py). On an H200 it stayed on the
    # unigram plateau for 2,173 steps at the paper's initializer_range 0.02 and left it in 2,054 at 0.01 (the
    # gpu presets' value now; assets/benchmarks/gpu_recipe_h200.json), though only just (6.0% [MASK] against
    # unigram 4.6% and the neighbour baseline 12.7%); a 600-step probe of LAMB at 0.01 was leaving it too
    "gpu": Scale.of("gpu", "gpu-albert", "gpu-bert", corpus="course", max_documents=None, batch_size=128,
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
    return scale.replace(name=scale.name + DRY_RUN_SUFFIX, figure_subdir=subdir, **DRY_RUN)


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

