"""README is what a student reads in five minutes; everything else lives in docs/, one topic a page.

README stays short (at most 12 KiB), every docs/ page is reachable from it, every relative link in
README and docs/ leads to a file that exists, and README carries no dates or commit hashes: those
belong beside the measurements they date, in docs/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))

README_LIMIT = 12 * 1024
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")                  # [text](target): the target
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)   # https:, mailto: ...
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)(?:[0-9a-f]{40}|[0-9a-f]{7})\b")
ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def relative_links(path: Path) -> list[str]:
    """The link targets in a markdown file that point into the repository, without their #anchors."""
    targets = [t.split("#", 1)[0] for t in LINK.findall(path.read_text())]
    return [t for t in targets if t and not EXTERNAL.match(t)]


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, (
        f"README.md is {size:,} bytes, over {README_LIMIT:,}: move detail into a page under docs/")


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    broken = [t for t in relative_links(path) if not (path.parent / t).exists()]
    assert not broken, f"{path.relative_to(ROOT)} links to files that do not exist: {', '.join(broken)}"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t).resolve() for t in relative_links(README)}
    unlinked = [str(p.relative_to(ROOT)) for p in DOCS if p.resolve() not in linked]
    assert DOCS, "docs/ holds no pages"
    assert not unlinked, f"README.md does not link these pages: {', '.join(unlinked)}"


@pytest.mark.parametrize("pattern", [COMMIT_HASH, ISO_DATE], ids=["commit hash", "date"])
def test_readme_has_no_dates_or_commit_hashes(pattern):
    found = [f"line {n}: {m.group()}" for n, line in enumerate(README.read_text().splitlines(), 1)
             for m in pattern.finditer(line)]
    assert not found, f"README.md holds what belongs in docs/ beside its measurement: {'; '.join(found)}"


def test_the_hash_and_date_patterns_find_what_they_should():
    assert COMMIT_HASH.findall("at 0c68459, e9483303 and 1dc31d0082d0d181de8c9201d5a4fbde2701b2a0") == [
        "0c68459", "1dc31d0082d0d181de8c9201d5a4fbde2701b2a0"]
    assert not COMMIT_HASH.findall("1,080 tests, 9 min 58 s, the word defaced, 1234567")
    assert ISO_DATE.findall("on 2026-11-27, version 3.11.7") == ["2026-11-27"]
