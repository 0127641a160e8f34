"""A training run with the learner's pieces, beside the package's run.

Lesson 05 trains with the step and the loop the learner wrote (the package's where theirs is not right
yet: package_step and package_loop, in the pieces' signatures, kept here rather than written out in the
lesson beside the learner's, where they would be the answer). A piece that passed its check on three
short steps can still go wrong over a longer run, so the run is watched: the first loss that is not a
finite number stops it, and one line says at which step and which pieces were in use. A run that ends is
compared with the package's losses step by step, in one line too. Like `check`, nothing here raises for
what the learner wrote (only Ctrl-C goes through):

    ours = compare_run(lambda step: loop(model, optimizer, lr_factor, data, None, args, step, evaluate),
                       step, {"training_loop": loop_is_right, "training_step": step_is_right}, theirs)
    20 steps with your training_loop and your training_step: loss 6.9000 -> 5.1000, the same as
        minialbert.train.pretrain (largest difference 2.4e-07)
    your training run diverged: the loss is nan at step 10 of 20, so it stopped there; the pieces in
        use: your training_loop and your training_step
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace

from torch.optim.lr_scheduler import LambdaLR

from ...pretraining_data import collate
from ...train import StepBatches, train_step
from .checking import complex_in, failure, short

ATOL, RTOL = 1e-5, 1e-4    # the lesson's tolerance: |yours - theirs| <= ATOL + RTOL * |theirs|


class Diverged(Exception):
    """Raised by a watched step whose loss is not a finite number: it stops the learner's loop."""

    def __init__(self, step: int, loss: float):
        super().__init__(f"the loss is {loss} at step {step}")
        self.step, self.loss = step, loss


class WatchedStep:
    """A training step whose calls are counted: the first whose loss is not finite is remembered (in
    `diverged`, even if the loop around it catches the exception) and raises Diverged."""

    def __init__(self, step: Callable):
        self.step, self.calls, self.diverged = step, 0, None

    def __call__(self, *args, **kwargs):
        self.calls += 1
        loss = self.step(*args, **kwargs)
        value = as_float(loss)
        if value is not None and not math.isfinite(value):
            if self.diverged is None:
                self.diverged = Diverged(self.calls, value)
            raise Diverged(self.calls, value)
        return loss


def package_step(model, batch, optimizer, scheduler, clip_norm) -> float:
    """The package's training step (train.train_step on one batch), called as lesson 05's step piece is:
    what the lesson trains with while the learner's step is not right."""
    settings = SimpleNamespace(clip_norm=clip_norm, objective="mlm" if model.sentence_head is None else "sop")
    return train_step(model, model, [batch], optimizer, scheduler, settings)["loss"]


def package_loop(model, optimizer, lr_factor, train_data, valid_data, args, step, evaluate) -> list[dict]:
    """The package's training loop (train.pretrain's, without its checkpoints, devices and logging), called
    as lesson 05's loop piece is: what the lesson trains with while the learner's loop is not right."""
    scheduler = LambdaLR(optimizer, lambda s: lr_factor(s, args.warmup, args.steps))
    history = []
    model.train()
    for n, indices in enumerate(StepBatches.for_run(len(train_data), args), start=1):
        history.append({"step": n, "split": "train",
                        "loss": step(model, collate([train_data[i] for i in indices]), optimizer, scheduler,
                                     args.clip_norm)})
        if n == args.steps or (args.eval_every and n % args.eval_every == 0):
            history.append({"step": n, "split": "valid", **evaluate(model, valid_data)})
    return history


def as_float(x) -> float | None:
    """x as a Python float (a number, a one-element tensor, a numpy scalar); None when it is not one."""
    if isinstance(x, bool) or complex_in(x) is not None:
        return None
    try:
        return float(x)
    except Exception:
        return None


def pieces_in_use(pieces: dict[str, bool]) -> str:
    """'your training_loop and the package's lr_factor' from {piece name: whether the learner's is used}."""
    names = [("your " if mine else "the package's ") + name for name, mine in pieces.items()]
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


def say(problem: str, pieces: dict[str, bool]) -> None:
    print(f"your training run {problem}; the pieces in use: {pieces_in_use(pieces)}")


def guarded_run(run: Callable, step: Callable, pieces: dict[str, bool], steps: int | None = None):
    """`run(step)` with the step watched: the history the run returns, or None when it diverged, raised,
    called exit() or returned no history, which one line says (naming the step, of `steps` when given,
    and the pieces in use)."""
    of = f" of {steps}" if steps else ""
    watched = WatchedStep(step)
    try:
        history, error = run(watched), None
    except KeyboardInterrupt:                    # the learner stopping the cell: let it stop
        raise
    except BaseException as e:                   # Diverged, or the learner's code failed
        history, error = None, e
    if (stop := watched.diverged) is not None:
        say(f"diverged: the loss is {stop.loss} at step {stop.step}{of}, so it stopped there", pieces)
    elif error is not None:
        say(f"stopped: {failure(error)}", pieces)
    elif isinstance(losses := train_losses(history), str):
        say(losses, pieces)
    elif bad := [(n, loss) for n, loss in losses if not math.isfinite(loss)]:
        say(f"diverged: the loss is {bad[0][1]} at step {bad[0][0]}{of}", pieces)
    else:
        return history
    return None


def train_losses(history) -> list[tuple[int, float]] | str:
    """(step, loss) of each training record of a history (split 'train'), in order; or what is wrong
    with the history, in words."""
    if not isinstance(history, list) or not all(isinstance(r, dict) and "step" in r for r in history):
        return f"returned {short(history)}, not the history (a list of records with a 'step')"
    records = [r for r in history if r.get("split") == "train"]
    losses = [as_float(r.get("loss")) for r in records]
    if bad := [r for r, loss in zip(records, losses) if loss is None]:
        return f"recorded the loss {short(bad[0].get('loss'))} at step {bad[0]['step']}, not a number"
    return [(r["step"], loss) for r, loss in zip(records, losses)]


def compare_run(run: Callable, step: Callable, pieces: dict[str, bool], theirs: list[float]):
    """Run `run(step)` watched (see guarded_run) and compare its training losses with the package's
    (`theirs`, step by step); print one line. Returns the run's losses, or None when it diverged, raised
    or differs from the package's run."""
    steps = len(theirs)
    if (history := guarded_run(run, step, pieces, steps)) is None:
        return None
    losses = [loss for _, loss in train_losses(history)]
    if len(losses) != steps or not losses:
        plural = "s" if len(losses) != 1 else ""
        say(f"has {len(losses)} training step{plural}, the package's {steps}", pieces)
        return None
    for n, (mine, package) in enumerate(zip(losses, theirs), start=1):
        if abs(mine - package) > ATOL + RTOL * abs(package):
            say(f"differs from minialbert.train.pretrain from step {n} of {steps}: loss {mine:.4f}, the "
                f"package's {package:.4f}", pieces)
            return None
    largest = max(abs(a - b) for a, b in zip(losses, theirs))
    print(f"{steps} steps with {pieces_in_use(pieces)}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, the same "
          f"as minialbert.train.pretrain (largest difference {largest:.1e})")
    return losses
