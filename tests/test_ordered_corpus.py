"""The generated `ordered` corpus, the positive control for sentence-order prediction: determinism and
disjoint splits, document shapes, one topic per document, order decidable from the text (a rule-based
orderer written here, reading only the text, beats 90% while a length-only rule stays at chance), NSP
solvable from topic words alone, and a 1,000-piece tokenizer trained on the train split."""

import random
import re
from collections import Counter

import pytest

from minialbert.corpus.ordered import (
    DEFAULT_SIZES,
    MAX_SENTENCES,
    MIN_SENTENCES,
    NAME,
    TOPICS,
    ordered_documents,
    topic_of,
)
from minialbert.sentences import SPLITS, Document, split_sentences
from minialbert.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[Document]]:
    return {split: ordered_documents(split) for split in SPLITS}


# ---------------------------------------------------------------------------------------------
# Determinism, splits, shapes

def test_same_seed_same_documents_and_prefixes(corpus):
    assert ordered_documents("valid") == corpus["valid"]
    assert ordered_documents("train", 50) == corpus["train"][:50]
    other_seed = ordered_documents("valid", seed=1)
    assert sum(a.sentences == b.sentences for a, b in zip(other_seed, corpus["valid"])) == 0


def test_splits_share_no_document(corpus):
    texts = {split: {d.sentences for d in docs} for split, docs in corpus.items()}
    assert len(texts["train"]) == DEFAULT_SIZES["train"]            # no duplicate inside a split either
    assert not texts["train"] & texts["valid"]
    assert not texts["train"] & texts["test"]
    assert not texts["valid"] & texts["test"]


def test_sizes_and_shapes(corpus):
    for split, docs in corpus.items():
        assert len(docs) == DEFAULT_SIZES[split]
        assert len({d.title for d in docs}) == len(docs)
        assert all(d.title.startswith(f"{NAME}:{split}:") for d in docs)
    docs = corpus["valid"]
    assert {len(d.sentences) for d in docs} == set(range(MIN_SENTENCES, MAX_SENTENCES + 1))
    for doc in docs:
        for s in doc.sentences:
            assert s[0].isupper() and s.endswith(".") and "  " not in s, s
            assert 8 <= len(s.split()) <= 26, s
            assert split_sentences(s) == [s]                            # the course's splitter keeps it whole
    assert len(ordered_documents("test", 0)) == 0
    with pytest.raises(ValueError):
        ordered_documents("dev")
    with pytest.raises(ValueError):
        ordered_documents("train", -1)


def test_vocabulary_is_small(corpus):
    words = Counter(w.strip(".,").lower() for d in corpus["train"] for s in d.sentences for w in s.split())
    assert 300 <= len(words) <= 1500
    mean_length = sum(len(s.split()) for d in corpus["train"] for s in d.sentences) / sum(
        len(d.sentences) for d in corpus["train"])
    assert 11 <= mean_length <= 17


# ---------------------------------------------------------------------------------------------
# One topic per document

def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def test_topics_have_distinct_vocabularies():
    assert len(TOPICS) >= 40
    assert len({t.name for t in TOPICS}) == len(TOPICS)
    owners = Counter(w for t in TOPICS for w in t.words)
    assert [w for w, n in owners.items() if n > 1] == []


def test_each_document_keeps_one_topic(corpus):
    all_topic_words = {w for t in TOPICS for w in t.words}
    seen = Counter()
    for doc in corpus["valid"] + corpus["test"]:
        topic = topic_of(doc)
        seen[topic.name] += 1
        for s in doc.sentences:
            present = _words(s) & all_topic_words
            assert present, s                                          # every sentence names its topic
            assert present <= topic.words, (doc.title, s, present - topic.words)
    assert len(seen) == len(TOPICS)                                    # every topic is used


# ---------------------------------------------------------------------------------------------
# Order is decidable from the text: a rule-based orderer that reads only the two runs

_TIME_PHRASES = ["at dawn|at first light", "at sunrise|as the sun rose", "at breakfast|over breakfast",
                 "by mid-morning|in the middle of the morning", "at noon|at midday",
                 "early in the afternoon|just after lunch", "late in the afternoon|at teatime",
                 "at sunset|as the sun set", "in the evening|at dusk", "at supper|after supper",
                 "late at night|long after dark", "at midnight|around midnight"]
_TIME_RANK = {p: rank for rank, phrases in enumerate(_TIME_PHRASES) for p in phrases.split("|")}
_TIME = re.compile("|".join(sorted(map(re.escape, _TIME_RANK), key=len, reverse=True)), re.IGNORECASE)
_NUMBER = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                      "thirteen fourteen fifteen sixteen seventeen eighteen nineteen "
                                      "twenty".split())}
_OPENS, _CLOSES = ("first,", "to begin,", "at the start,"), ("finally,", "at last,", "in the end,")


def _cues(run: list[str]) -> dict:
    text = " ".join(run).lower()
    return {"times": [_TIME_RANK[m.lower()] for m in _TIME.findall(text)],
            "numbers": [_NUMBER[w] for w in re.findall(r"[a-z]+", text) if w in _NUMBER],
            "indefinite": set(re.findall(r"\ban? ([a-z]+)", text)),
            "definite": set(re.findall(r"\bthe ([a-z]+)", text)),
            "opens": any(s.lower().startswith(_OPENS) or re.search(r"\b(named|called) [a-z]+", s.lower())
                         for s in run),
            "closes": any(s.lower().startswith(_CLOSES) for s in run)}


