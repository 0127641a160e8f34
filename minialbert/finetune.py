"""Fine-tuning: the loop that trains a classification head (model.AlbertForSequenceClassification) on
the pooled [CLS] output. The encoder comes from a pretraining checkpoint (transfer) or is built from
scratch.

The loop reuses the pretraining trainer's pieces (optim.make_optimizer, warmup_linear_decay, the
data order, train.optimizer_step with its gradient clipping, atomic checkpoints, the run lock and
metrics.jsonl) and adds what fine-tuning needs: evaluation on the dev split with the task's metric,
and early stopping.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from .checkpoint import NonFiniteError, find_checkpoint, load_checkpoint, save_checkpoint
from .config import AlbertConfig
from .device import choose_device, choose_precision
from .evaluation import task_metrics
from .inputs import check_batch
from .labelled_task import Example, Task
from .model import AlbertForPretraining, AlbertForSequenceClassification
from .optim import make_optimizer, warmup_linear_decay
from .run_directory import RunDirectory
from .tokenizer import PAD_ID
from .train import StepBatches, optimizer_step


# ---------------------------------------------------------------------------------- data
def encode_examples(examples: Sequence[Example], tokenizer, max_seq_len: int) -> list[dict]:
    """[CLS] A [SEP] (B [SEP]) ids, token types and the label of each example (longer pairs are cut)."""
    encoded = []
    for ex in examples:
        ids, types = tokenizer.encode_pair(ex.text_a, ex.text_b, max_len=max_seq_len)
        label = torch.tensor(ex.label, dtype=torch.float32 if isinstance(ex.label, float) else torch.int64)
        encoded.append({"input_ids": torch.tensor(ids), "token_type_ids": torch.tensor(types),
                        "label": label})
    return encoded


def collate_classification(examples: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Right-pad to the longest example: the batch AlbertForSequenceClassification(**batch) takes."""
    B, N = len(examples), max(len(ex["input_ids"]) for ex in examples)
    batch = {"input_ids": torch.full((B, N), PAD_ID, dtype=torch.long),           # (B, N)
             "token_type_ids": torch.zeros((B, N), dtype=torch.long),
             "attention_mask": torch.zeros((B, N), dtype=torch.long)}
    for b, ex in enumerate(examples):
        n = len(ex["input_ids"])
        batch["input_ids"][b, :n] = ex["input_ids"]
        batch["token_type_ids"][b, :n] = ex["token_type_ids"]
        batch["attention_mask"][b, :n] = 1
    batch["labels"] = torch.stack([ex["label"] for ex in examples])               # (B,)
    return batch


