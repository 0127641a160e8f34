"""A cheap CPU probe of the gpu recipe's plateau: which optimizer, peak rate and warmup
let a 12-layer post-LN ALBERT leave the plateau soonest, measured on a narrow twin of the gpu model.

The gpu model (H = 768, E = 128, 12 shared layers) is too wide to train for long on a CPU; its depth,
post-LN layers, parameter sharing and optimizer are what the recipe is about, and those the twin keeps.
The probe: the synthetic permutation chains (minialbert.course.experiments.synthetic) at depth 12, each arm
from the same
seed: a [MASK] is given exactly by its neighbours, so a stack that leaves the plateau jumps from about
1/V to near 100% held-out [MASK] accuracy; the first evaluated step past 50% is the number compared.

    python benchmarks/gpu_recipe_probe.py --steps 800 --out .gpu/probes/chains.json            # H = 64
    python benchmarks/gpu_recipe_probe.py --hidden 192 --steps 500 --arms 4 5 --out ...       # wider

Prints one line per arm (as it finishes) and writes every curve to --out (JSON).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

from minialbert.config import AlbertConfig
from minialbert.course.experiments.synthetic import permutation_chains
from minialbert.download import write_json
from minialbert.evaluation import pretraining_evaluator
from minialbert.train import RunOptions, TrainArgs, pretrain

# (optimizer, peak rate, warmup share of the steps): today's gpu recipe first
ARMS = [("lamb", 1.76e-3, 0.05), ("lamb", 1.76e-3, 0.2), ("lamb", 5e-3, 0.1), ("lamb", 1e-2, 0.1),
        ("adamw", 1e-3, 0.1), ("adamw", 3e-4, 0.1), ("lamb", 5e-4, 0.1), ("lamb", 3e-4, 0.1)]


def twin(vocab_size: int, positions: int, hidden: int) -> AlbertConfig:
    """The gpu model's depth, sharing and post-LN at a narrow width."""
    return AlbertConfig.preset("gpu-albert", vocab_size=vocab_size, hidden_size=hidden, num_heads=2,
                               intermediate_size=4 * hidden, embedding_size=min(128, hidden),
                               max_position_embeddings=positions)


def run_arm(cfg, data, valid, optimizer, lr, warmup_share, steps, batch, eval_every) -> dict:
    """One arm: pretrain the twin on the chains (MLM alone), held-out evaluations every eval_every steps."""
    args = TrainArgs(objective="mlm", steps=steps, batch_size=batch, lr=lr, optimizer=optimizer,
                     warmup=max(1, round(warmup_share * steps)), eval_every=eval_every, eval_examples=500,
                     checkpoint_every=0)
    result = pretrain(cfg, args, data, pretraining_evaluator(valid, cfg, args), RunOptions(progress=False))
    curve = [{k: r[k] for k in ("step", "mask_accuracy", "mlm_loss")}
             for r in result.history if r["split"] == "valid"]
    left = next((r["step"] for r in curve if r["mask_accuracy"] > 0.5), None)
    return {"optimizer": optimizer, "lr": lr, "warmup": args.warmup, "steps": steps, "batch": batch,
            "seconds": round(result.seconds, 1), "first_step_over_50pct": left, "curve": curve}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--arms", type=int, nargs="*", help="indices into ARMS (default: all)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    data, valid = permutation_chains(20000, seed=0), permutation_chains(500, seed=1)
    cfg = twin(64, 34, args.hidden)
    results = {"task": "permutation chains, V = 64, 32 tokens, 20,000 training and 500 held-out chains",
               "model": dataclasses.asdict(cfg), "threads": args.threads, "torch": torch.__version__,
               "arms": []}
    for i in args.arms if args.arms is not None else range(len(ARMS)):
        optimizer, lr, share = ARMS[i]
        start = time.perf_counter()
        arm = run_arm(cfg, data, valid, optimizer, lr, share, args.steps, args.batch, args.eval_every)
        results["arms"].append(arm)
        write_json(args.out, results)
        last = arm["curve"][-1]
        print(f"{optimizer:5s} lr {lr:.2e} warmup {arm['warmup']:4d}: >50% at step "
              f"{arm['first_step_over_50pct']}, final mask acc {last['mask_accuracy']:.3f} "
              f"({time.perf_counter() - start:.0f} s)",
              flush=True)
    print(json.dumps({"wrote": str(args.out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
