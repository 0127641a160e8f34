"""Small plotting helpers: live pretraining curves in a notebook, and saving a figure with its numbers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import matplotlib.pyplot as plt

from .download import atomic_write
from .scale import Scale, current_scale


def plot_history(records: list[dict], axes=None, smooth: int = 20):
    """Two panels from pretrain() metrics: losses (train smoothed, held-out) and held-out accuracy."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    ax_loss, ax_acc = axes
    ax_loss.clear()
    ax_acc.clear()
    train = [r for r in records if r["split"] == "train"]
    valid = [r for r in records if r["split"] == "valid"]
    if train:
        steps = [r["step"] for r in train]
        for key, label in (("mlm_loss", "MLM (train)"), ("sop_loss", "SOP (train)"),
                           ("nsp_loss", "NSP (train)")):
            if key in train[0]:
                values = [r[key] for r in train]
                avg = [sum(values[max(0, i - smooth + 1):i + 1]) / len(values[max(0, i - smooth + 1):i + 1])
                       for i in range(len(values))]                   # trailing mean: readable, not noisy
                ax_loss.plot(steps, avg, label=label)
    if valid:
        steps = [r["step"] for r in valid]
        ax_loss.plot(steps, [r["mlm_loss"] for r in valid], "o--", label="MLM (held-out)")
        for key, label in (("mlm_accuracy", "MLM accuracy"), ("sop_accuracy", "SOP accuracy"),
                           ("nsp_accuracy", "NSP accuracy")):
            if key in valid[0]:
                ax_acc.plot(steps, [r[key] for r in valid], "o-", label=label)
    ax_loss.set(xlabel="step", ylabel="loss (nats)", title="pretraining loss")
    ax_acc.set(xlabel="step", ylabel="held-out accuracy", title="held-out accuracy", ylim=(0, 1))
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=8)
    return axes


class LiveCurves:
    """A pretrain() callback that redraws the loss and accuracy curves in place while training runs.

    Usage: `curves = LiveCurves(); pretrain(..., callbacks=[curves])`. Redraws every `every`
    train steps and at every evaluation; outside a notebook it only collects the records.
    """

    def __init__(self, every: int = 25, smooth: int = 20):
        self.every, self.smooth, self.records = every, smooth, []
        self.fig, self.axes = plt.subplots(1, 2, figsize=(11, 3.6))
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


ROOT = Path(__file__).resolve().parents[1]


def figure_dir(scale: Scale | None = None) -> Path:
    """Where lessons save figures: assets/figures at course scale (the committed ones),
    assets/figures/<scale> otherwise, so a ci or gpu run never overwrites the course figures."""
    scale = current_scale(scale)
    figures = ROOT / "assets" / "figures"
    return figures if scale.name == "course" else figures / scale.name


def save_figure(fig, name: str, numbers: dict, directory: str | Path | None = None) -> Path:
    """Save fig as NAME.png and the numbers behind it as NAME.json (in figure_dir() by default),
    each written atomically."""
    directory = Path(directory) if directory is not None else figure_dir()
    png = io.BytesIO()
    fig.savefig(png, dpi=120, bbox_inches="tight", format="png")
    atomic_write(directory / f"{name}.json", (json.dumps(numbers, indent=2) + "\n").encode())
    return atomic_write(directory / f"{name}.png", png.getvalue())
