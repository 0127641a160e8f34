"""Student versions: the transformation, the committed copies in step with the lessons, and every
student notebook running at ci scale up to its first exercise stub."""

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from minialbert.__main__ import main
from minialbert.notebooks import lessons, read_notebook
from minialbert.student import has_stub, student_notebook, student_versions, write_student_notebooks

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
STUDENT = NOTEBOOKS / "student"
COMMAND = "python -m minialbert student-notebooks"
TOP_LEVEL_STUB = re.compile(r"^raise NotImplementedError", re.MULTILINE)


def lesson(*cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s[3:]) if s.startswith("md:") else nbformat.v4.new_code_cell(s)
                for s in cells]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", text="42\n")]
            cell.execution_count = 1
    return nb


def test_solutions_become_stubs_with_hints_and_lose_their_outputs():
    nb = lesson("x = 1",
                "### BEGIN SOLUTION (hint: add them)\ny = x + 1\n### END SOLUTION\nprint(y)",
                "def f():\n    ### BEGIN SOLUTION\n    return 2\n    ### END SOLUTION",
                "md:**1.** Why?\n<!-- BEGIN SOLUTION -->\nBecause.\n<!-- END SOLUTION -->",
                "### BEGIN ANSWERS\nanswer_1 = 3.9\nanswer_2 = 'sop'\n### END ANSWERS\ncheck(answer_1)")
    out = student_notebook(nb)
    assert out.cells[0] == nb.cells[0]
    assert out.cells[1].source == "raise NotImplementedError('Exercise: add them')\nprint(y)"
    assert out.cells[2].source.splitlines()[1].startswith("    raise NotImplementedError('Exercise: ")
    assert out.cells[3].source == "**1.** Why?\n*Your answer here.*"
    assert out.cells[4].source.splitlines() == [
        "answer_1 = ...  # your answer", "answer_2 = ...  # your answer", "check(answer_1)"]
    assert all(c.outputs == [] and c.execution_count is None for c in out.cells[1:] if c.cell_type == "code")
    assert [has_stub(c) for c in out.cells] == [False, True, True, False, False]
    assert nb.cells[1].source.startswith("### BEGIN SOLUTION")            # the source is left alone


@pytest.mark.parametrize("source, problem", [
    ("### BEGIN SOLUTION\nx = 1", "never closed"),
    ("x = 1\n### END SOLUTION", "without a matching BEGIN"),
    ("### BEGIN ANSWERS\nprint(1)\n### END ANSWERS", "name = value"),
])
def test_broken_markers_name_the_notebook_cell_and_problem(source, problem):
    with pytest.raises(ValueError, match=rf"lesson.ipynb, cell 0: .*{problem}"):
        student_notebook(lesson(source), "lesson.ipynb")


def test_command_writes_every_lesson_and_removes_stale_ones(tmp_path):
    source = tmp_path / "lessons"
    source.mkdir()
    nbformat.write(lesson("### BEGIN SOLUTION\nx = 1\n### END SOLUTION"), source / "01_a.ipynb")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "09_gone.ipynb").write_text("{}")
    assert main(["student-notebooks", "--source", str(source), "--out", str(tmp_path / "out")]) == 0
    assert [p.name for p in lessons(tmp_path / "out")] == ["01_a.ipynb"]
    assert has_stub(read_notebook(tmp_path / "out" / "01_a.ipynb").cells[0])
    assert main(["student-notebooks", "--source", str(tmp_path / "none"), "--out", str(tmp_path)]) == 2


def test_committed_student_versions_are_what_the_command_writes():
    expected = student_versions(NOTEBOOKS)
    committed = {p.name for p in lessons(STUDENT)}
    assert committed == set(expected), (f"notebooks/student has {sorted(committed)}, the lessons are "
                                        f"{sorted(expected)}: run `{COMMAND}`")
    for name, text in expected.items():
        assert (STUDENT / name).read_text() == text, f"notebooks/student/{name} is stale: run `{COMMAND}`"


@pytest.mark.parametrize("path", lessons(STUDENT), ids=lambda p: p.stem)
def test_student_notebook_runs_up_to_its_first_top_level_exercise(path):
    """Stubs inside a function (the pieces) do not stop the lesson: their check cells say "not written"."""
    nb = read_notebook(path)
    first_stub = next((i for i, c in enumerate(nb.cells) if has_stub(c) and TOP_LEVEL_STUB.search(c.source)),
                      len(nb.cells))
    nb.cells = nb.cells[:first_stub]
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(STUDENT)}}).execute()


def test_write_student_notebooks_leaves_up_to_date_files_untouched(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    nbformat.write(lesson("print(1)"), source / "00_a.ipynb")
    (written,) = write_student_notebooks(source, tmp_path / "out")
    before = written.stat().st_mtime_ns
    write_student_notebooks(source, tmp_path / "out")
    assert written.stat().st_mtime_ns == before


def split_solution(source: str) -> tuple[set[str], set[str]]:
    """(lines inside the cell's solution blocks that would give a solution away, lines outside them)."""
    inside, solution, given = False, set(), set()
    for line in source.splitlines():
        if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
            inside = "BEGIN" in line
        elif inside and len(line.strip()) >= 12 and not line.strip().startswith("#"):
            solution.add(line.strip())
        elif not inside:
            given.add(line.strip())
    return solution, given


@pytest.mark.parametrize("path", lessons(NOTEBOOKS), ids=lambda p: p.stem)
def test_student_versions_hold_no_solution_code_and_every_stub_has_a_hint(path):
    teacher, student = read_notebook(path), read_notebook(STUDENT / path.name)
    for index, (theirs, mine) in enumerate(zip(teacher.cells, student.cells)):
        solution, given = split_solution(theirs.source)
        leaked = sorted(solution & {line.strip() for line in mine.source.splitlines()} - given)
        assert not leaked, f"{path.name}, cell {index}: the student version shows solution code {leaked}"
        assert "the exercise above says what to compute" not in mine.source, (
            f"{path.name}, cell {index}: a stub without a hint; write `### BEGIN SOLUTION (hint: ...)`")
