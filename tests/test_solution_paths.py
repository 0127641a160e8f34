"""No solution leaves the student generator by any path, and verify_student_notebook sees every path.

Before: a later cell that printed a solution without naming its function (inspect.getsource, `!grep`, a
traceback, an HTML display, an execute_result) kept its output; a markdown solution's attachment, and a
solution line in cell or notebook metadata, were copied; a marker written with a zero-width space, a
fullwidth `＃` or a soft hyphen was no marker, and one with a Cyrillic letter no near miss, so the
solution was copied; a hint holding its solution became the stub's message. verify_student_notebook
passed a solution line in another cell's output, commented out, in metadata, in an attachment or with an
extra inner space, raised a bare zip() error for one cell more or fewer, and KeyError / AttributeError
for a cell of type "solution" or a source that is a number.
"""

import base64
import copy
import json

import nbformat
import pytest
from test_student import lesson

from minialbert.course.commands import main
from minialbert.course.student import has_stub, student_notebook, verify_student_notebook

LINE = "return sorted(set(words))"
SOLVED = f"def distinct(words):\n    ### BEGIN SOLUTION (hint: each word once, in order)\n    {LINE}\n" \
         "    ### END SOLUTION"
ANSI_TRACEBACK = ["\x1b[0;31mTypeError\x1b[0m  Traceback (most recent call last)",
                  "\x1b[0;32m----> 2\x1b[0m     \x1b[38;5;28;01mreturn\x1b[39;00m "
                  "\x1b[38;5;28msorted\x1b[39m(\x1b[38;5;28mset\x1b[39m(words))"]

SHOWN = {   # a later cell's output that shows the solution without naming the function
    "getsource": nbformat.v4.new_output("execute_result", execution_count=3, data={
        "text/plain": f"'def distinct(words):\\n    {LINE}\\n'"}),
    "grep": nbformat.v4.new_output("stream", text=f'lesson.ipynb:14:    "    {LINE}\\n",\n'),
    "traceback": nbformat.v4.new_output("error", ename="TypeError", evalue="boom", traceback=ANSI_TRACEBACK),
    "html": nbformat.v4.new_output("display_data", data={
        "text/html": '<pre><span class="k">return</span> <span class="nb">sorted</span>(<span>set</span>'
                     "(words))</pre>", "text/plain": "<IPython.core.display.HTML object>"}),
    "execute_result": nbformat.v4.new_output("execute_result", execution_count=3,
                                             data={"text/plain": f"    {LINE}"}),
    "short line": nbformat.v4.new_output("stream", text="x = 7\n"),
}


def teacher(*later: str) -> nbformat.NotebookNode:
    nb = lesson(SOLVED, "words = ['b', 'a', 'b']", *later)
    nb.cells[0].source = nb.cells[0].source.replace("    ### END", "    x = 7\n    ### END")
    return nb


@pytest.mark.parametrize("kind", SHOWN)
def test_an_output_that_shows_a_solution_is_dropped(kind):
    nb = teacher("print(open('lesson.py').read())")
    kept = nbformat.v4.new_output("stream", text="a plain output\n")
    nb.cells[2].outputs = [kept, SHOWN[kind]]
    student = student_notebook(nb, "lesson.ipynb")
    assert student.cells[2].outputs == [kept]
    assert student.cells[1].outputs == nb.cells[1].outputs                 # other cells keep theirs


def test_attachments_and_metadata_of_a_solution_cell_are_dropped_and_solution_lines_in_metadata_too():
    nb = teacher("md:Why sets?\n<!-- BEGIN SOLUTION -->\n![](attachment:answer.png)\nThey drop "
                 "duplicates.\n<!-- END SOLUTION -->")
    nb.cells[2].attachments = {"answer.png": {"image/png": "iVBORw0KGgoAAAANSUhEUg=="}}
    nb.cells[2].metadata = {"tags": ["answer"]}
    nb.cells[0].metadata = {"notes": f"    {LINE}", "tags": ["exercise"]}
    nb.cells[1].metadata = {"notes": f"the answer: {LINE}", "tags": ["data"]}
    nb.metadata.update(teacher={"answers": [LINE]}, kernelspec={"name": "python3"})
    student = student_notebook(nb, "lesson.ipynb")
    assert "attachments" not in student.cells[2] and student.cells[2].metadata == {}
    assert student.cells[0].metadata == {}
    assert student.cells[1].metadata == {"tags": ["data"]}
    assert student.metadata == {"kernelspec": {"name": "python3"}}


@pytest.mark.parametrize("marker", ["###\u200b BEGIN SOLUTION", "### BEGIN SOLU\u00adTION",
                                    "＃＃＃ BEGIN SOLUTION", "### ＢＥＧＩＮ SOLUTION",
                                    "### BEGIN\u2060 SOLUTION"])
def test_markers_are_read_after_unicode_normalisation(marker):
    nb = lesson(SOLVED.replace("### BEGIN SOLUTION", marker))
    student = student_notebook(nb, "lesson.ipynb")
    assert LINE not in student.cells[0].source and has_stub(student.cells[0])


@pytest.mark.parametrize("marker", ["### BEGIN SОLUTION", "### ВEGIN SOLUTION", "### END SOLUTIОN",
                                    "### BEGIN ANSWЕRS"])          # Cyrillic О, В, О, Е
