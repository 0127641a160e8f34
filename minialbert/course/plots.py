"""Small plotting helpers: live pretraining curves in a notebook, and saving a figure with its numbers."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import offset_copy

from ..download import atomic_write_all
from .scale import Scale


def _trailing_mean(values: list[float], window: int) -> list[float]:
    """Mean of the last `window` values at each point: readable curves, not noisy ones."""
    return [sum(values[max(0, i - window + 1):i + 1]) / len(values[max(0, i - window + 1):i + 1])
            for i in range(len(values))]


_BASELINE_NAMES = {"unigram": "unigram baseline (the most frequent token)",
                   "neighbour": "neighbour-count baseline", "copy_or_unigram": "copy-or-unigram baseline",
                   "two_each_side": "two-each-side baseline (smoothed)"}


def _legend_below(ax) -> None:
    """The axes' legend under its x label (a fixed distance in points, whatever the axes' height),
    outside the data, if it has anything to show."""
    if ax.get_legend_handles_labels()[0]:
        below = offset_copy(ax.transAxes, fig=ax.figure, y=-30, units="points")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=below, fontsize=7,
                  frameon=False)


def plot_history(records: list[dict], axes=None, smooth: int = 20, baselines: dict | None = None):
    """Three panels from pretrain() metrics, each beside the baseline it is read against.

    1. MLM loss (nats): train (smoothed) and held-out, beside the unigram's [MASK] loss if `baselines`
       has "unigram_mask_loss"; the first steps (near ln V) are clipped so the rest is not flattened.
    2. Held-out [MASK] accuracy (%), the one that needs the context, with its 95% interval, beside
       baselines["mask"] = {name: accuracy} ("unigram", "neighbour") as labelled lines; the y range
       ends a little above the highest of them, so the gap shows.
    3. Held-out accuracy (%) of what does not need the context (kept, copyable positions; all
       predicted positions) and of the sentence task, beside its chance (50%).
    Legends sit under the panels; a caller's tight_layout keeps them in the figure.
    """
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    ax_mlm, ax_mask, ax_acc = axes
    for ax in axes:
        ax.clear()
    baselines = baselines or {}
    train = [r for r in records if r["split"] == "train"]
    valid = [r for r in records if r["split"] == "valid"]
    first = {**(train or [{}])[0], **(valid or [{}])[0]}
    task = next((t for t in ("sop", "nsp") if f"{t}_loss" in first or f"{t}_accuracy" in first), None)
    losses = []                                           # what the loss axis must show
    if train:
        steps, smoothed = [r["step"] for r in train], _trailing_mean([r["mlm_loss"] for r in train], smooth)
        later = smoothed[len(smoothed) // 10:] or smoothed    # after the first tenth of the run
        losses += later
        clipped = max(smoothed) > max(later)
        ax_mlm.plot(steps, smoothed, lw=1, label="train, all predicted (smoothed" +
                    (f"; starts at {smoothed[0]:.1f}, above the axis)" if clipped else ")"))
    if valid:
        steps = [r["step"] for r in valid]
        ax_mlm.plot(steps, [r["mlm_loss"] for r in valid], "o--", ms=3, label="held-out, all predicted")
        losses += [r["mlm_loss"] for r in valid]
        if "mask_loss" in valid[0]:
            ax_mlm.plot(steps, [r["mask_loss"] for r in valid], "s-", ms=3,
                        label="held-out, [MASK] positions")
            losses += [r["mask_loss"] for r in valid]
        if "mask_accuracy" in valid[0]:
            line, = ax_mask.plot(steps, [100 * r["mask_accuracy"] for r in valid], "o-", ms=3,
                                 label="model, held-out [MASK] positions")
            if all("mask_ci95" in r for r in valid):
                ax_mask.fill_between(steps, [100 * r["mask_ci95"][0] for r in valid],
                                     [100 * r["mask_ci95"][1] for r in valid], color=line.get_color(),
                                     alpha=0.2, lw=0, label="its 95% interval")
        for key, label, style in (("kept_accuracy", "kept (copyable) positions", "o-"),
                                  ("mlm_accuracy", "all predicted positions", "o-"),
                                  (f"{task}_accuracy", f"{str(task).upper()} accuracy", "s-")):
            if key in valid[0] and valid[0][key] is not None:
                ax_acc.plot(steps, [100 * r[key] for r in valid], style, ms=3, label=label)
    if "unigram_mask_loss" in baselines:
        ax_mlm.axhline(baselines["unigram_mask_loss"], color="gray", ls=":",
                       label="unigram baseline, [MASK] positions")
        losses.append(baselines["unigram_mask_loss"])
    for name, value in baselines.get("mask", {}).items():
        ax_mask.axhline(100 * value, color="gray" if name == "unigram" else "tab:brown",
                        ls=":" if name == "unigram" else "--", lw=1.2, label=_BASELINE_NAMES.get(name, name))
    if task:
        ax_acc.axhline(50, color="black", ls=":", lw=0.8, label=f"chance for {task.upper()} (50%)")
    losses = [v for v in losses if math.isfinite(v)]      # a diverged run logs inf or nan
    if losses:
        low, high = min(losses), max(losses)
        ax_mlm.set_ylim(low - 0.1 * (high - low) - 0.05, high + 0.1 * (high - low) + 0.05)
    shown = [v for line in ax_mask.get_lines() for v in line.get_ydata()]
    shown += [v for band in ax_mask.collections for path in band.get_paths() for v in path.vertices[:, 1]]
    ax_mask.set_ylim(0, max(1.25 * max(shown, default=0), 1))
    ax_mlm.set(xlabel="training step", ylabel="cross-entropy (nats per token)", title="MLM loss")
    ax_mask.set(xlabel="training step", ylabel="[MASK] accuracy (%)",
                title="held-out [MASK] accuracy: does it read the context?")
    ax_acc.set(xlabel="training step", ylabel="accuracy (%)", ylim=(0, 100),
               title="held-out: copying" + (f" and {task.upper()}" if task else ""))
    for ax in axes:
        ax.grid(alpha=0.3)
        _legend_below(ax)
    return axes


class LiveCurves:
    """A pretrain() callback that redraws the loss and accuracy curves in place while training runs.

    Usage: `curves = LiveCurves(); pretrain(..., options=RunOptions(callbacks=[curves]))`. Redraws every
    `every` train steps and at every evaluation; outside a notebook it only collects the records.
    """

    def __init__(self, every: int = 25, smooth: int = 20):
        self.every, self.smooth, self.records = every, smooth, []
        self.fig, self.axes = plt.subplots(1, 3, figsize=(14, 3.6))
        plt.close(self.fig)                   # shown through a display handle, not at the cell's end
        self._handle = None

    def __call__(self, record: dict) -> None:
        self.records.append(record)
        if record["split"] == "valid" or record["step"] % self.every == 0:
            self.draw()

    def draw(self) -> None:
        plot_history(self.records, self.axes, self.smooth)
        self.fig.tight_layout()
        try:
            from IPython.display import display
        except ImportError:
            return
        if self._handle is None:
            self._handle = display(self.fig, display_id=True)
        else:
            self._handle.update(self.fig)


ROOT = Path(__file__).resolve().parents[2]


def figure_dir(scale: Scale) -> Path:
    """Where lessons save figures: assets/figures at course scale (the committed ones),
    assets/figures/<scale> otherwise, so a ci or gpu run never overwrites the course figures."""
    return ROOT / "assets" / "figures" / scale.figure_subdir


def save_figure(fig, name: str, numbers: dict, directory: str | Path) -> Path:
    """Save fig as NAME.png and the numbers behind it as NAME.json in `directory` (a lesson passes
    figure_dir(scale)), written together: both or (a full disk, say) neither of the new ones."""
    directory = Path(directory)
    png = io.BytesIO()
    fig.savefig(png, dpi=120, bbox_inches="tight", format="png")
    atomic_write_all({directory / f"{name}.json": (json.dumps(numbers, indent=2) + "\n").encode(),
                      directory / f"{name}.png": png.getvalue()})
    return directory / f"{name}.png"


# The paper's axis ranges for its figure (BERT-large vs ALBERT-large, 24 layers: the paper's Figure 1).
PAPER_LAYER_TRANSITION_AXES = {"layers": (1, 24), "l2": (0, 18), "angle": (0, 45)}


def plot_layer_transitions(results: dict[str, dict], paper_axes: bool = False, axes=None):
    """The paper's two panels: L2 distance and angle (degrees) between the input and output of each
    layer, one line per model with its 95% band. results: name -> LayerTransitions.to_dict().

    paper_axes=True uses the paper's ranges (layers 1-24, L2 0-18, angle 0-45), meant for the
    official 24-layer checkpoints; otherwise the axes fit our values, from 0 (a layer that leaves its
    input unchanged). One legend for both panels, right of them, outside the data; a figure made here
    uses constrained layout, which keeps it in the figure.
    """
    if not results:
        raise ValueError("plot_layer_transitions needs at least one result (name -> LayerTransitions dict)")
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    ax_l2, ax_angle = axes
    sequences = {r["sequences"] for r in results.values()}
    for name, r in results.items():
        label = name if len(sequences) == 1 else f"{name} ({r['sequences']} sequences)"
        for ax, key in ((ax_l2, "l2"), (ax_angle, "angle")):
            line, = ax.plot(r["layers"], r[key], "o-", ms=3, label=label)
            low, high = zip(*r[f"{key}_ci95"])
            ax.fill_between(r["layers"], low, high, color=line.get_color(), alpha=0.2, lw=0)
    first = next(iter(results.values()))
    which = "[CLS] only" if first["tokens"] == "cls" else "all non-padding tokens"
    note = f"{which}{', standardized' if first['standardize'] else ''}"
    ax_l2.set(xlabel="layer l", ylabel="L2 distance ||h_l - h_(l-1)||", title=f"L2 distance ({note})")
    ax_angle.set(xlabel="layer l", ylabel="angle between h_(l-1) and h_l (degrees)",
                 title=f"angle ({note})")
    for ax, key in ((ax_l2, "l2"), (ax_angle, "angle")):
        if paper_axes:
            ax.set_xlim(PAPER_LAYER_TRANSITION_AXES["layers"][0] - 0.5,
                        PAPER_LAYER_TRANSITION_AXES["layers"][1] + 0.5)
            ax.set_ylim(*PAPER_LAYER_TRANSITION_AXES[key])
        else:
            ax.set_ylim(bottom=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))             # layers are whole numbers
        ax.grid(alpha=0.3)
    band = (f"95% bands over {sequences.pop()} sequences" if len(sequences) == 1 else "95% bands")
    ax_angle.legend(loc="upper left", bbox_to_anchor=(1.03, 1), borderaxespad=0, fontsize=8,
                    title=f"model\n({band})", title_fontsize=8)
    return axes


def plot_learning_curve(points: list[dict], metric: str, baselines: dict[str, float] | None = None, ax=None,
                        title: str = "", colors: dict[str, str] | None = None, legend: bool = True):
    """A few-labels learning curve: the metric against the number of labelled examples (log axis), one
    line per start at the mean over seeds, its band from the worst to the best seed. points:
    finetune.curve_summary(); baselines: name -> value drawn as horizontal lines (chance, bag of words);
    colors: start -> colour, so that a start keeps its colour across panels. legend: True puts the
    legend outside the axes, on the right, where it hides no data; False leaves it to the caller (one
    legend for a figure of several panels). The y range is left to matplotlib, so panels made with
    sharey=True keep one scale."""
    if not points:
        raise ValueError("plot_learning_curve needs at least one point (finetune.curve_summary)")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    for start in dict.fromkeys(p["start"] for p in points):
        mine = sorted((p for p in points if p["start"] == start), key=lambda p: p["labels"])
        n = [p["labels"] for p in mine]
        line, = ax.plot(n, [p["mean"] for p in mine], "o-", ms=4, color=(colors or {}).get(start),
                        label=f"{start} (mean of {mine[0]['seeds']} seeds, band: min-max)")
        ax.fill_between(n, [p["min"] for p in mine], [p["max"] for p in mine], color=line.get_color(),
                        alpha=0.2, lw=0)
    for i, (name, value) in enumerate((baselines or {}).items()):
        ax.axhline(value, color="grey", ls=(":" if i else "--"), lw=1, label=name)
    ax.set_xscale("log", base=2)
    sizes = sorted({p["labels"] for p in points})
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])                   # the sizes run, not powers of 2
    ax.minorticks_off()
    percent = metric in ("accuracy", "f1")                           # fractions, shown in %
    if percent:
        ax.yaxis.set_major_formatter(lambda value, _: f"{100 * value:.3g}%")
    ax.set(xlabel="labelled training examples (log scale)",
           ylabel=f"test {metric}" + (" (%)" if percent else ""), title=title)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, fontsize=8)
    return ax


ARM_COLORS = {"mlm": "tab:grey", "nsp": "tab:orange", "sop": "tab:blue", "sop-balanced": "tab:green",
              "random init": "black"}


def plot_ablation(result: dict, axes=None):
    """The NSP vs SOP ablation (ablation.run_ablation's result) in four panels, each beside the baseline
    it is read against, each with its legend outside the data. Returns the axes in reading order:
    (1) the cross-evaluation matrix: one dot per arm and seed with its 95% interval, the bar at the mean
    over seeds, chance over the sentence columns, the segment-lengths rule over the SOP column and the
    random encoder over each column it was read on; (2) downstream test accuracy, mean over seeds with
    the worst-best range, beside chance; (3) SOP and (4) NSP accuracy of each arm's own head over
    pretraining: one line per arm at the mean over seeds, its band from the worst to the best seed,
    beside chance; (3) and (4) share one y scale."""
    if axes is None:
        fig, grid = plt.subplots(2, 2, figsize=(17, 9), layout="constrained",
                                 gridspec_kw={"width_ratios": [1.5, 1]})
        grid[1, 1].sharey(grid[1, 0])                       # SOP and NSP curves: one accuracy scale
        axes = [grid[0, 0], grid[0, 1], grid[1, 0], grid[1, 1]]
    ax_matrix, ax_down, ax_sop, ax_nsp = axes
    _plot_cross_evaluation(ax_matrix, result)
    _plot_downstream(ax_down, result)
    for ax, task in ((ax_sop, "sop"), (ax_nsp, "nsp")):
        _plot_own_head_curves(ax, result, task)
    return axes


def _percent_axis(ax) -> None:
    ax.yaxis.set_major_formatter(lambda value, _: f"{100 * value:.3g}%")


def _seeds_label(counts) -> str:
    """"1 seed", "3 seeds", "2-3 seeds"."""
    low, high = min(counts), max(counts)
    return f"{low} seed" if high == 1 else f"{low} seeds" if low == high else f"{low}-{high} seeds"


def _legend_outside(ax, arms) -> None:
    """The legend right of the axes, the arms first, then the baselines."""
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i].split(" ")[0] not in arms)
    ax.legend([handles[i] for i in order], [labels[i] for i in order], loc="upper left",
              bbox_to_anchor=(1.02, 1), borderaxespad=0, fontsize=8)


# The cross-evaluation's columns: (name, a run's cell or None)
_CROSS_EVALUATION_COLUMNS = [("[MASK] acc.", lambda r: r["mlm"]["mlm"]["mask"]),
                             ("NSP (own head)", lambda r: r["nsp"]["head"]),
                             ("SOP (own head)", lambda r: r["sop"]["head"]),
                             ("SOP, length-matched", lambda r: r["sop"]["head_matched"]),
                             ("NSP (probe)", lambda r: r["nsp"]["probe"]),
                             ("SOP (probe), length-matched", lambda r: r["sop"]["probe_matched"])]


def _plot_cross_evaluation(ax, result: dict) -> None:
    """Panel 1: every arm's seeds on every held-out set, with chance, the lengths rule and the floor."""
    columns, arms = _CROSS_EVALUATION_COLUMNS, result["arms"]
    width = 0.8 / len(arms)
    for j, arm in enumerate(arms):
        runs = [r for r in result["runs"] if r["arm"] == arm]
        for c, (_, get) in enumerate(columns):
            cells = [get(r) for r in runs if get(r) is not None]
            if not cells:
                continue
            x = c - 0.4 + width * (j + 0.5)
            mean = sum(m["accuracy"] for m in cells) / len(cells)
            ax.bar(x, mean, width * 0.9, color=ARM_COLORS.get(arm), alpha=0.35,
                   label=f"{arm} ({_seeds_label([len(runs)])})" if c == 0 else None)
            for k, m in enumerate(cells):
                dx = (k - (len(cells) - 1) / 2) * width * 0.25
                ax.errorbar(x + dx, m["accuracy"], [[m["accuracy"] - m["ci95"][0]],
                            [m["ci95"][1] - m["accuracy"]]], fmt="o", ms=3, lw=1, color=ARM_COLORS.get(arm))
    floor = next((r for r in result["runs"] if r["arm"] == "random init"), None)
    label = "random encoder (untrained): the floor"
    for c, (_, get) in enumerate(columns if floor else []):
        if get(floor) is not None:
            ax.hlines(get(floor)["accuracy"], c - 0.45, c + 0.45, color=ARM_COLORS["random init"],
                      lw=2, label=label)
            label = None                                            # one legend entry
    ax.hlines(0.5, 0.5, len(columns) - 0.5, color="grey", ls="--", lw=1, label="chance for NSP and SOP (50%)")
    lengths = result["shortcut"]["sop"]["all"]["accuracy"]
    ax.hlines(lengths, 1.55, 2.45, color="tab:red", ls=":", lw=1.5,
              label=f"SOP from segment lengths alone, all pairs ({lengths:.1%})")
    ax.set_xticks(range(len(columns)), [name for name, _ in columns], rotation=20, ha="right", fontsize=8)
    ax.set(ylabel="held-out accuracy (%)", ylim=(0, 1),
           title="cross-evaluation on the held-out sets\n"
                 "(bars: mean over seeds; dots: each seed with its 95% interval)")
    _percent_axis(ax)
    _legend_outside(ax, arms)


def _plot_downstream(ax, result: dict) -> None:
    """Panel 2: each arm's fine-tuned test accuracy per task, mean over seeds and worst to best."""
    arms = result["arms"]
    width = 0.8 / len(arms)
    tasks = list(dict.fromkeys(d["task"] for d in result["downstream"]))
    for t, task in enumerate(tasks):
        for j, arm in enumerate(arms):
            stat = result["summary"][arm].get(task)
            if stat is None:
                continue
            x = t - 0.4 + width * (j + 0.5)
            ax.bar(x, stat["mean"], width * 0.9, color=ARM_COLORS.get(arm), alpha=0.6,
                   label=f"{arm} (mean of {_seeds_label([stat['seeds']])})" if t == 0 else None)
            ax.plot([x, x], [stat["min"], stat["max"]], color="black", lw=1.5,
                    label="worst to best seed" if t == 0 and j == 0 else None)
    ax.axhline(0.5, color="grey", ls="--", lw=1, label="chance (50%)")
    ax.set_xticks(range(len(tasks)), tasks, fontsize=8)
    ax.set(ylim=(0, 1), ylabel="test accuracy (%)",
           title=f"downstream: fine-tuned on {result['downstream_labels']} labels")
    _percent_axis(ax)
    if ax.get_legend_handles_labels()[0]:
        _legend_outside(ax, arms)


def _plot_own_head_curves(ax, result: dict, task: str) -> None:
    """Panels 3 and 4: the task's held-out accuracy over pretraining of each arm trained on it."""
    arms = result["arms"]
    by_arm: dict[str, dict[int, list[dict]]] = {}           # arm -> step -> one point per seed
    for curve in result["curves"].values():
        for p in curve:
            if task in p:                                   # an arm's curve holds its own task
                by_arm.setdefault(p["arm"], {}).setdefault(p["step"], []).append(p)
    for arm in [a for a in arms if a in by_arm] + [a for a in by_arm if a not in arms]:
        steps = sorted(by_arm[arm])
        values = [[p[task]["accuracy"] for p in by_arm[arm][s]] for s in steps]
        line, = ax.plot(steps, [sum(v) / len(v) for v in values], "o-", ms=3, color=ARM_COLORS.get(arm),
                        label=f"{arm} arm ({_seeds_label([len(v) for v in values])})")
        ax.fill_between(steps, [min(v) for v in values], [max(v) for v in values], color=line.get_color(),
                        alpha=0.2, lw=0)
    first = next((p[task] for curve in result["curves"].values() for p in curve if task in p), None)
    if first:
        ax.axhline(first["chance"], color="grey", ls="--", lw=1, label=f"chance ({first['chance']:.1%})")
        n = f" ({first['n']:,} held-out pairs per evaluation)"
    else:
        n = ""
    ax.axhline(0.6, color="grey", ls="-.", lw=0.8, label="60%")
    ax.set(xlabel="pretraining step", ylabel=f"held-out {task.upper()} accuracy (%)",
           title=f"{task.upper()} of the arms trained on it, their own head{n}\n"
                 "(line: mean over seeds; band: worst to best seed)")
    _percent_axis(ax)
    ax.grid(alpha=0.3)
    _legend_outside(ax, arms)
