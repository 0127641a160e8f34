"""The course's diagrams, drawn by code: the model, sharing, n-gram masking, NSP vs SOP, the kernel's tiles.

Each diagram is one function that returns a matplotlib Figure; `python -m minialbert.course.diagrams`
redraws them all into assets/diagrams/ (seconds), and a lesson shows one with `show("model")`, which
reads the committed file. They are SVG: vector, so they stay sharp at any zoom in JupyterLab, VS Code
and on GitHub; their text stays text (searchable, and a third of the size of text drawn as outlines,
which matters once a lesson's output embeds them), set in DejaVu Sans where the reader has it and
else in the next sans-serif font of the list matplotlib writes; and the same code gives the same
bytes (fixed ids, no date), so a redraw changes a file only when its picture changed. The masking
diagram runs the package's own `ngram_mask` with a fixed seed on a fixed sentence pair, so the
picture is what the code does.

Coordinates: each figure has one axes filling it, in inches (x to the right, y up), so sizes and
font sizes (points, 72 to the inch) can be reasoned about together.

The module is longer than the 450 lines the style allows because it is drawing code: mostly
coordinates and labels, read one diagram at a time, that share one palette and one set of helpers.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.textpath import TextPath

from .scale import SCALES, Data

ROOT = Path(__file__).resolve().parents[2]
DIAGRAM_DIR = ROOT / "assets" / "diagrams"
FORMAT = "svg"

TITLE, BODY, SMALL = 15, 11, 9.5                   # font sizes (points)
MONO = "monospace"                                 # DejaVu Sans Mono (matplotlib ships it), else the viewer's
INK, GREY, LIGHT = "#222222", "#666666", "#eeeeee"
EMBEDDING, PROJECTION, LAYER = "#cfe2f3", "#d9d2e9", "#fce5cd"
ATTENTION, FFN = "#6fa8dc", "#f6b26b"
MLM_HEAD, SOP_HEAD = "#d9ead3", "#ead1dc"
# the masking colours of lesson 04's "See it" cell
REPLACED = {"mask": "#f4a6a6", "random": "#f9d38c", "kept": "#a8dba8"}
SPAN_COLOURS = ["#1f4e79", "#7b3294", "#8c510a", "#01665e", "#b2182b"]


# ------------------------------------------------------------------------------------------ helpers

def _canvas(width: float, height: float, title: str, subtitle: str | None = None):
    """A figure of width x height inches whose axes use inches, with a title (and subtitle) on top."""
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    ax.text(width / 2, height - 0.38, title, ha="center", va="center", fontsize=TITLE, weight="bold",
            color=INK)
    if subtitle:
        ax.text(width / 2, height - 0.72, subtitle, ha="center", va="center", fontsize=SMALL, color=GREY)
    return fig, ax


def _text_width(text: str, size: float = BODY, family: str | None = None) -> float:
    """Width in inches of one line of text at `size` points."""
    from matplotlib.font_manager import FontProperties
    props = FontProperties(family=family or matplotlib.rcParams["font.family"], size=size)
    return TextPath((0, 0), text, size=size, prop=props).get_extents().width / 72


def _box(ax, x: float, y: float, w: float, h: float, text: str = "", face: str = "white",
         edge: str = INK, size: float = BODY, lw: float = 1.2, ls: str = "-", round_: float = 0.06,
         gid: str | None = None, **text_kw):
    """A rounded box with its lower-left corner at (x, y) and centred text."""
    style = f"round,pad=0,rounding_size={round_}" if round_ else "square,pad=0"
    patch = FancyBboxPatch((x, y), w, h, boxstyle=style, facecolor=face,
                           edgecolor=edge, linewidth=lw, linestyle=ls)
    if gid:
        patch.set_gid(gid)
    ax.add_patch(patch)
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
                color=text_kw.pop("color", INK), **text_kw)
    return patch


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], label: str | None = None,
           color: str = INK, ls: str = "-", bend: float = 0.0, lw: float = 1.3, label_dx: float = 0.12,
           label_dy: float = 0.0, size: float = SMALL, ha: str = "left", head: str = "-|>", **text_kw):
    """An arrow from start to end (bent by `bend`, matplotlib's arc3 rad), with a label beside its middle."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=head, mutation_scale=14, color=color, linewidth=lw,
                                 linestyle=ls, connectionstyle=f"arc3,rad={bend}", shrinkA=0, shrinkB=0))
    if label:
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        ax.text(mx + label_dx, my + label_dy, label, ha=ha, va="center", fontsize=size,
                color=text_kw.pop("color", color), **text_kw)


def _frame(ax, x: float, y: float, w: float, h: float, label: str, edge: str = GREY, face: str = "none",
           size: float = SMALL, ls: str = "--"):
    """A dashed frame around a group of boxes, its label just inside the top-left corner."""
    _box(ax, x, y, w, h, face=face, edge=edge, ls=ls, lw=1.1, round_=0.12)
    ax.text(x + 0.12, y + h - 0.12, label, ha="left", va="top", fontsize=size, color=edge, style="italic")


def _shape(ax, x: float, y: float, text: str, ha: str = "left"):
    """A tensor shape beside an arrow, in monospace."""
    ax.text(x, y, text, ha=ha, va="center", fontsize=SMALL, family=MONO, color=GREY)


# -------------------------------------------------------------------------------------------- model

