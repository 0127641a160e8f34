"""Student versions of the lessons, generated from the one source per lesson (the committed notebook).

Markers, as in nbgrader, each alone on its line and written exactly so:
- code:  `### BEGIN SOLUTION` (optionally `### BEGIN SOLUTION (hint: one line)`) ... `### END SOLUTION`
  becomes, inside a function or class (a piece: the marker is indented), `raise NotImplementedError(
  "Exercise: <the hint>")`, which the piece's check reports as not written; at the top level of a cell
  (an exercise) `print("exercise 3: not written yet — <the hint>")`, numbered by the block's `# 3.` or
  the cell's `# Exercise 3:` comments, so that Run All goes on to the self-check and the appendices;
- code:  `### BEGIN ANSWERS` ... `### END ANSWERS` holds self-check answers, one `name = value` a
  line; each becomes `name = ...  # your answer`, so the self-check runs and says "no answer yet";
- markdown: `<!-- BEGIN SOLUTION -->` ... `<!-- END SOLUTION -->` becomes a prompt for the answer.
Markers are read after Unicode normalisation (student_guard.plain: a fullwidth `＃`, a zero-width space
or a soft hyphen changes nothing). A line that looks like a marker but is not one (`#### BEGIN SOLUTION`,
`### begin solution`, `<!--BEGIN SOLUTION-->`, a Cyrillic `О` in `SOLUTION`, a hint without its closing
`)`) is an error naming the file, the cell and the line: copied through, it would hand the solution to
the student. So is a hint that repeats its solution's code (student_guard.hint_gives_away).

A student has not run the lesson yet, so no cell shows the teacher's results of code the student
writes: a cell that had a solution, a cell that calls `check(`, and a cell that uses a function or
class the student writes (or what a check returned) lose their outputs. A solution cell loses its
attachments and metadata too. Every other cell is copied, less each output, attachment and metadata entry
that shows a line of any of the lesson's solutions (student_guard.shown_in: `inspect.getsource`, a
traceback, `!grep`, HTML); the notebook's metadata likewise. Each version is verified before it is
written (verify_student_notebook): cell for cell, no line of a solution in a source (commented out or
respaced too), an output, an attachment or metadata; no marker; no output in those cells; and no absolute
path of this machine (the home folder, the lessons' repository) in an output.

Writing the versions to a folder without losing a student's work: minialbert.course.student_files.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import nbformat

from .student_guard import code_of, hint_gives_away, latin, plain, readings, shown_in, without_solutions

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
CELL_TYPES = ("code", "markdown", "raw")
UNCLOSED_HINT = re.compile(r"^\s*### BEGIN SOLUTION\s*\(hint:")
DEFAULT_HINT = "your code here: the exercise above says what to compute"
MARKDOWN_STUB = "*Your answer here.*"
NOT_WRITTEN = "not written yet —"
STUB = re.compile(rf"^\s*raise NotImplementedError\(['\"]Exercise: "          # a piece's
                  rf"|^print\(['\"]exercises?\b[^'\"]*: {NOT_WRITTEN}", re.MULTILINE)     # an exercise's
EXERCISE_NUMBER = re.compile(r"^\s*#\s*(?:exercise\s+)?(\d+)[.:]", re.IGNORECASE)   # `# 3.`, `# Exercise 3:`
CHECK_CALL = re.compile(r"(?<![\w.])check\(")    # course.pieces.check, not Question(...).check
NAME = re.compile(r"[A-Za-z_]\w*")


def exercise_name(lines: list[str]) -> str:
    """'exercise 3' or 'exercises 1 and 2', from the lines' `# 3.` or `# Exercise 3:`; else 'exercise'."""
    numbers = [match.group(1) for line in lines if (match := EXERCISE_NUMBER.match(line))]
    if len(numbers) > 1:
        return f"exercises {', '.join(numbers[:-1])} and {numbers[-1]}"
    return f"exercise {numbers[0]}" if numbers else "exercise"


