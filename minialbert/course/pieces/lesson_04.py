"""Lesson 04's pieces: n-gram masking and the NSP and SOP sentence pairs."""

from __future__ import annotations

import random

import torch

from ...config import CLS_ID, IGNORE_INDEX, MASK_ID, PAD_ID, SEP_ID, UNK_ID
from ...masking import (
    MASK_RATE,
    MAX_NGRAM,
    MaskingVocab,
    corrupt,
    cumulative_ngram_probabilities,
    ngram_mask,
    ngram_probabilities,
    whole_words,
)
from .checking import Piece


def _masking_vocab(g) -> MaskingVocab:
    starts = (torch.rand(40, generator=g) < 0.6).tolist()
    return MaskingVocab.from_ids(starts, special_ids={PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID})


def _whole_words_inputs(g, trial):
    vocab = _masking_vocab(g)
    a, b = (torch.randint(5, 40, (n,), generator=g).tolist() for n in (7, 5))
    return [CLS_ID, *a, SEP_ID, *b, SEP_ID], vocab


def _corrupt_shares(corrupt_fn, g, trial) -> tuple[str | None, float]:
    """80/10/10 measured: 30,000 draws at one position of a seeded random.Random."""
    vocab, rng, token, draws = _masking_vocab(g), random.Random(trial), 7, 30_000
    seen = [corrupt_fn(token, vocab, rng) for _ in range(draws)]
    if bad := [t for t in seen if t != token and t != vocab.mask_id and t not in vocab.random_ids]:
        return f"it returned {bad[0]}, which is neither [MASK], the token, nor a non-special id", 0.0
    masked, same = seen.count(vocab.mask_id) / draws, seen.count(token) / draws
    other = 1 - masked - same
    expected_same = 0.1 + 0.1 / len(vocab.random_ids)       # a random draw may hit the token itself
    shares = (masked - 0.8, other - (0.1 - 0.1 / len(vocab.random_ids)), same - expected_same)
    if max(abs(x) for x in shares) > 0.012:                  # about 6 standard errors at 30,000 draws
        return (f"shares over {draws:,} draws: [MASK] {masked:.3f}, another token {other:.3f}, "
                f"unchanged {same:.3f}; ALBERT's are 0.8 / 0.1 / 0.1"), 0.0
    return None, max(abs(x) for x in shares)


def _pair_inputs(g, trial):
    a, b, other = (torch.randint(5, 40, (n,), generator=g).tolist() for n in (4, 3, 5))
    return a, b, other, trial % 2 == 1          # trials alternate: keep / swap (or real / random B)


def _sop_pair(a, b, other, swap):
    """segments.sentence_order_pairs' rule: label 1 = the two segments swapped."""
    return (b, a, 1) if swap else (a, b, 0)


def _nsp_pair(a, b, other, use_random):
    """segments.next_sentence_pairs' rule: label 1 = B is text from another document."""
    return (a, other, 1) if use_random else (a, b, 0)


def _package_budget(n_real: int, mask_rate: float) -> int:
    """How many tokens masking.ngram_mask predicts in n_real one-piece words: its budget, measured."""
    vocab = MaskingVocab.from_ids([True] * 10, special_ids={PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID})
    labels = ngram_mask([7] * n_real, vocab, random.Random(0), mask_rate=mask_rate).mlm_labels
    return sum(label != IGNORE_INDEX for label in labels)


def _budget_inputs(g, trial):
    return ((37, 0.15), (3, 0.15), (0, 0.15))[trial % 3]     # 5.55 rounds to 6; 0.45 to 0, raised to 1


def _ngram_draw_shares(draw_fn, g, trial) -> tuple[str | None, float]:
    """p(n) measured: 30,000 draws of n from a seeded random.Random, against ngram_probabilities."""
    max_ngram, rng, draws = 3 + trial % 2, random.Random(trial), 30_000
    seen = [draw_fn(rng, max_ngram) for _ in range(draws)]
    if bad := [n for n in seen if n not in range(1, max_ngram + 1)]:
        return f"it drew n = {bad[0]!r}; n must be an integer from 1 to max_ngram = {max_ngram}", 0.0
    shares = [seen.count(n) / draws for n in range(1, max_ngram + 1)]
    expected = ngram_probabilities(max_ngram)
    largest = max(abs(s - e) for s, e in zip(shares, expected))
    if largest > 0.012:                                       # about 4 standard errors at 30,000 draws
        return (f"shares of n = 1..{max_ngram} over {draws:,} draws: "
                f"{' / '.join(f'{s:.3f}' for s in shares)}; p(n) = (1/n) / sum(1/k) gives "
                f"{' / '.join(f'{e:.3f}' for e in expected)}"), 0.0
    return None, largest


def _package_draw(rng: random.Random, max_ngram: int) -> int:
    """One span length n drawn from p(n) with rng, as masking.ngram_mask draws it."""
    return rng.choices(range(1, max_ngram + 1), cum_weights=cumulative_ngram_probabilities(max_ngram))[0]


