"""The lessons' self-checks: a question stores a hash of its answer, and its explanation sealed with
the answer as key, so the student version of a lesson can check an answer without showing it.

An author prints the line for the lesson once:
    print(question_source(2, 749, why="E < VH/(V+H) = 748.8", digits=0))
    -> Question(2, '<digest>', why='<sealed>', digits=0).check(answer_2)
Answers are compared after normalising: text ignores case and runs of whitespace, numbers are
rounded to `digits` decimals. A number may be given as a 0-d tensor or array or a numpy scalar
(`torch.tensor(749)`, `x.sum()`, `np.float32(0.75)`): it counts as the number it holds. The hash hides
the answer from a glance, not from guessing. `check` never raises for an answer: one it cannot read
(a meta tensor, an object whose text cannot be made) gets one line saying so.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from .grade_log import log_result

UNPRINTABLE = "its message cannot be printed"


def message_line(error: BaseException) -> str | None:
    """The first line of an exception's message ('' when it has none); None when it cannot be printed
    (its __str__ raises)."""
    try:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    except Exception:
        return None
    return lines[0] if lines else ""


def exception_line(error: BaseException) -> str:
    """An exception in one line: `Type: first line of its message`, `Type` when it has no message, or
    `Type (its message cannot be printed)`."""
    line = message_line(error)
    return type(error).__name__ + (f" ({UNPRINTABLE})" if line is None else f": {line}" if line else "")


def check_digits(digits: object) -> None:
    """Raise a one-line ValueError unless `digits` is None (a text answer) or a whole number >= 0."""
    if digits is not None and (not isinstance(digits, int) or isinstance(digits, bool) or digits < 0):
        raise ValueError(f"digits must be a whole number of decimals, 0 or more (or None for a text answer), "
                         f"not {digits!r}")


class UnreadableAnswer(ValueError):
    """An answer whose text cannot be read (reading it raised): the message says what was raised."""


def as_python(answer: object) -> object:
    """The Python number (or bool) a 0-d tensor, 0-d array or numpy scalar holds; anything else as it is."""
    if getattr(answer, "ndim", None) == 0 and callable(getattr(answer, "item", None)):
        return answer.item()
    return answer


def answer_text(answer: object) -> str:
    """The text of an answer (of the number it holds, for a 0-d tensor or array or a numpy scalar).
    Raises UnreadableAnswer when reading it raises (a meta tensor, a __str__ that fails)."""
    try:
        return str(as_python(answer))
    except Exception as e:
        raise UnreadableAnswer(exception_line(e)) from e


def normalise(answer: object, digits: int | None = None) -> str:
    """The canonical text of an answer: a number rounded to `digits` decimals when digits is given,
    else the text lower-cased with runs of whitespace made single spaces."""
    check_digits(digits)
    text = answer_text(answer)
    if digits is not None:
        number = float(text.replace(",", "").replace("_", "").strip())   # ValueError if not a number
        return f"{round(number, digits) + 0.0:.{digits}f}"           # + 0.0 turns -0.0 into 0.0
    return " ".join(text.lower().split())


def answer_digest(answer: object, digits: int | None = None) -> str:
    """The digest a Question stores: the first 16 hex digits of sha256 of the normalised answer."""
    return hashlib.sha256(f"minialbert:{normalise(answer, digits)}".encode()).hexdigest()[:16]


def _xor_with_answer(data: bytes, answer: object, digits: int | None) -> bytes:
    key = hashlib.shake_256(f"minialbert-why:{normalise(answer, digits)}".encode()).digest(len(data))
    return bytes(a ^ b for a, b in zip(data, key))


def seal(text: str, answer: object, digits: int | None = None) -> str:
    """text XOR a keystream derived from the answer, base64: readable only with the right answer."""
    return base64.b64encode(_xor_with_answer(text.encode(), answer, digits)).decode()


def unseal(sealed: str, answer: object, digits: int | None = None) -> str:
    return _xor_with_answer(base64.b64decode(sealed), answer, digits).decode()


def question_source(number: int, answer: object, why: str, hint: str | None = None,
                    digits: int | None = None) -> str:
    """The line a lesson holds for one question: `Question(...).check(answer_<number>)`."""
    check_digits(digits)
    args = [repr(number), repr(answer_digest(answer, digits)), f"why={seal(why, answer, digits)!r}"]
    args += [f"hint={hint!r}"] * (hint is not None) + [f"digits={digits}"] * (digits is not None)
    return f"Question({', '.join(args)}).check(answer_{number})"


@dataclass(frozen=True)
class Question:
    """One self-check question: its number in the lesson, the digest of the right answer, a one-line
    explanation sealed with the answer (shown when the answer is right), and a hint shown when not."""

    number: int
    digest: str
    why: str                         # sealed: see seal()
    hint: str = "look again at the section of the lesson it asks about, then try again"
    digits: int | None = None        # None: a text answer; an int: a number rounded to these decimals

    def __post_init__(self):
        check_digits(self.digits)

    def is_right(self, answer: object) -> bool:
        try:
            return answer_digest(answer, self.digits) == self.digest
        except ValueError:            # text given where a number is expected, or an unreadable answer
            return False

    def check(self, answer: object) -> None:
        """Print whether `answer` is right, with a one-line explanation or a hint. Never raises."""
        if answer is Ellipsis:
            self._say("not answered", f"question {self.number}: no answer yet (replace the ... with yours)")
            return
        try:
            answer = answer_text(answer)      # read once: the same text is checked and unseals the why
        except UnreadableAnswer as e:
            self._say("wrong", f"question {self.number}: could not read your answer ({e}); give a number "
                               "or a text")
            return
        if self.is_right(answer):
            self._say("right", f"question {self.number}: right. {unseal(self.why, answer, self.digits)}")
        elif self.digits is not None and not _is_number(answer):
            self._say("wrong", f"question {self.number}: wrong: the answer is a number ({self.digits} "
                               "decimals)")
        else:
            self._say("wrong", f"question {self.number}: wrong. Hint: {self.hint}")

    def _say(self, verdict: str, line: str) -> None:
        """Print the answer's one line, and log it for `python -m minialbert grade` (grade_log.py)."""
        print(line)
        log_result("question", str(self.number), verdict, line)


def _is_number(answer: object) -> bool:
    try:
        normalise(answer, 0)
    except ValueError:
        return False
    return True
