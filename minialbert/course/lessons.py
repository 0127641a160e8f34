"""What each lesson measures, at each scale: its sample sizes, step counts and seeds.

A Scale (minialbert/course/scale.py) holds the sizes of the model and of its pretraining; what a lesson
measures on top of that lives here, one small dataclass per experiment, each field named for what it
sizes. The defaults are the course's values (the gpu scale uses them too); ci shrinks them to seconds, and
a dry run to a handful of examples. A lesson's first cell (or the CLI, or `figures`) resolves them once, with
`lesson_sizes(scale)`, and passes them down: experiments take them as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..finetune import FinetuneArgs
from .experiments import long_text_ablation, order_control
from .experiments.ablation import AblationSizes
from .experiments.long_text_ablation import LongTextSizes
from .experiments.order_control import OrderControlSizes
from .scale import Scale


@dataclass(frozen=True)
class Tokenizers:                           # lesson 01
    vocab_sizes: tuple = (1000, 2000, 4000, 6000)   # tokenizers trained side by side


@dataclass(frozen=True)
class PretrainingDemo:                      # lesson 05
    chain_steps: int = 400                  # steps of the synthetic permutation-chain check
    steps: int = 400                        # steps of the small demonstration runs
    batch_size: int = 16                    # their batch size
    eval_examples: int = 500                # held-out examples scored after one of them
    fill_in_sentences: int = 300            # held-out sentences with their middle word masked


@dataclass(frozen=True)
class Smoothness:                           # lesson 06, `python -m minialbert smoothness`, the figures
    sequences: int = 1000                   # held-out sequences measured (a fixed seeded sample)
    batch_size: int = 50                    # sequences per batch


@dataclass(frozen=True)
class Downstream:                           # lessons 07 and 09: one fine-tuning run on labelled examples
    finetune: FinetuneArgs = field(default_factory=FinetuneArgs)   # steps, warmup, evaluations
    labels: int = 1024                      # labelled examples of one run
    seeds: int = 3                          # fine-tuning seeds per point or model


@dataclass(frozen=True)
class LearningCurve:                        # lesson 07
    label_sizes: tuple = (16, 64, 256, 1024)   # the curve's label counts
    few_label_sizes: tuple = (64, 1024)     # the other tasks' label counts (the first is "few")
    test_examples: int = 2000               # test examples each run is scored on (a seeded sample)
    long_warmup: int = 100                  # the long from-scratch run (10x the steps): its warmup
    long_eval_every: int = 100              # and its evaluation cadence
    probe_steps: int = 1000                 # the exercise's linear probe


@dataclass(frozen=True)
class Speed:                                # lesson 09: models timed step by step
    presets: tuple = ("albert-base", "bert-base")
    repeats: int = 5                        # timed steps per model


@dataclass(frozen=True)
class Attention:                            # lesson 10
    seq_lens: tuple = (64, 128, 256, 512, 1024)   # the memory table's sequence lengths
    kernel_check_len: int = 130             # sequence length of the padded-kernel check


@dataclass(frozen=True)
class LessonSizes:
    tokenizers: Tokenizers = Tokenizers()
    demo: PretrainingDemo = PretrainingDemo()
    smoothness: Smoothness = Smoothness()
    downstream: Downstream = field(default_factory=Downstream)
    curve: LearningCurve = LearningCurve()
    ablation: AblationSizes = AblationSizes()   # lesson 08 and `python -m minialbert ablation`
    long_text: LongTextSizes = long_text_ablation.COURSE_SIZES         # lesson 08's 128-token arms
    order_control: OrderControlSizes = order_control.COURSE_SIZES      # lesson 08's positive control
    speed: Speed = Speed()
    attention: Attention = Attention()
    paired_examples: int = 20_000           # lesson 09: held-out examples read by every variant (paired)
    fill_mask_sentences: int = 500          # lesson 11: held-out sentences with one word masked, scored
    narrow_by: int = 1                      # lesson 12: widths divided by this for the speed table
    read_results: bool = True               # lesson 08 reads the committed ablation JSON when present


# ci: every lesson in seconds (what CI and nbval run); course and gpu: the defaults.
LESSON_SIZES = {
    "ci": LessonSizes(
        tokenizers=Tokenizers((250, 500, 1000)),
        demo=PretrainingDemo(chain_steps=40, steps=20),
        smoothness=Smoothness(sequences=48, batch_size=4),
        downstream=Downstream(FinetuneArgs(steps=20, warmup=2, eval_every=10, dev_examples=100), labels=64,
                              seeds=1),
        curve=LearningCurve(label_sizes=(16, 64), few_label_sizes=(16, 64), long_warmup=5, long_eval_every=10,
                            probe_steps=20),
        ablation=AblationSizes(seeds=1, probe_examples=200, downstream_labels=32),
        long_text=long_text_ablation.CI_SIZES, order_control=order_control.CI_SIZES,
        speed=Speed(("ci-albert", "ci-bert"), repeats=2),
        attention=Attention(seq_lens=(64, 128, 256, 512), kernel_check_len=70),
        paired_examples=64, narrow_by=8, read_results=False),
    "course": LessonSizes(),
    "gpu": LessonSizes(),
}


def dry_run_sizes(sizes: LessonSizes) -> LessonSizes:
    """A dry run's sizes: every sample and step count capped, the models timed kept. Its numbers measure
    nothing; they run the lessons' code paths in minutes. Smoothness: 5 sequences in batches of 1 are the
    5 batches lesson 06 splits into its 5 folds."""
    return replace(
        sizes, tokenizers=Tokenizers((1000, 6000)),
        demo=PretrainingDemo(chain_steps=4, steps=2, batch_size=2, eval_examples=8, fill_in_sentences=8),
        smoothness=Smoothness(sequences=5, batch_size=1),
        downstream=Downstream(FinetuneArgs(steps=2, warmup=1, eval_every=1, dev_examples=8), labels=8,
                              seeds=1),
        curve=LearningCurve(label_sizes=(4, 8), few_label_sizes=(4, 8), test_examples=8, long_warmup=1,
                            long_eval_every=5, probe_steps=2),
        ablation=AblationSizes(seeds=1, probe_examples=8, downstream_labels=8),
        long_text=replace(long_text_ablation.CI_SIZES, heldout_documents=4, mask_examples=16,
                          probe_examples=16, questions_per_document=1,
                          choice=replace(long_text_ablation.CI_SIZES.choice, steps=2, batch=2)),
        order_control=replace(order_control.CI_SIZES, name="dry", heldout_documents=16, steps=4,
                              overfit_steps=4, probe_examples=16, choice_steps=2, choice_batch=2),
        speed=replace(sizes.speed, repeats=1), attention=Attention(seq_lens=(64, 128), kernel_check_len=70),
        paired_examples=16, fill_mask_sentences=8, narrow_by=8, read_results=False)


def lesson_sizes(scale: Scale) -> LessonSizes:
    """The lessons' sizes at `scale`, its fine-tuning runs at the scale's sequence length and held-out
    sample. Call it at the edge, beside current_scale(), and pass the result down."""
    sizes = LESSON_SIZES[scale.base_name]
    sizes = dry_run_sizes(sizes) if scale.is_dry_run else sizes
    finetune = replace(sizes.downstream.finetune, max_seq_len=scale.data.max_seq_len,
                       test_examples=scale.recipe.eval_examples)
    return replace(sizes, downstream=replace(sizes.downstream, finetune=finetune))
