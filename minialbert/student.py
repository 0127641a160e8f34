"""Student versions of the lessons, generated from the one source per lesson (the committed notebook).

Markers, as in nbgrader:
- code:  `### BEGIN SOLUTION` (optionally `### BEGIN SOLUTION (hint: one line)`) ... `### END SOLUTION`
  becomes `raise NotImplementedError("Exercise: <the hint>")`, indented like the marker;
- code:  `### BEGIN ANSWERS` ... `### END ANSWERS` holds self-check answers, one `name = value` a
  line; each becomes `name = ...  # your answer`, so the self-check runs and says "no answer yet";
- markdown: `<!-- BEGIN SOLUTION -->` ... `<!-- END SOLUTION -->` becomes a prompt for the answer.
A cell that had a solution loses its outputs; every other cell is copied as it is.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat

from .download import atomic_write
from .notebooks import clean_notebook, lessons, notebook_text, read_notebook

BEGIN_SOLUTION = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION(?:\s*\(hint:\s*(?P<hint>.*)\))?\s*$")
END_SOLUTION = re.compile(r"^\s*### END SOLUTION\s*$")
BEGIN_ANSWERS = re.compile(r"^\s*### BEGIN ANSWERS\s*$")
END_ANSWERS = re.compile(r"^\s*### END ANSWERS\s*$")
ANSWER_LINE = re.compile(r"^(?P<name>\s*[A-Za-z_]\w*)\s*=\s*\S.*$")
BEGIN_MARKDOWN = re.compile(r"^\s*<!-- BEGIN SOLUTION -->\s*$")
END_MARKDOWN = re.compile(r"^\s*<!-- END SOLUTION -->\s*$")
DEFAULT_HINT = "your code here: the exercise above says what to compute"
MARKDOWN_STUB = "*Your answer here.*"
STUB = re.compile(r"^\s*raise NotImplementedError\(['\"]Exercise: ", re.MULTILINE)


def stub_for_hint(hint: str | None) -> str:
    """The line a student sees where a code solution was."""
    return f"raise NotImplementedError({f'Exercise: {hint or DEFAULT_HINT}'!r})"


def _replace_blocks(source: str, begin: re.Pattern, end: re.Pattern, stub) -> str:
    """Replace every begin..end block of lines by stub(match of the begin line, lines inside)."""
    out, block, opened = [], [], None
    for line in source.splitlines():
        if opened is None and begin.match(line):
            opened, block = begin.match(line), []
        elif opened is not None and end.match(line):
            out.extend(stub(opened, block))
            opened = None
        elif opened is not None:
            if begin.match(line):
                raise ValueError(f"a solution block opens inside another: {line.strip()!r}")
            block.append(line)
        elif end.match(line):
            raise ValueError(f"{line.strip()!r} without a matching BEGIN line")
        else:
            out.append(line)
    if opened is not None:
        raise ValueError(f"{opened.group(0).strip()!r} is never closed: add its END line")
    replaced = "\n".join(out)
    return replaced + "\n" if source.endswith("\n") else replaced


def _code_stub(opened: re.Match, block: list[str]) -> list[str]:
    return [opened.group("indent") + stub_for_hint(opened.group("hint"))]


def _answers_stub(opened: re.Match, block: list[str]) -> list[str]:
    stubs = []
    for line in block:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        answer = ANSWER_LINE.match(line)
        if not answer:
            raise ValueError(f"an ANSWERS block holds lines `name = value`, not {line.strip()!r}")
        stubs.append(f"{answer.group('name')} = ...  # your answer")
    return stubs


def _markdown_stub(opened: re.Match, block: list[str]) -> list[str]:
    return [MARKDOWN_STUB]


def student_source(cell: nbformat.NotebookNode) -> str:
    """The cell's source with every solution and answer replaced by its stub."""
    if cell.cell_type == "markdown":
        return _replace_blocks(cell.source, BEGIN_MARKDOWN, END_MARKDOWN, _markdown_stub)
    if cell.cell_type == "code":
        source = _replace_blocks(cell.source, BEGIN_SOLUTION, END_SOLUTION, _code_stub)
        return _replace_blocks(source, BEGIN_ANSWERS, END_ANSWERS, _answers_stub)
    return cell.source


def student_notebook(nb: nbformat.NotebookNode, name: str = "notebook") -> nbformat.NotebookNode:
    """A copy of a lesson with its solutions replaced by stubs and the outputs of those cells cleared."""
    nb = copy.deepcopy(nb)
    for index, cell in enumerate(nb.cells):
        try:
            source = student_source(cell)
        except ValueError as e:
            raise ValueError(f"{name}, cell {index}: {e}") from None
        if source != cell.source:
            cell.source = source
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
    return nb


def has_stub(cell: nbformat.NotebookNode) -> bool:
    """Whether a student cell holds an exercise stub (running it raises NotImplementedError)."""
    return cell.cell_type == "code" and bool(STUB.search(cell.source))


def student_versions(source_dir: str | Path) -> dict[str, str]:
    """{file name: student notebook text} for every lesson in source_dir, cleaned like the lessons."""
    found = lessons(source_dir)
    if not found:
        raise FileNotFoundError(f"no lessons (NN_name.ipynb) in {source_dir}: run from the repository "
                                "root or pass --source")
    return {path.name: notebook_text(clean_notebook(student_notebook(read_notebook(path), path.name)))
            for path in found}


def write_student_notebooks(source_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Write the student version of every lesson to out_dir and delete student lessons with no source."""
    versions = student_versions(source_dir)
    out_dir = Path(out_dir)
    for stale in lessons(out_dir):
        if stale.name not in versions:
            stale.unlink()
    written = []
    for name, text in versions.items():
        path = out_dir / name
        if not path.exists() or path.read_text() != text:
            atomic_write(path, text.encode())
        written.append(path)
    return written
