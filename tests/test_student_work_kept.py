"""A student's work survives regeneration: `student-notebooks` replaces a student version only while it is
what the command wrote (its cells' digest, recorded in its metadata, still matches); an edited one is kept
and the new version written beside it, with one line saying so; nothing a student may have edited is
deleted; `--force` replaces and removes edited versions, one line for each.

Before: an edited `05_*.ipynb` was overwritten with fresh stubs, without a word; after a lesson was
renamed, the student's edited file was deleted; a duplicate Jupyter made (`01_a-Copy1.ipynb`) was deleted.
"""

import warnings
from pathlib import Path

import nbformat
import pytest
from test_student import write_lessons

from minialbert.course.commands import main
from minialbert.course.notebooks import lessons, read_notebook
from minialbert.course.student import has_stub
from minialbert.course.student_files import METADATA_KEY, cells_digest

SOLVED = "def f(x):\n    ### BEGIN SOLUTION (hint: twice x)\n    return 2 * x\n    ### END SOLUTION"


def command(source: Path, out: Path, *options: str) -> list[str]:
    """Run `student-notebooks`; -> the warning lines it said (it must exit 0)."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert main(["student-notebooks", "--source", str(source), "--out", str(out), *options]) == 0
    lines = [str(w.message) for w in said]
    assert all("\n" not in line for line in lines), lines
    return lines


def edit(path: Path, how: str = "source") -> str:
    """Change a student version as a student would in Jupyter; -> the file's text after."""
    nb = read_notebook(path)
    code = next(c for c in nb.cells if c.cell_type == "code")
    if how == "source":
        code.source = "def f(x):\n    return x + x   # my answer"
    elif how == "ran":
        code.outputs = [nbformat.v4.new_output("stream", text="ran it\n")]
        code.execution_count = 3
    elif how == "added a cell":
        nb.cells.append(nbformat.v4.new_markdown_cell("my notes"))
    elif how == "deleted a cell":
        nb.cells.pop()
    nbformat.write(nb, path)
    return path.read_text()


@pytest.fixture
def course(tmp_path):
    """(lessons folder, out folder) after a first `student-notebooks`."""
    source = write_lessons(tmp_path / "lessons", **{"01_a": SOLVED, "02_b": "print(2)"})
    out = tmp_path / "out"
    assert command(source, out) == []
    return source, out


def change_lesson(source: Path, name: str, text: str = "print('a new cell')") -> None:
    nb = read_notebook(source / name)
    nb.cells.append(nbformat.v4.new_code_cell(text))
    nbformat.write(nb, source / name)


def test_each_version_records_the_digest_of_the_cells_it_was_written_with(course):
    _, out = course
    nb = read_notebook(out / "01_a.ipynb")
    assert nb.metadata[METADATA_KEY] == {"student_version_of": "01_a.ipynb", "digest": cells_digest(nb)}


def test_an_unchanged_version_is_replaced_without_a_word(course):
    source, out = course
    change_lesson(source, "01_a.ipynb")
    assert command(source, out) == []
    assert read_notebook(out / "01_a.ipynb").cells[-1].source == "print('a new cell')"
    assert [p.name for p in lessons(out)] == ["01_a.ipynb", "02_b.ipynb"]


@pytest.mark.parametrize("how", ["source", "ran", "added a cell", "deleted a cell"])
def test_an_edited_version_is_kept_and_the_new_one_written_beside_it(course, how):
    source, out = course
    mine = out / "01_a.ipynb"
    edited = edit(mine, how)
    change_lesson(source, "01_a.ipynb")
    beside = out / "01_a.new.ipynb"
    assert command(source, out) == [f"kept {mine}: edited since student-notebooks wrote it; the new version "
                                    f"is {beside}"]
    assert mine.read_text() == edited
    assert read_notebook(beside).cells[-1].source == "print('a new cell')"
    assert has_stub(read_notebook(beside).cells[0])
    again = beside.read_text()
    change_lesson(source, "01_a.ipynb", "print('one more')")           # the .new file is replaced in turn
    assert command(source, out) == [f"kept {mine}: edited since student-notebooks wrote it; the new version "
                                    f"is {beside}"]
    assert mine.read_text() == edited and beside.read_text() != again
    assert read_notebook(beside).cells[-1].source == "print('one more')"


def test_an_edited_version_of_an_unchanged_lesson_needs_nothing_beside_it(course):
    source, out = course
    edited = edit(out / "01_a.ipynb")
    assert command(source, out) == []
    assert (out / "01_a.ipynb").read_text() == edited
    assert not (out / "01_a.new.ipynb").exists()


