"""calibrate() measures a rule's false-positive rate, power and interval coverage by simulation, reproducibly, and
agrees with closed forms: a one-sided z-test fires 5% under its null and at its textbook power under the effect."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from attnlab.errors import ArgumentError
from attnlab.findings.calibrate import Calibration, Coverage, World, fire_rate, power, rates, status

N = 16
EFFECT = 0.5  # one-sided 5% z-test of N draws: power = Phi(0.5 * 4 - 1.645) = 0.639
RULE = lambda x: x.mean() * math.sqrt(N) > NormalDist().inv_cdf(0.95)  # noqa: E731


def _interval(rng):
    x = rng.normal(0.3, 1.0, N)
    half = 1.959964 / math.sqrt(N)
    return x.mean() - half, x.mean() + half, 0.3


Z_TEST = Calibration(
    "z-test",
    "tiny",
    RULE,
    "the mean of 16 N(mu, 1) draws exceeds 1.645 / 4",
    "16 draws",
    (
        World("mu = 0", False, lambda rng: rng.normal(0.0, 1.0, N)),
        World("mu = 0.5", True, lambda rng: rng.normal(EFFECT, 1.0, N)),
    ),
    (Coverage("the mean's 95% z-interval", _interval),),
)


def test_rates_match_the_closed_forms():
    found = {r.measure: r for r in rates(Z_TEST, 4000)}
    assert found["false-positive rate"].interval[0] < 0.05 < found["false-positive rate"].interval[1]
    expected = NormalDist().cdf(EFFECT * math.sqrt(N) - NormalDist().inv_cdf(0.95))
    assert found["power"].interval[0] < expected < found["power"].interval[1]
    assert abs(found["coverage"].rate - 0.95) < 0.015
    assert [r.meets for r in found.values()] == [found["false-positive rate"].rate <= 0.05, False, True]
    assert status(list(found.values())) == {"z-test @ tiny": "underpowered"}


def test_draws_are_reproducible_and_each_world_has_its_own_stream():
    assert fire_rate(RULE, Z_TEST.worlds[1], 300, seed=3) == fire_rate(RULE, Z_TEST.worlds[1], 300, seed=3)
    assert power(Z_TEST, 300) == fire_rate(RULE, Z_TEST.worlds[1], 300) / 300
    record = rates(Z_TEST, 50)[0].record()
    assert list(record) == [
        "finding",
        "budget",
        "measure",
        "world",
        "rate %",
        "95% lo",
        "95% hi",
        "draws",
        "target",
        "meets",
    ]


def test_a_calibration_needs_both_kinds_of_world_and_positive_draws():
    with pytest.raises(ArgumentError, match="one world without the effect and one with it"):
        Calibration("x", "b", RULE, "r", "s", (World("w", True, np.zeros),))
    with pytest.raises(ArgumentError, match="draws must be >= 1"):
        fire_rate(RULE, Z_TEST.worlds[0], 0)


def test_a_false_positive_rate_above_five_percent_fails_the_calibration():
    loose = Calibration("loose", "tiny", lambda x: x.mean() > 0, "the mean is positive", "16 draws", Z_TEST.worlds)
    assert status(rates(loose, 200)) == {"loose @ tiny": "fails"}