def _rising(before: list[int], after: list[int]) -> int:
    """+1 if every value before is below every value after, -1 if above, else 0."""
    if not before or not after:
        return 0
    return 1 if max(before) < min(after) else -1 if min(before) > max(after) else 0


CUE_KINDS = ("marker", "time", "count", "intro")


def cue_order(a: list[str], b: list[str], kinds: tuple[str, ...] = CUE_KINDS) -> bool | None:
    """True if the cues (of the given kinds) say run a comes before run b, False if after, None if they
    cannot tell."""
    ca, cb = _cues(a), _cues(b)
    votes = {"marker": ca["opens"] - cb["opens"] + cb["closes"] - ca["closes"],
             "time": _rising(ca["times"], cb["times"]),
             "count": _rising(ca["numbers"], cb["numbers"]),
             "intro": bool(ca["indefinite"] & cb["definite"]) - bool(cb["indefinite"] & ca["definite"])}
    total = sum(votes[kind] for kind in kinds)
    return None if total == 0 else total > 0


def length_order(a: list[str], b: list[str]) -> bool:
    """The length-only rule: the longer run comes first."""
    return len(" ".join(a)) >= len(" ".join(b))


def _sop_pairs(docs: list[Document], rng: random.Random, single: bool) -> list[tuple[list, list, bool]]:
    """(A, B, in order?) pairs: adjacent runs of one document, swapped half the time. single=True takes
    every pair of neighbouring sentences; otherwise four pairs of runs of 1-4 sentences per document."""
    pairs = []
    for doc in docs:
        s = list(doc.sentences)
        if single:
            cuts = [(i, i + 1, i + 2) for i in range(len(s) - 1)]
        else:
            cuts = [(max(0, cut - rng.randint(1, 4)), cut, min(len(s), cut + rng.randint(1, 4)))
                    for cut in (rng.randrange(1, len(s)) for _ in range(4))]
        for lo, cut, hi in cuts:
            first, second = s[lo:cut], s[cut:hi]
            pairs.append((first, second, True) if rng.random() < 0.5 else (second, first, False))
    return pairs


@pytest.mark.parametrize("single", [True, False], ids=["sentences", "runs"])
def test_order_is_decidable_from_cues_not_from_length(corpus, single):
    pairs = _sop_pairs(corpus["valid"], random.Random(0), single)
    assert len(pairs) > 1500
    cue_accuracy = sum(cue_order(a, b) is label for a, b, label in pairs) / len(pairs)   # None counts wrong
    length_accuracy = sum(length_order(a, b) == label for a, b, label in pairs) / len(pairs)
    assert cue_accuracy >= 0.9, cue_accuracy
    assert 0.45 <= length_accuracy <= 0.55, length_accuracy


def test_the_cue_kinds_are_mixed(corpus):
    """Each kind of cue alone is never wrong where it speaks, but none speaks for most neighbours: the
    order needs them all (and a model cannot learn one trick)."""
    pairs = _sop_pairs(corpus["valid"], random.Random(3), single=True)
    for kind in CUE_KINDS:
        verdicts = [(cue_order(a, b, (kind,)), label) for a, b, label in pairs]
        decided = [(verdict, label) for verdict, label in verdicts if verdict is not None]
        assert 0.15 <= len(decided) / len(pairs) <= 0.8, kind
        assert sum(verdict is label for verdict, label in decided) / len(decided) >= 0.99, kind


def test_shuffled_documents_lose_the_order(corpus):
    """The orderer reads cues, not something every pair has: on runs from two different documents of
    one topic its verdicts are near chance."""
    by_topic: dict[str, list[Document]] = {}
    for doc in corpus["valid"]:
        by_topic.setdefault(topic_of(doc).name, []).append(doc)
    rng, right, total = random.Random(1), 0, 0
    for docs in by_topic.values():
        for one, two in zip(docs[::2], docs[1::2]):
            a, b = list(one.sentences[1:3]), list(two.sentences[3:5])
            label = rng.random() < 0.5
            right += cue_order(a, b) is label
            total += 1
    assert total > 150 and right / total < 0.75


# ---------------------------------------------------------------------------------------------
# NSP is solvable from the topic alone

def _topic_guess(run: list[str]) -> str | None:
    words = _words(" ".join(run))
    hits = Counter({t.name: len(words & t.words) for t in TOPICS})
    name, count = hits.most_common(1)[0]
    return name if count else None


def test_next_sentence_prediction_is_solvable_from_topic(corpus):
    docs, rng = corpus["valid"], random.Random(2)
    right = 0
    for d, doc in enumerate(docs):
        cut = rng.randrange(1, len(doc.sentences))
        a = list(doc.sentences[max(0, cut - 2):cut])
        is_random = rng.random() < 0.5
        if is_random:
            other = docs[(d + rng.randrange(1, len(docs))) % len(docs)]
            start = rng.randrange(len(other.sentences))
            b = list(other.sentences[start:start + 2])
        else:
            b = list(doc.sentences[cut:cut + 2])
        right += (_topic_guess(a) != _topic_guess(b)) == is_random
    assert right / len(docs) >= 0.9


# ---------------------------------------------------------------------------------------------
# The repository's tokenizer trains on it

def test_a_thousand_piece_tokenizer_trains_on_the_train_split(corpus):
    tok = Tokenizer.train((s for d in corpus["train"] for s in d.sentences), vocab_size=1000)
    assert tok.vocab_size == 1000
    sentence = corpus["test"][0].sentences[0]
    ids = tok.encode(sentence)
    assert 0 < len(ids) <= 3 * len(sentence.split()) and 1 not in ids          # 1: <unk>
