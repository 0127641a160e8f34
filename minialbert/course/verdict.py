"""Verdicts that follow from the evidence: a rule, stated before the numbers, turns them into a label.

    beats          A beats B: the gap A - B exceeds the largest seed spread (max - min over seeds) of
                   either arm, and A's 95% interval lies wholly above B's. Otherwise "not separated"; the
                   mirror case is reported as B beats A. With one seed per arm the spread is unknown, so
                   a lead is at most a hint, never a finding.
                   Paired, where `difference` is given (the 95% interval of A - B, both arms read on the same
                   held-out examples, e.g. from `paired_difference`): A beats B when that interval lies
                   wholly above 0 and, where both arms have more than one seed, the gap A - B still exceeds
                   the largest seed spread; the two arms' own intervals are not compared. What both arms
                   share (which documents are hard) cancels in A - B, so a paired interval can separate two
                   arms whose own intervals overlap. With one seed, still at most a hint.
    non-inferior   "A costs nothing against B": one-sided non-inferiority with a stated margin, A - B's
                   lower 95% bound above -margin (the difference's own interval where given, otherwise
                   the conservative A.lower - B.upper).
    reproduced     one arm against the paper's own number (`paper`): "reproduced" if the arm's 95% interval
                   lies within paper ± margin; "direction only" if it lies wholly on the paper's side of
                   `chance` but not that close; otherwise "not reproduced". The reason gives the gap to the
                   paper's number. A claim the paper states without a number (e.g. "does not reach 0") is
                   judged against a stated threshold instead: `claim` with a direction ("above", "below",
                   or "at" within a margin), and then "reproduced" or "not reproduced". Either way, with the
                   condition it holds under.

Higher is better unless the call says better="lower" (beats and non-inferior; e.g. an oscillation measure,
where the smoother curve scores lower): then A beats B when B - A exceeds the spreads and A's interval lies
wholly below B's, and A is non-inferior to B when the upper 95% bound of A - B is below +margin.
reproduced takes no `better`: its direction says which side of the claim counts.

Any rule can be untestable here: `requires` states its preconditions before the numbers, as descriptions
mapped to whether each held ({"the SOP arm learned SOP (above 60% on SOP)": 0.83 > 0.6}, or (description,
held) pairs). When one fails the verdict is "untestable here", naming the failed precondition(s), and the
numbers are not judged. "An NSP-trained model is at chance on SOP" is untestable when no arm learned
sentence order (chance then proves nothing: the task may be unlearnable at this scale); "SOP solves NSP" is
untestable when the SOP arm did not learn SOP.

A paired difference comes from `paired_difference`: both arms' per-example outcomes (0/1 correctness or
any score) on the same held-out examples, in the same order, with each example's document id. It
resamples documents with replacement (a cluster bootstrap: a drawn document brings all its examples, once
per draw), because examples from one document are not independent; the interval is the 2.5th and 97.5th
percentile of mean(A) - mean(B) over the resamples. An arm with several seeds passes one outcome vector
per seed; the seeds are averaged per example first.

An arm is a plain mapping, {"value": 0.162, "ci95": [0.151, 0.175], "seeds": [0.162, 0.158, 0.170]}
("name" optional; "seeds" needed by `beats` only), because the numbers arrive as JSON (a lesson's
result file, a figure's numbers): it reads the same in a lesson, a JSON file and a test, with no class
to build first. Each arm carries its own seeds, so a spread never comes from an arm not compared.
An arm measured over several seeds, all read on one evaluation set, comes from `arm_over_seeds`: its
value is the mean over seeds and its interval is built from the seeds (never the union of the seeds' own
intervals, which is not a 95% interval of anything): a Student-t interval over the seed means, widened by
the evaluation set's own sampling noise, which every seed shares (the mean of the seeds' half-widths, added
in quadrature). With one seed it is that seed's interval. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .experiments.paired_bootstrap import paired_difference

__all__ = ["BETTER", "DIRECTIONS", "LABELS", "RULES", "UNTESTABLE", "Verdict", "arm_over_seeds",
           "paired_difference", "t_quantile", "verdict"]

RULES = ("beats", "non-inferior", "reproduced")
DIRECTIONS = ("above", "below", "at")
BETTER = ("higher", "lower")
UNTESTABLE = "untestable here"                                  # any rule, when a precondition fails
LABELS = ("reproduced", "direction only", "not reproduced", UNTESTABLE)   # reproduced's, and any rule's


@dataclass(frozen=True)
class Verdict:
    """What a rule concluded (`label`), the rule as stated (`rule`), the numbers that decided (`reason`)."""

    label: str
    rule: str
    reason: str

    def __str__(self) -> str:
        return f"{self.label}: {self.reason} [rule: {self.rule}]"

    def short(self) -> str:
        """One line for a lesson: the label and the numbers, without the rule (the prose states it)."""
        return f"{self.label}: {self.reason}"


@dataclass(frozen=True)
class _Arm:
    name: str
    value: float
    lower: float
    upper: float
    seeds: tuple[float, ...] | None

    @property
    def spread(self) -> float:
        return max(self.seeds) - min(self.seeds)


def verdict(rule: str, a: Mapping, b: Mapping | None = None, *, margin: float | None = None,
            difference: Sequence[float] | None = None, claim: float | None = None,
            direction: str | None = None, condition: str | None = None, percent: bool = False,
            better: str | None = None, paper: float | None = None, chance: float | None = None,
            requires: Mapping[str, bool] | Sequence[tuple[str, bool]] | None = None) -> Verdict:
    """The verdict of `rule` (one of RULES, see the module doc) on arm `a` (and arm `b`, for beats and
    non-inferior). margin: non-inferior's margin, or how far from the claim "at" may be; difference: the
    95% interval of A - B where one was measured on the same examples (non-inferior; beats, which then
    uses the paired rule); paper, chance, condition: the paper's own number, the level of no skill, the
    condition (reproduced); claim and direction: a threshold, for a claim the paper states without a number
    (reproduced). percent: show numbers as % and gaps as points. better: "higher" (the default) or "lower",
    which values are better (beats and non-inferior). requires: the preconditions under which the claim is
    testable at all, each description mapped to whether it held (or (description, held) pairs); if any
    failed, "untestable here" naming them. The call is still checked in full, but the numbers are not
    judged."""
    preconditions = _preconditions(requires)
    found = _verdict(rule, a, b, margin=margin, difference=difference, claim=claim, direction=direction,
                     condition=condition, percent=percent, better=better, paper=paper, chance=chance)
    if not preconditions:
        return found
    rule_ = f"{found.rule}; testable only if: {'; '.join(preconditions)}"
    failed = [what for what, held in preconditions.items() if not held]
    if not failed:
        return Verdict(found.label, rule_, found.reason)
    return Verdict(UNTESTABLE, rule_, f"{'preconditions' if len(failed) > 1 else 'precondition'} not met: "
                                      f"{'; '.join(failed)}; the numbers are not judged")


def _preconditions(requires) -> dict[str, bool]:
    """`requires` as {description: held}, checked: one-line descriptions, each held True or False."""
    if requires is None:
        return {}
    if isinstance(requires, Mapping):
        pairs = list(requires.items())
    elif isinstance(requires, str | bytes) or not isinstance(requires, Iterable):
        raise ValueError(f"requires must map each precondition to whether it held, got {requires!r}")
    else:
        pairs = list(requires)
        if not all(isinstance(p, Sequence) and not isinstance(p, str | bytes) and len(p) == 2 for p in pairs):
            raise ValueError(f"requires must map each precondition to whether it held, or be (description, "
                             f"held) pairs, got {requires!r}")
    out = {}
    for what, held in pairs:
        if not isinstance(what, str) or not what.strip():
            raise ValueError(f"a precondition needs a description (what must hold), got {what!r}")
        if isinstance(held, str | bytes) or held not in (True, False):
            raise ValueError(f"precondition {what!r} must be True or False (whether it held), got {held!r}")
        out[" ".join(what.split())] = bool(held)
    return out


def _verdict(rule: str, a: Mapping, b: Mapping | None, *, margin, difference, claim, direction, condition,
             percent: bool, better, paper, chance) -> Verdict:
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; choose one of {', '.join(RULES)}")
    if better is not None and better not in BETTER:
        raise ValueError(f"better must be one of {', '.join(BETTER)}, got {better!r}")
    lower = better == "lower"
    if margin is not None and not (_finite(margin) and margin >= 0):
        raise ValueError(f"margin must be a number >= 0, got {margin!r}")
    show = _Numbers(percent)
    arm_a = _arm(a, "A", needs_seeds=rule == "beats")
    if rule == "reproduced":
        if b is not None or difference is not None:
            raise ValueError("reproduced compares one arm with the paper's claim: pass no B, no difference")
        if better is not None:
            raise ValueError("reproduced takes no better: its direction ('above', 'below', 'at') says which "
                             "side of the claim counts")
        if paper is not None:
            return _against_paper(arm_a, paper, margin, chance, claim, direction, condition, show)
        if chance is not None:
            raise ValueError("chance belongs to a claim with the paper's own number: pass paper= too")
        return _reproduced(arm_a, claim, direction, condition, margin, show)
    if b is None:
        raise ValueError(f"{rule} compares two arms: pass B")
    if any(x is not None for x in (claim, direction, condition, paper, chance)):
        raise ValueError(f"{rule} takes no claim, direction, condition, paper or chance (those belong to "
                         "reproduced)")
    arm_b = _arm(b, "B", needs_seeds=rule == "beats")
    if rule == "beats":
        if margin is not None:
            raise ValueError("beats takes no margin: its yardsticks are the seed spreads and the two arms' "
                             "intervals (or the paired interval of the difference)")
        if difference is not None:
            return _beats_paired(arm_a, arm_b, _interval(difference, "difference"), show, lower)
        return _beats(arm_a, arm_b, show, lower)
    return _non_inferior(arm_a, arm_b, margin, difference, show, lower)


def _beats(a: _Arm, b: _Arm, show: _Numbers, lower: bool = False) -> Verdict:
    if lower:
        rule = (f"{a.name} beats {b.name} (lower is better) if {b.name} - {a.name} exceeds the largest seed "
                f"spread of either arm and {a.name}'s 95% interval lies below {b.name}'s (and the other way "
                f"round)")
        lead, trail = (a, b) if a.value <= b.value else (b, a)
        separated = lead.upper < trail.lower
    else:
        rule = (f"{a.name} beats {b.name} if {a.name} - {b.name} exceeds the largest seed spread of either "
                f"arm and {a.name}'s 95% interval lies above {b.name}'s (and the other way round)")
        lead, trail = (a, b) if a.value >= b.value else (b, a)
        separated = lead.lower > trail.upper
    gap = abs(lead.value - trail.value)
    signed = lead.value - trail.value
    side = "lies below" if lower else "lies above"
    intervals = (f"{lead.name}'s interval {show.interval(lead)} "
                 + (side if separated else "overlaps") + f" {trail.name}'s {show.interval(trail)}")
    one_seed = [arm.name for arm in (a, b) if len(arm.seeds) == 1]
    if one_seed:
        unknown = f"only one seed of {' and '.join(one_seed)}, so the seed spread is unknown"
        label = f"hint: {lead.name} ahead" if separated else "not separated"
        return Verdict(label, rule, f"{lead.name} - {trail.name} = {show.gap(signed)}; {intervals}; {unknown}"
                                    + (": at most a hint, never a finding" if separated else ""))
    noisiest = max((a, b), key=lambda arm: arm.spread)
    beyond = gap > noisiest.spread
    label = f"{lead.name} beats {trail.name}" if beyond and separated else "not separated"
    spread = f"the largest seed spread, {noisiest.name}'s {show.size(noisiest.spread)}"
    return Verdict(label, rule, f"{lead.name} - {trail.name} = {show.gap(signed)} "
                                f"{'exceeds' if beyond else 'is within'} {spread}; {intervals}")


def _beats_paired(a: _Arm, b: _Arm, difference: tuple[float, float], show: _Numbers,
                  lower: bool = False) -> Verdict:
    """beats on the paired interval of A - B (read on the same examples), not on the arms' own intervals."""
    low, high = difference
    if lower:
        rule = (f"{a.name} beats {b.name} (lower is better) if the paired 95% interval of {a.name} - "
                f"{b.name} lies wholly below 0 and {b.name} - {a.name} exceeds the largest seed spread of "
                f"either arm (and the other way round)")
        a_ahead = high < 0 or (low <= 0 and a.value <= b.value)
    else:
        rule = (f"{a.name} beats {b.name} if the paired 95% interval of {a.name} - {b.name} lies wholly "
                f"above 0 and {a.name} - {b.name} exceeds the largest seed spread of either arm (and the "
                f"other way round)")
        a_ahead = low > 0 or (high >= 0 and a.value >= b.value)
    # The lead is the arm the paired interval favours (by value where it includes 0); shown as lead - trail.
    lead, trail = (a, b) if a_ahead else (b, a)
    low, high = (low, high) if a_ahead else (-high, -low)
    separated = high < 0 if lower else low > 0
    signed = lead.value - trail.value
    gap = -signed if lower else signed                          # > 0: the lead is ahead by its value too
    where = ("lies below 0" if lower else "lies above 0") if separated else "includes 0"
    paired = (f"{lead.name} - {trail.name} = {show.gap(signed)}, paired 95% interval "
              f"[{show.gap(low)}, {show.gap(high)}] {where}")
    one_seed = [arm.name for arm in (a, b) if len(arm.seeds) == 1]
    if one_seed:
        unknown = f"only one seed of {' and '.join(one_seed)}, so the seed spread is unknown"
        label = f"hint: {lead.name} ahead" if separated and gap > 0 else "not separated"
        hint = ": at most a hint, never a finding" if label != "not separated" else ""
        return Verdict(label, rule, f"{paired}; {unknown}{hint}")
    noisiest = max((a, b), key=lambda arm: arm.spread)
    beyond = gap > noisiest.spread
    label = f"{lead.name} beats {trail.name}" if beyond and separated else "not separated"
    return Verdict(label, rule, f"{paired}; {show.gap(signed)} {'exceeds' if beyond else 'is within'} the "
                                f"largest seed spread, {noisiest.name}'s {show.size(noisiest.spread)}")


