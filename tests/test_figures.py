"""`python -m minialbert figures`: one function per committed figure, no notebook runs, no zoo training."""

import json

import pytest

from minialbert.course.commands import main
from minialbert.course.experiments import zoo
from minialbert.course.figures import FIGURES, READS_COMMITTED, ROOT

# committed figures no `figures` run can make: a GPU's benchmark (attention_<gpu>, gpu_check_<gpu>_*) and
# lesson 06's official checkpoints (downloaded)
NOT_IN_FIGURES = ("gpu_check_", "attention_", "layer_transitions_official")


def test_every_committed_figure_has_a_function():
    committed = {p.stem for p in (ROOT / "assets" / "figures").glob("*.png")}
    made_elsewhere = {n for n in committed if n.startswith(NOT_IN_FIGURES) and n not in FIGURES}
    assert committed - made_elsewhere <= set(FIGURES), (
        f"committed figures without a function in minialbert.course.figures.FIGURES: "
        f"{sorted(committed - made_elsewhere - set(FIGURES))}")
    assert set(READS_COMMITTED) <= set(FIGURES)


def test_figures_only_writes_each_png_and_json_into_out(tmp_path, capsys):
    # computed from the code (parameters_vs_depth), redrawn from committed JSON (learning_curve, nsp_vs_sop,
    # model_speed: course scale, the JSON in assets/figures is read, nothing is written there)
    names = ["parameters_vs_depth", "learning_curve", "nsp_vs_sop", "model_speed"]
    before = {p: p.stat().st_mtime_ns for p in (ROOT / "assets" / "figures").glob("*.*")}
    assert main(["figures", "--scale", "course", "--quiet", "--out", str(tmp_path),
                 *[a for n in names for a in ("--only", n)]]) == 0
    expected = sorted(f"{n}{e}" for n in names for e in (".json", ".png"))
    assert sorted(p.name for p in tmp_path.iterdir()) == expected
    assert all((tmp_path / f"{n}.png").stat().st_size > 10_000 for n in names)
    for name in ("learning_curve", "nsp_vs_sop"):          # the numbers are the committed ones
        assert (json.loads((tmp_path / f"{name}.json").read_text())
                == json.loads((ROOT / "assets" / "figures" / f"{name}.json").read_text()))
    assert json.loads((tmp_path / "parameters_vs_depth.json").read_text())["parameters"]["all"][0] > 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:len(names)]] == names        # one line per figure, its seconds
    assert all(" s " in line for line in lines[:len(names)])
    assert before == {p: p.stat().st_mtime_ns for p in (ROOT / "assets" / "figures").glob("*.*")}


def test_figures_at_ci_scale(tmp_path):
    # one that reads the corpus and the tokenizer (built at ci scale in seconds)
    assert main(["figures", "--scale", "ci", "--quiet", "--only", "ngram_span_lengths",
                 "--out", str(tmp_path)]) == 0
    numbers = json.loads((tmp_path / "ngram_span_lengths.json").read_text())
    assert numbers["scale"] == "ci" and all(abs(sum(p) - 1) < 1e-9 for p in numbers["shares"].values())


