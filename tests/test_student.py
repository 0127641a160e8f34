"""Student versions: the transformation and the committed copies in step with the lessons (Run All of
each at ci scale: tests/test_student_run_all.py)."""

import copy
import re
from pathlib import Path

import nbformat
import pytest

from minialbert.course.commands import main
from minialbert.course.notebooks import lessons, read_notebook
from minialbert.course.student import (
    CHECK_CALL,
    has_stub,
    output_text,
    student_notebook,
    verify_student_notebook,
)
from minialbert.course.student_files import cells_digest, student_versions, write_student_notebooks

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
STUDENT = NOTEBOOKS / "student"
COMMAND = "python -m minialbert student-notebooks"


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
    assert out.cells[1].source == "print('exercise: not written yet — add them')\nprint(y)"
    assert out.cells[2].source.splitlines()[1].startswith("    raise NotImplementedError('Exercise: ")
    assert out.cells[3].source == "**1.** Why?\n*Your answer here.*"
    assert out.cells[4].source.splitlines() == [
        "answer_1 = ...  # your answer", "answer_2 = ...  # your answer", "check(answer_1)"]
    assert all(c.outputs == [] and c.execution_count is None for c in out.cells[1:] if c.cell_type == "code")
    assert [has_stub(c) for c in out.cells] == [False, True, True, False, False]
    assert nb.cells[1].source.startswith("### BEGIN SOLUTION")            # the source is left alone


@pytest.mark.parametrize("source, line", [
    ("### BEGIN SOLUTION (hint: h)\n# 2. the second\nx = 2\n### END SOLUTION", "exercise 2"),
    ("# Exercise 3: by hand\n### BEGIN SOLUTION (hint: h)\nx = 3\n### END SOLUTION", "exercise 3"),
    ("### BEGIN SOLUTION (hint: h)\n# 1. one\nx = 1\n# 2. two\ny = 2\n### END SOLUTION", "exercises 1 and 2"),
])
def test_an_exercise_stub_is_one_line_naming_the_exercise_and_does_not_stop_the_lesson(source, line):
    """A top-level solution (an exercise) becomes a print, so Run All goes on; a piece's body still raises,
    which its check reports as not written."""
    (stub,) = [text for text in student_notebook(lesson(source)).cells[0].source.splitlines()
               if "BEGIN" not in text and not text.startswith("# Exercise")]
    assert stub == f"print('{line}: not written yet — h')"


@pytest.mark.parametrize("source, problem", [
    ("### BEGIN SOLUTION\nx = 1", r"line 1: '### BEGIN SOLUTION' is never closed"),
    ("x = 1\n### END SOLUTION", "line 2: '### END SOLUTION' without a matching BEGIN"),
    ("### BEGIN ANSWERS\nprint(1)\n### END ANSWERS", r"line 2: .*name = value"),
    ("### BEGIN SOLUTION\nx = 1\n### END ANSWERS", r"line 3: '### END ANSWERS' cannot close"),
    ("### BEGIN SOLUTION (hint: add one\nx = 1\n### END SOLUTION", r"line 1: .*without its closing '\)'"),
    ("#### BEGIN SOLUTION\nx = 1\n#### END SOLUTION", "line 1: '#### BEGIN SOLUTION' looks like a solution"),
    ("### begin solution\nx = 1\n### end solution", "line 1: '### begin solution' looks like"),
    ("y = 0\n###BEGIN_SOLUTION\nx = 1\n###END_SOLUTION", "line 2: '###BEGIN_SOLUTION' looks like"),
    ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION  # done", "line 3: .* looks like a solution marker"),
    ("<!-- BEGIN SOLUTION -->\nx = 1\n<!-- END SOLUTION -->", "line 1: .* write '### BEGIN SOLUTION'"),
    ("md:Why?\n<!--BEGIN SOLUTION-->\nBecause.\n<!--END SOLUTION-->", "line 2: '<!--BEGIN SOLUTION-->' l"),
    ("md:Why?\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION", r"line 2: .*write '<!-- BEGIN SOLUTION -->'"),
])
def test_broken_and_near_miss_markers_name_the_notebook_cell_and_line(source, problem):
    """A near miss copied through would hand the solution to the student: each is refused."""
    with pytest.raises(ValueError, match=rf"^lesson.ipynb, cell 0, {problem}"):
        student_notebook(lesson(source), "lesson.ipynb")


