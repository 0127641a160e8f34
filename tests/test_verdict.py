"""The verdict helper: each rule on constructed numbers, its edge cases and its errors."""

import math
import random
import re
from pathlib import Path

import nbformat
import pytest

from minialbert.course.verdict import (
    LABELS,
    UNTESTABLE,
    Verdict,
    arm_over_seeds,
    paired_difference,
    t_quantile,
    verdict,
)


def arm(name, value, ci95, seeds=None):
    out = {"name": name, "value": value, "ci95": ci95}
    return out if seeds is None else {**out, "seeds": seeds}


SOP = arm("sop", 0.105, [0.098, 0.112], [0.103, 0.105, 0.107])        # seed spread 0.004
MLM = arm("mlm", 0.073, [0.068, 0.078], [0.072, 0.073, 0.074])        # seed spread 0.002
CONDITION = "at an NSP accuracy of 60%; the paper's NSP arm had 90.5%"


def test_beats_needs_a_gap_beyond_the_seed_spread_and_separated_intervals():
    found = verdict("beats", SOP, MLM, percent=True)
    assert isinstance(found, Verdict) and found.label == "sop beats mlm"
    assert "+3.2 points exceeds the largest seed spread, sop's 0.4 points" in found.reason
    assert "[9.8%, 11.2%] lies above mlm's [6.8%, 7.8%]" in found.reason
    line = str(found)
    assert "\n" not in line and "[rule: sop beats mlm if sop - mlm exceeds the largest seed spread" in line
    mirrored = verdict("beats", MLM, SOP)              # the symmetric case is reported as such
    assert mirrored.label == "sop beats mlm" and "sop - mlm = +0.032" in mirrored.reason


def test_beats_is_not_a_finding_when_either_condition_fails():
    noisy = {**SOP, "seeds": [0.07, 0.09, 0.11]}       # intervals separate, gap inside sop's spread
    inside = verdict("beats", noisy, MLM)
    assert inside.label == "not separated"
    assert "is within the largest seed spread, sop's 0.04" in inside.reason and "lies above" in inside.reason
    wide = {**MLM, "ci95": [0.06, 0.10], "seeds": [0.0725, 0.073, 0.0735]}   # gap beyond spread, overlap
    overlapping = verdict("beats", SOP, wide)
    assert overlapping.label == "not separated"
    assert "exceeds" in overlapping.reason
    assert "[0.098, 0.112] overlaps mlm's [0.06, 0.1]" in overlapping.reason
    # the spread is the larger of the two arms compared, never another arm's
    assert "mlm's 0.05" in verdict("beats", SOP, {**MLM, "seeds": [0.05, 0.1]}).reason
    assert verdict("beats", SOP, SOP).label == "not separated"


def test_beats_with_one_seed_is_at_most_a_hint():
    hint = verdict("beats", {**SOP, "seeds": [0.105]}, MLM)
    assert hint.label == "hint: sop ahead"
    assert "only one seed of sop, so the seed spread is unknown: at most a hint, never a finding" \
        in hint.reason
    both = verdict("beats", {**MLM, "seeds": [0.073]}, {**SOP, "seeds": [0.105]})
    assert both.label == "hint: sop ahead" and "one seed of mlm and sop" in both.reason
    overlap = verdict("beats", {**SOP, "seeds": [0.105], "ci95": [0.07, 0.12]}, MLM)
    assert overlap.label == "not separated" and "spread is unknown" in overlap.reason


def test_non_inferior_is_one_sided_with_a_stated_margin():
    # the sentence losses raise [MASK] accuracy: evidence that they cost nothing, not against it
    assert verdict("non-inferior", SOP, MLM, margin=0.01).label == "sop non-inferior to mlm"
    slightly_worse = arm("nsp", 0.070, [0.066, 0.074])            # 0.3 points below, intervals overlap
    costs = verdict("non-inferior", slightly_worse, MLM, margin=0.02, percent=True)
    assert costs.label == "nsp non-inferior to mlm"
    assert "lower bound -1.2 points (conservatively nsp's lower 6.6% - mlm's upper 7.8%), above -2 points" \
        in costs.reason and "above -2 points (the margin)" in costs.rule
    too_wide = verdict("non-inferior", slightly_worse, MLM, margin=0.01)
    assert too_wide.label == "nsp not shown non-inferior to mlm" and "not above -0.01" in too_wide.reason
    paired = verdict("non-inferior", slightly_worse, MLM, margin=0.01, difference=[-0.006, 0.0])
    assert paired.label == "nsp non-inferior to mlm" and "interval of the difference" in paired.reason
    assert verdict("non-inferior", MLM, SOP, margin=0.01).label == "mlm not shown non-inferior to sop"


