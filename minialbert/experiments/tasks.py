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

GLUE: `download_glue(name)` fetches a task's pinned files (URL, size and sha256 fixed below) laid out
as GLUE's own script does; `load_glue(name, directory)` reads that layout (DIR/SST-2/train.tsv, ...).
GLUE's test files carry no labels, so the split used for reporting is dev.
"""

from __future__ import annotations

import csv
import random
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ..corpus import documents
from ..download import atomic_write, cache_dir, download
from ..evaluation import task_metrics
from ..scale import Scale
from ..sentences import Document

SPLITS = ("train", "dev", "test")
CORPUS_SPLIT = {"train": "train", "dev": "valid", "test": "test"}   # task split -> corpus document split


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


# ---------------------------------------------------------------------------------- GLUE
@dataclass(frozen=True)
class GlueSpec:
    folder: str                          # the folder name in GLUE's download
    header: bool                         # does each TSV start with a header row?
    text_a: str | int                    # column name (header) or index (no header)
    text_b: str | int | None
    label: str | int
    labels: tuple[str, ...]              # () for regression; else the class names, in id order
    label_values: tuple[str, ...]        # how each class is written in the file
    metric: str
    about: str


GLUE = {
    "sst2": GlueSpec("SST-2", True, "sentence", None, "label", ("negative", "positive"), ("0", "1"),
                     "accuracy", "movie-review sentiment"),
    "cola": GlueSpec("CoLA", False, 3, None, 1, ("unacceptable", "acceptable"), ("0", "1"), "matthews",
                     "is the sentence grammatical?"),
    "mrpc": GlueSpec("MRPC", True, "#1 String", "#2 String", "Quality", ("not_equivalent", "equivalent"),
                     ("0", "1"), "f1", "are the two sentences paraphrases?"),
    "rte": GlueSpec("RTE", True, "sentence1", "sentence2", "label", ("entailment", "not_entailment"),
                    ("entailment", "not_entailment"), "accuracy", "does sentence 1 entail sentence 2?"),
    "stsb": GlueSpec("STS-B", True, "sentence1", "sentence2", "score", (), (), "pearson",
                     "semantic similarity from 0 to 5 (regression)"),
}


def _read_glue_tsv(path: Path, name: str) -> list[Example]:
    spec = GLUE[name]
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; run `python -m minialbert tasks --download "
                                f"{name}`, or pass a directory holding GLUE's {spec.folder} folder "
                                f"(train.tsv, dev.tsv)")
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    header, start = (rows[0], 1) if spec.header and rows else ([], 0)

    def column(key: str | int | None) -> int | None:
        if key is None or isinstance(key, int):
            return key
        if key not in header:
            raise ValueError(f"{path}: no column {key!r} in the header ({', '.join(header)}); is this "
                             f"GLUE's {spec.folder} file?")
        return header.index(key)

    a, b, y = column(spec.text_a), column(spec.text_b), column(spec.label)
    examples = []
    for line, row in enumerate(rows[start:], start=start + 1):
        if not any(cell.strip() for cell in row):
            continue
        if max(i for i in (a, b, y) if i is not None) >= len(row):
            raise ValueError(f"{path}, line {line}: {len(row)} columns, too few for GLUE's "
                             f"{spec.folder} layout")
        raw = row[y].strip()
        if spec.labels:
            if raw not in spec.label_values:
                raise ValueError(f"{path}, line {line}: label {raw!r} is not one of "
                                 f"{', '.join(spec.label_values)}")
            label: int | float = spec.label_values.index(raw)
        else:
            try:
                label = float(raw)
            except ValueError:
                raise ValueError(f"{path}, line {line}: score {raw!r} is not a number") from None
        examples.append(Example(row[a], None if b is None else row[b], label))
    if not examples:
        raise ValueError(f"{path} holds no examples")
    return examples


@dataclass(frozen=True)
class PinnedFile:
    url: str
    size: int                            # bytes
    sha256: str


# The files GLUE's download script (nyu-mll/GLUE-baselines, download_glue_data.py) fetches, with the sizes
# and sha256 that Hugging Face datasets and TensorFlow Datasets record for them. MRPC has no GLUE archive:
# like GLUE's script, we split the Microsoft corpus's training file (SentEval's copy) by GLUE's list of
# dev pairs.
_FB = "https://dl.fbaipublicfiles.com"
GLUE_DOWNLOADS: dict[str, tuple[PinnedFile, ...]] = {
    "sst2": (PinnedFile(f"{_FB}/glue/data/SST-2.zip", 7439277,
                        "d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa"),),
    "cola": (PinnedFile(f"{_FB}/glue/data/CoLA.zip", 376971,
                        "f212fcd832b8f7b435fb991f101abf89f96b933ab400603bf198960dfc32cbff"),),
    "rte": (PinnedFile(f"{_FB}/glue/data/RTE.zip", 697150,
                       "6bf86de103ecd335f3441bd43574d23fef87ecc695977a63b82d5efb206556ee"),),
    "stsb": (PinnedFile(f"{_FB}/glue/data/STS-B.zip", 802872,
                        "e60a6393de5a8b5b9bac5020a1554b54e3691f9d600b775bd131e613ac179c85"),),
    "mrpc": (PinnedFile(f"{_FB}/senteval/senteval_data/msr_paraphrase_train.txt", 1047044,
                        "60a9b09084528f0673eedee2b69cb941920f0b8cd0eeccefc464a98768457f89"),
             PinnedFile(f"{_FB}/glue/data/mrpc_dev_ids.tsv", 6222,
                        "971d7767d81b997fd9060ade0ec23c4fc31cbb226a55d1bd4a1bac474eb81dc7")),
}


def default_glue_dir() -> Path:
    """Where download_glue puts GLUE and load_task looks for it by default: cache_dir()/glue."""
    return cache_dir() / "glue"


def glue_downloaded(name: str, directory: str | Path) -> bool:
    """Whether DIRECTORY holds GLUE task `name` as download_glue lays it out (train.tsv and dev.tsv)."""
    folder = Path(directory) / GLUE[name].folder
    return all((folder / f"{split}.tsv").is_file() for split in ("train", "dev"))


def download_glue(name: str, directory: str | Path | None = None) -> Path:
    """Fetch GLUE task `name` into DIRECTORY/<folder>/train.tsv and dev.tsv (default directory:
    default_glue_dir()), each file checked against its pinned size and sha256 and written atomically;
    returns the directory. A task already there is not fetched again."""
    if name not in GLUE_DOWNLOADS:
        raise ValueError(f"unknown GLUE task {name!r}; choose one of {', '.join(GLUE_DOWNLOADS)}")
    directory = Path(directory) if directory is not None else default_glue_dir()
    if glue_downloaded(name, directory):
        return directory
    paths = [download(f.url, directory / "downloads" / Path(f.url).name, sha256=f.sha256,
                      expected_size=f.size) for f in GLUE_DOWNLOADS[name]]
    splits = _mrpc_splits(*paths) if name == "mrpc" else _zip_splits(paths[0], GLUE[name].folder)
    for split, data in splits.items():
        atomic_write(directory / GLUE[name].folder / f"{split}.tsv", data)
    return directory


def _zip_splits(archive: Path, folder: str) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(archive) as z:
            return {split: z.read(f"{folder}/{split}.tsv") for split in ("train", "dev")}
    except (zipfile.BadZipFile, KeyError) as e:
        raise ValueError(f"{archive} is not GLUE's {folder} archive ({e}); delete it and download "
                         f"again") from e


def _mrpc_splits(corpus: Path, dev_ids: Path) -> dict[str, bytes]:
    """GLUE's MRPC train.tsv and dev.tsv: the corpus's training pairs, split by GLUE's (id1, id2) dev list."""
    dev_pairs = {tuple(line.split("\t")[:2]) for line in dev_ids.read_text(encoding="utf-8-sig").splitlines()
                 if line.strip()}
    header, *rows = corpus.read_text(encoding="utf-8-sig").splitlines(keepends=True)
    in_dev = [tuple(row.split("\t")[1:3]) in dev_pairs for row in rows]
    train = [row for row, d in zip(rows, in_dev) if not d]
    dev = [row for row, d in zip(rows, in_dev) if d]
    if not train or not dev:
        raise ValueError(f"splitting {corpus} by {dev_ids} left {len(train)} training and {len(dev)} "
                         f"dev pairs; these are not MRPC's files")
    return {"train": "".join([header, *train]).encode(), "dev": "".join([header, *dev]).encode()}


