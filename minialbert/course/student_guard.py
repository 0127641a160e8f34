"""What a student version may not show, and where it would show it: the measures the student generator
(minialbert.course.student) uses to keep solutions out of every part of a notebook, and hints from
giving the code.

Normal forms. Markers and solution lines are read after Unicode normalisation (`plain`: NFKC, so a
fullwidth `＃` is `#`; zero-width characters, soft hyphens and other invisible format characters
removed). A line is compared `squeezed`: in that form, without any whitespace (`return  sorted(x)` is
`returnsorted(x)`). A source line shows its code with the comment cut off, and its comment read as code
(`# return sorted(x)` shows `returnsorted(x)`).

A text shows a solution line when one of its lines, squeezed, is that line (also with a traceback's
`----> 3` or grep's `file:12:` in front), or, for a line of at least MIN_SHOWN characters squeezed,
when the whole text squeezed holds it: a repr's `'...\\n'`, a notebook's JSON seen through `!grep`. ANSI
colours are taken out first, and HTML is read also without its tags and entities; text stored as base64
(an attachment) is read decoded.

A hint gives its solution away when it repeats, in order, more than HINT_THRESHOLD of the solution's new
tokens (keywords, builtins and names the cell already shows left out: tests/test_hints.py explains and
calibrates the measure), or WHOLE_THRESHOLD of all its tokens (`sorted(set(words))` for
`return sorted(set(words))`: every token a builtin or the argument, and still the solution).

Any other text of a student version (a cell's source, an output) is read in stretches: runs of its tokens
STRETCH times as long as the solution, starting every half solution, so that a copy anywhere in a long
cell is read whole and tokens scattered over the cell do not add up. A stretch shows the solution when it
repeats, in order, more than HINT_THRESHOLD of the solution's new names (its new tokens less operators and
numbers) *and* WHOLE_THRESHOLD of all its tokens (stretch_shows). A hint is prose, where either share, and
any operator, means code; a lesson's code is full of `=`, `+` and `1` and shares the solution's names, its
keywords and its idioms by design (an exercise that prints the lesson's table again with one more column),
so either share alone is common there, and a copy reaches both (tests/test_no_answer_visible.py).
"""

from __future__ import annotations

import base64
import builtins
import html
import io
import keyword
import re
import textwrap
import tokenize
import unicodedata
from collections import Counter
from collections.abc import Iterator

MIN_SHOWN = 12                        # squeezed characters a solution line needs to be looked for inside text
HINT_THRESHOLD = 0.2                  # of the solution's new tokens a hint may repeat in order
WHOLE_THRESHOLD = 0.5                 # of all the solution's tokens a hint may not reach
STRETCH = 2                           # a stretch of a text: twice as many tokens as the solution
COMMENT = re.compile(r"(?:^|\s)#+")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TAG = re.compile(r"<[^<>]*>")
LINE_PREFIX = re.compile(r"^\s*(?:-*>)?\s*\d+[:\s]|^[^\s:]+:\d+:")     # `----> 3 `, `   2 `, `file.py:12:`
OPERATORS = {"+", "-", "*", "/", "//", "%", "**", "@", "==", "!=", "<", ">", "<=", ">=", "=", "+=", "-=",
             "*=", "/=", "&", "|", "~", "^", "<<", ">>"}
HINT_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?(?:e-?\d+)?|//|\*\*|==|!=|<=|>=|<<|>>|[-+*/%@=<>&|~^]")
BUILTINS = set(dir(builtins))
# Letters of other scripts drawn like the Latin letters of the marker words (BEGIN, END, SOLUTION, ANSWERS):
# read as those, a marker written with one is a near miss, never a line copied through.
LOOKALIKES = str.maketrans("АВЕІЅОСРТНКМХѕоаеісрхуԁԝԜӏΑΒΕΙΚΜΝΟΡΤΥΧΖοινυɡıոսօՍՕ",
                           "ABEISOCPTHKMXsoaeicpxydwWlABEIKMNOPTYXZoivuginuoUO")


def plain(text: str) -> str:
    """text after NFKC, without invisible format characters (zero-width spaces and joiners, soft hyphens)."""
    if text.isascii():                               # nothing to normalise: the common case, kept fast
        return text
    return "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")


def latin(text: str) -> str:
    """plain(text) with letters that look like Latin ones (Cyrillic `О`, Greek `Ε`) read as those."""
    return plain(text).translate(LOOKALIKES)


def squeeze(text: str) -> str:
    """plain(text) without any whitespace."""
    return re.sub(r"\s+", "", plain(text))


def code_of(line: str) -> str:
    """A source line squeezed, its comment cut off."""
    return squeeze(COMMENT.split(plain(line))[0])