def draw_model() -> Figure:
    """The whole ALBERT: factorized embedding, one shared layer applied L times, the MLM and SOP heads."""
    W, H = 11.5, 15.0
    fig, ax = _canvas(W, H, "ALBERT for pretraining: the whole model",
                      "B = batch, N = sequence length, V = vocabulary, E = embedding size, H = hidden size, "
                      "L = layers    (ALBERT-base: V = 30,000, E = 128, H = 768, L = 12)")
    cx, bw = 5.9, 5.6                                   # the trunk's centre and box width
    left = cx - bw / 2
    _draw_embedding(ax, cx, left, bw)
    top = _draw_shared_layer(ax, cx, left, bw)
    _draw_heads(ax, cx, left, top)
    return fig


def _draw_embedding(ax, cx: float, left: float, bw: float) -> None:
    """draw_model's bottom: the token ids and the factorized embedding, up to the (B, N, H) input."""
    # input
    _box(ax, left, 0.35, bw, 0.6, "token ids   [CLS] the cat sat . [SEP] it purred . [SEP]", face=LIGHT)
    _arrow(ax, (cx, 0.95), (cx, 1.55))
    _shape(ax, cx + 0.15, 1.17, "(B, N)")

    # factorized embedding
    _frame(ax, left - 0.35, 1.38, bw + 0.7, 3.07, "factorized embedding:\nV·E + E·H parameters, not V·H",
           edge="#3d85c6")
    _box(ax, left, 1.55, bw, 0.95, "", face=EMBEDDING)
    ax.text(cx, 2.22, "look up each id in the word-embedding table  V × E", ha="center", va="center",
            fontsize=BODY, weight="bold")
    ax.text(cx, 1.82, "+ position (512 × E) + token type (2 × E), then LayerNorm(E)", ha="center",
            va="center", fontsize=SMALL)
    _arrow(ax, (cx, 2.5), (cx, 3.2))
    _shape(ax, cx + 0.15, 2.85, "(B, N, E)")
    _box(ax, left, 3.2, bw, 0.6, "projection E → H  (a Linear layer: an E × H matrix)", face=PROJECTION)
    _arrow(ax, (cx, 3.8), (cx, 5.05))
    _shape(ax, cx + 0.15, 4.75, "(B, N, H)")


def _draw_shared_layer(ax, cx: float, left: float, bw: float) -> float:
    """draw_model's middle: the one layer and its L-fold loop; returns the y of its top."""
    # one shared layer, applied L times
    ly, lh = 5.05, 3.55
    _box(ax, left - 0.35, ly, bw + 0.7, lh, face=LAYER, edge="#e69138", lw=1.6, round_=0.12)
    ax.text(left - 0.2, ly + lh - 0.14,
            "one transformer layer (post-LN): its weights are shared by all L steps", ha="left", va="top",
            fontsize=SMALL, style="italic", color="#b45f06")
    steps = [("multi-head self-attention  (query, key, value, output: H × H each)", ATTENTION),
             ("add the input, LayerNorm(H)", "white"),
             ("feed-forward  H → 4H → H, GELU", FFN),
             ("add, LayerNorm(H)", "white")]
    boxes_y = [ly + 0.3 + 0.72 * k for k in range(len(steps))]     # bottom to top, in the order they run
    for (text, face), by in zip(steps, boxes_y):
        _box(ax, left, by, bw, 0.5, text, face=face, size=SMALL + 0.5)
    for lower, upper in zip(boxes_y, boxes_y[1:]):
        _arrow(ax, (cx, lower + 0.5), (cx, upper), lw=1.0)
    # the loop: the layer's output goes back in as its input, L times
    rx = left + bw + 0.7
    _arrow(ax, (left + bw + 0.35, ly + lh - 0.55), (left + bw + 0.35, ly + 0.45), color="#b45f06", lw=2.2,
           bend=-0.55)
    ax.text(rx + 0.95, ly + lh / 2 + 0.25, "× L", ha="center", va="center", fontsize=20, weight="bold",
            color="#b45f06")
    ax.text(rx + 0.95, ly + lh / 2 - 0.35, "the same\nweights\nagain", ha="center", va="center",
            fontsize=SMALL, color="#b45f06")
    return ly + lh


