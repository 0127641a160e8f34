"""What a model on the unigram plateau does not use: word order. Read on the shipped course zoo.

At 128 tokens on single segments, masked LM alone never left the unigram plateau (the first round of
`albert-mlm-128`, docs/results.md), where the 32-token models with a sentence loss did; on [CLS] A [SEP] B
[SEP] pairs it leaves it (the shipped round). This reads, for each model, on held-out examples of its own
length:

- where its [MASK] positions attend, layer by layer (heads averaged): the entropy of the attention row
  as a share of the uniform row's (1.0: every key alike), and the weight on the two adjacent positions as
  a multiple of what a uniform row gives them (1.0: neighbours not preferred, though the neighbour-count
  baseline, which reads those two tokens alone, predicts a [MASK] far better than the unigram guess);
  and, since about half of a [MASK]'s neighbours are [MASK]s too, the weight on each neighbour that shows
  a token as a multiple of the row's mean weight on the tokens shown (1.0: the shown neighbours not
  preferred over the other shown tokens);
- what its position embeddings hold: the mean cosine between adjacent positions' vectors (each centred
  on the positions' mean; near 0 for random vectors), and their mean norm as a share of the word
  embeddings' (how much of the summed embedding is position).

The anchor is `albert-sop`, the course's 32-token model that left the plateau. Ratios are against it; it is
also read at each checkpoint it ships, to show when the order appears.

    python benchmarks/plateau_anatomy.py        # seconds on a CPU; writes the JSON below
    # and an entry no longer shipped, from the repository's history (the 32-token MLM-only arm):
    mkdir -p runs/history
    git archive e89f657^ zoo/v1/course/albert-mlm-71eec8bd934c | tar -x -C runs/history
    python benchmarks/plateau_anatomy.py --extra albert-mlm=runs/history/zoo/v1/course/albert-mlm-71eec8bd934c
    # the first round's 128-token MLM arm (trained on single segments), on the shipped arm's held-out pairs:
    git archive 0941b8a^ zoo/v1/course/albert-mlm-128-10daa26a551e | tar -x -C runs/history
    python benchmarks/plateau_anatomy.py --out runs/anatomy.json \
        --extra albert-mlm-128:first-round=runs/history/zoo/v1/course/albert-mlm-128-10daa26a551e
    # a checkpoint of your own run, on an entry's held-out examples, under its own label (ENTRY:LABEL):
    python benchmarks/plateau_anatomy.py --out runs/anatomy.json \
        --extra albert-mlm-128:my-run=runs/my-run/checkpoints/step-010000
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch
import torch.nn.functional as F

from minialbert.checkpoint import load_checkpoint
from minialbert.course.experiments.zoo import Zoo
from minialbert.course.scale import current_scale
from minialbert.download import write_json
from minialbert.pretraining_data import collate
from minialbert.tokenizer import MASK_ID

REPO = Path(__file__).resolve().parent.parent
ANCHOR = "albert-sop"
# 32 tokens, left the plateau (with a sentence loss); 128 tokens, the trunk + 5,000 steps of each objective
ENTRIES = (ANCHOR, "albert-factorized-lamb", "albert-mlm-128", "albert-mlm-128-seed1", "albert-nsp-128",
           "albert-sop-128")


def attention_rows(model, batch: dict) -> list[torch.Tensor]:
    """Every layer's attention probabilities (B, h, N, N), computed as the model computes them."""
    rows = []

    def recording(q, k, v, attend, key_lengths=None, dropout_p=0.0):
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        probs = scores.masked_fill(~attend, torch.finfo(scores.dtype).min).softmax(dim=-1)
        rows.append(probs)
        return probs @ v

    layers = [m for m in model.modules() if hasattr(m, "attention_fn")]
    kept = [m.attention_fn for m in layers]
    for m in layers:
        m.attention_fn = recording
    try:
        with torch.no_grad():
            model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    finally:
        for m, fn in zip(layers, kept):
            m.attention_fn = fn
    return rows


