"""fisher_less is the one-sided exact test of two counts (against a brute-force sum over tables with math.comb) and
holds its level under the null; holm's adjusted p-values match the step-down procedure's definition; the exact
(Clopper-Pearson) interval solves its two binomial tail equations and covers at least 95% at every rate."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest

from attnlab.errors import ArgumentError
from attnlab.findings.stats import clopper_pearson, fisher_less, holm, wilson


def _brute(a, n_a, b, n_b):
    hits = a + b
    total = comb(n_a + n_b, hits)
    return sum(comb(n_a, k) * comb(n_b, hits - k) for k in range(0, a + 1) if 0 <= hits - k <= n_b) / total


@pytest.mark.parametrize(("n_a", "n_b"), [(1, 1), (3, 5), (8, 8), (6, 2)])
def test_fisher_less_is_the_hypergeometric_lower_tail(n_a, n_b):
    for a, b in itertools.product(range(n_a + 1), range(n_b + 1)):
        assert fisher_less(a, n_a, b, n_b) == pytest.approx(_brute(a, n_a, b, n_b), rel=1e-9, abs=1e-15)


def test_fisher_less_quoted_values_and_level():
    assert fisher_less(7, 8, 8, 8) == pytest.approx(0.5)
    assert fisher_less(0, 20, 20, 20) == pytest.approx(1 / comb(40, 20), rel=1e-9)
    assert fisher_less(150, 200, 10, 200) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    fired = [fisher_less(int(rng.binomial(40, 0.6)), 40, int(rng.binomial(40, 0.6)), 40) <= 0.05 for _ in range(2000)]
    assert np.mean(fired) <= 0.05  # exact and conditional: conservative
    with pytest.raises(ArgumentError, match="integer counts"):
        fisher_less(3, 2, 1, 2)


def test_holm_is_the_step_down_procedure():
    p = [0.01, 0.04, 0.03, 0.20]
    # sorted 0.01, 0.03, 0.04, 0.20 times 4, 3, 2, 1, running maximum: 0.04, 0.09, 0.09, 0.20
    assert holm(p) == pytest.approx([0.04, 0.09, 0.09, 0.20])
    assert holm([0.5]) == [0.5] and holm([0.6, 0.6]) == [1.0, 1.0]
    with pytest.raises(ArgumentError, match="p-values"):
        holm([0.1, float("nan")])


def _tail(k, n, p):
    """P(X >= k), X ~ Binomial(n, p), by a brute-force sum with math.comb."""
    return sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def _min_coverage(interval, n):
    """The smallest exact coverage over the rates 1%, 2%, ..., 99%."""
    bounds = [interval(k, n) for k in range(n + 1)]
    return min(
        sum(comb(n, k) * p**k * (1 - p) ** (n - k) for k, (lo, hi) in enumerate(bounds) if lo <= p <= hi)
        for p in (i / 100 for i in range(1, 100))
    )


@pytest.mark.parametrize("n", [1, 8, 40])
def test_clopper_pearson_solves_its_tail_equations(n):
    for k in range(n + 1):
        lo, hi = clopper_pearson(k, n)
        assert 0.0 <= lo < hi <= 1.0
        if k > 0:
            assert _tail(k, n, lo) == pytest.approx(0.025, abs=1e-9)
        if k < n:
            assert 1 - _tail(k + 1, n, hi) == pytest.approx(0.025, abs=1e-9)
        other = clopper_pearson(n - k, n)
        assert (lo, hi) == pytest.approx((1 - other[1], 1 - other[0]), abs=1e-9)


def test_clopper_pearson_quoted_values_and_closed_forms():
    assert clopper_pearson(5, 10) == pytest.approx((0.1870860, 0.8129140), abs=1e-6)  # R's binom.test(5, 10)
    assert clopper_pearson(0, 8) == pytest.approx((0.0, 1 - 0.025 ** (1 / 8)), abs=1e-9)
    assert clopper_pearson(200, 200)[0] == pytest.approx(0.025 ** (1 / 200), abs=1e-9)
    assert all(np.isnan(clopper_pearson(0, 0)))
    with pytest.raises(ArgumentError, match="0 <= successes <= n"):
        clopper_pearson(3, 2)
    with pytest.raises(ArgumentError, match="level"):
        clopper_pearson(1, 2, level=1.0)


@pytest.mark.parametrize("n", [8, 40])
def test_clopper_pearson_covers_where_wilson_dips(n):
    assert _min_coverage(clopper_pearson, n) >= 0.95 - 1e-12
    assert _min_coverage(wilson, n) < 0.93  # the dip the exact interval is printed for
