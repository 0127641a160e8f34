"""Student versions of the lessons, generated from the one source per lesson (the committed notebook).

Markers, as in nbgrader, each alone on its line and written exactly so:
- code:  `### BEGIN SOLUTION` (optionally `### BEGIN SOLUTION (hint: one line)`) ... `### END SOLUTION`
  becomes `raise NotImplementedError("Exercise: <the hint>")`, indented like the marker;
- code:  `### BEGIN ANSWERS` ... `### END ANSWERS` holds self-check answers, one `name = value` a
  line; each becomes `name = ...  # your answer`, so the self-check runs and says "no answer yet";
- markdown: `<!-- BEGIN SOLUTION -->` ... `<!-- END SOLUTION -->` becomes a prompt for the answer.
A line that looks like a marker but is not one (`#### BEGIN SOLUTION`, `### begin solution`,
`<!--BEGIN SOLUTION-->`, a hint without its closing `)`) is an error naming the file, the cell and the
line: copied through, it would hand the solution to the student.

A student has not run the lesson yet, so no cell shows the teacher's results of code the student
writes: a cell that had a solution, a cell that calls `check(`, and a cell that uses a function or
class the student writes (or what a check returned) lose their outputs; every other cell is copied as
it is. Each version is verified before it is written: no line of a solution, no marker, no output in
those cells, and no absolute path of this machine (the home folder, the lessons' repository) in an
output.

Writing (`python -m minialbert student-notebooks`): --out may not be the --source folder, and a
student version is not a lesson. Each version records in its metadata (`minialbert.student_version_of`)
the lesson it was made from; the command overwrites, or deletes when its lesson is gone, only files
that carry that record. It refuses to overwrite an `NN_*.ipynb` in --out that does not, and leaves any
other such file alone with a warning. Every lesson is read and transformed before anything is written,
all bad lessons are reported in one error, and each file is written atomically.
"""

from __future__ import annotations

import ast
import copy
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..download import atomic_write
from .notebooks import clean_notebook, lessons, notebook_text, raise_all, read_notebook

BEGIN_SOLUTION = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION(?:\s*\(hint:\s*(?P<hint>.*)\))?\s*$")
END_SOLUTION = re.compile(r"^\s*### END SOLUTION\s*$")
BEGIN_ANSWERS = re.compile(r"^\s*### BEGIN ANSWERS\s*$")
END_ANSWERS = re.compile(r"^\s*### END ANSWERS\s*$")
ANSWER_LINE = re.compile(r"^(?P<name>\s*[A-Za-z_]\w*)\s*=\s*\S.*$")
BEGIN_MARKDOWN = re.compile(r"^\s*<!-- BEGIN SOLUTION -->\s*$")
END_MARKDOWN = re.compile(r"^\s*<!-- END SOLUTION -->\s*$")
MARKER_WORDS = r"\b(?:begin|end)[\s_-]*(?:solution|answers?)\b"
LOOKS_LIKE_MARKER = {                                  # by cell type: lines a marker was probably meant on
    "code": re.compile(rf"(?:#|<!--).*?{MARKER_WORDS}", re.IGNORECASE),
    "markdown": re.compile(rf"^\s*#.*?{MARKER_WORDS}|<!--.*?{MARKER_WORDS}", re.IGNORECASE),
    "raw": re.compile(rf"(?:#|<!--).*?{MARKER_WORDS}", re.IGNORECASE),
}
MARKERS_BY_TYPE = {
    "code": "'### BEGIN SOLUTION', '### BEGIN SOLUTION (hint: ...)', '### END SOLUTION', "
            "'### BEGIN ANSWERS' or '### END ANSWERS'",
    "markdown": "'<!-- BEGIN SOLUTION -->' or '<!-- END SOLUTION -->'",
    "raw": "no marker (a raw cell is copied as it is: put the solution in a code or markdown cell)",
}
UNCLOSED_HINT = re.compile(r"^\s*### BEGIN SOLUTION\s*\(hint:")
DEFAULT_HINT = "your code here: the exercise above says what to compute"
MARKDOWN_STUB = "*Your answer here.*"
STUB = re.compile(r"^\s*raise NotImplementedError\(['\"]Exercise: ", re.MULTILINE)
CHECK_CALL = re.compile(r"(?<![\w.])check\(")    # course.pieces.check, not Question(...).check
METADATA_KEY = "minialbert"                            # nb.metadata["minialbert"]["student_version_of"]


