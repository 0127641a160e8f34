"""The positive control for NSP vs SOP (experiments/order_control.py): the CI preset end to end, the
swap-only subset, the downstream questions, and one thing that could fail about learning."""

from __future__ import annotations

import json
import math
import random

import pytest

from minialbert.corpus.ordered import ordered_documents
from minialbert.course.experiments.order_control import ARMS, CI_SIZES, run_order_control
from minialbert.course.experiments.pair_readings import CHOICES, next_sentence_questions, swap_only
from minialbert.masking import MaskingVocab
from minialbert.pretraining_data import examples_from_token_documents, unmasked_ids
from minialbert.tokenizer import Tokenizer

TASKS = ("nsp", "sop", "sop_swap")


@pytest.fixture(scope="module")
def result():
    return run_order_control(CI_SIZES, seed=0)


@pytest.fixture(scope="module")
def tokens():
    """A tokenizer trained on a few training documents, and 80 valid documents as token ids."""
    tok = Tokenizer.train([s for d in ordered_documents("train", 300) for s in d.sentences], 1000)
    return tok, [[tok.encode(s) for s in d.sentences] for d in ordered_documents("valid", 80)]


def _check_accuracy(m: dict) -> None:
    assert 0.0 <= m["accuracy"] <= 1.0
    lo, hi = m["ci95"]
    assert 0.0 <= lo <= hi <= 1.0
    for shares in ("predicted_shares", "label_shares"):
        if shares in m:
            assert math.isclose(sum(m[shares]), 1.0, abs_tol=1e-9)


def test_ci_preset_runs_end_to_end_and_is_well_formed(result):
    json.dumps(result, allow_nan=False)                         # JSON-ready, nothing non-finite
    assert result["config"]["max_position_embeddings"] == CI_SIZES.max_seq_len
    assert result["recipe"]["segmenting"] == "official"
    assert set(result["arms"]) == set(ARMS)
    for arm, readings in result["arms"].items():
        _check_accuracy(readings["mask_accuracy"])
        for task in TASKS:
            _check_accuracy(readings["probe"][task])
            head = readings["head"][task]
            assert (head is None) == (arm == "mlm")              # the MLM arm has no sentence head
            if head is not None:
                _check_accuracy(head)
    for task in TASKS:
        _check_accuracy(result["random_init"]["probe"][task])
        assert math.isclose(sum(result["data"]["heldout_label_shares"][task]), 1.0, abs_tol=1e-9)
        baseline = result["baselines"][task]
        assert 0.5 <= baseline["majority"] <= 1.0
        _check_accuracy(baseline["length_rule"])
    for baseline in result["mask_baselines"].values():
        _check_accuracy(baseline)
    down = result["downstream"]
    assert down["chance"] == 1 / CHOICES
    for arm in ARMS:
        _check_accuracy(down["arms"][arm])
    for difference in [*down["paired"].values(), *result["paired"].values()]:
        lo, hi = difference["ci95"]
        assert -1.0 <= lo <= hi <= 1.0 and -1.0 <= difference["value"] <= 1.0
    assert {"sop-mlm", "sop-nsp"} <= set(down["paired"])
    assert all(isinstance(v, bool) for v in result["goals"].values())
    assert result["seconds"] > 0


def test_swap_only_pairs_come_from_one_document(tokens):
    """Every kept pair's A and B are runs of A's document (for a swapped pair, B's run comes first);
    every pair whose B is not from A's document (the official random-document negatives) is dropped."""
    tok, docs = tokens
    data = examples_from_token_documents(docs, MaskingVocab.from_tokenizer(tok), "sop", 128, seed=3,
                                         segmenting="official")
    kept = set(swap_only(data, docs))
    flat = [[t for sentence in doc for t in sentence] for doc in docs]

    def where(haystack: list[int], needle: list[int]) -> int:
        return next((i for i in range(len(haystack) - len(needle) + 1)
                     if haystack[i:i + len(needle)] == needle), -1)

    dropped_other_document = 0
    for i in range(len(data)):
        ex = data[i]
        ids, types = unmasked_ids(ex).tolist(), ex["token_type_ids"].tolist()
        a, b = ids[1:types.index(1) - 1], ids[types.index(1):-1]
        doc = flat[int(data.document_ids[i])]
        if i in kept:
            assert where(doc, a) >= 0 and where(doc, b) >= 0
            if int(data.sentence_labels[i]) == 1:                 # swapped: B's run precedes A's
                assert where(doc, b) < where(doc, a)
        elif where(doc, b) < 0:
            dropped_other_document += 1
    assert dropped_other_document > 0                            # the random-document negatives exist
    assert all(where(flat[int(data.document_ids[i])], _b(data, i)) >= 0 for i in kept)
    labels = [int(data.sentence_labels[i]) for i in kept]
    assert 0.35 < sum(labels) / len(labels) < 0.65                # in order or swapped, about half each


def _b(data, i: int) -> list[int]:
    ex = data[i]
    ids, types = unmasked_ids(ex).tolist(), ex["token_type_ids"].tolist()
    return ids[types.index(1):-1]


def test_questions_pick_among_sentences_of_one_document(tokens):
    _, docs = tokens
    questions = next_sentence_questions(docs, 2, 2, random.Random(0))
    assert len(questions) > len(docs)                            # up to two per document
    answers = [q["answer"] for q in questions]
    assert set(answers) == set(range(CHOICES))                   # the true sentence's place is shuffled
    for q in questions:
        doc = docs[q["document"]]
        assert len(q["candidates"]) == CHOICES
        assert all(c in doc for c in q["candidates"])            # all from the question's document
        assert len({tuple(c) for c in q["candidates"]}) == CHOICES
        truth = doc.index(q["candidates"][q["answer"]])
        context = [t for s in doc[max(0, truth - 2):truth] for t in s]
        assert q["context"] == context                           # the sentences right before the answer
        assert not any(c == s for c in q["candidates"] for s in doc[max(0, truth - 2):truth])


def test_the_stack_learns_an_overfit_check(result):
    """Something that could fail: an MLM + SOP model trained on a few fixed pairs of both labels fits their
    sentence labels (the CI preset's steps are too few to learn the held-out tasks) and its loss falls."""
    check = result["overfit_check"]
    assert check["pairs"] == CI_SIZES.overfit_pairs
    assert 0.2 < check["label_1_share"] < 0.8                   # a constant guess cannot pass
    assert check["sentence_accuracy"] >= 0.9, check
    assert check["last_loss"] < 0.5 * check["first_loss"], check