def stub_for_hint(hint: str | None, indent: str = "", name: str = "exercise") -> str:
    """The line a student sees where a code solution was: in a piece (indented) it raises, and the piece's
    check says "not written yet"; at the top level (an exercise, `name`) it prints that, and the lesson
    goes on."""
    if indent:
        return indent + f"raise NotImplementedError({f'Exercise: {hint or DEFAULT_HINT}'!r})"
    return f"print({f'{name}: {NOT_WRITTEN} {hint or DEFAULT_HINT}'!r})"


def _code_stub(opened: re.Match, block: list[tuple[int, str]], before: list[str]) -> list[str]:
    inside = [text for _, text in block]
    numbered = inside if any(EXERCISE_NUMBER.match(line) for line in inside) else before   # `# Exercise 3:`
    return [stub_for_hint(opened.group("hint"), opened.group("indent"), exercise_name(numbered))]


def _answers_stub(opened: re.Match, block: list[tuple[int, str]], before: list[str]) -> list[str]:
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


def _markdown_stub(opened: re.Match, block: list[tuple[int, str]], before: list[str]) -> list[str]:
    return [MARKDOWN_STUB]


BLOCKS = {                                  # by cell type: (begin, end, stub) of each kind of block
    "code": [(BEGIN_SOLUTION, END_SOLUTION, _code_stub), (BEGIN_ANSWERS, END_ANSWERS, _answers_stub)],
    "markdown": [(BEGIN_MARKDOWN, END_MARKDOWN, _markdown_stub)],
}


@dataclass
class _OpenBlock:
    begin: re.Match                                    # the BEGIN line's match (in its plain form)
    line: int                                          # its number in the cell, from 1
    end: re.Pattern
    stub: Callable[[re.Match, list[tuple[int, str]], list[str]], list[str]]   # (begin, inside, lines before)
    inside: list[tuple[int, str]] = field(default_factory=list)     # (number, line) between the two


@dataclass
class _Parts:
    """A cell read for its blocks."""
    student: list[str] = field(default_factory=list)  # the lines outside the blocks, and each block's stub
    hidden: list[str] = field(default_factory=list)   # the lines inside the blocks
    outside: list[str] = field(default_factory=list)  # the lines outside the blocks


def _check_cell(cell: nbformat.NotebookNode, where: str) -> None:
    """A ValueError (naming `where`, the notebook and the cell) for a cell no notebook holds."""
    kind, source = cell.get("cell_type"), cell.get("source")
    if kind not in CELL_TYPES:
        raise ValueError(f"{where}: a cell of type {kind!r}: a notebook cell is code, markdown or raw")
    if not isinstance(source, str):
        raise ValueError(f"{where}: its source is a {type(source).__name__}, not text")
    if not isinstance(cell.get("outputs", []), list):
        raise ValueError(f"{where}: its outputs are a {type(cell.get('outputs')).__name__}, not a list")


def _near_miss(cell_type: str, line: str) -> str:
    if UNCLOSED_HINT.match(plain(line)):
        return (f"{line.strip()!r} opens a hint without its closing ')': write "
                "'### BEGIN SOLUTION (hint: one line)' on one line")
    return (f"{line.strip()!r} looks like a solution marker but is not one: write "
            f"{MARKERS_BY_TYPE[cell_type]}, exactly and alone on the line")


def _check_hint(block: _OpenBlock, outside: list[str]) -> None:
    """A ValueError naming the line of a code solution whose hint repeats its code."""
    hint, code = block.begin.groupdict().get("hint"), "\n".join(text for _, text in block.inside)
    if hint and (score := hint_gives_away(hint, code, set(NAME.findall("\n".join(outside))))):
        raise ValueError(f"line {block.line}: the hint repeats {score:.0%} of its solution's code: say what "
                         "to think about, not what to type")