def _non_inferior(a: _Arm, b: _Arm, margin: float | None, difference: Sequence[float] | None,
                  show: _Numbers, lower: bool = False) -> Verdict:
    if margin is None:
        raise ValueError("non-inferior needs a margin: how much worse A may be than B and still cost "
                         "nothing (state it before the numbers)")
    # The bound that matters: the lower one of A - B when higher is better, the upper one when lower is.
    which, sign = ("upper", "+") if lower else ("lower", "-")
    if difference is not None:
        low, high = _interval(difference, "difference")
        bound = high if lower else low
        source = f"from the interval of the difference, [{show.gap(low)}, {show.gap(high)}]"
    else:
        bound = a.upper - b.lower if lower else a.lower - b.upper
        source = (f"conservatively {a.name}'s upper {show.value(a.upper)} - {b.name}'s lower "
                  f"{show.value(b.lower)}" if lower else
                  f"conservatively {a.name}'s lower {show.value(a.lower)} - {b.name}'s upper "
                  f"{show.value(b.upper)}")
    rule = (f"{a.name} is non-inferior to {b.name}{' (lower is better)' if lower else ''} if the {which} 95% "
            f"bound of {a.name} - {b.name} is {'below' if lower else 'above'} {sign}{show.size(margin)} "
            f"(the margin)")
    holds = bound < margin if lower else bound > -margin
    label = f"{a.name} non-inferior to {b.name}" if holds else f"{a.name} not shown non-inferior to {b.name}"
    side = ("below" if holds else "not below") if lower else ("above" if holds else "not above")
    return Verdict(label, rule, f"{a.name} - {b.name} = {show.gap(a.value - b.value)}, {which} bound "
                                f"{show.gap(bound)} ({source}), {side} {sign}{show.size(margin)}")


