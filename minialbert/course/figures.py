"""Every committed figure, one function each: `python -m minialbert figures` calls them, no notebook runs.

FIGURES maps a figure's name to a function -> (figure, numbers) and the parts of the scale it reads (its
name, its data, its zoo, its lesson sizes, the figures' folder with a committed JSON), or nothing. It
computes the numbers from what ships with the repository (the code, the course corpus, the zoo: never
trained here) or, for a figure whose numbers come from a long separate command, reads them from that
command's committed JSON (READS_COMMITTED says which command recomputes them). It draws them with a
`draw_*` function below, and the lesson that teaches the figure draws it with the same function, from
numbers it computes in view.
make_figures saves NAME.png and the numbers as NAME.json under --out (default plots.figure_dir(scale):
assets/figures at course scale, assets/figures/<scale> otherwise).
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt

from .lessons import LessonSizes, Smoothness, lesson_sizes
from .plots import ROOT, figure_dir, plot_history, plot_layer_transitions, plot_learning_curve, save_figure
from .scale import Data, Models, Scale

if TYPE_CHECKING:
    from .experiments.zoo import Zoo

# figures whose numbers come from a command too long for `figures`: it redraws them from its JSON
READS_COMMITTED = {
    "learning_curve": "lesson 07 (its fine-tuning runs)",
    "nsp_vs_sop": "python -m minialbert ablation",
    "model_speed": "python benchmarks/model_speed.py",
}


def _committed(name: str, folder: Path) -> dict:
    path = folder / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: `figures` redraws {name} from it; "
                                f"{READS_COMMITTED[name]} writes it there")
    return json.loads(path.read_text())


# ------------------------------------------------------------------ lesson 01: vocabulary size
def vocab_sweep(train_sentences: list[str], valid_sentences: list[str], sizes) -> list[dict]:
    """Lesson 01's experiment: a unigram SentencePiece model per size, measured on the valid split.

    SentencePiece trains outside Python's lock, so one thread per core trains that many models at once;
    each model is the same bytes as when trained alone (training is deterministic)."""
    from ..tokenizer import UNK_ID, Tokenizer, normalize

    def train_timed(vocab_size: int):
        start = time.perf_counter()
        return Tokenizer.train(train_sentences, vocab_size=vocab_size), time.perf_counter() - start

    with ThreadPoolExecutor(max_workers=min(len(sizes), os.cpu_count() or 1)) as pool:
        trained = list(pool.map(train_timed, sizes))
    valid_words = [w for s in valid_sentences for w in normalize(s).split()]
    results = []
    for vocab_size, (model, seconds) in zip(sizes, trained):
        ids = [i for s in valid_sentences for i in model.encode(s)]
        whole = sum(len(model.encode(w)) == 1 for w in valid_words)
        results.append({"vocab_size": vocab_size, "tokens_per_word": len(ids) / len(valid_words),
                        "whole_words": whole / len(valid_words), "unknown": ids.count(UNK_ID) / len(ids),
                        "train_seconds": seconds})
    return results


def draw_tokenizer_vocab_sizes(numbers: dict):
    results = numbers["results"]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    sizes = [r["vocab_size"] for r in results]
    ax.plot(sizes, [r["tokens_per_word"] for r in results], "o-", label="tokens per word (valid split)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [f"{v:,}" for v in sizes])
    ax.set_xlabel("vocabulary size V")
    ax.set_ylabel("SentencePiece tokens per word")
    ax2 = ax.twinx()
    ax2.plot(sizes, [100 * r["whole_words"] for r in results], "s--", color="tab:orange",
             label="words kept whole (%)")
    ax2.set_ylabel("words kept whole (%)")
    ax.set_title(f"Unigram SentencePiece on the {numbers['corpus']} corpus ({numbers['scale']} scale)")
    fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.85), fontsize=8)
    fig.tight_layout()
    return fig


def tokenizer_vocab_sizes(scale_name: str, data: Data, lesson: LessonSizes):
    from ..corpus import corpus_stats, documents

    splits = {split: documents(data.corpus, split, data.max_documents) for split in ("train", "valid")}
    results = vocab_sweep([s for d in splits["train"] for s in d.sentences],
                          [s for d in splits["valid"] for s in d.sentences],
                          lesson.tokenizers.vocab_sizes)
    numbers = {"description": f"Unigram SentencePiece models trained on the {data.corpus} train split, "
                              "measured on the valid split",
               "scale": scale_name, "corpus": data.corpus, "corpus_train": corpus_stats(splits["train"]),
               "corpus_valid": corpus_stats(splits["valid"]), "results": results}
    return draw_tokenizer_vocab_sizes(numbers), numbers


# ------------------------------------------------------------------ lessons 02 and 03: parameters
# the paper's Table 3 (ALBERT-base), millions as printed: E -> (not-shared, all-shared)
PAPER_TABLE_3 = {64: (87, 10), 128: (89, 12), 256: (93, 16), 768: (108, 31)}


def draw_parameters_vs_embedding_size(numbers: dict):
    Es = numbers["E"]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for sharing, colour in (("none", "tab:blue"), ("all", "tab:orange")):
        ax.plot(Es, [n / 1e6 for n in numbers["ours"][sharing]], "-", color=colour,
                label=f"ours, {'not-shared' if sharing == 'none' else 'all-shared'}")
        ax.plot(Es, numbers["paper_millions"][sharing], "o", color=colour, mfc="none",
                label="paper (Table 3)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(Es, [str(E) for E in Es])
    ax.set_xlabel("embedding size E")
    ax.set_ylabel("parameters (millions)")
    ax.set_title("ALBERT-base (12 layers, H=768)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def parameters_vs_embedding_size():
    from ..config import AlbertConfig
    from ..costs import count_parameters

    base, Es = AlbertConfig.preset("albert-base"), list(PAPER_TABLE_3)
    ours = {s: [count_parameters(base.replace(embedding_size=E, sharing=s,
                                              embedding_projection=E != base.hidden_size)) for E in Es]
            for s in ("none", "all")}
    numbers = {"description": "ALBERT-base encoder parameters by embedding size E and sharing (ours: "
                              "count_parameters; paper: Table 3, millions as printed)",
               "E": Es, "ours": ours,
               "paper_millions": {s: [PAPER_TABLE_3[E][k] for E in Es]
                                  for k, s in enumerate(("none", "all"))}}
    return draw_parameters_vs_embedding_size(numbers), numbers


SHARING_LABELS = {"none": "not-shared (E=128)", "ffn": "shared-FFN", "attention": "shared-attention",
                  "all": "all-shared (ALBERT)"}


def draw_parameters_vs_depth(numbers: dict):
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for s, c in numbers["parameters"].items():
        ax.plot(numbers["layers"], [n / 1e6 for n in c], "o-", ms=3, label=SHARING_LABELS[s])
    ax.set_xlabel("layers")
    ax.set_ylabel("encoder parameters (millions)")
    ax.set_title("ALBERT-base widths (H=768, E=128)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def parameters_vs_depth():
    from ..config import AlbertConfig
    from ..costs import count_parameters

    base, depths = AlbertConfig.preset("albert-base"), [1, 2, 3, 4, 6, 8, 12, 16, 24]
    counts = {s: [count_parameters(base.replace(num_layers=L, sharing=s)) for L in depths]
              for s in SHARING_LABELS}
    numbers = {"description": "encoder parameters (count_parameters) of ALBERT-base widths by depth and "
                              "sharing",
               "layers": depths, "parameters": counts}
    return draw_parameters_vs_depth(numbers), numbers


# ------------------------------------------------------------------ lesson 04: span lengths
def draw_ngram_span_lengths(numbers: dict):
    fig, ax = plt.subplots(figsize=(6, 3.6))
    width = 0.2
    colours = ["black", "tab:blue", "tab:orange", "tab:green"]
    for k, ((name, p), colour) in enumerate(zip(numbers["shares"].items(), colours)):
        ax.bar([n + (k - 1.5) * width for n in (1, 2, 3)], p, width, label=name, color=colour,
               alpha=0.35 if k == 0 else 0.85, edgecolor=colour)
    ax.set_xticks([1, 2, 3])
    ax.set_xlabel("span length n (whole words)")
    ax.set_ylabel("share of spans")
    ax.set_title(f"n-gram masking: span lengths ({numbers['scale']} scale)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def ngram_span_lengths(scale_name: str, data: Data):
    import random
    from collections import Counter

    from ..masking import MaskingVocab, ngram_mask, ngram_probabilities, official_span_lengths
    from ..pretraining_data import unmasked_ids
    from ..tokenizer import CLS_ID, SEP_ID
    from .data import course_pretraining_data, course_tokenizer

    vocab = MaskingVocab.from_tokenizer(course_tokenizer(data))
    train_sop = course_pretraining_data("sop", "train", data)
    step = max(1, len(train_sop) // 3000)
    sample = [unmasked_ids(train_sop[i]).tolist() for i in range(0, len(train_sop), step)]
    rng_ours, rng_official = random.Random(0), random.Random(0)
    ours = Counter(s.words for ids in sample for s in ngram_mask(ids, vocab, rng_ours).spans)
    official = Counter(n for ids in sample for n in official_span_lengths(ids, vocab, rng_official))
    long_ids = [CLS_ID] + [t for ids in sample[:200] for t in ids if t not in (CLS_ID, SEP_ID)] + [SEP_ID]
    rng_long = random.Random(0)
    long_run = Counter(s.words for _ in range(5) for s in ngram_mask(long_ids, vocab, rng_long).spans)

    def shares(counter):
        total = sum(counter.values())
        return [counter[n] / total for n in (1, 2, 3)]

    rows = {"p(n), the paper": ngram_probabilities(3), "ours, course sequences": shares(ours),
            "official rule, course sequences": shares(official),
            "ours, one very long sequence": shares(long_run)}
    numbers = {"description": "share of masked spans covering n = 1, 2, 3 whole words: the paper's p(n), "
                              "our ngram_mask and the official placement rule on course SOP sequences, and "
                              "ours on one very long sequence",
               "scale": scale_name, "sequences": len(sample), "shares": rows,
               "spans": {"ours": sum(ours.values()), "official": sum(official.values()),
                         "long": sum(long_run.values())}}
    return draw_ngram_span_lengths(numbers), numbers


# ------------------------------------------------------------------ lesson 05: pretraining curves
def draw_pretraining_curves(numbers: dict):
    """Lesson 05's three panels from the saved numbers (the train MLM loss and the held-out records)."""
    final, args = numbers["final"], numbers["args"]
    history = [{"step": step, "split": "train", "mlm_loss": loss} for step, loss in numbers["train_mlm_loss"]]
    history += numbers["valid"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    plot_history(history, axes, baselines={"unigram_mask_loss": final["unigram_mask_loss"],
                                           "mask": {k: final["baselines"][k]["mask"]["accuracy"]
                                                    for k in ("unigram", "neighbour")}})
    fig.suptitle(f"pretraining {numbers['preset']} on the {numbers['corpus']} corpus ({numbers['scale']} "
                 f"scale, {args['steps']} steps x {args['batch_size']})")
    fig.tight_layout()
    return fig


def pretraining_curves(zoo: Zoo):
    """Lesson 05's run is the zoo entry lesson-albert-sop: its metrics and its held-out evaluation (the
    one the lesson computes: the same model, data, baselines and sample)."""
    zoo.load("lesson-albert-sop", progress=False)                 # shipped or built; never trained here
    history = zoo.metrics("lesson-albert-sop")
    args = zoo.entry_args("lesson-albert-sop")
    numbers = {"description": "pretraining metrics of lesson 05's ALBERT (MLM + SOP) with the held-out "
                              "evaluation by position kind and its baselines",
               "scale": zoo.scale_name, "preset": zoo.models.albert_preset, "corpus": zoo.data.corpus,
               "args": {k: getattr(args, k) for k in ("steps", "batch_size", "optimizer", "lr", "warmup")},
               "train_seconds": max(r["seconds"] for r in history if r["split"] == "train"),
               "final": zoo.evaluation("lesson-albert-sop"),
               "valid": [r for r in history if r["split"] == "valid"],
               "train_mlm_loss": [[r["step"], r["mlm_loss"]] for r in history if r["split"] == "train"]}
    return draw_pretraining_curves(numbers), numbers


# ------------------------------------------------------------------ lesson 06: layer-wise smoothness
@lru_cache(maxsize=2)
def _heldout(data: Data, sizes: Smoothness):
    """Lesson 06's held-out text: batches of a fixed seeded sample of test sequences, and their documents."""
    from .data import course_pretraining_data
    from .experiments.analysis import heldout_batches, heldout_documents

    test_data = course_pretraining_data("mlm", "test", data)
    return (heldout_batches(test_data, sizes.sequences, batch_size=sizes.batch_size),
            heldout_documents(test_data, sizes.sequences))


def smoothness_results(named_models: dict, batches, documents, **options) -> dict:
    """name -> LayerTransitions as a dict plus "measures" (curve_measures with 95% intervals from
    resampling the held-out documents): lesson 06's `transitions`, one pass over each model."""
    from .experiments.analysis import document_bootstrap, sequence_transitions, summarize_sequences

    out = {}
    for name, m in named_models.items():
        per_sequence = sequence_transitions(m, batches, **options)       # (2, L, S): one value per sequence
        r = summarize_sequences(per_sequence, **options).to_dict()
        r["measures"] = document_bootstrap(per_sequence, documents)
        out[name] = r
    return out


def smoothness_numbers(results: dict, sources: dict, scale_name: str, documents, **extra) -> dict:
    """The JSON saved beside a lesson 06 figure: definition, data, interval, where every model came from."""
    from .experiments.analysis import DEFINITION, interval_note

    n = next(iter(results.values()))["sequences"]
    return {"definition": DEFINITION, "sequences": n, "interval": interval_note(n), "split": "test",
            "documents": int(documents.unique().numel()),
            "measures_interval": "95% percentile interval over 1,000 resamples of the held-out documents",
            "scale": scale_name, "checkpoints": sources, "results": results, **extra}


@lru_cache(maxsize=16)
def _zoo_result(zoo: Zoo, sizes: Smoothness, name: str) -> dict:
    """One zoo model's smoothness_results entry (kept: several figures read the same model)."""
    batches, documents = _heldout(zoo.data, sizes)
    return smoothness_results({name: zoo.load(name, progress=False)}, batches, documents)[name]


def _zoo_transitions(zoo: Zoo, sizes: Smoothness, names: tuple[str, ...]):
    for name in names:                                  # a missing entry fails before any model runs
        zoo.load(name, progress=False)
    results = {name: _zoo_result(zoo, sizes, name) for name in names}
    sources = {name: zoo.entry_key(name) for name in names}                        # its folder's name
    numbers = smoothness_numbers(results, sources, zoo.scale_name, _heldout(zoo.data, sizes)[1], tokens="all",
                                 standardize=False)
    return plot_layer_transitions(results)[0].figure, numbers


def layer_transitions(zoo: Zoo, sizes: Smoothness):
    return _zoo_transitions(zoo, sizes, ("albert-sop", "bert-sop", "bert-nsp"))


def layer_transitions_deep(zoo: Zoo, sizes: Smoothness):
    return _zoo_transitions(zoo, sizes, ("albert-deep", "bert-deep"))


def layer_transitions_sharing(zoo: Zoo, sizes: Smoothness):
    return _zoo_transitions(zoo, sizes, ("albert-sop", "albert-share-attention", "albert-share-ffn",
                                    "albert-share-none", "bert-sop"))


def draw_layer_transitions_training(numbers: dict):
    """Lesson 06's question 1: albert-sop's L2 curve at a few steps, and the spread of its angle over
    layers 2..L along training beside its held-out [MASK] accuracy."""
    along = {int(s): r for s, r in numbers["along_training"].items()}
    spread = {int(s): m for s, m in numbers["spread_along_training"].items()}
    accuracy = {int(s): a for s, a in numbers["held_out_mask_accuracy"].items()}
    fig, (ax_curves, ax_spread) = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
    shown = [0] + [s for s in along if s][::max(1, len(along) // 4)] + [max(along)]
    colours = plt.cm.viridis([0.9 * i / max(1, len(set(shown)) - 1) for i in range(len(set(shown)))])
    for colour, step in zip(colours, sorted(set(shown))):
        ax_curves.plot(along[step]["layers"], along[step]["l2"], "o-", ms=3, color=colour,
                       label=f"step {step:,}")
    ax_curves.set(xlabel="layer l", ylabel="L2 distance ||h_l - h_(l-1)||",
                  title="albert-sop along training (all tokens)")
    ax_curves.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax_curves.set_ylim(bottom=0)
    ax_curves.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, fontsize=8, frameon=False)
    steps = list(along)
    ax_spread.plot(steps, [spread[s]["angle"]["spread"] for s in steps], "o-", ms=3,
                   label="spread of the angle over layers 2..L (left axis)")
    ax_spread.set(xlabel="training step", ylabel="max - min of the angle, layers 2..L (degrees)",
                  ylim=(0, None), title="how differently the layers move their input")
    twin = ax_spread.twinx()
    twin.plot(list(accuracy), [100 * a for a in accuracy.values()], "s--", ms=3, color="tab:gray",
              label="held-out [MASK] accuracy (right axis)")
    twin.axhline(100 * numbers["held_out_unigram_mask_accuracy"], color="tab:gray", ls=":", lw=1,
                 label="its unigram baseline (right axis)")
    twin.set(ylabel="held-out [MASK] accuracy (%)", ylim=(0, None))
    ax_spread.legend(handles=ax_spread.get_lines() + twin.get_lines(), loc="upper center",
                     bbox_to_anchor=(0.5, -0.15), fontsize=8, frameon=False)
    for ax in (ax_curves, ax_spread):
        ax.grid(alpha=0.3)
    return fig


def initial_model(name: str, models: Models):
    """The weights a zoo entry's run started from: pretrain() seeds, then builds the model."""
    import torch

    from ..model import AlbertForPretraining
    from .experiments import zoo

    torch.manual_seed(zoo.entry(name).seed)
    return AlbertForPretraining(zoo.entry_config(zoo.entry(name), models), sentence_task="sop").eval()


def layer_transitions_training(zoo: Zoo, sizes: Smoothness):
    from ..checkpoint import load_checkpoint
    from .experiments.analysis import curve_measures, layer_transitions

    zoo.load("albert-sop", progress=False)
    batches, documents = _heldout(zoo.data, sizes)
    init_results = smoothness_results({f"{name} at step 0": initial_model(name, zoo.models)
                                       for name in ("albert-sop", "bert-sop")}, batches, documents)
    kept = zoo.checkpoints("albert-sop")
    along = {0: init_results["albert-sop at step 0"]}
    for step, path in kept.items():
        along[step] = layer_transitions(load_checkpoint(path), batches).to_dict()
    accuracy = {r["step"]: r["mask_accuracy"] for r in zoo.metrics("albert-sop")
                if r["split"] == "valid"}
    spread = {step: curve_measures([r["l2"], r["angle"]]) for step, r in along.items()}
    unigram = zoo.evaluation("albert-sop")["baselines"]["unigram"]["mask"]["accuracy"]
    sources = {str(s): p.relative_to(p.parents[2]).as_posix() for s, p in kept.items()}   # <entry>/...
    numbers = smoothness_numbers(
        {"albert-sop": along[max(along)]}, {"albert-sop": sources}, zoo.scale_name, documents, tokens="all",
        standardize=False, along_training={str(s): r for s, r in along.items()},
        spread_along_training={str(s): m for s, m in spread.items()},
        held_out_mask_accuracy={str(s): a for s, a in accuracy.items()},
        held_out_unigram_mask_accuracy=unigram,
        at_initialisation=init_results)
    return draw_layer_transitions_training(numbers), numbers


# ------------------------------------------------------------------ lesson 07: learning curves
LEARNING_CURVE_COLORS = {"albert-sop": "tab:blue", "bert-sop": "tab:orange", "scratch": "tab:green"}


def draw_learning_curve(numbers: dict):
    """Lesson 07's three panels (one accuracy scale), with the long from-scratch run on the first."""
    tasks = numbers["tasks"]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5), sharey=True, layout="constrained")
    for ax, (name, t) in zip(axes, tasks.items()):
        plot_learning_curve(t["points"], "accuracy",
                            {"chance (50%)": 0.5, "bag of words on all labels (reads no word order)":
                             t["bag_of_words"]["accuracy"]}, ax=ax, legend=False,
                            colors=LEARNING_CURVE_COLORS,
                            title=f"{name} ({t['runs'][0]['test']['n']} test examples)")
        ax.tick_params(labelleft=True)                  # every panel keeps its accuracy labels
    first = next(iter(tasks.values()))
    sizes = sorted({p["labels"] for p in first["points"]})
    n_all, long = first["describe"]["sizes"]["train"], numbers["scratch_long"]
    axes[0].plot([n_all], [long["test"]["accuracy"]], "*", ms=14, color=LEARNING_CURVE_COLORS["scratch"],
                 mec="black", label=f"scratch, all {n_all:,} labels, {long['steps']:,} steps (one run)")
    axes[0].set_xticks(sizes + [n_all], [f"{n:,}" for n in sizes + [n_all]])
    entries = {label: handle for ax in axes for handle, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(entries.values(), entries.keys(), loc="outside lower center", ncol=3, fontsize=9)
    return fig


def learning_curve(folder: Path):
    numbers = _committed("learning_curve", folder)
    return draw_learning_curve(numbers), numbers


# ------------------------------------------------------------------ lesson 08: the NSP vs SOP ablation
def nsp_vs_sop(folder: Path):
    from .plots import plot_ablation

    result = _committed("nsp_vs_sop", folder)
    return plot_ablation(result)[0].figure, result


# ------------------------------------------------------------------ lesson 10: the attention roofline
def attention_roofline_numbers(peak_flops: float = 989e12, bandwidth: float = 4.8e12, d: int = 64,
                               seq_lens=(128, 256, 512, 1024, 2048, 4096)) -> dict:
    """HBM bytes moved per head (forward, bf16) by naive and fused attention, and the roofline bound on
    TFLOP/s at a GPU's datasheet numbers (default: H200, dense bf16 and HBM3e; not measured)."""
    Ns = list(seq_lens)
    roofline = {"source": "NVIDIA H200 datasheet: 989 TFLOP/s dense bf16, 4.8 TB/s HBM (not measured)",
                "head_dim": d, "seq_len": Ns, "bytes": {}, "attainable_tflops": {},
                "peak_tflops": peak_flops / 1e12}
    for name, moved in (("naive", lambda N: 2 * (4 * N * d + 4 * N * N)), ("fused", lambda N: 2 * 4 * N * d)):
        roofline["bytes"][name] = [moved(N) for N in Ns]
        roofline["attainable_tflops"][name] = [
            4 * N * N * d / max(4 * N * N * d / peak_flops, moved(N) / bandwidth) / 1e12 for N in Ns]
    return roofline


def draw_attention_roofline(roofline: dict):
    Ns, d = roofline["seq_len"], roofline["head_dim"]
    fig, (ax_bytes, ax_speed) = plt.subplots(1, 2, figsize=(11, 3.8))
    for name, color in (("naive", "C7"), ("fused", "C3")):
        ax_bytes.plot(Ns, [b / 2**20 for b in roofline["bytes"][name]], "o-", color=color, label=name)
        ax_speed.plot(Ns, roofline["attainable_tflops"][name], "o-", color=color, label=name)
    ax_speed.axhline(roofline["peak_tflops"], ls="--", color="k", lw=0.8, label="peak (datasheet)")
    ax_bytes.set(xscale="log", yscale="log", xlabel="sequence length N",
                 ylabel="MiB moved per head (forward)", title=f"HBM traffic, bf16, d={d}")
    ax_speed.set(xscale="log", xlabel="sequence length N", ylabel="TFLOP/s (upper bound)",
                 title="roofline bound at H200 datasheet numbers")
    for ax in (ax_bytes, ax_speed):
        ax.set_xscale("log", base=2)
        ax.set_xticks(Ns, [str(N) for N in Ns])                # the lengths the text uses, not powers of 2
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax_speed.set_ylim(bottom=0)
    fig.tight_layout()
    return fig


def attention_roofline():
    roofline = attention_roofline_numbers()
    return draw_attention_roofline(roofline), roofline


# ------------------------------------------------------------------ benchmarks/model_speed.py
MODEL_SPEED_MEASUREMENTS = ROOT / "assets" / "benchmarks" / "model_speed.json"


def model_speed_points(record: dict) -> dict:
    """The plotted points of benchmarks/model_speed.py's record: parameters and training speed relative
    to its anchor, measured and the paper's."""
    return {name: {k: r[k] for k in ("parameters", "train_speed_vs_anchor", "paper_parameters",
                                     "paper_speed_vs_anchor")} for name, r in record["rows"].items()}


def draw_model_speed(numbers: dict):
    from matplotlib.ticker import FormatStrFormatter

    points = numbers["points"]
    anchor = next(name for name, p in points.items() if p["train_speed_vs_anchor"] == 1.0)
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for name, p in points.items():
        color = "tab:blue" if name.startswith("albert") else "tab:orange"
        ax.scatter(p["parameters"] / 1e6, p["train_speed_vs_anchor"], color=color, s=40, zorder=3)
        ax.scatter(p["paper_parameters"] / 1e6, p["paper_speed_vs_anchor"], facecolors="none",
                   edgecolors=color, s=40, zorder=3)
        ax.annotate(name, (p["parameters"] / 1e6, p["train_speed_vs_anchor"]), fontsize=8,
                    xytext=(4, 4), textcoords="offset points")
    ax.scatter([], [], color="gray", label="measured here (filled)")
    ax.scatter([], [], facecolors="none", edgecolors="gray", label="the paper's Table 2 (open)")
    ax.set(xscale="log", yscale="log", xlabel="parameters (millions, log)",
           ylabel=f"training speed relative to {anchor} (log)",
           title="parameters and training speed do not go together")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FormatStrFormatter("%g"))
        axis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.tick_params(which="minor", labelsize=7)
    ax.axhline(1.0, color="gray", lw=0.8, ls=":")
    ax.legend(fontsize=8)
    return fig


