"""The representational-collapse probe (Vasylenko et al. 2025 App. D.2) computes the one-token extension gap exactly as a
brute-force float64 transformer does, meets the paper's sparsemax closed form (0.354), and its rule fires at most 5%
without the effect and at least 80% with it, labelling constructed tables accordingly."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attnlab.findings import calibrate
from attnlab.findings.verdict import FPR_MAX
from attnlab.studies.lengthgen import collapse


def _entmax_bisect(z: np.ndarray, alpha: float) -> np.ndarray:
    """alpha-entmax of one row by plain bisection on tau (float64), softmax at alpha = 1."""
    if alpha == 1.0:
        e = np.exp(z - z.max())
        return e / e.sum()
    k = 1.0 / (alpha - 1.0)
    x = (alpha - 1.0) * z
    lo, hi = x.max() - 1.0, x.max()
    for _ in range(200):
        tau = (lo + hi) / 2
        if (np.clip(x - tau, 0, None) ** k).sum() >= 1.0:
            lo = tau
        else:
            hi = tau
    p = np.clip(x - (lo + hi) / 2, 0, None) ** k
    return p / p.sum()


def _brute_last(tokens: np.ndarray, alpha: float, layers: int) -> float:
    """The last token after ``layers`` causal layers, identity Q/K/V, d = 1, residual, one row at a time."""
    v = tokens.astype(float).copy()
    for _ in range(layers):
        new = v.copy()
        for i in range(len(v)):
            keys = v[: i + 1]
            new[i] = v[i] + _entmax_bisect(v[i] * keys, alpha) @ keys
        v = new
    return float(v[-1])


def _brute_gap(prefix: np.ndarray, alpha: float, layers: int = collapse.LAYERS, phi: float = collapse.PHI) -> float:
    short, extended = collapse.sequences(prefix, phi)
    return abs(_brute_last(short, alpha, layers) - _brute_last(extended, alpha, layers))


@pytest.mark.parametrize("scenario", collapse.SCENARIOS)
def test_the_probe_matches_a_brute_force_transformer_for_small_n(scenario):
    prefix = collapse.prefix_tokens(scenario, 19, np.random.default_rng(3))
    ns = (6, 11, 20)
    for alpha in collapse.ALPHAS:
        # block 4: several query blocks, the causal cut inside them and the support pruning all exercised
        got = collapse.tail_gaps(collapse.prefix_pass(prefix, alpha, block=4), alpha, ns)
        want = [_brute_gap(prefix[: n - 1], alpha) for n in ns]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11, err_msg=f"{scenario}, alpha {alpha}")
        np.testing.assert_allclose(collapse.probe(prefix, alpha, ns), got, rtol=1e-12, atol=1e-13)


def test_one_sparsemax_layer_meets_the_papers_closed_form():
    # App. D.2: alpha = 2, phi = 0.5, b = 0 (v_i = 0), one layer: the gap tends to (1 - p*) |0 - sqrt(0.5)| = 0.354
    ns = (4, 16, 64, 256, 1024)
    states = collapse.prefix_pass(np.zeros(1023), 2.0, layers=1)
    gaps = collapse.tail_gaps(states, 2.0, ns, phi=0.5)
    limit = 0.5 * math.sqrt(0.5)
    assert np.all(np.diff(gaps) > 0) and abs(gaps[-1] - limit) < 1e-3
    # sparsemax on [0, ..., 0, 0.5] is dense: p_n - p_b = 1/2 with (n - 1) p_b + p_n = 1, exactly
    p_n = [0.5 + 0.5 / n for n in ns]
    np.testing.assert_allclose(gaps, [(1 - p) * math.sqrt(0.5) for p in p_n], rtol=1e-12)


def test_the_rule_fires_at_most_5_percent_without_the_effect_and_80_percent_with_it():
    cal = collapse.calibration("smoke")
    assert cal.rule is collapse.collapse_rule
    assert calibrate.CALIBRATIONS.find(f"{collapse.COLLAPSE_NAME} @ demo").rule is collapse.collapse_rule
    for rate in calibrate.rates(cal, draws=200, seed=1):
        if rate.measure == "false-positive rate":
            assert rate.rate <= FPR_MAX, rate
        elif rate.measure == "power":
            assert rate.rate >= 0.8, rate


def _raw(gaps: np.ndarray, ns, alphas) -> pd.DataFrame:
    rows = [
        {"scenario": "random", "draw": d, "alpha": a, "n": n, "gap": gaps[d, i, j], "seconds": 0.0}
        for d in range(gaps.shape[0])
        for i, a in enumerate(alphas)
        for j, n in enumerate(ns)
    ]
    rows += [
        {"scenario": "constant", "draw": 0, "alpha": a, "n": n, "gap": gaps[0, i, j], "seconds": 0.0}
        for i, a in enumerate(alphas)
        for j, n in enumerate(ns)
    ]
    return pd.DataFrame(rows)


def test_the_finding_is_reproduced_on_the_papers_shape_and_not_otherwise():
    sizes = collapse.SIZES["smoke"]
    ns, alphas, draws = sizes.ns, sizes.alphas, sizes.draws
    effect, *_ = [w for w in collapse.worlds(ns, alphas, draws) if w.effect]
    everyone = collapse.worlds(ns, alphas, draws)[0]
    rng = np.random.default_rng(7)
    found = collapse.collapse_finding(_raw(effect.draw(rng), ns, alphas), "smoke")
    assert found.verdict == "reproduced" and found.null.passes is False
    assert found.name == collapse.COLLAPSE_NAME and found.mde.power >= 0.8
    assert f"Mean gap at n = {ns[0]} -> {ns[-1]}" in found.evidence and "Constant prefix" in found.evidence
    flat = collapse.collapse_finding(_raw(everyone.draw(rng), ns, alphas), "smoke")
    assert flat.verdict == "not reproduced" and flat.null.passes is False
    # alpha-entmax kept but out of order (alpha 2 below alpha 1.5): the paper's "larger alpha, stronger" fails
    swapped = effect.draw(rng)[:, [0, 2, 1]]
    assert not collapse.collapse_rule(swapped)
    # a missing gap: the rule cannot be read
    holed = effect.draw(rng)
    holed[0, 1, -1] = math.nan
    assert collapse.collapse_finding(_raw(holed, ns, alphas)).verdict == "not checked"
    # the null control is the margin half on softmax: it passes where softmax keeps its gap
    assert collapse.null_rule(np.repeat(effect.draw(rng)[:, 1:2], len(alphas), axis=1))
