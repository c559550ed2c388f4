"""Paired comparisons over training seeds: Student's t distribution (its CDF by the regularized incomplete beta
function, its quantiles by bisection), the two-sided interval of paired differences and the minimum detectable
effect of a paired t-test. A study's verdicts on trained models read these, a seed being the unit of replication."""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import ArrayLike

from attnlab.diagnostics.stats import _check_level, _float_values
from attnlab.errors import ArgumentError


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function, by the modified Lentz method."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for x in [0, 1]."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` > 0 degrees of freedom (bisection on ``t_cdf``). Cached: the
    calibrations ask for the same few (p, df) hundreds of thousands of times."""
    if not 0 < p < 1 or not df > 0:
        raise ArgumentError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p!r}, df={df!r}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def paired_interval(differences: ArrayLike, level: float = 0.95) -> dict[str, float]:
    """Mean, sample standard deviation and the two-sided Student-t interval of paired differences (one per
    seed: the same seed's control and treated run); n, mean, sd, lo, hi. With one difference the sd and the
    interval are NaN: one pair cannot say how much seeds vary."""
    _check_level(level)
    d = _float_values(differences, "differences")
    d = d[np.isfinite(d)]
    n = len(d)
    if n == 0:
        return {"n": 0, "mean": math.nan, "sd": math.nan, "lo": math.nan, "hi": math.nan}
    mean = float(d.mean())
    if n == 1:
        return {"n": 1, "mean": mean, "sd": math.nan, "lo": math.nan, "hi": math.nan}
    sd = float(d.std(ddof=1))
    half = t_quantile(0.5 + level / 2.0, n - 1) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "lo": mean - half, "hi": mean + half}


def paired_mde(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true mean difference a two-sided paired t-test at level ``alpha`` detects with probability
    ``power``, from ``n`` pairs whose differences have standard deviation ``sd``:
    (t_{1-alpha/2, n-1} + t_{power, n-1}) sd / sqrt(n). NaN with fewer than two pairs or no finite sd."""
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ArgumentError(f"paired_mde needs 0 < alpha < 1 and 0 < power < 1, got alpha={alpha!r}, power={power!r}")
    if n < 2 or not math.isfinite(sd):
        return math.nan
    return (t_quantile(1 - alpha / 2, n - 1) + t_quantile(power, n - 1)) * sd / math.sqrt(n)
