"""`python -m minialbert grade`: submitted notebooks run alone and graded per piece and question, and a
submission that raises, loops, allocates without bound, deletes the files beside it or is no notebook gets
its row and harms nothing else. Small handmade notebooks, so these run in seconds (the real lesson 02
student version too: about 15 s)."""

import csv
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from minialbert.course.commands import main
from minialbert.course.grade import Limits, grade
from minialbert.course.grade_table import markdown
from minialbert.course.pieces import check
from minialbert.course.selfcheck import question_source

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LESSON = "90_handmade.ipynb"
PIECES = ["split_heads", "merge_heads", "embedding_parameters", "attention", "layer", "shared_encoder"]
IMPORTS = "from minialbert.course.pieces import check\nfrom minialbert.course.selfcheck import Question"
QUESTIONS = "\n".join(question_source(n, 42, why=f"because {n}", digits=0) for n in (1, 2, 3))


def write_notebook(path: Path, *cells: str, lesson: str | None = None) -> Path:
    """A notebook of these code cells (recording `lesson` as the lesson it is the student version of)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    if lesson:
        nb.metadata["minialbert"] = {"student_version_of": lesson}
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def lessons(tmp_path_factory) -> Path:
    """A lessons folder with one lesson: six pieces checked and three questions (never run, only read)."""
    folder = tmp_path_factory.mktemp("lessons")
    write_notebook(folder / LESSON, IMPORTS, *(f'check("{name}", mine)' for name in PIECES), QUESTIONS)
    return folder


@pytest.fixture(scope="module")
def batch(tmp_path_factory, lessons):
    """One grading of four submissions side by side: pieces right, wrong, not written, raising, in a cell
    that raises and left out; one that raises; one that deletes the files in its folder; one not JSON."""
    folder = tmp_path_factory.mktemp("submissions")
    answers = "answer_1 = 42\nanswer_2 = 7\nanswer_3 = ...\n" + QUESTIONS
    paths = [
        write_notebook(folder / "pieces.ipynb", IMPORTS,
                       'check("split_heads", lambda x, h: x.view(*x.shape[:2], h, -1).transpose(1, 2))',
                       'check("merge_heads", lambda x: x.reshape(x.shape[0], x.shape[2], -1))',
                       'def mine(V, E, H):\n    raise NotImplementedError("Exercise: count")\n'
                       'check("embedding_parameters", mine)',
                       'check("attention", lambda q, k, v, attend: 1 / 0)',
                       'check("layer", MyLayer)',
                       answers, lesson=LESSON),
        write_notebook(folder / "raises.ipynb", IMPORTS, 'raise RuntimeError("boom")', answers),
        write_notebook(folder / "deletes.ipynb",
                       "import os\nfor name in os.listdir('.'):\n    os.remove(name)\nprint(os.listdir('.'))",
                       IMPORTS, answers),
        folder / "not_json.ipynb",
    ]
    paths[-1].write_text("my homework, as text")
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    grades = {Path(g.student).name: g for g in grade(paths, lessons)}
    return grades, folder, before


def verdicts(g) -> dict[str, str]:
    return {(f"Q{name}" if kind == "question" else name): v.verdict for (kind, name), v in g.items.items()}


def test_each_piece_and_question_gets_its_verdict(batch, capsys):
    g = batch[0]["pieces.ipynb"]
    assert g.lesson == LESSON
    assert g.status == "ran; 1 cell raised (first: cell 5, NameError: name 'MyLayer' is not defined)"
    assert verdicts(g) == {"split_heads": "right", "merge_heads": "wrong",
                           "embedding_parameters": "not written", "attention": "error", "layer": "error",
                           "shared_encoder": "not run",
                           "Q1": "right", "Q2": "wrong", "Q3": "not answered"}
    messages = {name: v.message for (_, name), v in g.items.items()}
    check("merge_heads", lambda x: x.reshape(x.shape[0], x.shape[2], -1))      # the line the student saw
    assert messages["merge_heads"] == capsys.readouterr().out.strip()           # (naming the mistake)
    assert messages["merge_heads"].startswith("merge_heads: wrong: ")
    assert messages["attention"].startswith("attention: wrong: your code raised ZeroDivisionError")
    assert messages["layer"] == "layer: error: cell 5 raised NameError: name 'MyLayer' is not defined"
    assert messages["1"].startswith("question 1: right. because 1")


def test_a_submission_that_raises_gets_its_row_and_runs_on(batch):
    g = batch[0]["raises.ipynb"]
    assert g.lesson is None and g.status == "ran; 1 cell raised (first: cell 1, RuntimeError: boom)"
    assert verdicts(g) == {"Q1": "right", "Q2": "wrong", "Q3": "not answered"}    # the cells after it ran


def test_deleting_files_in_its_folder_deletes_copies_only(batch):
    grades, folder, before = batch
    assert grades["deletes.ipynb"].status == "ran"
    assert verdicts(grades["deletes.ipynb"]) == {"Q1": "right", "Q2": "wrong", "Q3": "not answered"}
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before


def test_a_file_that_is_not_a_notebook_gets_its_row(batch):
    g = batch[0]["not_json.ipynb"]
    assert g.status == "not a notebook: not JSON (Expecting value at line 1, column 1)" and g.items == {}


def test_the_markdown_table_has_a_row_per_student_and_a_column_per_item(batch):
    text = markdown(list(batch[0].values()))
    assert f"## {LESSON}" in text and "## not a student version of a lesson" in text
    assert "| student | status | " + " | ".join(PIECES) + " | Q1 | Q2 | Q3 |" in text
    assert "right | wrong | not written | error | error | not run | right | wrong | not answered |" in text
    assert "merge_heads: wrong: values differ" in text.split("Wrong and errors:")[1]


def leftover_processes(marker: str) -> list[str]:
    """Processes still working in a grading's temporary folders."""
    left = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            if marker in process.cwd():
                left.append(f"{process.pid}: {process.info['cmdline']}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return left


def test_a_notebook_that_loops_forever_is_killed_with_its_kernel(tmp_path):
    loops = write_notebook(tmp_path / "loops.ipynb", "print('start')", "while True:\n    pass")
    fine = write_notebook(tmp_path / "fine.ipynb", "print(1)")
    start = time.monotonic()
    grades = grade([loops, fine], tmp_path, Limits(seconds=15))   # fine: about 5 s on a busy machine
    assert time.monotonic() - start < 60
    assert [g.status for g in grades] == ["timed out after 15 s", "ran"]
    assert not leftover_processes("minialbert-grade-")


def test_a_notebook_that_allocates_without_bound_runs_out_of_memory(tmp_path):
    grows = write_notebook(tmp_path / "grows.ipynb",
                           "def grow():\n    chunks = []\n    while True:\n"
                           "        chunks.append(bytearray(2**26))\ngrow()", "print('after')")
    fine = write_notebook(tmp_path / "fine.ipynb", "print(1)")
    grades = grade([grows, fine], tmp_path, Limits(seconds=60, memory_mib=1536))
    assert [g.status for g in grades] == ["out of memory (limit 1536 MiB) in cell 0", "ran"]


def test_each_run_has_its_own_home_cache_and_folder_and_starts_from_the_seed(tmp_path):
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "built.txt").write_text("seed")
    looks = write_notebook(tmp_path / "looks.ipynb",
                           "import os\nfrom pathlib import Path\n"
                           f"assert os.environ['HOME'] != {str(Path.home())!r}\n"
                           f"assert Path.cwd() != Path({str(tmp_path)!r})\n"
                           "assert os.environ['MINIALBERT_SCALE'] == 'ci'\n"
                           "cached = Path(os.environ['MINIALBERT_CACHE']) / 'built.txt'\n"
                           "assert cached.read_text() == 'seed'\n"
                           "cached.unlink()")
    other = tmp_path / "other.ipynb"
    other.write_bytes(looks.read_bytes())
    grades = grade([looks, other], tmp_path, seed_cache=seed)
    assert [g.status for g in grades] == ["ran", "ran"]               # the second found the seed whole
    assert (seed / "built.txt").read_text() == "seed"


