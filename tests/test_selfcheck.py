"""The self-check helper, and every lesson's self-check: its answers are right, other answers are not."""

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from minialbert.course.notebooks import lessons, read_notebook
from minialbert.course.selfcheck import Question, answer_digest, normalise, question_source, seal
from minialbert.course.student import student_source

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ANSWERS = re.compile(r"^### BEGIN ANSWERS\n(?P<block>.*?)^### END ANSWERS\n", re.S | re.M)


def printed(source: str, namespace: dict) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(source, namespace)
    return out.getvalue().splitlines()


def self_check_cell(path: Path):
    cells = [c for c in read_notebook(path).cells if c.cell_type == "code" and ANSWERS.search(c.source)]
    return cells[-1] if cells else None


def test_normalise_text_ignores_case_and_whitespace():
    assert normalise("  Post-LN \n") == normalise("post-ln") == "post-ln"
    assert normalise("next  sentence\tprediction") == "next sentence prediction"


def test_normalise_numbers_rounds_to_the_stated_digits():
    assert normalise(3.9383, 1) == normalise("3.9", 1) == "3.9"
    assert normalise("30,000", 0) == normalise(30000.2, 0) == "30000"
    assert normalise(-0.04, 1) == "0.0"
    with pytest.raises(ValueError):
        normalise("many", 0)


def test_question_says_right_wrong_or_not_yet(capsys):
    why = seal("E < VH/(V+H).", 749, digits=0)
    q = Question(3, answer_digest(749, digits=0), why=why, hint="solve for E", digits=0)
    assert q.is_right(749) and q.is_right("748.8") and not q.is_right(748) and not q.is_right("many")
    for answer in (748.9, 700, "many", ...):
        q.check(answer)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["question 3: right. E < VH/(V+H).", "question 3: wrong. Hint: solve for E",
                     "question 3: wrong: the answer is a number (0 decimals)",
                     "question 3: no answer yet (replace the ... with yours)"]


@pytest.mark.parametrize("answer, right, digits", [
    (torch.tensor(749), 749, 0), (torch.tensor(749.0), 749, 0), (torch.tensor(748.8), 749, 0),
    (torch.tensor(0.75), 0.75, 2), (torch.tensor([[3, 4]]).sum(), 7, 0), (np.float32(0.75), 0.75, 2),
    (np.int64(749), 749, 0), (np.array(749.0), 749, 0), (torch.tensor("sop" == "sop"), True, None),
])
def test_a_number_given_as_a_tensor_or_numpy_scalar_counts_as_that_number(answer, right, digits, capsys):
    """In a PyTorch course the natural answer is often a 0-d tensor: `count.sum()`, `x.max()`."""
    q = Question(1, answer_digest(right, digits), why=seal("ok", right, digits), digits=digits)
    q.check(answer)
    assert capsys.readouterr().out == "question 1: right. ok\n"
    assert not q.is_right(answer + 1) if digits is not None else not q.is_right(torch.tensor(False))


def test_a_tensor_of_several_numbers_is_not_a_number(capsys):
    Question(1, answer_digest(749, 0), why=seal("ok", 749, 0), digits=0).check(torch.tensor([749]))
    assert capsys.readouterr().out == "question 1: wrong: the answer is a number (0 decimals)\n"


def test_digest_and_sealed_explanation_hide_the_answer():
    digest = answer_digest("sop")
    assert "sop" not in digest and len(digest) == 16 and digest != answer_digest("nsp")
    line = question_source(2, "SOP", why="Sentence-order prediction replaces NSP.", hint="reread it")
    assert "SOP" not in line and "Sentence-order" not in line and "hint='reread it'" in line
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(line, {"Question": Question, "answer_2": " sop "})
    assert out.getvalue() == "question 2: right. Sentence-order prediction replaces NSP.\n"


LESSONS = [pytest.param(p, id=p.stem) for p in lessons(NOTEBOOKS)]


