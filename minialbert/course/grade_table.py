"""The grading table of `python -m minialbert grade`: which pieces and questions a lesson has, the verdict
of each for one submission, and the table itself (CSV, and markdown for the terminal).

A lesson's pieces are the names its code calls `check("name", ...)` on, its questions the numbers of its
`Question(N, ...)` lines, in the order the lesson has them (read from the lesson the student version was
made from, so a piece whose cell a student deleted still has its column).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..download import atomic_write
from .notebooks import read_notebook
from .student_files import made_from

PIECE_CALL = re.compile(r"""(?<![\w.])check\(\s*["'](?P<name>\w+)["']""")
QUESTION_CALL = re.compile(r"(?<![\w.])Question\(\s*(?P<name>\d+)")
CALLS = {"piece": PIECE_CALL, "question": QUESTION_CALL}
CSV_COLUMNS = ("student", "lesson", "status", "kind", "item", "verdict", "message")

Item = tuple[str, str]      # (kind: piece | question, name: the piece's name or the question's number)


@dataclass(frozen=True)
class Verdict:
    """One item's verdict (right, wrong, not written, not answered, error, not run) and its one line."""
    verdict: str
    message: str = ""


@dataclass
class Grade:
    """One submission graded: who (the path given), its lesson, how the run went, each item's verdict."""
    student: str
    lesson: str | None
    status: str
    items: dict[Item, Verdict]


def lesson_of(nb: nbformat.NotebookNode) -> str | None:
    """The lesson a submission is the student version of (its metadata), or None."""
    lesson = made_from(nb)
    return lesson if isinstance(lesson, str) and lesson and Path(lesson).name == lesson else None


def calls(nb: nbformat.NotebookNode) -> dict[Item, int]:
    """{item: the index of the first code cell calling its check} for every piece and question in nb."""
    found: dict[Item, int] = {}
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") == "code" and isinstance(cell.get("source"), str):
            for kind, call in CALLS.items():
                for match in call.finditer(cell.source):
                    found.setdefault((kind, match["name"]), index)
    return found


def expected_items(lesson: Path | nbformat.NotebookNode) -> list[Item]:
    """The pieces and questions of a lesson (a path, or a notebook already read), in order."""
    nb = read_notebook(lesson) if isinstance(lesson, Path) else lesson
    return list(calls(nb))


def label(item: Item) -> str:
    """A column's name: the piece's name, or Q<number>."""
    kind, name = item
    return f"Q{name}" if kind == "question" else name


def graded_items(expected: list[Item], nb: nbformat.NotebookNode, logged: list[dict],
                 errors: dict[int, str]) -> dict[Item, Verdict]:
    """Each item's verdict: the last one its check logged; else an error when the cell calling it raised
    (before the check could run: a name not defined, say); else not run. Logged items the lesson does not
    list (a check the student added) come after the lesson's."""
    found = {(entry["kind"], entry["name"]): Verdict(entry["verdict"], entry["message"]) for entry in logged}
    cells = calls(nb)
    graded = {}
    for item in expected + [item for item in found if item not in expected]:
        cell = cells.get(item)
        if item in found:
            graded[item] = found[item]
        elif cell in errors:
            what = f"question {item[1]}" if item[0] == "question" else item[1]
            graded[item] = Verdict("error", f"{what}: error: cell {cell} raised {errors[cell]}")
        else:
            graded[item] = Verdict("not run")
    return graded


def csv_text(grades: list[Grade]) -> str:
    """The table as CSV: one row per student and item (one row for a submission with none)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for g in grades:
        rows = [(kind, name, v.verdict, v.message) for (kind, name), v in g.items.items()] or [("",) * 4]
        for row in rows:
            writer.writerow((g.student, g.lesson or "", g.status, *row))
    return out.getvalue()


def write_csv(grades: list[Grade], path: Path) -> Path:
    """Write the CSV table to `path` atomically."""
    return atomic_write(Path(path), csv_text(grades).encode())


def cell(text: str) -> str:
    """Text made safe for one markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(grades: list[Grade]) -> str:
    """The table for the terminal: per lesson, a row per student and a column per piece and question,
    then the one-line messages of every wrong answer and error."""
    groups: dict[str, list[Grade]] = {}
    for g in grades:
        groups.setdefault(g.lesson or "not a student version of a lesson", []).append(g)
    parts = []
    for title, group in groups.items():
        columns = list(dict.fromkeys(item for g in group for item in g.items))
        header = ["student", "status", *map(label, columns)]
        lines = [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for g in group:
            verdicts = [g.items[item].verdict if item in g.items else "" for item in columns]
            lines.append("| " + " | ".join(cell(text) for text in (g.student, g.status, *verdicts)) + " |")
        said = [f"- {g.student}: {v.message}" for g in group for v in g.items.values()
                if v.verdict in ("wrong", "error") and v.message]
        parts.append("\n".join(lines + (["", "Wrong and errors:", *said] if said else [])))
    return "\n\n".join(parts) + "\n"
