"""`python -m minialbert figures` re-runs the lessons that draw the figures."""

import pytest

from minialbert.figures import FIGURE_LESSONS, ROOT, make_figures
from minialbert.plots import figure_dir
from minialbert.scale import current_scale


def test_every_figure_lesson_exists():
    missing = [lesson for lesson in FIGURE_LESSONS if not (ROOT / "notebooks" / lesson).exists()]
    assert not missing, f"FIGURE_LESSONS names lessons that do not exist: {missing}"


def test_make_figures_rewrites_the_files():
    lesson = "02_factorized_embeddings.ipynb"
    files = [figure_dir(current_scale("ci")) / f"{name}{ext}" for name in FIGURE_LESSONS[lesson]
             for ext in (".png", ".json")]
    assert files[0].parent == ROOT / "assets" / "figures" / "ci"   # never the committed course figures
    before = {f: f.stat().st_mtime_ns if f.exists() else 0 for f in files}
    written = make_figures(current_scale("ci"), lessons=[lesson], timeout=300)  # a hang: retried
    assert written == files
    assert all(f.stat().st_mtime_ns > before[f] for f in files)


def test_unknown_lesson_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="lesson .*99_nothing.ipynb not found"):
        make_figures(current_scale("ci"), lessons=["99_nothing.ipynb"])
