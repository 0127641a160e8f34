"""AlbertConfig: validation messages, presets, and the parameter counts of the paper's tables."""

import re

import pytest

import minialbert as ma
from minialbert.config import AlbertConfig


@pytest.mark.parametrize("changes, message", [
    (dict(hidden_size=250, num_heads=12), "hidden_size 250 is not divisible by num_heads 12"),
    (dict(num_layers=12, num_hidden_groups=5), "num_hidden_groups 5 does not divide num_layers 12"),
    (dict(vocab_size=0), "vocab_size must be a positive integer, got 0"),
    (dict(hidden_size=-768), "hidden_size must be a positive integer"),
    (dict(num_layers=2.5), "num_layers must be a positive integer"),
    (dict(sharing="some"), "unknown sharing 'some'; choose one of all, attention, ffn, none"),
    (dict(hidden_act="swish"), "unknown hidden_act 'swish'"),
    (dict(attention_backend="flash"), "unknown attention_backend 'flash'"),
    (dict(sharing="none", inner_group_num=2), "sharing='none' gives every layer its own group"),
    (dict(embedding_projection=False), "embedding_projection=False needs embedding_size == hidden_size"),
    (dict(hidden_dropout_prob=1.0), "hidden_dropout_prob must be in [0, 1)"),
    (dict(layer_norm_eps=0.0), "layer_norm_eps must be a finite positive number"),
    (dict(layer_norm_eps=float("inf")), "layer_norm_eps must be a finite positive number"),
    (dict(initializer_range=-0.02), "initializer_range must be a finite positive number"),
    (dict(initializer_range=float("nan")), "initializer_range must be a number"),
    (dict(hidden_dropout_prob=None), "hidden_dropout_prob must be a number, got None"),
    (dict(layer_norm_eps="1e-12"), "layer_norm_eps must be a number"),
    (dict(embedding_projection="no"), "embedding_projection must be True or False"),
    (dict(pad_token_id=None), "pad_token_id must be a non-negative integer"),
    (dict(sharing="all", num_layers=4, num_hidden_groups=4), "shares nothing"),
    (dict(pad_token_id=30000), "pad_token_id 30000 must be a valid id below vocab_size 30000"),
])
def test_validation_names_field_and_fix(changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        AlbertConfig(**changes)


def test_unknown_preset_lists_choices():
    with pytest.raises(ValueError, match="unknown preset 'albert-huge'; choose one of bert-base"):
        AlbertConfig.preset("albert-huge")


def test_groups_default_follows_sharing():
    assert AlbertConfig(sharing="all").num_hidden_groups == 1
    assert AlbertConfig(sharing="none", num_layers=6).num_hidden_groups == 6
    assert AlbertConfig(sharing="all").replace(sharing="attention").num_hidden_groups == 12
    assert AlbertConfig(sharing="ffn", num_hidden_groups=2).num_hidden_groups == 12   # only "all" has groups


def test_replace_keeps_explicit_groups_or_refuses_them_by_name():
    """replace(num_layers=6) on a 2-group config used to drop the explicit 2 groups for 1."""
    cfg = AlbertConfig.preset("ci-albert", num_hidden_groups=2)
    six = cfg.replace(num_layers=6)
    assert (six.num_layers, six.num_hidden_groups) == (6, 2)
    assert cfg.replace(hidden_size=128).num_hidden_groups == 2
    with pytest.raises(ValueError, match="num_hidden_groups 2 does not divide num_layers 5"):
        cfg.replace(num_layers=5)
    assert cfg.replace(num_layers=5, num_hidden_groups=1).num_hidden_groups == 1     # given: taken
    # groups that another sharing derived (one per layer) are derived afresh when sharing becomes "all"
    assert AlbertConfig.preset("ci-bert").replace(sharing="all").num_hidden_groups == 1
    assert cfg.replace(sharing="none").num_hidden_groups == cfg.num_layers


def test_round_trip_through_json(tmp_path):
    cfg = AlbertConfig.preset("course-albert", sharing="ffn")
    cfg.save(tmp_path / "config.json")
    assert AlbertConfig.load(tmp_path / "config.json") == cfg


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.json does not exist"):
        AlbertConfig.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json is not valid JSON"):
        AlbertConfig.load(tmp_path / "bad.json")
    with pytest.raises(ValueError, match=r"unknown AlbertConfig field\(s\) \['hidden'\]"):
        AlbertConfig.from_dict({"hidden": 3})


# Table 1 of the paper (ICLR numbering): params in millions, rounded as the paper rounds.
# xxlarge is the exception the lesson discusses: the formula gives ~222.6M, the paper says 235M.
TABLE_1 = {"bert-base": 108, "bert-large": 334, "albert-base": 12, "albert-large": 18, "albert-xlarge": 60}


@pytest.mark.parametrize("name, paper_millions", TABLE_1.items())
def test_table_1_counts(name, paper_millions):
    millions = ma.count_parameters(AlbertConfig.preset(name)) / 1e6
    # The paper rounds to whole millions (BERT-base 109.1M is printed as 108M): within 1.5M.
    assert abs(millions - paper_millions) <= 1.5, (name, millions)


def test_exact_counts_from_paper_facts():
    expected = {"albert-base": 11.7, "albert-large": 17.7, "albert-xlarge": 58.7, "bert-base": 109.1,
                "bert-large": 334.6, "albert-xxlarge": 222.6}
    for name, millions in expected.items():
        assert round(ma.count_parameters(AlbertConfig.preset(name)) / 1e6, 1) == millions, name


# Tables 3 and 4: ALBERT-base (12 layers, H = 768) by embedding size and sharing strategy.
TABLE_3_4 = {(64, "none"): 87, (64, "all"): 10, (128, "none"): 89, (128, "all"): 12,
             (128, "attention"): 64, (128, "ffn"): 38, (256, "none"): 93, (256, "all"): 16,
             (768, "none"): 108, (768, "all"): 31, (768, "attention"): 83, (768, "ffn"): 57}


@pytest.mark.parametrize("E, sharing", TABLE_3_4)
def test_tables_3_and_4_counts(E, sharing):
    # The official code skips the E -> H projection when E == H, and so does the paper's count.
    cfg = AlbertConfig.preset("albert-base").replace(embedding_size=E, sharing=sharing,
                                                     embedding_projection=E != 768)
    assert round(ma.count_parameters(cfg) / 1e6) == pytest.approx(TABLE_3_4[E, sharing], abs=1)


def test_bert_twins_differ_only_in_sharing_and_embedding():
    for scale in ("ci", "course", "gpu"):
        albert = AlbertConfig.preset(f"{scale}-albert").to_dict()
        bert = AlbertConfig.preset(f"{scale}-bert").to_dict()
        differing = {k for k in albert if albert[k] != bert[k]}
        assert differing <= {"sharing", "embedding_size", "embedding_projection", "num_hidden_groups"}
        assert bert["embedding_size"] == bert["hidden_size"] and not bert["embedding_projection"]


def test_every_scale_preset_reads_the_scale_sequences_and_vocabulary():
    from minialbert.corpus import documents
    from minialbert.course.scale import SCALES

    for scale in SCALES.values():
        for preset in (scale.models.albert_preset, scale.models.bert_preset):
            cfg = AlbertConfig.preset(preset)
            assert cfg.max_position_embeddings >= scale.data.max_seq_len, (scale.name, preset)
            assert cfg.vocab_size == scale.data.vocab_size, (scale.name, preset)
        assert scale.data.corpus in ("course", "pydocs")
        assert 0 < scale.recipe.warmup_steps <= scale.recipe.pretrain_steps
    with pytest.raises(ValueError, match="unknown corpus"):
        documents("no-such-corpus")
