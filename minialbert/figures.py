"""Regenerate the course figures: re-run, top to bottom, the lessons that draw them.

Each figure is drawn by exactly one lesson, which saves NAME.png and the numbers behind it in
NAME.json under plots.figure_dir(scale): assets/figures at course scale, assets/figures/<scale>
otherwise. Re-running that lesson in a fresh kernel at a scale is the one way the figures are
made, so `python -m minialbert figures` and the committed notebooks cannot disagree. The
notebooks themselves are not modified.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .plots import ROOT, figure_dir
from .scale import ENV_VAR, Scale

# lesson -> the figures it writes under assets/figures (without extension)
FIGURE_LESSONS = {
    "01_tokenizer.ipynb": ["tokenizer_vocab_sizes"],
    "02_factorized_embeddings.ipynb": ["parameters_vs_embedding_size"],
    "03_attention_and_sharing.ipynb": ["parameters_vs_depth"],
    "04_pretraining_objectives.ipynb": ["ngram_span_lengths"],
    "05_pretrain_your_albert.ipynb": ["pretraining_curves"],
    "06_layer_smoothness.ipynb": ["layer_transitions", "layer_transitions_training",
                                  "layer_transitions_sharing"],
    "07_finetuning_and_fast_adaptation.ipynb": ["learning_curve"],
    "08_nsp_vs_sop_ablation.ipynb": ["nsp_vs_sop"],
    "10_triton_fused_attention.ipynb": ["attention_roofline"],
}


def make_figures(scale: Scale, lessons: list[str] | None = None, timeout: int = 3600) -> list[Path]:
    """Execute the figure-drawing lessons at `scale` in fresh kernels; returns the figure files."""
    notebooks = ROOT / "notebooks"
    if not notebooks.is_dir():
        raise FileNotFoundError(f"{notebooks} not found: figures are made from a clone of the repository")
    lessons = lessons or list(FIGURE_LESSONS)
    for lesson in lessons:
        if not (notebooks / lesson).exists():
            raise FileNotFoundError(f"lesson {notebooks / lesson} not found; known lessons: "
                                    f"{', '.join(FIGURE_LESSONS)}")
    return [f for lesson in lessons for f in _run_lesson(notebooks / lesson, scale, timeout)]


def _run_lesson(path: Path, scale: Scale, timeout: int) -> list[Path]:
    import nbformat
    from nbclient import NotebookClient

    lesson = path.name
    start = time.perf_counter()
    print(f"[{scale.name}] running {lesson} ...", flush=True)
    for attempt in (1, 2):
        nb = nbformat.read(path, as_version=4)
        try:
            NotebookClient(nb, timeout=timeout, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute(
                env={**os.environ, ENV_VAR: scale.name})    # the lesson's first cell reads its scale
            break
        except (TimeoutError, RuntimeError) as e:     # a cell timed out, or the kernel died / never started
            if attempt == 2:                          # (a cell's own error is CellExecutionError: raised)
                raise
            print(f"[{scale.name}] {lesson}: {type(e).__name__}: {e}; again, fresh kernel", flush=True)
    print(f"[{scale.name}] {lesson} done in {time.perf_counter() - start:.0f} s", flush=True)
    written = [figure_dir(scale) / f"{name}{ext}" for name in FIGURE_LESSONS.get(lesson, [])
               for ext in (".png", ".json")]
    missing = [p for p in written if not p.exists()]
    if missing:
        raise RuntimeError(f"{lesson} ran but did not write {', '.join(map(str, missing))}")
    return written
