"""No words from the making of the course in it.

The course speaks about ALBERT, the paper, the reader's own runs and what each measurement measured. Some
words belong to how the course was made, not to what it teaches or measures. They are refused in every
lesson and student version (markdown and outputs) and in everything else a reader reads: README.md,
docs/*.md, the committed text under assets/ (JSON values and keys, SVG text, logs), and the comments and
docstrings of minialbert/, benchmarks/ and tests/ (and the names of their tests and files):

- a target "set" for a model (TARGET_SET): a lesson states a rule before the numbers and applies it, it
  does not report on its makers' goals;
- remarks about the machine that ran it being used by other work at the time, or stopped for it
  (MACHINE): a reader's machine is their own; say that timings vary between runs, if anything;
- absolute paths of a machine, such as a home, temporary or scratch folder (ABSOLUTE): paths are relative
  to the repository or the cache (or start with ~ for the home folder), so a text reads the same on every
  machine. String literals of code are held to this too, except the few in LITERAL_PATHS, each with its
  reason: values a test hands to the code that must refuse or hide them;
- a path recorded in JSON under a key that names one (PATH_KEYS) that is not a path in the repository:
  committed JSON records a repository-relative path, or none (null);
- issue numbers (ISSUE), in prose and in the names of tests and files: a test is named by the behaviour
  it checks, a comment says what the code does and why;
- words about how the work was organised rather than what it did (ORGANISED): who did which part, which
  machine it borrowed and what was copied off it, which note was written or closed, when a measurement
  was redone and why. Say what was measured, on what, with which commit.
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from xml.etree import ElementTree

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + \
    sorted((ROOT / "notebooks" / "student").glob("[0-9][0-9]_*.ipynb"))

TARGET_SET = re.compile(r"\btargets? set\b|\bset (?:\w+ ){0,2}(?:a |an |the |its |our )?targets?\b", re.I)
MACHINE = re.compile(r"\bpaused\b|\bshar(?:ed|ing) (?:the |a |this |our )?(?:\w+-class )?"
                     r"(?:machine|cpu|cores?|computer|host)\b|"
                     r"\bbeside (?:an)?other (?:[\w-]+ ){0,2}(?:jobs?|work|runs?)\b|"
                     r"\bother (?:work|jobs|measurements) on (?:the same|this) machine\b|"
                     r"\bother jobs\b|\bniced\b", re.I)
MACHINE_FOLDERS = "home|Users|root|tmp|work|workspace|scratch|mnt|opt|var|private|srv|media|content"
ABSOLUTE = re.compile(rf"(?<![\w.~/$-])(?:/(?:{MACHINE_FOLDERS})(?![\w.-])|[A-Z]:\\)")
ISSUE = re.compile(r"\bissues?(?:'s)?[\s#:(]*\d+(?:'s)?|\b(?:the|this|that) issue\b|\bissue's\b|"
                   r"\b(?:PR|pull request|ticket)\s*#?\d+|"
                   r"(?:\(|\b(?:see|in|from|per|closes|fixes|of)\s+)#\d+\b", re.I)
ORGANISED = re.compile(
    r"\b(?:this|that|the next|the previous|the last|the first|a second|another|an earlier|a later|each|"
    r"every|my|our|one|helper|device|GPU|H100|H200)\s+sessions?\b|\bhelper[- ]?\d+\b|"
    r"\bhelpers? (?:sessions?|agents?)\b|\bfiled (?:by|as|under|in)\b|\bclosing notes?\b|\blanded\b|"
    r"\blent\b|\bon loan\b|\bcame back\b|\bcalls? of (?:a |the |one )?(?:lent )?machine\b|"
    r"\btransfer limit\b|\bresult archive\b|\bmachine was released\b|\bdevice time\b|"
    r"\b(?:a|the|code) review\b|\breviewers?\b|\bre-timed\b|\bsession_\d|"
    r"\b(?:the|this|other|another) (?:engineer|agent)s?\b|\bthe brief\b", re.I)

# Absolute paths that a string literal of code may hold: what the code under test must refuse or rewrite.
# Each is matched as the start of the path found, in that one file only.
LITERAL_PATHS = {
    ("tests/test_edges.py", "/tmp/.."): "a cache folder that resolves to the root, refused by name",
    ("tests/test_student.py", "/home/ada"): "a machine path in an output, which a student version refuses",
    ("tests/test_course_words.py", ""): "this test's own examples of what it refuses",
}
KINDS = ((TARGET_SET, "a target set for a model"), (MACHINE, "the machine shared or paused"),
         (ABSOLUTE, "an absolute path"), (ISSUE, "an issue number"),
         (ORGANISED, "how the work was organised"))


def texts(path: Path):
    """(where, text) for every markdown cell and every output of a notebook."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            yield f"cell {i} (markdown)", cell.source
        for out in cell.get("outputs", []):
            text = out.get("text", "") if out.get("output_type") == "stream" else \
                "".join(str(v) for k, v in out.get("data", {}).items() if k.startswith("text/"))
            yield f"cell {i} (output)", "".join(text)


