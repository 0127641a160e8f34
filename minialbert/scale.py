"""Scale: the one switch for sizes and step counts in lessons, CLI, experiments and figures.

- ci: seconds per notebook (what CI and nbval run)
- course (default): a 2-core laptop CPU, at most ~10 minutes per notebook
- gpu: one GPU, larger and deeper models, longer runs
- any of them with $MINIALBERT_DRY_RUN=1: `<name>-dry`, its model kept, every step count and sample
  size capped (`dry_run`): the gpu scale's code paths at its real shapes, on a CPU in minutes

The scale is resolved once, at the edge (the CLI, `figures`, a lesson's first cell, with
`current_scale()`), and passed down; library code takes a Scale and never reads the environment.
Every size that differs between scales lives here, by name: no code compares a scale's name.
The model's vocabulary and positions come from the scale's preset (config.PRESETS), stated once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from .config import PRESETS, AlbertConfig

ENV_VAR = "MINIALBERT_SCALE"


@dataclass(frozen=True)
class Scale:
    name: str
    albert_preset: str          # model sizes (see config.PRESETS); the BERT twin is bert_preset
    bert_preset: str
    corpus: str                 # the pretraining text: "course" (pinned, corpus.py) or "pydocs" (embedded)
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
    # What lessons and experiments measure (the course values; ci shrinks them to seconds).
    vocab_sweep: tuple = (1000, 2000, 4000, 6000)   # lesson 01: tokenizers trained side by side
    chain_steps: int = 400                 # lesson 05: steps of the synthetic permutation-chain check
    demo_steps: int = 400                  # lesson 05: steps of the small demonstration runs
    demo_batch: int = 16                   # lesson 05: their batch size
    demo_eval_examples: int = 500          # lesson 05: held-out examples scored after one of them
    fill_in_sentences: int = 300           # lesson 05: held-out sentences with their middle word masked
    smoothness_sequences: int = 1000       # lesson 06: held-out sequences measured
    smoothness_batch: int = 50             # lesson 06: sequences per batch
    finetune_steps: int = 300              # a downstream fine-tuning run (lessons 07, 09, the ablation)
    finetune_warmup: int = 30
    finetune_eval_every: int = 25
    finetune_dev_examples: int | None = 1000
    finetune_labels: int = 1024            # labelled examples of one downstream run (lessons 07, 09)
    label_sizes: tuple = (16, 64, 256, 1024)   # lesson 07: the learning curve's label counts
    curve_test_examples: int = 2000        # lesson 07: test examples each run is scored on (a seeded sample)
    few_label_sizes: tuple = (64, 1024)    # lesson 07: the other tasks' label counts (the first is "few")
    long_finetune_warmup: int = 100        # lesson 07: the long from-scratch run (10x the steps)
    long_finetune_eval_every: int = 100
    probe_steps: int = 1000                # lesson 07's exercise: the linear probe's steps
    finetune_seeds: int = 3                # lessons 07 and 09: fine-tuning seeds per point or model
    ablation_seeds: int = 3                # lesson 08: pretraining seeds per arm
    probe_examples: int = 2000             # the ablation: labelled pairs its linear probes fit on
    downstream_labels: int = 256           # the ablation: labels per downstream task
    speed_presets: tuple = ("albert-base", "bert-base")   # lesson 09: the models timed step by step
    speed_repeats: int = 5                 # lesson 09: timed steps per model
    attention_seq_lens: tuple = (64, 128, 256, 512, 1024)   # lesson 10: the memory table's lengths
    kernel_check_len: int = 130            # lesson 10: sequence length of the padded-kernel check
    fill_mask_sentences: int = 500         # lesson 11: held-out sentences with one word masked, scored
    narrow_by: int = 1                     # lesson 12: widths divided by this for the speed table
    lessons_read_results: bool = True      # lesson 08 reads the committed ablation JSON when present
    lessons_build_zoo: bool = False        # lessons may train a missing zoo entry (only where it is seconds)

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


_CI_LESSONS = dict(
    vocab_sweep=(250, 500, 1000), chain_steps=40, demo_steps=20, smoothness_sequences=48, smoothness_batch=4,
    finetune_steps=20, finetune_warmup=2, finetune_eval_every=10, finetune_dev_examples=100,
    finetune_labels=64, label_sizes=(16, 64), few_label_sizes=(16, 64), long_finetune_warmup=5,
    long_finetune_eval_every=10, probe_steps=20, finetune_seeds=1, ablation_seeds=1, probe_examples=200,
    downstream_labels=32, speed_presets=("ci-albert", "ci-bert"), speed_repeats=2,
    attention_seq_lens=(64, 128, 256, 512), kernel_check_len=70, narrow_by=8, lessons_read_results=False,
    lessons_build_zoo=True)

SCALES = {
    # ci reads the small corpus embedded in the package (seconds, no download); the others the pinned one
    "ci": Scale("ci", "ci-albert", "ci-bert", corpus="pydocs", max_documents=300, batch_size=16,
                pretrain_steps=30, learning_rate=2e-3, warmup_steps=5, eval_every=15, zoo_steps=30,
                step_seconds=0.02, figure_subdir="ci", **_CI_LESSONS),
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
    # documents, or a larger vocabulary, fail with a one-line error naming the scale (course.py).
    # Smoothness: 5 sequences in batches of 1 are the 5 batches lesson 06 splits into its 5 folds.
    corpus="pydocs", max_documents=800,
    batch_size=2, pretrain_steps=2, warmup_steps=1, eval_every=1, dupe_factor=1, zoo_steps=2, zoo_evals=2,
    step_seconds=0.0, eval_examples=8, vocab_sweep=(1000, 6000), chain_steps=4, demo_steps=2, demo_batch=2,
    demo_eval_examples=8, fill_in_sentences=8, fill_mask_sentences=8,
    smoothness_sequences=5, smoothness_batch=1, finetune_steps=2, finetune_warmup=1, finetune_eval_every=1,
    finetune_dev_examples=8, finetune_labels=8, label_sizes=(4, 8), few_label_sizes=(4, 8),
    curve_test_examples=8, long_finetune_warmup=1, long_finetune_eval_every=5, probe_steps=2,
    finetune_seeds=1, ablation_seeds=1, probe_examples=8, downstream_labels=8,
    speed_repeats=1, attention_seq_lens=(64, 128), kernel_check_len=70, narrow_by=8,
    lessons_read_results=False, lessons_build_zoo=True)


def dry_run(scale: Scale) -> Scale:
    """`scale` shortened to a dry run: the fields of DRY_RUN replaced (steps, samples, the corpus), the
    model presets kept, named `<name>-dry` so its zoo entries, caches and figures (assets/figures/
    <figure_subdir>-dry) never mix with the real scale's. A dry-run scale is returned as it is."""
    if scale.name.endswith(DRY_RUN_SUFFIX):
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
