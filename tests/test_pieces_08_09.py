"""Lessons 08 and 09's pieces: the cross-evaluation (a sentence head read on the other task's pairs) and
Table 2's parameter count. A right piece passes; each planted mistake fails with its name, in one line."""

import pytest
import torch

from minialbert.config import AlbertConfig
from minialbert.costs import count_parameters
from minialbert.course.pieces import PIECES, check, lessons_08_09


def cross_evaluation(head, pooled, labels):
    predicted = head(pooled).argmax(-1)
    return (predicted == labels).float().mean(), (predicted == 1).float().mean()


def table2_parameters(cfg):
    V, E, H, F = cfg.vocab_size, cfg.embedding_size, cfg.hidden_size, cfg.intermediate_size
    L, P, T = cfg.num_layers, cfg.max_position_embeddings, cfg.type_vocab_size
    embeddings = (V + P + T) * E + 2 * E
    projection = E * H + H if cfg.embedding_projection else 0
    attention, ffn = 4 * (H * H + H) + 2 * H, 2 * H * F + F + H + 2 * H
    stored_attention = 1 if cfg.sharing in ("all", "attention") else L
    stored_ffn = 1 if cfg.sharing in ("all", "ffn") else L
    return embeddings + projection + stored_attention * attention + stored_ffn * ffn + H * H + H


RIGHT = {"cross_evaluation": cross_evaluation, "table2_parameters": table2_parameters}


def said(capsys, name, piece):
    ok = check(name, piece)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"not one line: {out!r}"
    return ok, out


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_right_piece_passes(capsys, name):
    ok, out = said(capsys, name, RIGHT[name])
    assert ok and out.startswith(f"{name}: right: matches the package on 3 random inputs")


PLANTED = [(name, what, variant) for name in RIGHT for what, variant in PIECES[name].mistakes]


@pytest.mark.parametrize("name, what, variant", PLANTED, ids=[m[1] for m in PLANTED])
def test_each_planted_mistake_fails_with_its_name(capsys, name, what, variant):
    ok, out = said(capsys, name, variant)
    assert not ok and out.startswith(f"{name}: wrong: ") and out.endswith(f"that is what {what} gives\n")


def test_a_head_read_with_crossed_classes_is_caught():
    """As a learner might write it: class 1 taken to mean 'in order'."""
    def crossed(head, pooled, labels):
        predicted = 1 - head(pooled).argmax(-1)
        return (predicted == labels).float().mean(), (predicted == 1).float().mean()
    assert not check("cross_evaluation", crossed)


def test_a_count_without_the_pooler_is_caught(capsys):
    def no_pooler(cfg):
        return table2_parameters(cfg) - cfg.hidden_size * cfg.hidden_size - cfg.hidden_size
    ok, out = said(capsys, "table2_parameters", no_pooler)
    assert not ok and "yours gives" in out


def test_the_checks_cover_what_the_mistakes_need():
    """The random configs include a shared stack (or sharing is never tested) and a factorized one."""
    g = torch.Generator().manual_seed(0)
    configs = [lessons_08_09._table2_configs(g, trial)[0] for trial in range(3)]
    assert {c.sharing for c in configs} >= {"none", "all"} and any(c.embedding_size < c.hidden_size
                                                                   for c in configs)
    assert count_parameters(AlbertConfig.preset("albert-base")) == table2_parameters(
        AlbertConfig.preset("albert-base"))