def problems(where: str, text: str) -> list[str]:
    found = [f"{where}: {what}: ...{text[max(0, m.start() - 40):m.end() + 40]}..." for pattern, what in KINDS
             for m in pattern.finditer(text)]
    return [" ".join(p.split()) for p in found]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_no_words_from_the_making_of_the_course(path):
    found = [p for where, text in texts(path) for p in problems(where, text)]
    assert not found, f"{path.relative_to(ROOT)}:\n" + "\n".join(found)


# ------------------------------------------------------------------------ everything else a reader reads

def committed() -> list[str]:
    """The files read: README.md, docs/*.md, everything under assets/ and minialbert/, benchmarks/*.py and
    tests/*.py, as git lists them (so an untracked local output is not read), or as found without git."""
    try:
        listed = subprocess.run(["git", "ls-files", "--", "README.md", "docs", "assets", "minialbert",
                                 "benchmarks", "tests"], cwd=ROOT, capture_output=True, text=True).stdout
    except OSError:
        listed = ""
    globs = ("README.md", "docs/*", "assets/**/*", "minialbert/**/*", "benchmarks/*", "tests/*")
    paths = listed.splitlines() or [str(p.relative_to(ROOT)) for pattern in globs for p in ROOT.glob(pattern)]
    return sorted(p for p in paths
                  if (ROOT / p).is_file() and p.endswith((".md", ".json", ".svg", ".txt", ".py"))
                  and (p == "README.md" or p.startswith(("assets/", "minialbert/")) or
                       (p.count("/") == 1 and p.startswith(("docs/", "benchmarks/", "tests/")))))


FILES = committed()


def json_strings(value, where: str):
    """(where, text) for every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{where} (a key)", key
            yield from json_strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from json_strings(item, f"{where}[{i}]")


PATH_KEYS = {"out", "figure", "path", "file", "folder", "dir", "directory", "output_dir"}


def json_paths(value, where: str = ""):
    """(where, path) for every string a JSON object holds under a key that names a path or folder."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in PATH_KEYS and isinstance(item, str):
                yield f"{where}.{key}", item
            yield from json_paths(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from json_paths(item, f"{where}[{i}]")


def python_texts(rel: str, source: str):
    """(line, text, is prose) for the comments and docstrings (prose) and the other string literals of a
    module. Comments on consecutive lines are one text, so that a phrase may run over them."""
    block: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            if block and tok.start[0] != block[-1][0] + 1:
                yield block[0][0], "\n".join(t for _, t in block), True
                block = []
            block.append((tok.start[0], tok.string.lstrip("#").strip()))
    if block:
        yield block[0][0], "\n".join(t for _, t in block), True
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)
                  and isinstance(node.body[0].value.value, str)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value, id(node) in docstrings


def repository_texts(rel: str):
    """(where, first line or None, text, is prose) for each text a reader reads in one committed file."""
    source = (ROOT / rel).read_text(encoding="utf-8")
    if rel.endswith(".py"):
        yield from ((rel, line, text, prose) for line, text, prose in python_texts(rel, source))
    elif rel.endswith(".json"):
        yield from ((where, None, text, True) for where, text in json_strings(json.loads(source), rel))
    elif rel.endswith(".svg"):
        yield rel, None, "\n".join(ElementTree.fromstring(source).itertext()), True
    else:
        yield rel, 1, source, True