def test_the_command_prints_the_table_and_writes_the_csv(tmp_path, capsys):
    fine = write_notebook(tmp_path / "fine.ipynb", "print(1)")
    empty = tmp_path / "empty.ipynb"
    empty.write_text("")
    out = tmp_path / "grades.csv"
    argv = ["grade", str(fine), str(empty), "--lessons", str(tmp_path), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"| {fine} | ran |" in printed and f"| {empty} | not a notebook: the file is empty |" in printed
    rows = list(csv.DictReader(out.open()))
    assert [(row["student"], row["status"]) for row in rows] == [
        (str(fine), "ran"), (str(empty), "not a notebook: the file is empty")]


def test_the_shipped_lesson_02_student_version_grades_as_not_written():
    (g,) = grade([NOTEBOOKS / "student" / "02_factorized_embeddings.ipynb"], NOTEBOOKS)
    assert g.status.startswith("ran"), g.status
    assert verdicts(g) == {"factorized_embedding": "not written", "embedding_parameters": "not written",
                           **{f"Q{n}": "not answered" for n in (1, 2, 3, 4)}}


def test_the_grade_log_is_written_only_when_asked(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MINIALBERT_GRADE_LOG", raising=False)
    check("merge_heads", lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1))
    assert not list(tmp_path.iterdir())
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("MINIALBERT_GRADE_LOG", str(log))
    check("merge_heads", lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1))
    line = capsys.readouterr().out.splitlines()[-1]
    assert log.read_text() == ('{"kind": "piece", "name": "merge_heads", "verdict": "right", "message": '
                               f'"{line}"}}\n')
