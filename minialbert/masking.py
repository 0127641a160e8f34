"""ALBERT's n-gram masking of one sequence: whole-word spans of 1-3 words, 80/10/10.

The paper's recipe (and google-research/albert's create_pretraining_data.py): 15% of the real
tokens are predicted; they are chosen as spans of n whole words with p(n) proportional to 1/n;
a chosen token becomes [MASK] 80% of the time, a random token 10%, and stays itself 10%. Every
random choice comes from the caller's seeded `random.Random`.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import accumulate
from typing import NamedTuple

from .config import IGNORE_INDEX, MASK_ID

MASK_RATE = 0.15                        # share of real tokens the model must predict
MAX_NGRAM = 3                           # spans of 1..3 whole words


def ngram_probabilities(max_ngram: int = MAX_NGRAM) -> list[float]:
    """p(n) = (1/n) / sum_k (1/k) for n = 1..max_ngram: short spans are favoured (.545/.273/.182)."""
    weights = [1 / n for n in range(1, max_ngram + 1)]
    return [w / sum(weights) for w in weights]


@cache
def cumulative_ngram_probabilities(max_ngram: int = MAX_NGRAM) -> tuple[float, ...]:
    """Running sums of ngram_probabilities: what random.choices computes from them on every draw."""
    return tuple(accumulate(ngram_probabilities(max_ngram)))


@dataclass(frozen=True)
class MaskingVocab:
    """What masking needs to know about the vocabulary, as plain lists for fast lookups."""

    is_word_start: list[bool]   # per id: the piece starts a word (SentencePiece's "▁")
    is_special: list[bool]      # per id: <pad>, <unk>, [CLS], [SEP], [MASK]: never masked
    random_ids: list[int]       # the non-special ids a "random token" is drawn from
    mask_id: int = MASK_ID

    @classmethod
    def from_tokenizer(cls, tokenizer) -> MaskingVocab:
        """Word starts and special ids of a SentencePiece tokenizer (tokenizer.Tokenizer)."""
        return cls.from_ids(tokenizer.word_start_mask().tolist(), tokenizer.special_ids)

    @classmethod
    def from_ids(cls, is_word_start: Sequence[bool], special_ids: Collection[int],
                 mask_id: int = MASK_ID) -> MaskingVocab:
        """From a per-id word-start flag and the special ids (tests use synthetic vocabularies)."""
        special = set(special_ids)
        is_special = [i in special for i in range(len(is_word_start))]
        random_ids = [i for i, s in enumerate(is_special) if not s]
        if not random_ids:
            raise ValueError("the vocabulary has no non-special token to mask: check special_ids")
        return cls(list(map(bool, is_word_start)), is_special, random_ids, mask_id)


class MaskedSpan(NamedTuple):
    """One masked n-gram."""

    words: int                  # n: how many whole words the span covers
    positions: tuple[int, ...]  # the token positions it masks


class MaskedSequence(NamedTuple):
    """A sequence after masking, its labels, and the spans that were chosen."""

    input_ids: list[int]        # what the model sees: [MASK], a random token or the original
    mlm_labels: list[int]       # the original id where a prediction is asked, else IGNORE_INDEX
    spans: list[MaskedSpan]     # the chosen n-grams, in the order they were chosen


def corrupt(token: int, vocab: MaskingVocab, rng: random.Random) -> int:
    """What the model sees at a chosen position: [MASK] 80% of the time, a random (non-special) token
    10%, the token itself 10% (the model still has to predict it)."""
    r = rng.random()
    if r < 0.8:
        return vocab.mask_id
    if r < 0.9:
        return vocab.random_ids[rng.randrange(len(vocab.random_ids))]
    return token


def whole_words(input_ids: Sequence[int], vocab: MaskingVocab) -> list[list[int]]:
    """Group positions into words: a word-start piece plus the pieces that continue it; specials skipped."""
    is_special, is_word_start = vocab.is_special, vocab.is_word_start
    words: list[list[int]] = []
    word: list[int] | None = None               # the word being extended; None after a special
    for pos, tok in enumerate(input_ids):
        if is_special[tok]:
            word = None
        elif word is None or is_word_start[tok]:
            word = [pos]
            words.append(word)
        else:
            word.append(pos)
    return words


def ngram_mask(input_ids: Sequence[int], vocab: MaskingVocab, rng: random.Random,
               mask_rate: float = MASK_RATE, max_ngram: int = MAX_NGRAM) -> MaskedSequence:
    """ALBERT's n-gram masking: spans of n <= max_ngram whole words until mask_rate of the real tokens.

    The budget is max(1, round(real tokens * mask_rate)) and is never exceeded (as in the
    official code). Each span draws n from p(n), then a start uniformly among the places where
    n free words fit in the budget without crossing a special token; if there is none, n
    shrinks. Unlike the official code, which skips spans that overlap earlier ones (so long
    spans come out rarer than p(n) says), the realised lengths follow p(n) up to the budget's
    end. Each chosen token becomes [MASK] 80%, a random token 10%, itself 10% of the time.
    """
    if input_ids and max(input_ids) >= len(vocab.is_special):
        raise ValueError(f"token id {max(input_ids)} is outside the vocabulary of "
                         f"{len(vocab.is_special)} ids: was the text encoded with another tokenizer?")
    words = whole_words(input_ids, vocab)
    ends = list(accumulate(map(len, words), initial=0))    # ends[w]: real tokens in words[:w]
    n_real = ends[-1]
    budget = max(1, round(n_real * mask_rate)) if n_real and mask_rate > 0 else 0
    free = [True] * len(words)
    cum_probs = cumulative_ngram_probabilities(max_ngram)

    def fits(s: int, n: int, room: int) -> bool:
        """Words s..s+n-1 are free, of one segment, and fit in `room` tokens."""
        tokens = ends[s + n] - ends[s]
        # the words' positions are consecutive exactly when no special token (no [SEP]) lies between
        return tokens <= room and words[s + n - 1][-1] - words[s][0] == tokens - 1 and all(free[s:s + n])

    def random_start(n: int, room: int) -> int | None:
        """A start drawn uniformly among those where n free words of one segment fit in `room` tokens.

        A few blind draws (cheap while most starts fit), then one scan of them all: both pick
        uniformly among the starts that fit. None if there is none.
        """
        n_starts = len(words) - n + 1
        for _ in range(8 if n_starts > 0 else 0):
            s = rng.randrange(n_starts)
            if fits(s, n, room):
                return s
        fitting = [s for s in range(n_starts) if fits(s, n, room)]
        return fitting[rng.randrange(len(fitting))] if fitting else None

    output, labels = list(input_ids), [IGNORE_INDEX] * len(input_ids)
    spans: list[MaskedSpan] = []
    n_masked = 0
    while n_masked < budget:
        start = None
        drawn = rng.choices(range(1, max_ngram + 1), cum_weights=cum_probs)[0]
        for n in range(drawn, 0, -1):                       # no place for n words: try n - 1
            start = random_start(n, budget - n_masked)
            if start is not None:
                break
        if start is None:
            break                               # not even one more word fits the budget
        positions = tuple(p for w in words[start:start + n] for p in w)
        for p in positions:
            labels[p] = input_ids[p]
            output[p] = corrupt(input_ids[p], vocab, rng)
        free[start:start + n] = [False] * n
        n_masked += len(positions)
        spans.append(MaskedSpan(n, positions))
    return MaskedSequence(output, labels, spans)


def official_span_lengths(input_ids: Sequence[int], vocab: MaskingVocab, rng: random.Random,
                          mask_rate: float = MASK_RATE, max_ngram: int = MAX_NGRAM) -> list[int]:
    """The span lengths, in whole words, that google-research/albert's placement gives one sequence, for
    comparison with ngram_mask (lesson 04): start words in shuffled order, n drawn from p(n) cut at the
    sequence's end and shortened to fit the budget, a span that overlaps an earlier one skipped."""
    words = whole_words(input_ids, vocab)
    budget = max(1, round(sum(map(len, words)) * mask_rate))
    starts = list(range(len(words)))
    rng.shuffle(starts)
    covered, n_masked, lengths = set(), 0, []

    def span(start: int, n: int) -> list[int]:
        return [p for w in words[start:start + n] for p in w]

    for start in starts:
        if n_masked >= budget:
            break
        probs = ngram_probabilities(max_ngram)[:len(words) - start]    # spans stop at the end
        n = rng.choices(range(1, len(probs) + 1), weights=probs)[0]
        while n > 1 and n_masked + len(span(start, n)) > budget:         # shorten to fit the budget
            n -= 1
        if n_masked + len(span(start, n)) > budget or covered & set(span(start, n)):   # overlaps: skip it
            continue
        covered |= set(span(start, n))
        n_masked += len(span(start, n))
        lengths.append(n)
    return lengths