def where_masks_attend(model, batch: dict) -> list[dict]:
    """Per layer, the [MASK] rows of its attention read by mask_rows."""
    return [mask_rows(probs, batch) for probs in attention_rows(model, batch)]


def mask_rows(probs: torch.Tensor, batch: dict) -> dict:
    """One layer's attention (B, h, N, N) at the [MASK] positions, heads averaged: the rows' entropy over
    log(real keys); their weight on positions i-1 and i+1 times real keys / 2 (1.0: uniform); and, as
    about half the neighbours are [MASK] too (spans and whole words are masked together), the weight on
    each neighbour that shows a token, over the row's mean weight on the keys that show one (1.0: the
    shown neighbours not preferred over the other shown tokens)."""
    b, i = (batch["input_ids"] == MASK_ID).nonzero(as_tuple=True)
    real = batch["attention_mask"][b].bool()                                    # (m, N)
    shown = real & (batch["input_ids"][b] != MASK_ID)                           # (m, N) real keys, not [MASK]
    heads = probs[b, :, i]                                                      # (m, h, N)
    entropy = -(heads.clamp_min(1e-12).log() * heads).sum(dim=-1).mean(dim=-1) # (m,) each head's, averaged
    rows = heads.mean(dim=1)                                                    # (m, N)
    keys = real.sum(dim=-1).float()                                             # (m,) real keys of each row
    n = rows.shape[-1]
    neighbours = torch.stack([(i + d).clamp(0, n - 1) for d in (-1, 1)], dim=1)  # (m, 2)
    inside = torch.stack([(i + d >= 0) & (i + d < n) for d in (-1, 1)], dim=1)   # (m, 2)
    on_neighbours = rows.gather(1, neighbours)                                  # (m, 2)
    shown_neighbour = shown.gather(1, neighbours) & inside                      # (m, 2)
    mean_on_shown = (rows * shown).sum(dim=-1, keepdim=True) / shown.sum(dim=-1, keepdim=True)   # (m, 1)
    shown_ratio = (on_neighbours / mean_on_shown)[shown_neighbour]               # (shown neighbours,)
    return {"entropy_share": round(float((entropy / keys.log()).mean()), 3),
            "neighbours_vs_uniform": round(float((on_neighbours.sum(dim=-1) * keys / 2).mean()), 2),
            "shown_neighbours_vs_shown": round(float(shown_ratio.mean()), 2)}


def masked_neighbours(batch: dict) -> float:
    """The share of the [MASK] positions' real neighbours (i-1, i+1) that are [MASK]s too."""
    masked, real = batch["input_ids"] == MASK_ID, batch["attention_mask"].bool()          # (B, N) each
    left, right = masked[:, 1:] & real[:, :-1], masked[:, :-1] & real[:, 1:]              # (B, N-1) each
    both = (left & masked[:, :-1]).sum() + (right & masked[:, 1:]).sum()
    return round(float(both / (left.sum() + right.sum())), 3)


def position_structure(model) -> dict:
    """Adjacent positions' cosine (centred vectors) and the positions' norm over the words' norm."""
    embeddings = model.albert.embeddings
    positions = embeddings.position_embeddings.weight.detach()
    centred = F.normalize(positions - positions.mean(dim=0), dim=-1)
    words = embeddings.word_embeddings.weight.detach()
    return {"adjacent_cosine": round(float((centred[:-1] * centred[1:]).sum(dim=-1).mean()), 3),
            "norm_vs_words": round(float(positions.norm(dim=-1).mean() / words.norm(dim=-1).mean()), 3)}


