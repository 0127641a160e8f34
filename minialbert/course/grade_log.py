"""The grade log: what `python -m minialbert grade` reads back from a submission it ran (grade.py).

When $MINIALBERT_GRADE_LOG names a file, every verdict a lesson prints is also appended to it as one JSON
line: a piece's check (pieces.check) and a self-check answer (selfcheck.Question.check), e.g.

    {"kind": "piece", "name": "attention", "verdict": "wrong", "message": "attention: wrong: ..."}
    {"kind": "question", "name": "2", "verdict": "right", "message": "question 2: right. ..."}

Verdicts: right, wrong, not written, error (the learner's code raised) for a piece; right, wrong, not
answered for a question. Unset (as when a learner runs a lesson), nothing is written. Writing never
raises: a check must not stop a lesson, so a line that cannot be written is lost (the grader then shows
that piece as not run).
"""

from __future__ import annotations

import json
import os

GRADE_LOG_ENV = "MINIALBERT_GRADE_LOG"


def log_result(kind: str, name: str, verdict: str, message: str) -> None:
    """Append one verdict to $MINIALBERT_GRADE_LOG, if it is set."""
    path = os.environ.get(GRADE_LOG_ENV)
    if not path:
        return
    line = json.dumps({"kind": kind, "name": name, "verdict": verdict, "message": message}) + "\n"
    try:
        with open(path, "a", encoding="utf-8") as log:
            log.write(line)
    except OSError:
        pass
