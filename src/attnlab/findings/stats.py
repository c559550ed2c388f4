"""The statistics that decide labels, on counts and rates: the Wilson and the exact (Clopper-Pearson) intervals of
a proportion, the one-sided
two-sample exact test of two counts (Fisher's, conditional on the margins) and Holm's step-down correction over
several looks. Pure numpy and the standard library, so the findings layer needs nothing above it; the
diagnostics re-export ``wilson``.

Sources: Polynomial Concentration App. B ("Statistical power": Wilson 95% intervals; counts compared by tests on
counts), Clopper and Pearson (1934) for the exact interval, Fisher (1935) for the exact test, Holm (1979) for the
step-down correction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from attnlab.errors import ArgumentError

# The two-sided 95% normal quantile Phi^-1(0.975); Polynomial Concentration App. B quotes 95% Wilson intervals.
Z95 = 1.959963984540054


def wilson(successes: ArrayLike, n: ArrayLike, z: float = Z95) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    """Wilson score interval (lo, hi) for `successes` out of `n` trials (Polynomial Concentration App. B).

    lo, hi = (p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), p = successes / n: the two
    roots of (p - pi)^2 = z^2 pi (1 - pi) / n. Preferred to Wald at the boundary (App. B): 200/200
    gives lo = 0.9812 (quoted there as 98.2%, and as 98.12% in App. AG), 0/200 gives hi = 0.0189.
    Works elementwise on numpy arrays (floats back for scalar inputs); n = 0 gives NaN, not an error.
    """
    k = np.asarray(successes, dtype=float)
    m = np.asarray(n, dtype=float)
    if np.any(m < 0) or np.any(k < 0) or np.any(k > m):
        raise ArgumentError(f"need 0 <= successes <= n; got successes={successes!r}, n={n!r}")
    z2 = z * z
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / m
        denom = 1 + z2 / m
        center = (p + z2 / (2 * m)) / denom
        half = z * np.sqrt(p * (1 - p) / m + z2 / (4 * m * m)) / denom
    # At p = 0 (p = 1) the lower (upper) root is exactly 0 (1); rounding would leave ~1e-18 there.
    lo = np.where(k == 0, 0.0, np.clip(center - half, 0.0, 1.0))
    hi = np.where(k == m, 1.0, np.clip(center + half, 0.0, 1.0))
    lo, hi = np.where(m == 0, np.nan, lo), np.where(m == 0, np.nan, hi)
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


def _upper_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed in log space (exact for the n of a card or a study)."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        for i in range(k, n + 1)
    ]
    return min(1.0, float(np.exp(np.logaddexp.reduce(terms))))


def _solve(tail: Callable[[float], float], target: float) -> float:
    """The p in [0, 1] where the increasing ``tail(p)`` crosses ``target``, by bisection to 1e-12."""
    lo, hi = 0.0, 1.0
    while hi - lo > 1e-12:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if tail(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)


def clopper_pearson(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval (lo, hi) for ``successes`` out of ``n``: lo solves P(X >= k | lo) =
    alpha/2 and hi solves P(X <= k | hi) = alpha/2, alpha = 1 - level (lo = 0 at k = 0, hi = 1 at k = n).

    Its coverage is at least ``level`` at every true rate, where Wilson's dips below 93% at some rates for the
    prompt counts of a card (85% at n = 8 near 2%, 92.8% at n = 40 and 80%): the interval printed beside an
    accuracy, whose coverage the calibration table states. 5 of 10 gives (0.1871, 0.8129); 0 of n gives
    hi = 1 - (alpha/2)^(1/n). n = 0 gives NaN, not an error."""
    if not (isinstance(successes, (int, np.integer)) and isinstance(n, (int, np.integer)) and 0 <= successes <= n):
        raise ArgumentError(f"need integer counts 0 <= successes <= n; got successes={successes!r}, n={n!r}")
    if not 0.0 < level < 1.0:
        raise ArgumentError(f"level must lie in (0, 1), got {level!r}")
    k, m = int(successes), int(n)
    if m == 0:
        return math.nan, math.nan
    half = (1.0 - level) / 2
    lo = 0.0 if k == 0 else _solve(lambda p: _upper_tail(k, m, p), half)
    hi = 1.0 if k == m else _solve(lambda p: _upper_tail(k + 1, m, p), 1.0 - half)
    return lo, hi


def _log_hypergeom(k: int, hits: int, misses: int, draws: int) -> float:
    return (
        math.lgamma(hits + 1)
        - math.lgamma(k + 1)
        - math.lgamma(hits - k + 1)
        + math.lgamma(misses + 1)
        - math.lgamma(draws - k + 1)
        - math.lgamma(misses - draws + k + 1)
        - math.lgamma(hits + misses + 1)
        + math.lgamma(draws + 1)
        + math.lgamma(hits + misses - draws + 1)
    )


def fisher_less(a: int, n_a: int, b: int, n_b: int) -> float:
    """The one-sided p-value of Fisher's exact test that arm A's success rate (``a`` of ``n_a``) is below arm B's
    (``b`` of ``n_b``): P(X <= a) for X hypergeometric with the table's margins fixed. 7/8 against 8/8 gives
    0.5; 0/20 against 20/20 gives 1.45e-11."""
    for name, k, n in (("a", a, n_a), ("b", b, n_b)):
        if not (isinstance(k, (int, np.integer)) and isinstance(n, (int, np.integer)) and 0 <= k <= n and n >= 1):
            raise ArgumentError(f"need integer counts 0 <= {name} <= n_{name}, n_{name} >= 1; got {k!r} of {n!r}")
    hits, draws = int(a + b), int(n_a)
    misses = int(n_a + n_b) - hits
    low = max(0, draws - misses)
    terms = [_log_hypergeom(k, hits, misses, draws) for k in range(low, int(a) + 1)]
    return min(1.0, float(np.exp(np.logaddexp.reduce(terms)))) if terms else 0.0


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order: the family of looks rejects at level alpha
    exactly where an adjusted value is <= alpha, with the family-wise error rate held at alpha."""
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1 or np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ArgumentError(f"holm needs a sequence of p-values in [0, 1], got {pvalues!r}")
    order = np.argsort(p, kind="stable")
    m = len(p)
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(stepped, 1.0)
    return [float(v) for v in out]
