"""The machinery behind `check`: what a piece is, the random inputs the groups share, how each piece is judged
alone (the other pieces it calls are the package's while its check runs), and how the learner's output is
compared with the package's (values, shapes, gradients, the mistakes or patterns a wrong output matches)."""

from __future__ import annotations

import functools
import math
import numbers
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from ...config import CLS_ID, IGNORE_INDEX, SEP_ID, AlbertConfig
from ..selfcheck import exception_line
from .mistakes import ATOL, RTOL, pattern

# A small model for the checks: every size different, so a swapped dimension shows as a wrong shape.
CHECK_CONFIG = AlbertConfig(vocab_size=50, embedding_size=6, hidden_size=12, num_layers=3, num_heads=3,
                            intermediate_size=20, max_position_embeddings=16)
TRIALS = 3                 # random inputs per check; float32 differences below ATOL, RTOL are rounding


@dataclass(frozen=True)
class Piece:
    """One piece: the package's version, random inputs for it, and the mistakes worth naming.

    function pieces: reference(*inputs) is the package's output; the learner's fn(*inputs) must match.
    module pieces: reference(cfg) builds the package's module; build(cls, cfg, package_module) builds
    the learner's (default: cls(cfg)); both get the same (randomised) weights, matched by name through
    `rename` (package prefix -> learner prefix), and must match in outputs and gradients.
    property pieces: reference(yours, generator, trial) checks what the piece must do (measured shares,
    or the package's training step run beside it) and returns (problem or None, largest difference).
    mistakes: (what the mistake is, a function of the same arguments as the reference giving the
    output it produces); a wrong output that matches one is named. A wrong output that matches none is
    compared for a pattern (mistakes.py), with the factors named by `sizes` (inputs -> {symbol: n}; by
    default every size of the inputs) and `inner`: (what, fn(change, *inputs)), the package's output with
    one quantity inside it changed (attention's scores).
    package: the package's version as the learner's code calls it, put in place of the learner's while
    another piece's check runs (default: a function piece's reference; None: the learner's stays).
    """

    name: str
    kind: str                                            # function | module | property
    reference: Callable
    inputs: Callable[[torch.Generator, int], tuple]   # (generator, trial number) -> the arguments
    mistakes: tuple = ()
    build: Callable | None = None
    rename: tuple = ()
    output: Callable = staticmethod(lambda out: out)      # the package module's output -> the tensor compared
    sizes: Callable | None = None
    inner: tuple = ()
    package: Callable | None = None

    def package_version(self) -> Callable | None:
        """What a later piece's check calls in place of the learner's version of this piece."""
        return self.package or (self.reference if self.kind == "function" else None)


def randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


def padded_keys(g: torch.Generator, B: int, N: int) -> torch.Tensor:
    """(B, 1, 1, N) bool: row b attends to its first N - b keys (row 0 unpadded)."""
    lengths = torch.tensor([max(1, N - b) for b in range(B)])
    return (torch.arange(N)[None] < lengths[:, None])[:, None, None, :]


def pretraining_batch(g, cfg: AlbertConfig) -> dict:
    """A random AlbertForPretraining batch at cfg: 4 sequences of 9 ([CLS] ... [SEP], row 1 padded from
    position 6), two predicted positions each, random sentence labels."""
    B, N = 4, 9
    ids = torch.randint(5, cfg.vocab_size, (B, N), generator=g)
    ids[:, 0], ids[:, -1] = CLS_ID, SEP_ID
    mask = torch.ones(B, N, dtype=torch.long)
    mask[1, 6:] = 0
    labels = torch.full((B, N), IGNORE_INDEX)
    labels[:, 2:4] = torch.randint(5, cfg.vocab_size, (B, 2), generator=g)
    return {"input_ids": ids * mask, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask,
            "mlm_labels": labels, "sentence_labels": torch.randint(0, 2, (B,), generator=g)}


