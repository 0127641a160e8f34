"""The two-each-side baseline: Witten-Bell interpolation over contexts of up to two tokens each side,
held against a per-position reading written with dictionaries, and on cases where the wider context
decides what one token each side cannot."""

import numpy as np
import pytest

from minialbert.local_context import CONTEXTS, TwoEachSide
from minialbert.tokenizer import MASK_ID

V = 40
EDGE = V


def flat(examples):
    ids = np.concatenate([np.asarray(e) for e in examples])
    starts = np.cumsum([0] + [len(e) for e in examples])
    return ids, starts


def fit(examples, fillers=range(5, V)):
    ids, starts = flat(examples)
    counts = np.bincount(ids, minlength=V).astype(float)
    counts[[t for t in range(V) if t not in set(fillers)]] = 0
    return TwoEachSide.fit(ids, starts, counts), counts


def reference_guess(examples, counts, shown, at):
    """The guess at position `at` of one shown example, from counts gathered example by example."""
    def context(seq, t, offsets):
        return tuple(seq[t + k] if 0 <= t + k < len(seq) and seq[t + k] != 0 else EDGE for k in offsets)

    tables = []
    for offsets in CONTEXTS:
        table = {}
        for seq in examples:
            for t, w in enumerate(seq):
                if counts[w] > 0:
                    fillers = table.setdefault(context(list(seq), t, offsets), {})
                    fillers[w] = fillers.get(w, 0) + 1
        tables.append(table)
    unigram = (counts + 1) / (counts + 1).sum()
    seen = [t.get(context(shown, at, o), {}) for t, o in zip(tables, CONTEXTS)]
    candidates = [max(s, key=lambda w: (s[w], -w)) for s in seen if s] + [int(unigram.argmax())]

    def prob(w):
        p = unigram[w]
        for fillers in reversed(seen):
            n = sum(fillers.values())
            lam = n / (n + len(fillers)) if n else 0.0
            p = lam * fillers.get(w, 0) / max(n, 1) + (1 - lam) * p
        return p

    return max(candidates, key=lambda w: (prob(w), -candidates.index(w)))


def test_the_guess_matches_a_per_position_reading_on_random_text():
    rng = np.random.default_rng(0)
    examples = [list(rng.integers(5, 14, size=rng.integers(3, 12))) for _ in range(400)]
    model, counts = fit(examples)
    shown = [list(rng.integers(5, 15, size=10)) for _ in range(60)]
    for row in shown:
        row[rng.integers(10)] = MASK_ID                      # a [MASK] in the context is never seen
    batch = np.array(shown)
    batch[5:, 8:] = 0                                        # padding reads as outside the example
    predicted = np.zeros_like(batch, dtype=bool)
    predicted[:, [0, 3, 6, 7]] = True
    guesses = model.predict(batch, predicted)
    expected = [reference_guess(examples, counts, list(batch[r]), c) for r, c in zip(*np.nonzero(predicted))]
    assert guesses.tolist() == expected


def test_two_tokens_each_side_decide_what_one_cannot():
    # Between 8 and 9 the filler is 11 twice as often as 10, but after "6 8" and before "9 7" it is 10.
    examples = [[6, 8, 10, 9, 7]] * 30 + [[12, 8, 11, 9, 13]] * 60
    model, _ = fit(examples)
    batch = np.array([[6, 8, MASK_ID, 9, 7], [12, 8, MASK_ID, 9, 13], [5, 8, MASK_ID, 9, 5]])
    predicted = np.zeros_like(batch, dtype=bool)
    predicted[:, 2] = True
    # the third never occurred with two each side: it backs off to (8 _ 9), whose favourite is 11
    assert model.predict(batch, predicted).tolist() == [10, 11, 11]


def test_only_fillers_are_guessed_and_the_chain_ends_in_the_unigram():
    examples = [[1, 20, 21, 2]] * 10 + [[1, 22, 2]] * 3         # 1 and 2 stand for [CLS] and [SEP]
    model, _ = fit(examples, fillers=range(5, V))
    batch = np.array([[1, 30, MASK_ID, 2], [1, MASK_ID, 31, 2]])
    predicted = np.array([[False, False, True, False], [False, True, False, False]])
    # (30 _ [SEP]) is unseen but (_ [SEP]) was seen with 21 and 22 and never with [SEP] itself as filler
    assert model.predict(batch, predicted).tolist() == [21, 20]


def test_a_vocabulary_too_large_for_the_keys_is_refused():
    with pytest.raises(ValueError, match="too large"):
        TwoEachSide.fit(np.array([5, 6]), np.array([0, 2]), np.ones(7000))
