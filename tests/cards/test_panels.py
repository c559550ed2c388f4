"""The card's rules and findings decide as stated on hand-made tables: ablation, recipe ahead, flat in L."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attnlab.analyses import ablate
from attnlab.analyses.substitute import BASELINE
from attnlab.cards import panels, rules
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


def test_the_slope_is_the_mean_of_per_prompt_ols_slopes_with_a_t_interval():
    points = _points(5.0, 2.0)
    table, x = panels.unsafe_table(points)
    slope, lo, hi = rules.slope_interval(table, x)
    each = [np.polyfit(x, row, 1)[0] for row in table]
    assert slope == pytest.approx(np.mean(each), rel=1e-12)
    half = 2.200985 * np.std(each, ddof=1) / math.sqrt(len(each))  # t(0.975, 11)
    assert (lo, hi) == pytest.approx((slope - half, slope + half), rel=1e-5)


def test_a_flat_model_is_reproduced_and_a_rise_beyond_the_band_is_not():
    flat = panels.trend_finding(_points(0.0, 2.0), window=4096)
    assert flat.verdict == "reproduced" and flat.null.passes is False and "like Llama, Qwen3" in flat.evidence
    assert flat.mde.power >= 0.8
    rising = panels.trend_finding(_points(rules.PYTHIA_SLOPE, 2.0), window=4096)
    assert rising.verdict == "not reproduced" and "rise beyond the band" in rising.evidence
    noisy = panels.trend_finding(_points(0.0, 40.0, prompts=3), window=4096)
    assert noisy.verdict == "underpowered" and noisy.mde.power < 0.8
    one = panels.trend_finding(_points(8.0, 3.0).query("L == 128"), window=128)
    assert one.verdict == "not checked" and "fewer than two" in one.reason
    untrained = panels.trend_finding(_points(0.0, 2.0), window=4096, precondition="the model looks untrained")
    assert untrained.verdict == "not checked" and untrained.reason == "the model looks untrained"


def test_the_flat_call_is_an_equivalence_reading_of_the_interval():
    band = rules.FLAT_BAND
    assert rules.flat_call(-1, 1) == "flat" and rules.flat_call(band + 0.1, band + 3) == "not flat"
    assert rules.flat_call(-band - 3, -band - 0.1) == "not flat" and rules.flat_call(0, band + 1) == "undecided"
    assert rules.flat_call(math.nan, 1) is None


def _cells(base: int, top: int, bottom: int, random: tuple[int, ...], n: int = 40) -> pd.DataFrame:
    """``attnlab ablate``'s cell table of one K = 8 sweep whose arms answer the given numbers of n prompts."""
    arms = [(0, BASELINE, 0, base), (8, "top", 0, top), (8, "bottom", 0, bottom)]
    arms += [(8, "random", d, r) for d, r in enumerate(random)]
    answers = [
        {"k": k, "subset": s, "draw": d, "prompt": i, "correct": i < right} for k, s, d, right in arms for i in range(n)
    ]
    return ablate.cells(pd.DataFrame(answers))


def test_the_ablation_rule_is_two_fisher_tests_holm_over_k():
    arms = rules.Arms
    # 7/8 against 8/8 is no evidence of a loss (one-sided Fisher p = 0.5), whatever the random draws do
    assert rules.ablation_ks((8, 8), [arms(4, 8, 7, 8, 24, 24)]) == []
    # 0/8 against softmax 8/8 and random 24/24: p = 7.8e-5 and 1.3e-7
    assert rules.ablation_ks((8, 8), [arms(4, 8, 0, 8, 24, 24)]) == [4]
    # below softmax but no lower than the random draws: the ranking does not discriminate (Pythia-like)
    assert rules.ablation_ks((8, 8), [arms(4, 8, 0, 8, 0, 24)]) == []
    # Holm over K: 7/12 against softmax's 12/12 has p = 0.0186, adjusted over two K to 0.037, over three to 0.056
    two = [arms(4, 12, 12, 12, 36, 36), arms(16, 12, 7, 12, 36, 36)]
    assert rules.ablation_ks((12, 12), two) == [16]
    assert rules.ablation_ks((12, 12), [arms(2, 12, 12, 12, 36, 36), *two]) == []


def test_the_ablation_finding_needs_top_k_below_softmax_and_random_and_bottom_k_not():
    causal = panels.ablation_finding(_cells(40, 2, 40, (39, 38, 40)))
    assert causal.verdict == "reproduced" and causal.null.passes is False
    assert "like Qwen3 and Gemma-4 in Fig. 4" in causal.evidence and causal.mde.power >= 0.8
    both = panels.ablation_finding(_cells(40, 2, 3, (39, 38, 40)))
    assert both.verdict == "not checked" and both.null.passes is True  # bottom-K passes too: no test
    random_worse = panels.ablation_finding(_cells(40, 10, 40, (39, 5, 40)))
    assert random_worse.verdict == "reproduced"  # pooled, the random draws answer 84/120, top-K 10/40
    alike = panels.ablation_finding(_cells(40, 20, 40, (20, 20, 20)))
    assert alike.verdict == "not reproduced" and "random-K heads cost as much" in alike.evidence
    unable = panels.ablation_finding(_cells(10, 0, 10, (10, 10, 10)))
    assert unable.verdict == "not checked" and "cannot do the task" in unable.reason
    untrained = panels.ablation_finding(_cells(40, 2, 40, (39, 38, 40)), precondition="the model looks untrained")
    assert untrained.verdict == "not checked" and untrained.reason == "the model looks untrained"


def test_the_recipe_reading_names_a_best_recipe_only_when_it_is_ahead_of_every_other():
    ahead = rules.recipe_reading((40, 40), [("a", 40, 40), ("b", 10, 40), ("c", 0, 40)])
    assert ahead == rules.Reading("a", (), False)
    # a four-way tie at 0: no best, and no recipe preserves NIAH
    zero = rules.recipe_reading((8, 8), [(r, 0, 8) for r in ("relu_p2_bauto", "relu_p4_bauto", "relu_p8_bauto")])
    assert zero.ahead is None and zero.none and zero.tied == ("relu_p2_bauto", "relu_p4_bauto", "relu_p8_bauto")
    tied = rules.recipe_reading((8, 8), [("a", 8, 8), ("b", 7, 8), ("c", 0, 8)])
    assert tied == rules.Reading(None, ("a", "b"), False)


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
