"""One pretraining step (forward, backward, optimizer) of minialbert vs transformers.AlbertForPreTraining.

Same config, batch, sequence length, masking rate (15%), optimizer and thread count; the two models
alternate in one process so both see the same machine state. Prints tokens/s for each and the ratio.

    python benchmarks/train_step.py                      # course-albert preset, batch 64 x 32 (the course's)
    python benchmarks/train_step.py --preset ci-albert --batch-size 8 --seq-len 64

On a CUDA GPU, benchmarks/train_step_gpu.py times the gpu scale's step (backends, torch.compile, ragged
batches, host syncs) against transformers.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

import minialbert as ma


def hf_model(cfg: ma.AlbertConfig):
    import transformers

    hf_cfg = transformers.AlbertConfig(
        vocab_size=cfg.vocab_size, embedding_size=cfg.embedding_size, hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
        intermediate_size=cfg.intermediate_size, hidden_act=cfg.hidden_act,
        hidden_dropout_prob=cfg.hidden_dropout_prob, attention_probs_dropout_prob=cfg.attention_dropout_prob,
        classifier_dropout_prob=cfg.classifier_dropout_prob,
        max_position_embeddings=cfg.max_position_embeddings, type_vocab_size=cfg.type_vocab_size,
        layer_norm_eps=cfg.layer_norm_eps, num_hidden_groups=cfg.num_hidden_groups,
        inner_group_num=cfg.inner_group_num)
    return transformers.AlbertForPreTraining(hf_cfg)


def make_batch(cfg: ma.AlbertConfig, batch_size: int, seq_len: int, mask_rate: float, seed: int):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, cfg.vocab_size, (batch_size, seq_len), generator=g)
    predicted = torch.rand(batch_size, seq_len, generator=g) < mask_rate
    mlm_labels = torch.where(predicted, input_ids, torch.full_like(input_ids, -100))
    token_type_ids = (torch.arange(seq_len) >= seq_len // 2).long().expand(batch_size, -1).contiguous()
    attention_mask = torch.ones_like(input_ids)
    sentence_labels = torch.randint(0, 2, (batch_size,), generator=g)
    return input_ids, token_type_ids, attention_mask, mlm_labels, sentence_labels


def ours_step(model, opt, batch):
    ids, types, mask, mlm_labels, sentence_labels = batch
    loss = model(ids, types, mask, mlm_labels=mlm_labels, sentence_labels=sentence_labels).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def hf_step(model, opt, batch):
    ids, types, mask, mlm_labels, sentence_labels = batch
    loss = model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=mlm_labels,
                 sentence_order_label=sentence_labels).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="course-albert", help="AlbertConfig preset (default course-albert)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--mask-rate", type=float, default=0.15)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per model")
    p.add_argument("--rounds", type=int, default=6, help="timed rounds; each round runs one step of each")
    p.add_argument("--full", action="store_true",
                   help="time the full trainer step on the course data instead (see full_step_benchmark)")
    args = p.parse_args()
    if args.full:
        return full_step_benchmark(args)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = ma.AlbertConfig.preset(args.preset)
    batch = make_batch(cfg, args.batch_size, args.seq_len, args.mask_rate, seed=0)
    contenders = {}
    for name, model, step in (("minialbert", ma.AlbertForPretraining(cfg, "sop"), ours_step),
                              ("transformers", hf_model(cfg), hf_step)):
        model.train()
        contenders[name] = (model, torch.optim.AdamW(model.parameters(), lr=1e-4), step)

    times = {name: [] for name in contenders}
    for r in range(args.warmup + args.rounds):
        order = list(contenders) if r % 2 == 0 else list(reversed(contenders))  # alternate who goes first
        for name in order:
            model, opt, step = contenders[name]
            t0 = time.perf_counter()
            step(model, opt, batch)
            if r >= args.warmup:
                times[name].append(time.perf_counter() - t0)

    tokens = args.batch_size * args.seq_len
    import transformers

    print(f"preset {args.preset}, batch {args.batch_size} x {args.seq_len}, mask rate {args.mask_rate}, "
          f"{args.threads} threads, {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}")
    rate = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        rate[name] = tokens / med
        print(f"{name:>13}: median step {med * 1e3:8.1f} ms  ->  {rate[name]:9.0f} tokens/s  "
              f"(min {min(ts) * 1e3:.1f} ms, max {max(ts) * 1e3:.1f} ms over {len(ts)} steps)")
    print(f"ratio minialbert / transformers: {rate['minialbert'] / rate['transformers']:.2f}x")


# ---------------------------------------------------------------------------------------------
# --full: the whole trainer step (DataLoader + forward + backward + clip + LAMB + schedule), real data

def train_flops(cfg: ma.AlbertConfig, batch: dict) -> float:
    """Forward + backward FLOPs of one batch (matmuls only, 3x the forward's 2 x MACs)."""
    B, N = batch["input_ids"].shape
    H, E, F_, L = cfg.hidden_size, cfg.embedding_size, cfg.intermediate_size, cfg.num_layers
    M = int((batch["mlm_labels"] != -100).sum())                  # predicted positions (the TF trick)
    per_token = E * H + L * (4 * H * H + 2 * H * F_ + 2 * N * H)   # projection, layers, attention
    macs = B * N * per_token + M * (H * E + E * cfg.vocab_size) + B * (H * H + 2 * H)
    return 3 * 2 * macs


def matmul_flops_per_s(n: int = 2048, repeats: int = 10) -> float:
    """The machine's fp32 matmul throughput at the current thread count: the roofline we compare to."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n ** 3 * repeats / (time.perf_counter() - t0)


def hf_train_step(model, batch, optimizer, scheduler, clip_norm: float) -> None:
    """The same step for transformers.AlbertForPreTraining: full-size labels, its own loss."""
    loss = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                 attention_mask=batch["attention_mask"], labels=batch["mlm_labels"],
                 sentence_order_label=batch["sentence_labels"]).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


def full_step_benchmark(args: argparse.Namespace) -> None:
    from minialbert.course.data import course_pretraining_data
    from minialbert.course.scale import current_scale
    from minialbert.optim import make_optimizer, warmup_linear_decay
    from minialbert.pretraining_data import collate
    from minialbert.train import StepBatches, TrainArgs, train_step

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = ma.AlbertConfig.preset(args.preset)
    data = course_pretraining_data("sop", "train", current_scale().data)
    steps = args.warmup + args.rounds
    targs = TrainArgs(objective="sop", steps=steps, batch_size=args.batch_size, warmup=1, eval_every=0,
                      checkpoint_every=0)
    loaders = {}
    for name in ("minialbert", "transformers"):                   # each reads the same batches in order
        sampler = StepBatches.for_run(len(data), targs)
        loaders[name] = iter(torch.utils.data.DataLoader(data, batch_sampler=sampler, collate_fn=collate))
    ours = ma.AlbertForPretraining(cfg, "sop").train()
    theirs = hf_model(cfg).train()
    models = {"minialbert": ours, "transformers": theirs}
    opts = {name: make_optimizer("lamb", m, targs.lr) for name, m in models.items()}
    scheds = {name: warmup_linear_decay(o, targs.warmup, steps) for name, o in opts.items()}

    times = {name: [] for name in opts}
    data_times, tokens, flops = [], [], []
    for r in range(steps):
        order = ["minialbert", "transformers"] if r % 2 == 0 else ["transformers", "minialbert"]
        for name in order:
            t0 = time.perf_counter()
            batch = next(loaders[name])                              # DataLoader: sampling + collate
            t_data = time.perf_counter() - t0
            if name == "minialbert":
                train_step(ours, ours, [batch], opts[name], scheds[name], targs)
            else:
                hf_train_step(theirs, batch, opts[name], scheds[name], targs.clip_norm)
            if r >= args.warmup:
                times[name].append(time.perf_counter() - t0)
                if name == "minialbert":
                    data_times.append(t_data)
                    tokens.append(batch["input_ids"].numel())
                    flops.append(train_flops(cfg, batch))
    peak = matmul_flops_per_s()
    import transformers

    print(f"--full: preset {args.preset}, course SOP data, batch {args.batch_size} (padded to the longest), "
          f"{args.threads} threads, {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}; both use LAMB + clip 1.0 + warmup/decay schedule")
    rate = {name: sum(tokens) / sum(ts) for name, ts in times.items()}
    for name, ts in times.items():
        print(f"{name:>13}: mean step {statistics.mean(ts) * 1e3:8.1f} ms -> {rate[name]:8.0f} tokens/s "
              f"(median {statistics.median(ts) * 1e3:.1f} ms over {len(ts)} steps)")
    print(f"ratio minialbert / transformers: {rate['minialbert'] / rate['transformers']:.2f}x")
    achieved = sum(flops) / sum(times["minialbert"])
    print(f"minialbert achieved {achieved / 1e9:.1f} GFLOP/s = {achieved / peak:.0%} of the measured fp32 "
          f"matmul throughput ({peak / 1e9:.1f} GFLOP/s, 2048^3)")
    print(f"DataLoader share of the minialbert step: {sum(data_times) / sum(times['minialbert']):.2%} "
          f"({statistics.mean(data_times) * 1e3:.2f} ms per batch)")


if __name__ == "__main__":
    main()
