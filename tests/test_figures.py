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


def _drawn(fig):
    """The figure drawn once, so legends and axes have their final extents (in pixels)."""
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _legends_stay_off_the_data_and_in_the_figure(fig):
    renderer = _drawn(fig)
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends, "no legend drawn"
    figure_box = fig.bbox.padded(1)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.bbox), f"a legend covers the data of {ax.get_title()!r}"
        assert figure_box.contains(box.x0, box.y0) and figure_box.contains(box.x1, box.y1), (
            "a legend is cut off by the figure's edge")


def test_pretraining_panels_show_the_gain_beside_labelled_baselines():
    import matplotlib.pyplot as plt

    from minialbert.plots import plot_history

    train = [{"step": s, "split": "train", "mlm_loss": 8.3 if s < 5 else 6.0 - s / 1000, "sop_loss": 0.69}
             for s in range(1, 301)]
    valid = [{"step": s, "split": "valid", "mlm_loss": 6.1 - s / 1000, "mask_loss": 6.4 - s / 1000,
              "mask_accuracy": 0.066 + s / 20000, "mask_ci95": [0.06 + s / 20000, 0.072 + s / 20000],
              "kept_accuracy": 0.8, "mlm_accuracy": 0.15, "sop_accuracy": 0.55} for s in (100, 200, 300)]
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))             # LiveCurves' size, the smallest used
    ax_loss, ax_mask, ax_other = plot_history(train + valid, axes, baselines={
        "unigram_mask_loss": 6.2, "mask": {"unigram": 0.066, "neighbour": 0.153}})
    fig.tight_layout()
    assert all(ax.get_xlabel() == "training step" for ax in axes)
    assert "nats" in ax_loss.get_ylabel() and ax_mask.get_ylabel() == "[MASK] accuracy (%)"
    lines = {line.get_label(): line for line in ax_mask.get_lines()}
    for name, value in (("unigram", 6.6), ("neighbour-count", 15.3)):
        line = next(line for label, line in lines.items() if label.startswith(f"{name} baseline"))
        assert list(line.get_ydata()) == pytest.approx([value, value])
    low, high = ax_mask.get_ylim()
    assert low == 0 and 15.3 < high < 25, "the [MASK] axis ends just above the highest baseline"
    assert ax_loss.get_ylim()[1] < 8.3 and ax_loss.get_ylim()[0] < 5.7 < 6.4 < ax_loss.get_ylim()[1], (
        "the loss axis clips the first steps and shows every later value")
    assert any("above the axis" in line.get_label() for line in ax_loss.get_lines())
    assert any(line.get_label().startswith("chance") for line in ax_other.get_lines())
    _legends_stay_off_the_data_and_in_the_figure(fig)
    plt.close(fig)


def test_layer_transition_legend_sits_outside_both_panels():
    import matplotlib.pyplot as plt

    from minialbert.plots import plot_layer_transitions

    def result(l2):
        return {"layers": [1, 2, 3, 4], "l2": l2, "angle": [10 * x for x in l2], "sequences": 50,
                "l2_ci95": [(x - 0.1, x + 0.1) for x in l2],
                "angle_ci95": [(10 * x - 1, 10 * x + 1) for x in l2],
                "tokens": "all", "standardize": False}

    names = ["albert-sop", "albert-share-attention", "albert-share-ffn", "albert-share-none", "bert-sop"]
    ax_l2, ax_angle = plot_layer_transitions({name: result([5 - i, 3, 2 + i / 4, 1 + i]) for i, name in
                                              enumerate(names)})
    assert ax_l2.get_xlabel() == ax_angle.get_xlabel() == "layer l"
    assert "degrees" in ax_angle.get_ylabel() and "L2" in ax_l2.get_ylabel()
    legend = ax_angle.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == names
    assert "50 sequences" in legend.get_title().get_text()
    _legends_stay_off_the_data_and_in_the_figure(ax_l2.figure)
    plt.close(ax_l2.figure)
