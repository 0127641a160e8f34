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
naming what differs: the shape, the first differing position, a parameter's name, or a known
mistake the output matches. `check` never raises, so a wrong or missing piece never stops a lesson:
the lesson goes on with the package's version (an exception that cannot be printed, or a call to exit(),
gets its one line too; only an interrupt, Ctrl-C, goes through). It returns whether the piece is right.
A run of the lesson's training with the learner's pieces is guarded the same way: runs.py.
"""

from __future__ import annotations

import torch

from ..selfcheck import UNPRINTABLE, message_line
from . import lesson_04, lesson_05, lessons_02_03, lessons_06_10
from .checking import TRIAL_KINDS, TRIALS, Piece, failure

PIECES: dict[str, Piece] = {p.name: p for group in (lessons_02_03, lesson_04, lesson_05, lessons_06_10)
                            for p in group.PIECES}


def check(name: str, yours, trials: int = TRIALS, seed: int = 0) -> bool:
    """Check the learner's piece against the package's on `trials` random inputs and print one line.

    Never raises for what the learner wrote (a missing piece, an exception, exit(), a wrong shape or
    value): the verdict says it. Returns True when the piece is right.
    """
    if name not in PIECES:
        raise ValueError(f"unknown piece {name!r}; the pieces: {', '.join(PIECES)}")
    piece = PIECES[name]
    g = torch.Generator().manual_seed(seed)
    largest = 0.0
    for trial in range(trials):
        try:
            problem, diff = TRIAL_KINDS[piece.kind](piece, yours, g, trial)
        except NotImplementedError as e:
            said = message_line(e)
            print(f"{name}: not written yet ({UNPRINTABLE if said is None else said}); the rest of the "
                  "lesson uses the package's version")
            return False
        except KeyboardInterrupt:                 # the learner stopping the cell: let it stop
            raise
        except BaseException as e:                # the learner's code failed: say how, in one line
            print(f"{name}: wrong: {failure(e)}; the rest of the lesson uses the package's version")
            return False
        if problem is not None:
            print(f"{name}: wrong: {problem}")
            return False
        largest = max(largest, diff)
    print(f"{name}: right: matches the package on {trials} random inputs (largest difference {largest:.1g})")
    return True
