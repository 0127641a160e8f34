"""The committed notebooks are clean, and the README, the course map and cross-references agree with
the lesson files."""

import importlib.util
import json
import re
from pathlib import Path

import nbformat
import pytest

from minialbert.course.commands import main
from minialbert.course.notebooks import clean_notebook, lessons, notebook_text, read_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LESSONS = {p.stem[:2]: p.stem for p in lessons(NOTEBOOKS)}


def test_clean_notebook_keeps_outputs_and_drops_noise():
    nb = nbformat.v4.new_notebook(metadata={"widgets": {"state": {}}, "language_info": {"name": "python",
                                                                                        "version": "3.11.7"}})
    cell = nbformat.v4.new_code_cell("run()", execution_count=3, metadata={
        "execution": {"iopub.execute_input": "2026-11-21T07:22:21Z"}, "tags": ["keep"]})
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="loss 7.1\n"),
        nbformat.v4.new_output("stream", name="stderr", text="  0%|     | 0/4\r 100%|#####| 4/4\nwarning\n"),
        nbformat.v4.new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {},
                                                     "text/plain": "IntSlider(value=3)"}),
        nbformat.v4.new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"})]
    nb.cells = [cell]
    clean = clean_notebook(nb)
    assert clean.metadata == {"language_info": {"name": "python"}}
    (out,) = clean.cells
    assert out.metadata == {"tags": ["keep"]} and out.execution_count == 3
    assert [o.get("text") for o in out.outputs] == ["loss 7.1\n", "warning\n", None]
    assert out.outputs[2].data["image/png"] == "iVBOR"
    assert clean_notebook(clean) == clean


NOT_NOTEBOOKS = {"empty": (b"", "the file is empty"), "text": (b"not json", "not JSON"),
                 "list": (b"[1, 2]", "it holds a JSON list, not an object"),
                 "no_cells": (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}}', "it has no cells"),
                 "latin1": (b'{"cells": "\xe9"}', "not UTF-8 text"),
                 "bad_cells": (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": "x"}',
                               "not a valid notebook")}


@pytest.mark.parametrize("kind", NOT_NOTEBOOKS)
def test_reading_a_file_that_is_not_a_notebook_names_the_file(tmp_path, kind):
    data, problem = NOT_NOTEBOOKS[kind]
    path = tmp_path / f"{kind}.ipynb"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))} is (not a notebook: )?{problem}") as e:
        read_notebook(path)
    assert "\n" not in str(e.value)


def test_clean_notebooks_names_every_bad_file_and_cleans_nothing_until_all_read(tmp_path, capsys):
    good = tmp_path / "good.ipynb"
    nb = nbformat.v4.new_notebook(metadata={"widgets": {"state": {}}})
    good.write_text(nbformat.writes(nb))
    before = good.read_text()
    bad = []
    for kind, (data, _) in NOT_NOTEBOOKS.items():
        bad.append(tmp_path / f"{kind}.ipynb")
        bad[-1].write_bytes(data)
    assert main(["clean-notebooks", str(good), *map(str, bad)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"minialbert: error: {len(bad)} files are not notebooks: ")
    assert all(f"{path} is " in line for path in bad)
    assert good.read_text() == before
    assert main(["clean-notebooks", str(good)]) == 0 and "widgets" not in good.read_text()


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(NOTEBOOKS)))
                                  for p in sorted(NOTEBOOKS.rglob("*.ipynb"))])
def test_committed_notebooks_are_clean(path):
    text = path.read_text()
    assert text == notebook_text(clean_notebook(nbformat.reads(text, as_version=4))), (
        f"{path.relative_to(ROOT)} carries timestamps, widget state or progress bars: "
        "run `make clean-notebooks`")


def table_rows(markdown: str, heading: str) -> list[list[str]]:
    """The body rows of the first table after `heading`, as lists of cell texts."""
    lines = markdown.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[start + 2:end]]


def test_readme_lesson_table_lists_the_lesson_files():
    rows = table_rows((ROOT / "README.md").read_text(), "## The lessons")
    assert {r[0]: r[1].strip("`") for r in rows} == LESSONS


