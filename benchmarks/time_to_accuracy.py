"""Time to accuracy: minialbert's course recipe vs transformers.AlbertForPreTraining trained as its users do.

Both train the scale's course ALBERT (same config) on the same pre-masked course data (MLM + SOP),
in one process on the same threads, for the same wall-clock budget (a zoo entry's), and both are
scored by the same held-out evaluation (`minialbert.evaluation`, on the whole held-out split) every
`--eval-seconds` of training time; evaluation time is not counted. transformers is trained the way
its users would: torch AdamW (no decay on biases and LayerNorm, as its Trainer does), a linear
schedule over the steps that fit in the budget, gradient clipping at 1.0, its own loss; its peak
learning rate is the best of a 3-point sweep (around ours, 3e-3) run at a quarter of the budget,
judged by held-out [MASK] loss (accuracy does not separate runs still on the unigram plateau). Its
weights are copied into minialbert (`minialbert.hf.from_hf`, parity-tested) only to be evaluated.

    python benchmarks/time_to_accuracy.py                 # course scale, the zoo's budget
    python benchmarks/time_to_accuracy.py --minutes 2 --hf-lrs 1e-3   # a quick look

Prints both curves and the ratio of wall-clock times to reach transformers' final held-out [MASK]
accuracy; writes assets/benchmarks/time_to_accuracy.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

import minialbert as ma
from minialbert.course.data import course_pretraining_data
from minialbert.course.scale import current_scale
from minialbert.download import atomic_write
from minialbert.evaluation import MLMBaselines, evaluate_pretraining
from minialbert.optim import make_optimizer, warmup_linear_decay
from minialbert.train import StepBatches, TrainArgs, train_step

OUT = Path(__file__).resolve().parents[1] / "assets" / "benchmarks" / "time_to_accuracy.json"


def hf_model(cfg: ma.AlbertConfig, seed: int):
    import transformers

    _, config = ma.hf.to_hf(ma.AlbertForPretraining(cfg, "sop"))          # for the config only
    torch.manual_seed(seed)
    model = transformers.AlbertForPreTraining(transformers.AlbertConfig(**config))
    return model, config


def hf_optimizer(model, lr: float, weight_decay: float = 0.01):
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    rest = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=lr)


def hf_step(model, batch, optimizer, scheduler) -> None:
    loss = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                 attention_mask=batch["attention_mask"], labels=batch["mlm_labels"],
                 sentence_order_label=batch["sentence_labels"]).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


class Contender:
    """One training run driven step by step, timed, and evaluated every `eval_seconds` of training."""

    def __init__(self, name, step_fn, as_minialbert, batches, evaluate, eval_seconds: float):
        self.name, self.step_fn, self.as_minialbert = name, step_fn, as_minialbert
        self.batches, self.evaluate, self.eval_seconds = batches, evaluate, eval_seconds
        self.seconds, self.steps, self.curve = 0.0, 0, []

    def run(self, budget_seconds: float, max_steps: int) -> list[dict]:
        next_eval = self.eval_seconds
        while self.seconds < budget_seconds and self.steps < max_steps:
            batch = next(self.batches)
            start = time.perf_counter()
            self.step_fn(batch)
            self.seconds += time.perf_counter() - start
            self.steps += 1
            if self.seconds >= next_eval or self.seconds >= budget_seconds or self.steps == max_steps:
                self.record()
                next_eval += self.eval_seconds
        return self.curve

    def record(self) -> None:
        ev = self.evaluate(self.as_minialbert())
        point = {"seconds": round(self.seconds, 1), "step": self.steps, "mask": ev["mlm"]["mask"],
                 "all": ev["mlm"]["all"], "mask_loss": ev["mask_loss"], "sop": ev["sentence"]}
        self.curve.append(point)
        print(f"{self.name:>12} {point['seconds']:6.0f}s step {self.steps:5d}  [MASK] "
              f"{100 * point['mask']['accuracy']:5.1f}% (loss {point['mask_loss']:.2f})  "
              f"SOP {100 * point['sop']['accuracy']:5.1f}%", flush=True)


def loader(data, args: TrainArgs):
    from minialbert.pretraining_data import collate
    sampler = StepBatches.for_run(len(data), args)
    return iter(torch.utils.data.DataLoader(data, batch_sampler=sampler, collate_fn=collate,
                                            generator=torch.Generator()))


def time_to(curve: list[dict], accuracy: float) -> float | None:
    return next((p["seconds"] for p in curve if p["mask"]["accuracy"] >= accuracy), None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", default="course")
    p.add_argument("--minutes", type=float, help="wall-clock budget (default: a zoo entry's, measured)")
    p.add_argument("--hf-lrs", default="3e-4,1e-3,3e-3", help="transformers peak learning rates to sweep")
    p.add_argument("--eval-seconds", type=float, default=60.0)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    scale = current_scale(a.scale)
    cfg = ma.AlbertConfig.preset(scale.models.albert_preset)
    ours_args = scale.recipe.train_args(objective="sop", steps=scale.zoo.steps)
    budget = 60 * (a.minutes or scale.zoo.steps * scale.recipe.step_seconds / 60)
    train = course_pretraining_data("sop", "train", scale.data)
    valid = course_pretraining_data("sop", "valid", scale.data)
    baselines = MLMBaselines.fit(train, cfg.vocab_size)
    untrained = ma.AlbertForPretraining(cfg, "sop")
    unigram = evaluate_pretraining(untrained, valid, baselines)["baselines"]["unigram"]

    def evaluate(model):
        return evaluate_pretraining(model, valid, baselines)

    def run_hf(lr: float, seconds: float) -> tuple[list[dict], float]:
        probe = scale.recipe.train_args(objective="sop", steps=10 ** 6)
        throwaway, _ = hf_model(cfg, seed=0)                          # how many steps fit in the budget?
        opt = hf_optimizer(throwaway, lr)
        sched, batches = warmup_linear_decay(opt, 0, 10 ** 6), loader(train, probe)
        start = time.perf_counter()
        for _ in range(5):
            hf_step(throwaway, next(batches), opt, sched)
        steps = max(10, int(seconds * 5 / (time.perf_counter() - start)))
        model, config = hf_model(cfg, seed=0)
        opt = hf_optimizer(model, lr)
        warmup = round(steps * ours_args.warmup / ours_args.steps)    # the same warmup share as ours
        sched = warmup_linear_decay(opt, warmup, steps)
        c = Contender(f"hf lr {lr:g}", lambda b: hf_step(model, b, opt, sched),
                      lambda: ma.hf.from_hf(model.state_dict(), config).eval(), loader(train, probe),
                      evaluate, a.eval_seconds)
        model.train()
        return c.run(seconds, steps), steps

    import transformers
    print(f"{scale.models.albert_preset}, {train.max_seq_len}-token examples, batch {ours_args.batch_size}, "
          "budget "
          f"{budget / 60:.1f} min, {a.threads} threads, torch {torch.__version__}, transformers "
          f"{transformers.__version__}", flush=True)
    sweep = {}
    for lr in (float(x) for x in a.hf_lrs.split(",")):
        curve, _ = run_hf(lr, budget / 4)
        sweep[lr] = curve
    best_lr = min(sweep, key=lambda lr: sweep[lr][-1]["mask_loss"])
    print(f"transformers: best peak lr of the sweep {best_lr:g}", flush=True)
    hf_curve, hf_steps = run_hf(best_lr, budget)

    torch.manual_seed(ours_args.seed)
    model = ma.AlbertForPretraining(cfg, "sop")
    opt = make_optimizer(ours_args.optimizer, model, ours_args.lr, ours_args.weight_decay)
    sched = warmup_linear_decay(opt, ours_args.warmup, ours_args.steps)
    model.train()
    ours = Contender("minialbert", lambda b: train_step(model, model, [b], opt, sched, ours_args),
                     lambda: model, loader(train, ours_args), evaluate, a.eval_seconds)
    ours_curve = ours.run(budget, ours_args.steps)

    target = hf_curve[-1]["mask"]
    unigram = unigram["mask"]
    hf_left_plateau = target["ci95"][0] > unigram["ci95"][1]
    t_ours, t_hf = time_to(ours_curve, target["accuracy"]), time_to(hf_curve, target["accuracy"])
    ratio = t_hf / t_ours if (t_ours and t_hf and hf_left_plateau) else None
    if ratio:
        verdict = (f"time to transformers' final [MASK] accuracy {100 * target['accuracy']:.1f}%: minialbert "
                   f"{t_ours:.0f} s vs transformers {t_hf:.0f} s -> {ratio:.2f}x")
    else:
        verdict = (f"transformers did not leave the unigram plateau in {budget / 60:.1f} min ([MASK] "
                   f"{100 * target['accuracy']:.1f}% vs unigram {100 * unigram['accuracy']:.1f}%); "
                   f"minialbert reached {100 * ours_curve[-1]['mask']['accuracy']:.1f}% in the same time")
    print(verdict)
    atomic_write(OUT, (json.dumps({
        "description": __doc__.split("\n")[0], "scale": scale.name, "preset": scale.models.albert_preset,
        "budget_seconds": budget, "threads": a.threads, "machine": platform.processor() or platform.machine(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "date": time.strftime("%Y-%m-%d"), "ours": {"args": vars(ours_args), "curve": ours_curve},
        "transformers": {"best_lr": best_lr, "steps": hf_steps, "curve": hf_curve,
                         "sweep": {str(lr): c for lr, c in sweep.items()}},
        "unigram_mask": unigram, "ratio": ratio, "verdict": verdict}, indent=1) + "\n").encode())


if __name__ == "__main__":
    main()
