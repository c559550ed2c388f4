"""A finding: one qualitative claim of a paper (or one identity attnlab checks), its verdict, and the rule, null
control and minimum detectable effect that decide it. ``attnlab.findings.verdict.decide`` builds one; a study's
section and the card carry them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ParamSpec

from attnlab.errors import ArgumentError

# A paper's claim, which a run may fail to reproduce without any bug. "underpowered": the design could not
# have seen the paper's effect (its minimum detectable effect is larger); "not checked": a precondition failed
# (the regime was not reached, the positive control failed, the model did not learn, the null control passes
# the rule as well), the reason is stated.
CLAIM_VERDICTS = ("reproduced", "not reproduced", "underpowered", "not checked")
# An identity the code must satisfy (weights sum to 1, masked keys get none): reporting it as "reproduced"
# would count a test of attnlab among the papers' findings.
CHECK_VERDICTS = ("check passed", "check failed")
VERDICTS = CLAIM_VERDICTS + CHECK_VERDICTS
POWER_MIN = 0.80  # the power at the paper's effect below which a claim is labelled underpowered


@dataclass(frozen=True)
class Null:
    """A finding's null control: the same statistic, under the same rule, on a model or data where the claim must
    not hold (an untrained model, i.i.d. scores, the unintervened arm, BOS masked).

    control: what the control is; passes: whether it passes the finding's rule (True, False, or None when it
    could not be run); outcome: its numbers, in words. A finding is reproduced only when its null fails the rule."""

    control: str
    passes: bool | None
    outcome: str

    def __post_init__(self) -> None:
        if not isinstance(self.control, str) or not self.control:
            raise ArgumentError("a null control needs a description (control)")
        if self.passes not in (True, False, None):
            raise ArgumentError(f"Null.passes must be True, False or None, got {self.passes!r}")

    @property
    def result(self) -> str:
        """The control's outcome under the rule, as the report shows it."""
        return {True: "passes the rule", False: "fails the rule", None: "not run"}[self.passes]


@dataclass(frozen=True)
class MDE:
    """The smallest effect the design detects (two-sided 5% test, 80% power unless ``how`` says otherwise), next
    to the paper's effect in the same unit, and, where simulated, the rule's power at that effect.

    value: the minimum detectable effect, or None where none applies (``how`` says why); effect: the paper's
    effect size in ``unit`` (None where the claim has none); unit: what both are measured in; how: how the MDE
    was obtained (a closed form, a simulation), or why none applies; power: the share of simulated data sets
    with the paper's effect, at this run's sample sizes, on which the finding's rule fires
    (``findings.calibrate.power``), None where not simulated."""

    value: float | None
    effect: float | None
    unit: str
    how: str
    power: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.how, str) or not self.how:
            raise ArgumentError("an MDE needs how it was obtained, or why none applies (how)")
        if self.power is not None and not 0 <= self.power <= 1:
            raise ArgumentError(f"MDE.power is a share in [0, 1] or None, got {self.power!r}")

    @property
    def adequate(self) -> bool | None:
        """Whether the design could see the paper's effect: its simulated power there is at least POWER_MIN (where
        simulated) and its MDE at most |effect| (where both are given; an MDE read off this run's own spread can
        see what a simulated world assumed away); None where neither can be said."""
        checks = []
        if self.power is not None:
            checks.append(self.power >= POWER_MIN)
        if self.value is not None and self.effect is not None:
            checks.append(abs(self.effect) >= self.value)
        return all(checks) if checks else None

    def words(self) -> str:
        power = "" if self.power is None else f"; power at the paper's effect {self.power:.0%}"
        if self.value is None:
            return f"no MDE: {self.how}{power}"
        effect = "" if self.effect is None else f" (the paper's effect: {self.effect:.4g} {self.unit})"
        return f"{self.value:.4g} {self.unit}{effect}; {self.how}{power}"


@dataclass(frozen=True)
class Finding:
    """One qualitative claim of a paper, or one identity attnlab checks, and what this run shows about it.

    verdict, for a paper's claim: one of ``CLAIM_VERDICTS``; for an identity: "check passed" or "check failed".
    evidence: the numbers, in words, that decide it. rule: the decision rule, fixed in the study module before the
    numbers are read; null: the null control and its outcome under the same rule; mde: the design's power;
    reason: why a claim is "not checked" or "underpowered"; name: the finding's stable name, the one its
    study declares (``Study.findings``), its calibration is registered under and a paper's claims table cites
    (empty only in a user's own ad-hoc finding). A claim's verdict must agree with its parts:
    "reproduced" needs a null control that fails the rule, "underpowered" an MDE larger than the paper's
    effect, and both of those labels and "not checked" a reason."""

    claim: str
    verdict: str
    evidence: str
    rule: str = ""
    null: Null | None = None
    mde: MDE | None = None
    reason: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ArgumentError(f"Finding.name is a string, got {self.name!r}")
        if self.verdict not in VERDICTS:
            raise ArgumentError(f"verdict must be one of {', '.join(VERDICTS)}, got {self.verdict!r}")
        if not self.is_check and not (self.rule and self.null is not None and self.mde is not None):
            raise ArgumentError(
                f"{self.claim!r}: a paper's claim states its rule, null control and MDE (build it with "
                "attnlab.findings.verdict.decide); an identity of attnlab's is a check"
            )
        # a claim has its null and MDE (checked above), so the `is not None` below only narrows them for mypy
        if self.verdict == "reproduced" and self.null is not None and self.null.passes is not False:
            raise ArgumentError(
                f"{self.claim!r}: reproduced needs its null control to fail the rule; "
                f"{self.null.control} {self.null.result}"
            )
        if self.verdict == "underpowered" and self.mde is not None and self.mde.adequate is not False:
            raise ArgumentError(
                f"{self.claim!r}: underpowered needs a power below {POWER_MIN:.0%} or an MDE larger than the "
                "paper's effect"
            )
        if self.verdict in ("not checked", "underpowered") and not self.reason:
            raise ArgumentError(f"{self.claim!r}: a {self.verdict} finding states its reason")

    @property
    def is_check(self) -> bool:
        """Whether this is an identity attnlab checks rather than a paper's claim."""
        return self.verdict in CHECK_VERDICTS

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        null, mde = data.get("null"), data.get("mde")
        return cls(
            **{**data, "null": None if null is None else Null(**null), "mde": None if mde is None else MDE(**mde)}
        )


P = ParamSpec("P")


def named(name: str) -> Callable[[Callable[P, Finding]], Callable[P, Finding]]:
    """Give every Finding the decorated function returns the name ``name`` (``Finding.name``), whichever of its
    branches built it."""
    if not isinstance(name, str) or not name:
        raise ArgumentError(f"a finding's name is a non-empty string, got {name!r}")

    def wrap(build: Callable[P, Finding]) -> Callable[P, Finding]:
        @functools.wraps(build)
        def built(*args: P.args, **kwargs: P.kwargs) -> Finding:
            return replace(build(*args, **kwargs), name=name)

        return built

    return wrap