def _draw_heads(ax, cx: float, left: float, top: float) -> None:
    """draw_model's top: the hidden states split to the MLM and SOP heads, their losses, and the tie."""
    # hidden states split to the two heads
    split_y = top + 0.55
    ax.plot([cx, cx], [top, split_y], color=INK, lw=1.3)
    _shape(ax, cx + 0.15, top + 0.3, "(B, N, H)  last hidden state")
    mlm_x, sop_x, hw = 0.7, 6.35, 4.45                  # head columns: left edges and width
    mlm_c, sop_c = mlm_x + hw / 2, sop_x + hw / 2
    ax.plot([mlm_c, sop_c], [split_y, split_y], color=INK, lw=1.3)
    h0 = split_y + 0.75
    _arrow(ax, (mlm_c, split_y), (mlm_c, h0))
    _shape(ax, mlm_c + 0.12, split_y + 0.37, "every position (B, N, H)")
    _arrow(ax, (sop_c, split_y), (sop_c, h0))
    _shape(ax, sop_c + 0.12, split_y + 0.37, "[CLS] = position 0: (B, H)")

    # MLM head
    _frame(ax, mlm_x - 0.2, h0 - 0.2, hw + 0.4, 2.75, "MLM head", edge="#38761d")
    _box(ax, mlm_x, h0, hw, 0.55, "dense H → E, GELU, LayerNorm(E)", face=MLM_HEAD, size=SMALL + 0.5)
    _arrow(ax, (mlm_c, h0 + 0.55), (mlm_c, h0 + 1.15))
    _shape(ax, mlm_c + 0.12, h0 + 0.85, "(B, N, E)")
    _box(ax, mlm_x, h0 + 1.15, hw, 0.7, "", face=MLM_HEAD)
    for y, line in ((h0 + 1.65, "decoder E → V: the word-embedding"),
                    (h0 + 1.37, "table itself (transposed) + a bias")):
        ax.text(mlm_c, y, line, ha="center", va="center", fontsize=SMALL + 0.5)
    _arrow(ax, (mlm_c, h0 + 1.85), (mlm_c, h0 + 2.85))
    _shape(ax, mlm_c + 0.12, h0 + 2.2, "(B, N, V) logits")

    # SOP head
    _frame(ax, sop_x - 0.2, h0 - 0.2, hw + 0.4, 2.75, "SOP head", edge="#a64d79")
    _box(ax, sop_x, h0, hw, 0.55, "pooler (in AlbertModel): Linear(H, H), tanh", face=SOP_HEAD,
         size=SMALL + 0.5)
    _arrow(ax, (sop_c, h0 + 0.55), (sop_c, h0 + 1.15))
    _shape(ax, sop_c + 0.12, h0 + 0.85, "(B, H)")
    _box(ax, sop_x, h0 + 1.15, hw, 0.7, "classifier: Linear(H, 2)", face=SOP_HEAD, size=SMALL + 0.5)
    _arrow(ax, (sop_c, h0 + 1.85), (sop_c, h0 + 2.85))
    _shape(ax, sop_c + 0.12, h0 + 2.2, "(B, 2) logits")

    # losses
    ly2 = h0 + 2.85
    _box(ax, mlm_x, ly2, hw, 0.55, "cross-entropy at the masked positions", face="white", size=SMALL + 0.5)
    _box(ax, sop_x, ly2, hw, 0.55, "cross-entropy: in order or swapped?", face="white", size=SMALL + 0.5)
    ax.text(cx, ly2 + 0.95, "loss = MLM + SOP", ha="center", va="center", fontsize=BODY + 1, weight="bold")
    _arrow(ax, (mlm_c, ly2 + 0.55), (cx - 1.1, ly2 + 0.8), lw=1.0)
    _arrow(ax, (sop_c, ly2 + 0.55), (cx + 1.1, ly2 + 0.8), lw=1.0)

    # the tie: the decoder is the embedding table
    tie_x = 0.3
    ax.plot([mlm_x, tie_x, tie_x, left], [h0 + 1.5, h0 + 1.5, 2.02, 2.02], color="#3d85c6", lw=1.8, ls="--")
    ax.text(tie_x - 0.08, (h0 + 1.5 + 2.02) / 2, "tied: one V × E tensor, used twice", rotation=90,
            ha="right", va="center", fontsize=SMALL, color="#3d85c6")


# ------------------------------------------------------------------------------------------ sharing

SHARING = [("all", "all-shared", "ALBERT's default"), ("attention", "shared-attention", ""),
           ("ffn", "shared-FFN", ""), ("none", "not-shared", "as in BERT")]
# The paper's Table 4, ALBERT-base with E = 128: parameters and the average of its five downstream scores.
PAPER_TABLE_4 = {"all": ("12M", 80.1), "attention": ("64M", 81.7), "ffn": ("38M", 80.2),
                 "none": ("89M", 81.6)}


def _shades(cmap_name: str, n: int) -> list[str]:
    cmap = matplotlib.colormaps[cmap_name]
    return [matplotlib.colors.to_hex(cmap(0.3 + 0.55 * i / max(n - 1, 1))) for i in range(n)]


def draw_sharing(layers: int = 6) -> Figure:
    """The paper's Table 4 strategies as stacks of layers: blocks with the same weights share a colour."""
    from ..config import AlbertConfig
    from ..costs import count_parameters

    W, H = 13.0, 7.9
    fig, ax = _canvas(W, H, "Cross-layer parameter sharing (the paper's Table 4)",
                      f"{layers} layers drawn (ALBERT-base has 12). "
                      "Blocks of one colour are one set of weights.")
    attn_shades, ffn_shades = _shades("Blues", layers), _shades("Oranges", layers)
    col_w, gap, row_h, row_gap = 2.55, 0.45, 0.5, 0.14
    x0 = W - 4 * col_w - 3 * gap - 0.3             # room on the left for the layer labels
    y0 = 2.0
    for c, (key, name, note) in enumerate(SHARING):
        x = x0 + c * (col_w + gap)
        ax.text(x + col_w / 2, y0 + layers * (row_h + row_gap) + 0.75, name, ha="center", va="center",
                fontsize=BODY + 1, weight="bold")
        ax.text(x + col_w / 2, y0 + layers * (row_h + row_gap) + 0.43,
                f'sharing="{key}"' + (f"  ({note})" if note else ""), ha="center", va="center",
                fontsize=SMALL, family=MONO, color=GREY)
        bw = (col_w - 0.1) / 2
        for i in range(layers):
            y = y0 + i * (row_h + row_gap)
            shared_attn, shared_ffn = key in ("all", "attention"), key in ("all", "ffn")
            a_face = ATTENTION if shared_attn else attn_shades[i]
            f_face = FFN if shared_ffn else ffn_shades[i]
            _box(ax, x, y, bw, row_h, "attn" if shared_attn else f"attn {i + 1}", face=a_face, size=SMALL,
                 color="white" if not shared_attn and i >= layers * 0.6 else INK)
            _box(ax, x + bw + 0.1, y, bw, row_h, "FFN" if shared_ffn else f"FFN {i + 1}", face=f_face,
                 size=SMALL, color="white" if not shared_ffn and i >= layers * 0.6 else INK)
            if c == 0:
                ax.text(x - 0.15, y + row_h / 2, f"layer {i + 1}", ha="right", va="center", fontsize=SMALL,
                        color=GREY)
        ours = count_parameters(AlbertConfig.preset("albert-base", sharing=key)) / 1e6
        paper_params, paper_avg = PAPER_TABLE_4[key]
        sets = f"attention: {'1 set' if key in ('all', 'attention') else 'L sets'}, " \
               f"FFN: {'1 set' if key in ('all', 'ffn') else 'L sets'}"
        lines = [(sets, INK),
                 (f"ALBERT-base, E = 128: {ours:.1f}M parameters", INK),
                 (f"paper: {paper_params}, average score {paper_avg}", GREY)]
        for k, (line, colour) in enumerate(lines):
            ax.text(x + col_w / 2, y0 - 0.35 - 0.3 * k, line, ha="center", va="center", fontsize=SMALL - 0.5,
                    color=colour)
    ax.text(W / 2, 0.45, "Parameters: our count_parameters (embeddings, projection, layers, pooler). "
            "Paper: Table 4, ALBERT-base, E = 128; average of SQuAD1.1, SQuAD2.0, MNLI, SST-2, RACE.",
            ha="center", va="center", fontsize=SMALL - 0.5, color=GREY)
    return fig


