"""The NSP vs SOP ablation: segment lengths, the length shortcut and its matched set, probes, the CLI."""

import json

import pytest
import torch

from minialbert import ablation
from minialbert.__main__ import main
from minialbert.model import IGNORE_INDEX
from minialbert.pretraining_data import PretrainingDataset
from minialbert.scale import SCALES
from minialbert.tokenizer import CLS_ID, SEP_ID


def pairs(lengths, labels, objective="sop"):
    """[CLS] A [SEP] B [SEP] examples with the given (len A, len B) and sentence labels (tokens are 7s)."""
    ids, types, offsets = [], [], [0]
    for a, b in lengths:
        ids += [CLS_ID, *[7] * a, SEP_ID, *[7] * b, SEP_ID]
        types += [0] * (a + 2) + [1] * (b + 1)
        offsets.append(len(ids))
    return PretrainingDataset(torch.tensor(ids), torch.tensor(types), torch.full((len(ids),), IGNORE_INDEX),
                              torch.tensor(offsets), torch.tensor(labels), objective, 64)


def test_segment_lengths_and_joined_datasets():
    first, second = pairs([(3, 5), (1, 1)], [0, 1]), pairs([(10, 2)], [1])
    both = ablation.joined(first, second)
    assert ablation.segment_lengths(both).tolist() == [[3, 5], [1, 1], [10, 2]]
    assert [int(both[i]["sentence_label"]) for i in range(3)] == [0, 1, 1]
    assert torch.equal(both[2]["input_ids"], second[0]["input_ids"])
    with pytest.raises(ValueError, match="cannot join a sop/64 dataset with a nsp/64"):
        ablation.joined(first, pairs([(1, 1)], [0], "nsp"))


def test_length_shortcut_finds_a_length_cue_and_the_matched_set_removes_it():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 12, (600, 2), generator=g)
    # Label 1 mostly when A is longer: a cue a reader of the lengths alone can use.
    cue = (lengths[:, 0] > lengths[:, 1]).long()
    noise = torch.rand(600, generator=g) < 0.2
    labels = torch.where(noise, 1 - cue, cue)
    train = pairs(lengths[:400].tolist(), labels[:400].tolist())
    test = pairs(lengths[400:].tolist(), labels[400:].tolist())
    found = ablation.length_shortcut(train, test)
    assert found["accuracy"] > 0.7 and found["n"] == 200
    matched = ablation.length_matched(test)
    assert 0 < len(matched) < 200 and len(matched) % 2 == 0
    cells = ablation.segment_lengths(test)[matched].tolist()
    for cell in {tuple(c) for c in cells}:                      # as many of each label in every cell
        at = [i for i, c in zip(matched, cells) if tuple(c) == cell]
        assert sum(int(test.sentence_labels[i]) for i in at) * 2 == len(at)
    assert ablation.length_shortcut(train, test, matched)["accuracy"] == 0.5
    assert ablation.length_matched(test) == matched                  # seeded: the same subset again
    with pytest.raises(ValueError, match="one segment per example"):
        ablation.segment_lengths(PretrainingDataset(torch.tensor([2, 7, 3]), torch.zeros(3, dtype=torch.long),
                                                    torch.full((3,), IGNORE_INDEX), torch.tensor([0, 3]),
                                                    None, "mlm", 64))


def test_fit_logistic_separates_what_is_separable_and_not_noise():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 5, generator=g) * torch.tensor([1.0, 100.0, 1.0, 1.0, 0.01])   # scales differ
    y = (x[:, 4] > 0).long()                                  # decided by the smallest-scale feature
    predict = ablation.fit_logistic(x[:300], y[:300])
    assert (predict(x[300:]) == y[300:]).float().mean() > 0.95
    noise = torch.randint(0, 2, (400,), generator=g)
    guessed = ablation.fit_logistic(x[:300], noise[:300])(x[300:])
    assert abs((guessed == noise[300:]).float().mean() - 0.5) < 0.15


def test_crossing_step_and_arm_names():
    def point(step, acc, low, chance=0.5):
        return {"step": step, "nsp": {"accuracy": acc, "ci95": [low, acc + 0.02], "chance": chance}}
    curve = [point(1000, 0.55, 0.52, chance=0.55),          # the majority guessed: not above chance
             point(2000, 0.52, 0.49), point(3000, 0.55, 0.52), point(4000, 0.61, 0.58)]
    assert ablation.crossing_step(curve, "nsp") == 4000
    assert ablation.crossing_step(curve, "nsp", "chance") == 3000
    assert ablation.crossing_step(curve, "nsp", 0.7) is None
    assert ablation.arm_entry("sop") == "albert-sop" and ablation.arm_entry("nsp", 2) == "albert-nsp-seed2"
    assert ablation.arm_entry("sop-balanced", 1) == "albert-sop-balanced-seed1"
    with pytest.raises(ValueError, match="unknown arm 'bert'"):
        ablation.arm_entry("bert")


@pytest.mark.slow
def test_ablation_cli_runs_the_whole_experiment_at_ci_scale(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["ablation", "--scale", "ci", "--arms", "nsp,sop,sop-balanced", "--seeds", "1",
                     "--out", str(tmp_path / "fig")]) == 0
    finally:
        torch.set_num_threads(threads)
    result = json.loads((tmp_path / "fig" / "nsp_vs_sop.json").read_text())
    assert (tmp_path / "fig" / "nsp_vs_sop.png").stat().st_size > 10_000
    assert [(r["arm"], r["entry"]) for r in result["runs"]] == [
        ("random init", None), ("nsp", "albert-nsp"), ("sop", "albert-sop"),
        ("sop-balanced", "albert-sop-balanced")]
    random_init, nsp, sop, sop_balanced = result["runs"]
    assert random_init["nsp"]["head"] is None
    assert random_init["sop"]["probe"]["n"] == result["heldout"]["sop"]["examples"]
    for run in (nsp, sop, sop_balanced):         # every arm read on both tasks with its own head
        for task in ("nsp", "sop"):
            assert run[task]["head"]["n"] == result["heldout"][task]["examples"]
            assert run[task]["head_matched"]["n"] == result["heldout"][task]["length_matched"]
            assert sum(run[task]["head"]["predicted_shares"]) == pytest.approx(1.0)
        assert run["mlm"]["mlm"]["mask"]["n"] > 0
    for task in ("nsp", "sop"):
        assert result["shortcut"][task]["length_matched"]["accuracy"] == 0.5
    assert set(result["curves"]) == {"albert-nsp", "albert-sop", "albert-sop-balanced"}
    steps = [p["step"] for p in result["curves"]["albert-sop"]]       # every evaluation's checkpoint
    ci = SCALES["ci"]
    assert len(steps) == ci.zoo_evals and steps == sorted(steps) and steps[-1] == ci.zoo_steps
    assert {p["arm"] for p in result["curves"]["albert-nsp"]} == {"nsp"}
    assert {p["arm"] for p in result["curves"]["albert-sop-balanced"]} == {"sop-balanced"}
    assert {(d["task"], d["start"]) for d in result["downstream"]} == {
        (t, a) for t in ablation.DOWNSTREAM_TASKS for a in ("nsp", "sop", "sop-balanced")}
    assert set(result["summary"]) == {"nsp", "sop", "sop-balanced", "random init"}
    assert result["summary"]["sop"]["next-sentence"]["seeds"] == 1
