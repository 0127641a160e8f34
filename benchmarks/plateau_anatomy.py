"""What a model on the unigram plateau does not use: word order. Read on the shipped course zoo.

At 128 tokens masked LM alone never left the unigram plateau (`albert-mlm-128`, docs/zoo.md), where the
32-token models with a sentence loss did. This reads, for each model, on held-out examples of its own
length:

- where its [MASK] positions attend, layer by layer (heads averaged): the entropy of the attention row
  as a share of the uniform row's (1.0: every key alike), and the weight on the two adjacent positions as
  a multiple of what a uniform row gives them (1.0: neighbours not preferred, though the neighbour-count
  baseline, which reads those two tokens alone, predicts a [MASK] far better than the unigram guess);
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
    log(real keys), and their weight on positions i-1 and i+1 times real keys / 2 (both 1.0: uniform)."""
    b, i = (batch["input_ids"] == MASK_ID).nonzero(as_tuple=True)
    keys = batch["attention_mask"][b].sum(dim=-1).float()                     # (m,) real keys of each row
    rows = probs[b, :, i]                                                       # (m, h, N)
    entropy = -(rows.clamp_min(1e-12).log() * rows).sum(dim=-1).mean(dim=-1)   # (m,)
    n = rows.shape[-1]
    side = sum(rows.gather(2, (i + d).clamp(0, n - 1).view(-1, 1, 1).expand(-1, rows.shape[1], 1))
               .squeeze(-1).mean(dim=-1) for d in (-1, 1))                     # (m,)
    return {"entropy_share": round(float((entropy / keys.log()).mean()), 3),
            "neighbours_vs_uniform": round(float((side * keys / 2).mean()), 2)}


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
                "layers": where_masks_attend(model, batch), **position_structure(model)}

    def load(name: str):
        return load_checkpoint(extra[name]).eval() if name in extra else zoo.load(name, progress=False)

    batches = {name: held_out(name) for name in (*ENTRIES, *extra)}
    rows = {name: read(load(name), batch) for name, batch in batches.items()}
    # the anchor along its training, at each checkpoint it ships, beside its held-out [MASK] accuracy there
    mask_at = {r["step"]: r["mask_accuracy"] for r in zoo.metrics(ANCHOR) if r["split"] == "valid"}
    along = {step: {"mask_accuracy": round(mask_at[step], 4),
                    **read(load_checkpoint(path).eval(), batches[ANCHOR])}
             for step, path in zoo.checkpoints(ANCHOR).items()}

    def best(r: dict) -> float:                  # the layer whose [MASK] rows prefer the neighbours most
        return max(layer["neighbours_vs_uniform"] for layer in r["layers"])

    for name, r in rows.items():
        first = r["layers"][0]["entropy_share"]
        print(f"{name:>22} ({r['tokens']:3d} tokens): first layer's entropy {first:.2f} of uniform; "
              f"neighbours at most {best(r):.1f}x uniform ({best(r) / best(rows[ANCHOR]):.2f}x {ANCHOR}'s); "
              f"positions: adjacent cosine {r['adjacent_cosine']:.2f}, "
              f"norm {r['norm_vs_words']:.2f} of the words'")
    for step, r in along.items():
        print(f"{ANCHOR} at step {step:>6,}: held-out [MASK] {r['mask_accuracy']:.1%}; neighbours at most "
              f"{best(r):.1f}x uniform; positions: adjacent cosine {r['adjacent_cosine']:.2f}")
    write_json(args.out, {"what": "where [MASK] positions attend (entropy share of uniform, weight on the "
                                  "two adjacent positions as a multiple of uniform's) and what the position "
                                  "embeddings hold, per shipped course zoo entry, on its held-out examples",
                          "examples": args.examples, "anchor": ANCHOR, "torch": torch.__version__,
                          "models": rows, f"{ANCHOR} along its training": along})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
