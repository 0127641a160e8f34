"""No words from the making of the course in it.

A lesson speaks about ALBERT, the paper and the reader's own runs. Three kinds of words belong to how the
course was made, not to what it teaches, and are refused in every lesson and every student version (the
markdown and every output):

- a target "set" for a model ("the target set for albert-sop", "the course set itself a target"): a
  lesson states a rule before the numbers and applies it, it does not report on its makers' goals;
- remarks about the machine that ran it being shared, busy or paused ("shared the machine with other
  work", "paused for other measurements on the same machine"): a reader's machine is their own; say that
  timings vary between runs, if anything;
- absolute paths in outputs (/home/..., /Users/..., /tmp/...): a lesson prints paths relative to the
  repository or the cache (or with ~ for the home folder), so an output reads the same on every machine.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + \
    sorted((ROOT / "notebooks" / "student").glob("[0-9][0-9]_*.ipynb"))

TARGET_SET = re.compile(r"\btargets? set\b|\bset (?:\w+ ){0,2}(?:a |an |the |its |our )?targets?\b", re.I)
MACHINE = re.compile(r"\bpaused\b|\bshar(?:ed|ing) (?:the |a |this |our )?(?:\w+-class )?"
                     r"(?:machine|cpu|cores?|computer|host)\b|"
                     r"\bbeside (?:an)?other (?:[\w-]+ ){0,2}(?:jobs?|work|runs?)\b|"
                     r"\bother (?:work|jobs|measurements) on (?:the same|this) machine\b", re.I)
ABSOLUTE = re.compile(r"(?<![\w.~/-])(?:/(?:home|Users|root|tmp|work|mnt|opt|var|private)/|[A-Z]:\\\\)")


def texts(path: Path):
    """(where, text, is an output) for every markdown cell and every output of a notebook."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            yield f"cell {i} (markdown)", cell.source, False
        for out in cell.get("outputs", []):
            text = out.get("text", "") if out.get("output_type") == "stream" else \
                "".join(str(v) for k, v in out.get("data", {}).items() if k.startswith("text/"))
            yield f"cell {i} (output)", "".join(text), True


def problems(where: str, text: str, output: bool) -> list[str]:
    found = []
    kinds = ((TARGET_SET, "a target set for a model"), (MACHINE, "the machine shared or paused"))
    for pattern, what in kinds:
        found += [f"{where}: {what}: ...{text[max(0, m.start() - 40):m.end() + 40]}..." for m in
                  pattern.finditer(text)]
    if output:
        found += [f"{where}: an absolute path: ...{text[max(0, m.start() - 20):m.end() + 40]}..." for m in
                  ABSOLUTE.finditer(text)]
    return [" ".join(p.split()) for p in found]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_no_words_from_the_making_of_the_course(path):
    found = [p for where, text, output in texts(path) for p in problems(where, text, output)]
    assert not found, f"{path.relative_to(ROOT)}:\n" + "\n".join(found)


@pytest.mark.parametrize("text, output", [
    ("The target set for `albert-sop` is 20%.", False),
    ("The course set itself a target: 15%.", False),
    ("training was paused for other measurements on the same machine", False),
    ("some entries shared the machine with other work while they trained", False),
    ("timings on a shared laptop-class machine move that much", False),
    ("took 612 s beside another one-thread job", False),
    ("loaded /home/someone/.cache/minialbert/zoo/albert-sop", True),
    ("wrote /tmp/x.json", True),
])
def test_each_kind_is_caught(text, output):
    assert problems("here", text, output)


@pytest.mark.parametrize("text", [
    "the rule is stated before the numbers: the model must reach twice the unigram baseline",
    "timings vary from run to run; read the ratio",
    "loaded ~/.cache/minialbert/zoo/albert-sop and assets/figures/nsp_vs_sop.json",
    "cross-layer sharing: one set of weights shared by every layer",
    "a training set and a test set",
])
def test_ordinary_words_pass(text):
    assert not problems("here", text, True)
