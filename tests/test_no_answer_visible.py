"""No answer visible anywhere in a student version: no cell's source and no output repeats a hidden solution.

Static: reads the committed lessons (their solutions) and student versions (what a learner sees), runs
nothing. The measure is the hint test's (tests/test_hints.py: the share of the solution's tokens a text
repeats in order, with the names the solution's cell already shows left out, and its thresholds), read
over stretches of each text as long as twice the solution: a stretch shows the solution when it repeats
more than HINT_THRESHOLD of its new names and at least WHOLE_THRESHOLD of all its tokens
(minialbert.course.student_guard.stretch_shows, whose docstring says why both).

Every solution of a lesson is compared with the source and each output of every cell of the student
version, except
- its own cell: there the student sees its hint (tests/test_hints.py) and what the piece is given;
- for an exercise (a top-level solution, at the end of a lesson) the cells above it, and the names they
  show are given: an exercise varies what the lesson did (a probe trained longer, the presets' table with
  one more column), as a piece's body fills in what its cell gives.
A piece is compared with every other cell, before it (a reference copy the learner would translate) and
after it (the package's version written out beside the check).
"""

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_hints import NAME, solution_blocks

from minialbert.course.notebooks import lessons, read_notebook
from minialbert.course.student import output_text
from minialbert.course.student_guard import stretch_shows

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
STUDENT = NOTEBOOKS / "student"


@dataclass(frozen=True)
class Solution:
    cell: int
    code: str
    given: frozenset[str]          # names the learner already sees: its cell's (and the lesson's above)
    exercise: bool                  # a top-level block, not a piece's body


def solutions(path: Path) -> list[Solution]:
    found, above = [], set()
    for index, cell in enumerate(read_notebook(path).cells):
        if cell.cell_type != "code":
            continue
        blocks, outside = solution_blocks(cell.source)
        names = set(NAME.findall(outside))
        for _, code in blocks:
            exercise = textwrap.dedent(code) == code
            found.append(Solution(index, code, frozenset(names | above if exercise else names), exercise))
        above |= names
    return found


def texts(cell) -> list[tuple[str, str]]:
    """(where, text): the cell's source and the text of each of its outputs."""
    found = [("source", cell.source)]
    if cell.cell_type == "code":
        found += [(f"output {k}", output_text([out])) for k, out in enumerate(cell.outputs)]
    return found


def shown(path: Path) -> list[str]:
    """Each place of the student version that shows a solution of its lesson, in one line."""
    found = []
    for index, cell in enumerate(read_notebook(STUDENT / path.name).cells):
        for where, text in texts(cell):
            for s in solutions(path):
                if index == s.cell or (s.exercise and index < s.cell):
                    continue
                if share := stretch_shows(text, s.code, s.given):
                    found.append(f"{path.stem}, cell {index} ({where}) shows the solution of cell {s.cell}: "
                                 f"{share[0]:.0%} of its new names and {share[1]:.0%} of its tokens in order")
    return found


def test_every_lesson_and_its_student_version_are_read():
    assert len(lessons(NOTEBOOKS)) == 13 and [p.name for p in lessons(STUDENT)] == [
        p.name for p in lessons(NOTEBOOKS)]
    assert sum(len(solutions(path)) for path in lessons(NOTEBOOKS)) >= 60


@pytest.mark.parametrize("path", lessons(NOTEBOOKS), ids=lambda p: p.stem)
def test_no_cell_or_output_of_a_student_version_shows_a_solution(path):
    found = shown(path)
    assert not found, "explain it in words, show a smaller case, or import the package's version:\n" + (
        "\n".join(found))


# ------------------------------------------------------------------ the measure on what it must tell apart
LOOP = '''
    scheduler = LambdaLR(optimizer, lambda s: lr_factor(s, args.warmup, args.steps))
    history = []
    for n, indices in enumerate(StepBatches.for_run(len(train_data), args), start=1):
        loss = step(model, collate([train_data[i] for i in indices]), optimizer, scheduler, args.clip_norm)
        history.append({"step": n, "split": "train", "loss": loss})
        if n == args.steps or (args.eval_every and n % args.eval_every == 0):
            history.append({"step": n, "split": "valid", **evaluate(model, valid_data)})
    return history
'''
GIVEN = frozenset({"model", "optimizer", "lr_factor", "train_data", "valid_data", "args", "step", "evaluate"})


def test_a_copy_of_the_solution_inside_a_longer_cell_is_shown():
    """The package's loop written out beside the check (issue: lesson 05's `package_loop`), renamed a little
    and between other code, is still the loop."""
    cell = ("import time\nstart = time.perf_counter()\nprint('a run of the package', start)\n\n"
            "def package_loop(model, optimizer, lr_factor, train_data, valid_data, args, step, evaluate):\n"
            + textwrap.indent(textwrap.dedent(LOOP).replace("history", "records"), "    ")
            + "\nresult = package_loop(model, opt, factor, data, None, args, step, lambda m, d: {})\n" * 3)
    assert stretch_shows(cell, LOOP, GIVEN)


def test_the_lessons_own_code_in_the_solutions_names_is_not_the_solution():
    """A cell that uses the same names for something else, and a description in words, show nothing."""
    other = ("for n, indices in enumerate(StepBatches.for_run(len(train_data), args), start=1):\n"
             "    print(n, len(indices))\n"
             "history = pretrain(cfg, args, train_data).history\n"
             "print([r['loss'] for r in history if r['split'] == 'train'])\n")
    words = ("The loop is that step, once per batch, in the order StepBatches gives; around it a LambdaLR "
             "schedule, and every eval_every steps an evaluation; it returns the history.")
    assert stretch_shows(other, LOOP, GIVEN) is None
    assert stretch_shows(words, LOOP, GIVEN) is None
