"""What a wrong result has in common with the package's: the pattern a verdict names.

When the learner's piece and the package's disagree and no known mistake of the piece explains it,
`pattern` looks for a simple relation between the two results and names it at the end of the verdict:

    attention: wrong: values differ at [...] (...); yours is what the package's gives with the scores
        x 0.5 = 1/sqrt(d) (d = 4)
    whole_words: wrong: yours gives [[2, 3], ...], the package's [[1, 2], ...]; every number is 1 more
        than the package's (off by one)
    layer: wrong: values differ at [...] (...); only the outputs at padded positions differ (batch row 1:
        position 4; row 2: positions 3-4), and yours are 0 there

The relations, in the order they are tried: all zeros, the sign flipped, one constant factor (named as a
closed form of the piece's sizes when it is one: sqrt(d), 1/sqrt(d), d, 1/d, or 2, 1/2), one constant
added, axes transposed or permuted, a shift by one position; then the same with one quantity inside the
piece changed (a piece's `inner`, such as attention's scores); then whole rows or columns (the padded
positions, when the inputs hold a padding mask); then the same numbers in other places. For the training
step, `left_out_operation` re-runs the package's step with one operation left out or moved (clipping,
weight decay, the schedule's step, zero_grad) and names the one that gives the learner's result.
A pattern says how the results relate, never what code to write; finding none adds nothing.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable

import torch
from torch import nn

ATOL, RTOL = 1e-5, 1e-4    # the checks' tolerance (checking.py): differences below these are rounding


def agree(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape and equal up to rounding."""
    return a.shape == b.shape and bool(torch.isclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True).all())


def as_numbers(x, depth: int = 0) -> tuple[torch.Tensor, tuple] | None:
    """A result as (a float64 tensor, its structure): a real tensor as itself, a number or a (nested) list
    of numbers flattened; None for anything else (complex numbers, text, objects)."""
    if isinstance(x, torch.Tensor):
        if x.is_complex() or x.is_meta:
            return None
        return x.detach().cpu().double(), ("tensor", tuple(x.shape))
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return torch.tensor(float(x), dtype=torch.float64), ("tensor", ())
    if isinstance(x, (list, tuple)) and depth < 10:
        parts = [as_numbers(v, depth + 1) for v in x]
        if any(p is None for p in parts):
            return None
        flat = [p[0].flatten() for p in parts]
        values = torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64)
        return values, ("list", tuple(p[1] for p in parts))
    return None


def number(c: float) -> str:
    """A factor as printed: 8.0, 0.5, 0.4472."""
    return f"{c:.1f}" if float(c).is_integer() else f"{c:.4g}"


def closed_forms(sizes) -> list[tuple[float, str]]:
    """(value, how it is written) for each size n > 1: sqrt(n), 1/sqrt(n), n, 1/n, then 2 and 1/2; the
    first form of each value is kept. sizes: {symbol: n} (written 'sqrt(d) (d = 4)') or plain numbers
    (written 'sqrt(64)')."""
    named = isinstance(sizes, dict)
    forms = []
    for name, n in (sizes.items() if named else ((str(n), n) for n in sizes)):
        if n < 2:
            continue
        where, plain = (f" ({name} = {n})", name) if named else ("", f"{n}, a size of the inputs")
        forms += [(math.sqrt(n), f"sqrt({name}){where}"), (1 / math.sqrt(n), f"1/sqrt({name}){where}"),
                  (float(n), plain + where), (1 / n, f"1/{name}{where}")]
    kept = []
    for value, text in forms + [(2.0, "2"), (0.5, "1/2")]:
        if not any(math.isclose(value, v, rel_tol=1e-9) for v, _ in kept):
            kept.append((value, text))
    return kept


def sizes_of(inputs: tuple) -> list[int]:
    """The sizes a piece's inputs have: every tensor's dimensions and every whole number, once each."""
    found = []
    for x in inputs:
        values = list(x.shape) if isinstance(x, torch.Tensor) else [x] if isinstance(x, int) else []
        found += [int(v) for v in values if not isinstance(v, bool) and int(v) not in found]
    return found


def factor_text(c: float, forms: list) -> str | None:
    """'x 8.0 = sqrt(64)' when c is one of the closed forms, else None."""
    for value, text in forms:
        if math.isclose(c, value, rel_tol=1e-3):
            return f"x {number(value)} = {text}"
    return None


