"""Honest held-out metrics: position kinds, baselines that see what the model sees, shares, intervals."""

import math

import pytest
import torch
from torch import nn

from minialbert.evaluation import (
    MLMBaselines,
    clustered_interval,
    evaluate_pretraining,
    evaluation_sample,
    format_report,
    position_kinds,
    proportion,
    sentence_metrics,
    task_metrics,
    wilson_interval,
)
from minialbert.model import IGNORE_INDEX, PretrainingOutput
from minialbert.pretraining_data import PretrainingDataset
from minialbert.tokenizer import CLS_ID, MASK_ID, SEP_ID

V = 50


def make_dataset(sequences, rng_seed=0, objective="mlm"):
    """Examples [CLS] seq [SEP]: position 1 shows [MASK], 2 a random token, 3 is kept; 4.. unpredicted."""
    g = torch.Generator().manual_seed(rng_seed)
    ids, labels, offsets = [], [], [0]
    for seq in sequences:
        tokens = [CLS_ID, *seq, SEP_ID]
        shown = list(tokens)
        lab = [IGNORE_INDEX] * len(tokens)
        for pos, kind in ((1, "mask"), (2, "random"), (3, "kept")):
            lab[pos] = tokens[pos]
            if kind == "mask":
                shown[pos] = MASK_ID
            elif kind == "random":
                offset = 1 + int(torch.randint(V - 6, (1,), generator=g))      # never the true token
                shown[pos] = 5 + (tokens[pos] - 5 + offset) % (V - 5)
        ids += shown
        labels += lab
        offsets.append(len(ids))
    n = len(ids)
    sentence = torch.tensor([i % 2 for i in range(len(sequences))]) if objective != "mlm" else None
    return PretrainingDataset(torch.tensor(ids, dtype=torch.int32), torch.zeros(n, dtype=torch.uint8),
                              torch.tensor(labels, dtype=torch.int32), torch.tensor(offsets), sentence,
                              objective, 64)


class Copier(nn.Module):
    """Predicts the token the input shows at every position; its sentence head always says class 1."""

    sentence_task = "sop"

    def __init__(self):
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, mlm_labels=None):
        predicted = mlm_labels != IGNORE_INDEX
        logits = torch.full((int(predicted.sum()), V), -10.0)
        logits[torch.arange(logits.shape[0]), input_ids[predicted]] = 10.0
        sentence = torch.tensor([[0.0, 1.0]]).repeat(input_ids.shape[0], 1)
        return PretrainingOutput(None, logits, sentence, None, None)


def test_wilson_interval_matches_a_known_case():
    lo, hi = wilson_interval(50, 100)         # textbook: 0.404 .. 0.596
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    assert proportion(3, 4)["n"] == 4 and math.isclose(proportion(3, 4)["accuracy"], 0.75)


def test_position_kinds_split_what_the_input_shows():
    data = make_dataset([[10, 11, 12, 13]])
    ex = data[0]
    kinds = position_kinds(ex["input_ids"][None], ex["mlm_labels"][None])
    assert kinds.tolist() == [0, 1, 2]


def test_a_copier_scores_kept_positions_only_and_a_constant_head_is_flagged():
    data = make_dataset([[10 + i % 20, 11, 12, 13, 14] for i in range(40)], objective="sop")
    result = evaluate_pretraining(Copier(), data, batch_size=7)
    assert result["mlm"]["kept"]["accuracy"] == 1.0
    assert result["mlm"]["mask"]["accuracy"] == 0.0 and result["mlm"]["random"]["accuracy"] == 0.0
    assert result["mlm"]["all"]["n"] == 120 and result["examples"] == 40
    s = result["sentence"]
    assert s["constant"] and s["predicted_shares"] == [0.0, 1.0] and s["accuracy"] == 0.5
    assert "constant predictor" in format_report(result)


def test_baselines_see_what_the_model_sees():
    # token after 20 is always 21 and before 22: the neighbour model must find it, the unigram cannot
    train = make_dataset([[20, 21, 22, 30, 31] for _ in range(5)] + [[7, 7, 7, 7, 7] for _ in range(9)])
    base = MLMBaselines.fit(train, vocab_size=V)
    assert base.unigram == 7
    ids = torch.tensor([[CLS_ID, 20, MASK_ID, 22, SEP_ID]])
    labels = torch.tensor([[IGNORE_INDEX, IGNORE_INDEX, 21, IGNORE_INDEX, IGNORE_INDEX]])
    guesses = base.predict(ids, labels)
    assert guesses["neighbour"].tolist() == [21]
    assert guesses["unigram"].tolist() == [7] and guesses["copy_or_unigram"].tolist() == [7]
    unseen = torch.tensor([[CLS_ID, 40, MASK_ID, 41, SEP_ID]])       # never-seen neighbours: back off
    assert base.predict(unseen, labels)["neighbour"].tolist() == [7]
    shown = torch.tensor([[CLS_ID, 20, 33, 22, SEP_ID]])             # kept/random: copy shows the input
    assert base.predict(shown, labels)["copy_or_unigram"].tolist() == [33]


