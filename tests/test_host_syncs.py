"""Host reads per training step: the CPU stand-in for a GPU's host syncs.

Every `.item()`, `int(t)`, `float(t)`, `bool(t)` and `.tolist()` on a tensor reads a value back to the host;
on a GPU each one stops the host from running ahead. The trainer's step reads what it logs, once.
"""

import pytest
import torch

from minialbert import AlbertConfig, AlbertForPretraining
from minialbert.optim import make_optimizer, warmup_linear_decay
from minialbert.pretraining_data import collate
from minialbert.train import TrainArgs, train_step

READS = ("item", "tolist", "__int__", "__float__", "__bool__", "__index__")
MAX_READS_PER_STEP = 2


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """One thread (conftest.one_thread)."""


def count_host_reads(monkeypatch) -> dict:
    """Wrap torch.Tensor's read-back methods with counters; returns the live counts."""
    counts = dict.fromkeys(READS, 0)
    for name in READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *a, _name=name, _original=original, **k):
            counts[_name] += 1
            return _original(self, *a, **k)
        monkeypatch.setattr(torch.Tensor, name, counted)
    return counts


def batch(cfg: AlbertConfig, size: int = 8, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    examples = []
    for _ in range(size):
        n = int(torch.randint(8, cfg.max_position_embeddings, (), generator=g))
        ids = torch.randint(5, cfg.vocab_size, (n,), generator=g)
        labels = torch.where(torch.rand(n, generator=g) < 0.15, ids, torch.full_like(ids, -100))
        examples.append({"input_ids": ids, "token_type_ids": torch.zeros(n, dtype=torch.long),
                         "mlm_labels": labels, "sentence_label": torch.tensor(n % 2)})
    return collate(examples)


@pytest.mark.parametrize("grad_accum", [1, 2])
def test_a_training_step_reads_back_at_most_twice(monkeypatch, grad_accum):
    cfg = AlbertConfig.preset("ci-albert")
    torch.manual_seed(0)
    model = AlbertForPretraining(cfg, "sop").train()
    args = TrainArgs(steps=4, batch_size=8, warmup=1, grad_accum=grad_accum, eval_every=0, checkpoint_every=0)
    optimizer = make_optimizer(args.optimizer, model, args.lr)
    scheduler = warmup_linear_decay(optimizer, args.warmup, args.steps)
    batches = [batch(cfg, 8 // grad_accum, seed) for seed in range(args.steps * grad_accum)]
    train_step(model, model, batches[:grad_accum], optimizer, scheduler, args)      # warm-up, uncounted
    counts = count_host_reads(monkeypatch)
    steps = args.steps - 1
    for s in range(1, args.steps):
        record = train_step(model, model, batches[s * grad_accum:(s + 1) * grad_accum], optimizer, scheduler,
                            args)
    monkeypatch.undo()
    per_step = sum(counts.values()) / steps
    assert per_step <= MAX_READS_PER_STEP, f"{per_step} host reads per step: {counts}"
    assert all(isinstance(record[k], float) for k in ("loss", "mlm_loss", "sop_loss", "grad_norm"))


def test_the_counter_sees_the_reads_it_counts(monkeypatch):
    counts = count_host_reads(monkeypatch)
    t = torch.tensor([1.5, 2.0])
    t.sum().item(), t.tolist(), int(t[1]), float(t[0]), bool(t[0] > 1)
    monkeypatch.undo()
    assert [counts[name] for name in READS] == [1, 1, 1, 1, 1, 0]