def test_a_missing_zoo_entry_is_one_line_and_trains_nothing(tmp_path, monkeypatch, capsys):
    def missing(self, names=None):
        return [{"name": n, "state": "missing", "steps_done": 0, "steps": 20000, "minutes_left": 60.0,
                 "dir": str(tmp_path / "nowhere"), "about": ""} for n in names]

    monkeypatch.setattr(zoo.Zoo, "status", missing)
    monkeypatch.setattr(zoo.Zoo, "_train", lambda *a, **k: pytest.fail("figures trained a zoo entry"))
    assert main(["figures", "--scale", "course", "--quiet", "--only", "pretraining_curves",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "zoo entry 'lesson-albert-sop'" in err[0], err
    assert "python -m minialbert zoo --only lesson-albert-sop" in err[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_unknown_figure_lists_the_figures(capsys):
    assert main(["figures", "--only", "no_such_figure"]) == 2
    err = capsys.readouterr().err
    assert "unknown figure no_such_figure" in err and "layer_transitions" in err


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

    from minialbert.course.plots import plot_history

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

    from minialbert.course.plots import plot_layer_transitions

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


def _ablation_result(seeds: int = 3) -> dict:
    """A dict shaped like ablation.run_ablation's result, with made-up numbers: only the drawing is tested.
    Seed 0 of the NSP arm kept only its last two checkpoints, as in the course run."""
    def m(accuracy, chance=0.5, n=1000):
        return {"accuracy": accuracy, "ci95": [accuracy - 0.03, accuracy + 0.03], "n": n, "chance": chance,
                "predicted_shares": [0.5, 0.5]}

    def run(arm, seed, entry, mask, nsp, sop):            # nsp, sop: the own head's accuracy, or None
        return {"arm": arm, "seed": seed, "entry": entry, "mlm": {"mlm": {"mask": m(mask)}},
                "nsp": {"head": nsp and m(nsp), "head_matched": nsp and m(nsp - 0.01), "probe": m(0.54),
                        "probe_matched": m(0.53)},
                "sop": {"head": sop and m(sop), "head_matched": sop and m(sop - 0.04), "probe": m(0.55),
                        "probe_matched": m(0.51)}}

    arms, steps, tasks = ["mlm", "nsp", "sop"], [1000, 2000, 3000, 4000], ["shuffled-words", "next-sentence"]
    runs = [run("random init", 0, None, 0.0, None, None)]
    curves, downstream = {}, []
    for arm in arms:
        for seed in range(seeds):
            entry = f"albert-{arm}" + (f"-seed{seed}" if seed else "")
            runs.append(run(arm, seed, entry, 0.07 + seed / 100, 0.6 + seed / 100 if arm == "nsp" else None,
                            0.57 + seed / 100 if arm == "sop" else None))
            if arm != "mlm":
                kept = steps[-2:] if (arm, seed) == ("nsp", 0) else steps
                own = (m(0.5 + s / 40000 + seed / 100, 0.501) if arm == "nsp"   # its own head, own task
                       else m(0.45 + s / 50000 + seed / 50, 0.552) for s in kept)
                curves[entry] = [{"arm": arm, "step": s, arm: value} for s, value in zip(kept, own)]
            downstream += [{"task": t, "start": arm, "seed": seed, "test": m(0.5 + seed / 10)} for t in tasks]
    summary = {arm: {t: {"mean": 0.6, "min": 0.5, "max": 0.7, "seeds": seeds} for t in tasks} for arm in arms}
    return {"arms": arms, "seeds": list(range(seeds)), "runs": runs, "curves": curves,
            "downstream": downstream, "summary": summary, "downstream_labels": 256,
            "shortcut": {t: {"all": m(0.55 if t == "sop" else 0.52), "length_matched": m(0.5)}
                         for t in ("nsp", "sop")}}


def test_ablation_curves_draw_one_line_per_arm_and_task_with_a_band_and_labelled_chance():
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    from minialbert.course.plots import plot_ablation

    result = _ablation_result()
    ax_matrix, ax_down, ax_sop, ax_nsp = plot_ablation(result)
    assert ax_sop.get_ylim() == ax_nsp.get_ylim(), "the SOP and NSP panels share one accuracy scale"
    for ax, task, label, chance in ((ax_sop, "sop", "sop arm (3 seeds)", 0.552),
                                    (ax_nsp, "nsp", "nsp arm (2-3 seeds)", 0.501)):
        arms = [line for line in ax.get_lines() if " arm (" in line.get_label()]
        assert [line.get_label() for line in arms] == [label], "a panel draws the arms trained on its task"
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bands) == len(arms), "one band per arm, not one line per seed"
        curves = [c for name, c in result["curves"].items() if name.startswith(f"albert-{task}")]
        values = [[p[task]["accuracy"] for c in curves for p in c if p["step"] == s] for s in (1000, 4000)]
        assert list(arms[0].get_ydata()[[0, -1]]) == pytest.approx([sum(v) / len(v) for v in values])
        band, seen = bands[0].get_paths()[0].vertices[:, 1], values[0] + values[1]
        assert (band.min(), band.max()) == pytest.approx((min(seen), max(seen))), "worst to best seed"
        line = next(line for line in ax.get_lines() if line.get_label().startswith("chance"))
        assert list(line.get_ydata()) == pytest.approx([chance] * 2) and f"{chance:.1%}" in line.get_label()
        assert ax.get_xlabel() == "pretraining step" and ax.get_ylabel().endswith("(%)")
    labels = ax_matrix.get_legend_handles_labels()[1]
    assert "SOP from segment lengths alone, all pairs (55.0%)" in labels
    assert any(label.startswith("random encoder") for label in labels)
    chance = next(c for c in ax_matrix.collections if c.get_label().startswith("chance"))
    assert chance.get_segments()[0][:, 0].tolist() == [0.5, 5.5], "chance spans the sentence columns only"
    assert "chance (50%)" in ax_down.get_legend_handles_labels()[1] and ax_down.get_ylabel().endswith("(%)")
    _legends_stay_off_the_data_and_in_the_figure(ax_matrix.figure)
    plt.close(ax_matrix.figure)


def test_learning_curve_panels_keep_one_y_scale_and_their_legend_outside():
    import matplotlib.pyplot as plt

    from minialbert.course.plots import plot_learning_curve

    def points(low, high):
        return [{"start": s, "labels": n, "seeds": 3, "mean": (low + high) / 2, "min": low, "max": high}
                for s in ("albert-sop", "scratch") for n in (16, 64)]

    fig, (wide, narrow) = plt.subplots(1, 2, figsize=(12, 4), sharey=True, layout="constrained")
    plot_learning_curve(points(0.55, 0.85), "accuracy", {"chance (50%)": 0.5}, ax=wide)
    plot_learning_curve(points(0.49, 0.52), "accuracy", {"chance (50%)": 0.5}, ax=narrow, legend=False)
    assert wide.get_ylim() == narrow.get_ylim() and wide.get_ylim()[0] < 0.49 and wide.get_ylim()[1] > 0.85
    assert narrow.get_legend() is None
    assert wide.get_ylabel() == "test accuracy (%)" and wide.yaxis.get_major_formatter()(0.55, 0) == "55%"
    assert wide.get_xlabel() == "labelled training examples (log scale)"
    _legends_stay_off_the_data_and_in_the_figure(fig)
    plt.close(fig)