def axis_names(dim: int, axes: tuple | None) -> tuple:
    """What each axis of a result is called in a message: given, or position / row, column / axis k."""
    if axes is not None and len(axes) == dim:
        return axes
    if dim <= 2:
        return (("position",), ("row", "column"))[dim - 1]
    return tuple(f"axis {k}" for k in range(dim))


def indices(selected: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    runs = []
    for i in selected:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


# ------------------------------------------------------------------ relations between two results
def same_shape_relation(y: torch.Tensor, t: torch.Tensor, forms: list, axes: tuple | None,
                        integers: bool) -> str | None:
    """How y relates to t as a whole: zeros, sign, factor, constant added, axes permuted, shifted by one."""
    zeros = torch.zeros_like(t)
    if agree(y, zeros) and not agree(t, zeros):
        return "yours is 0" if t.dim() == 0 else "yours is all zeros"
    if agree(y, -t) and not agree(t, zeros):
        return "yours is the package's with the sign flipped"
    if t.numel() == 1:
        c = y.item() / t.item() if t.item() else math.nan
        found = factor_text(c, forms) if math.isfinite(c) else None
        return f"yours is the package's {found}" if found else None
    if (t * t).sum() > 0:
        c = ((y * t).sum() / (t * t).sum()).item()
        if not math.isclose(c, 1.0, rel_tol=1e-3) and c != 0 and agree(y, c * t):
            named = factor_text(c, forms) or f"x {number(c)}, the same factor everywhere"
            return f"yours is the package's {named}"
    k = (y - t).mean().item()
    if agree(y, t + k):
        if integers and round(k) == k:
            more = f"{abs(round(k))} {'more' if k > 0 else 'less'}"
            return f"every number is {more} than the package's" + (" (off by one)" if abs(k) == 1 else "")
        return f"yours is the package's {'+' if k > 0 else '-'} {abs(k):.4g} everywhere (a constant added)"
    if (found := permuted(y, t)) is not None:
        return found
    return shifted(y, t, axes)


def permuted(y: torch.Tensor, t: torch.Tensor) -> str | None:
    """'yours is the package's with axes 1 and 2 swapped' when y is t with its axes reordered."""
    if sorted(y.shape) != sorted(t.shape) or not 2 <= t.dim() <= 5:
        return None
    for order in itertools.permutations(range(t.dim())):
        if list(order) == list(range(t.dim())) or t.permute(order).shape != y.shape:
            continue
        if agree(y, t.permute(order)):
            moved = [k for k in range(t.dim()) if order[k] != k]
            if len(moved) == 2:
                return f"yours is the package's with axes {moved[0]} and {moved[1]} swapped"
            return f"yours is the package's with its axes in the order {tuple(order)}"
    return None


def shifted(y: torch.Tensor, t: torch.Tensor, axes: tuple | None) -> str | None:
    """'yours at step s is the package's at step s + 1' when y is t moved by one along an axis."""
    off = ~torch.isclose(y, t, rtol=RTOL, atol=ATOL, equal_nan=True)
    if off.sum() * 2 <= off.numel():                    # a shift moves (nearly) every value
        return None
    names = axis_names(t.dim(), axes)
    for k in range(t.dim()):
        n = t.shape[k]
        if n < 3:
            continue
        for ahead in (1, -1):
            mine = y.narrow(k, 0, n - 1) if ahead == 1 else y.narrow(k, 1, n - 1)
            theirs = t.narrow(k, 1, n - 1) if ahead == 1 else t.narrow(k, 0, n - 1)
            if agree(mine, theirs):
                sign, where = ("+", "ahead") if ahead == 1 else ("-", "behind")
                if names[k].startswith("axis"):
                    return (f"along {names[k]}, yours at index i is the package's at index i {sign} 1 "
                            f"(shifted by one position, {where})")
                i = names[k][0]
                return (f"yours at {names[k]} {i} is the package's at {names[k]} {i} {sign} 1 "
                        f"(one {names[k]} {where})")
    return None


def padded_positions(inputs: tuple, y: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """(padded: (B, N) bool, the axis of y that runs over positions) when the inputs hold a padding mask (a
    bool tensor, True at real tokens, of B x N values) and y has a batch axis B and a position axis N."""
    mask = next((x for x in inputs if isinstance(x, torch.Tensor) and x.dtype == torch.bool), None)
    if mask is None or y.dim() < 2 or mask.shape[0] != y.shape[0]:
        return None
    real = mask.reshape(mask.shape[0], -1)
    axis = next((k for k in range(1, y.dim()) if y.shape[k] == real.shape[1]), None)
    return (~real, axis) if axis is not None and (~real).any() else None


def slices(y: torch.Tensor, t: torch.Tensor, inputs: tuple, axes: tuple | None) -> str | None:
    """Which whole rows or columns differ (most values in them, the others all agree): the padded
    positions, or at most half the indices along one axis."""
    off = ~torch.isclose(y, t, rtol=RTOL, atol=ATOL, equal_nan=True)
    if t.dim() == 0 or not off.any():
        return None
    if (padding := padded_positions(inputs, y)) is not None:
        padded, axis = padding
        other = [k for k in range(y.dim()) if k not in (0, axis)]
        at = off.double().sum(dim=other) > 0 if other else off  # (B, N): a position with any difference
        whole = off.movedim(axis, 1)[at].double().mean() >= 0.5   # most values there differ, not one or two
        if whole and not (at & ~padded).any():
            rows = [(b, [int(n) for n in at[b].nonzero().flatten()]) for b in range(at.shape[0])
                    if at[b].any()]
            where = "; ".join(f"{'batch row' if i == 0 else 'row'} {b}: position{'s' if len(ns) > 1 else ''} "
                              f"{indices(ns)}" for i, (b, ns) in enumerate(rows))
            zero = agree(y.movedim(axis, 1)[at], torch.zeros_like(y.movedim(axis, 1)[at]))
            return (f"only the outputs at padded positions differ ({where})"
                    + (", and yours are 0 there" if zero else "; the real positions match"))
    names = axis_names(t.dim(), axes)
    for k in range(t.dim()):
        other = [j for j in range(t.dim()) if j != k]
        hit = off.double().sum(dim=other) > 0 if other else off
        chosen = [int(i) for i in hit.nonzero().flatten()]
        few = 0 < len(chosen) and len(chosen) * 2 <= t.shape[k]
        if few and off.index_select(k, torch.tensor(chosen)).double().mean() >= 0.5:
            many = len(chosen) > 1
            where = (f"{'indices' if many else 'index'} {indices(chosen)} of {names[k]}"
                     if names[k].startswith("axis") else f"{names[k]}{'s' if many else ''} {indices(chosen)}")
            return f"only {where} {'differ' if many else 'differs'} (of 0-{t.shape[k] - 1}); the rest match"
    return None


def rearranged(y: torch.Tensor, t: torch.Tensor) -> str | None:
    """When y holds t's numbers in other places (or in another shape)."""
    if y.numel() != t.numel() or t.numel() < 2:
        return None
    if y.shape != t.shape and agree(y.reshape(t.shape), t):
        return f"yours holds the package's numbers in the package's order, shaped {tuple(y.shape)}"
    if agree(y.flatten().sort().values, t.flatten().sort().values):
        return ("yours holds the package's numbers, in other places: an axis is mixed up (a reshape or a "
                "transpose)")
    return None


def inner_relation(yours, inputs: tuple, forms: list, inner: tuple) -> str | None:
    """'yours is what the package's gives with the scores x 0.5 = 1/sqrt(d) (d = 4)': the package's piece
    with one quantity inside it (a piece's `inner`: (what, fn(change, *inputs))) set to zero, negated,
    transposed or multiplied by a closed form."""
    mine = as_numbers(yours)
    for what, variant in inner:
        changes = [("set to zero", torch.zeros_like), ("negated", torch.neg),
                   ("transposed", lambda s: s.transpose(-2, -1))]
        changes += [(factor_text(value, forms), lambda s, c=value: s * c) for value, _ in forms]
        for said, change in changes:
            try:
                with torch.no_grad():
                    theirs = as_numbers(variant(change, *inputs))
            except Exception:                              # e.g. a transpose of scores that are not square
                continue
            if mine is not None and theirs is not None and mine[1] == theirs[1] and agree(mine[0], theirs[0]):
                return f"yours is what the package's gives with {what} {said}"
    return None


def pattern(yours, theirs, inputs: tuple = (), sizes: dict | None = None, inner: tuple = (),
            axes: tuple | None = None) -> str:
    """'; <how yours relates to the package's>' for the end of a verdict, or '' when no pattern is found
    (never raises: a pattern only adds to a verdict).

    sizes: {symbol: n}, the piece's sizes that a factor is named by (default: every size of the inputs);
    inner: (what, fn(change, *inputs)) pairs, the package's piece with one inner quantity changed;
    axes: what each axis of the result is called ('step')."""
    try:
        found = relation(yours, theirs, inputs, sizes, inner, axes)
    except Exception:
        return ""
    return f"; {found}" if found else ""


def relation(yours, theirs, inputs: tuple, sizes: dict | None, inner: tuple,
             axes: tuple | None) -> str | None:
    """The pattern's words (see `pattern`), or None."""
    forms = closed_forms(sizes if sizes is not None else sizes_of(inputs))
    if isinstance(theirs, tuple) and theirs and all(isinstance(t, torch.Tensor) for t in theirs):
        if not isinstance(yours, (tuple, list)) or len(yours) != len(theirs):
            return None
        for mine, package in zip(yours, theirs):              # the first output that differs
            found = as_numbers(mine)
            if found is None or not agree(found[0], package.detach().cpu().double()):
                return (relation(mine, package, inputs, sizes, (), axes)
                        or inner_relation(yours, inputs, forms, inner))
        return None
    mine, package = as_numbers(yours), as_numbers(theirs)
    if mine is None or package is None:
        return None
    (y, structure), (t, package_structure) = mine, package
    same = structure == package_structure
    tensors = structure[0] == package_structure[0] == "tensor"
    found = None
    if same:
        integers = bool((y == y.round()).all() and (t == t.round()).all())
        found = same_shape_relation(y, t, forms, axes, integers)
    elif tensors:
        found = permuted(y, t)
    found = found or inner_relation(yours, inputs, forms, inner)
    if found is None and tensors:
        found = rearranged(y, t)
    if found is None and same:
        found = slices(y, t, inputs, axes)
    return found


# ------------------------------------------------------------------ the training step
STEP_CHANGES = (
    ("clip", "leaving out the gradient clipping"),
    ("decay", "leaving out the weight decay"),
    ("schedule", "leaving out the schedule's step (the learning rate then stays at its first, warmup value)"),
    ("early", "stepping the schedule before the optimizer (each step then uses the next step's "
              "learning rate)"),
    ("zero", "leaving out zero_grad (the gradients then add up from step to step)"),
)


def changed_step(model: nn.Module, batch: dict, optimizer, scheduler, clip_norm: float, change: str) -> float:
    """The package's training step (train.train_step on one batch) with one operation changed: `change` is
    one of STEP_CHANGES' keys."""
    loss = model(**batch).loss
    loss.backward()
    if change != "clip":
        nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    if change == "early":
        with warnings.catch_warnings():          # torch warns of this order: it is the change asked for
            warnings.simplefilter("ignore")
            scheduler.step()
    if change == "decay":
        for group in optimizer.param_groups:
            group["weight_decay"] = 0.0
    optimizer.step()
    if change not in ("schedule", "early"):
        scheduler.step()
    if change != "zero":
        optimizer.zero_grad(set_to_none=True)
    return loss.item()


def left_out_operation(build: Callable, batches: list, losses: list, model: nn.Module,
                       clip_norm: float) -> str:
    """'; <operation> gives exactly yours' when the package's step with one operation left out or moved,
    from the same start on the same batches, gives the learner's losses and weights; else ''.
    build() -> (a fresh model, its optimizer, its schedule) as the learner's run started."""
    yours = dict(model.named_parameters())
    for change, what in STEP_CHANGES:
        try:
            package, optimizer, scheduler = build()
            theirs = [changed_step(package, batch, optimizer, scheduler, clip_norm, change)
                      for batch in batches[:len(losses)]]
            if not all(agree(torch.tensor(float(a)), torch.tensor(b)) for a, b in zip(losses, theirs)):
                continue
            if all(agree(yours[name].detach(), p.detach()) for name, p in package.named_parameters()):
                return f"; {what} gives exactly yours"
        except Exception:            # the learner's model or losses not as the package's: no pattern
            continue
    return ""
