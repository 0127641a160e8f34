"""Pretraining: training arguments, the data order, the step and the loop, DDP under torchrun.

One global batch of `batch_size` examples per optimizer step, whatever the number of processes and
gradient-accumulation micro-batches: the losses are sums divided by the *global* number of predicted
tokens (and examples), so 1 process x 4 micro-batches and 2 processes x 2 micro-batches compute the
same gradient. The data order is a function of (seed, epoch) and the step, so a resumed run reads
exactly the examples the uninterrupted run would have read, without replaying the loader.

`pretrain(cfg, args, train_data, evaluate, options)`: what it trains (the config and TrainArgs), on what,
how it is evaluated (a callback its caller passes, e.g. evaluation.pretraining_evaluator: this module
imports no evaluation code) and where and how it runs (RunOptions).
The run directory (config, metrics.jsonl, lock) is run_directory.py's, its checkpoints checkpoint.py's;
a resumed run restores the weights, optimizer, schedule and RNG exactly. Nothing is written into the run
directory until the first step has succeeded, so a run that fails at its start leaves the directory as
it found it. A non-finite loss or gradient stops the run before anything non-finite is logged or saved.

A step does no work twice: the model divides its summed cross-entropies by the global batch's counts,
which are counted once and stay on the device, so the loss it returns is the loss that is trained; the
token ids were checked once when the run started (the model's forward checks nothing),
and what the step logs is read back to the host in one transfer, its only host read besides the
masked-LM gather's size. Device and precision come from device.py; RunOptions(compile=True) (or "model")
runs the forward under torch.compile, compile="graphs" the encoder's layers as CUDA graphs (graphed_layers).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from tqdm.auto import tqdm

from .checkpoint import (
    checkpoint_to_resume,
    load_optimizer_state,
    load_start_state,
    load_weights,
    read_config,
    read_json,
    save_checkpoint,
)
from .compiling import COMPILE_MODES, compile_cache, compiled, graphed_layers
from .config import OBJECTIVES, AlbertConfig
from .device import Precision, check_torchrun_variables, choose_device, choose_precision
from .model import IGNORE_INDEX, AlbertForPretraining
from .optim import OPTIMIZERS, make_optimizer, warmup_linear_decay
from .pretraining_dataset import check_fits
from .run_directory import RunDirectory

# Arguments that change the training trajectory: a resumed run must use the same values.
RESUME_MUST_MATCH = ("objective", "steps", "batch_size", "lr", "warmup", "weight_decay", "optimizer",
                     "clip_norm", "seed")


@dataclass
class TrainArgs:
    objective: str = "sop"         # mlm | nsp | sop: MLM alone, MLM + NSP (BERT), MLM + SOP (ALBERT)
    steps: int = 1500              # optimizer steps
    batch_size: int = 32           # global batch: examples per optimizer step, over all processes
    grad_accum: int = 1            # micro-batches per process per step
    lr: float = 2e-3               # peak learning rate
    warmup: int = 150              # linear warmup steps, then linear decay to 0
    weight_decay: float = 0.01
    optimizer: str = "lamb"        # lamb | adamw
    clip_norm: float = 1.0         # global gradient-norm clip, as in the official code
    seed: int = 0
    eval_every: int = 250          # steps between evaluations on held-out data (0 = only at the end)
    eval_examples: int | None = None  # held-out examples per evaluation: a fixed seeded sample (None = all)
    checkpoint_every: int = 250    # steps between checkpoints (0 = only at the end)
    keep_last: int = 2             # checkpoints kept on disk

    def __post_init__(self) -> None:
        """Validate every field (type, range, finiteness) before a run writes anything."""
        for name, allowed in (("objective", tuple(OBJECTIVES)), ("optimizer", OPTIMIZERS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; "
                                 f"choose one of {', '.join(allowed)}")
        lowest = dict(steps=1, batch_size=1, grad_accum=1, keep_last=1, warmup=0, seed=0, eval_every=0,
                      checkpoint_every=0)
        for name, low in lowest.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        n = self.eval_examples
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"eval_examples must be an integer >= 1 (or None for all), got {n!r}")
        if self.warmup > self.steps:
            raise ValueError(f"warmup {self.warmup} must be between 0 and steps {self.steps}")
        for name, low in (("lr", 0.0), ("clip_norm", 0.0), ("weight_decay", None)):
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or (value <= low if low is not None else value < 0)):
                rule = "a finite number > 0" if low is not None else "a finite number >= 0"
                raise ValueError(f"{name} must be {rule}, got {value!r}")


# ---------------------------------------------------------------------------- data order
class StepBatches:
    """Batch sampler: from `start_step` on, this process's micro-batches of each global batch.

    Epoch e is a permutation seeded by (seed, e); step s reads the slice s % steps_per_epoch of it.
    Process r of W takes the r-th contiguous share of every global batch, cut into grad_accum
    micro-batches, so the union over processes is exactly the single-process global batch.
    """

    def __init__(self, dataset_size: int, batch_size: int, steps: int, seed: int = 0, grad_accum: int = 1,
                 start_step: int = 0, rank: int = 0, world_size: int = 1):
        per_rank, rest = divmod(batch_size, world_size * grad_accum)
        if rest or per_rank == 0:
            raise ValueError(f"batch_size {batch_size} must be a multiple of processes x grad_accum "
                             f"= {world_size} x {grad_accum}")
        self.steps_per_epoch = dataset_size // batch_size
        if self.steps_per_epoch == 0:
            raise ValueError(f"the training set has {dataset_size} examples, fewer than one batch of "
                             f"{batch_size}; lower batch_size or use more data")
        self.n, self.batch_size, self.steps, self.seed = dataset_size, batch_size, steps, seed
        self.grad_accum, self.start_step, self.rank = grad_accum, start_step, rank
        self.micro = per_rank                    # examples per micro-batch on this process

    @classmethod
    def for_run(cls, dataset_size: int, args: TrainArgs, start_step: int = 0, rank: int = 0,
                world_size: int = 1) -> StepBatches:
        """The data order of a pretraining run's arguments."""
        return cls(dataset_size, args.batch_size, args.steps, args.seed, args.grad_accum, start_step, rank,
                   world_size)

    def epoch_order(self, epoch: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.n, generator=g)

    def global_batch(self, step: int) -> list[int]:
        epoch, i = divmod(step, self.steps_per_epoch)
        B = self.batch_size
        return self.epoch_order(epoch)[i * B:(i + 1) * B].tolist()

    def __iter__(self):
        order, epoch = None, None
        share = self.micro * self.grad_accum
        for step in range(self.start_step, self.steps):
            e, i = divmod(step, self.steps_per_epoch)
            if e != epoch:                       # one permutation per epoch, not per step
                order, epoch = self.epoch_order(e), e
            mine = order[i * self.batch_size + self.rank * share:][:share].tolist()
            for k in range(self.grad_accum):
                yield mine[k * self.micro:(k + 1) * self.micro]

    def __len__(self) -> int:
        return (self.steps - self.start_step) * self.grad_accum