def test_check_cells_and_cells_using_the_students_code_lose_their_outputs():
    """The teacher's "right: matches the package", and what ran with the teacher's piece, are not the
    student's."""
    nb = lesson("from minialbert.course.pieces import check",
                "def my_step(x):\n    ### BEGIN SOLUTION (hint: double it)\n    return 2 * x\n"
                "    ### END SOLUTION",
                'step_is_right = check("step", my_step)',
                "step = my_step if step_is_right else print\nprint(step(1))",
                "def helper(x):\n    return x\nprint(helper(3))",
                "def my_step(x):\n    return x\nprint(my_step(3))")           # the lesson's own again
    out = student_notebook(nb)
    assert [bool(c.outputs) for c in out.cells] == [True, False, False, False, True, True]


def test_an_output_with_this_machines_folder_is_refused():
    nb = lesson("print(path)")
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="loaded /home/ada/.cache/minialbert/zoo\n")]
    with pytest.raises(ValueError, match=r"lesson.ipynb, cell 0: an output shows this machine's folder "
                                         r"/home/ada: print paths relative"):
        student_notebook(nb, "lesson.ipynb", machine_paths=["/home/ada"])
    nb.cells[0].outputs[0].text = "loaded ~/.cache/minialbert/zoo; /home/adam is another folder\n"
    assert student_notebook(nb, "lesson.ipynb", machine_paths=["/home/ada"]).cells[0].outputs


def test_a_student_version_that_still_shows_solution_code_is_refused():
    teacher = lesson("def f():\n    ### BEGIN SOLUTION\n    return sorted(set(words))\n    ### END SOLUTION",
                     "check(f)")
    student = student_notebook(teacher)
    verify_student_notebook(teacher, student, "lesson.ipynb")
    leaked = copy.deepcopy(student)
    leaked.cells[0].source += "\n    return sorted(set(words))"
    with pytest.raises(ValueError, match=r"lesson.ipynb, cell 0: .* shows solution code \['return sorted"):
        verify_student_notebook(teacher, leaked, "lesson.ipynb")
    leaked = copy.deepcopy(student)
    leaked.cells[1].outputs = teacher.cells[1].outputs
    with pytest.raises(ValueError, match=r"lesson.ipynb, cell 1: .* keeps the outputs of the student's code"):
        verify_student_notebook(teacher, leaked, "lesson.ipynb")


def write_lessons(folder: Path, **cells) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for stem, source in cells.items():
        nbformat.write(lesson(source), folder / f"{stem}.ipynb")
    return folder


def command(source: Path, out: Path) -> int:
    return main(["student-notebooks", "--source", str(source), "--out", str(out)])


def test_command_writes_every_lesson_and_removes_only_the_stale_versions_it_wrote(tmp_path):
    source = write_lessons(tmp_path / "lessons", **{"01_a": "### BEGIN SOLUTION\nx = 1\n### END SOLUTION",
                                                    "02_b": "print(2)"})
    out = tmp_path / "out"
    assert command(source, out) == 0
    assert [p.name for p in lessons(out)] == ["01_a.ipynb", "02_b.ipynb"]
    assert has_stub(read_notebook(out / "01_a.ipynb").cells[0])
    written = read_notebook(out / "01_a.ipynb")
    assert written.metadata["minialbert"] == {"student_version_of": "01_a.ipynb",
                                              "digest": cells_digest(written)}
    mine = out / "09_mine.ipynb"
    nbformat.write(lesson("print('a notebook of my own')"), mine)
    before = mine.read_text()
    (source / "02_b.ipynb").unlink()
    with pytest.warns(UserWarning) as said:
        assert command(source, out) == 0
    assert [p.name for p in lessons(out)] == ["01_a.ipynb", "09_mine.ipynb"]      # 02_b was written by it
    assert mine.read_text() == before
    said = {str(w.message).split(":")[0] for w in said}
    assert said == {f"left {mine} alone", f"removed {out / '02_b.ipynb'}"}
    assert command(source / "none", out) == 2


