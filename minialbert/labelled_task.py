"""A labelled downstream task: its examples, its splits and what a model is scored with.

The offline tasks (tasks.py) and GLUE's (glue.py) are both a `Task`; fine-tuning (finetune.py) reads one.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from .evaluation import task_metrics

SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Example:
    text_a: str
    text_b: str | None          # None for single-sentence tasks
    label: int | float          # class id, or a float target for regression
    document: int | None = None  # the document a pair comes from (pairs of one document are not
                                 # independent: test intervals resample documents); None: independent


@dataclass
class Task:
    """A labelled task: its splits, label names (empty for regression) and the metric early stopping uses."""

    name: str
    about: str                  # one line: what the model decides
    source: str                 # where the examples come from
    labels: tuple[str, ...]     # name of each class id; () for regression
    metric: str                 # key of evaluation.task_metrics() that model selection maximises
    train: list[Example]
    dev: list[Example]
    test: list[Example] = field(default_factory=list)
    removed_overlap: dict[str, int] = field(default_factory=dict)   # split -> examples dropped for overlap

    @property
    def num_labels(self) -> int:
        return len(self.labels) or 1

    @property
    def is_pair(self) -> bool:
        return any(ex.text_b is not None for ex in self.train[:1] + self.dev[:1])

    def split(self, name: str) -> list[Example]:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; choose one of {', '.join(SPLITS)}")
        return getattr(self, name)

    def subset(self, n: int | None, seed: int = 0) -> list[Example]:
        """n training examples, a seeded sample: for classification, as even over the classes as the
        training set allows (so 16 labels are 8 + 8 on a binary task). None: all of them."""
        if n is None:
            return list(self.train)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(self.train):
            raise ValueError(f"task {self.name} has {len(self.train)} training examples; "
                             f"--labels must be between 1 and {len(self.train)}, got {n}")
        rng = random.Random(f"{self.name}:subset:{seed}")
        if not self.labels:
            return rng.sample(self.train, n)
        by_class = [[ex for ex in self.train if ex.label == c] for c in range(self.num_labels)]
        for members in by_class:
            rng.shuffle(members)
        picked, turn = [], 0
        while len(picked) < n:                   # round robin over classes that still have examples
            members = by_class[turn % len(by_class)]
            if members:
                picked.append(members.pop())
            turn += 1
        rng.shuffle(picked)
        return picked

    def majority_baseline(self, split: str = "dev") -> dict:
        """The metrics of always answering the training set's most common class (regression: its mean)."""
        examples = self.split(split)
        if self.labels:
            guess = Counter(ex.label for ex in self.train).most_common(1)[0][0]
        else:
            guess = sum(ex.label for ex in self.train) / len(self.train)
        return task_metrics([guess] * len(examples), [ex.label for ex in examples], self.num_labels,
                            [ex.document for ex in examples])

    def describe(self) -> dict:
        """Name, kind, sizes, label balance per split, and the majority baseline on dev (and test)."""
        balance = {}
        for s in SPLITS:
            examples = self.split(s)
            if self.labels and examples:
                counts = Counter(ex.label for ex in examples)
                balance[s] = {name: round(counts[c] / len(examples), 4) for c, name in enumerate(self.labels)}
        return {"name": self.name, "about": self.about, "source": self.source,
                "kind": "sentence pair" if self.is_pair else "single sentence",
                "labels": list(self.labels) or "regression", "metric": self.metric,
                "sizes": {s: len(self.split(s)) for s in SPLITS}, "label_balance": balance,
                "majority_baseline": {s: self.majority_baseline(s) for s in ("dev", "test") if self.split(s)},
                "removed_overlap": self.removed_overlap}