def default_collate():
    from .pretraining_data import collate
    return collate


# ---------------------------------------------------------------------------- distributed
def distributed_context(device: str | None = None) -> tuple[int, int, torch.device]:
    """(rank, world_size, device). Launched by torchrun, it starts the process group (unless the caller
    has); each process takes the GPU of its node-local rank. Rank and world size are asked of
    torch.distributed, which has them from torchrun. `device` as for device.choose_device (None: CUDA,
    MPS or CPU)."""
    if dist.is_torchelastic_launched():
        check_torchrun_variables()                  # before torch.distributed reads them
    device = choose_device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", dist.get_node_local_rank(fallback_rank=0))
    if dist.is_torchelastic_launched() and not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if not dist.is_initialized():
        return 0, 1, device
    return dist.get_rank(), dist.get_world_size(), device


def training_net(model: AlbertForPretraining, world: int, device: torch.device,
                 compile: bool | str) -> nn.Module:
    """What the step calls: the model, wrapped in DistributedDataParallel over several processes, and
    compiled as asked (COMPILE_MODES: True or "model" compiles the whole forward, "graphs" the encoder's
    layers for CUDA graphs, in place)."""
    if compile == "graphs":
        graphed_layers(model)
    net = model
    if world > 1:
        net = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=model.sentence_head is None)   # MLM alone leaves the pooler unused
    return compiled(net) if compile in (True, "model") else net


