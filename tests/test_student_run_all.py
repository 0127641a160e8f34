"""Run All finishes on every student version with nothing written.

An exercise's stub says in one line that it is not written yet and the lesson goes on; a piece's stub
raises inside its function, where its check reports "not written yet" and the lesson goes on with the
package's version (minialbert.course.student). So the self-check (each question "no answer yet") and
the appendices run too.

- Static, every student version: no top-level statement of a code cell raises unconditionally (a `raise`,
  also inside a `with`, `for`, `while` or a `try` without handlers, at the top level).
- Executed, at ci scale, top to bottom in a fresh kernel: no cell's output is an error. By default the
  versions that run in under half a minute (RUN_ALL_SECONDS below, measured at ci scale on two busy cores);
  MINIALBERT_STUDENT_RUN_ALL=1 runs all thirteen.
"""

import ast
import os
from pathlib import Path

import pytest
from IPython.core.inputtransformer2 import TransformerManager
from nbclient import NotebookClient

from minialbert.course.notebooks import lessons, read_notebook
from minialbert.course.student import NOT_WRITTEN

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
STUDENT = NOTEBOOKS / "student"
ALL_ENV = "MINIALBERT_STUDENT_RUN_ALL"
# Seconds a student version took to run top to bottom at ci scale (nbclient, one thread; the slowest of three
# runs on two cores busy with other work). Those of CHEAP_SECONDS or less run by default.
RUN_ALL_SECONDS = {"00": 5, "01": 19, "02": 19, "03": 29, "04": 19, "05": 65, "06": 22, "07": 48, "08": 86,
                   "09": 19, "10": 15, "11": 11, "12": 9}
CHEAP_SECONDS = 30


def raising(statements: list[ast.stmt]) -> ast.Raise | None:
    """The first `raise` that running these statements always reaches: one of them, or one in the body of
    a with, for, while or handler-less try among them (an if's branches are conditional)."""
    for node in statements:
        if isinstance(node, ast.Raise):
            return node
        if isinstance(node, ast.With | ast.AsyncWith | ast.For | ast.AsyncFor | ast.While) or (
                isinstance(node, ast.Try) and not node.handlers):
            if found := raising(node.body):
                return found
    return None


def top_level_raises(path: Path) -> list[str]:
    found = []
    for index, cell in enumerate(read_notebook(path).cells):
        if cell.cell_type != "code":
            continue
        tree = ast.parse(TransformerManager().transform_cell(cell.source))     # magics read as calls
        if node := raising(tree.body):
            line = cell.source.splitlines()[node.lineno - 1].strip()
            found.append(f"{path.name}, cell {index}, line {node.lineno}: {line[:100]}")
    return found


@pytest.mark.parametrize("path", lessons(STUDENT), ids=lambda p: p.stem)
def test_no_top_level_statement_of_a_student_version_raises(path):
    found = top_level_raises(path)
    assert not found, "Run All would stop here (a stub at the top level must print, not raise):\n" + (
        "\n".join(found))


def chosen() -> list:
    everything = os.environ.get(ALL_ENV) == "1"
    return [pytest.param(path, id=path.stem) for path in lessons(STUDENT)
            if everything or RUN_ALL_SECONDS.get(path.name[:2], CHEAP_SECONDS + 1) <= CHEAP_SECONDS]


@pytest.mark.slow
@pytest.mark.parametrize("path", chosen())
def test_run_all_of_a_student_version_shows_no_error(path, tmp_path):
    """Top to bottom with nothing written, in a folder of its own (the workspace `check` keeps goes there)."""
    nb = read_notebook(path)
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [f"cell {index}: {out.ename}: {str(out.evalue).splitlines()[0] if out.evalue else ''}"
              for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
              for out in cell.outputs if out.output_type == "error"]
    assert not errors, f"student/{path.name}, run top to bottom:\n" + "\n".join(errors)
    said = [line for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs
            for line in str(out.get("text", "")).splitlines() if NOT_WRITTEN in line]
    stubs = sum(NOT_WRITTEN in cell.source for cell in nb.cells if cell.cell_type == "code")
    assert len(said) == stubs, f"student/{path.name}: {stubs} exercise stubs, {len(said)} lines saying so"