def test_reproduced_states_its_direction_and_condition():
    nsp_on_sop = arm("nsp", 0.51, [0.49, 0.53])
    at = verdict("reproduced", nsp_on_sop, claim=0.5, direction="at", margin=0.05, condition=CONDITION,
                 percent=True)
    assert at.label == "reproduced"
    assert at.rule.endswith("within 50% ± 5 points, " + CONDITION) and "nsp 51%" in at.reason
    assert verdict("reproduced", nsp_on_sop, claim=0.5, direction="at", margin=0.02,
                   condition=CONDITION).label == "not reproduced"
    sop_on_nsp = arm("sop", 0.55, [0.53, 0.57])
    above = verdict("reproduced", sop_on_nsp, claim=0.5, direction="above", condition="in direction only")
    assert above.label == "reproduced" and "lies above 0.5, in direction only" in above.rule
    level = verdict("reproduced", sop_on_nsp, claim=0.789, direction="above", condition="the paper's level")
    assert level.label == "not reproduced"
    below = verdict("reproduced", sop_on_nsp, claim=0.6, direction="below", condition="x")
    assert below.label == "reproduced" and "lies below 0.6" in below.rule
    spread = verdict("reproduced", sop_on_nsp, claim=0.5, direction="above", condition="a\ncondition")
    assert "\n" not in str(spread) and "a condition" in spread.rule


# Lower is better: an oscillation measure, where the smoother curve scores less (one seed per model).
SMOOTH = arm("albert", 0.4, [0.3, 0.5], [0.4])
JAGGED = arm("bert", 1.6, [1.4, 1.8], [1.6])


def test_beats_with_lower_better_leads_with_the_lower_value():
    hint = verdict("beats", SMOOTH, JAGGED, better="lower")
    assert hint.label == "hint: albert ahead"
    assert "albert - bert = -1.2; albert's interval [0.3, 0.5] lies below bert's [1.4, 1.8]" in hint.reason
    assert "(lower is better)" in hint.rule and "albert's 95% interval lies below bert's" in hint.rule
    assert verdict("beats", JAGGED, SMOOTH, better="lower").label == "hint: albert ahead"     # either order
    assert verdict("beats", SMOOTH, JAGGED).label == "hint: bert ahead"          # higher: the default
    overlap = verdict("beats", SMOOTH, {**JAGGED, "ci95": [0.45, 1.8]}, better="lower")
    assert overlap.label == "not separated" and "overlaps" in overlap.reason
    seeds = verdict("beats", {**SMOOTH, "seeds": [0.35, 0.45]}, {**JAGGED, "seeds": [1.5, 1.7]},
                    better="lower")
    assert seeds.label == "albert beats bert" and "-1.2 exceeds the largest seed spread" in seeds.reason
    noisy = verdict("beats", {**SMOOTH, "seeds": [0.1, 1.5]}, {**JAGGED, "seeds": [1.5, 1.7]},
                    better="lower")
    assert noisy.label == "not separated"
    assert "is within the largest seed spread, albert's 1.4" in noisy.reason


def test_non_inferior_with_lower_better_bounds_the_upper_end():
    close = arm("albert", 1.65, [1.5, 1.8])                      # a little worse (higher) than bert
    holds = verdict("non-inferior", close, JAGGED, margin=0.5, better="lower")
    assert holds.label == "albert non-inferior to bert"
    assert "upper bound +0.4 (conservatively albert's upper 1.8 - bert's lower 1.4), below +0.5" \
        in holds.reason
    assert "(lower is better) if the upper 95% bound of albert - bert is below +0.5" in holds.rule
    assert verdict("non-inferior", close, JAGGED, margin=0.3, better="lower").label == \
        "albert not shown non-inferior to bert"
    paired = verdict("non-inferior", close, JAGGED, margin=0.3, difference=[-0.1, 0.2], better="lower")
    assert paired.label == "albert non-inferior to bert" and "upper bound +0.2" in paired.reason
    assert verdict("non-inferior", SMOOTH, JAGGED, margin=0.0, better="lower").label == \
        "albert non-inferior to bert"