# ------------------------------------------------------------------------------------ n-gram masking

# The first two sentences of the paper's abstract, as one [CLS] A [SEP] B [SEP] pretraining input.
MASKING_TEXT = ("Increasing model size when pretraining natural language representations often results in "
                "improved performance on downstream tasks.",
                "However, at some point further model increases become harder due to GPU/TPU memory "
                "limitations and longer training times.")
MASKING_SEED = 30           # a seed whose draw shows spans of 1, 2 and 3 words and all three replacements


def masking_example(seed: int = MASKING_SEED, data: Data = SCALES["course"].data):
    """(pieces, shown, masked) for MASKING_TEXT: the pieces of the course tokenizer of `data` (the shipped one
    of the course scale unless told otherwise, whatever scale a lesson runs at: the picture stays one),
    the pieces the model sees, and `ngram_mask`'s result for `seed`."""
    from ..masking import MaskingVocab, ngram_mask
    from .data import course_tokenizer

    tokenizer = course_tokenizer(data)                               # the shipped tokenizer, checked
    ids, _ = tokenizer.encode_pair(*MASKING_TEXT)
    masked = ngram_mask(ids, MaskingVocab.from_tokenizer(tokenizer), random.Random(seed))
    pieces = [tokenizer.id_to_piece(i) for i in ids]
    return pieces, [tokenizer.id_to_piece(i) for i in masked.input_ids], masked


def replacement(original: str, shown: str) -> str:
    """How a predicted piece was replaced: "mask", "random" or "kept"."""
    return "mask" if shown == "[MASK]" else "kept" if shown == original else "random"


def draw_ngram_masking(seed: int = MASKING_SEED, data: Data = SCALES["course"].data) -> Figure:
    """Whole-word n-gram masking of one sentence pair, as the package's ngram_mask does it with `seed`
    (pieces of the tokenizer of `data`: masking_example)."""
    pieces, shown, masked = masking_example(seed, data)
    words = [p.replace("\u2581", "") if p.startswith("\u2581") else p for p in pieces]
    starts = [p.startswith("\u2581") or p.startswith("[") for p in pieces]
    span_of = {pos: k for k, span in enumerate(masked.spans) for pos in span.positions}
    size, pad, box_h = 10.5, 0.07, 0.36
    widths = [max(_text_width(words[i], size), _text_width(shown[i].replace("\u2581", ""), size)) + 2 * pad
              for i in range(len(pieces))]

    W, margin = 13.0, 1.45
    lines = _wrap_at_words(widths, starts, W - margin - 0.3)

    group_h = 1.75
    H = 1.3 + len(lines) * group_h + 2.85
    fig, ax = _canvas(W, H, "Whole-word n-gram masking, as minialbert.masking.ngram_mask does it",
                      f"the first two sentences of the ALBERT abstract as [CLS] A [SEP] B [SEP], the course "
                      f"tokenizer's pieces, random.Random({seed})")
    for g, line in enumerate(lines):
        top = H - 1.35 - g * group_h
        y_text, y_input = top - 0.75, top - 1.45
        for y, label in ((y_text, "text"), (y_input, "model input")):
            ax.text(margin - 0.15, y + box_h / 2, label, ha="right", va="center", fontsize=SMALL, color=GREY)
        for i, x in line:
            x += margin
            special = pieces[i] in ("[CLS]", "[SEP]")
            k = span_of.get(i)
            _box(ax, x, y_text, widths[i], box_h, words[i], face=LIGHT if special else "white",
                 edge=SPAN_COLOURS[k % len(SPAN_COLOURS)] if k is not None else "#999999",
                 lw=2.2 if k is not None else 0.8, size=size, round_=0)
            if k is None:
                _box(ax, x, y_input, widths[i], box_h, words[i], face=LIGHT if special else "white",
                     edge="#999999", lw=0.8, size=size, round_=0, color=GREY)
            else:
                kind = replacement(pieces[i], shown[i])
                _box(ax, x, y_input, widths[i], box_h, shown[i].replace("\u2581", ""), face=REPLACED[kind],
                     edge=SPAN_COLOURS[k % len(SPAN_COLOURS)], lw=1.2, size=size, round_=0,
                     gid=f"ngram-input-{i}-{kind}")
                ax.annotate("", (x + widths[i] / 2, y_input + box_h), (x + widths[i] / 2, y_text),
                            arrowprops=dict(arrowstyle="-|>", color=GREY, lw=0.8, shrinkA=1, shrinkB=1))
        # brackets over the spans on this line
        on_line = {i: x + margin for i, x in line}
        for k, span in enumerate(masked.spans):
            here = [p for p in span.positions if p in on_line]
            if not here:
                continue
            x_a, x_b = on_line[here[0]], on_line[here[-1]] + widths[here[-1]]
            colour = SPAN_COLOURS[k % len(SPAN_COLOURS)]
            yb = y_text + box_h + 0.1
            ax.plot([x_a, x_a, x_b, x_b], [yb, yb + 0.1, yb + 0.1, yb], color=colour, lw=1.8,
                    gid=f"ngram-span-{k}-n{span.words}-at-{'-'.join(map(str, span.positions))}")
            ax.text((x_a + x_b) / 2, yb + 0.27, f"span {k + 1}: n = {span.words}", ha="center", va="center",
                    fontsize=SMALL, color=colour, weight="bold")

    _draw_masking_rules(ax, pieces, shown, masked)
    return fig


