"""Each concentration rule fires on at most 5% of simulated worlds without the paper's effect and on at least 80%
of worlds with it, at every budget's sample sizes, and each printed interval covers its truth at least 93% of the
time (300 draws per world, 2,000 per interval, seed 0)."""

from __future__ import annotations

import pytest

from attnlab.findings import calibrate
from attnlab.findings.finding import POWER_MIN
from attnlab.findings.verdict import FPR_MAX
from attnlab.studies.concentration import calibration, plan

KEYS = [k for k in calibrate.CALIBRATIONS if k.startswith("concentration ")]


def test_every_finding_is_registered_at_every_budget():
    assert sorted(KEYS) == sorted(
        [
            f"concentration {f} @ {b}"
            for f in ("collapse screen", "sufficiency", "un-normalized recipes collapse")
            for b in ("smoke", "full")
        ]
        + [
            f"concentration {f} @ {b} --model"
            for f in ("collapse screen", "sufficiency", "prevalence", "un-normalized recipes collapse")
            for b in ("smoke", "full")
        ]
    )


@pytest.mark.parametrize("key", KEYS)
def test_false_positive_rate_and_power_meet_their_targets(key):
    cal = calibrate.CALIBRATIONS.find(key)
    rates = {w.name: calibrate.fire_rate(cal.rule, w, 300) / 300 for w in cal.worlds}
    assert all(rates[w.name] <= FPR_MAX for w in cal.worlds if not w.effect), rates
    assert all(rates[w.name] >= POWER_MIN for w in cal.worlds if w.effect), rates


@pytest.mark.parametrize("key", KEYS)
def test_printed_intervals_cover_their_truth(key):
    # the Wilson interval's exact coverage dips to 93.3% at some (n, p): 2,000 draws keep the check off the noise
    found = {c.name: calibrate.covered(c, 2000) / 2000 for c in calibrate.CALIBRATIONS.find(key).coverage}
    assert all(rate >= calibrate.COVERAGE_MIN for rate in found.values()), found


def test_the_pretrained_smoke_budget_was_twenty_prompts_too_few_for_the_screen():
    """At the old 20 prompts per cell no 0-of-20 cell's Wilson bound gets under an 8% line: power 0."""
    assert calibrate.power(calibration.collapse("old", 20, 0.8), draws=200) == 0.0
    assert plan.REAL["smoke"].prompts >= 100 and plan.REAL["smoke"].audit_prompts >= 20
