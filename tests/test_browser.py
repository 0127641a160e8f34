"""The lessons in a real browser: JupyterLab from this environment on loopback, driven in headless
Chromium by Playwright. Runs the parameter calculator (lesson 02) and the masking explorer (lesson 04),
checks that their ipywidgets render as controls and react to a slider, and that no widget or kernel
error appears; then runs a student version (lesson 02's) with every exercise written as the teacher's
solution, as a learner who finished it would, and checks that each piece's check says right.
Screenshots go to test-artifacts/browser/.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import Page, expect, sync_playwright

from minialbert.course.notebooks import notebook_text, read_notebook
from minialbert.course.student import has_stub

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = os.environ.get("MINIALBERT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "minialbert-browser-test"
ERROR_TEXTS = ("Traceback (most recent call last)", "Error displaying widget", "Error rendering widget",
               "Kernel Restarting", "Dead kernel", "model not found")

WIDGET_REPR = re.compile(r"\b[A-Z]\w*\((value|children|options)=")
CHECK_CALL = re.compile(r'^check\("(\w+)"', re.MULTILINE)        # a lesson's check cell for one piece
STUDENT_LESSON = "02_factorized_embeddings.ipynb"                # a build-path lesson that runs in seconds
FILLED_IN = "02_factorized_embeddings_filled_in.ipynb"

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chromium() -> str:
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"no Chromium at {CHROMIUM}: install Debian's with `sudo apt-get install chromium` "
                    "(`make test` tries this itself when run as root), or point MINIALBERT_CHROMIUM at one",
                    pytrace=False)
    return CHROMIUM


def filled_in(name: str) -> nbformat.NotebookNode:
    """The committed student version of a lesson with every exercise stub replaced by the teacher's cell
    (as tests/test_lesson_pieces.py fills them): a learner who wrote each piece as the solution does."""
    student = read_notebook(ROOT / "notebooks" / "student" / name)
    teacher = read_notebook(ROOT / "notebooks" / name)
    stubs = [i for i, cell in enumerate(student.cells) if has_stub(cell)]
    assert stubs and len(student.cells) == len(teacher.cells), f"notebooks/student/{name}: stale, or no stub"
    for i in stubs:
        student.cells[i].source = teacher.cells[i].source
    return student


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> str:
    """JupyterLab from this Python environment, on loopback, serving a copy of the lessons (so autosave
    never touches the committed notebooks); yields its base URL."""
    root = tmp_path_factory.mktemp("lab")
    for name in ("02_factorized_embeddings.ipynb", "04_pretraining_objectives.ipynb"):
        shutil.copy(ROOT / "notebooks" / name, root / name)
    (root / FILLED_IN).write_text(notebook_text(filled_in(STUDENT_LESSON)))
    settings = root / ".settings" / "@jupyterlab"
    for extension, plugin, value in (("notebook-extension", "tracker", '{"windowingMode": "none"}'),
                                     ("apputils-extension", "notification", '{"fetchNews": "false"}')):
        (settings / extension).mkdir(parents=True)          # render every cell; no news pop-up
        (settings / extension / f"{plugin}.jupyterlab-settings").write_text(value)
    port = free_port()
    env = dict(os.environ, MINIALBERT_SCALE=os.environ.get("MINIALBERT_SCALE", "ci"),
               JUPYTER_RUNTIME_DIR=str(root / ".runtime"),
               JUPYTERLAB_WORKSPACES_DIR=str(root / ".workspaces"),
               JUPYTERLAB_SETTINGS_DIR=str(root / ".settings"))
    log = open(root / "lab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
         "--allow-root", "--LabApp.news_url=", "--LabApp.extension_manager=readonly",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180                  # a busy machine starts it slowly
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{(root / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def browser(chromium):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def menu(page: Page, *path: str) -> None:
    """Click through JupyterLab's menu bar, e.g. menu(page, "Run", "Run All Cells")."""
    page.locator(".lm-MenuBar-itemLabel").get_by_text(path[0], exact=True).click()
    for item in path[1:]:
        page.locator(".lm-Menu-itemLabel").get_by_text(item, exact=True).click()