def _wrap_at_words(widths: list[float], starts: list[bool], width: float) -> list[list[tuple[int, float]]]:
    """Pieces of the given widths in lines no wider than `width`, broken only where a word starts (so a
    word is never split): each line a list of (piece index, x from the line's left)."""
    word_w = list(widths)                             # from a word's first piece: the whole word's width
    for i in range(len(widths) - 2, -1, -1):
        if not starts[i + 1]:
            word_w[i] = widths[i] + 0.02 + word_w[i + 1]
    lines, line, x = [], [], 0.0
    for i, w in enumerate(widths):
        gap = 0.13 if starts[i] and line else 0.02 if line else 0.0
        if starts[i] and x + gap + word_w[i] > width:
            lines.append(line)
            line, x, gap = [], 0.0, 0.0
        line.append((i, x + gap))
        x += gap + w
    lines.append(line)
    return lines


def _draw_masking_rules(ax, pieces: list[str], shown: list[str], masked) -> None:
    """draw_ngram_masking's foot: the budget, the span lengths and the replacements, with this draw's."""
    from ..masking import MASK_RATE, ngram_probabilities

    n_real = sum(1 for p in pieces if p not in ("[CLS]", "[SEP]"))
    budget = max(1, round(n_real * MASK_RATE))
    chosen = [p for span in masked.spans for p in span.positions]
    kinds = [replacement(pieces[p], shown[p]) for p in chosen]
    y = 2.25
    ax.text(0.4, y + 0.15, "1. budget", ha="left", va="center", fontsize=BODY, weight="bold")
    ax.text(0.4, y - 0.3, f"{MASK_RATE:.0%} of the {n_real} real pieces:\nround({n_real * MASK_RATE:.2f}) = "
            f"{budget} pieces to predict.\n[CLS] and [SEP] are never picked;\na span never crosses [SEP].\n\n"
            "The pieces of one word touch:\na span takes whole words.",
            ha="left", va="top", fontsize=SMALL)

    x2 = 4.4
    ax.text(x2, y + 0.15, "2. span length n (whole words)", ha="left", va="center", fontsize=BODY,
            weight="bold")
    probs = ngram_probabilities()
    for n, p in enumerate(probs, 1):
        bx = x2 + 0.15 + (n - 1) * 0.75
        bh = 1.5 * p
        ax.add_patch(Rectangle((bx, 0.45), 0.5, bh, facecolor="#999999", edgecolor=INK, lw=0.8))
        ax.text(bx + 0.25, 0.45 + bh + 0.13, f"{p:.3f}", ha="center", va="center", fontsize=SMALL)
        ax.text(bx + 0.25, 0.28, f"n = {n}", ha="center", va="center", fontsize=SMALL)
    ax.text(x2 + 2.45, 1.45, "p(n) ∝ 1/n", ha="left", va="center", fontsize=BODY)
    ax.text(x2 + 2.45, 1.0, "drawn here, in order:\nn = " + ", ".join(str(s.words) for s in masked.spans),
            ha="left", va="center", fontsize=SMALL)

    x3 = 9.0
    ax.text(x3, y + 0.15, "3. each picked piece becomes", ha="left", va="center", fontsize=BODY,
            weight="bold")
    shares = [("mask", "[MASK]", 0.8), ("random", "random", 0.1), ("kept", "itself", 0.1)]
    bx = x3
    for kind, _, share in shares:
        ax.add_patch(Rectangle((bx, 1.25), 3.6 * share, 0.42, facecolor=REPLACED[kind], edgecolor=INK,
                               lw=0.8))
        ax.text(bx + 1.8 * share, 1.46, f"{share:.0%}", ha="center", va="center", fontsize=SMALL)
        bx += 3.6 * share
    for k, (kind, label, _) in enumerate(shares):
        ax.add_patch(Rectangle((x3, 0.8 - 0.3 * k), 0.25, 0.2, facecolor=REPLACED[kind], edgecolor=INK,
                               lw=0.8))
        ax.text(x3 + 0.35, 0.9 - 0.3 * k, f"{label}: {kinds.count(kind)} here", ha="left", va="center",
                fontsize=SMALL)
    ax.text(x3 + 2.1, 0.6, "label: the original\npiece, at every\npicked position", ha="left", va="center",
            fontsize=SMALL, color=GREY)


# ---------------------------------------------------------------------------------------- NSP vs SOP