def _reproduced(a: _Arm, claim: float | None, direction: str | None, condition: str | None,
                margin: float | None, show: _Numbers) -> Verdict:
    if claim is None or not _finite(claim):
        raise ValueError(f"reproduced needs the paper's claim as a number, got {claim!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"reproduced needs a direction, one of {', '.join(DIRECTIONS)}; got {direction!r}")
    if not isinstance(condition, str) or not condition.strip():
        raise ValueError("reproduced needs the condition under which the verdict holds, e.g. "
                         "'at an NSP accuracy of 60%; the paper's NSP arm had 90.5%'")
    if (direction == "at") != (margin is not None):
        raise ValueError("direction 'at' needs a margin (how close counts as at the claim); "
                         "'above' and 'below' take none")
    condition = " ".join(condition.split())                     # one line, whatever was passed
    if direction == "above":
        holds, wanted = a.lower > claim, f"its 95% interval lies above {show.value(claim)}"
    elif direction == "below":
        holds, wanted = a.upper < claim, f"its 95% interval lies below {show.value(claim)}"
    else:
        holds = claim - margin <= a.lower and a.upper <= claim + margin
        wanted = f"its 95% interval lies within {show.value(claim)} ± {show.size(margin)}"
    rule = f"{a.name} reproduces the claim if {wanted}, {condition}"
    return Verdict("reproduced" if holds else "not reproduced", rule,
                   f"{a.name} {show.value(a.value)}, 95% interval {show.interval(a)}")


def _against_paper(a: _Arm, paper: float, margin: float | None, chance: float | None, claim, direction,
                   condition: str | None, show: _Numbers) -> Verdict:
    if claim is not None or direction is not None:
        raise ValueError("reproduced against the paper's number takes no claim or direction: paper, margin "
                         "and chance say it all")
    if not _finite(paper):
        raise ValueError(f"paper must be the paper's own number, got {paper!r}")
    if margin is None:
        raise ValueError("reproduced against the paper's number needs a margin: how close to it counts as "
                         "reproduced (state it before the numbers)")
    if chance is not None and not _finite(chance):
        raise ValueError(f"chance must be a number (the level of no skill), got {chance!r}")
    if not isinstance(condition, str) or not condition.strip():
        raise ValueError("reproduced needs the condition under which the verdict holds, e.g. "
                         "'on the matched pairs, 3 seeds'")
    condition = " ".join(condition.split())
    within = paper - margin <= a.lower and a.upper <= paper + margin
    if chance is None or abs(paper - chance) <= margin:       # no direction to show: at the level, or not
        beyond = False
    else:
        beyond = a.lower > chance if paper > chance else a.upper < chance
    label = "reproduced" if within else "direction only" if beyond else "not reproduced"
    rule = (f"{a.name} reproduces the paper's {show.value(paper)} if its 95% interval lies within "
            f"{show.value(paper)} ± {show.size(margin)}"
            + ("" if chance is None or abs(paper - chance) <= margin else
               f"; direction only if it lies wholly {'above' if paper > chance else 'below'} "
               f"{show.value(chance)} but not that close")
            + f"; {condition}")
    return Verdict(label, rule, f"{a.name} {show.value(a.value)} {show.interval(a)}, the paper's "
                                f"{show.value(paper)} ± {show.size(margin)}: gap {show.gap(a.value - paper)}")


# ------------------------------------------------------------------------------------ an arm from its seeds
# Student's t, two-sided 95% (the 0.975 quantile), for 1 to 30 degrees of freedom.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t_quantile(df: int) -> float:
    """Student's t 0.975 quantile with `df` degrees of freedom (a table to 30; Cornish-Fisher beyond)."""
    if not isinstance(df, int) or df < 1:
        raise ValueError(f"degrees of freedom must be a whole number >= 1, got {df!r}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def arm_over_seeds(name: str, measured: Sequence[Mapping]) -> dict | None:
    """An arm from its seeds' measurements on one evaluation set (each {"accuracy", "ci95"}): the mean over
    seeds; a 95% interval from the seeds (see the module doc): t over the seed means, half-width
    t(n-1) s / sqrt(n), combined in quadrature with the mean of the seeds' own half-widths (the evaluation
    set's sampling noise, shared by every seed, so it does not shrink with more seeds); its own seeds.
    None when a seed has no measurement."""
    if not measured or any(m is None or m.get("accuracy") is None for m in measured):
        return None
    seeds = [float(m["accuracy"]) for m in measured]
    intervals = [_interval(m.get("ci95"), f"{name}'s seed interval") for m in measured]
    n, mean = len(seeds), sum(seeds) / len(seeds)
    if n == 1:
        return {"name": name, "value": mean, "ci95": list(intervals[0]), "seeds": seeds}
    spread = math.sqrt(sum((s - mean) ** 2 for s in seeds) / (n - 1))
    between = t_quantile(n - 1) * spread / math.sqrt(n)
    within = sum((high - low) / 2 for low, high in intervals) / n
    half = math.sqrt(between ** 2 + within ** 2)
    return {"name": name, "value": mean, "ci95": [mean - half, mean + half], "seeds": seeds}


# ------------------------------------------------------------------------------- reading and showing numbers
def _finite(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _interval(pair, what: str) -> tuple[float, float]:
    if isinstance(pair, str | bytes) or not isinstance(pair, Sequence) or len(pair) != 2 \
            or not all(_finite(x) for x in pair):
        raise ValueError(f"{what} must be a 95% interval [lower, upper] of two numbers, got {pair!r}")
    if pair[0] > pair[1]:
        raise ValueError(f"{what} has its lower bound {pair[0]} above its upper bound {pair[1]}")
    return float(pair[0]), float(pair[1])


def _arm(arm: Mapping, default_name: str, needs_seeds: bool) -> _Arm:
    """An arm mapping, checked: a finite value, an ordered ci95 and (where needed) a non-empty seeds list."""
    if not isinstance(arm, Mapping):
        raise ValueError(f"arm {default_name} must be a mapping like {{'value': 0.162, 'ci95': [0.151, "
                         f"0.175], 'seeds': [0.162, 0.158, 0.170]}}, got {type(arm).__name__}")
    name = str(arm.get("name", default_name))
    if not _finite(arm.get("value")):
        raise ValueError(f"arm {name} needs a 'value' (a finite number), got {arm.get('value')!r}")
    lower, upper = _interval(arm.get("ci95"), f"arm {name}'s ci95")
    seeds = arm.get("seeds")
    if seeds is not None:
        if isinstance(seeds, str | bytes) or not isinstance(seeds, Sequence) or not seeds \
                or not all(_finite(s) for s in seeds):
            raise ValueError(f"arm {name}'s 'seeds' must be a non-empty list of numbers (one per seed), "
                             f"got {seeds!r}")
        seeds = tuple(float(s) for s in seeds)
    elif needs_seeds:
        raise ValueError(f"beats needs each arm's own per-seed values: arm {name} has no 'seeds'")
    return _Arm(name, float(arm["value"]), lower, upper, seeds)


@dataclass(frozen=True)
class _Numbers:
    """How a verdict shows numbers: as they are, or (percent) values in % and gaps in points."""

    percent: bool

    def value(self, x: float) -> str:
        return f"{100 * x:.3g}%" if self.percent else f"{x:.3g}"

    def size(self, x: float) -> str:
        return f"{100 * x:.3g} points" if self.percent else f"{x:.3g}"

    def gap(self, x: float) -> str:
        return f"{100 * x:+.3g} points" if self.percent else f"{x:+.3g}"

    def interval(self, arm: _Arm) -> str:
        return f"[{self.value(arm.lower)}, {self.value(arm.upper)}]"
