"""The paper's Table 5 claims, read on the 128-token natural-text arms (the result of
`python -m minialbert ablation --long-text`, experiments/long_text_ablation.py): the arms-by-tasks table,
and one verdict per claim, each with its rule and the preconditions under which it is testable at all,
stated here before any number.

Preconditions (a claim that needs one is "untestable here" where it fails):

    left the plateau   every arm's [MASK] interval lies wholly above the unigram baseline's, on the same
                       positions: a masked-LM comparison between arms on the plateau says nothing
    order learned      the SOP arm's own head on swap-only SOP pairs has its interval above ORDER_LEARNED:
                       where no arm learned order, an arm at chance on it proves nothing

Claims (the paper's ALBERT-base, Table 5), each read with each arm's own head where it has one:

    1   NSP cannot solve SOP: the NSP arm on swap-only SOP pairs lies within 50% ± margin (reproduced,
        "at"); needs order learned
    2   SOP solves NSP: the SOP arm on NSP pairs lies above the majority class's share (reproduced,
        "above"); needs order learned
    3   SOP beats NSP on sentence order (swap-only pairs, own heads): paired beats
    3b  the SOP objective puts order in the representation: the linear probe on swap-only pairs, SOP
        against the MLM-only arm, paired beats
    4   a sentence loss costs the masked LM almost nothing: each sentence arm non-inferior to the MLM arm on
        [MASK], by the paired interval of the difference, within MASK_MARGIN; needs left the plateau
    5   downstream, order transfers: on the next-sentence choice, SOP beats NSP and SOP beats MLM (paired)

Every comparison between two arms reads them on the same held-out documents, so it is judged on the paired
document-bootstrap interval of their difference (the result's "paired"), never on their own intervals
side by side. An arm's value and interval are the mean over its seeds' per-example outcomes and a
document bootstrap of it (the result's "arms"); its seeds' own values come from the result's "models".
"""

from __future__ import annotations

from .verdict import Verdict, verdict

__all__ = ["COLUMNS", "MASK_MARGIN", "ORDER_LEARNED", "arms_by_tasks", "table5_claims"]

ORDER_LEARNED = 0.55        # the SOP arm's swap-only interval above this: order was learned here
MASK_MARGIN = 0.01          # "almost nothing": 1 point of [MASK] accuracy (the paper's arms lie within 0.9)
COLUMNS = (("mask", "[MASK]"), ("head/nsp", "head NSP"), ("head/sop", "head SOP"),
           ("head/sop_swap", "head swap-only"), ("probe/sop_swap", "probe swap-only"),
           ("choice", "next of 4"))


def reading(measured: dict, key: str) -> dict | None:
    """One model's reading by key ("mask", "choice", "head/sop", "probe/nsp", ...), or None."""
    kind, _, task = key.partition("/")
    found = measured.get(kind)
    return (found or {}).get(task) if task else found


def seed_names(result: dict, arm: str) -> list[str]:
    """The zoo entries of an arm's seeds, in seed order."""
    return [name for label, name in result["entries"].items() if label.startswith(f"{arm} seed ")]


def arm(result: dict, name: str, key: str) -> dict | None:
    """An arm as verdict() reads it: the seeds' pooled reading with its interval, and each seed's value."""
    pooled = result["arms"].get(name, {}).get(key)
    if pooled is None:
        return None
    seeds = [reading(result["models"][entry], key)["accuracy"] for entry in seed_names(result, name)]
    return {"name": name, "value": pooled["accuracy"], "ci95": pooled["ci95"], "seeds": seeds}