def test_command_never_overwrites_a_notebook_it_did_not_write(tmp_path, capsys):
    source = write_lessons(tmp_path / "lessons", **{"01_a": "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"})
    out = tmp_path / "out"
    theirs = write_lessons(out, **{"01_a": "print('edited by hand')"}) / "01_a.ipynb"
    before = theirs.read_text()
    assert command(source, out) == 2
    assert "01_a.ipynb, not written by student-notebooks" in capsys.readouterr().err
    assert theirs.read_text() == before


@pytest.mark.parametrize("out", ["{source}", "{source}/../lessons", "{link}"])
def test_command_refuses_to_write_over_the_lessons(tmp_path, capsys, out):
    """`--out notebooks` would replace every lesson by its stubbed version: the solutions would be gone."""
    source = write_lessons(tmp_path / "lessons", **{"01_a": "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"})
    (tmp_path / "link").symlink_to(source)
    before = (source / "01_a.ipynb").read_text()
    assert command(source, Path(out.format(source=source, link=tmp_path / "link"))) == 2
    assert "is the lessons' folder" in capsys.readouterr().err
    assert (source / "01_a.ipynb").read_text() == before


def test_command_refuses_student_versions_as_lessons(tmp_path, capsys):
    source = write_lessons(tmp_path / "lessons", **{"01_a": "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"})
    assert command(source, tmp_path / "student") == 0
    assert command(tmp_path / "student", tmp_path / "again") == 2
    said = capsys.readouterr().err
    assert f"{tmp_path / 'student'} holds student versions, not lessons (01_a.ipynb)" in said
    assert not (tmp_path / "again").exists()


BAD_NOTEBOOKS = {"01_empty": (b"", "the file is empty"), "02_text": (b"not json", "not JSON"),
                 "03_list": (b"[1, 2]", "it holds a JSON list"),
                 "04_cells": (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}}', "it has no cells"),
                 "05_latin1": (b'{"cells": "\xe9"}', "not UTF-8")}


def test_command_names_every_file_that_is_not_a_notebook_and_writes_nothing(tmp_path, capsys):
    source = write_lessons(tmp_path / "lessons", **{"00_good": "print(0)", "06_marker": "#### END SOLUTION"})
    for stem, (data, _) in BAD_NOTEBOOKS.items():
        (source / f"{stem}.ipynb").write_bytes(data)
    assert command(source, tmp_path / "out") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"minialbert: error: {len(BAD_NOTEBOOKS) + 1} lessons in {source} cannot be made")
    for stem, (_, problem) in BAD_NOTEBOOKS.items():
        assert f"{source / stem}.ipynb is not a notebook: {problem}" in line
    assert f"{source / '06_marker.ipynb'}, cell 0, line 1: '#### END SOLUTION' looks like" in line
    assert not (tmp_path / "out").exists()


def test_committed_student_versions_are_what_the_command_writes():
    expected = student_versions(NOTEBOOKS)
    committed = {p.name for p in lessons(STUDENT)}
    assert committed == set(expected), (f"notebooks/student has {sorted(committed)}, the lessons are "
                                        f"{sorted(expected)}: run `{COMMAND}`")
    for name, text in expected.items():
        assert (STUDENT / name).read_text() == text, f"notebooks/student/{name} is stale: run `{COMMAND}`"


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


ABSOLUTE_PATH = re.compile(r"(?<![\w.~])(?:/(?:home|Users|root|work|tmp|mnt|private|var)/|[A-Za-z]:\\\\)")


@pytest.mark.parametrize("path", lessons(STUDENT), ids=lambda p: p.stem)
def test_committed_student_versions_show_no_feedback_the_student_did_not_earn(path):
    """No check cell (and no stubbed cell) carries the teacher's "right: matches the package", no output
    reports what the teacher's piece did, and no output shows an absolute path of the machine that ran it."""
    for index, cell in enumerate(read_notebook(path).cells):
        if cell.cell_type != "code":
            continue
        text = output_text(cell.outputs)
        assert not (cell.outputs and (CHECK_CALL.search(cell.source) or has_stub(cell))), (
            f"student/{path.name}, cell {index}: a check or exercise cell shows the teacher's output: "
            f"run `{COMMAND}`")
        assert "matches the package" not in text and "with your step" not in text, (
            f"student/{path.name}, cell {index}: an output of the teacher's pieces")
        assert not ABSOLUTE_PATH.search(text), (
            f"student/{path.name}, cell {index}: an absolute path {ABSOLUTE_PATH.search(text).group(0)!r}")
