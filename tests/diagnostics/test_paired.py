"""Student's t quantiles invert closed forms and a numerical CDF; the paired interval is mean +- t times the standard error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.diagnostics import paired


@pytest.mark.parametrize("df", [1, 2, 3, 5, 30])
def test_t_quantile_inverts_closed_forms_and_a_numerical_cdf(df):
    # df 1 (Cauchy) and 2 have closed forms; every df: the CDF by trapezoid integration of the density
    for p in (0.6, 0.9, 0.975, 0.995):
        q = paired.t_quantile(p, df)
        if df == 1:
            assert q == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)
        if df == 2:
            assert q == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9)
        x = np.linspace(0.0, q, 200_001)
        log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
        density = np.exp(log_c - (df + 1) / 2 * np.log1p(x * x / df))
        assert 0.5 + np.trapezoid(density, x) == pytest.approx(p, abs=1e-6)
        assert paired.t_quantile(1 - p, df) == pytest.approx(-q, rel=1e-12)
    assert paired.t_quantile(0.975, 2) == pytest.approx(4.302652729911275, rel=1e-9)
    with pytest.raises(ValueError, match="0 < p < 1"):
        paired.t_quantile(1.0, df)


def test_paired_interval_is_mean_plus_minus_t_times_the_standard_error():
    d = [0.5, 0.3, 0.7]
    got = paired.paired_interval(d)
    sd = float(np.std(d, ddof=1))
    half = 4.302652729911275 * sd / math.sqrt(3)
    assert got["n"] == 3 and got["mean"] == pytest.approx(0.5) and got["sd"] == pytest.approx(sd)
    assert (got["lo"], got["hi"]) == (pytest.approx(0.5 - half), pytest.approx(0.5 + half))
    one = paired.paired_interval([0.2, math.nan])
    assert one["n"] == 1 and one["mean"] == 0.2 and math.isnan(one["lo"])
    assert paired.paired_interval([])["n"] == 0