def found_in(rel: str) -> list[tuple[str, str, str, str]]:
    """(where, what, the words found, their context) for every refused occurrence in one committed file."""
    found = []
    for where, first, text, prose in repository_texts(rel):
        flat = text.replace("\n", " ")                # a phrase may run over lines; offsets stay the same
        for pattern, what in KINDS if prose else ((ABSOLUTE, "an absolute path"),):
            for m in pattern.finditer(flat):
                if not prose and any(file == rel and flat[m.start():].startswith(start)
                                     for file, start in LITERAL_PATHS):
                    continue
                line = "" if first is None else f":{first + text.count(chr(10), 0, m.start())}"
                context = " ".join(flat[max(0, m.start() - 50):m.end() + 50].split())
                found.append((where + line, what, m.group(0), context))
    for where, path in json_paths(json.loads((ROOT / rel).read_text()), rel) if rel.endswith(".json") else ():
        if Path(path).is_absolute() or not (ROOT / path).exists():
            found.append((where, "a path that is not the repository's", path, path))
    for node in ast.walk(ast.parse((ROOT / rel).read_text())) if rel.endswith(".py") else ():
        name = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ""
        if re.search(r"issue_?\d", name, re.I):
            found.append((f"{rel}:{node.lineno}", "an issue number in a name", name, name))
    if re.search(r"issue|session|helper", Path(rel).name, re.I):
        found.append((rel, "a file named by how the work was organised", Path(rel).name, rel))
    return found


@pytest.mark.parametrize("rel", FILES)
def test_no_words_from_the_making_of_the_course_in_the_repository(rel):
    found = [f"{where}: {what}: ...{context}..." for where, what, words, context in found_in(rel)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("text", [
    "The target set for `albert-sop` is 20%.", "The course set itself a target: 15%.",
    "training was paused for other measurements on the same machine",
    "some entries shared the machine with other work while they trained",
    "timings on a shared laptop-class machine move that much", "took 612 s beside another one-thread job",
    "shared with three other jobs (niced)", "often with other jobs beside them",
    "loaded /home/someone/.cache/minialbert/zoo/albert-sop", "wrote /tmp/x.json", "written to /tmp",
    "measured on /Users/ada/minialbert", "C:\\Users\\ada", "out: /work/main/.results/a",
    "(issue 50)", "Issue 27, case 4:", "issues 58 and 59", "issue #12", "see #58",
    "the hints issue 45 quotes", "the issue's goal", "a second H200 session found", "this session",
    "the next session", "helper-3 measured it",
    "filed by a helper session", "closing note", "the change landed in 2e0034b", "the lent machine",
    "in two calls of one machine", "only the printed log came back", "over the transfer limit",
    "its compiles and a review", "re-timed on 2026-11-27", "session_2026-11-27b",
])
def test_each_kind_is_caught(text):
    assert problems("here", text), text


@pytest.mark.parametrize("text", [
    "the rule is stated before the numbers: the model must reach twice the unigram baseline",
    "timings vary from run to run; read the ratio",
    "loaded ~/.cache/minialbert/zoo/albert-sop and assets/figures/nsp_vs_sop.json",
    "cross-layer sharing: one set of weights shared by every layer", "a training set and a test set",
    "Open an issue in this project's tracker", "the kernel runs in a session of its own",
    "done once for the test session", "cached helpers that build it", "one set of helpers",
    "spread over `workers` fresh processes", "minialbert at commit 2e0034b, 2026-11-27",
    "the MRPC columns #1 String and #2 String", "$HOME/tmp/x", "~/work/x", "glue/data/SST-2.zip",
    "/dev/zero is not a regular file", "/etc/passwd", "/usr/bin/chromium", "the tokenizers/ folder",
    "the `retimed` entries", "looked up, not timed again", "version 2's dQ at N = 1,000",
])
def test_ordinary_words_pass(text):
    assert not problems("here", text), text


def test_a_literal_path_is_refused_unless_listed(tmp_path, monkeypatch):
    """Code may hold a machine path only where LITERAL_PATHS names it, with its file; comments never."""
    (tmp_path / "tests").mkdir()
    code = 'CACHE = "/tmp/.."  # a root folder\nOTHER = "/tmp/x"\n'
    (tmp_path / "tests" / "test_edges.py").write_text(code)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert [(where, words) for where, _, words, _ in found_in("tests/test_edges.py")] == [
        ("tests/test_edges.py:2", "/tmp")]


def test_a_json_path_is_the_repositorys_or_none(tmp_path, monkeypatch):
    (tmp_path / "assets" / "figures").mkdir(parents=True)
    (tmp_path / "assets" / "figures" / "a.png").write_bytes(b"")
    record = {"figure": "assets/figures/a.png", "args": {"out": None}, "runs": [{"out": ".results/a"}],
              "what": "a figure in assets/figures/a.png", "path": "/srv/x/a.png"}
    (tmp_path / "assets" / "r.json").write_text(json.dumps(record))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert [(where, words) for where, _, words, _ in found_in("assets/r.json")] == [
        ("assets/r.json.path", "/srv"), ("assets/r.json.runs[0].out", ".results/a"),
        ("assets/r.json.path", "/srv/x/a.png")]
