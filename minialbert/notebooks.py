"""The lesson notebook files: finding them, reading and writing them, and keeping them clean.

A clean notebook keeps its sources, outputs and execution counts, and drops what only says when and
where it ran (per-cell execution timestamps, the Python patch version) and what renders as noise
outside a live kernel: stored widget state, widget views (a dead slider shows as its text repr) and
progress-bar text.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat

from .download import atomic_write

LESSON_GLOB = "[0-9][0-9]_*.ipynb"           # 00_course_map.ipynb, 01_tokenizer.ipynb, ...
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CELL_METADATA_NOISE = ("execution", "ExecuteTime")
PROGRESS_BAR = re.compile(r"\d+%\|")         # tqdm's text bar: ' 40%|####      | 4/10 [00:01<...'


def lessons(directory: str | Path) -> list[Path]:
    """The lesson notebooks of a directory (NN_name.ipynb), in course order."""
    return sorted(Path(directory).glob(LESSON_GLOB))


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


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
    """Clean each notebook file in place; return the ones that changed."""
    changed = []
    for path in paths:
        text = Path(path).read_text()
        cleaned = notebook_text(clean_notebook(nbformat.reads(text, as_version=4)))
        if cleaned != text:
            atomic_write(Path(path), cleaned.encode())
            changed.append(Path(path))
    return changed
