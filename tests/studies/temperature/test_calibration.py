"""The temperature rules' calibrations: at each budget, at most 5% false positives on every world without the effect
(i.i.d. rows at Table 2's xi_beta range among them), and the power at Table 2's effects pinned at 300 draws."""

from __future__ import annotations

import pytest

from attnlab.findings import calibrate
from attnlab.studies.temperature import calibration

DRAWS = 300
# Table 2's effects at the budgets' three seeds: the side of 1 and past the window are seen at the full budget's
# spreads; agreement closer than i.i.d. rows is not at either, and nothing past the window at smoke's.
POWER = {
    ("smoke", 0): (0.6, 0.85),
    ("smoke", 1): (0.0, 0.25),
    ("smoke", 2): (0.0, 0.2),
    ("full", 0): (0.95, 1.0),
    ("full", 1): (0.1, 0.4),
    ("full", 2): (0.9, 1.0),
}


@pytest.mark.parametrize(("budget", "index"), list(POWER))
def test_false_positives_and_power_per_budget(budget, index):
    cal = calibration.calibrations(budget)[index]
    found = calibrate.rates(cal, DRAWS, seed=1)
    for rate in found:
        if rate.measure != "power":
            assert rate.meets, rate.record()
    lo, hi = POWER[(budget, index)]
    assert lo <= calibrate.power(cal, DRAWS, seed=1) <= hi


def test_every_budget_registers_its_three_findings():
    keys = [k for k in calibrate.CALIBRATIONS if k.startswith("temperature")]
    assert len(keys) == 3 * len(calibration.BUDGETS)