def _split(cell: nbformat.NotebookNode) -> _Parts:
    """The cell's lines read for its blocks; a ValueError naming the line for a marker that is not one, a
    block that is never closed or a stray END, and a hint that repeats its solution."""
    kinds = BLOCKS.get(cell.cell_type, [])
    looks_like_marker = LOOKS_LIKE_MARKER.get(cell.cell_type, LOOKS_LIKE_MARKER["raw"])
    parts, blocks, opened = _Parts(), [], None
    for number, line in enumerate(cell.source.splitlines(), 1):
        form = plain(line)
        begin = next((_OpenBlock(match, number, end, stub) for start, end, stub in kinds
                      if (match := start.match(form))), None)
        end = next((end for _, end, _ in kinds if end.match(form)), None)
        if begin is None and end is None and looks_like_marker.search(latin(line)):
            raise ValueError(f"line {number}: {_near_miss(cell.cell_type, line)}")
        if opened is None and begin:
            opened = begin
        elif opened is None and end:
            raise ValueError(f"line {number}: {line.strip()!r} without a matching BEGIN line")
        elif opened is None:
            parts.student.append(line)
            parts.outside.append(line)
        elif begin:
            raise ValueError(f"line {number}: a solution block opens inside another (opened on line "
                             f"{opened.line}): {line.strip()!r}")
        elif end is opened.end:
            parts.student.extend(opened.stub(opened.begin, opened.inside, parts.outside))
            parts.hidden.extend(text for _, text in opened.inside)
            blocks.append(opened)
            opened = None
        elif end:
            raise ValueError(f"line {number}: {line.strip()!r} cannot close "
                             f"{opened.begin.group(0).strip()!r} (line {opened.line})")
        else:
            opened.inside.append((number, line))
    if opened is not None:
        raise ValueError(f"line {opened.line}: {opened.begin.group(0).strip()!r} is never closed: add its "
                         "END line")
    for block in blocks:
        _check_hint(block, parts.outside)
    return parts


def student_source(cell: nbformat.NotebookNode) -> str:
    """The cell's source with every solution and answer replaced by its stub."""
    replaced = "\n".join(_split(cell).student)
    return replaced + "\n" if cell.source.endswith("\n") else replaced


def solution_lines(nb: nbformat.NotebookNode, name: str = "notebook") -> dict[str, str]:
    """{squeezed line: the line} for every line inside the lesson's blocks that it shows nowhere outside
    them (comment lines are not code): the lines no student version may show, anywhere. A ValueError
    naming the notebook, the cell and the line for a cell _split refuses."""
    hidden, given = {}, set()
    for index, cell in enumerate(nb.cells):
        try:
            parts = _split(cell)
        except ValueError as e:
            raise ValueError(f"{name}, cell {index}, {e}") from None
        for line in parts.hidden:
            hidden.setdefault(code_of(line), line.strip())
        given |= {code_of(line) for line in parts.outside}
    return {code: line for code, line in hidden.items() if code and code not in given}


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
    """A copy of a lesson with its solutions replaced by stubs, without the outputs of the cells that run
    the student's code, and without anything else that shows a solution line (the module docstring); a
    ValueError naming the notebook and the cell (and the line, for a bad marker), and naming the cell for
    an output that shows one of `machine_paths`."""
    for index, cell in enumerate(nb.cells):
        _check_cell(cell, f"{name}, cell {index}")
    student = copy.deepcopy(nb)
    written_by_student: set[str] = set()               # the functions and classes the student writes
    for index, (cell, mine) in enumerate(zip(nb.cells, student.cells)):
        try:
            mine.source = student_source(cell)
        except ValueError as e:
            raise ValueError(f"{name}, cell {index}, {e}") from None
        stubbed = mine.source != cell.source
        if stubbed:                                    # a solution cell: only the text is the teacher's
            mine.metadata = nbformat.NotebookNode()
            mine.pop("attachments", None)
        if cell.cell_type != "code":
            continue
        checks = bool(CHECK_CALL.search(cell.source))
        uses_student_code = (_used_names(mine.source) - _defined_names(mine.source, assigned=True)
                             ) & written_by_student
        if stubbed or checks or uses_student_code:
            mine.outputs, mine.execution_count = [], None
        if stubbed or checks:
            written_by_student |= _defined_names(cell.source, assigned=checks)
        else:
            written_by_student -= _defined_names(cell.source, assigned=True)   # the lesson's own again
    secrets = solution_lines(nb, name)
    for index, mine in enumerate(student.cells):
        mine.metadata = nbformat.from_dict(without_solutions(mine.get("metadata", {}), secrets))
        if "attachments" in mine:
            mine.attachments = nbformat.from_dict(without_solutions(mine.attachments, secrets))
        if mine.cell_type != "code":
            continue
        mine.outputs = [out for out in mine.get("outputs", []) if not shown_in(out, secrets)]
        if shown := _machine_paths_in(mine.outputs, machine_paths):
            raise ValueError(f"{name}, cell {index}: an output shows this machine's folder {shown}: print "
                             "paths relative to the repository or the cache")
    student.metadata = nbformat.from_dict(without_solutions(student.metadata, secrets))
    verify_student_notebook(nb, student, name)
    return student


