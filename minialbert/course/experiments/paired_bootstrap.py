"""A paired difference between two arms read on the same held-out examples: `paired_difference`, a
document bootstrap of mean(A) - mean(B) (verdict.py's paired `beats` reads its interval).

Examples cut from one document are not independent draws, so the bootstrap resamples documents with
replacement (a cluster bootstrap: a drawn document brings all its examples, once per draw). What both
arms share (which documents are hard) cancels in the difference, so the paired interval is much narrower
than two arms' own intervals side by side. Standard library only.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable

__all__ = ["paired_difference"]


def paired_difference(a_correct, b_correct, documents, *, resamples: int = 2000, seed: int = 0) -> dict:
    """mean(A) - mean(B) on the same held-out examples, with a 95% interval from a paired document bootstrap.

    a_correct, b_correct: each arm's outcome per example (0/1 correctness, or any score), the same examples
    in the same order; or, for an arm with several seeds, one such vector per seed (averaged per example
    first, so A's seeds and B's seeds may differ in number). documents: each example's document id (any
    hashable). Each of `resamples` draws takes as many documents as there are, with replacement, each drawn
    document bringing all its examples (once per draw), and computes mean(A) - mean(B) over them; the
    interval is the 2.5th and 97.5th percentile (interpolated) of those. The same `seed` gives the same
    interval. Returns {"value", "ci95": [lower, upper], "documents", "examples"}: pass its "ci95" as
    verdict(..., difference=...)."""
    a = _outcomes(a_correct, "a_correct")
    b = _outcomes(b_correct, "b_correct")
    if isinstance(documents, str | bytes) or not isinstance(documents, Iterable):
        raise ValueError(f"documents must give each example's document id, got {documents!r}")
    documents = list(documents)
    if not documents:
        raise ValueError("documents is empty: pass each held-out example's document id")
    if not len(a) == len(b) == len(documents):
        raise ValueError(f"a_correct, b_correct and documents must cover the same examples, got {len(a)}, "
                         f"{len(b)} and {len(documents)}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a whole number >= 1, got {resamples!r}")
    index: dict = {}                     # document id -> its position, in order of first appearance
    sums: list[float] = []               # per document: the sum of A - B over its examples
    counts: list[int] = []               # per document: its number of examples
    for x, y, doc in zip(a, b, documents):
        try:
            k = index.setdefault(doc, len(index))
        except TypeError:
            raise ValueError(f"a document id must be hashable (a name or a number), got {doc!r}") from None
        if k == len(sums):
            sums.append(0.0)
            counts.append(0)
        sums[k] += x - y
        counts[k] += 1
    n_docs = len(sums)
    if n_docs < 2:
        raise ValueError(f"a document bootstrap needs at least 2 documents, got {n_docs}")
    rng, positions, draws = random.Random(seed), range(n_docs), []
    for _ in range(resamples):
        drawn = rng.choices(positions, k=n_docs)
        draws.append(sum(map(sums.__getitem__, drawn)) / sum(map(counts.__getitem__, drawn)))
    draws.sort()
    value = math.fsum(a) / len(a) - math.fsum(b) / len(b)
    return {"value": value, "ci95": [_percentile(draws, 0.025), _percentile(draws, 0.975)],
            "documents": n_docs, "examples": len(a)}


def _percentile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly between neighbours (numpy's default)."""
    at = q * (len(ordered) - 1)
    below = math.floor(at)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (at - below)


def _outcomes(values, what: str) -> list[float]:
    """One arm's per-example outcomes: a vector of numbers, or one vector per seed averaged per example."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValueError(f"{what} must be one outcome per example (or one such list per seed), got "
                         f"{values!r}")
    values = list(values)
    if not values:
        raise ValueError(f"{what} is empty: pass one outcome per held-out example")
    if _number(values[0]):
        return _vector(values, what)
    seeds = [_vector(v, f"{what}'s seed {i}") for i, v in enumerate(values)]
    lengths = sorted({len(s) for s in seeds})
    if len(lengths) > 1:
        raise ValueError(f"{what}'s seeds must each have one outcome per example, got lengths {lengths}")
    if not lengths[0]:
        raise ValueError(f"{what} is empty: pass one outcome per held-out example")
    return [sum(column) / len(seeds) for column in zip(*seeds)]


def _vector(values, what: str) -> list[float]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValueError(f"{what} must be a list of outcomes, one per example, got {values!r}")
    out = []
    for i, x in enumerate(values):
        if not _number(x) or not math.isfinite(float(x)):
            raise ValueError(f"{what} must hold finite numbers (0/1 correctness or a score), got {x!r} at "
                             f"example {i}")
        out.append(float(x))
    return out


def _number(x) -> bool:
    """A single number (a bool counts as 0/1; numpy and torch scalars too), not a list of them."""
    if isinstance(x, str | bytes) or isinstance(x, Iterable):
        return False
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return True