def arms_by_tasks(result: dict) -> str:
    """The table: each arm (its seeds pooled), the trunk, a random encoder and the baselines, by reading."""
    def cell(m: dict | None) -> str:
        return "-" if m is None else f"{m['accuracy']:.1%} [{m['ci95'][0]:.1%}, {m['ci95'][1]:.1%}]"

    width = 22
    lines = [f"{'':14s}" + "".join(f"{title:>{width}s}" for _, title in COLUMNS)]
    for name, arm_readings in result["arms"].items():
        seeds = len(seed_names(result, name))
        label = f"{name} ({seeds} seed{'s' * (seeds != 1)})"
        lines.append(f"{label:14s}" + "".join(f"{cell(arm_readings.get(k)):>{width}s}" for k, _ in COLUMNS))
    for name in ("trunk", "random init"):
        measured = result["models"][name]
        lines.append(f"{name:14s}" + "".join(f"{cell(reading(measured, k)):>{width}s}" for k, _ in COLUMNS))
    shares = result["data"]["heldout_label_shares"]
    majority = {f"{kind}/{task}": max(share) for kind in ("head", "probe") for task, share in shares.items()}
    majority["choice"] = result["data"]["choice"]["chance"]
    lines.append(f"{'majority':14s}{cell(result['mask_baselines']['unigram']):>{width}s}"
                 + "".join(f"{majority[k]:>{width}.1%}" for k, _ in COLUMNS[1:]))
    for name in ("neighbour", "two_each_side"):
        if name in result["mask_baselines"]:
            lines.append(f"{name.replace('_', ' '):14s}{cell(result['mask_baselines'][name]):>{width}s}")
    return "\n".join(lines)


def table5_claims(result: dict, margin: float) -> list[tuple[str, Verdict]]:
    """(claim, verdict) for every claim of the module doc, on a long-text result. margin: how close to 50%
    counts as chance for claim 1 (state it before the numbers)."""
    unigram = result["mask_baselines"]["unigram"]["ci95"][1]
    lowest = {name: readings["mask"]["ci95"][0] for name, readings in result["arms"].items()}
    low = min(lowest, key=lowest.get)
    plateau = (f"every arm's [MASK] interval above the unigram baseline's ({unigram:.1%} at most): lowest "
               f"{low}'s from {lowest[low]:.1%}", lowest[low] > unigram)
    swap = result["arms"]["sop"].get("head/sop_swap")
    order = (f"the SOP arm learned order (its swap-only interval above {ORDER_LEARNED:.0%}: from "
             f"{swap['ci95'][0]:.1%})", swap["ci95"][0] > ORDER_LEARNED)
    majority_nsp = max(result["data"]["heldout_label_shares"]["nsp"])

    def paired(key: str, a: str, b: str) -> list[float]:
        return result["paired"][key][f"{a}-{b}"]["ci95"]

    claims = [
        ("1. NSP cannot solve SOP (the NSP arm at chance on swap-only pairs)",
         verdict("reproduced", arm(result, "nsp", "head/sop_swap"), claim=0.5, direction="at", margin=margin,
                 condition="own head, swap-only held-out SOP pairs", percent=True, requires=[order])),
        ("2. SOP solves NSP (the SOP arm above the majority class on NSP pairs)",
         verdict("reproduced", arm(result, "sop", "head/nsp"), claim=majority_nsp, direction="above",
                 condition="own head, held-out NSP pairs (random-document negatives)", percent=True,
                 requires=[order])),
        ("3. SOP beats NSP on sentence order (own heads, swap-only pairs)",
         verdict("beats", arm(result, "sop", "head/sop_swap"), arm(result, "nsp", "head/sop_swap"),
                 difference=paired("head/sop_swap", "sop", "nsp"), percent=True)),
        ("3b. SOP puts order in the representation (probe, swap-only pairs, SOP against MLM only)",
         verdict("beats", arm(result, "sop", "probe/sop_swap"), arm(result, "mlm", "probe/sop_swap"),
                 difference=paired("probe/sop_swap", "sop", "mlm"), percent=True)),
    ]
    for name in ("nsp", "sop"):
        claims.append((f"4. {name.upper()}'s sentence loss costs the masked LM almost nothing",
                       verdict("non-inferior", arm(result, name, "mask"), arm(result, "mlm", "mask"),
                               margin=MASK_MARGIN, difference=paired("mask", name, "mlm"), percent=True,
                               requires=[plateau])))
    for other in ("nsp", "mlm"):
        claims.append((f"5. downstream, SOP beats {other.upper() if other == 'nsp' else 'MLM only'} "
                       "(the true next sentence among 4)",
                       verdict("beats", arm(result, "sop", "choice"), arm(result, other, "choice"),
                               difference=paired("choice", "sop", other), percent=True)))
    return claims
