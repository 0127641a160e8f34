"""The 128-token NSP vs SOP reading (experiments/long_text_ablation.py) at ci scale: every arm read on
every task, arms as the mean of their seeds, paired differences that are the arms' differences."""

from __future__ import annotations

import pytest
import torch

from minialbert.course.experiments.long_text_ablation import (
    ARMS,
    CI_SIZES,
    arm_entry,
    combine,
    over_documents,
    run_long_text_ablation,
)
from minialbert.course.experiments.zoo import Zoo
from minialbert.course.scale import current_scale


@pytest.fixture(scope="module")
def result():
    return run_long_text_ablation(Zoo(current_scale("ci")), CI_SIZES)


def test_arm_entries_name_the_branches():
    assert [arm_entry(a, s) for a in ARMS for s in (0, 1)] == [
        "albert-mlm-128", "albert-mlm-128-seed1", "albert-nsp-128", "albert-nsp-128-seed1",
        "albert-sop-128", "albert-sop-128-seed1"]
    with pytest.raises(ValueError, match="unknown arm"):
        arm_entry("sop-balanced")


def test_over_documents_is_the_mean_with_a_document_interval():
    outcomes = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])        # two seeds
    docs = torch.tensor([0, 0, 1, 2])
    m = over_documents(outcomes, docs)
    assert m["accuracy"] == pytest.approx(0.625) and m["documents"] == 3 and m["examples"] == 4
    assert m["ci95"][0] <= 0.625 <= m["ci95"][1]


def test_arms_are_their_seeds_mean_and_differences_are_paired():
    docs = torch.tensor([0, 0, 1, 2, 3, 3])
    g = torch.Generator().manual_seed(0)

    def seed_outcomes(head: bool) -> dict:
        out = {"mask": torch.randint(2, (6,), generator=g).float()}
        return {**out, "head/sop": torch.randint(2, (6,), generator=g).float()} if head else out

    outcomes = {arm: [seed_outcomes(arm != "mlm") for _ in range(2)] for arm in ARMS}
    arms, differences = combine(outcomes, {"mask": docs, "head/sop": docs})
    assert set(arms["mlm"]) == {"mask"} and set(arms["sop"]) == {"mask", "head/sop"}
    assert set(differences["mask"]) == {"sop-nsp", "sop-mlm", "nsp-mlm"}
    assert set(differences["head/sop"]) == {"sop-nsp"}              # the MLM arm has no head to compare
    for arm in ("nsp", "sop"):
        mean = torch.stack([o["head/sop"] for o in outcomes[arm]]).mean().item()
        assert arms[arm]["head/sop"]["accuracy"] == pytest.approx(mean)
    for key, by_pair in differences.items():
        for name, d in by_pair.items():
            a, b = name.split("-")
            assert d["value"] == pytest.approx(arms[a][key]["accuracy"] - arms[b][key]["accuracy"], abs=1e-12)
            assert d["ci95"][0] <= d["value"] + 1e-12 <= d["ci95"][1] + 2e-12


def test_every_arm_is_read_on_every_task_it_can_be(result):
    readings = {"mask", "choice", "probe/nsp", "probe/sop", "probe/sop_swap"}
    heads = {"head/nsp", "head/sop", "head/sop_swap"}
    assert set(result["arms"]["mlm"]) == readings                      # no sentence head to read
    assert set(result["arms"]["nsp"]) == set(result["arms"]["sop"]) == readings | heads
    assert set(result["mask_baselines"]) == {"unigram", "neighbour", "two_each_side"}
    assert set(result["models"]) == {"trunk", "random init", *(arm_entry(a) for a in ARMS)}
    for key, differences in result["paired"].items():
        expected = {"sop-nsp"} if key.startswith("head/") else {"sop-nsp", "sop-mlm", "nsp-mlm"}
        assert set(differences) == expected
    data = result["data"]
    assert 0 < data["heldout_pairs"]["sop_swap"] <= data["heldout_pairs"]["sop"]
    assert result["arms"]["sop"]["head/sop_swap"]["examples"] == data["heldout_pairs"]["sop_swap"]
    assert result["arms"]["sop"]["mask"]["examples"] == data["mask_positions"] > 0
    for arm in ARMS:                                          # one seed at ci: the arm is that model
        assert result["arms"][arm]["mask"]["accuracy"] == pytest.approx(
            result["models"][arm_entry(arm)]["mask"]["accuracy"])
    assert result["arms"]["sop"]["head/sop"]["accuracy"] == pytest.approx(
        result["models"][arm_entry("sop")]["head"]["sop"]["accuracy"])
