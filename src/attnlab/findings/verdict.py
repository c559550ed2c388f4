"""The verdict discipline every study follows: one function turns a rule's outcome on the data and on its null
control, with the design's power, into the finding's label.

A study writes each claim's decision rule next to the claim, in its module, before any number is read; it runs
the same rule on a null control (an untrained model, i.i.d. scores, the unintervened arm, BOS masked), where
the claim must not hold, and states the smallest effect its design detects. ``decide`` then labels it:

- ``not checked`` when a precondition failed (the reason is given), or when the rule holds but the null control
  could not be run or passes the rule too (a rule that a null passes cannot tell the claim from no effect);
- ``reproduced`` when the rule holds on the data and fails on the null;
- ``underpowered`` when the design cannot see the paper's effect (its simulated power there is below 80%, or its
  MDE is larger than the effect), whatever the rule says on the data: a rule that misses a real effect more
  often than not means little by firing or not;
- ``not reproduced`` when the rule does not hold although the design could have seen the paper's effect (or the
  claim has no effect size, so power does not limit it).

``false_positive_rate`` measures, by simulation, how often a rule fires when the data come from its null: each
study's test pins it at or below 5%.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from attnlab.errors import ArgumentError
from attnlab.findings.finding import MDE, POWER_MIN, Finding, Null

FPR_MAX = 0.05  # the largest false-positive rate a decision rule may have under its null


def decide(
    claim: str,
    *,
    rule: str,
    holds: bool | None,
    null: Null,
    mde: MDE,
    evidence: str,
    precondition: str | None = None,
    reads: Mapping[str, Any] | None = None,
    null_reads: Mapping[str, Any] | None = None,
    name: str = "",
) -> Finding:
    """The finding for ``claim``: ``holds`` is the rule's outcome on the data (None: it could not be computed),
    ``null`` the same rule on the null control, ``mde`` the design's power, ``precondition`` the reason the run
    cannot test the claim (None when it can). ``reads`` and ``null_reads``: what the rule read on the data and on
    the null, by name (``unread``): a comparison with a missing value is False, so a rule that read one says
    nothing, and the claim is not checked (its null not run) rather than not reproduced (or passed). ``name``: the
    finding's stable name (``Finding.name``)."""
    missing = unread(reads or {})
    if missing is None and null.passes is not None and (null_missing := unread(null_reads or {})) is not None:
        null = replace(null, passes=None, outcome=f"{null.outcome}; not run: {null_missing}")
    if why := precondition or missing:
        verdict, reason = "not checked", why
    elif holds is None:
        verdict, reason = "not checked", "the rule's statistic could not be computed from this run"
    elif mde.adequate is False:
        # a design that misses the paper's effect more often than not says nothing by firing or not firing
        verdict, reason = "underpowered", _underpowered(mde)
    elif not holds:
        # the null matters only to a rule that holds: a claim that fails its rule fails whatever the null does
        verdict, reason = "not reproduced", ""
    elif null.passes is None:
        verdict, reason = "not checked", f"the null control ({null.control}) could not be run"
    elif null.passes:
        verdict, reason = (
            "not checked",
            (
                f"the null control ({null.control}) passes the rule too, so the rule "
                "cannot tell the claim from no effect"
            ),
        )
    else:
        verdict, reason = "reproduced", ""
    return Finding(claim, verdict, evidence, rule=rule, null=null, mde=mde, reason=reason, name=name)


def unread(reads: Mapping[str, Any]) -> str | None:
    """Why a rule cannot be read from ``reads`` (name -> the numbers it read): the names of those holding a missing
    value (NaN, as an empty cell of a raw table reads) or no number at all; None when every one holds known
    numbers."""
    bad = [name for name, values in reads.items() if _unknown(values)]
    if not bad:
        return None
    return (
        f"{'; '.join(bad)}: a missing value (NaN: an empty or unreadable cell of the folder's raw tables) or none "
        "at all, so the rule cannot be read"
    )


def _unknown(values: Any) -> bool:
    try:
        flat = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):  # a cell that is no number
        return True
    return flat.size == 0 or bool(np.isnan(flat).any())


def _underpowered(mde: MDE) -> str:
    if mde.power is not None and mde.power < POWER_MIN:
        return (
            f"the rule fires on {mde.power:.0%} of simulated data sets with the paper's effect at this run's sample "
            f"sizes (below {POWER_MIN:.0%})"
        )
    return (
        f"the design detects effects of {mde.value:.4g} {mde.unit} or more; "
        f"the paper's effect is {mde.effect:.4g} {mde.unit}"
    )


def false_positive_rate(
    rule: Callable[[Any], bool], draw_null: Callable[[np.random.Generator], Any], *, trials: int = 2000, seed: int = 0
) -> float:
    """The share of ``trials`` data sets drawn from the null (``draw_null(rng)``) on which ``rule`` fires."""
    if trials < 1:
        raise ArgumentError(f"trials must be >= 1, got {trials!r}")
    rng = np.random.default_rng(seed)
    return sum(bool(rule(draw_null(rng))) for _ in range(trials)) / trials
