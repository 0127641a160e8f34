"""Verdicts that follow from the evidence: a rule, stated before the numbers, turns them into a label.

    beats          A beats B: the gap A - B exceeds the largest seed spread (max - min over seeds) of
                   either arm, and A's 95% interval lies wholly above B's. Otherwise "not separated"; the
                   mirror case is reported as B beats A. With one seed per arm the spread is unknown, so
                   a lead is at most a hint, never a finding.
    non-inferior   "A costs nothing against B": one-sided non-inferiority with a stated margin, A - B's
                   lower 95% bound above -margin (the difference's own interval where given, otherwise
                   the conservative A.lower - B.upper).
    reproduced     one arm against the paper's claim, in a stated direction ("above" or "below" the
                   claim, or "at" it within a margin), always with the condition it holds under.

Higher is better unless the call says better="lower" (beats and non-inferior; e.g. an oscillation measure,
where the smoother curve scores lower): then A beats B when B - A exceeds the spreads and A's interval lies
wholly below B's, and A is non-inferior to B when the upper 95% bound of A - B is below +margin.
reproduced takes no `better`: its direction says which side of the claim counts.

An arm is a plain mapping, {"value": 0.162, "ci95": [0.151, 0.175], "seeds": [0.162, 0.158, 0.170]}
("name" optional; "seeds" needed by `beats` only), because the numbers arrive as JSON (a lesson's
result file, a figure's numbers): it reads the same in a lesson, a JSON file and a test, with no class
to build first. Each arm carries its own seeds, so a spread never comes from an arm not compared.
Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["BETTER", "DIRECTIONS", "RULES", "Verdict", "verdict"]

RULES = ("beats", "non-inferior", "reproduced")
DIRECTIONS = ("above", "below", "at")
BETTER = ("higher", "lower")


@dataclass(frozen=True)
class Verdict:
    """What a rule concluded (`label`), the rule as stated (`rule`), the numbers that decided (`reason`)."""

    label: str
    rule: str
    reason: str

    def __str__(self) -> str:
        return f"{self.label}: {self.reason} [rule: {self.rule}]"


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
            better: str | None = None) -> Verdict:
    """The verdict of `rule` (one of RULES, see the module doc) on arm `a` (and arm `b`, for beats and
    non-inferior). margin: non-inferior's margin, or how far from the claim "at" may be; difference: the
    95% interval of A - B where one was measured (non-inferior); claim, direction, condition: what
    reproduced compares with. percent: show numbers as % and gaps as points. better: "higher" (the
    default) or "lower", which values are better (beats and non-inferior)."""
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
        return _reproduced(arm_a, claim, direction, condition, margin, show)
    if b is None:
        raise ValueError(f"{rule} compares two arms: pass B")
    if claim is not None or direction is not None or condition is not None:
        raise ValueError(f"{rule} takes no claim, direction or condition (those belong to reproduced)")
    arm_b = _arm(b, "B", needs_seeds=rule == "beats")
    if rule == "beats":
        if margin is not None or difference is not None:
            raise ValueError("beats takes no margin and no difference: its yardsticks are the seed spreads "
                             "and the two arms' intervals")
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