def test_an_edited_new_version_is_kept_too(course):
    source, out = course
    edit(out / "01_a.ipynb")
    change_lesson(source, "01_a.ipynb")
    command(source, out)
    started = edit(out / "01_a.new.ipynb")                  # the student began on the new version
    change_lesson(source, "01_a.ipynb", "print('one more')")
    said = command(source, out)
    assert said == [f"kept {out / '01_a.ipynb'}: edited since student-notebooks wrote it; the new version is "
                    f"{out / '01_a.new-2.ipynb'}"]
    assert (out / "01_a.new.ipynb").read_text() == started
    assert read_notebook(out / "01_a.new-2.ipynb").cells[-1].source == "print('one more')"


def test_a_version_written_before_digests_counts_as_edited(course):
    source, out = course
    old = read_notebook(out / "01_a.ipynb")
    old.metadata[METADATA_KEY] = {"student_version_of": "01_a.ipynb"}
    nbformat.write(old, out / "01_a.ipynb")
    before = (out / "01_a.ipynb").read_text()
    change_lesson(source, "01_a.ipynb")
    assert command(source, out) == [f"kept {out / '01_a.ipynb'}: it records no digest of what "
                                    "student-notebooks wrote, so it may have been edited; the new version is "
                                    f"{out / '01_a.new.ipynb'}"]
    assert (out / "01_a.ipynb").read_text() == before


def test_a_renamed_lesson_leaves_the_edited_version_of_its_old_name(course):
    source, out = course
    edited = edit(out / "02_b.ipynb", "ran")
    (source / "02_b.ipynb").rename(source / "03_b.ipynb")
    (source / "01_a.ipynb").rename(source / "04_a.ipynb")             # 01_a.ipynb is unchanged: removed
    said = command(source, out)
    assert sorted(said) == [
        f"kept {out / '02_b.ipynb'}: edited since student-notebooks wrote it, and its lesson 02_b.ipynb is "
        f"gone from {source}",
        f"removed {out / '01_a.ipynb'}: the student version of 01_a.ipynb, which {source} no longer has"]
    assert (out / "02_b.ipynb").read_text() == edited
    assert [p.name for p in lessons(out)] == ["02_b.ipynb", "03_b.ipynb", "04_a.ipynb"]


def test_a_copy_jupyter_made_is_left_alone(course):
    """File > Duplicate writes `01_a-Copy1.ipynb`, a lesson-like name with the record of 01_a."""
    source, out = course
    copy = out / "01_a-Copy1.ipynb"
    copy.write_text((out / "01_a.ipynb").read_text())
    edited = edit(copy)
    untouched = out / "02_b-Copy1.ipynb"
    untouched.write_text((out / "02_b.ipynb").read_text())
    assert command(source, out) == []
    assert copy.read_text() == edited and untouched.exists()


def test_force_replaces_and_removes_edited_versions_one_line_each(course):
    source, out = course
    edit(out / "01_a.ipynb")
    edit(out / "02_b.ipynb")
    change_lesson(source, "01_a.ipynb")
    (source / "02_b.ipynb").unlink()
    said = command(source, out, "--force")
    assert sorted(said) == [
        f"removed {out / '02_b.ipynb'} (--force): edited since student-notebooks wrote it, and its lesson "
        f"02_b.ipynb is gone from {source}",
        f"replaced {out / '01_a.ipynb'} (--force): edited since student-notebooks wrote it"]
    assert [p.name for p in lessons(out)] == ["01_a.ipynb"]
    assert has_stub(read_notebook(out / "01_a.ipynb").cells[0])
    assert command(source, out, "--force") == []                       # nothing edited: nothing said


def test_a_version_without_a_digest_that_holds_the_new_cells_is_replaced(course):
    """Student versions written before digests were recorded, and still as the lesson makes them, take
    the digest without a `.new` file beside them."""
    source, out = course
    old = read_notebook(out / "01_a.ipynb")
    old.metadata[METADATA_KEY] = {"student_version_of": "01_a.ipynb"}
    nbformat.write(old, out / "01_a.ipynb")
    assert command(source, out) == []
    assert "digest" in read_notebook(out / "01_a.ipynb").metadata[METADATA_KEY]
    assert not (out / "01_a.new.ipynb").exists()


def test_force_never_writes_over_a_notebook_that_is_no_student_version(course, capsys):
    source, out = course
    theirs = out / "01_a.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), theirs)
    before = theirs.read_text()
    assert main(["student-notebooks", "--source", str(source), "--out", str(out), "--force"]) == 2
    assert "01_a.ipynb, not written by student-notebooks" in capsys.readouterr().err
    assert theirs.read_text() == before
