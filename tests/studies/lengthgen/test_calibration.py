"""The lengthgen paired rule's calibrations: at every budget at most 2.5% (its design level) false positives on every
no-difference world, seeds that each generalize fully or fail among them, and the power at Table 1's gaps pinned at
300 draws; the Copy control's rule fires on Table 1's softmax Copy and not on alpha-entmax's nor at its floor."""

from __future__ import annotations

import pytest

from attnlab.findings import calibrate
from attnlab.studies.lengthgen import calibration
from attnlab.studies.lengthgen.rule import ALPHA

DRAWS = 300
POWER = {  # Table 1's gaps: Reverse's and the full family's are seen; alpha-entmax's 13.9 points on Copy at 4x are not
    ("smoke", "ASEntmax"): (0.95, 1.0),
    ("smoke", "alpha-entmax"): (0.15, 0.45),
    ("demo", "alpha-entmax"): (0.15, 0.45),
    ("full", "ASEntmax"): (0.95, 1.0),
    ("full", "alpha-entmax"): (0.95, 1.0),
}


@pytest.mark.parametrize(("budget", "finding"), list(POWER))
def test_false_positives_and_power_per_budget(budget, finding):
    (cal,) = [c for c in calibration.calibrations(budget) if finding in c.finding]
    for rate in calibrate.rates(cal, DRAWS, seed=1):
        if rate.measure != "power":
            assert rate.rate <= ALPHA + 0.01, rate.record()  # 2.5% and one draw in 100 of sampling slack
    lo, hi = POWER[(budget, finding)]
    assert lo <= calibrate.power(cal, DRAWS, seed=1) <= hi


def test_every_budget_compares_at_least_three_seeds():
    assert all(plan.seeds >= 3 for plan in calibration.BUDGETS.values())


@pytest.mark.parametrize("budget", list(calibration.BUDGETS))
def test_the_copy_control_fires_on_table_1s_softmax_and_not_on_a_map_that_stops_generalizing(budget):
    (cal,) = [c for c in calibration.calibrations(budget) if "Copy" in c.finding]
    found = {r.world: r for r in calibrate.rates(cal, DRAWS, seed=1)}
    assert len(found) == 3 and all(r.rate <= 0.01 for r in found.values() if r.measure != "power")
    assert calibrate.power(cal, DRAWS, seed=1) == 1.0