# ---------------------------------------------------------------------------------- the loop
@dataclass
class FinetuneArgs:
    steps: int = 300               # most optimizer steps (early stopping may end sooner)
    batch_size: int = 16           # examples per step (fewer when the training set is smaller)
    lr: float = 3e-4               # peak learning rate (AdamW)
    warmup: int = 30               # linear warmup steps, then linear decay to 0 at `steps`
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    seed: int = 0                  # head initialisation, data order, dropout
    eval_every: int = 25           # steps between evaluations on the dev split
    patience: int = 4              # evaluations without a better dev metric before stopping (0: never stop)
    max_seq_len: int = 128         # longer inputs are cut (the longer segment first)
    dev_examples: int | None = 1000  # dev examples per evaluation: a fixed seeded sample (None: all)
    test_examples: int | None = None  # test examples scored at the end: a fixed seeded sample (None: all)
    freeze_encoder: bool = False   # train the head alone (a linear probe of the pooled output)

    def __post_init__(self) -> None:
        for name, low in dict(steps=1, batch_size=1, warmup=0, seed=0, eval_every=1, patience=0,
                              max_seq_len=3).items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.warmup > self.steps:
            raise ValueError(f"warmup {self.warmup} must be between 0 and steps {self.steps}")
        for name in ("lr", "clip_norm", "weight_decay"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 or (
                    value == 0 and name != "weight_decay"):
                raise ValueError(f"{name} must be a finite number > 0 (weight_decay >= 0), got {value!r}")


@dataclass
class FinetuneResult:
    model: AlbertForSequenceClassification   # with the weights of the best dev evaluation, in eval mode
    history: list[dict]                      # every metrics record (also in out_dir/metrics.jsonl)
    best_step: int
    dev: dict                                # task metrics of the best model on the dev sample
    test: dict | None                        # ... and on the test split, if the task has one
    stopped_early: bool
    seconds: float


@torch.no_grad()
def evaluate_classifier(model: AlbertForSequenceClassification, encoded: Sequence[dict],
                        batch_size: int = 64, documents: Sequence[int | None] | None = None) -> dict:
    """Task metrics (evaluation.task_metrics) of the model's predictions on encoded examples (their
    interval resampling documents where each example's is given)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    predicted, labels = [], []
    for start in range(0, len(encoded), batch_size):
        batch = collate_classification(encoded[start:start + batch_size])
        logits = model(batch["input_ids"].to(device), batch["token_type_ids"].to(device),
                       batch["attention_mask"].to(device)).logits.float()       # (B, num_labels)
        predicted += (logits.squeeze(-1) if model.num_labels == 1 else logits.argmax(-1)).tolist()
        labels += batch["labels"].tolist()
    model.train(was_training)
    return task_metrics(predicted, labels, model.num_labels, documents)


def _dev_sample(examples: list[Example], n: int | None) -> list[Example]:
    if n is None or n >= len(examples):
        return examples
    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(0))[:n]
    return [examples[i] for i in sorted(order.tolist())]


def finetune(model: AlbertForSequenceClassification, task: Task, tokenizer, args: FinetuneArgs,
             train_examples: Sequence[Example] | None = None, out_dir: str | Path | None = None,
             progress: bool = True, callbacks: Iterable[Callable[[dict], None]] = (),
             device: str | None = None) -> FinetuneResult:
    """Fine-tune `model` on `train_examples` (default: all of task.train), evaluating on the task's dev
    split every `eval_every` steps and keeping the weights of the best evaluation (the task's metric);
    stops after `patience` evaluations without improvement. With out_dir: metrics.jsonl, config.json,
    train_args.json and the best checkpoint (checkpoints/step-N, the trainer's atomic format).
    device: see device.choose_device (None: CUDA, MPS or CPU)."""
    if tokenizer.vocab_size != model.config.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocab_size} pieces but the model's vocab_size is "
                         f"{model.config.vocab_size}: the encoder was pretrained with another vocabulary")
    if model.num_labels != task.num_labels:
        raise ValueError(f"the model has {model.num_labels} outputs but task {task.name} has "
                         f"{task.num_labels} labels")
    out_dir = Path(out_dir) if out_dir is not None else None
    if out_dir is not None and find_checkpoint(out_dir) is not None:
        raise FileExistsError(f"{out_dir} already holds a run; choose another output directory")
    with RunDirectory(out_dir, model.config, args, callbacks) as run:
        return _finetune(model, task, tokenizer, args, train_examples=train_examples, run=run,
                         progress=progress, device=device)


def _finetune(model: AlbertForSequenceClassification, task: Task, tokenizer, args: FinetuneArgs, *,
              train_examples: Sequence[Example] | None, run: RunDirectory, progress: bool,
              device: str | None) -> FinetuneResult:
    """finetune's run, in its run directory (locked when it has one)."""
    t0 = time.perf_counter()
    device = choose_device(device)
    precision = choose_precision(device)
    scaler = precision.grad_scaler()              # float16 (sm_70/sm_75) only; a pass-through otherwise
    max_len = min(args.max_seq_len, model.config.max_position_embeddings)
    train = encode_examples(task.train if train_examples is None else train_examples, tokenizer, max_len)
    dev = encode_examples(_dev_sample(task.dev, args.dev_examples), tokenizer, max_len)
    if not train or not dev:
        raise ValueError(f"task {task.name} needs training and dev examples; got {len(train)} and {len(dev)}")
    for encoded in (train, dev):                  # once, here: the model's forward checks nothing
        whole = collate_classification(encoded)
        check_batch(model.config, whole["input_ids"], whole["token_type_ids"], whole["attention_mask"])

    torch.manual_seed(args.seed)
    model.to(device).train()
    for p in model.albert.parameters():
        p.requires_grad_(not args.freeze_encoder)
    optimizer = make_optimizer("adamw", model, args.lr, args.weight_decay)
    scheduler = warmup_linear_decay(optimizer, args.warmup, args.steps)
    # The pretraining data order: a seeded permutation per epoch, one batch per step.
    order = StepBatches(len(train), min(args.batch_size, len(train)), args.steps, args.seed)
    loader = torch.utils.data.DataLoader(train, batch_sampler=order,
                                         collate_fn=collate_classification, generator=torch.Generator())
    history, out_dir = run.history, run.out_dir
    best, best_step, best_state, waited, stopped_early = -math.inf, 0, None, 0, False

    bar = tqdm(total=args.steps, disable=not progress, desc=f"finetune {task.name}")
    try:
        for step, batch in enumerate(loader, start=1):
            batch = {k: v.to(device) for k, v in batch.items()}
            with precision.autocast():
                loss = model(**batch).loss
            if not torch.isfinite(loss):
                raise NonFiniteError(f"step {step}: the loss is {loss.item()}; lower the learning rate")
            scaler.scale(loss).backward()
            grad_norm, lr = optimizer_step(model, optimizer, scheduler, scaler, args.clip_norm)
            run.record({"step": step, "split": "train", "loss": loss.item(), "lr": lr,
                        "grad_norm": float(grad_norm)})
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
            if step % args.eval_every and step != args.steps:
                continue
            metrics = evaluate_classifier(model, dev)
            run.record({"step": step, "split": "dev", **metrics})
            if metrics[task.metric] > best:
                best, best_step, waited = metrics[task.metric], step, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                if out_dir is not None:
                    state = {"step": step, "task": task.name, "num_labels": model.num_labels,
                             "metric": task.metric, "best": best, "args": dataclasses.asdict(args),
                             "metrics": history}
                    save_checkpoint(out_dir, model, optimizer, scheduler, state, keep_last=1)
            else:
                waited += 1
                if args.patience and waited >= args.patience:
                    stopped_early = True
                    break
    finally:
        bar.close()
    model.load_state_dict(best_state)
    model.eval()
    dev_metrics = next(r for r in history if r["split"] == "dev" and r["step"] == best_step)
    dev_metrics = {k: v for k, v in dev_metrics.items() if k not in ("step", "split")}
    tested = _dev_sample(task.test, args.test_examples)
    test = (evaluate_classifier(model, encode_examples(tested, tokenizer, max_len),
                                documents=[ex.document for ex in tested]) if tested else None)
    seconds = time.perf_counter() - t0
    return FinetuneResult(model, history, best_step, dev_metrics, test, stopped_early, seconds)


def learning_curve(task: Task, tokenizer, starts: dict[str, AlbertForPretraining | AlbertConfig],
                   sizes: Sequence[int | None], seeds: Sequence[int], args: FinetuneArgs,
                   progress: bool = True) -> list[dict]:
    """Fine-tune every start on `n` labelled examples for every n in `sizes` (None: all) and seed.

    starts maps a name to a pretrained model (its encoder is copied, the model is left as it is) or to
    an AlbertConfig (a randomly initialised encoder: from scratch). The seed decides the labelled
    sample (task.subset), the new head, dropout and the data order, so every start sees the same
    examples in the same order. Returns one row per run: start, labels, seed, best step, seconds and the
    task metrics on the dev sample (model selection) and on the test split (the figure to report).
    """
    rows = []
    runs = [(name, n, seed) for name in starts for n in sizes for seed in seeds]
    for name, n, seed in tqdm(runs, disable=not progress, desc=f"learning curve {task.name}"):
        torch.manual_seed(seed)                                        # the new head (and scratch encoder)
        start = starts[name]
        model = (AlbertForSequenceClassification(start, task.num_labels) if isinstance(start, AlbertConfig)
                 else AlbertForSequenceClassification.from_pretraining(start, task.num_labels))
        train = task.subset(n, seed)
        result = finetune(model, task, tokenizer, dataclasses.replace(args, seed=seed), train_examples=train,
                          progress=False)
        rows.append({"start": name, "labels": len(train), "seed": seed, "best_step": result.best_step,
                     "seconds": round(result.seconds, 2), "dev": result.dev, "test": result.test})
    return rows


def curve_summary(rows: Sequence[dict], metric: str, split: str = "test") -> list[dict]:
    """One point per (start, labels) of learning_curve rows: the metric's mean, min and max over seeds."""
    points: dict[tuple[str, int], list[float]] = {}
    for r in rows:
        points.setdefault((r["start"], r["labels"]), []).append(r[split][metric])
    return [{"start": start, "labels": n, "seeds": len(v), "mean": sum(v) / len(v), "min": min(v),
             "max": max(v)} for (start, n), v in points.items()]


def classifier_from_checkpoint(path: str | Path, num_labels: int) -> AlbertForSequenceClassification:
    """The encoder of a pretraining run (a run directory or one of its step-* directories) under a new
    head of num_labels outputs."""
    return AlbertForSequenceClassification.from_pretraining(load_checkpoint(path), num_labels)


def load_finetuned(path: str | Path, device: str | torch.device = "cpu") -> AlbertForSequenceClassification:
    """The best model of a fine-tuning run (its run directory or step directory), in eval mode."""
    model = load_checkpoint(path, device)
    if not isinstance(model, AlbertForSequenceClassification):
        raise ValueError(f"{find_checkpoint(path)} is not a fine-tuning checkpoint (it holds a "
                         f"{type(model).__name__})")
    return model