@pytest.mark.parametrize("call, message", [
    (lambda: verdict("wins", SOP, MLM), "unknown rule 'wins'; choose one of beats, non-inferior, reproduced"),
    (lambda: verdict("beats", {**SOP, "ci95": [0.2, 0.1]}, MLM), "sop's ci95 has its lower bound 0.2 above"),
    (lambda: verdict("beats", {**SOP, "ci95": [0.1]}, MLM), r"must be a 95% interval \[lower, upper\]"),
    (lambda: verdict("beats", {"ci95": [0.1, 0.2], "seeds": [0.1]}, MLM), "arm A needs a 'value'"),
    (lambda: verdict("beats", SOP, {"value": 0.1, "ci95": [0.0, 0.2]}), "arm B has no 'seeds'"),
    (lambda: verdict("beats", {**SOP, "seeds": []}, MLM), "'seeds' must be a non-empty list"),
    (lambda: verdict("beats", SOP), "beats compares two arms: pass B"),
    (lambda: verdict("beats", SOP, MLM, margin=0.01), "beats takes no margin"),
    (lambda: verdict("beats", [0.1, 0.2], MLM), "arm A must be a mapping"),
    (lambda: verdict("non-inferior", SOP, MLM), "non-inferior needs a margin"),
    (lambda: verdict("non-inferior", SOP, MLM, margin=-0.01), "margin must be a number >= 0, got -0.01"),
    (lambda: verdict("non-inferior", SOP, MLM, margin=0.01, difference=[0.01, -0.01]),
     "difference has its lower bound"),
    (lambda: verdict("non-inferior", SOP, MLM, margin=0.01, claim=0.5), "takes no claim"),
    (lambda: verdict("reproduced", SOP, claim=0.5, direction="above"), "needs the condition"),
    (lambda: verdict("reproduced", SOP, claim=0.5, direction="above", condition="  "), "needs the condition"),
    (lambda: verdict("reproduced", SOP, claim=0.5, direction="near", condition="c"), "needs a direction"),
    (lambda: verdict("reproduced", SOP, direction="above", condition="c"), "needs the paper's claim"),
    (lambda: verdict("reproduced", SOP, claim=0.5, direction="at", condition="c"), "'at' needs a margin"),
    (lambda: verdict("reproduced", SOP, MLM, claim=0.5, direction="above", condition="c"), "pass no B"),
    (lambda: verdict("beats", SOP, MLM, better="smaller"), "better must be one of higher, lower"),
    (lambda: verdict("reproduced", SOP, claim=0.5, direction="below", condition="c", better="lower"),
     "reproduced takes no better"),
    (lambda: verdict("reproduced", SOP, paper=0.865, chance=0.5, condition="c"), "needs a margin"),
    (lambda: verdict("reproduced", SOP, paper=0.865, margin=0.03, condition="c", direction="above"),
     "takes no claim or direction"),
    (lambda: verdict("reproduced", SOP, claim=0.5, direction="above", chance=0.5, condition="c"),
     "chance belongs to a claim with the paper's own number"),
    (lambda: verdict("beats", SOP, MLM, paper=0.5), "takes no claim, direction, condition, paper"),
    (lambda: t_quantile(0), "degrees of freedom"),
])
def test_bad_input_is_refused_with_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# Against the paper's own number: lesson 08's claims, with the paper's Table 5 numbers.
def seeds_of(*readings):
    return [{"accuracy": value, "ci95": [value - 0.005, value + 0.005]} for value in readings]


