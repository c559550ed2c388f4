"""The sinks rules, on simulated per-seed statistics at each budget, fire at most 5% where the claim is false (a
model just short of each threshold included) and at least 80% where it holds as the paper reports."""

from __future__ import annotations

import pytest

from attnlab.findings.calibrate import CALIBRATIONS, rates, status
from attnlab.studies.sinks import calibration

KEYS = [c.key for c in calibration.CALIBRATIONS]


def test_every_budget_and_claim_is_registered():
    assert len(KEYS) == 8 and all(key in CALIBRATIONS for key in KEYS)
    assert {key.split(" @ ")[1] for key in KEYS} == {"smoke", "full", "real smoke", "real full"}


@pytest.mark.parametrize("key", KEYS)
def test_each_rule_meets_its_targets(key):
    found = rates(CALIBRATIONS[key], 300, seed=1)
    assert status(found) == {key: "calibrated"}, [r.record() for r in found if not r.meets]
