"""The build path in the lessons: every piece a lesson has the learner write is a solution cell followed
by a check cell. With the teacher's solution filled into the student version every check says right;
as a stub it says "not written yet" and nothing stops; a planted mistake is named in one line while the
rest of the lesson still runs."""

import contextlib
import io
import re
from pathlib import Path

import nbformat
import pytest

from minialbert.course.notebooks import lessons, read_notebook
from minialbert.course.student import has_stub, student_notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
IMPORTS_CHECK = "from minialbert.course.pieces import check"
CHECK_CALL = re.compile(r'^(?:\w+ = )?check\("(?P<name>\w+)"', re.MULTILINE)   # a check, or its verdict kept
WITH_PIECES = [path for path in lessons(NOTEBOOKS)
               if any(CHECK_CALL.search(c.source) for c in read_notebook(path).cells)]


def piece_program(nb: nbformat.NotebookNode) -> tuple[list[str], list[str]]:
    """The lesson's code cells up to the one that imports `check` (its setup), then each check cell with
    the solution cells before it: (the sources to run in order, the pieces checked)."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    setup = next(i for i, c in enumerate(code) if IMPORTS_CHECK in c.source) + 1
    program, names, pending = [c.source for c in code[:setup]], [], []
    for cell in code[setup:]:
        if checked := CHECK_CALL.findall(cell.source):
            program += pending + [cell.source]
            names += checked
            pending = []
        elif "### BEGIN SOLUTION" in cell.source or has_stub(cell):
            pending.append(cell.source)
    return program, names


def run(program: list[str]) -> list[str]:
    """Run the sources in one namespace (as a kernel would); the lines they print."""
    namespace, out = {"__name__": "__lesson__"}, io.StringIO()
    with contextlib.redirect_stdout(out):
        for source in program:
            exec(compile(source, "<cell>", "exec"), namespace)
    return out.getvalue().splitlines()


def verdicts(lines: list[str], names: list[str]) -> list[str]:
    return [line for line in lines if line.split(":")[0] in names and ": " in line]


def test_the_lessons_that_build_albert_have_pieces():
    assert {p.name[:2] for p in WITH_PIECES} >= {"02", "03", "04", "10"}


@pytest.mark.parametrize("path", WITH_PIECES, ids=lambda p: p.stem)
def test_the_teachers_solutions_filled_into_the_student_version_pass(path, monkeypatch):
    monkeypatch.setenv("MINIALBERT_SCALE", "ci")
    teacher = read_notebook(path)
    student = student_notebook(teacher, path.name)
    for mine, theirs in zip(student.cells, teacher.cells):
        if has_stub(mine):
            mine.source = theirs.source          # the learner types the teacher's solution
    program, names = piece_program(student)
    said = verdicts(run(program), names)
    assert len(said) == len(names) and all(": right: " in line for line in said), "\n".join(said)


@pytest.mark.parametrize("path", WITH_PIECES, ids=lambda p: p.stem)
def test_unwritten_pieces_say_so_and_stop_nothing(path, monkeypatch):
    monkeypatch.setenv("MINIALBERT_SCALE", "ci")
    program, names = piece_program(student_notebook(read_notebook(path), path.name))
    said = verdicts(run(program), names)
    assert len(said) == len(names) and all(": not written yet (Exercise: " in line for line in said), said


def test_a_planted_mistake_is_named_in_one_line_and_the_pieces_after_it_still_run(monkeypatch):
    """Attention without its scale: its check says so in one line, the layer that calls it is still right
    (each piece is judged alone: its check gives it the package's attention), and every later piece still
    runs and is checked (the lesson itself goes on with the package's attention; the student version runs
    to its end with every piece missing: test_student.py)."""
    monkeypatch.setenv("MINIALBERT_SCALE", "ci")
    nb = read_notebook(NOTEBOOKS / "03_attention_and_sharing.ipynb")
    [cell] = [c for c in nb.cells if c.source.startswith("def attention(q, k, v, attend):")]
    assert "/ math.sqrt(q.shape[-1])" in cell.source
    cell.source = cell.source.replace("/ math.sqrt(q.shape[-1])", "")        # attention without the scale
    program, names = piece_program(nb)
    said = dict(line.split(": ", 1) for line in verdicts(run(program), names))
    assert list(said) == names
    assert said["attention"].startswith("wrong: values differ at [")
    assert said["attention"].endswith("that is what leaving out the 1/sqrt(d) scale gives")
    assert all(said[name].startswith("right: ") for name in names if name != "attention")