def model_speed():
    """Redrawn from the committed measurements (the same at every scale: the benchmark has none)."""
    if not MODEL_SPEED_MEASUREMENTS.exists():
        raise FileNotFoundError(f"{MODEL_SPEED_MEASUREMENTS} not found; {READS_COMMITTED['model_speed']} "
                                "measures it")
    record = json.loads(MODEL_SPEED_MEASUREMENTS.read_text())
    numbers = {"measurements": str(MODEL_SPEED_MEASUREMENTS.relative_to(ROOT)),
               "points": model_speed_points(record)}
    return draw_model_speed(numbers), numbers


# name -> (a function -> (figure, numbers), the parts of the scale it is given, in order: "name" its
# name, "data" its Data, "zoo" the Zoo bound to it, "lesson" its lesson sizes, "smoothness" lesson 06's
# held-out sample, "folder" its figure folder, whose committed JSON it redraws; none: nothing); the order
# `figures` makes them in
FIGURES = {
    "tokenizer_vocab_sizes": (tokenizer_vocab_sizes, ("name", "data", "lesson")),     # lesson 01
    "parameters_vs_embedding_size": (parameters_vs_embedding_size, ()),               # lesson 02
    "parameters_vs_depth": (parameters_vs_depth, ()),                                 # lesson 03
    "ngram_span_lengths": (ngram_span_lengths, ("name", "data")),                     # lesson 04
    "pretraining_curves": (pretraining_curves, ("zoo",)),                             # lesson 05
    "layer_transitions": (layer_transitions, ("zoo", "smoothness")),                  # lesson 06
    "layer_transitions_training": (layer_transitions_training, ("zoo", "smoothness")),
    "layer_transitions_sharing": (layer_transitions_sharing, ("zoo", "smoothness")),
    "layer_transitions_deep": (layer_transitions_deep, ("zoo", "smoothness")),
    "learning_curve": (learning_curve, ("folder",)),              # lesson 07 (its committed JSON)
    "nsp_vs_sop": (nsp_vs_sop, ("folder",)),                      # lesson 08 (the ablation's JSON)
    "attention_roofline": (attention_roofline, ()),               # lesson 10
    "model_speed": (model_speed, ()),                             # benchmarks/model_speed.py's JSON
}