def test_far_below_the_papers_number_is_never_reproduced():
    """51.9% on a task where the paper has 86.5%: above chance at best, never 'reproduced'."""
    sop = {"name": "sop", "value": 0.519, "ci95": [0.511, 0.527], "seeds": [0.519]}
    found = verdict("reproduced", sop, paper=0.865, margin=0.033, chance=0.5, condition="matched pairs",
                    percent=True)
    assert found.label == "direction only"
    assert found.reason == "sop 51.9% [51.1%, 52.7%], the paper's 86.5% ± 3.3 points: gap -34.6 points"
    assert "direction only if it lies wholly above 50%" in found.rule and found.rule.endswith("matched pairs")
    touching = {**sop, "ci95": [0.495, 0.543]}
    assert verdict("reproduced", touching, paper=0.865, margin=0.033, chance=0.5,
                   condition="c").label == "not reproduced"
    close = {"name": "sop", "value": 0.85, "ci95": [0.84, 0.86]}
    assert verdict("reproduced", close, paper=0.865, margin=0.033, chance=0.5, condition="c").label == \
        "reproduced"
    straddling = {**close, "ci95": [0.82, 0.88]}        # not wholly within the band: only the direction
    assert verdict("reproduced", straddling, paper=0.865, margin=0.033, chance=0.5,
                   condition="c").label == "direction only"
    assert {v.label for v in (found,)} <= set(LABELS)


def test_at_chance_has_no_direction_only():
    """The paper's 52.0% is itself within the margin of chance: reproduced or not, nothing between."""
    nsp = {"name": "nsp", "value": 0.50, "ci95": [0.497, 0.504]}
    at = verdict("reproduced", nsp, paper=0.52, margin=0.033, chance=0.5, condition="c", percent=True)
    assert at.label == "reproduced" and "gap -2 points" in at.reason and "direction only" not in at.rule
    off = {"name": "nsp", "value": 0.60, "ci95": [0.58, 0.62]}
    assert verdict("reproduced", off, paper=0.52, margin=0.033, chance=0.5, condition="c").label == \
        "not reproduced"


def test_short_is_one_line_without_the_rule():
    found = verdict("beats", SOP, MLM, percent=True)
    assert found.short() == f"{found.label}: {found.reason}" and "rule" not in found.short()


def test_an_arm_over_seeds_is_not_the_union_of_its_seeds_intervals():
    arm_ = arm_over_seeds("sop", seeds_of(0.526, 0.525, 0.506))
    mean = (0.526 + 0.525 + 0.506) / 3
    s = math.sqrt(sum((x - mean) ** 2 for x in (0.526, 0.525, 0.506)) / 2)
    half = math.sqrt((4.303 * s / math.sqrt(3)) ** 2 + 0.005 ** 2)
    assert arm_["value"] == pytest.approx(mean) and arm_["seeds"] == [0.526, 0.525, 0.506]
    assert arm_["ci95"] == pytest.approx([mean - half, mean + half])
    union = [0.501, 0.531]
    assert arm_["ci95"][0] < union[0] and arm_["ci95"][1] > union[1]     # three seeds: t(2) is wide
    agreeing = arm_over_seeds("nsp", seeds_of(0.500, 0.500, 0.500))  # no spread: the set's own noise stays
    assert agreeing["ci95"] == pytest.approx([0.495, 0.505])
    one = arm_over_seeds("e32", [{"accuracy": 0.061, "ci95": [0.054, 0.069]}])
    assert one["ci95"] == [0.054, 0.069] and one["seeds"] == [0.061]
    assert arm_over_seeds("x", [None]) is None and arm_over_seeds("x", []) is None
    many = arm_over_seeds("x", seeds_of(*[0.5 + 0.001 * k for k in range(40)]))
    assert many["ci95"][0] < many["value"] < many["ci95"][1]


def test_t_quantile_table_and_beyond():
    assert t_quantile(1) == 12.706 and t_quantile(2) == 4.303 and t_quantile(30) == 2.042
    assert 2.02 < t_quantile(40) < 2.03 and 1.96 < t_quantile(10_000) < 1.961


# ------------------------------------------------------------------ the labels the lessons print
LESSONS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
AGAINST_PAPER = re.compile(r"(?P<label>not reproduced|direction only|reproduced): \S+ (?P<value>[\d.]+)% "
                           r"\[(?P<low>[\d.]+)%, (?P<high>[\d.]+)%\], the paper's (?P<paper>[\d.]+)% "
                           r"± (?P<margin>[\d.]+) points: gap")


