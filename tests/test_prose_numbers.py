"""Every number in a lesson's prose is a number the lesson prints (or a JSON file it reads holds).

The convention, written here because this is where it is enforced:

- **What is read.** In every markdown cell of every lesson (notebooks/NN_*.ipynb), the numbers of four
  kinds: decimals (0.83, 15.97), percentages (57%, 52.7%), times in seconds or minutes (543 s, about
  9 min) and counts written with thousands separators (1,295,078). Plain integers without a unit
  (layer 4, 64 sequences, E = 128) are settings and names more often than results, and are not read.
  Code spans, math, link targets, version numbers (Python 3.11, torch 2.13.0), section numbers
  (Section 3.1), dates and the confidence level "95%" (of "95% interval") are skipped.
- **Where it must appear.** In an output of the same lesson, or in a JSON file the lesson reads (a
  file name like `nsp_vs_sop.json` in one of its code cells, found under assets/), as printed or
  rounded: a prose number with d decimals matches a printed number x when x, 100x (a fraction shown
  as a percentage) or x/60 (seconds said in minutes) lies within half a unit of the d-th decimal of it.
  Signs are not compared ("a gap of −2.0 points" matches "gap -1.96 points"). A number the prose states
  on its own (not as an end of its own interval or range) must be printed on its own too, not only as an
  end of a printed interval ([a, b]) or range (a-b, a to b); the JSON files count whole.
- **Cited numbers are marked.** A number that is the paper's, or another cited source's (another
  lesson, a datasheet), is written in italics with nothing else between the asterisks: `*86.5%*`,
  `*0.3x*`, `*4,096*`. Each lesson says so once, near the paper's numbers. Marked numbers are not read.
- **README and docs/.** A paragraph or table row of README or of a docs/ page that names exactly one
  lesson ("lesson 08", `08_...`, or a table row starting with the lesson's number) is held to the same
  rule against that lesson's outputs and the JSON files the paragraph names (`gpu_check_<gpu>.json`:
  every file of that pattern).

A failure lists each number that no output holds, with the sentence around it, so the fix is either
the prose (say what the output says) or the output (print what the prose needs), never the test.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

CITED = re.compile(r"(?<![*\w])\*([−+-]?\d[\d,]*(?:\.\d+)?\s?(?:%|x|M|s|min|points?)?)\*(?![*\w])")
CODE = re.compile(r"```.*?```|`[^`]*`|\$[^$]*\$|\]\([^)]*\)|<[^>]+>", re.DOTALL)
VERSION = re.compile(r"(?:Python|torch|PyTorch|version|CUDA|Triton|sm_|v|Section|arXiv:)\s?\d+(?:\.\d+)+"
                     r"|\d+\.\d+\.\d+|95%"
                     r"|\d{4}-\d{2}-\d{2}|\d+\.\d+-\d+\.\d+(?= on| for)|\b\d+\.\d+(?=\.\d)")
NUMBER = re.compile(r"(?<![\w.,])(?P<n>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d+)"
                    r"(?P<unit>\s?%|\s?s\b|\s?min\b|\s?minutes?\b|\s?seconds?\b)?(?![\w,]*\d)")
PRINTED = re.compile(r"\d[\d,]*(?:\.\d+)?")
JSON_NAME = re.compile(r"([\w.-]+\.json)\b")
README_JSON = re.compile(r"([\w.<>*-]+\.json)\b")       # gpu_check_<gpu>.json: every file of that pattern


def prose_numbers(text: str) -> list[tuple[str, float, int, str]]:
    """The numbers the convention reads in one markdown text: (as written, value, decimals, context)."""
    text = CODE.sub(" ", CITED.sub(" ", text))
    text = VERSION.sub(" ", text)
    found = []
    for m in NUMBER.finditer(text):
        written, unit = m["n"], (m["unit"] or "").strip()
        decimal, grouped = "." in written, "," in written
        if not (decimal or grouped or unit):
            continue                                     # a plain integer: a setting or a name
        value = float(written.replace(",", ""))
        decimals = len(written.split(".")[1]) if decimal else 0
        context = " ".join(text[max(0, m.start() - 60):m.end() + 30].split())
        found.append((written + (unit if unit in ("%",) else f" {unit}" if unit else ""), value, decimals,
                      context))
    return found


def printed_numbers(text: str) -> set[float]:
    return {float(t.replace(",", "")) for t in PRINTED.findall(text) if t.replace(",", "").count(".") <= 1}


def json_numbers(value) -> set[float]:
    if isinstance(value, bool):
        return set()
    if isinstance(value, int | float):
        return {float(value)}
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return set().union(*(json_numbers(v) for v in value)) if value else set()
    if isinstance(value, str):
        return printed_numbers(value)
    return set()


@cache
def json_files(name: str) -> tuple[Path, ...]:
    """The committed JSON files of that name under assets/, outside the ci and dry-run folders."""
    return tuple(p for p in (ROOT / "assets").rglob(name)
                 if not {"ci", "gpu-dry", "ci-dry", "course-dry"} & set(p.relative_to(ROOT / "assets").parts))


def numbers_of_jsons(names) -> set[float]:
    out = set()
    for name in names:
        for path in json_files(name):
            try:
                out |= json_numbers(json.loads(path.read_text()))
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
    return out


# A number the prose states on its own must be printed on its own: the end of an interval or a min-max range
# is not the same number. ("All shared fine-tunes to 91.4%" passed the first rule while the lesson printed a
# mean of 91.3%: 91.4% was the top of another row's "(89.7%-91.4%)".) For the second rule, ranges are taken
# out of the prose and of the outputs alike; a prose range may still quote a printed one.
VALUE = r"[-−]?\d[\d,]*(?:\.\d+)?\s?%?"
RANGE = re.compile(rf"\[\s*{VALUE}\s*,\s*{VALUE}\s*\]|{VALUE}\s*(?:-|–|to)\s*{VALUE}")


@cache
def lesson_sources(path: Path, ranges: bool = True) -> frozenset[float]:
    """Every number the lesson prints (ranges=False: outside intervals and ranges), and every number in a JSON
    file its code names."""
    nb = nbformat.read(path, as_version=4)
    printed, names = set(), set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        names |= set(JSON_NAME.findall(cell.source))
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "") if out.get("output_type") == "stream" else
                           out.get("data", {}).get("text/plain", ""))
            printed |= printed_numbers(text if ranges else RANGE.sub(" ; ", text))
    return frozenset(printed | numbers_of_jsons(names))


def matches(value: float, decimals: int, sources: frozenset[float] | set[float]) -> bool:
    half = 0.5 * 10 ** -decimals + 1e-9
    return any(abs(abs(candidate) - value) <= half
               for x in sources for candidate in (x, 100 * x, x / 60))


def unmatched(text: str, sources) -> list[str]:
    return [f"{written!r} in: ...{context}..." for written, value, decimals, context in prose_numbers(text)
            if not matches(value, decimals, sources)]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_number_in_a_lessons_prose_is_printed_by_it(path):
    nb = nbformat.read(path, as_version=4)
    sources = lesson_sources(path)
    missing = [f"cell {i}: {line}" for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
               for line in unmatched(cell.source, sources)]
    assert not missing, (f"{path.name}: {len(missing)} number(s) in the prose that no output prints "
                         "(mark a cited number *like this*):\n" + "\n".join(missing))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_a_number_the_prose_states_alone_is_not_only_the_end_of_a_printed_range(path):
    nb = nbformat.read(path, as_version=4)
    points = lesson_sources(path, ranges=False)
    missing = [f"cell {i}: {line}" for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
               for line in unmatched(RANGE.sub(" ; ", CODE.sub(" ", cell.source)), points)]
    assert not missing, (f"{path.name}: {len(missing)} number(s) the prose states alone that the outputs "
                         "print only as an end of an interval or range:\n" + "\n".join(missing))


def test_the_range_rule_catches_an_interval_end_read_as_a_point():
    outputs = RANGE.sub(" ; ", "all shared 91.3% (90.8%-91.6%); attention 90.6% (89.7%-91.4%) [14.9%, 16.5%]")
    assert matches(91.3, 1, printed_numbers(outputs))
    assert not matches(91.4, 1, printed_numbers(outputs)) and not matches(14.9, 1, printed_numbers(outputs))
    assert unmatched(RANGE.sub(" ; ", "seeds 89.7-91.4%, interval [14.9%, 16.5%]"), set()) == []


# ------------------------------------------------------------------------------------------------- README
LESSON_NAMED = re.compile(r"\blessons? (\d\d)\b|\b(\d\d)_[a-z]\w+|^\| (\d\d) \|")


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]     # README and the pages it links


def readme_blocks(page: Path = ROOT / "README.md") -> list[tuple[int, str, str]]:
    """A page's paragraphs, list items and table rows that name exactly one lesson: (line, lesson number,
    text)."""
    blocks, current, start = [], [], 0
    lines = page.read_text().splitlines()
    for i, line in enumerate([*lines, ""]):
        item = re.match(r"\s*(?:[-*]|\d+\.) ", line) is not None        # a list item is a block of its own
        if not line.strip() or line.startswith("|") or line.startswith("#") or item:
            if current:
                blocks.append((start + 1, "\n".join(current)))
            current = []
            if line.startswith("|"):
                blocks.append((i + 1, line))
            if not item:
                continue
        if not current:
            start = i
        current.append(line)
    out = []
    for line_no, text in blocks:
        named = {next(g for g in m.groups() if g) for m in LESSON_NAMED.finditer(text)}
        if len(named) == 1:
            out.append((line_no, named.pop(), text))
    return out


def lesson_path(number: str) -> Path:
    [path] = [p for p in LESSONS if p.name.startswith(number + "_")]
    return path


def test_the_readme_blocks_that_describe_a_lesson_are_found():
    found = {number for _, number, _ in readme_blocks()}
    assert {"05", "08"} <= found, found


def page_misses(page: Path, ranges: bool) -> list[str]:
    """The numbers of a page's blocks about one lesson that the lesson does not print (ranges=False: print
    on their own, outside intervals and ranges; the ranges of the page are then not read)."""
    missing = []
    for line, number, text in readme_blocks(page):
        patterns = {re.sub(r"<[^>]*>", "*", name) for name in README_JSON.findall(text)}
        sources = lesson_sources(lesson_path(number), ranges) | numbers_of_jsons(patterns)
        prose = text if ranges else RANGE.sub(" ; ", CODE.sub(" ", text))
        where = f"{page.relative_to(ROOT)} line {line} (lesson {number})"
        missing += [f"{where}: {m}" for m in unmatched(prose, sources)]
    return missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_number_readme_and_docs_give_for_a_lesson_is_printed_by_it(page):
    missing = page_misses(page, ranges=True)
    assert not missing, (f"{len(missing)} number(s) in {page.name} that the lesson described does not "
                         f"print:\n" + "\n".join(missing))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_number_readme_and_docs_state_alone_is_not_only_the_end_of_a_printed_range(page):
    missing = page_misses(page, ranges=False)
    assert not missing, (f"{len(missing)} number(s) in {page.name} that the lesson prints only as an end of "
                         f"an interval or range:\n" + "\n".join(missing))


# ------------------------------------------------------------------------------------- the reader itself
def test_the_reader_finds_each_kind_and_skips_what_the_convention_skips():
    text = ("Ours 51.9% against the paper's *86.5%*; 1,295,078 pairs in 543 s, about 9 min; layer 4 of 64; "
            "`0.25` in code; Python 3.11 and torch 2.13.0; on 2026-11-26; Section 4.1; a 95% interval; "
            "a ratio of 0.67.")
    assert [w for w, *_ in prose_numbers(text)] == ["51.9%", "1,295,078", "543 s", "9 min", "0.67"]


def test_a_prose_number_matches_as_printed_rounded_scaled_or_in_minutes():
    printed = printed_numbers("gap -1.96 points; 0.5188 of pairs; lesson run time: 543 s; 1,295,078")
    assert matches(2.0, 1, printed) and matches(51.9, 1, printed) and matches(9, 0, printed)
    assert matches(1295078, 0, printed)
    assert not matches(3, 0, printed) and not matches(0.19, 2, printed) and not matches(47.0, 1, printed)


def test_a_contradiction_is_caught():
    """Lesson 12's old prose: 0.83 for a gradient norm the output printed as 0.5900."""
    assert unmatched("the four differ: 0.83, 0.55", printed_numbers("layer 1: 0.5900  layer 2: 0.6044")) \
        == ["'0.83' in: ...the four differ: 0.83, 0.55...", "'0.55' in: ...the four differ: 0.83, 0.55..."]
