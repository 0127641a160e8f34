"""GLUE's tasks from their pinned files: `download_glue(name)` fetches a task's files (URL, size and
sha256 fixed below) laid out as GLUE's own script does; `load_glue(name, directory)` reads that layout
(DIR/SST-2/train.tsv, ...). GLUE's test files carry no labels, so the split used for reporting is dev.
"""

from __future__ import annotations

import csv
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .download import atomic_write, cache_dir, download
from .labelled_task import Example, Task


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