def entry_and_dir(text: str) -> tuple[str, str]:
    """--extra's ENTRY=DIR or ENTRY:LABEL=DIR, or a one-line usage error."""
    name, sep, folder = text.partition("=")
    entry, colon, label = name.partition(":")
    if not (entry and sep and folder) or (colon and not label):
        raise argparse.ArgumentTypeError(f"expected ENTRY=DIR or ENTRY:LABEL=DIR, got {text!r}")
    return name, folder


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=128, help="held-out examples per model (spread evenly)")
    p.add_argument("--extra", action="append", default=[], type=entry_and_dir, metavar="ENTRY[:LABEL]=DIR",
                   help="also read the checkpoint in DIR, on ENTRY's held-out examples, as ENTRY:LABEL where "
                        "a label is given (else in ENTRY's place); repeatable")
    p.add_argument("--out", type=Path, default=REPO / "assets" / "benchmarks" / "plateau_anatomy.json")
    args = p.parse_args()
    torch.set_num_threads(1)
    zoo = Zoo(current_scale("course"))
    extra = dict(args.extra)

    def held_out(name: str) -> dict:                   # name: an entry, or ENTRY:LABEL (ENTRY's examples)
        valid = zoo.entry_data(name.partition(":")[0], "valid")
        stride = max(1, len(valid) // args.examples)
        return collate([valid[j] for j in range(0, stride * args.examples, stride)])

    def read(model, batch: dict) -> dict:
        return {"tokens": batch["input_ids"].shape[1], "masks": int((batch["input_ids"] == MASK_ID).sum()),
                "masked_neighbours": masked_neighbours(batch), "layers": where_masks_attend(model, batch),
                **position_structure(model)}

    def load(name: str):
        return load_checkpoint(extra[name]).eval() if name in extra else zoo.load(name, progress=False)

    batches = {name: held_out(name) for name in (*ENTRIES, *extra)}
    rows = {name: read(load(name), batch) for name, batch in batches.items()}
    # the anchor along its training, at each checkpoint it ships, beside its held-out [MASK] accuracy there
    mask_at = {r["step"]: r["mask_accuracy"] for r in zoo.metrics(ANCHOR) if r["split"] == "valid"}
    along = {step: {"mask_accuracy": round(mask_at[step], 4),
                    **read(load_checkpoint(path).eval(), batches[ANCHOR])}
             for step, path in zoo.checkpoints(ANCHOR).items()}

    def best(r: dict, measure: str = "neighbours_vs_uniform") -> float:   # over the layers
        return max(layer[measure] for layer in r["layers"])

    for name, r in rows.items():
        first = r["layers"][0]["entropy_share"]
        print(f"{name:>22} ({r['tokens']:3d} tokens, {r['masked_neighbours']:.0%} of the [MASK]s' neighbours "
              f"[MASK]s): first layer's entropy {first:.2f} of uniform; "
              f"neighbours at most {best(r):.1f}x uniform ({best(r) / best(rows[ANCHOR]):.2f}x {ANCHOR}'s), "
              f"shown ones {best(r, 'shown_neighbours_vs_shown'):.1f}x the shown tokens' mean; "
              f"positions: adjacent cosine {r['adjacent_cosine']:.2f}, "
              f"norm {r['norm_vs_words']:.2f} of the words'")
    for step, r in along.items():
        print(f"{ANCHOR} at step {step:>6,}: held-out [MASK] {r['mask_accuracy']:.1%}; neighbours at most "
              f"{best(r):.1f}x uniform, shown ones {best(r, 'shown_neighbours_vs_shown'):.1f}x; "
              f"positions: adjacent cosine {r['adjacent_cosine']:.2f}")
    what = ("where [MASK] positions attend (entropy share of uniform, weight on the two adjacent positions "
            "as a multiple of uniform's; on each adjacent position that shows a token, over the mean on the "
            "shown tokens) and what the position embeddings hold, per shipped course zoo entry, on its "
            "held-out examples")
    write_json(args.out, {"what": what,
                          "examples": args.examples, "anchor": ANCHOR, "torch": torch.__version__,
                          "models": rows, f"{ANCHOR} along its training": along})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