def printed_lines(path):
    for cell in nbformat.read(path, as_version=4).cells:
        for out in cell.get("outputs", []):
            yield from "".join(out.get("text", "")).splitlines()


def label_problem(line: str) -> str | None:
    """What is wrong with a printed verdict line, or None: 'reproduced' only with the interval inside the
    paper's number ± margin, 'direction only' never then; no old-style 'verdict: reproduced' line."""
    if (m := AGAINST_PAPER.search(line)) is not None:
        low, high, paper, margin = (float(m[k]) for k in ("low", "high", "paper", "margin"))
        within = paper - margin - 0.05 <= low and high <= paper + margin + 0.05   # printed to 3 digits
        if (m["label"] == "reproduced") != within:
            return f"the label does not follow from the numbers: {line}"
    if re.search(r"verdict: reproduced\b", line):
        return f"an old-style label, without the paper's number: {line}"
    return None


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_a_printed_label_follows_from_the_numbers_printed_with_it(path):
    found = [p for line in printed_lines(path) if (p := label_problem(line)) is not None]
    assert not found, f"{path.name}:\n" + "\n".join(found)


@pytest.mark.parametrize("line", [
    "3. sop: reproduced: sop 51.9% [49%, 54.7%], the paper's 86.5% ± 3.3 points: gap -34.6 points",
    "4. nsp: direction only: nsp 88% [87.5%, 88.6%], the paper's 90.5% ± 3.3 points: gap -2.5 points",
    "    verdict: reproduced",
])
def test_the_label_check_catches_an_overclaim(line):
    assert label_problem(line) is not None


def test_the_label_check_passes_what_the_rule_prints():
    sop = arm_over_seeds("sop", seeds_of(0.526, 0.525, 0.506))
    for paper in (0.865, 0.52):
        line = verdict("reproduced", sop, paper=paper, margin=0.033, chance=0.5, condition="c", percent=True)
        assert label_problem(f"claim: {line.short()}") is None


# ------------------------------------------------------------ the paired difference, by document
def simulate(shift, seeds=3, documents=300, per_document=20, shared=0.9, stream=1):
    """Two arms on the same examples: each document has a difficulty both arms share; B is right with
    probability p_doc, A with p_doc + shift, from the same uniform draw for 90% of examples (strongly
    correlated outcomes). One 0/1 vector per seed and arm, and each example's document."""
    rng = random.Random(stream)
    difficulty = [rng.uniform(0.2, 0.8) for _ in range(documents)]
    docs = [d for d in range(documents) for _ in range(per_document)]
    a, b = [], []
    for _ in range(seeds):
        u = [rng.random() for _ in docs]
        w = [x if rng.random() < shared else rng.random() for x in u]
        b.append([int(x < difficulty[d]) for x, d in zip(u, docs)])
        a.append([int(x < difficulty[d] + shift) for x, d in zip(w, docs)])
    return a, b, docs


def arm_of(name, runs, docs):
    """An arm from its seeds, each seed's interval its own document bootstrap (mean of A - 0)."""
    measured = []
    for run in runs:
        own = paired_difference(run, [0] * len(run), docs, resamples=1000)
        measured.append({"accuracy": own["value"], "ci95": own["ci95"]})
    return arm_over_seeds(name, measured)