def randomize(module: nn.Module, g: torch.Generator) -> None:
    """Every parameter random (LayerNorm scales and biases too), so that no mix-up hides behind 1s and 0s."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)


# ------------------------------------------------------------------ comparing
def difference(yours, theirs) -> str | None:
    """None when `yours` matches the package's output `theirs`, else what differs, in words."""
    if (number := complex_in(yours)) is not None and complex_in(theirs) is None:
        what = f"a {number.dtype} tensor" if isinstance(number, torch.Tensor) else f"such as {short(number)}"
        return f"it returns complex numbers ({what}), the package's are real"
    if isinstance(theirs, torch.Tensor):
        if not isinstance(yours, torch.Tensor):
            return f"it returns a {type(yours).__name__}, the package's returns a tensor"
        if yours.device != theirs.device:
            return (f"it returns a tensor on the {yours.device} device, the package's is on {theirs.device}"
                    + (" (a meta tensor holds no values)" if yours.is_meta else ""))
        if tuple(yours.shape) != tuple(theirs.shape):
            return f"shape {tuple(yours.shape)}, the package's is {tuple(theirs.shape)}"
        yours, theirs = yours.detach().double(), theirs.detach().double()
        off = ~torch.isclose(yours, theirs, rtol=RTOL, atol=ATOL, equal_nan=True)
        if not off.any():
            return None
        if theirs.dim() == 0:
            return f"yours {yours.item():.4g}, the package's {theirs.item():.4g}"
        at = [int(i) for i in off.nonzero()[0]]
        return (f"values differ at {at}: yours {yours[tuple(at)].item():.4g}, the package's "
                f"{theirs[tuple(at)].item():.4g} ({int(off.sum())} of {off.numel()} values differ, by up to "
                f"{(yours - theirs).abs().nan_to_num(math.inf).max().item():.2g})")
    if isinstance(theirs, tuple) and theirs and all(isinstance(t, torch.Tensor) for t in theirs):
        if not isinstance(yours, (tuple, list)) or len(yours) != len(theirs):
            return f"it returns {type(yours).__name__}, the package's a tuple of {len(theirs)} tensors"
        for k, (mine, package) in enumerate(zip(yours, theirs)):
            if (problem := difference(mine, package)) is not None:
                return f"output {k + 1} of {len(theirs)}: {problem}"
        return None
    if (floats := _floats(theirs)) is not None:          # float results: equal up to rounding
        if (mine := _floats(yours, strict=False)) is None:
            return f"it returns {short(yours)}, the package's {short(theirs)}"
        return difference(mine, floats)
    if yours != theirs:                                    # everything else (ints, lists of ids): exactly
        return f"yours gives {short(yours)}, the package's {short(theirs)}"
    return None


def complex_in(x, depth: int = 0):
    """The first complex number in x (a complex scalar, or a complex tensor), looking inside lists and
    tuples; None when there is none."""
    if isinstance(x, torch.Tensor):
        return x if x.is_complex() else None
    if isinstance(x, numbers.Complex) and not isinstance(x, numbers.Real):
        return x
    if isinstance(x, (list, tuple)) and depth < 10:
        return next((found for v in x if (found := complex_in(v, depth + 1)) is not None), None)
    return None


def _floats(x, strict: bool = True) -> torch.Tensor | None:
    """A float, a 0-dim tensor or a list of numbers with a float in it, as a float64 tensor; else None
    (strict=False: any number or list of numbers)."""
    numbers = x if isinstance(x, (list, tuple)) else [x]
    if not numbers or not all(isinstance(v, (int, float, torch.Tensor)) and not isinstance(v, bool)
                              and getattr(v, "ndim", 0) == 0 for v in numbers):
        return None
    if strict and not any(isinstance(v, float) or isinstance(v, torch.Tensor) and v.is_floating_point()
                          for v in numbers):
        return None
    values = torch.tensor([float(v) for v in numbers], dtype=torch.float64)
    return values if isinstance(x, (list, tuple)) else values[0]


