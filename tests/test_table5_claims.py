"""Table 5's claims on the 128-token arms (course/table5_claims.py): each claim's label follows its rule,
and a claim whose precondition fails is "untestable here" whatever its numbers."""

from __future__ import annotations

import copy

from minialbert.course.table5_claims import arm, arms_by_tasks, table5_claims
from minialbert.course.verdict import UNTESTABLE


def measured(accuracy: float, half: float = 0.01) -> dict:
    return {"accuracy": accuracy, "ci95": [accuracy - half, accuracy + half]}


def model(mask, choice, head=None, probe_swap=0.5) -> dict:
    tasks = ("nsp", "sop", "sop_swap")
    return {"mask": measured(mask), "choice": measured(choice),
            "head": {t: None if head is None else measured(head[t]) for t in tasks},
            "probe": {t: measured(probe_swap) for t in tasks}}


def pooled(*seeds: dict) -> dict:
    """An arm's pooled readings: the seeds' mean, with a narrow interval."""
    keys = ["mask", "choice"] + [f"{k}/{t}" for k in ("head", "probe") for t in ("nsp", "sop", "sop_swap")]
    out = {}
    for key in keys:
        kind, _, task = key.partition("/")
        values = [s[kind][task] if task else s[kind] for s in seeds]
        if any(v is None for v in values):
            continue
        mean = sum(v["accuracy"] for v in values) / len(values)
        out[key] = measured(mean, 0.005)
    return out


def difference(value: float, half: float = 0.004) -> dict:
    return {"value": value, "ci95": [value - half, value + half]}


def result(sop_swap: float = 0.70, mask=(0.12, 0.13, 0.14)) -> dict:
    """Two seeds per arm: MLM only, NSP (at chance on order), SOP (order learned to `sop_swap`)."""
    mlm_mask, nsp_mask, sop_mask = mask
    models = {
        "mlm-0": model(mlm_mask, 0.30, probe_swap=0.52), "mlm-1": model(mlm_mask, 0.30, probe_swap=0.52),
        "nsp-0": model(nsp_mask, 0.31, {"nsp": 0.80, "sop": 0.70, "sop_swap": 0.50}),
        "nsp-1": model(nsp_mask, 0.31, {"nsp": 0.80, "sop": 0.70, "sop_swap": 0.50}),
        "sop-0": model(sop_mask, 0.40, {"nsp": 0.66, "sop": 0.80, "sop_swap": sop_swap}, probe_swap=0.65),
        "sop-1": model(sop_mask, 0.40, {"nsp": 0.66, "sop": 0.80, "sop_swap": sop_swap}, probe_swap=0.65),
        "trunk": model(0.11, 0.29), "random init": model(0.0, 0.25),
    }
    entries = {"trunk": "albert-trunk"}
    entries |= {f"{a} seed {s}": f"{a}-{s}" for a in ("mlm", "nsp", "sop") for s in (0, 1)}
    arms = {a: pooled(models[f"{a}-0"], models[f"{a}-1"]) for a in ("mlm", "nsp", "sop")}
    paired = {"mask": {"nsp-mlm": difference(nsp_mask - mlm_mask),
                       "sop-mlm": difference(sop_mask - mlm_mask)},
              "head/sop_swap": {"sop-nsp": difference(sop_swap - 0.50)},
              "probe/sop_swap": {"sop-mlm": difference(0.13)},
              "choice": {"sop-nsp": difference(0.09), "sop-mlm": difference(0.10)}}
    return {"entries": entries, "models": models, "arms": arms, "paired": paired,
            "mask_baselines": {"unigram": measured(0.05), "two_each_side": measured(0.15)},
            "data": {"heldout_label_shares": {"nsp": [0.5, 0.5], "sop": [0.6, 0.4], "sop_swap": [0.5, 0.5]},
                     "choice": {"chance": 0.25}}}


def labels(r: dict) -> list[str]:
    return [v.label for _, v in table5_claims(r, margin=0.033)]


def test_every_claim_follows_its_rule_where_order_was_learned():
    assert labels(result()) == ["reproduced", "reproduced", "sop beats nsp", "sop beats mlm",
                                "nsp non-inferior to mlm", "sop non-inferior to mlm", "sop beats nsp",
                                "sop beats mlm"]


def test_where_no_arm_learned_order_claims_1_and_2_are_untestable_not_reproduced():
    found = labels(result(sop_swap=0.502))
    assert found[:2] == [UNTESTABLE, UNTESTABLE]
    assert found[2] == "not separated"                        # +0.2 points with a paired interval of +-0.4
    assert labels(result(sop_swap=0.54))[:2] == [UNTESTABLE, UNTESTABLE]    # above chance, not above 55%


def test_an_arm_on_the_plateau_makes_the_mask_cost_untestable():
    r = result(mask=(0.05, 0.13, 0.14))                       # the MLM arm's interval reaches the unigram's
    verdicts = dict(table5_claims(r, margin=0.033))
    cost = [v for claim, v in verdicts.items() if claim.startswith("4.")]
    assert [v.label for v in cost] == [UNTESTABLE, UNTESTABLE]
    assert "mlm" in cost[0].reason


def test_a_sentence_arm_that_costs_more_than_the_margin_is_not_shown_non_inferior():
    r = result(mask=(0.14, 0.12, 0.14))                       # NSP 2 points below MLM only
    assert labels(r)[4] == "nsp not shown non-inferior to mlm"


def test_an_arm_carries_its_own_seeds_and_the_table_names_every_row():
    r = result()
    r2 = copy.deepcopy(r)
    r2["models"]["sop-1"]["head"]["sop_swap"] = measured(0.60)
    assert arm(r2, "sop", "head/sop_swap")["seeds"] == [0.70, 0.60]
    assert arm(r, "mlm", "head/sop") is None                  # the MLM arm has no sentence head
    table = arms_by_tasks(r)
    for row in ("mlm (2 seeds)", "nsp (2 seeds)", "sop (2 seeds)", "trunk", "random init", "majority",
                "two each side"):
        assert row in table