def test_a_paired_interval_separates_what_two_overlapping_intervals_cannot():
    a, b, docs = simulate(shift=0.03)
    big, small = arm_of("big", a, docs), arm_of("small", b, docs)
    unpaired = verdict("beats", big, small)
    assert unpaired.label == "not separated" and "overlaps" in unpaired.reason   # the shared noise hides it
    assert "exceeds the largest seed spread" in unpaired.reason
    diff = paired_difference(a, b, docs)
    assert diff["documents"] == 300 and diff["examples"] == 6000
    assert diff["value"] == pytest.approx(big["value"] - small["value"])
    assert 0 < diff["ci95"][0] < 0.03 < diff["ci95"][1] < 0.06               # the shift, and nothing else
    paired = verdict("beats", big, small, difference=diff["ci95"], percent=True)
    assert paired.label == "big beats small"
    assert re.search(r"big - small = \+3\.\d+ points, paired 95% interval \[\+[\d.]+ points, "
                     r"\+[\d.]+ points\] lies above 0; \+3\.\d+ points exceeds the largest seed spread, "
                     r"\w+'s [\d.]+ points$", paired.reason), paired.reason
    assert "paired 95% interval of big - small lies wholly above 0" in paired.rule
    mirrored = verdict("beats", small, big, difference=[-diff["ci95"][1], -diff["ci95"][0]])
    assert mirrored.label == "big beats small" and "big - small = +0.03" in mirrored.reason
    # no shift: the same shared noise, and the paired rule finds nothing
    a0, b0, docs0 = simulate(shift=0.0)
    same = paired_difference(a0, b0, docs0)
    assert same["ci95"][0] < 0 < same["ci95"][1]
    null = verdict("beats", arm_of("big", a0, docs0), arm_of("small", b0, docs0), difference=same["ci95"])
    assert null.label == "not separated" and "includes 0" in null.reason


def test_the_paired_rule_still_needs_the_gap_beyond_the_seed_spread():
    noisy = {**SOP, "seeds": [0.07, 0.09, 0.11]}                     # gap 0.032 within sop's spread 0.04
    inside = verdict("beats", noisy, MLM, difference=[0.02, 0.045])
    assert inside.label == "not separated"
    assert "lies above 0; +0.032 is within the largest seed spread, sop's 0.04" in inside.reason
    # the paired interval decides, not the arms' own intervals (these two overlap)
    wide = {**MLM, "ci95": [0.06, 0.11]}
    assert verdict("beats", SOP, wide).label == "not separated"
    assert verdict("beats", SOP, wide, difference=[0.02, 0.045]).label == "sop beats mlm"
    assert verdict("beats", SOP, MLM, difference=[-0.001, 0.045]).label == "not separated"
    # arms whose values contradict the paired interval are not a finding
    contradicted = verdict("beats", SOP, MLM, difference=[-0.05, -0.01])
    assert contradicted.label == "not separated" and "mlm - sop = -0.032" in contradicted.reason
    one = verdict("beats", {**SOP, "seeds": [0.105]}, MLM, difference=[0.02, 0.045])
    assert one.label == "hint: sop ahead" and "paired 95% interval [+0.02, +0.045] lies above 0" in one.reason
    assert one.reason.endswith("so the seed spread is unknown: at most a hint, never a finding")


def test_the_paired_rule_with_lower_better():
    seeds = ({**SMOOTH, "seeds": [0.35, 0.45]}, {**JAGGED, "seeds": [1.5, 1.7]})
    found = verdict("beats", *seeds, difference=[-1.4, -1.0], better="lower")
    assert found.label == "albert beats bert"
    assert "albert - bert = -1.2, paired 95% interval [-1.4, -1] lies below 0" in found.reason
    assert "(lower is better) if the paired 95% interval of albert - bert lies wholly below 0" in found.rule
    assert verdict("beats", *seeds[::-1], difference=[1.0, 1.4], better="lower").label == "albert beats bert"
    assert verdict("beats", *seeds, difference=[-1.4, 0.1], better="lower").label == "not separated"
    assert verdict("beats", *seeds, difference=[-1.4, -1.0]).label == "bert beats albert"   # higher is better


def test_paired_difference_is_deterministic_and_holds_its_value():
    a, b, docs = simulate(shift=0.02, seeds=1, documents=40)
    first = paired_difference(a[0], b[0], docs, seed=7)
    assert first == paired_difference(a[0], b[0], docs, seed=7)
    assert first["ci95"] != paired_difference(a[0], b[0], docs, seed=8)["ci95"]
    assert first["ci95"][0] < first["value"] < first["ci95"][1]
    assert first["value"] == pytest.approx(sum(a[0]) / len(a[0]) - sum(b[0]) / len(b[0]))
    booleans = paired_difference([bool(x) for x in a[0]], [bool(x) for x in b[0]], docs, seed=7)
    assert booleans == first                                           # True/False count as 1/0
    assert paired_difference(a[0], a[0], docs)["ci95"] == [0.0, 0.0]


