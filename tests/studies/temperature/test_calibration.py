"""The temperature rules' calibrations: at each budget, at most 5% false positives on every world without the effect
(i.i.d. rows at Table 2's xi_beta range among them), and the power at Table 2's effects pinned at 300 draws; the
pretrained rule's likewise at the real part's and the card's documents, its interval covering at least 93%."""

from __future__ import annotations

import pytest

from attnlab.cards import PLANS
from attnlab.findings import calibrate
from attnlab.studies.temperature import calibration
from attnlab.studies.temperature.plan import REAL_PLANS

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


def test_every_budget_registers_its_three_findings_and_every_real_budget_the_pretrained_one():
    keys = [k for k in calibrate.CALIBRATIONS if k.startswith("temperature")]
    assert len(keys) == 3 * len(calibration.BUDGETS) + len(REAL_PLANS)
    assert {k for k in calibrate.CALIBRATIONS if k.startswith("card temperature")} == {
        f"card temperature @ {plan}" for plan in PLANS
    }


# Table 2's pretrained cell nearest 1 (1.74) at 4 documents (smoke, the card's plans) and 7 (full): out of reach
# with documents as far apart as SmolLM2-135M's, so the finding reads underpowered there.
REAL_POWER = {
    "temperature: xi_hat_Lambda above 1 on a pretrained checkpoint @ smoke": (0.1, 0.3),
    "temperature: xi_hat_Lambda above 1 on a pretrained checkpoint @ full": (0.25, 0.5),
    "card temperature @ quick": (0.1, 0.3),
    "card temperature @ standard": (0.1, 0.3),
}


@pytest.mark.parametrize("key", list(REAL_POWER))
def test_the_pretrained_rule_per_budget(key):
    cal = calibrate.CALIBRATIONS[key]
    found = calibrate.rates(cal, DRAWS, seed=1)
    assert {r.measure for r in found} == {"false-positive rate", "power", "coverage"}
    for rate in found:
        if rate.measure == "false-positive rate":
            assert rate.rate <= 0.05, rate.record()
        elif rate.measure == "coverage":
            assert rate.rate >= 0.93, rate.record()
    lo, hi = REAL_POWER[key]
    assert lo <= calibrate.power(cal, DRAWS, seed=1) <= hi


def test_the_pretrained_rule_is_seen_with_enough_documents():
    # the same worlds at 24 documents: the rule sees Table 2's cell, so the 4- and 7-document powers are the design's
    cal = calibration.real_calibration("24 documents", 24, [2560, 5120, 7680, 10240])
    assert calibrate.power(cal, DRAWS, seed=1) >= 0.8