# ---------------------------------------------------------------------------- the loop
@dataclass
class PretrainResult:
    model: AlbertForPretraining        # the trained model (unwrapped from DDP), in train mode
    history: list[dict]                # every metrics record of this run, resumed part included
    out_dir: Path | None
    seconds: float                     # wall time of this call


@dataclass(frozen=True)
class RunOptions:
    """Where and how a pretraining run runs, beside what it trains (TrainArgs)."""
    out_dir: str | Path | None = None       # the run directory (None: keep nothing)
    resume: bool = False                    # from the latest checkpoint in out_dir
    resume_from: str | Path | None = None   # from a chosen step directory (e.g. before a damaged latest)
    start_state: Mapping | None = None      # weights a fresh run starts from (a branch of a trained trunk);
                                            # a sentence head the state lacks keeps its initialisation
    device: str | None = None               # see device.choose_device (None: CUDA, MPS or CPU)
    compile: bool | str = False             # False, or COMPILE_MODES: "model" (or True), "graphs"
    collate_fn: Callable | None = None      # examples -> a batch (None: pretraining_data.collate)
    callbacks: Iterable[Callable[[dict], None]] = ()    # each metrics record (e.g. plots.LiveCurves)
    progress: bool = True                   # a progress bar on rank 0


def pretrain(cfg: AlbertConfig, args: TrainArgs, train_data,
             evaluate: Callable[[nn.Module, int], dict] | None = None,
             options: RunOptions | None = None) -> PretrainResult:
    """Pretrain an AlbertForPretraining on `train_data` (a Dataset of example dicts), from scratch or as
    `options` say (resumed, from chosen weights, where, on which device, compiled). Every args.eval_every
    steps and at the last, rank 0 calls evaluate(model, step) (e.g. evaluation.pretraining_evaluator) and
    logs the record it returns as a "valid" record. Each metrics record is passed to every callback and
    appended to out_dir/metrics.jsonl.
    """
    o = options or RunOptions()
    if o.compile not in (False, True, *COMPILE_MODES):
        raise ValueError(f"compile must be False, True or one of {COMPILE_MODES}, got {o.compile!r}")
    if o.out_dir is not None and not str(o.out_dir).strip():
        raise ValueError("out_dir is empty; name a run directory (or pass None to keep nothing)")
    t0 = time.perf_counter()
    out_dir = Path(o.out_dir) if o.out_dir is not None else None
    rank, world, device = distributed_context(o.device)
    run = RunDirectory(out_dir, cfg, args, o.callbacks, writes=rank == 0)   # rank 0 locks and writes it
    with run, compile_cache() if o.compile else contextlib.nullcontext():  # torch.compile's: the cache's
        ckpt = checkpoint_to_resume(out_dir, o.resume, o.resume_from)
        check_fits(train_data, cfg)                  # once, here: the steps skip the model's input checks
        torch.manual_seed(args.seed)
        model = AlbertForPretraining(cfg, sentence_task=OBJECTIVES[args.objective]).to(device)
        optimizer = make_optimizer(args.optimizer, model, args.lr, args.weight_decay)
        scheduler = warmup_linear_decay(optimizer, args.warmup, args.steps)
        step = 0
        if ckpt is None and o.start_state is not None:
            load_start_state(model, o.start_state)
        if ckpt is not None:
            step, run.history = _restore(ckpt, cfg, args, len(train_data), model, optimizer, scheduler,
                                         device, out_dir)
        net = training_net(model, world, device, o.compile)
        precision = choose_precision(device)
        scaler = precision.grad_scaler()             # float16 only; a pass-through otherwise
        sampler = StepBatches.for_run(len(train_data), args, step, rank, world)
        # Own generators: a DataLoader otherwise draws its base seed from the global RNG, which would
        # shift dropout masks between a straight run and a resumed one.
        batches = iter(torch.utils.data.DataLoader(train_data, batch_sampler=sampler,
                                                   collate_fn=o.collate_fn or default_collate(),
                                                   generator=torch.Generator()))
        clock = RunClock(t0, next((r["seconds"] for r in reversed(run.history) if "seconds" in r), 0.0))
        bar = tqdm(total=args.steps, initial=step, disable=not (o.progress and rank == 0), desc="pretrain")
        model.train()
        with bar:
            while step < args.steps:
                micro = [{k: v.to(device) for k, v in next(batches).items()} for _ in range(args.grad_accum)]
                record = train_step(net, model, micro, optimizer, scheduler, args, world, precision, scaler)
                step += 1
                run.record({"step": step, "split": "train", **record, "seconds": clock.training()})
                bar.update(1)
                bar.set_postfix(loss=f"{record['loss']:.3f}")
                if evaluate is not None and rank == 0 and (
                        step == args.steps or (args.eval_every and step % args.eval_every == 0)):
                    with clock.evaluating() as at:
                        valid = evaluate(model, step)
                    run.record({"step": step, "split": "valid", **valid, "seconds": at})
                if run.checkpoint_due(step):
                    if rank == 0:
                        state = {"step": step, "epoch": step // sampler.steps_per_epoch,
                                 "step_in_epoch": step % sampler.steps_per_epoch,
                                 "dataset_size": len(train_data), "world_size": world,
                                 "args": dataclasses.asdict(args), "metrics": run.history}
                        save_checkpoint(out_dir, model, optimizer, scheduler, state, args.keep_last)
                    if world > 1:
                        dist.barrier()
    return PretrainResult(model, run.history, out_dir, time.perf_counter() - t0)