def test_paired_difference_resamples_documents_not_examples():
    """Each document's examples are identical copies: copying every example again adds no information, so
    a document bootstrap's interval stays put, where an example-level one narrows by about sqrt(2)."""
    rng = random.Random(3)
    a, b, docs = [], [], []
    for d in range(60):
        x, y = int(rng.random() < 0.6), int(rng.random() < 0.5)
        for _ in range(rng.randint(2, 8)):
            a.append(x)
            b.append(y)
            docs.append(d)
    twice = (a + a, b + b, docs + docs)
    by_document = paired_difference(a, b, docs)
    copied = paired_difference(*twice)
    assert copied["ci95"] == pytest.approx(by_document["ci95"], rel=1e-12, abs=1e-12)
    assert copied["value"] == pytest.approx(by_document["value"]) and copied["documents"] == 60
    assert copied["examples"] == 2 * by_document["examples"]

    def width(found):
        return found["ci95"][1] - found["ci95"][0]

    by_example = paired_difference(a, b, range(len(a)))                # each example its own document
    copied_examples = paired_difference(a + a, b + b, range(2 * len(a)))
    assert width(copied_examples) < 0.8 * width(by_example)
    assert width(by_example) < 0.8 * width(by_document)                # the copies look like evidence


def test_several_seeds_are_averaged_per_example():
    a, b, docs = simulate(shift=0.02, seeds=3, documents=30)
    mean_a = [sum(column) / 3 for column in zip(*a)]
    seeds_form = paired_difference(a, b[:2], docs, seed=5)                # 3 seeds of A, 2 of B
    vector_form = paired_difference(mean_a, [(x + y) / 2 for x, y in zip(*b[:2])], docs, seed=5)
    assert seeds_form["value"] == pytest.approx(vector_form["value"])
    assert seeds_form["ci95"] == pytest.approx(vector_form["ci95"])
    assert seeds_form["examples"] == len(docs) and seeds_form["documents"] == 30
    assert paired_difference([a[0]], [b[0]], docs) == paired_difference(a[0], b[0], docs)   # one seed


@pytest.mark.parametrize("call, message", [
    (lambda: paired_difference([1, 0, 1], [1, 0], ["d1", "d2", "d2"]),
     r"a_correct, b_correct and documents must cover the same examples, got 3, 2 and 3"),
    (lambda: paired_difference([1, 0], [1, 0], ["d1"]), "must cover the same examples, got 2, 2 and 1"),
    (lambda: paired_difference([], [], []), "a_correct is empty"),
    (lambda: paired_difference([1], [], ["d"]), "b_correct is empty"),
    (lambda: paired_difference([[], []], [1], ["d"]), "a_correct is empty"),
    (lambda: paired_difference([1, 0], [1, 0], []), "documents is empty"),
    (lambda: paired_difference([1, 0, 1], [0, 0, 1], ["d", "d", "d"]), "needs at least 2 documents, got 1"),
    (lambda: paired_difference([[1, 0], [1]], [1, 0], ["d1", "d2"]),
     r"a_correct's seeds must each have one outcome per example, got lengths \[1, 2\]"),
    (lambda: paired_difference([1, "x"], [1, 0], ["d1", "d2"]), "a_correct must hold finite numbers.*'x' at "
                                                                   "example 1"),
    (lambda: paired_difference([1, 0], [1, math.nan], ["d1", "d2"]), "b_correct must hold finite numbers"),
    (lambda: paired_difference([1, 0], [1, 0], [["d1"], ["d2"]]), "a document id must be hashable"),
    (lambda: paired_difference([1, 0], [1, 0], "ab"), "documents must give each example's document id"),
    (lambda: paired_difference(0.5, [1, 0], ["d1", "d2"]), "a_correct must be one outcome per example"),
    (lambda: paired_difference([1, 0], [1, 0], ["d1", "d2"], resamples=0), "resamples must be a whole"),
    (lambda: verdict("beats", SOP, MLM, difference=[0.02]), r"difference must be a 95% interval \[lower, "),
    (lambda: verdict("beats", SOP, MLM, difference=[0.04, 0.02]), "difference has its lower bound 0.04"),
    (lambda: verdict("beats", SOP, MLM, requires={"x": None}), "precondition 'x' must be True or False"),
    (lambda: verdict("beats", SOP, MLM, requires={"x": 0.9}), "precondition 'x' must be True or False"),
    (lambda: verdict("beats", SOP, MLM, requires={" ": True}), "a precondition needs a description"),
    (lambda: verdict("beats", SOP, MLM, requires=["x"]), "requires must map each precondition"),
    (lambda: verdict("beats", SOP, MLM, requires="x"), "requires must map each precondition"),
    (lambda: verdict("beats", SOP, requires={"x": False}), "beats compares two arms: pass B"),   # checked
])
def test_bad_paired_or_precondition_input_is_refused_on_one_line(call, message):
    with pytest.raises(ValueError, match=message) as raised:
        call()
    assert "\n" not in str(raised.value)


