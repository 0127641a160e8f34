"""Hints guide without giving the code: a hint may say what to think about, not what to type.

Each `### BEGIN SOLUTION (hint: ...)` block of every lesson becomes a stub whose message is the hint
(minialbert.course.student), which refuses a hint that gives its solution away with this measure
(minialbert.course.student_guard.hint_overlap). The overlap score measures how much of the solution's code
the hint repeats:

    score = LCS(solution tokens, hint tokens) / (number of solution tokens)

where the solution's tokens are its identifiers, numbers and operators in order (Python's tokenizer:
comments and strings are not code), the hint's are the same kinds of tokens read from its text, and LCS
is the longest common subsequence. Two kinds of tokens are left out of both: Python's keywords and
builtins (`for`, `in`, `any`, `sum`, `max` are also English words) and names the learner already sees in
the cell outside the solution (the function's arguments, the attributes `__init__` made): repeating
those gives nothing away.

The threshold, 0.2: a hint may repeat at most a fifth of the solution's new code. Calibration, measured on the
lessons when this test was written: a hint that is the solution itself scores 1.00; two hints that wrote out
code score 0.80 (LAMB's trust ratio, `torch.where((w_norm > 0) & ...)`) and 0.90 (the training step's list of
calls); the online softmax hint that wrote out each update scored 0.35; the hints written in words scored
0.00-0.10 ("walk the positions; skip specials ...": 0.04, "the first moments are (1-b1) g and (1-b2) g^2:
divide them": 0.04). Between the two groups a hint that names one or two of a short solution's calls lands at
0.25-0.5: for a solution of a few tokens, naming its calls is the solution. The tests at the bottom keep the
calibration honest (the solution scores 1, a hint in words for the same code scores below the threshold).

The generator also counts every token (with given=None): a hint that repeats half of them in order gives
the solution away even when all of them are builtins or names the cell shows (`sorted(set(words))` for
`return sorted(set(words))` scores 0 on new tokens, 0.75 on all). The lessons' hints score at most 0.33
on all tokens.
"""

import re
from pathlib import Path

import pytest

from minialbert.course.notebooks import lessons, read_notebook
from minialbert.course.student import BEGIN_SOLUTION, END_SOLUTION
from minialbert.course.student_guard import HINT_THRESHOLD as THRESHOLD
from minialbert.course.student_guard import WHOLE_THRESHOLD
from minialbert.course.student_guard import hint_overlap as overlap

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NAME = re.compile(r"[A-Za-z_]\w*")
CHECK_CALL = re.compile(r'^check\("(?P<name>\w+)"', re.MULTILINE)


def solution_blocks(source: str) -> tuple[list[tuple[str | None, str]], str]:
    """([(hint, solution code)] of a cell, the cell's code outside its solutions), read with the markers
    the student generator uses."""
    blocks, outside, opened, body = [], [], None, []
    for line in source.splitlines():
        if opened is None and (begin := BEGIN_SOLUTION.match(line)):
            opened, body = begin, []
        elif opened is not None and END_SOLUTION.match(line):
            blocks.append((opened.group("hint"), "\n".join(body)))
            opened = None
        elif opened is not None:
            body.append(line)
        else:
            outside.append(line)
    return blocks, "\n".join(outside)


def hints(path: Path) -> list[tuple[str, str, float]]:
    """(the piece or exercise, the hint, its score) for every solution block of a lesson."""
    cells = read_notebook(path).cells
    code = [index for index, c in enumerate(cells) if c.cell_type == "code"]
    found = []
    for at, index in enumerate(code):
        blocks, outside = solution_blocks(cells[index].source)
        checked = CHECK_CALL.findall(cells[code[at + 1]].source) if at + 1 < len(code) else []
        given = set(NAME.findall(outside))
        for k, (hint, solution) in enumerate(blocks):
            # the check cell after a cell of pieces names them in order, one per block
            piece = (f"piece {checked[k]}" if len(checked) == len(blocks)
                     else f"piece {' / '.join(checked)}" if checked else "an exercise")
            found.append((f"cell {index}, {piece}", hint, overlap(hint, solution, given)))
    return found


LESSONS = lessons(NOTEBOOKS)


def test_every_lesson_is_read_and_hints_are_found():
    assert len(LESSONS) == 13
    assert sum(len(hints(path)) for path in LESSONS) >= 40


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_no_hint_gives_the_code(path):
    failing = [f"{path.stem}, {piece}: overlap {score:.2f} > {THRESHOLD}: {hint!r}"
               for piece, hint, score in hints(path) if score > THRESHOLD]
    assert not failing, "hints that repeat the solution's code:\n" + "\n".join(failing)


# ------------------------------------------------------------------ the calibration
LAMB_SOLUTION = """
w_norm, u_norm = weight.norm(), update.norm()
return torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)
"""


def test_a_hint_that_is_the_solution_scores_1_and_fails():
    hint = ("w_norm, u_norm = weight.norm(), update.norm(); "
            "torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)")
    assert overlap(hint, LAMB_SOLUTION, {"weight", "update"}) == 1.0


def test_a_hint_that_writes_out_the_trust_ratio_fails():
    hint = "torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)"
    assert overlap(hint, LAMB_SOLUTION, {"weight", "update"}) > 0.6


def test_a_hint_in_words_passes():
    hint = "divide the two norms, but keep 1 where either is zero"
    assert overlap(hint, LAMB_SOLUTION, {"weight", "update"}) <= THRESHOLD / 2


def test_names_the_cell_already_shows_and_comments_are_not_counted():
    solution = "    return F.cross_entropy(head(pooled), labels)  # the mean over the batch"
    assert overlap("the head's scores against the labels", solution, {"head", "pooled", "labels"}) == 0.0
    assert overlap("F.cross_entropy", solution, {"head", "pooled", "labels"}) == 1.0
    assert overlap("the mean over the batch", solution) == 0.0
    excluded = "return any(pattern in name for pattern in PATTERNS)"          # `name` is the argument
    assert overlap("is any of the patterns in the name?", excluded, {"name"}) == 0.0


def test_a_hint_of_builtins_and_given_names_is_caught_on_all_tokens():
    solution = "    return sorted(set(words))"
    assert overlap("sorted(set(words))", solution, {"words"}) == 0.0
    assert overlap("sorted(set(words))", solution, None) >= WHOLE_THRESHOLD
    assert overlap("each word once, in order", solution, None) < WHOLE_THRESHOLD
