"""The card's length, ablation and temperature findings decide by their stated rules, and their nulls can fail them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attnlab.analyses import ablate
from attnlab.analyses.substitute import BASELINE
from attnlab.cards import panels
from attnlab.cards.types import Exponent


def _points(slope: float, noise: float, prompts: int = 12, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lengths = (128, 256, 512, 1024)
    return pd.DataFrame(
        [
            {"L": n, "prompt": i, "unsafe %": 40 + slope * math.log2(n) + noise * rng.standard_normal()}
            for n in lengths
            for i in range(prompts)
        ]
    )


def test_the_trend_is_the_ols_slope_on_log2_l_with_a_bootstrap_interval_around_it():
    points = _points(5.0, 2.0)
    fit = panels.trend(points, seed=0)
    x, y = np.log2(points["L"].to_numpy(float)), points["unsafe %"].to_numpy()
    brute = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    assert fit["slope"] == pytest.approx(brute, rel=1e-12)
    assert fit["lo"] < fit["slope"] < fit["hi"] and fit["hi"] - fit["lo"] < 2


def test_a_rise_is_reproduced_against_permuted_lengths_and_a_flat_model_is_not():
    rising = panels.trend_finding(_points(8.0, 3.0), window=4096, seed=0)
    assert rising.verdict == "reproduced" and rising.null.passes is False
    flat = panels.trend_finding(_points(0.0, 3.0), window=4096, seed=0)
    assert flat.verdict == "not reproduced" and flat.mde.value < panels.PYTHIA_SLOPE
    noisy = panels.trend_finding(_points(0.0, 60.0, prompts=2), window=4096, seed=0)
    assert noisy.verdict == "underpowered" and noisy.mde.value > panels.PYTHIA_SLOPE
    one = panels.trend_finding(_points(8.0, 3.0).query("L == 128"), window=128, seed=0)
    assert one.verdict == "not checked" and "fewer than two" in one.reason


def _cells(base: int, top: int, bottom: int, random: tuple[int, ...], n: int = 40) -> pd.DataFrame:
    """``attnlab ablate``'s cell table of one K = 8 sweep whose arms answer the given numbers of n prompts."""
    arms = [(0, BASELINE, 0, base), (8, "top", 0, top), (8, "bottom", 0, bottom)]
    arms += [(8, "random", d, r) for d, r in enumerate(random)]
    answers = [
        {"k": k, "subset": s, "draw": d, "prompt": i, "correct": i < right} for k, s, d, right in arms for i in range(n)
    ]
    return ablate.cells(pd.DataFrame(answers))


def test_the_ablation_finding_needs_top_k_below_every_random_draw_and_bottom_k_not():
    causal = panels.ablation_finding(_cells(40, 2, 40, (39, 38, 40)), prompts=40)
    assert causal.verdict == "reproduced" and causal.null.passes is False
    both = panels.ablation_finding(_cells(40, 2, 3, (39, 38, 40)), prompts=40)
    assert both.verdict == "not checked" and both.null.passes is True  # bottom-K passes too: no test
    random_worse = panels.ablation_finding(_cells(40, 10, 40, (39, 5, 40)), prompts=40)
    assert random_worse.verdict == "not reproduced"
    unable = panels.ablation_finding(_cells(10, 0, 10, (10, 10, 10)), prompts=40)
    assert unable.verdict == "not checked" and "cannot do the task" in unable.reason


@pytest.mark.parametrize("xi", [0.0, 0.5, 1.0, 2.2])
def test_the_multiplier_is_the_closed_form_at_twice_the_window(xi):
    got = panels.multiplier(Exponent(xi, xi - 0.5, xi + 0.5), 8192)
    assert got.target == 16384 and got.xi == xi
    assert got.m == pytest.approx((math.log(16384) / math.log(8192)) ** xi, rel=1e-6)
    assert got.m_lo == pytest.approx((math.log(16384) / math.log(8192)) ** max(xi - 0.5, 0), rel=1e-6)
    assert got.to_dict() == {"target": 16384, "xi": xi, "m": got.m, "m lo": got.m_lo, "m hi": got.m_hi}
    assert panels.multiplier(Exponent(xi, 0, 1), None) is None
    assert panels.multiplier(Exponent(None, None, None), 8192) is None  # a NaN exponent, as card.json holds it
    at = panels.multiplier(Exponent(xi, xi, xi), 8192, target=4096)  # inside the window: no change
    assert at.target == 4096 and at.m == pytest.approx(1.0)
