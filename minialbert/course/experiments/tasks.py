"""Downstream tasks: offline ones built from a scale's pretraining corpus, and loaders for GLUE's TSV files.

Offline tasks (no network; deterministic; from the corpus's own train/valid/test documents):

- `word-order` (single sentence, CoLA-like, Matthews correlation): is the sentence as written (1,
  "intact") or were two adjacent inner words swapped (0, "swapped")? Both classes hold exactly the
  same words, so a bag of words is at chance: only word order separates them. Each source sentence
  appears once, in one class only; exactly half of each split is swapped. The swapped pair is two
  purely alphabetic inner words, so capitals and final punctuation give nothing away.
- `shuffled-words` (single sentence, accuracy): is the sentence as written (1, "intact"), or were its
  words shuffled (0, "shuffled")? Both classes hold the same words, so a bag of words is at chance, but
  every word may move, the first (capitalised) one and the last (with its full stop) included: a model
  that knows how sentences begin and end has a cue. Sentences of 6 to 14 words, so that most fit the
  course model's 32-token window; each source sentence is used once.
- `shuffled-inner-words` (single sentence, accuracy): the same with the first and last words kept.
- `next-sentence` (sentence pair, MRPC-like, accuracy and F1): does sentence B directly follow
  sentence A in their document (1, "next"), or is B a later sentence of the same document, two or
  more positions on (0, "later")? Both B's come from A's own document, so topic words do not decide
  it; exactly half of each split is "next", and each A is used once.

Majority-class baselines, by construction: 50% accuracy, Matthews 0, F1 0 or 0.67 (`Task.describe()`).

Overlap with pretraining: pretraining reads only the corpus's train documents; a dev or test example
whose sentence (A or B) also occurs verbatim in a train document is dropped (`removed_overlap`).

GLUE's tasks are read by glue.py; `load_task(name)` gives either kind, a `Task` (labelled_task.py).
"""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path

from ...corpus import documents
from ...glue import GLUE, default_glue_dir, load_glue
from ...labelled_task import SPLITS, Example, Task
from ...sentences import Document
from ..scale import Data

CORPUS_SPLIT = {"train": "train", "dev": "valid", "test": "test"}   # task split -> corpus document split


# ---------------------------------------------------------------------------------- offline tasks
def _swap_adjacent_words(sentence: str, rng: random.Random) -> str | None:
    """The sentence with two adjacent inner alphabetic words swapped; None if it has no such pair."""
    words = sentence.split()
    spots = [i for i in range(1, len(words) - 2)          # never the first or the last word
             if words[i].isalpha() and words[i + 1].isalpha() and words[i].lower() != words[i + 1].lower()]
    if not spots:
        return None
    i = rng.choice(spots)
    words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def _train_sentences(corpus: str) -> set[str]:
    """Every sentence of the corpus's train documents (all of them, whatever the scale): the overlap check."""
    return {s for d in documents(corpus, "train") for s in d.sentences}


def _unseen(sentences: list[str], seen: set[str] | None) -> tuple[list[str], int]:
    """The sentences not in `seen` (None: keep all), and how many were dropped."""
    kept = sentences if seen is None else [s for s in sentences if s not in seen]
    return kept, len(sentences) - len(kept)


def _word_order_split(documents: list[Document], rng: random.Random,
                      seen: set[str] | None) -> tuple[list[Example], int]:
    sentences, removed = _unseen(sorted({s for d in documents for s in d.sentences}), seen)  # each once
    candidates = [(s, swapped) for s in sentences if (swapped := _swap_adjacent_words(s, rng)) is not None]
    rng.shuffle(candidates)
    half = len(candidates) // 2
    examples = ([Example(s, None, 1) for s, _ in candidates[:half]]
                + [Example(swapped, None, 0) for _, swapped in candidates[half:2 * half]])
    rng.shuffle(examples)
    return examples, removed


def _shuffle_words(sentence: str, rng: random.Random, keep_ends: bool) -> str | None:
    """The sentence with its words (all, or all but the first and the last) in a new random order;
    None if no other order exists."""
    words = sentence.split()
    lo, hi = (1, len(words) - 1) if keep_ends else (0, len(words))
    middle = words[lo:hi]
    if len(set(middle)) < 2:
        return None
    shuffled = middle[:]
    while shuffled == middle:
        rng.shuffle(shuffled)
    return " ".join([*words[:lo], *shuffled, *words[hi:]])


def _shuffled_words_split(documents: list[Document], rng: random.Random, seen: set[str] | None,
                          keep_ends: bool) -> tuple[list[Example], int]:
    sentences, removed = _unseen(sorted({s for d in documents for s in d.sentences
                                         if 6 <= len(s.split()) <= 14}), seen)
    rng.shuffle(sentences)
    half = len(sentences) // 2
    examples = [Example(s, None, 1) for s in sentences[:half]]
    examples += [Example(shuffled, None, 0) for s in sentences[half:2 * half]
                 if (shuffled := _shuffle_words(s, rng, keep_ends)) is not None]
    return _balanced(examples, rng), removed