def stub_for_hint(hint: str | None) -> str:
    """The line a student sees where a code solution was."""
    return f"raise NotImplementedError({f'Exercise: {hint or DEFAULT_HINT}'!r})"


def _code_stub(opened: re.Match, block: list[tuple[int, str]]) -> list[str]:
    return [opened.group("indent") + stub_for_hint(opened.group("hint"))]


def _answers_stub(opened: re.Match, block: list[tuple[int, str]]) -> list[str]:
    stubs = []
    for number, line in block:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        answer = ANSWER_LINE.match(line)
        if not answer:
            raise ValueError(f"line {number}: an ANSWERS block holds lines `name = value`, not "
                             f"{line.strip()!r}")
        stubs.append(f"{answer.group('name')} = ...  # your answer")
    return stubs


def _markdown_stub(opened: re.Match, block: list[tuple[int, str]]) -> list[str]:
    return [MARKDOWN_STUB]


BLOCKS = {                                  # by cell type: (begin, end, stub) of each kind of block
    "code": [(BEGIN_SOLUTION, END_SOLUTION, _code_stub), (BEGIN_ANSWERS, END_ANSWERS, _answers_stub)],
    "markdown": [(BEGIN_MARKDOWN, END_MARKDOWN, _markdown_stub)],
}


@dataclass
class _OpenBlock:
    begin: re.Match                                    # the BEGIN line's match
    line: int                                          # its number in the cell, from 1
    end: re.Pattern
    stub: Callable[[re.Match, list[tuple[int, str]]], list[str]]
    inside: list[tuple[int, str]] = field(default_factory=list)     # (number, line) between the two


def _near_miss(cell_type: str, line: str) -> str:
    if UNCLOSED_HINT.match(line):
        return (f"{line.strip()!r} opens a hint without its closing ')': write "
                "'### BEGIN SOLUTION (hint: one line)' on one line")
    return (f"{line.strip()!r} looks like a solution marker but is not one: write "
            f"{MARKERS_BY_TYPE[cell_type]}, exactly and alone on the line")


def _split(cell: nbformat.NotebookNode) -> tuple[list[str], list[str]]:
    """(the student's lines of the cell, the teacher's lines inside its blocks); a ValueError naming the
    line for a marker that is not one, a block that is never closed or a stray END."""
    kinds = BLOCKS.get(cell.cell_type, [])
    looks_like_marker = LOOKS_LIKE_MARKER.get(cell.cell_type, LOOKS_LIKE_MARKER["raw"])
    out, hidden, opened = [], [], None
    for number, line in enumerate(cell.source.splitlines(), 1):
        begin = next((_OpenBlock(match, number, end, stub) for start, end, stub in kinds
                      if (match := start.match(line))), None)
        end = next((end for _, end, _ in kinds if end.match(line)), None)
        if begin is None and end is None and looks_like_marker.search(line):
            raise ValueError(f"line {number}: {_near_miss(cell.cell_type, line)}")
        if opened is None and begin:
            opened = begin
        elif opened is None and end:
            raise ValueError(f"line {number}: {line.strip()!r} without a matching BEGIN line")
        elif opened is None:
            out.append(line)
        elif begin:
            raise ValueError(f"line {number}: a solution block opens inside another (opened on line "
                             f"{opened.line}): {line.strip()!r}")
        elif end is opened.end:
            out.extend(opened.stub(opened.begin, opened.inside))
            hidden.extend(text for _, text in opened.inside)
            opened = None
        elif end:
            raise ValueError(f"line {number}: {line.strip()!r} cannot close "
                             f"{opened.begin.group(0).strip()!r} (line {opened.line})")
        else:
            opened.inside.append((number, line))
    if opened is not None:
        raise ValueError(f"line {opened.line}: {opened.begin.group(0).strip()!r} is never closed: add its "
                         "END line")
    return out, hidden


