"""The sweep that chooses the course pretraining recipe: held-out [MASK] accuracy per CPU-minute, on
the pinned course corpus (minialbert.corpus.course_documents) with the shipped course tokenizer.

Every candidate stays within ALBERT's definition (post-LN, factorized embeddings, all-shared layers,
whole-word n-gram MLM with 80/10/10, MLM + SOP) and changes one or two of: model size, sequence
length, batch, optimizer, peak learning rate, warmup. Each run is evaluated on a fixed seeded sample
of the held-out split at regular steps, beside the unigram and neighbour-count baselines of the same
positions; the step at which [MASK] accuracy leaves the unigram baseline's 95% interval is recorded,
and at the end train and held-out [MASK] accuracy are compared (a model that only fits the training
split is not learning language).

    python benchmarks/pretraining_sweep.py --list
    python benchmarks/pretraining_sweep.py --only small-seq64-adamw1e-3     # runs are merged into the JSON
    python benchmarks/pretraining_sweep.py                                 # every candidate not yet run

Results: assets/benchmarks/pretraining_sweep.json (one record per candidate, with its curve). Its
"pydocs_runs" are the first sweep's, on the earlier embedded corpus (the stdlib's documentation, with
package docstrings where a run says so): kept as the record of why the course moved to more text.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import time
from pathlib import Path

import torch

from minialbert import AlbertConfig
from minialbert.corpus import course_documents
from minialbert.course.data import course_tokenizer
from minialbert.course.scale import SCALES
from minialbert.download import atomic_write
from minialbert.evaluation import MLMBaselines, evaluate_pretraining, pretraining_evaluator
from minialbert.model import Encoder
from minialbert.pretraining_data import COURSE_SEED, build_examples
from minialbert.train import RunOptions, TrainArgs, pretrain

OUT = Path(__file__).resolve().parents[1] / "assets" / "benchmarks" / "pretraining_sweep.json"
# The course ALBERT before this sweep (the course-albert preset of the first sweep's end); candidates
# change it. Every run reads 32 tokens and predicts 15% of them, with AdamW and MLM + SOP.
BASE = dict(vocab_size=4000, embedding_size=32, hidden_size=64, num_layers=4, num_heads=2,
            intermediate_size=256, max_position_embeddings=32)
WIDE = {"hidden_size": 128, "intermediate_size": 512}
EVAL_EXAMPLES = 1000        # held-out examples per point of the curve (a fixed seeded sample)
EVAL_POINTS = 10


def candidate(model=None, seq=32, batch=64, optimizer="adamw", lr=3e-3, warmup=300,
              steps=12000, mask_rate=0.15, dupe_factor=10, local_attention=False, about=""):
    return dict(model=model or {}, seq=seq, batch=batch, optimizer=optimizer, lr=lr, warmup=warmup,
                steps=steps, mask_rate=mask_rate, dupe_factor=dupe_factor, local_attention=local_attention,
                about=about)


CANDIDATES = {
    "h64-12k": candidate(about="the zoo recipe of the embedded corpus (H = 64, 4 shared layers, 12,000 "
                               "steps), now on the course corpus"),
    "h64-e64-l2-15k": candidate(model={"embedding_size": 64, "num_layers": 2}, steps=15000,
                                about="the first sweep's best recipe (two shared layers, E = H = 64, 15,000 "
                                      "steps), now on the course corpus"),
    "h64-init0.1-12k": candidate(model={"initializer_range": 0.1},
                                 about="h64-12k with weights drawn five times wider (std 0.1, not 0.02): "
                                       "attention that starts less uniform may find its neighbours sooner"),
    "h64-e64-20k": candidate(model={"embedding_size": 64}, steps=20000,
                             about="four shared layers with E = H = 64 (the earlier zoo's albert-e64 left "
                                   "the plateau first of the shared models), 20,000 steps"),
    "h64-e64-lr6e-3-20k": candidate(model={"embedding_size": 64}, lr=6e-3, warmup=600, steps=20000,
                                    about="h64-e64-20k at twice the peak learning rate (and twice the "
                                          "warmup)"),
    "h128-e64-15k": candidate(model={**WIDE, "embedding_size": 64}, steps=15000,
                              about="twice as wide (H = 128, E = 64: factorized), four shared layers, 15,000 "
                                    "steps"),
}


@contextlib.contextmanager
def neighbours_only(enabled: bool):
    """The diagnostic: every position may attend only to its left and right neighbour (not itself)."""
    forward = Encoder.forward

    def banded(self, x, attend, key_lengths=None, output_hidden_states=False):
        i = torch.arange(x.shape[1], device=x.device)
        band = (i[:, None] - i[None, :]).abs() == 1                       # (N, N)
        return forward(self, x, attend & band, key_lengths, output_hidden_states)

    Encoder.forward = banded if enabled else forward
    try:
        yield
    finally:
        Encoder.forward = forward


def run(name: str, c: dict) -> dict:
    tokenizer = course_tokenizer(SCALES["course"].data)
    train, valid = (build_examples(course_documents(split), tokenizer, "sop", c["seq"], COURSE_SEED,
                                   dupe_factor=c["dupe_factor"], mask_rate=c["mask_rate"])
                    for split in ("train", "valid"))
    baselines = MLMBaselines.fit(train)
    cfg = AlbertConfig.from_dict({**BASE, "max_position_embeddings": c["seq"], **c["model"]})
    every = max(1, c["steps"] // EVAL_POINTS)
    args = TrainArgs(objective="sop", steps=c["steps"], batch_size=c["batch"], lr=c["lr"], warmup=c["warmup"],
                     optimizer=c["optimizer"], eval_every=every, eval_examples=EVAL_EXAMPLES,
                     checkpoint_every=0)

    def show(r: dict) -> None:
        if r["split"] == "valid":
            print(f"{name} step {r['step']:5d} {r['seconds']:6.0f}s  [MASK] {100 * r['mask_accuracy']:5.1f}% "
                  f"kept {100 * r['kept_accuracy']:5.1f}%  SOP {100 * r['sop_accuracy']:5.1f}% "
                  f"(predicted swapped {100 * r['sop_predicted_1']:.0f}%)", flush=True)

    with neighbours_only(c["local_attention"]):                     # the diagnostic evaluates as it trained
        result = pretrain(cfg, args, train, pretraining_evaluator(valid, cfg, args),
                          RunOptions(callbacks=[show], progress=False))
        final = evaluate_pretraining(result.model, valid, baselines)          # the whole held-out split
        on_train = evaluate_pretraining(result.model, train, baselines, max_examples=EVAL_EXAMPLES)
    curve = [r for r in result.history if r["split"] == "valid"]
    unigram_hi = final["baselines"]["unigram"]["mask"]["ci95"][1]      # same positions as every curve point
    escape = next((r for r in curve if r["mask_ci95"][0] > unigram_hi), None)
    return {**c, "parameters": sum(p.numel() for p in result.model.parameters()), "curve": curve,
            "seconds_per_step": curve[-1]["seconds"] / c["steps"],
            "escape_step": escape and escape["step"], "escape_seconds": escape and escape["seconds"],
            "final_valid": final, "final_train_mask": on_train["mlm"]["mask"],
            "eval_examples": EVAL_EXAMPLES, "valid_examples": len(valid)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", action="append",
                   help="run this candidate (repeatable); default: those not yet run")
    p.add_argument("--list", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    results = json.loads(OUT.read_text()) if OUT.exists() else {"runs": {}}
    if a.list:
        for name, c in CANDIDATES.items():
            print(f"{name:28s} {'done' if name in results['runs'] else 'todo':5s} {c['about']}")
        return
    for name in a.only or [n for n in CANDIDATES if n not in results["runs"]]:
        if name not in CANDIDATES:
            raise SystemExit(f"unknown candidate {name!r}; see --list")
        record = run(name, CANDIDATES[name])
        results = json.loads(OUT.read_text()) if OUT.exists() else {"runs": {}}   # others may have written
        results["runs"][name] = {**record, "threads": a.threads}
        results.update(machine=platform.processor() or platform.machine(), threads=a.threads,
                       torch=torch.__version__, date=time.strftime("%Y-%m-%d"))
        atomic_write(OUT, (json.dumps(results, indent=1) + "\n").encode())
        r = results["runs"][name]
        print(f"{name}: escape step {r['escape_step']} ({r['escape_seconds']} s), final held-out [MASK] "
              f"{100 * r['final_valid']['mlm']['mask']['accuracy']:.1f}% vs train "
              f"{100 * r['final_train_mask']['accuracy']:.1f}%, neighbour baseline "
              f"{100 * r['final_valid']['baselines']['neighbour']['mask']['accuracy']:.1f}%", flush=True)


if __name__ == "__main__":
    main()
