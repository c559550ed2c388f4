"""fisher_less is the one-sided exact test of two counts (against a brute-force sum over tables with math.comb) and
holds its level under the null; holm's adjusted p-values match the step-down procedure's definition."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest

from attnlab.errors import ArgumentError
from attnlab.findings.stats import fisher_less, holm


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