def test_baselines_fit_counts_what_the_per_example_definition_counts():
    # Sequences of 3-9 tokens over a small vocabulary, so keys repeat and counts tie: the fit on the flat
    # tensors must give the most frequent (ties: smallest) middle token of every (left, right) pair, every
    # left and every right neighbour, counted example by example on the unmasked tokens.
    g = torch.Generator().manual_seed(3)
    data = make_dataset([(5 + torch.randint(8, (int(n),), generator=g)).tolist()
                         for n in torch.randint(3, 8, (300,), generator=g)])
    base = MLMBaselines.fit(data, vocab_size=V)
    triples = {}
    for i in range(len(data)):
        ex = data[i]
        seq = torch.where(ex["mlm_labels"] != IGNORE_INDEX, ex["mlm_labels"], ex["input_ids"]).tolist()
        for left, mid, right in zip(seq, seq[1:], seq[2:]):
            for key in (("pair", left * V + right), ("left", left), ("right", right)):
                triples.setdefault(key, []).append(mid)

    def best(kind):
        return {k: min(set(m), key=lambda t: (-m.count(t), t))
                for (what, k), m in triples.items() if what == kind}

    assert dict(zip(base.pairs.tolist(), base.pair_best.tolist())) == best("pair")
    assert {k: t for k, t in enumerate(base.left_best.tolist()) if t >= 0} == best("left")
    assert {k: t for k, t in enumerate(base.right_best.tolist()) if t >= 0} == best("right")


def test_baselines_in_a_full_evaluation():
    data = make_dataset([[10 + i % 20, 11, 12, 13, 14] for i in range(30)])
    base = MLMBaselines.fit(data, vocab_size=V)
    result = evaluate_pretraining(Copier(), data, baselines=base)
    assert result["baselines"]["copy_or_unigram"]["kept"]["accuracy"] == 1.0
    # [MASK] targets are 10..29: the unigram cross-entropy there is -mean log p(target), add-one smoothed
    targets = torch.tensor([t for i in range(30) for t in (10 + i % 20, 11, 12)])
    counts = torch.bincount(targets, minlength=V) + 1.0
    expected = -(counts / counts.sum()).log()[torch.tensor([10 + i % 20 for i in range(30)])].mean()
    assert result["unigram_mask_loss"] == pytest.approx(float(expected), rel=1e-6)
    assert result["mask_loss"] > result["unigram_mask_loss"]      # the copier bets everything on [MASK]
    assert set(result["baselines"]) == {"unigram", "copy_or_unigram", "neighbour", "two_each_side"}


def test_evaluation_sample_is_fixed_and_stated():
    data = make_dataset([[10, 11, 12, 13]] * 30)
    assert evaluation_sample(data) == list(range(30))
    a, b = evaluation_sample(data, 10, seed=1), evaluation_sample(data, 10, seed=1)
    assert a == b and len(set(a)) == 10
    with pytest.raises(ValueError, match="max_examples"):
        evaluation_sample(data, 0)


def test_sentence_metrics_report_shares_and_chance():
    m = sentence_metrics(torch.tensor([0, 1, 1, 1]), torch.tensor([0, 1, 0, 1]), "nsp")
    assert m["accuracy"] == 0.75 and m["predicted_shares"] == [0.25, 0.75] and m["chance"] == 0.5
    assert not m["constant"] and m["task"] == "nsp"


def test_a_clustered_interval_widens_to_the_number_of_documents():
    """40 documents of 50 positions, each document all right or all wrong: the evidence is 40 draws,
    not 2,000, and the interval must say so."""
    hits = torch.tensor([d % 2 == 0 for d in range(40) for _ in range(50)])
    docs = torch.arange(40).repeat_interleave(50)
    lo, hi = clustered_interval(hits, docs)
    per_doc = wilson_interval(20, 40)
    per_position = wilson_interval(1000, 2000)
    assert lo < 0.5 < hi
    assert (hi - lo) > 4 * (per_position[1] - per_position[0])                     # not 2,000 draws
    assert (hi - lo) == pytest.approx(per_doc[1] - per_doc[0], rel=0.25)            # about 40
    # every position its own document: about the Wilson interval over positions
    lo1, hi1 = clustered_interval(hits, torch.arange(2000))
    assert (hi1 - lo1) == pytest.approx(per_position[1] - per_position[0], rel=0.15)
    assert clustered_interval(hits, docs) == (lo, hi)                                # seeded


def test_task_metrics_resample_documents_where_every_example_names_one():
    predicted, labels = [1] * 200, [1 if d % 2 == 0 else 0 for d in range(20) for _ in range(10)]
    documents = [d for d in range(20) for _ in range(10)]                 # each document all right or wrong
    pooled, clustered = task_metrics(predicted, labels, 2), task_metrics(predicted, labels, 2, documents)
    assert pooled["accuracy"] == clustered["accuracy"] == 0.5 and clustered["documents"] == 20
    assert clustered["wilson95"] == pooled["ci95"]
    width = clustered["ci95"][1] - clustered["ci95"][0]
    assert width > 2 * (pooled["ci95"][1] - pooled["ci95"][0])             # 20 draws, not 200
    assert task_metrics(predicted, labels, 2, [None] * 200) == pooled      # independent items: Wilson


def test_evaluation_resamples_documents_where_the_data_name_them():
    data = make_dataset([[10 + i % 7, 11, 12, 13, 14] for i in range(60)], objective="sop")
    data.document_ids = torch.arange(60, dtype=torch.int32) // 20                    # 3 documents
    result = evaluate_pretraining(Copier(), data, MLMBaselines.fit(data, V))
    kept = result["mlm"]["kept"]
    assert kept["documents"] == 3 and kept["n"] == 60 and "wilson95" in kept
    sentence = result["sentence"]
    assert sentence["documents"] == 3 and sentence["accuracy"] == 0.5
    assert sentence["ci95"] == [0.5, 0.5]             # every document scores exactly half: nothing varies
    assert result["baselines"]["unigram"]["mask"]["documents"] == 3