def short(x, limit: int = 80) -> str:
    """repr(x) cut to `limit` characters; for an object whose repr raises, says so."""
    try:
        text = repr(x)
    except Exception:
        return f"a {type(x).__name__} (it cannot be printed)"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def failure(error: BaseException) -> str:
    """What the learner's code did, in words: raised an exception (its first line), or called exit()."""
    if isinstance(error, SystemExit):
        return "your code called exit() (it raised SystemExit), which would end the notebook's kernel"
    return f"your code raised {exception_line(error)}"


def largest(yours, theirs) -> float:
    if isinstance(theirs, tuple):
        return max((largest(y, t) for y, t in zip(yours, theirs)), default=0.0)
    if not isinstance(theirs, torch.Tensor) or not theirs.numel():
        return 0.0
    return (yours.detach().double() - theirs.detach().double()).abs().max().item()


def _learner_name(name: str, rename: tuple) -> str:
    """A package parameter's name as the learner's module calls it."""
    for old, new in rename:
        if name.startswith(old):
            return new + name[len(old):]
    return name


def _load_package_weights(mine: nn.Module, package: nn.Module, rename: tuple) -> str | None:
    """Copy the package module's weights into the learner's by name; None, or what does not fit."""
    theirs = {_learner_name(n, rename): p for n, p in package.named_parameters()}
    yours = dict(mine.named_parameters())
    if missing := sorted(set(theirs) - set(yours)):
        return (f"your module has no parameter {', '.join(missing)} "
                f"(its parameters: {', '.join(yours) or 'none'})")
    if extra := sorted(set(yours) - set(theirs)):
        return f"your module has parameters the package's has not: {', '.join(extra)}"
    for name, p in theirs.items():
        if yours[name].shape != p.shape:
            return f"parameter {name} has shape {tuple(yours[name].shape)}, the package's {tuple(p.shape)}"
    with torch.no_grad():
        for name, p in theirs.items():
            yours[name].copy_(p)
    return None


def named_pattern(piece: Piece, yours, theirs, inputs: tuple) -> str:
    """'; <the pattern>' when the wrong output relates to the package's simply (mistakes.py), else ''."""
    try:
        sizes = piece.sizes(*inputs) if piece.sizes else None
    except Exception:
        sizes = None
    return pattern(yours, theirs, inputs, sizes, piece.inner)


def named_mistake(mistakes: tuple, yours, inputs: tuple, package=None) -> str:
    """'; that is what <mistake> gives' when the wrong output matches one of a piece's `mistakes`, else ''."""
    for what, variant in mistakes:
        with torch.no_grad():
            wrong = variant(package, *inputs) if package is not None else variant(*inputs)
        if difference(yours, wrong) is None:
            return f"; that is what {what} gives"
    return ""


def _trial_function(piece: Piece, fn: Callable, g: torch.Generator, trial: int) -> tuple[str | None, float]:
    inputs = piece.inputs(g, trial)
    theirs = piece.reference(*inputs)
    yours = fn(*inputs)
    if (problem := difference(yours, theirs)) is not None:
        said = named_mistake(piece.mistakes, yours, inputs) or named_pattern(piece, yours, theirs, inputs)
        return problem + said, 0.0
    return None, largest(yours, theirs)