def draw_nsp_vs_sop() -> Figure:
    """How NSP and SOP make their positive and negative pairs from a document's consecutive segments."""
    W, H = 13.4, 6.9
    fig, ax = _canvas(W, H,
                      "Sentence pairs: next-sentence prediction (BERT) vs sentence-order prediction (ALBERT)",
                      "A and B: consecutive runs of whole sentences of one document, cut at a random "
                      "sentence boundary. Half the pairs are negatives (label 1).")
    a_col, b_col, x_col = "#3d85c6", "#9fc5e8", "#93c47d"
    docs = [("document 1", [("A", a_col, "Call sort() to order a list in place."),
                            ("B", b_col, "It returns None, so do not assign the result."),
                            ("", "white", "Use sorted() to get a new list instead.")]),
            ("document 2", [("", "white", "But soft, what light through yonder window breaks?"),
                            ("X", x_col, "It is the east, and Juliet is the sun.")])]
    y = H - 1.3
    for name, sentences in docs:
        h = 0.5 * len(sentences) + 0.45
        _frame(ax, 0.35, y - h, 4.75, h, name, edge=GREY)
        for k, (tag, colour, text) in enumerate(sentences):
            sy = y - 0.45 - 0.5 * (k + 1) + 0.08
            _box(ax, 0.5, sy, 0.45, 0.38, tag, face=colour, size=BODY, weight="bold",
                 color="white" if colour == a_col else INK, edge=INK if tag else "#bbbbbb")
            ax.text(1.05, sy + 0.19, text, ha="left", va="center", fontsize=SMALL)
        y -= h + 0.3
    ax.text(0.45, y + 0.05, "X: a random sentence of another document,\nwith what follows it",
            ha="left", va="top", fontsize=SMALL, color=GREY)

    def pair(y, first, second, label, note):
        ax.text(5.55, y + 0.2, label, ha="left", va="center", fontsize=SMALL + 0.5)
        x = 7.1
        for tag in ("[CLS]", first, "[SEP]", second, "[SEP]"):
            special = tag.startswith("[")
            w = 0.66 if special else 0.5
            colour = {"A": a_col, "B": b_col, "X": x_col}.get(tag, LIGHT)
            _box(ax, x, y, w, 0.4, tag, face=colour, size=SMALL if special else BODY,
                 weight="normal" if special else "bold", color="white" if tag == "A" else INK)
            x += w + 0.06
        ax.text(x + 0.2, y + 0.2, note, ha="left", va="center", fontsize=SMALL, color=GREY)

    rows = [("NSP (BERT): does B follow A?",
             [("A", "B", "positive · label 0", "B is the text after A"),
              ("A", "X", "negative · label 1",
               "X from another document: the topic\nchanges, the words give it away")]),
            ("SOP (ALBERT): are A and B in order?",
             [("A", "B", "positive · label 0", "the same pair as NSP's positive"),
              ("B", "A", "negative · label 1",
               "the same two segments, swapped:\nsame words, only the order tells")])]
    y = H - 1.45
    for title, examples in rows:
        ax.text(5.55, y, title, ha="left", va="center", fontsize=BODY + 1, weight="bold")
        for first, second, label, note in examples:
            y -= 0.72
            pair(y - 0.2, first, second, label, note)
        y -= 0.95
    ax.text(W / 2, 0.75, "The paper (Table 5): a model trained on NSP is at chance on SOP; one trained on "
            "SOP solves NSP well above chance.", ha="center", va="center", fontsize=SMALL, color=GREY)
    ax.text(W / 2, 0.4, "Code: minialbert.segments.next_sentence_pairs and sentence_order_pairs, as the "
            "official code: a chunk of one sentence takes B from another document in SOP too.",
            ha="center", va="center", fontsize=SMALL, color=GREY)
    return fig


# --------------------------------------------------------------------------------------- flash tiles

def draw_flash_tiles(n: int = 128, length: int = 80, block_m: int = 64, block_n: int = 32) -> Figure:
    """The fused kernel's forward: Q tiles (one program each) walking K/V tiles with the online softmax."""
    W, H = 13.4, 9.0
    fig, ax = _canvas(W, H, "The fused attention kernel: tiles and the online softmax (forward)",
                      f"one sequence and head: N = {n} positions, {length} real tokens then padding; "
                      f"BLOCK_M = {block_m}, BLOCK_N = {block_n}\n(one of the forward's autotuned tiles on a "
                      "GPU; the CPU interpreter and float32 use 32 × 32)")
    grid = _TileGrid(n, 4.3 / n, 2.0, 1.5)              # 4.3 inches of positions, lower-left at (2.0, 1.5)
    band_top = _draw_kv_and_q_tiles(ax, grid, length, block_m, block_n)
    _draw_score_tiles(ax, grid, length, block_m, block_n, band_top)
    _draw_program_loop(ax, H)
    return fig


class _TileGrid(NamedTuple):
    """draw_flash_tiles' score grid: n positions a side, `step` inches each, lower-left corner (gx, gy);
    queries run down from the top, keys to the right."""

    n: int
    step: float
    gx: float
    gy: float

    @property
    def top(self) -> float:
        return self.gy + self.n * self.step

    def col_x(self, j: float) -> float:
        return self.gx + j * self.step

    def row_y(self, i: float) -> float:                  # query position i, counted from the top
        return self.top - i * self.step