def test_a_marker_with_a_lookalike_letter_is_an_error(marker):
    source = SOLVED.replace("### BEGIN SOLUTION (hint: each word once, in order)", "### BEGIN SOLUTION")
    source = source.replace("### END SOLUTION" if "END" in marker else "### BEGIN SOLUTION", marker)
    line = 4 if "END" in marker else 2
    with pytest.raises(ValueError, match=rf"^lesson.ipynb, cell 0, line {line}: .* looks like a solution"):
        student_notebook(lesson(source), "lesson.ipynb")


@pytest.mark.parametrize("hint", [LINE, "sorted(set(words))", "return sorted of the set of words"])
def test_a_hint_that_holds_its_solution_is_an_error(hint):
    nb = lesson(SOLVED.replace("each word once, in order", hint))
    with pytest.raises(ValueError, match=r"^lesson.ipynb, cell 0, line 2: the hint repeats \d+% of its "
                                         r"solution's code"):
        student_notebook(nb, "lesson.ipynb")


def test_a_hint_in_words_is_fine():
    assert has_stub(student_notebook(lesson(SOLVED), "lesson.ipynb").cells[0])


def good_pair():
    nb = teacher("print(len(words))", "md:Notes")
    return nb, student_notebook(nb, "lesson.ipynb")


def text_attachment(text: str) -> dict:
    return {"notes.txt": {"text/plain": base64.b64encode(text.encode()).decode()}}


HOSTILE = {    # a student version changed in one way -> (the cell named in the error, what it says)
    "in another cell's output": (lambda s: s.cells[2].outputs.append(
        nbformat.v4.new_output("stream", text=f"    {LINE}\n")), 2, "in its outputs"),
    "commented out": (lambda s: s.cells[0].__setitem__("source", s.cells[0].source + f"\n    # {LINE}"),
                      0, "in its source"),
    "with an extra inner space": (lambda s: s.cells[2].__setitem__("source", "return  sorted(set(words))"),
                                  2, "in its source"),
    "with a zero-width space": (lambda s: s.cells[1].__setitem__("source", "return sorted(set(wo\u200brds))"),
                                1, "in its source"),
    "in a cell's metadata": (lambda s: s.cells[1].metadata.__setitem__("notes", LINE), 1, "in its metadata"),
    "in an attachment": (lambda s: s.cells[3].__setitem__("attachments", text_attachment(LINE)), 3,
                         "in its attachments"),
    "a marker with a zero-width space": (lambda s: s.cells[3].__setitem__(
        "source", "<!--\u200b BEGIN SOLUTION -->"), 3, "keeps a marker"),
}


def test_the_good_student_version_passes():
    verify_student_notebook(*good_pair(), "lesson.ipynb")


@pytest.mark.parametrize("case", HOSTILE)
def test_verify_sees_a_solution_on_every_path(case):
    change, cell, says = HOSTILE[case]
    nb, student = good_pair()
    student = copy.deepcopy(student)
    change(student)
    with pytest.raises(ValueError, match=rf"^lesson.ipynb, cell {cell}: the student version .*{says}"):
        verify_student_notebook(nb, student, "lesson.ipynb")


def test_verify_sees_a_solution_line_in_the_notebooks_metadata():
    nb, student = good_pair()
    student.metadata["notes"] = [LINE]
    with pytest.raises(ValueError, match=r"^lesson.ipynb, notebook metadata: the student version shows "
                                         r"solution code \['return sorted\(set\(words\)\)'\]"):
        verify_student_notebook(nb, student, "lesson.ipynb")


@pytest.mark.parametrize("change, says", [
    (lambda s: s.cells.append(nbformat.v4.new_code_cell("print(1)")), "has 5 cells, the lesson 4"),
    (lambda s: s.cells.pop(), "has 3 cells, the lesson 4"),
])
def test_verify_names_the_notebook_when_the_cells_do_not_pair(change, says):
    nb, student = good_pair()
    change(student)
    with pytest.raises(ValueError, match=rf"^lesson.ipynb: the student version {says}"):
        verify_student_notebook(nb, student, "lesson.ipynb")


@pytest.mark.parametrize("field, value, says", [
    ("cell_type", "solution", "a cell of type 'solution': a notebook cell is code, markdown or raw"),
    ("source", 42, "its source is a int, not text"),
])
@pytest.mark.parametrize("whose", ["lesson", "student version"])
def test_a_cell_that_is_no_notebook_cell_is_named(field, value, says, whose):
    nb, student = good_pair()
    (nb if whose == "lesson" else student).cells[1][field] = value
    with pytest.raises(ValueError, match=rf"^lesson.ipynb, cell 1: {says}"):
        verify_student_notebook(nb, student, "lesson.ipynb")


@pytest.mark.parametrize("field, value", [("cell_type", "solution"), ("source", 42)])
def test_the_generator_names_the_file_and_cell_of_a_bad_cell(tmp_path, capsys, field, value):
    source = tmp_path / "lessons"
    source.mkdir()
    nb = teacher()
    nb.cells[1][field] = value
    (source / "01_a.ipynb").write_text(json.dumps(nb))
    assert main(["student-notebooks", "--source", str(source), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{source / '01_a.ipynb'}, cell 1: " in err, err