def load_glue(name: str, directory: str | Path) -> Task:
    """A GLUE task from local files: DIRECTORY/<folder>/train.tsv and dev.tsv (e.g. glue/SST-2/dev.tsv)."""
    if name not in GLUE:
        raise ValueError(f"unknown GLUE task {name!r}; choose one of {', '.join(GLUE)}")
    spec = GLUE[name]
    folder = Path(directory) / spec.folder
    return Task(name, spec.about, f"GLUE {spec.folder} ({folder})", spec.labels, spec.metric,
                _read_glue_tsv(folder / "train.tsv", name), _read_glue_tsv(folder / "dev.tsv", name))


# ---------------------------------------------------------------------------------- registry
def task_names() -> list[str]:
    return [*OFFLINE_TASKS, *GLUE]


def load_task(name: str, scale: Scale | None = None, glue_dir: str | Path | None = None) -> Task:
    """A task by name: offline tasks from the scale's corpus (its max_documents per split), GLUE tasks
    from glue_dir (default: where download_glue puts them)."""
    if name in OFFLINE_TASKS:
        if scale is None:
            raise ValueError(f"task {name!r} is built from a scale's corpus: pass the Scale "
                             "(minialbert.scale.current_scale())")
        return OFFLINE_TASKS[name](scale.corpus, scale.max_documents)
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
