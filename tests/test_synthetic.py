"""Permutation chains: only context solves them, and a tiny ALBERT leaves the plateau within 400 steps."""

import pytest
import torch

from minialbert import AlbertConfig
from minialbert.course.experiments.synthetic import FIRST_REAL, permutation_chains
from minialbert.evaluation import MLMBaselines, evaluate_pretraining
from minialbert.model import IGNORE_INDEX
from minialbert.pretraining_data import unmasked_ids
from minialbert.tokenizer import MASK_ID
from minialbert.train import RunOptions, TrainArgs, pretrain


def test_chains_follow_one_permutation_and_mask_fifteen_percent():
    data = permutation_chains(50, vocab_size=20, length=40, seed=3)
    following = {}
    for i in range(len(data)):
        chain = unmasked_ids(data[i])[1:-1].tolist()
        for a, b in zip(chain, chain[1:]):
            assert following.setdefault(a, b) == b          # one successor per token, in every example
        assert min(chain) >= FIRST_REAL
    assert sorted(following) == sorted(following.values()) == list(range(FIRST_REAL, 20))
    labels = data.mlm_labels
    assert (labels != IGNORE_INDEX).sum() == 50 * 6                  # round(0.15 * 40) per chain
    shown_mask = (data.input_ids == MASK_ID).sum() / (labels != IGNORE_INDEX).sum()
    assert 0.65 < shown_mask < 0.95
    other = permutation_chains(50, vocab_size=20, length=40, seed=4)
    assert not torch.equal(other.input_ids, data.input_ids)
    with pytest.raises(ValueError, match="vocab_size"):
        permutation_chains(5, vocab_size=6)


def test_a_tiny_albert_leaves_the_plateau_on_short_chains():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = AlbertConfig(vocab_size=64, embedding_size=32, hidden_size=64, num_layers=4, num_heads=2,
                       intermediate_size=128, max_position_embeddings=64)
    args = TrainArgs(objective="mlm", steps=400, batch_size=32, lr=3e-3, warmup=100, optimizer="adamw",
                     eval_every=0, checkpoint_every=0)
    train, valid = permutation_chains(4096, 64, 32, seed=0), permutation_chains(128, 64, 32, seed=1)
    result = pretrain(cfg, args, train, options=RunOptions(progress=False))
    ev = evaluate_pretraining(result.model, valid, MLMBaselines.fit(train, 64))
    chance = ev["baselines"]["unigram"]["mask"]
    assert chance["accuracy"] < 0.05                                 # frequencies say nothing here
    assert ev["mlm"]["mask"]["ci95"][0] > 0.3, ev["mlm"]["mask"]      # the context does
    assert ev["baselines"]["neighbour"]["mask"]["accuracy"] > 0.5     # and the neighbour counts know it