def _problem(theirs: nbformat.NotebookNode, mine: nbformat.NotebookNode, secrets: dict[str, str]) -> str:
    """What a student cell shows that it may not, next to its lesson's cell; "" if nothing."""
    if mine.cell_type != theirs.cell_type:
        return f"is a {mine.cell_type} cell where the lesson has a {theirs.cell_type} cell"
    lines = mine.source.splitlines()
    if leaked := sorted({secrets[shown] for line in lines for shown in readings(line) if shown in secrets}):
        return f"shows solution code {leaked} in its source"
    looks_like_marker = LOOKS_LIKE_MARKER.get(mine.cell_type, LOOKS_LIKE_MARKER["raw"])
    if marker := next((line for line in lines if looks_like_marker.search(latin(line))), None):
        return f"keeps a marker {marker!r}"
    if mine.cell_type == "code" and mine.get("outputs") and (
            mine.source != theirs.source or CHECK_CALL.search(mine.source)):
        return "keeps the outputs of the student's code"
    for part in ("outputs", "attachments", "metadata"):
        if shown := shown_in(mine.get(part, {}), secrets):
            return f"shows solution code {shown} in its {part}"
    return ""


def verify_student_notebook(teacher: nbformat.NotebookNode, student: nbformat.NotebookNode,
                            name: str) -> None:
    """A ValueError naming the notebook (and the cell) unless the student version pairs cell for cell
    with its lesson and shows no line of a solution (in a source, even commented out or respaced, an
    output, an attachment, a cell's or the notebook's metadata), no marker, and no output in a cell that
    was stubbed or calls check(."""
    for cells in (teacher.cells, student.cells):
        for index, cell in enumerate(cells):
            _check_cell(cell, f"{name}, cell {index}")
    if len(student.cells) != len(teacher.cells):
        raise ValueError(f"{name}: the student version has {len(student.cells)} cells, the lesson "
                         f"{len(teacher.cells)}: a student version holds the lesson's cells, one for one")
    secrets = solution_lines(teacher, name)
    for index, (theirs, mine) in enumerate(zip(teacher.cells, student.cells)):
        if problem := _problem(theirs, mine, secrets):
            raise ValueError(f"{name}, cell {index}: the student version {problem}")
    if shown := shown_in(student.get("metadata", {}), secrets):
        raise ValueError(f"{name}, notebook metadata: the student version shows solution code {shown}")


def has_stub(cell: nbformat.NotebookNode) -> bool:
    """Whether a student cell holds a stub: a piece's (raising NotImplementedError) or an exercise's (saying
    it is not written yet)."""
    return cell.cell_type == "code" and bool(STUB.search(cell.source))
