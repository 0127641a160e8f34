"""The child process `python -m minialbert grade` starts for one submission (grade.py):

    python -P minialbert/course/grade_run.py NOTEBOOK OUTCOME

executes NOTEBOOK top to bottom in a Jupyter kernel (nbclient), every cell even after one raises, with the
notebook's folder as the working folder, then writes OUTCOME (JSON, atomically): {"errors": {cell index:
"Type: first line of the message"}, "died": null, or where and how the kernel died}. The limits (time,
memory) and the environment are the parent's business; the verdicts reach it through the grade log.
It runs as a script and imports nothing of the package (which would import torch), so that the child
itself stays small under the memory limit.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

LINE = 200                          # characters kept of an error's first line


def first_line(text: str) -> str:
    """The first non-empty line of a text, cut to LINE characters."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0][:LINE] if lines else ""


def execute(notebook: Path) -> dict:
    """Run the notebook; -> {"errors": {cell index: line}, "died": line or None}."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    nb = nbformat.read(notebook, as_version=4)
    started = []
    client = NotebookClient(nb, timeout=None, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(notebook.parent)}},
                            on_cell_start=lambda cell, cell_index: started.append(cell_index))
    died = None
    try:
        client.execute()
    except DeadKernelError as e:
        died = f"in cell {started[-1] if started else 0} ({first_line(e) or 'no message'})"
    errors = {}
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and index not in errors:
                said = first_line(output.get("evalue", ""))
                errors[index] = output.get("ename", "Error") + (f": {said}" if said else "")
    return {"errors": errors, "died": died}


def main(argv: list[str]) -> int:
    notebook, outcome = map(Path, argv)
    text = json.dumps(execute(notebook))
    temp = outcome.with_name(outcome.name + ".tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, outcome)             # the parent reads all of it or nothing
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