@pytest.mark.parametrize("path", LESSONS)
def test_every_lesson_ends_with_a_self_check(path):
    cells = read_notebook(path).cells
    cell = self_check_cell(path)
    assert cell is not None, f"{path.name} has no self-check: end it with a `### BEGIN ANSWERS` cell"
    appendix = next((i for i, c in enumerate(cells) if c.cell_type == "markdown"
                     and c.source.lstrip().startswith("## Appendix")), len(cells))
    assert cells.index(cell) >= appendix - 2, (
        f"{path.name}: the self-check must end the lesson (only appendices may follow it)")


@pytest.mark.parametrize("path", [p for p in lessons(NOTEBOOKS) if self_check_cell(p)], ids=lambda p: p.stem)
def test_self_check_accepts_its_answers_and_rejects_others(path):
    source = self_check_cell(path).source
    block = ANSWERS.search(source)
    before, after = source[:block.start()], source[block.end():]
    namespace: dict = {}
    exec(before + block.group("block"), namespace)
    answers = sorted(k for k in namespace if k.startswith("answer_"))
    assert 3 <= len(answers) <= 6, f"{path.name}: a self-check has 3 to 6 questions, found {len(answers)}"

    right = printed(after, namespace)
    assert len(right) == len(answers) and all(": right." in line for line in right), right

    for name in answers:
        value = namespace[name]
        namespace[name] = value + 1 if isinstance(value, int | float) else f"not {value}"
    wrong = printed(after, namespace)
    assert len(wrong) == len(answers) and all(": wrong" in line for line in wrong), wrong

    student = student_source(self_check_cell(path))
    assert "### BEGIN ANSWERS" not in student
    for line in right:                                     # the explanations are sealed, not readable
        assert line.split(": right. ", 1)[1] not in student, line
    blank = printed(student, {})
    assert len(blank) == len(answers) and all("no answer yet" in line for line in blank), blank


# ------------------------------------------------------------------ unreadable answers, and bad digits


class Unreadable:
    """An answer whose text cannot be read: its __str__ raises (an error whose message cannot be printed
    either, when `quiet`)."""

    def __init__(self, quiet=False):
        self.quiet = quiet

    def __str__(self):
        raise (Silent() if self.quiet else RuntimeError("no text here"))


class Silent(Exception):
    def __str__(self):
        raise RuntimeError("no")


class BadShape:
    @property
    def ndim(self):
        raise RuntimeError("ndim is broken")


class BadItem:
    ndim = 0

    def item(self):
        raise RuntimeError("item is broken")


@pytest.mark.parametrize("answer, said", [
    (torch.tensor(749.0, device="meta"), "Tensor.item() cannot be called on meta tensors"),
    (Unreadable(), "RuntimeError: no text here"),
    (Unreadable(quiet=True), "Silent (its message cannot be printed)"),
    (BadShape(), "RuntimeError: ndim is broken"), (BadItem(), "RuntimeError: item is broken"),
])
@pytest.mark.parametrize("digits", [0, None])
def test_an_answer_that_cannot_be_read_is_one_line(answer, said, digits, capsys):
    q = Question(4, answer_digest(749, digits), why=seal("ok", 749, digits), digits=digits)
    q.check(answer)
    out = capsys.readouterr().out
    assert out.startswith("question 4: could not read your answer (") and said in out, out
    assert out.count("\n") == 1, out
    assert not q.is_right(answer)


@pytest.mark.parametrize("digits", [-1, 1.5, True, "2"])
def test_digits_must_be_a_whole_number_of_decimals(digits):
    with pytest.raises(ValueError, match=r"^digits must be a whole number of decimals, 0 or more \(or None "):
        question_source(1, 749, why="ok", digits=digits)
    with pytest.raises(ValueError, match=r"^digits must be a whole number"):
        Question(1, answer_digest(749, 0), why="ok", digits=digits)