# --------------------------------------------------------------------------- untestable here
LEARNED = "an arm learned sentence order (the SOP arm above 60% on SOP)"
SOP_ON_NSP = "the SOP arm learned SOP (above 60% on SOP)"


def test_at_chance_is_untestable_when_no_arm_learned_sentence_order():
    """'An NSP-trained model is at chance on SOP': chance proves nothing if nothing learned the task."""
    nsp_on_sop = arm("nsp", 0.51, [0.49, 0.53])
    far = arm("nsp", 0.8, [0.78, 0.82])                         # would be "not reproduced"
    claim = dict(claim=0.5, direction="at", margin=0.05, condition=CONDITION)
    assert verdict("reproduced", nsp_on_sop, **claim).label == "reproduced"
    untestable = verdict("reproduced", nsp_on_sop, **claim, requires={LEARNED: False})
    assert untestable.label == UNTESTABLE == "untestable here" and UNTESTABLE in LABELS
    assert untestable.reason == f"precondition not met: {LEARNED}; the numbers are not judged"
    assert untestable.rule.endswith(f"{CONDITION}; testable only if: {LEARNED}")
    assert verdict("reproduced", far, **claim, requires={LEARNED: False}) == untestable     # not judged
    holds = verdict("reproduced", nsp_on_sop, **claim, requires={LEARNED: True})
    assert holds.label == "reproduced" and holds.reason == verdict("reproduced", nsp_on_sop, **claim).reason
    assert verdict("reproduced", far, **claim, requires=[(LEARNED, True)]).label == "not reproduced"


def test_each_rule_is_untestable_when_a_precondition_fails():
    """'SOP solves NSP' is untestable when the SOP arm did not learn SOP; any rule, either way round."""
    sop = {"name": "sop", "value": 0.85, "ci95": [0.84, 0.86], "seeds": [0.85]}
    paper = dict(paper=0.865, margin=0.033, chance=0.5, condition="c")
    calls = {
        "beats": (lambda **kw: verdict("beats", SOP, MLM, **kw), "sop beats mlm"),
        "beats, paired": (lambda **kw: verdict("beats", SOP, MLM, difference=[0.02, 0.04], **kw),
                          "sop beats mlm"),
        "non-inferior": (lambda **kw: verdict("non-inferior", SOP, MLM, margin=0.01, **kw),
                         "sop non-inferior to mlm"),
        "reproduced, a claim": (lambda **kw: verdict("reproduced", sop, claim=0.5, direction="above",
                                                     condition="c", **kw), "reproduced"),
        "reproduced, the number": (lambda **kw: verdict("reproduced", sop, **paper, **kw), "reproduced"),
    }
    for name, (call, ordinary) in calls.items():
        assert call().label == ordinary, name
        both = call(requires={"the task is learnable here": True, SOP_ON_NSP: False})
        assert both.label == "untestable here", name
        assert both.reason == f"precondition not met: {SOP_ON_NSP}; the numbers are not judged", name
        assert "learnable" not in both.reason and "learnable" in both.rule, name
        none = call(requires=[(SOP_ON_NSP, False), ("three seeds\nper arm", False)])
        assert none.reason == (f"preconditions not met: {SOP_ON_NSP}; three seeds per arm; the numbers are "
                               f"not judged"), name
        held = call(requires={SOP_ON_NSP: True, "the task is learnable here": True})
        assert held.label == ordinary and held.reason == call().reason, name
        assert call(requires={}) == call(), name