def _package_spans(ids, vocab, rng, mask_rate=MASK_RATE, max_ngram=MAX_NGRAM):
    """masking.ngram_mask as the lesson's piece returns it: (the ids the model sees, the labels)."""
    masked = ngram_mask(ids, vocab, rng, mask_rate=mask_rate, max_ngram=max_ngram)
    return masked.input_ids, masked.mlm_labels


def _span_sequence(g) -> tuple[list[int], MaskingVocab]:
    """[CLS] A [SEP] B [SEP] of random pieces: words of one to three pieces, two segments."""
    vocab = _masking_vocab(g)
    a, b = (torch.randint(5, 40, (int(n),), generator=g).tolist()
            for n in torch.randint(4, 30, (2,), generator=g))
    return [CLS_ID, *a, SEP_ID, *b, SEP_ID], vocab


def _span_placement(mask_fn, g, trial) -> tuple[str | None, float]:
    """ngram_mask's rules on 400 random two-segment sequences: the budget, whole words, specials never
    predicted, labels, and [MASK] shown at about 80% of the predicted positions."""
    predicted = masked = 0
    rng = random.Random(trial)
    for _ in range(400):
        ids, vocab = _span_sequence(g)
        shown, labels = mask_fn(list(ids), vocab, rng)
        if len(shown) != len(ids) or len(labels) != len(ids):
            return (f"for a sequence of {len(ids)} tokens it returned {len(shown)} ids and {len(labels)} "
                    f"labels"), 0.0
        words = whole_words(ids, vocab)
        budget = max(1, round(sum(map(len, words)) * MASK_RATE))
        chosen = [p for p, label in enumerate(labels) if label != IGNORE_INDEX]
        if bad := [p for p in chosen if labels[p] != ids[p]]:
            return f"position {bad[0]}'s label is {labels[bad[0]]}, not the original token {ids[bad[0]]}", 0.0
        if bad := [p for p in chosen if vocab.is_special[ids[p]]]:
            return f"it predicts position {bad[0]}, a special token ({ids[bad[0]]})", 0.0
        if bad := [p for p, t in enumerate(shown) if labels[p] == IGNORE_INDEX and t != ids[p]]:
            return f"it changed position {bad[0]}, which it does not predict", 0.0
        if split := [w for w in words if 0 < sum(labels[p] != IGNORE_INDEX for p in w) < len(w)]:
            return (f"a word of {len(split[0])} pieces at positions {split[0]} is predicted only in part: "
                    f"spans are whole words"), 0.0
        if len(chosen) > budget:
            return (f"{len(chosen)} predicted tokens in {sum(map(len, words))} real ones: the budget is "
                    f"{budget}"), 0.0
        if fits := [w for w in words if labels[w[0]] == IGNORE_INDEX and len(w) <= budget - len(chosen)]:
            return (f"{len(chosen)} of a budget of {budget} predicted, yet the word at {fits[0]} still fits: "
                    f"keep placing spans until no word fits"), 0.0
        predicted += len(chosen)
        masked += sum(shown[p] == vocab.mask_id for p in chosen)
    if abs(masked / predicted - 0.8) > 0.04:                  # about 5 standard errors at ~3,000 positions
        return (f"[MASK] is shown at {masked / predicted:.0%} of the {predicted:,} predicted positions; "
                f"corrupt() shows it at 80%"), 0.0
    return None, 0.0


PIECES = (
    Piece("ngram_probabilities", "function", ngram_probabilities, lambda g, trial: (trial + 2,),
          mistakes=(("p(n) proportional to n (long spans favoured)",
                     lambda n: [k / sum(range(1, n + 1)) for k in range(1, n + 1)]),
                    ("equal probabilities", lambda n: [1 / n] * n))),
    Piece("whole_words", "function", whole_words, _whole_words_inputs,
          mistakes=(("counting the special tokens as words",
                     lambda ids, vocab: [[p] for p in range(len(ids))]),)),
    Piece("corrupt", "property", _corrupt_shares, lambda g, trial: (), package=corrupt),
    Piece("sop_pair", "function", _sop_pair, _pair_inputs,
          mistakes=(("label 0 for the swapped order (the package: 1 = swapped)",
                     lambda a, b, o, swap: (b, a, 0) if swap else (a, b, 1)),)),
    Piece("nsp_pair", "function", _nsp_pair, _pair_inputs,
          mistakes=(("label 0 for a random B (the package: 1 = B from another document)",
                     lambda a, b, o, r: (a, o, 0) if r else (a, b, 1)),
                    ("swapping A and B (that is SOP's negative, not NSP's)",
                     lambda a, b, o, r: (b, a, 1) if r else (a, b, 0)))),
    Piece("mask_budget", "function", _package_budget, _budget_inputs,
          mistakes=(("rounding without the minimum of one token", lambda n, rate: round(n * rate)),
                    ("truncating with int() instead of rounding", lambda n, rate: int(n * rate)))),
    Piece("ngram_draw", "property", _ngram_draw_shares, lambda g, trial: (), package=_package_draw),
    Piece("span_placement", "property", _span_placement, lambda g, trial: (), package=_package_spans),
)