def run_lesson(browser, lab: str, name: str) -> Page:
    """Open a lesson, clear its stored outputs, Run All Cells, and wait until every code cell has run."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{lab}/lab/workspaces/{Path(name).stem}/tree/{name}?reset&token={TOKEN}")   # only this tab
    expect(page.locator(".jp-Notebook")).to_be_visible(timeout=60_000)
    kernel_idle(page)
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt")
    menu(page, "Edit", "Clear Outputs of All Cells")
    expect(prompts.filter(has_text=re.compile(r"\[\d+\]"))).to_have_count(0)             # no stored counts
    menu(page, "Run", "Run All Cells")
    deadline = time.monotonic() + 90
    while True:
        texts = prompts.all_inner_texts()
        if texts and all(t.strip() not in ("[ ]:", "[*]:", "") for t in texts):
            break
        if time.monotonic() > deadline:
            page.screenshot(path=ARTIFACTS / f"{Path(name).stem}_timeout.png")
            raise AssertionError(f"{name}: cells still running or not run after 90 s: {texts}")
        time.sleep(0.5)
    page.screenshot(path=ARTIFACTS / f"{Path(name).stem}_run_all.png", full_page=True)
    return page


def assert_no_errors(page: Page, name: str) -> None:
    """No error text anywhere, no widget shown as its text repr (IntSlider(value=...)), kernel idle."""
    text = page.locator(".jp-Notebook").inner_text()
    for error in ERROR_TEXTS:
        assert error not in text, f"{name}: '{error}' appears in the notebook"
    outputs = "\n".join(page.locator(".jp-OutputArea").all_inner_texts())
    repr_ = WIDGET_REPR.search(outputs)
    assert repr_ is None, f"{name}: a widget shows as its text repr: {repr_ and repr_[0]}"
    kernel_idle(page)


def kernel_idle(page: Page) -> None:
    expect(page.locator(".jp-StatusBar-Widget").get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible(
        timeout=60_000)


def drag_slider(page: Page, slider, dx: int) -> None:
    """Drag a slider's handle by dx pixels, as a user would, and wait for the kernel to answer."""
    handle = slider.locator(".noUi-handle")
    box = handle.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + dx, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    kernel_idle(page)


def test_parameter_calculator_reacts_to_its_sliders(browser, lab):
    page = run_lesson(browser, lab, "02_factorized_embeddings.ipynb")
    calculator = page.locator(".jp-OutputArea-output .widget-vbox").filter(has_text="embedding E").first
    expect(calculator).to_be_visible()
    sliders = calculator.locator(".widget-slider")
    expect(sliders).to_have_count(4)
    expect(calculator.locator("select")).to_have_count(1)
    vocab = sliders.filter(has_text="vocab V")
    readout, counts = vocab.locator(".widget-readout"), calculator.locator(".widget-output")
    before, counts_before = readout.inner_text(), counts.inner_text()
    assert "V*E + E*H" in counts_before
    vocab.scroll_into_view_if_needed()
    page.screenshot(path=ARTIFACTS / "02_parameter_calculator_before.png")
    drag_slider(page, vocab, 120)
    expect(readout).not_to_have_text(before)
    V = int(readout.inner_text().replace(",", ""))
    expect(counts).to_contain_text(f"V*H = {V * 768 / 1e6:8.2f}M")        # H stays at 768
    page.screenshot(path=ARTIFACTS / "02_parameter_calculator_after.png")
    assert_no_errors(page, "lesson 02")
    page.close()


def test_masking_explorer_reacts_to_its_sliders(browser, lab):
    page = run_lesson(browser, lab, "04_pretraining_objectives.ipynb")
    explorer = page.locator(".jp-OutputArea-output .widget-vbox").filter(has_text="mask rate").first
    expect(explorer).to_be_visible()
    expect(explorer.locator(".widget-slider")).to_have_count(3)
    rate = explorer.locator(".widget-slider").filter(has_text="mask rate")
    readout, view = rate.locator(".widget-readout"), explorer.locator(".widget-html")
    before, view_before = readout.inner_text(), view.inner_text()
    assert "real tokens, budget" in view_before
    rate.scroll_into_view_if_needed()
    page.screenshot(path=ARTIFACTS / "04_masking_explorer_before.png")
    drag_slider(page, rate, 150)
    expect(readout).not_to_have_text(before)
    n_real = int(re.search(r"(\d+) real tokens", view_before).group(1))
    budget = max(1, round(n_real * float(readout.inner_text())))
    expect(view).to_contain_text(f"{n_real} real tokens, budget {budget},")
    page.screenshot(path=ARTIFACTS / "04_masking_explorer_after.png")
    assert_no_errors(page, "lesson 04")
    page.close()


def test_a_student_version_with_its_pieces_written_runs_and_every_check_says_right(browser, lab):
    page = run_lesson(browser, lab, FILLED_IN)
    name = f"student {STUDENT_LESSON} filled in"
    assert_no_errors(page, name)
    lesson = read_notebook(ROOT / "notebooks" / STUDENT_LESSON)
    pieces = CHECK_CALL.findall("\n".join(c.source for c in lesson.cells if c.cell_type == "code"))
    assert pieces, f"{STUDENT_LESSON} checks no piece"
    outputs = "\n".join(page.locator(".jp-OutputArea").all_inner_texts())
    for piece in pieces:                 # pieces.py: "<piece>: right: matches the package on 3 random ..."
        said = re.findall(rf"^{piece}: .*$", outputs, re.MULTILINE)
        assert said, f"{name}: no verdict line for the piece {piece}"
        assert all(re.match(rf"{piece}: right: matches the package on \d+ random inputs", s) for s in said), (
            f"{name}: {said}")
    page.close()


@pytest.fixture(scope="module", autouse=True)
def artifacts_dir():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