def _trial_module(piece: Piece, cls: type, g: torch.Generator, trial: int) -> tuple[str | None, float]:
    package = piece.reference(CHECK_CONFIG)
    randomize(package, g)
    mine = piece.build(cls, CHECK_CONFIG, package) if piece.build else cls(CHECK_CONFIG)
    if not isinstance(mine, nn.Module):
        return f"it builds a {type(mine).__name__}, not an nn.Module", 0.0
    if (problem := _load_package_weights(mine, package, piece.rename)) is not None:
        return problem, 0.0
    mine.eval()
    inputs = piece.inputs(g, trial)
    theirs, yours = piece.output(package(*inputs)), mine(*inputs)
    if (problem := difference(yours, theirs)) is not None:
        said = (named_mistake(piece.mistakes, yours, inputs, package)
                or named_pattern(piece, yours, theirs, inputs))
        return problem + said, 0.0
    weights = randn(g, *theirs.shape)                      # a random loss, so every gradient is tested
    (theirs * weights).sum().backward()
    (yours * weights).sum().backward()
    mine_params = dict(mine.named_parameters())
    for name, p in package.named_parameters():
        name = _learner_name(name, piece.rename)
        if (g_yours := mine_params[name].grad) is None:
            return f"parameter {name} gets no gradient: the output does not use it", 0.0
        if (problem := difference(g_yours, p.grad)) is not None:
            return f"the outputs agree but the gradient of {name} differs: {problem}", 0.0
    return None, largest(yours, theirs)


def _trial_property(piece: Piece, fn: Callable, g: torch.Generator, trial: int) -> tuple[str | None, float]:
    return piece.reference(fn, g, trial)


TRIAL_KINDS = {"function": _trial_function, "module": _trial_module, "property": _trial_property}


# ------------------------------------------------------------------ each piece judged alone
CHECKED: dict[int, tuple[object, str]] = {}     # id -> (what the learner passed to check, the piece's name)


def remember(name: str, yours) -> None:
    """Note that `yours` is the learner's version of piece `name` (kept, so that its id stays its own)."""
    CHECKED[id(yours)] = (yours, name)


def namespaces(yours) -> list[dict]:
    """The global namespaces the learner's code looks names up in: a function's, or those of the methods a
    class and its bases (outside torch) define."""
    if isinstance(yours, functools.partial):
        yours = yours.func
    functions = [yours]
    if isinstance(yours, type):
        functions = [f for k in yours.__mro__ if not k.__module__.startswith(("torch", "builtins"))
                     for f in vars(k).values() if isinstance(f, types.FunctionType)]
    found = {}
    for f in functions:
        if isinstance(names := getattr(f, "__globals__", None), dict):
            found[id(names)] = names
    return list(found.values())


def which_piece(key: str, value, pieces: dict) -> str | None:
    """The piece a global of the learner's is a version of: the one it was passed to check as, or the one
    it is named after (attention, my_attention) when it is callable; else None."""
    entry = CHECKED.get(id(value))
    if entry is not None and entry[0] is value:
        return entry[1]
    name = key.removeprefix("my_")
    return name if name in pieces and callable(value) else None


@contextmanager
def package_versions(name: str, yours, pieces: dict) -> Iterator[None]:
    """While piece `name` is checked, the learner's versions of the other pieces, in the namespaces its code
    reads, are the package's (Piece.package_version); afterwards they are the learner's again."""
    swapped = []
    for namespace in namespaces(yours):
        for key, value in list(namespace.items()):
            other = which_piece(key, value, pieces)
            if other is None or other == name or value is yours:
                continue
            if (version := pieces[other].package_version()) is not None and version is not value:
                swapped.append((namespace, key, value))
                namespace[key] = version
    try:
        yield
    finally:
        for namespace, key, value in reversed(swapped):
            namespace[key] = value


def judge_alone(piece: Piece, yours, g: torch.Generator, trial: int,
                pieces: dict) -> tuple[str | None, float]:
    """One trial of `piece`'s check, judged alone: the other pieces the learner's code calls by name are the
    package's meanwhile, so a right piece is right whatever the learner's earlier pieces do, and a wrong
    one is blamed on itself. -> (what differs or None, the largest difference)."""
    remember(piece.name, yours)
    with package_versions(piece.name, yours, pieces):
        return TRIAL_KINDS[piece.kind](piece, yours, g, trial)