def make_figures(scale: Scale, only: list[str] | None = None, out: str | Path | None = None) -> list[Path]:
    """Make the figures named in `only` (default: all of FIGURES) at `scale`, each NAME.png and NAME.json
    in `out` (default figure_dir(scale)), printing one line per figure with its seconds. A figure that
    fails (a zoo entry not shipped, say) does not stop the others; the error is raised at the end (the
    figure's own error if it is the only one). Returns the files written."""
    names = list(dict.fromkeys(only or FIGURES))
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"unknown figure {', '.join(unknown)}; the figures: {', '.join(FIGURES)}")
    directory = Path(out) if out is not None else figure_dir(scale)
    from .experiments.zoo import Zoo

    lesson = lesson_sizes(scale)
    given = {"name": scale.name, "data": scale.data, "zoo": Zoo(scale), "lesson": lesson,
             "smoothness": lesson.smoothness, "folder": figure_dir(scale)}
    written, failed, start = [], {}, time.perf_counter()
    for name in names:
        began = time.perf_counter()
        draw, reads = FIGURES[name]
        try:
            fig, numbers = draw(*(given[part] for part in reads))
            png = save_figure(fig, name, numbers, directory)
            plt.close(fig)
        except Exception as e:                   # noqa: BLE001 (reported, raised at the end)
            failed[name] = e
            print(f"{name:30s} failed after {time.perf_counter() - began:6.1f} s: {type(e).__name__}: {e}",
                  flush=True)
            continue
        written += [png, png.with_suffix(".json")]
        print(f"{name:30s} {time.perf_counter() - began:6.1f} s  {png}", flush=True)
    print(f"{len(names) - len(failed)} of {len(names)} figures in {time.perf_counter() - start:.1f} s "
          f"({scale.name} scale) in {directory}", flush=True)
    if len(failed) == 1:
        raise next(iter(failed.values()))
    if failed:
        raise RuntimeError(f"{len(failed)} figures failed: {', '.join(failed)} (reasons above)")
    return written