class RunClock:
    """A run's training seconds, evaluations excluded, continued from where a resumed run stood."""

    def __init__(self, t0: float, seconds_before: float = 0.0):
        self.t0, self.before, self.evaluation = t0, seconds_before, 0.0

    def training(self) -> float:
        return round(self.before + time.perf_counter() - self.t0 - self.evaluation, 3)

    @contextlib.contextmanager
    def evaluating(self):
        """Time spent inside is not training time; yields the training seconds when it began."""
        start = time.perf_counter()
        yield round(self.before + start - self.t0 - self.evaluation, 3)
        self.evaluation += time.perf_counter() - start


def train_step(net: nn.Module, model: AlbertForPretraining, micro: list[dict], optimizer, scheduler,
               args: TrainArgs, world: int = 1, precision: Precision | None = None,
               scaler: torch.amp.GradScaler | None = None) -> dict:
    """One optimizer step over this process's micro-batches (forward, backward, clip, optimizer,
    schedule); net is the model, its DDP wrapper or its compiled form. Returns the global batch's
    metrics, read from the device in one transfer. precision: device.choose_precision of the batches'
    device by default; float16 needs the `scaler` kept across steps (precision.grad_scaler()).
    The batches' ids are not checked here (check_fits checks a dataset once)."""
    device = micro[0]["input_ids"].device
    precision = precision or choose_precision(device)
    torch.compiler.cudagraph_mark_step_begin()      # graphed layers (compile="graphs"): a new step begins
    if scaler is None:
        if precision.needs_grad_scaler:
            raise ValueError("float16 training needs a gradient scaler kept across steps: pass "
                             "scaler=precision.grad_scaler()")
        scaler = precision.grad_scaler()
    # Global normalisers, counted on the device: predicted tokens and examples over every micro-batch
    # of every process (clamped to 1: a batch with nothing to predict has loss 0, not 0 / 0).
    counts = torch.zeros(2, device=device)
    for b in micro:
        counts[0] += (b["mlm_labels"] != IGNORE_INDEX).sum()
        counts[1] += b["input_ids"].shape[0]
    if world > 1:
        dist.all_reduce(counts)
    n_tokens, n_examples = counts.clamp(min=1).unbind()
    means = torch.zeros(2, device=device)        # the global batch's mlm and sentence losses, summed below
    for i, b in enumerate(micro):
        last = i == len(micro) - 1 or not isinstance(net, nn.parallel.DistributedDataParallel)
        ctx = contextlib.nullcontext() if last else net.no_sync()      # all-reduce on the last micro-batch
        sentence_labels = b["sentence_labels"] if model.sentence_head is not None else None
        with ctx:
            with precision.autocast():
                out = net(b["input_ids"], b["token_type_ids"], b["attention_mask"],
                          mlm_labels=b["mlm_labels"], sentence_labels=sentence_labels,
                          predicted_tokens=n_tokens, examples=n_examples)
            means[0] += out.mlm_loss.detach()
            if out.sentence_loss is not None:
                means[1] += out.sentence_loss.detach()
            # DDP averages gradients over processes; scale up so the result is the global-batch gradient
            scaler.scale(out.loss * world).backward()
    grad_norm, lr = optimizer_step(model, optimizer, scheduler, scaler, args.clip_norm)
    if world > 1:
        dist.all_reduce(means)
    # The one host read of the step: everything it logs, in one transfer.
    mlm_loss, sentence_loss, grad_norm = torch.cat([means, grad_norm[None]]).tolist()
    record = {"loss": mlm_loss + sentence_loss, "mlm_loss": mlm_loss, "lr": lr, "grad_norm": grad_norm}
    if model.sentence_head is not None:
        record[f"{args.objective}_loss"] = sentence_loss
    return record


