"""One pretraining step (forward, backward, optimizer) of minialbert vs transformers.AlbertForPreTraining.

Same config, batch, sequence length, masking rate (15%), optimizer and thread count; the two models
alternate in one process so both see the same machine state. Prints tokens/s for each and the ratio.

    python benchmarks/train_step.py                      # course-albert preset, batch 32 x 128
    python benchmarks/train_step.py --preset ci-albert --batch-size 8 --seq-len 64
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
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--mask-rate", type=float, default=0.15)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per model")
    p.add_argument("--rounds", type=int, default=6, help="timed rounds; each round runs one step of each")
    args = p.parse_args()

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


if __name__ == "__main__":
    main()
