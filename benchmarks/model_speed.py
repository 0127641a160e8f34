"""Parameters vs compute (the paper's Table 2) on this machine: fewer parameters is not faster.

For each of the paper's six presets (BERT-base/-large, ALBERT-base/-large/-xlarge/-xxlarge, vocabulary
30,000): parameters, forward FLOPs per token (by formula, `minialbert.forward_flops`, which a test
checks against a count of the model), training throughput (forward + backward + AdamW step, tokens/s),
inference throughput (encoder forward, tokens/s) and memory (parameters, optimizer state, and the
process's peak resident memory, of which the rest is activations, gradients and the allocator's
slack). Every preset runs in a fresh subprocess (so its peak memory is its own) on the same batch
shape, sequence 128, 15% of positions predicted. Each is timed for at least --seconds of steps
after one warm-up step, and at least --min-steps steps, so the largest models run fewer steps (the
JSON says how many). Speeds are relative to BERT-large measured in the same run, beside the paper's
Table 2 (measured on TPUs at sequence 512, batch 4096; labelled as the paper's).

    python benchmarks/model_speed.py                  # all six presets, batch 1 x 128, 2 threads
    python benchmarks/model_speed.py --only albert-base --only bert-base --seconds 3

Writes assets/benchmarks/model_speed.json and assets/figures/model_speed.png (+ .json).
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

import minialbert as ma
from minialbert.download import atomic_write

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "assets" / "benchmarks" / "model_speed.json"
PRESETS = ("bert-base", "bert-large", "albert-base", "albert-large", "albert-xlarge", "albert-xxlarge")
ANCHOR = "bert-large"
# The paper's Table 1 parameters and Table 2 training speed relative to BERT-large.
PAPER = {"bert-base": (108e6, 4.7), "bert-large": (334e6, 1.0), "albert-base": (12e6, 5.6),
         "albert-large": (18e6, 1.7), "albert-xlarge": (60e6, 0.6), "albert-xxlarge": (235e6, 0.3)}
MASK_RATE = 0.15


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024           # Linux reports KiB


def make_batch(cfg: ma.AlbertConfig, batch_size: int, seq_len: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, cfg.vocab_size, (batch_size, seq_len), generator=g)          # (B, N)
    predicted = torch.rand(batch_size, seq_len, generator=g) < MASK_RATE
    return dict(input_ids=ids, token_type_ids=(torch.arange(seq_len) >= seq_len // 2).long().expand_as(ids),
                mlm_labels=torch.where(predicted, ids, torch.full_like(ids, -100)),
                sentence_labels=torch.randint(0, 2, (batch_size,), generator=g)), int(predicted.sum())


def timed(step, seconds: float, min_steps: int) -> tuple[float, int]:
    """Seconds per call of step(), after one warm-up call, over at least `seconds` and `min_steps`."""
    step()
    n, start = 0, time.perf_counter()
    while n < min_steps or time.perf_counter() - start < seconds:
        step()
        n += 1
    return (time.perf_counter() - start) / n, n


def measure(preset: str, batch_size: int, seq_len: int, seconds: float, min_steps: int) -> dict:
    """One preset, in this process: throughput and memory (run it in a fresh process)."""
    torch.manual_seed(0)
    baseline = peak_rss_bytes()
    cfg = ma.AlbertConfig.preset(preset, hidden_dropout_prob=0.0, attention_dropout_prob=0.0)
    model = ma.AlbertForPretraining(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)      # tiny lr: weights stay sane
    batch, predicted = make_batch(cfg, batch_size, seq_len)
    tokens = batch_size * seq_len

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        model(**batch).loss.backward()
        optimizer.step()

    model.train()
    train_s, train_steps = timed(train_step, seconds, min_steps)
    state_bytes = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values()
                      if torch.is_tensor(t))
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    with torch.inference_mode():
        infer_s, infer_steps = timed(lambda: model.albert(batch["input_ids"], batch["token_type_ids"]),
                                     seconds, min_steps)
    flops = ma.forward_flops(cfg, seq_len, predicted=round(MASK_RATE * seq_len))
    return {"preset": preset, "parameters": ma.count_parameters(cfg),
            "parameters_with_heads": sum(p.numel() for p in model.parameters()),
            "layers": cfg.num_layers, "hidden": cfg.hidden_size, "embedding": cfg.embedding_size,
            "sharing": cfg.sharing, "forward_flops_per_token": sum(flops.values()) / seq_len,
            "forward_flops_by_part": flops, "predicted_positions_in_batch": predicted,
            "train_tokens_per_s": tokens / train_s, "train_steps_timed": train_steps,
            "infer_tokens_per_s": tokens / infer_s, "infer_steps_timed": infer_steps,
            "train_gflops_per_s": 3 * sum(flops.values()) * batch_size / train_s / 1e9,
            "param_bytes": param_bytes, "optimizer_state_bytes": state_bytes,
            "peak_rss_bytes": peak_rss_bytes(), "baseline_rss_bytes": baseline}


def run_in_subprocess(preset: str, a: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--worker", preset, "--batch-size", str(a.batch_size),
           "--seq-len", str(a.seq_len), "--seconds", str(a.seconds), "--min-steps", str(a.min_steps),
           "--threads", str(a.threads)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{preset} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", action="append", choices=PRESETS, help="measure this preset (repeatable)")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--seconds", type=float, default=5.0, help="least timed seconds per measurement")
    p.add_argument("--min-steps", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.worker:
        print(json.dumps(measure(a.worker, a.batch_size, a.seq_len, a.seconds, a.min_steps)))
        return
    names = list(dict.fromkeys([ANCHOR, *(a.only or PRESETS)]))           # the anchor always runs
    rows = {}
    for name in names:
        rows[name] = r = run_in_subprocess(name, a)
        print(f"{name:15s} {r['parameters'] / 1e6:7.1f}M params  {r['forward_flops_per_token'] / 1e9:6.2f} "
              f"GFLOP/token fwd  train {r['train_tokens_per_s']:8.1f} tok/s ({r['train_steps_timed']} "
              f"steps)  infer {r['infer_tokens_per_s']:8.1f} tok/s  "
              f"peak {r['peak_rss_bytes'] / 2**30:5.2f} GiB",
              flush=True)
    anchor = rows[ANCHOR]
    print(f"\n{'model':15s} {'params':>8s} {'train speed vs ' + ANCHOR:>24s} {'paper (TPU, seq 512)':>21s} "
          f"{'infer vs ' + ANCHOR:>19s}")
    for name, r in rows.items():
        r["train_speed_vs_anchor"] = r["train_tokens_per_s"] / anchor["train_tokens_per_s"]
        r["infer_speed_vs_anchor"] = r["infer_tokens_per_s"] / anchor["infer_tokens_per_s"]
        r["parameters_vs_anchor"] = r["parameters"] / anchor["parameters"]
        r["paper_parameters"], r["paper_speed_vs_anchor"] = PAPER[name]
        print(f"{name:15s} {r['parameters'] / 1e6:7.1f}M {r['train_speed_vs_anchor']:23.2f}x "
              f"{r['paper_speed_vs_anchor']:20.1f}x {r['infer_speed_vs_anchor']:18.2f}x")
    record = {"rows": rows, "anchor": ANCHOR, "batch_size": a.batch_size, "seq_len": a.seq_len,
              "mask_rate": MASK_RATE, "threads": a.threads, "min_seconds": a.seconds,
              "machine": platform.processor() or platform.machine(), "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d"),
              "paper_setup": "Table 2 of the paper: TPU v3, sequence 512, batch 4096, speed relative to "
                             "BERT-large; parameters from Table 1"}
    atomic_write(OUT, (json.dumps(record, indent=1) + "\n").encode())
    if not a.only:                                   # the figure only from a full run
        from minialbert.course.figures import model_speed
        from minialbert.course.plots import figure_dir, save_figure
        from minialbert.course.scale import SCALES

        fig, numbers = model_speed()                             # drawn from the JSON just written
        save_figure(fig, "model_speed", numbers, figure_dir(SCALES["course"]))
    print(f"\nwrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
