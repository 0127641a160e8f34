"""The lesson notebook files: finding them, reading and writing them, and keeping them clean.

A clean notebook keeps its sources, outputs and execution counts, and drops what only says when and
where it ran (per-cell execution timestamps, the Python patch version) and what renders as noise
outside a live kernel: stored widget state, widget views (a dead slider shows as its text repr) and
progress-bar text.

A file that is not a notebook (empty, not UTF-8, not JSON, a JSON list, a notebook without cells) is a
one-line ValueError naming the file; cleaning a batch reports every bad file at once, and rewrites
nothing until all of them read.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import nbformat

from ..download import atomic_write

LESSON_GLOB = "[0-9][0-9]_*.ipynb"           # 00_course_map.ipynb, 01_tokenizer.ipynb, ...
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CELL_METADATA_NOISE = ("execution", "ExecuteTime")
PROGRESS_BAR = re.compile(r"\d+%\|")         # tqdm's text bar: ' 40%|####      | 4/10 [00:01<...'


def lessons(directory: str | Path) -> list[Path]:
    """The lesson notebooks of a directory (NN_name.ipynb), in course order."""
    return sorted(Path(directory).glob(LESSON_GLOB))


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """The notebook in a file (as version 4); a ValueError naming the file if it is not one."""
    return parse_notebook(read_notebook_text(path), path)


def read_notebook_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not a notebook: not UTF-8 text (byte {e.start})") from None


def parse_notebook(text: str, path: str | Path) -> nbformat.NotebookNode:
    """The notebook in `text`, read from `path` (named in every error)."""
    if not text.strip():
        raise ValueError(f"{path} is not a notebook: the file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not a notebook: not JSON ({e.msg} at line {e.lineno}, "
                         f"column {e.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a notebook: it holds a JSON {type(data).__name__}, not an object")
    if "cells" not in data and "worksheets" not in data:           # worksheets: nbformat 3
        raise ValueError(f"{path} is not a notebook: it has no cells")
    try:
        return nbformat.reads(text, as_version=4)
    except (nbformat.ValidationError, ValueError, KeyError, TypeError, AttributeError) as e:
        problem = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(f"{path} is not a valid notebook: {problem}") from None


def raise_all(problems: list[str], what: str) -> None:
    """One ValueError for every problem of a batch (each names its file), or nothing if there are none."""
    if len(problems) == 1:
        raise ValueError(problems[0])
    if problems:
        raise ValueError(f"{len(problems)} {what}: " + "; ".join(problems))


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """The file text Jupyter itself would write for nb (so saving in JupyterLab changes nothing)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def _without_progress_bars(text: str) -> str:
    lines = re.split(r"(?<=\n)|\r", text)
    return "".join(line for line in lines if not PROGRESS_BAR.search(line))


def _clean_outputs(outputs: list) -> list:
    kept = []
    for out in outputs:
        if WIDGET_VIEW in out.get("data", {}):
            continue
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            out["text"] = _without_progress_bars(out["text"])
            if not out["text"]:
                continue
        kept.append(out)
    return kept


def clean_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of nb without timestamps, machine details, widget state and progress bars."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    nb.metadata.get("language_info", {}).pop("version", None)
    for cell in nb.cells:
        for key in CELL_METADATA_NOISE:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs = _clean_outputs(cell.outputs)
    return nb


def clean_notebooks(paths: list[Path]) -> list[Path]:
    """Clean each notebook file in place; return the ones that changed. If any file is not a notebook,
    nothing is written and one error names every such file."""
    cleaned, problems = {}, []
    for path in map(Path, paths):
        try:
            text = read_notebook_text(path)
            cleaned[path] = (text, notebook_text(clean_notebook(parse_notebook(text, path))))
        except ValueError as e:
            problems.append(str(e))
    raise_all(problems, "files are not notebooks")
    changed = [path for path, (text, clean) in cleaned.items() if clean != text]
    for path in changed:
        atomic_write(path, cleaned[path][1].encode())
    return changed
