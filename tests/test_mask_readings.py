"""Arms read on the same [MASK] positions (experiments/mask_readings.py): the hits are the evaluation's
[MASK] accuracy position by position, and the paired difference separates a known shift that the arms'
own intervals cannot."""

from __future__ import annotations

import pytest
import torch

from minialbert.config import AlbertConfig
from minialbert.course.experiments.mask_readings import paired_mask_difference, read_arms
from minialbert.course.verdict import verdict
from minialbert.evaluation import evaluate_pretraining
from minialbert.model import AlbertForPretraining
from minialbert.pretraining_data import PretrainingDataset
from minialbert.tokenizer import MASK_ID


def heldout(n_examples=40, length=12, vocab=60, seed=0) -> PretrainingDataset:
    """Examples of `length` tokens, a third of them [MASK] with a label, from n_examples / 4 documents."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (n_examples, length), generator=g)
    masked = torch.rand(n_examples, length, generator=g) < 0.33
    labels = torch.where(masked, ids, -100)
    shown = torch.where(masked, MASK_ID, ids)
    offsets = torch.arange(0, n_examples * length + 1, length)
    types = torch.zeros(n_examples * length, dtype=torch.uint8)
    return PretrainingDataset(shown.flatten().int(), types, labels.flatten().int(), offsets,
                              torch.zeros(n_examples, dtype=torch.long), "sop", length,
                              torch.arange(n_examples) // 4)


def test_hits_are_the_evaluations_mask_accuracy_position_by_position():
    cfg = AlbertConfig.preset("ci-albert").replace(vocab_size=60, max_position_embeddings=16)
    torch.manual_seed(0)
    models = {"a": AlbertForPretraining(cfg).eval(), "b": AlbertForPretraining(cfg).eval()}
    data = heldout()
    hits, documents = read_arms(models, data, list(range(len(data))))
    for name, model in models.items():
        mask = evaluate_pretraining(model, data)["mlm"]["mask"]
        assert hits[name].shape == documents.shape == (mask["n"],)
        assert hits[name].mean().item() == pytest.approx(mask["accuracy"])
    same = paired_mask_difference([hits["a"]], [hits["a"]], documents)
    assert same["value"] == 0 and same["ci95"] == [0, 0] and same["documents"] == 10


def test_a_paired_difference_separates_a_shift_the_own_intervals_cannot():
    """Two arms that share which documents are hard, A right at 3% more positions: their own intervals
    overlap, the paired interval of A - B lies above 0."""
    g = torch.Generator().manual_seed(1)
    documents = torch.arange(3000) // 50                                   # 60 documents of 50 positions
    easy = torch.rand(60, generator=g)[documents]                          # a document's ease, shared
    u = torch.rand(3000, generator=g)
    b_hits, a_hits = (u < easy * 0.5).float(), (u < easy * 0.5 + 0.03).float()
    d = paired_mask_difference([a_hits], [b_hits], documents)
    assert 0.02 < d["value"] < 0.04 and d["ci95"][0] > 0

    def own(h):
        spread = paired_mask_difference([h], [torch.zeros_like(h)], documents)
        return {"value": spread["value"], "ci95": spread["ci95"], "seeds": [spread["value"]]}
    a, b = own(a_hits), own(b_hits)
    assert a["ci95"][0] < b["ci95"][1]                                     # the own intervals overlap
    assert verdict("beats", a, b).label == "not separated"
    assert verdict("beats", a, b, difference=d["ci95"]).label.startswith("hint")   # one seed each