def student_source(cell: nbformat.NotebookNode) -> str:
    """The cell's source with every solution and answer replaced by its stub."""
    lines, _ = _split(cell)
    replaced = "\n".join(lines)
    return replaced + "\n" if cell.source.endswith("\n") else replaced


def _parsed(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:                                # IPython magics: fall back to reading the words
        return None


def _defined_names(source: str, assigned: bool) -> set[str]:
    """Top-level functions and classes the source defines, and with `assigned` the names it assigns."""
    tree = _parsed(source)
    if tree is None:
        pattern = r"^(?:def|class)\s+(\w+)" + (r"|^(\w+)\s*=(?!=)" if assigned else "")
        return {name for match in re.finditer(pattern, source, re.M) for name in match.groups() if name}
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif assigned and isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _used_names(source: str) -> set[str]:
    tree = _parsed(source)
    if tree is None:
        return set(re.findall(r"\b[A-Za-z_]\w*\b", source))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def output_text(outputs: list) -> str:
    """What a cell's outputs show as text: streams, tracebacks and text/* data (not images)."""
    parts = []
    for out in outputs:
        parts += [str(out.get("text", "")), "\n".join(out.get("traceback", []))]
        parts += [str(value) for kind, value in out.get("data", {}).items() if kind.startswith("text/")]
    return "\n".join(parts)


def _machine_paths_in(outputs: list, machine_paths: list[str]) -> str | None:
    """The first of machine_paths (absolute folders) that an output shows, or None."""
    text = output_text(outputs)
    return next((p for p in machine_paths if re.search(re.escape(p) + r"(?![\w.-])", text)), None)


def student_notebook(nb: nbformat.NotebookNode, name: str = "notebook",
                     machine_paths: list[str] = ()) -> nbformat.NotebookNode:
    """A copy of a lesson with its solutions replaced by stubs and without the outputs of the cells that
    run the student's code; a ValueError naming the notebook, the cell and the line for a bad marker,
    and naming the cell for an output that shows one of `machine_paths`."""
    student = copy.deepcopy(nb)
    written_by_student: set[str] = set()               # the functions and classes the student writes
    for index, (cell, mine) in enumerate(zip(nb.cells, student.cells)):
        try:
            mine.source = student_source(cell)
        except ValueError as e:
            raise ValueError(f"{name}, cell {index}, {e}") from None
        if cell.cell_type != "code":
            continue
        stubbed, checks = mine.source != cell.source, bool(CHECK_CALL.search(cell.source))
        uses_student_code = (_used_names(mine.source) - _defined_names(mine.source, assigned=True)
                             ) & written_by_student
        if stubbed or checks or uses_student_code:
            mine.outputs, mine.execution_count = [], None
        if stubbed or checks:
            written_by_student |= _defined_names(cell.source, assigned=checks)
        else:
            written_by_student -= _defined_names(cell.source, assigned=True)   # the lesson's own again
        if shown := _machine_paths_in(mine.outputs, machine_paths):
            raise ValueError(f"{name}, cell {index}: an output shows this machine's folder {shown}: print "
                             "paths relative to the repository or the cache")
    verify_student_notebook(nb, student, name)
    return student


def verify_student_notebook(teacher: nbformat.NotebookNode, student: nbformat.NotebookNode,
                            name: str) -> None:
    """A ValueError unless the student version shows no line of a solution, no marker, and no output in a
    cell that was stubbed or calls check(."""
    for index, (theirs, mine) in enumerate(zip(teacher.cells, student.cells, strict=True)):
        given, hidden = (set(map(str.strip, lines)) for lines in _split(theirs))
        shown = set(map(str.strip, mine.source.splitlines()))
        leaked = sorted(line for line in (hidden - given) & shown if line and not line.startswith("#"))
        marker = next((line for line in mine.source.splitlines()
                       if LOOKS_LIKE_MARKER.get(mine.cell_type, LOOKS_LIKE_MARKER["raw"]).search(line)), None)
        has_outputs = mine.cell_type == "code" and bool(mine.outputs) and (
            mine.source != theirs.source or CHECK_CALL.search(mine.source))
        problem = ((leaked and f"shows solution code {leaked}") or (marker and f"keeps a marker {marker!r}")
                   or (has_outputs and "keeps the outputs of the student's code"))
        if problem:
            raise ValueError(f"{name}, cell {index}: the student version {problem}")


def has_stub(cell: nbformat.NotebookNode) -> bool:
    """Whether a student cell holds an exercise stub (running it raises NotImplementedError)."""
    return cell.cell_type == "code" and bool(STUB.search(cell.source))


def _machine_paths(source_dir: Path) -> list[str]:
    """Absolute folders of this machine that no student output may show: the home folder and the
    folder holding the lessons' folder (the repository)."""
    folders = {Path.home().resolve(), source_dir.resolve().parent}
    return sorted((str(f) for f in folders if len(f.parts) > 1), key=len, reverse=True)


def made_from(nb: nbformat.NotebookNode) -> str | None:
    """The lesson a notebook is the student version of (recorded in its metadata), or None."""
    record = nb.metadata.get(METADATA_KEY)
    return record.get("student_version_of") if isinstance(record, dict) else None


def student_version_of(path: Path) -> str | None:
    """made_from() of a notebook file; None for a file that is not a notebook."""
    try:
        return made_from(read_notebook(path))
    except (ValueError, OSError):
        return None


def student_versions(source_dir: str | Path) -> dict[str, str]:
    """{file name: student notebook text} for every lesson in source_dir, cleaned like the lessons. All
    lessons are read; one ValueError names every bad one."""
    source_dir = Path(source_dir)
    found = lessons(source_dir)
    if not found:
        raise FileNotFoundError(f"no lessons (NN_name.ipynb) in {source_dir}: run from the repository "
                                "root or pass --source")
    machine_paths, versions, problems, copies = _machine_paths(source_dir), {}, [], []
    for path in found:
        try:
            nb = read_notebook(path)
            if made_from(nb):
                copies.append(path.name)
                continue
            student = student_notebook(nb, str(path), machine_paths)
        except ValueError as e:
            problems.append(str(e))
            continue
        student.metadata[METADATA_KEY] = {"student_version_of": path.name}
        versions[path.name] = notebook_text(clean_notebook(student))
    if copies:
        problems.insert(0, f"{source_dir} holds student versions, not lessons ({', '.join(copies)}): pass "
                           "the lessons' folder as --source")
    raise_all(problems, f"lessons in {source_dir} cannot be made into student versions")
    return versions


def _same_folder(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def write_student_notebooks(source_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Write the student version of every lesson to out_dir; delete the student versions (files this
    function wrote) whose lesson is gone; never overwrite or delete a file it did not write."""
    source_dir, out_dir = Path(source_dir), Path(out_dir)
    if _same_folder(source_dir, out_dir):
        raise ValueError(f"--out {out_dir} is the lessons' folder (--source {source_dir}): the student "
                         "versions would replace the lessons; pass another --out (the default is "
                         "notebooks/student)")
    versions = student_versions(source_dir)
    present = {path: student_version_of(path) for path in lessons(out_dir)}
    foreign = [path for path, lesson in present.items() if lesson is None]
    blocked = [path.name for path in foreign if path.name in versions]
    if blocked:
        raise ValueError(f"{out_dir} holds {', '.join(blocked)}, not written by student-notebooks (no "
                         f"'{METADATA_KEY}.student_version_of' in its metadata): move or delete "
                         f"{'it' if len(blocked) == 1 else 'them'} first, or pass another --out")
    for path in foreign:
        warnings.warn(f"left {path} alone: not a student version written by student-notebooks, and "
                      f"{source_dir} has no lesson of that name", stacklevel=2)
    for path, lesson in present.items():
        if lesson is not None and path.name not in versions:
            path.unlink()
            warnings.warn(f"removed {path}: the student version of {lesson}, which {source_dir} no "
                          "longer has", stacklevel=2)
    written = []
    for name, text in versions.items():
        path = out_dir / name
        if not path.exists() or path.read_text() != text:
            atomic_write(path, text.encode())
        written.append(path)
    return written