def test_course_map_route_lists_the_lessons():
    course_map = "\n".join(c.source for c in read_notebook(NOTEBOOKS / "00_course_map.ipynb").cells)
    rows = table_rows(course_map, "## The route")
    assert [r[0] for r in rows] == sorted(LESSONS)


def test_cross_references_point_at_lessons_that_exist():
    texts = {"README.md": (ROOT / "README.md").read_text()}
    texts |= {p.name: "\n".join(c.source for c in read_notebook(p).cells if c.cell_type == "markdown")
              for p in lessons(NOTEBOOKS)}
    for name, text in texts.items():
        for number in re.findall(r"\b[Ll]essons? (\d\d)\b", text):
            assert number in LESSONS, f"{name} refers to lesson {number}, which does not exist"
        for stem in re.findall(r"\b(\d\d_[a-z_]+[a-z])\b", text):
            assert stem in LESSONS.values(), f"{name} refers to {stem}, which is not a lesson file"


BOX_LABELS = ("Time", "Prerequisites", "You will build", "You will measure")
INTERNAL_WORDS = re.compile(r"\bissue's\b|\bthe issue\b|\bthis issue\b|\brecipe version\b|\bhelper-\d", re.I)
GRADES = ("Warm-up", "Core", "Stretch")


def lesson_times() -> dict:
    path = ROOT / "assets" / "benchmarks" / "lesson_times.json"
    return json.loads(path.read_text()) if path.exists() else {"seconds": {}}


@pytest.mark.parametrize("path", lessons(NOTEBOOKS), ids=lambda p: p.stem[:2])
def test_every_lesson_opens_with_its_box(path):
    """Time, prerequisites, what you build, what you measure; the time is the measured one."""
    first = next(c for c in read_notebook(path).cells if c.cell_type == "markdown").source
    lines = first.splitlines()
    assert lines[0].startswith(f"# {path.stem[:2]} · ") and "> **In this lesson**" in lines, (
        f"{path.name}: the first cell is the title, then the '> **In this lesson**' box")
    box = lines[lines.index("> **In this lesson**") + 1:][:len(BOX_LABELS)]
    assert [re.match(r"> - \*\*(.+?):\*\* \S", line) and line[6:].split(":**")[0] for line in box] == list(
        BOX_LABELS), f"{path.name}: the box lists {', '.join(BOX_LABELS)}, in that order, each with a text"
    times = lesson_times()
    seconds = times["seconds"].get(path.stem)
    if seconds is None:
        assert box[0] == "> - **Time:** not measured yet at course scale", (
            f"{path.name} states a time that benchmarks/lesson_times.py did not measure")
    else:
        spec = importlib.util.spec_from_file_location("lesson_times", ROOT / "benchmarks" / "lesson_times.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert box[0] == module.box_time(seconds, times), (
            f"{path.name}: the box's time disagrees with assets/benchmarks/lesson_times.json: "
            "run `python benchmarks/lesson_times.py --write-boxes`")


@pytest.mark.parametrize("path", lessons(NOTEBOOKS), ids=lambda p: p.stem[:2])
def test_lessons_are_free_of_internal_words_and_grade_their_exercises(path):
    cells = read_notebook(path).cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert not INTERNAL_WORDS.search(text), f"{path.name}: {INTERNAL_WORDS.search(text).group(0)!r}"
    exercises = next(c.source for c in cells if c.cell_type == "markdown" and "## Exercises" in c.source)
    items = re.findall(r"^\d+\. (.*)$", exercises.split("## Exercises", 1)[1], re.MULTILINE)
    grades = [next((g for g in GRADES if item.startswith(f"**{g}.**")), None) for item in items]
    assert items and None not in grades, (
        f"{path.name}: every exercise starts with **Warm-up.**, **Core.** or **Stretch.**")
    assert grades == sorted(grades, key=GRADES.index), f"{path.name}: warm-ups first, stretch last"
    needed = GRADES[:1] if path.stem.startswith("00") else GRADES
    assert set(needed) <= set(grades), f"{path.name} needs at least one exercise of each grade {needed}"