def _draw_kv_and_q_tiles(ax, grid: _TileGrid, length: int, block_m: int, block_n: int) -> float:
    """The K/V tiles above the grid and the Q tiles left of it; returns the y of the K/V band's top."""
    n, col_x, row_y, top = grid.n, grid.col_x, grid.row_y, grid.top
    pad_x = col_x(length)
    # K and V above the grid, in BLOCK_N tiles; those past the length are never loaded
    band_y, band = top + 0.25, 0.5
    for t in range(n // block_n):
        x0, x1 = col_x(t * block_n), col_x((t + 1) * block_n)
        loaded = t * block_n < length
        ax.add_patch(Rectangle((x0, band_y), x1 - x0, band, facecolor="#b6d7a8" if loaded else "white",
                               edgecolor=INK, lw=1.0, hatch=None if loaded else "///"))
        ax.text((x0 + x1) / 2, band_y + band + 0.15, f"K, V tile {t}", ha="center", va="center",
                fontsize=SMALL - 1)
    ax.add_patch(Rectangle((pad_x, band_y), col_x(min(n, (length // block_n + 1) * block_n)) - pad_x, band,
                           facecolor="none", edgecolor="#cc0000", lw=0, hatch="\\\\\\\\"))
    ax.text(col_x(n / 2), band_y + band + 0.45, f"keys and values: BLOCK_N = {block_n} per tile, streamed "
            "past the query tile", ha="center", va="center", fontsize=SMALL)

    # Q left of the grid, in BLOCK_M tiles; rows past the length are padding
    qx, qw = grid.gx - 0.85, 0.5
    for t in range(n // block_m):
        y0, y1 = row_y((t + 1) * block_m), row_y(t * block_m)
        ax.add_patch(Rectangle((qx, y0), qw, y1 - y0, facecolor=ATTENTION, edgecolor=INK, lw=1.0))
        ax.text(qx + qw / 2, (row_y(t * block_m) + row_y(min((t + 1) * block_m, length))) / 2, f"Q tile {t}",
                ha="center", va="center", fontsize=SMALL - 1, rotation=90)
    ax.add_patch(Rectangle((qx, row_y(n)), qw, row_y(length) - row_y(n), facecolor="white", edgecolor=INK,
                           lw=1.0, hatch="\\\\\\\\"))
    ax.text(qx - 0.1, (row_y(length) + row_y(n)) / 2, "padded\nrows:\noutput 0", ha="right", va="center",
            fontsize=SMALL - 1, color=GREY)
    ax.text(qx - 0.1, (row_y(0) + row_y(block_m)) / 2, f"queries:\nBLOCK_M = {block_m}\nper tile",
            ha="right", va="center", fontsize=SMALL - 1, color=GREY)
    return band_y + band


def _draw_score_tiles(ax, grid: _TileGrid, length: int, block_m: int, block_n: int, band_top: float) -> None:
    """The score grid: which tile pairs each program computes, in which order; the padding; a legend."""
    n, col_x, row_y, gx, gy = grid.n, grid.col_x, grid.row_y, grid.gx, grid.gy
    pad_x = col_x(length)
    # the score grid: which tile pairs a program computes
    for tm in range(n // block_m):
        y0, y1 = row_y((tm + 1) * block_m), row_y(tm * block_m)
        for tn in range(n // block_n):
            x0, x1 = col_x(tn * block_n), col_x((tn + 1) * block_n)
            visited = tn * block_n < length and tm * block_m < length
            partial = visited and x1 > pad_x
            ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, edgecolor=INK, lw=1.0,
                                   facecolor=("#fff2cc" if partial else "#ffe599") if visited else "white",
                                   hatch=None if visited else "///"))
            if partial:                                  # the keys past the length, set to -inf
                ax.add_patch(Rectangle((pad_x, y0), x1 - pad_x, y1 - y0, facecolor="none",
                                       edgecolor="#cc0000", lw=0, hatch="\\\\\\\\"))
            if visited:
                ax.text((x0 + min(x1, pad_x)) / 2, (y0 + y1) / 2 + 0.2, f"{tn + 1}", ha="center", va="center",
                        fontsize=BODY, weight="bold", color="#7f6000")
        yc = (y0 + y1) / 2
        _arrow(ax, (gx + 0.1, yc - 0.25), (pad_x - 0.1, yc - 0.25), color="#7f6000", lw=1.6)
        ax.text(col_x(n) + 0.12, yc + 0.12, f"program {tm}", ha="left", va="center", fontsize=SMALL,
                weight="bold")
        ax.text(col_x(n) + 0.12, yc - 0.16, f"start_m = {tm}", ha="left", va="center", fontsize=SMALL - 1,
                family=MONO, color=GREY)
    ax.plot([pad_x, pad_x], [gy, band_top], color="#cc0000", lw=1.5, ls="--")
    ax.text(pad_x, gy - 0.14, f"key {length}: the first padding", ha="center", va="top", fontsize=SMALL - 0.5,
            color="#cc0000")
    ax.text(col_x(n / 2), gy - 0.5, "the scores S = Q Kᵀ, never stored whole: the numbers give the order in "
            "which a program computes its tiles", ha="center", va="top", fontsize=SMALL - 1, color=GREY)

    # legend for the grid, each entry as wide as its text
    lx, ly = 0.35, 0.4
    for face, hatch, edge, label in [("#ffe599", None, INK, "computed"),
                                     ("#fff2cc", "\\\\\\\\", "#cc0000", "keys past the length: set to −∞"),
                                     ("white", "///", INK, "past the length: never loaded")]:
        ax.add_patch(Rectangle((lx, ly), 0.3, 0.22, facecolor=face, edgecolor=INK, lw=0.8))
        if hatch:
            ax.add_patch(Rectangle((lx, ly), 0.3, 0.22, facecolor="none", edgecolor=edge, lw=0, hatch=hatch))
        ax.text(lx + 0.38, ly + 0.11, label, ha="left", va="center", fontsize=SMALL - 1)
        lx += 0.38 + _text_width(label, SMALL - 1) + 0.35


def _draw_program_loop(ax, H: float) -> None:
    """Right of the grid: one program's loop, the online softmax as _fwd_kv_loop writes it."""
    px, pw = 8.05, 5.0
    yy = H - 1.3
    ax.text(px, yy, "one program: one Q tile, on chip the whole time", ha="left", va="center",
            fontsize=BODY, weight="bold")
    ax.text(px, yy - 0.35, "grid = (cdiv(N, BLOCK_M), B · heads);  state per query row:", ha="left",
            va="center", fontsize=SMALL, color=GREY)
    state = [("m_i", "running max", "−∞"), ("l_i", "running sum", "0"), ("acc", "running Σ p·v", "0")]
    for k, (name, what, init) in enumerate(state):
        sx = px + k * 1.68
        _box(ax, sx, yy - 1.2, 1.55, 0.6, "", face="#fff2cc")
        ax.text(sx + 0.775, yy - 0.79, name, ha="center", va="center", fontsize=BODY, family=MONO,
                weight="bold")
        ax.text(sx + 0.775, yy - 1.04, f"{what}, starts {init}", ha="center", va="center", fontsize=SMALL - 2)
    steps = [("qk = q · k_jᵀ · qk_scale", "scores: BLOCK_M × BLOCK_N, in log₂ units"),
             ("m_new = max(m_i, rowmax(qk))", "the running max can only grow"),
             ("p = exp2(qk − m_new)", ""),
             ("alpha = exp2(m_i − m_new)", "≤ 1: shrinks what was summed under the old max"),
             ("l_i = l_i · alpha + rowsum(p)", "rescale, then add this tile"),
             ("acc = acc · alpha + p · v_j", "the same rescaling"),
             ("m_i = m_new", "")]
    y = yy - 1.6
    ax.text(px, y, "for each K/V tile j below the length:", ha="left", va="center", fontsize=SMALL + 0.5,
            weight="bold")
    loop_top = y - 0.2
    y -= 0.42
    for code, note in steps:
        ax.text(px + 0.35, y, code, ha="left", va="center", fontsize=SMALL + 0.5, family=MONO)
        if note:
            ax.text(px + 0.35, y - 0.22, note, ha="left", va="center", fontsize=SMALL - 1.5, color=GREY)
        y -= 0.54 if note else 0.36
    _arrow(ax, (px + 0.15, y + 0.3), (px + 0.15, loop_top), color="#7f6000", lw=1.4)
    ax.text(px + 0.35, y + 0.08, "next K/V tile", ha="left", va="center", fontsize=SMALL - 1.5,
            color="#7f6000")
    y -= 0.3
    _box(ax, px, y - 0.62, pw, 0.62, "", face=MLM_HEAD)
    ax.text(px + pw / 2, y - 0.18, "after the last tile:  out = acc / l_i", ha="center", va="center",
            fontsize=SMALL + 0.5, family=MONO)
    ax.text(px + pw / 2, y - 0.44, "lse = m_i + log₂(l_i), kept for the backward", ha="center", va="center",
            fontsize=SMALL - 0.5, family=MONO)


# --------------------------------------------------------------------------------------- the registry

DIAGRAMS: dict[str, Callable[[], Figure]] = {
    "model": draw_model,
    "sharing": draw_sharing,
    "ngram_masking": draw_ngram_masking,
    "nsp_vs_sop": draw_nsp_vs_sop,
    "flash_tiles": draw_flash_tiles,
}


def _check_name(name: str) -> None:
    if name not in DIAGRAMS:
        raise ValueError(f"unknown diagram {name!r}; the diagrams are {', '.join(DIAGRAMS)}")


def diagram_path(name: str, directory: str | Path = DIAGRAM_DIR, fmt: str = FORMAT) -> Path:
    """Where diagram `name` is written: directory/name.fmt."""
    _check_name(name)
    return Path(directory) / f"{name}.{fmt}"


def save(fig: Figure, path: str | Path) -> Path:
    """Write fig to path (format from the suffix) with the same bytes every time: no date, fixed ids."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = path.suffix.lstrip(".")
    metadata = {"Date": None} if fmt == "svg" else {"Software": None} if fmt == "png" else None
    settings = {"svg.hashsalt": "minialbert", "svg.fonttype": "none", "hatch.linewidth": 0.6}
    with matplotlib.rc_context(settings):
        fig.savefig(path, format=fmt, metadata=metadata, dpi=110)
    return path


def draw(name: str, directory: str | Path = DIAGRAM_DIR, fmt: str = FORMAT) -> Path:
    """Draw diagram `name` into directory/name.fmt; returns the path."""
    return save(DIAGRAMS[name](), diagram_path(name, directory, fmt))


def draw_all(directory: str | Path = DIAGRAM_DIR, fmt: str = FORMAT) -> list[Path]:
    """Draw every diagram into directory; returns the paths."""
    return [draw(name, directory, fmt) for name in DIAGRAMS]


def show(name: str, directory: str | Path = DIAGRAM_DIR) -> None:
    """Display the committed diagram `name` in a notebook (reads assets/diagrams/name.svg, draws nothing)."""
    from IPython.display import SVG, display

    path = diagram_path(name, directory)
    if not path.is_file():
        raise FileNotFoundError(f"the diagram file {path} is missing: draw the diagrams with "
                                f"`python -m minialbert.course.diagrams` in the repository root")
    display(SVG(filename=str(path)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m minialbert.course.diagrams",
                                     description="Redraw the course diagrams (default: all, into "
                                                 "assets/diagrams).")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"diagrams to draw (default: all): {', '.join(DIAGRAMS)}")
    parser.add_argument("--out", type=Path, default=DIAGRAM_DIR, help="folder to write into")
    parser.add_argument("--format", default=FORMAT, choices=["svg", "png"],
                        help="svg (committed) or png (a preview)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in DIAGRAMS]
    if unknown:
        parser.error(f"unknown diagram {unknown[0]!r}; the diagrams are {', '.join(DIAGRAMS)}")
    for name in args.names or DIAGRAMS:
        print(draw(name, args.out, args.format))


if __name__ == "__main__":
    main()
