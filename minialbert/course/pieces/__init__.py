"""The pieces a learner writes, each checked against the package's own version.

A lesson has the learner write a core piece of ALBERT (a function, or the forward of an nn.Module
whose __init__ the lesson gives) between solution markers; the next cell calls `check`:

    check("attention", attention)
    attention: right: matches the package on 3 random inputs (largest difference 1.2e-07)
    attention: wrong: values differ at [0, 1, 2, 0]: yours 0.4178, the package's 0.3012 (48 of 120
               values differ, by up to 0.29); that is what leaving out the 1/sqrt(d) scale gives
    attention: not written yet; the rest of the lesson uses the package's version

The learner's piece and the package's run on the same random inputs (module pieces with the same
random weights, compared on outputs and on every parameter's gradient); the verdict is one line
naming what differs: the shape, the first differing position, a parameter's name, and a known
mistake the output matches or else its pattern (a factor such as "x 0.5 = 1/sqrt(d)", a sign, transposed
axes, the padded positions, a shift by one, the training step's left-out operation: mistakes.py). Each
piece is judged alone: while its check runs, the other pieces the learner's code calls by name are the
package's (checking.judge_alone), so a wrong attention is blamed on the attention, not on the layer
that calls it. `check` never raises, so a wrong or missing piece never stops a lesson:
the lesson goes on with the package's version (an exception that cannot be printed, or a call to exit(),
gets its one line too; only an interrupt, Ctrl-C, goes through). It returns whether the piece is right.
A right piece is kept in the learner's workspace, my_albert/ (workspace.py), where lesson 05 finds it.
A run of the lesson's training with the learner's pieces is guarded the same way: runs.py.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..grade_log import log_result
from ..selfcheck import UNPRINTABLE, message_line
from . import lesson_04, lesson_05, lesson_10, lessons_02_03, lessons_06_07, lessons_08_09, lessons_11_12
from .checking import TRIALS, Piece, failure, judge_alone
from .workspace import forget, keep, shown

PIECES: dict[str, Piece] = {p.name: p for group in (lessons_02_03, lesson_04, lesson_05, lessons_06_07,
                                                    lessons_08_09, lesson_10, lessons_11_12)
                            for p in group.PIECES}


def check(name: str, yours, trials: int = TRIALS, seed: int = 0, workspace: Path | None = None) -> bool:
    """Check the learner's piece against the package's on `trials` random inputs and print one line.

    Never raises for what the learner wrote (a missing piece, an exception, exit(), a wrong shape or
    value): the verdict says it. Returns True when the piece is right. A right piece is kept in the
    learner's workspace (`workspace`, by default my_albert/ where the lesson runs: workspace.py), a piece
    that is not right loses its kept version there.
    """
    said, line = judge(name, yours, trials, seed)
    if said == "right":
        kept = keep(name, yours, PIECES, workspace)
        line += f"; kept in {shown(kept)}" if kept is not None else ""
    else:
        forget(name, workspace)
    _say(name, said, line)
    return said == "right"


def judge(name: str, yours, trials: int = TRIALS, seed: int = 0) -> tuple[str, str]:
    """`check`'s verdict without printing it: (right | wrong | not written | error, the one line)."""
    if name not in PIECES:
        raise ValueError(f"unknown piece {name!r}; the pieces: {', '.join(PIECES)}")
    piece = PIECES[name]
    g = torch.Generator().manual_seed(seed)
    largest = 0.0
    for trial in range(trials):
        try:
            problem, diff = judge_alone(piece, yours, g, trial, PIECES)    # the other pieces: the package's
        except NotImplementedError as e:
            said = message_line(e)
            return "not written", (f"{name}: not written yet ({UNPRINTABLE if said is None else said}); "
                                   "the rest of the lesson uses the package's version")
        except KeyboardInterrupt:                 # the learner stopping the cell: let it stop
            raise
        except BaseException as e:                # the learner's code failed: say how, in one line
            return "error", f"{name}: wrong: {failure(e)}; the rest of the lesson uses the package's version"
        if problem is not None:
            return "wrong", f"{name}: wrong: {problem}"
        largest = max(largest, diff)
    return "right", (f"{name}: right: matches the package on {trials} random inputs (largest difference "
                     f"{largest:.1g})")


def _say(name: str, verdict: str, line: str) -> None:
    """Print a check's one line, and log it for `python -m minialbert grade` (grade_log.py)."""
    print(line)
    log_result("piece", name, verdict, line)