def _next_sentence_split(documents: list[Document], rng: random.Random,
                         seen: set[str] | None) -> tuple[list[Example], int]:
    anchors = [(n, d, i) for n, d in enumerate(documents)
               for i in range(len(d.sentences) - 2)]                     # i + 2 exists
    rng.shuffle(anchors)
    half = len(anchors) // 2
    examples, removed = [], 0
    for k, (n, d, i) in enumerate(anchors[:2 * half]):
        follows = k < half
        j = i + 1 if follows else rng.randrange(i + 2, len(d.sentences))
        a, b = d.sentences[i], d.sentences[j]
        if a == b or (not follows and b == d.sentences[i + 1]):   # a repeated sentence: no clean answer
            continue
        if seen is not None and (a in seen or b in seen):
            removed += 1
            continue
        examples.append(Example(a, b, int(follows), document=n))
    return _balanced(examples, rng), removed


def _balanced(examples: list[Example], rng: random.Random) -> list[Example]:
    """As many examples of each class as of the rarest (dropping overlaps can tip the balance), shuffled."""
    classes = sorted({ex.label for ex in examples})
    keep = min(sum(ex.label == c for ex in examples) for c in classes)
    examples = [ex for c in classes for ex in [e for e in examples if e.label == c][:keep]]
    rng.shuffle(examples)
    return examples


def _offline_task(name: str, builder, corpus: str, max_documents: int | None) -> dict:
    splits, removed = {}, {}
    seen = None
    for split in SPLITS:
        docs = documents(corpus, CORPUS_SPLIT[split], max_documents)
        if split != "train" and seen is None:
            seen = _train_sentences(corpus)
        splits[split], removed[split] = builder(docs, random.Random(f"{name}:{split}"),
                                                None if split == "train" else seen)
    return dict(splits, removed_overlap={s: n for s, n in removed.items() if s != "train"})


def word_order(corpus: str, max_documents: int | None = None) -> Task:
    """Single sentence: word order intact (1) or two adjacent inner words swapped (0). See the module doc."""
    return Task("word-order", "is the word order intact, or were two adjacent words swapped?",
                f"{corpus} corpus (sentences of each split's documents)", ("swapped", "intact"), "matthews",
                **_offline_task("word-order", _word_order_split, corpus, max_documents))


def shuffled_words(corpus: str, max_documents: int | None = None, keep_ends: bool = False) -> Task:
    """Single sentence: as written (1) or words shuffled (0); keep_ends: the first and the last word stay
    (the task `shuffled-inner-words`). See the module doc."""
    name = "shuffled-inner-words" if keep_ends else "shuffled-words"
    which = "inner words (all but the first and the last)" if keep_ends else "words"
    return Task(name, f"is the sentence as written, or were its {which} shuffled?",
                f"{corpus} corpus (sentences of 6-14 words of each split's documents)",
                ("shuffled", "intact"),
                "accuracy", **_offline_task(name, partial(_shuffled_words_split, keep_ends=keep_ends),
                                            corpus, max_documents))


def next_sentence(corpus: str, max_documents: int | None = None) -> Task:
    """Sentence pair: B follows A directly (1) or comes later in the same document (0). See the module doc."""
    return Task("next-sentence", "does sentence B directly follow A, or come later in the same document?",
                f"{corpus} corpus (sentence pairs within each split's documents)", ("later", "next"),
                "accuracy",
                **_offline_task("next-sentence", _next_sentence_split, corpus, max_documents))


OFFLINE_TASKS = {"word-order": word_order, "shuffled-words": shuffled_words,
                 "shuffled-inner-words": partial(shuffled_words, keep_ends=True),
                 "next-sentence": next_sentence}


# ---------------------------------------------------------------------------------- registry
def task_names() -> list[str]:
    return [*OFFLINE_TASKS, *GLUE]


def load_task(name: str, data: Data | None = None, glue_dir: str | Path | None = None) -> Task:
    """A task by name: offline tasks from the corpus of a scale's data (its max_documents per split), GLUE
    tasks from glue_dir (default: where download_glue puts them)."""
    if name in OFFLINE_TASKS:
        if data is None:
            raise ValueError(f"task {name!r} is built from a scale's corpus: pass the scale's data "
                             "(minialbert.course.scale.current_scale().data)")
        return OFFLINE_TASKS[name](data.corpus, data.max_documents)
    if name in GLUE:
        return load_glue(name, glue_dir if glue_dir is not None else default_glue_dir())
    raise ValueError(f"unknown task {name!r}; choose one of {', '.join(task_names())}")


def format_tasks(described: list[dict]) -> str:
    """A table of Task.describe() dicts: name, kind, sizes, labels, metric, majority baseline, source."""
    lines = [f"{'task':14s} {'kind':16s} {'train':>6s} {'dev':>5s} {'test':>5s}  {'metric':9s} "
             f"{'majority (dev)':15s} labels; source"]
    for d in described:
        sizes = d.get("sizes", {})
        baseline = d.get("majority_baseline", {}).get("dev", {}).get(d["metric"])
        labels = "/".join(d["labels"]) if isinstance(d["labels"], list) else d["labels"]
        lines.append(f"{d['name']:14s} {d.get('kind', '-'):16s} {sizes.get('train', '-'):>6} "
                     f"{sizes.get('dev', '-'):>5} {sizes.get('test', '-'):>5}  {d['metric']:9s} "
                     f"{'-' if baseline is None else f'{baseline:.3f}':15s} {labels}; {d['source']}")
    return "\n".join(lines)