def optimizer_step(model: nn.Module, optimizer, scheduler, scaler: torch.amp.GradScaler,
                   clip_norm: float) -> tuple[torch.Tensor, float]:
    """After the backward passes: clip the global gradient norm (of the unscaled gradients), step the
    optimizer and its schedule, clear the gradients. Fine-tuning steps the same way.
    -> (the gradient norm before clipping, on the device; the learning rate this step used)."""
    scaler.unscale_(optimizer)                                         # clip the true gradients
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    lr = optimizer.param_groups[0]["lr"]
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm, lr


def _restore(ckpt: Path, cfg: AlbertConfig, args: TrainArgs, dataset_size: int, model, optimizer, scheduler,
             device: torch.device, out_dir: Path | None) -> tuple[int, list[dict]]:
    """Load a verified checkpoint into the model, optimizer and scheduler, restore RNG; -> (step, history).
    A finished run's checkpoint cannot start a run in another out_dir: there is nothing left to train."""
    read_config(ckpt, cfg)
    state = read_json(ckpt / "trainer_state.json")
    saved_args = state.get("args", {})
    diff = [f"{k}: checkpoint {saved_args.get(k)!r} vs requested {getattr(args, k)!r}"
            for k in RESUME_MUST_MATCH if saved_args.get(k) != getattr(args, k)]
    if diff:
        raise ValueError(f"checkpoint {ckpt} was written with different training arguments "
                         f"({'; '.join(diff)}); resume with the same arguments or start a new run")
    if state.get("dataset_size") != dataset_size:
        raise ValueError(f"checkpoint {ckpt} was trained on {state.get('dataset_size')} examples but "
                         f"the training set now has {dataset_size}, so the data position is meaningless; "
                         f"use the same data (scale, corpus) or start a new run")
    load_weights(model, ckpt / "model.safetensors")
    extra = load_optimizer_state(ckpt / "optimizer.pt")
    try:
        optimizer.load_state_dict(extra["optimizer"])
        scheduler.load_state_dict(extra["scheduler"])
        torch.set_rng_state(extra["rng"]["torch"])
        if device.type == "cuda" and "cuda" in extra["rng"]:
            torch.cuda.set_rng_state_all(extra["rng"]["cuda"])
    except (KeyError, ValueError, RuntimeError, TypeError) as e:
        raise ValueError(f"checkpoint file {ckpt / 'optimizer.pt'} does not hold a matching optimizer/"
                         f"scheduler/RNG state ({type(e).__name__}: {e})") from None
    model.to(device)
    step = int(state["step"])
    if step >= args.steps and out_dir is not None and (
            ckpt.resolve().parent != (out_dir / "checkpoints").resolve()):
        # nothing to train, so nothing would be written: out_dir would not exist (the steps are part
        # of the arguments a resumed run must match, so the run cannot go on either)
        raise ValueError(f"{ckpt} is already at step {step} of {args.steps}: the run it belongs to is "
                         f"finished, so there is nothing to train into {out_dir}; use {ckpt} itself "
                         f"(or copy its run), or start a new run there without --resume-from")
    return step, list(state.get("metrics", []))