def readings(line: str) -> set[str]:
    """What a source line shows, squeezed: its code, and each of its comments read as code."""
    return {squeeze(part) for part in COMMENT.split(plain(line))} - {""}


def _views(text: str) -> list[str]:
    """text without ANSI colours, and that again without HTML tags and entities."""
    text = ANSI.sub("", text)
    return [text, html.unescape(TAG.sub("", text))]


def strings(value: object) -> Iterator[str]:
    """Every string in a JSON value (keys included), and the text of each that is base64 for UTF-8 text."""
    if isinstance(value, str):
        yield value
        if len(value) >= 8 and len(value) % 4 == 0:
            try:
                yield base64.b64decode(value, validate=True).decode("utf-8")
            except ValueError:                  # not base64 (binascii.Error), not ASCII, not UTF-8
                pass
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def shown_in(value: object, secrets: dict[str, str]) -> list[str]:
    """The solution lines (secrets: {squeezed line: the line}) that any text in a JSON value shows."""
    lines, whole = set(), []
    for text in strings(value):
        for view in _views(text):
            whole.append(squeeze(view))
            for line in view.splitlines():
                lines |= readings(line) | readings(LINE_PREFIX.sub("", line, count=1))
    whole = "\n".join(whole)
    return sorted({secrets[s] for s in secrets if s in lines or (len(s) >= MIN_SHOWN and s in whole)})


def without_solutions(record: dict, secrets: dict[str, str]) -> dict:
    """record (metadata, attachments) without the entries whose key or value shows a solution line."""
    return {key: value for key, value in record.items() if not shown_in({key: value}, secrets)}


def code_tokens(code: str) -> list[str]:
    """Identifiers, numbers and operators of Python code, in order (comments and strings are not code);
    code Python cannot read is read as words."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(textwrap.dedent(code) + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return HINT_TOKEN.findall(code)
    return [t.string for t in tokens if t.type in (tokenize.NAME, tokenize.NUMBER)
            or t.type == tokenize.OP and t.string in OPERATORS]


def new_tokens(tokens: list[str], given: set[str] | None) -> list[str]:
    """tokens without keywords, builtins and the `given` names; all of them with given=None."""
    if given is None:
        return tokens
    return [t for t in tokens if not keyword.iskeyword(t) and t not in BUILTINS and t not in given]


def in_order(code: list[str], words: list[str]) -> int:
    """How many of the code's tokens the words repeat in order: their longest common subsequence."""
    previous = [0] * (len(words) + 1)            # the table, one row at a time
    for token in code:
        row = [0]
        for j, word in enumerate(words):
            row.append(previous[j] + 1 if token == word else max(previous[j + 1], row[j]))
        previous = row
    return previous[-1]


def hint_overlap(hint: str | None, solution: str, given: set[str] | None = frozenset()) -> float:
    """The share of the solution's code tokens that the hint repeats in order (their longest common
    subsequence). With `given` (the names the cell already shows) keywords, builtins and those names are
    left out of both; with given=None every token counts."""
    code = new_tokens(code_tokens(solution), given)
    if not code:
        return 0.0
    return in_order(code, new_tokens(HINT_TOKEN.findall(hint or ""), given)) / len(code)


def stretch_shows(text: str, solution: str, given: set[str]) -> tuple[float, float] | None:
    """Whether a text (a cell's source, an output) shows a solution somewhere (the module docstring): the
    shares of the solution's new names and of all its tokens that the first stretch showing it repeats in
    order, or None. `given`: the names the solution's cell already shows, as for a hint."""
    def new_names(tokens):
        return [t for t in new_tokens(tokens, given) if t.isidentifier()]
    code = code_tokens(solution)
    new, counts = new_names(code), Counter(code)
    if not new:
        return None
    words = HINT_TOKEN.findall(text)
    for start in range(0, max(1, len(words) - len(code) + 1), max(1, len(code) // 2)):
        stretch = words[start:start + STRETCH * len(code)]
        if (counts & Counter(stretch)).total() < WHOLE_THRESHOLD * len(code):
            continue                                 # too few tokens in common, in any order
        whole = in_order(code, stretch) / len(code)
        fresh = in_order(new, new_names(stretch)) / len(new)
        if fresh > HINT_THRESHOLD and whole >= WHOLE_THRESHOLD:
            return fresh, whole
    return None


def hint_gives_away(hint: str, solution: str, given: set[str]) -> float | None:
    """How much of the solution a hint repeats, when that is too much (the module docstring); else None."""
    new, whole = hint_overlap(hint, solution, given), hint_overlap(hint, solution, None)
    if new > HINT_THRESHOLD or whole >= WHOLE_THRESHOLD:
        return max(new, whole)
    return None
