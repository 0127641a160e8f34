"""The strongest local guesser the course measures: two tokens of context on each side, smoothed.

A masked-LM model beats "local statistics" only if it beats the best guess that reads nothing but
the tokens next to the blank. `evaluation.MLMBaselines`' neighbour-count guess reads one token on
each side and takes the most frequent filler, unsmoothed. `TwoEachSide` reads two on each side:

    contexts, longest first:  (l2 l1 _ r1 r2)  (l1 _ r1)  (l2 l1 _)  (_ r1 r2)  (l1 _)  (_ r1)  then none

and scores a filler w by Witten-Bell interpolation down that chain (the smoothing of Witten and
Bell 1991, as in n-gram language models):

    P_k(w) = lam_k * count(c_k, w) / count(c_k) + (1 - lam_k) * P_(k+1)(w),
    lam_k  = count(c_k) / (count(c_k) + distinct fillers seen in c_k)     (0 for an unseen context)

ending in the add-one unigram. A context seen often with few fillers is trusted; a rare one hands
most of its weight down the chain. The guess is the best-scoring of the candidates that any context
names (its most frequent filler) and the unigram's: the interpolated distribution's mode is almost
always one of them. Counts come from the unmasked training text, examples end to end; a position
outside the example (or padding) reads as EDGE, a token the input shows as [MASK] was never seen in
training text, so a context holding it is unseen and hands its weight down.
"""

from __future__ import annotations

import numpy as np

CONTEXTS = ((-2, -1, 1, 2), (-1, 1), (-2, -1), (1, 2), (-1,), (1,))    # offsets from the blank


class TwoEachSide:
    """Witten-Bell interpolated filler counts over two tokens of context on each side (see module doc)."""

    def __init__(self, vocab_size: int, tables: list[dict], unigram_probs: np.ndarray):
        self.vocab_size, self.tables, self.unigram_probs = vocab_size, tables, unigram_probs

    @classmethod
    def fit(cls, ids: np.ndarray, starts: np.ndarray, filler_counts: np.ndarray) -> TwoEachSide:
        """Count every (context, filler) over `ids` (T,), the unmasked training examples end to end,
        example i at ids[starts[i]:starts[i + 1]]. filler_counts (V,): how often each token was a
        masked-LM target in training; only those tokens are fillers (never [CLS], [SEP] or padding),
        and they give the add-one unigram at the end of the chain."""
        vocab_size = len(filler_counts)
        if (vocab_size + 1) ** len(CONTEXTS[0]) * vocab_size >= 2 ** 63:
            raise ValueError(f"a vocabulary of {vocab_size} tokens is too large for int64 context keys")
        ids = np.asarray(ids, dtype=np.int64)
        example = np.repeat(np.arange(len(starts) - 1), np.diff(starts))            # (T,)
        filler = filler_counts[ids] > 0                                               # (T,)
        tables = []
        for offsets in CONTEXTS:
            keys = _context_keys(lambda k: _shifted(ids, example, k, vocab_size), offsets, vocab_size)
            joint, joint_counts = np.unique((keys * vocab_size + ids)[filler], return_counts=True)
            context = joint // vocab_size                                # sorted by context, then filler
            first = np.flatnonzero(np.r_[True, context[1:] != context[:-1]])     # where each context starts
            totals = np.add.reduceat(joint_counts, first)                                # count(c)
            distinct = np.diff(np.r_[first, len(joint)])                                 # fillers seen in c
            most = np.repeat(np.maximum.reduceat(joint_counts, first), distinct)
            group = np.repeat(np.arange(len(first)), distinct)
            at_most = np.flatnonzero(joint_counts == most)               # the favourites (ties: all)
            leaders = at_most[np.r_[True, group[at_most][1:] != group[at_most][:-1]]]    # smallest filler
            tables.append({"context": context[first], "total": totals, "distinct": distinct,
                           "best": joint[leaders] % vocab_size, "joint": joint, "joint_count": joint_counts})
        smoothed = np.asarray(filler_counts, dtype=np.float64) + 1.0                   # add-one
        return cls(vocab_size, tables, smoothed / smoothed.sum())

    def predict(self, input_ids: np.ndarray, predicted: np.ndarray, pad_id: int = 0) -> np.ndarray:
        """The guess at every predicted position (row-major order) of a batch: input_ids (B, N) as the
        model sees them (masked), predicted (B, N) bool. Padding (pad_id) reads as outside the example."""
        V = self.vocab_size
        shown = np.where(input_ids == pad_id, V, input_ids.astype(np.int64)).clip(max=V)   # (B, N); V = EDGE
        padded = np.pad(shown, ((0, 0), (2, 2)), constant_values=V)                        # (B, N + 4)
        rows, cols = np.nonzero(predicted)                                                  # (M,)
        found = []                                             # per context: (keys, at, seen) in its table
        candidates = [np.full(len(rows), int(self.unigram_probs.argmax()))]       # the unigram's guess
        for offsets, table in zip(CONTEXTS, self.tables):
            keys = _context_keys(lambda k: padded[rows, cols + 2 + k], offsets, V)
            at = np.searchsorted(table["context"], keys).clip(max=len(table["context"]) - 1)
            seen = table["context"][at] == keys
            found.append((keys, at, seen))
            candidates.append(np.where(seen, table["best"][at], candidates[0]))
        candidates = np.stack(candidates[1:] + candidates[:1], axis=1)    # (M, C): ties go to longer contexts
        probs = self.unigram_probs[candidates]                                              # (M, C)
        for (keys, at, seen), table in reversed(list(zip(found, self.tables))):
            total = np.where(seen, table["total"][at], 0).astype(np.float64)[:, None]     # (M, 1)
            lam = total / np.maximum(total + np.where(seen, table["distinct"][at], 0)[:, None], 1)
            joint_keys = keys[:, None] * V + candidates                                    # (M, C)
            j = np.searchsorted(table["joint"], joint_keys).clip(max=len(table["joint"]) - 1)
            count = np.where(table["joint"][j] == joint_keys, table["joint_count"][j], 0)
            probs = lam * count / np.maximum(total, 1) + (1 - lam) * probs
        return candidates[np.arange(len(rows)), probs.argmax(1)]                            # (M,)


def _shifted(ids: np.ndarray, example: np.ndarray, k: int, edge: int) -> np.ndarray:
    """ids[t + k] for every t, or `edge` where t + k falls outside t's example."""
    at = np.arange(len(ids)) + k
    inside = (at >= 0) & (at < len(ids))
    inside[inside] = example[at[inside]] == example[inside]
    return np.where(inside, ids[at.clip(0, len(ids) - 1)], edge)


def _context_keys(token_at, offsets: tuple[int, ...], vocab_size: int) -> np.ndarray:
    """One int64 per position naming its context: the tokens at `offsets` (each 0..vocab_size, the
    last meaning EDGE) as digits in base vocab_size + 1; times a filler below 2**63 up to about 6,100
    tokens (the course's 4,000: 1.0e18; the gpu scale's 6,000: 7.8e18)."""
    keys = np.zeros_like(token_at(offsets[0]))
    for k in offsets:
        keys = keys * (vocab_size + 1) + token_at(k)
    return keys
