"""Honest statistics for per-row diagnostic tables: Wilson intervals, grouped fractions and medians,
unit-level bootstrap CIs, logarithmic growth exponents and the Cor. 4.9 check; and Student-t intervals
for paired differences over a few seeds (Zhu et al. 2026 Table 1 reports paired-seed differences).

Sources: Polynomial Concentration (When Does Polynomial Attention Concentrate?) §3 (diagnostics restricted to
active-unsaturated rows), App. B "Statistical power" (Wilson 95% intervals) and App. R (prompt-level
bootstrap: resample prompts with replacement, 1000 resamples, 2.5/97.5 percentiles); Hayase & Karakida 2026
(critical attention scaling) §4.3 (growth exponents, Cor. 4.9), §4.5.1 and App. F, G.1 (bucket-mean
OLS slope, tie exclusion, bootstrap half-IQR over a resampling unit).

Rows whose status is "empty", "nan" or "inf" (``rows.py``: the score row could not be read) are
counted and never enter a statistic. Columns are always read with brackets: ``df.head`` is a method.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import cast

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.findings.stats import Z95 as Z95
from attnlab.findings.stats import wilson as wilson

# Statuses of rows that could not be read (``attnlab.diagnostics.rows.SPECIAL``), repeated here so this
# module stays free of torch.
UNREADABLE = ("empty", "nan", "inf")

# Hayase & Karakida 2026 §4.5.1: rows with log10 Lambda_n > 5 are exact-tie configurations, excluded everywhere.
TIE_LOG10_MAX = 5.0


def _names(cols: str | Iterable[str] | None) -> tuple[str, ...]:
    """One column name or an iterable of them, as a tuple."""
    if cols is None:
        return ()
    if isinstance(cols, str):
        return (cols,)
    return tuple(cols)


def _require(df: pd.DataFrame, cols: Iterable[str]) -> None:
    """Raise a ValueError naming every missing column and listing the ones the table has."""
    if not isinstance(df, pd.DataFrame):
        raise ArgumentTypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in dict.fromkeys(cols) if c not in df.columns]
    if missing:
        raise ArgumentError(f"missing column(s) {missing}; the table has columns {list(df.columns)}")


def active_rows(df: pd.DataFrame) -> pd.Series:
    """status == "active" (active-unsaturated): Polynomial Concentration §3 restricts S_p diagnostics to these rows."""
    _require(df, ["status"])
    return df["status"] == "active"


def tie_mask(lambda_n: pd.Series | ArrayLike) -> np.ndarray:
    """True on exact-tie rows, log10 Lambda_n > 5 (Lambda_n = +inf included): Hayase & Karakida 2026 §4.5.1
    excludes them from every aggregate, of Lambda, alpha and Delta alike. NaN (unreadable) is False."""
    lam = _float_values(lambda_n, "lambda_n")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log10(lam) > TIE_LOG10_MAX


def _float_values(values: pd.Series | ArrayLike, name: str) -> NDArray[np.float64]:
    """A 1-D float array (NA -> NaN) from a Series or array-like."""
    if isinstance(values, pd.Series):
        out: NDArray[np.float64] = values.to_numpy(dtype=float, na_value=np.nan)
    else:
        out = np.asarray(values, dtype=float)
    if out.ndim != 1:
        raise ArgumentError(f"{name} must be one-dimensional, got shape {out.shape}")
    return out


def _flag_values(df: pd.DataFrame, col: str) -> np.ndarray:
    """A boolean (or 0/1) column as floats: 1.0, 0.0, NaN for NA; anything else is a TypeError."""
    s = df[col]
    if pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_numeric_dtype(s.dtype):
        v: NDArray[np.float64] = s.to_numpy(dtype=float, na_value=np.nan)
        known = v[~np.isnan(v)]
        if np.all((known == 0) | (known == 1)):
            return v
    raise ArgumentTypeError(f"fraction column {col!r} must be boolean (or 0/1 with NA), got dtype {s.dtype}")


def _bool_mask(mask: pd.Series | ArrayLike, n_rows: int, name: str) -> np.ndarray:
    """A per-row boolean mask (array-like or Series, NA -> False) of length n_rows."""
    mask = mask if isinstance(mask, pd.Series) else pd.Series(np.asarray(mask))
    if len(mask) != n_rows:
        raise ArgumentError(f"{name} has {len(mask)} entries but there are {n_rows} rows")
    if not (pd.api.types.is_bool_dtype(mask.dtype) or len(mask) == 0):
        raise ArgumentTypeError(f"{name} must be a boolean mask, got dtype {mask.dtype}")
    return cast(np.ndarray, mask.fillna(False).to_numpy(dtype=bool))  # pandas is untyped here (no stubs)


def _row_mask(df: pd.DataFrame, where: Callable[[pd.DataFrame], ArrayLike] | ArrayLike | None) -> np.ndarray:
    """The `where` rule as a boolean array: None = every row, a callable df -> mask, or a mask."""
    if where is None:
        return np.ones(len(df), dtype=bool)
    return _bool_mask(where(df) if callable(where) else where, len(df), "where")


def _group_codes(df: pd.DataFrame, by: tuple[str, ...]) -> tuple[np.ndarray, pd.DataFrame]:
    """Group number of every row (groups sorted by key, NaN keys kept) and the keys, one row per group.
    With no key columns the whole table is one group, even when empty."""
    if not by:
        return np.zeros(len(df), dtype=np.int64), pd.DataFrame(index=range(1))
    g = df.groupby(list(by), sort=True, dropna=False)
    keys = g.size().index.to_frame(index=False)
    return g.ngroup().to_numpy(dtype=np.int64), keys


def aggregate(
    df: pd.DataFrame,
    by: str | Iterable[str] = ("layer", "head"),
    *,
    fractions: str | Iterable[str] = (),
    medians: str | Iterable[str] = (),
    where: Callable[[pd.DataFrame], ArrayLike] | ArrayLike | None = active_rows,
    drop_inf: bool | str | Iterable[str] = True,
) -> pd.DataFrame:
    """Per group of `by` (sorted; () = the whole table as one group): counts, Wilson-bounded fractions
    of boolean columns and medians of float columns.

    Counted rows: status not in {"empty", "nan", "inf"} (unreadable rows never enter a statistic) and
    `where` true. `where` defaults to ``active_rows`` (status == "active"), Polynomial Concentration §3's rule for S_p,
    rho, A_act; pass None for every readable row, another callable df -> mask, or a boolean mask.

    Columns, after the `by` keys:
      n_rows        all rows of the group;
      n_nan         rows with status "nan" (input had NaN), excluded;
      n_unreadable  rows with status "empty", "nan" or "inf", excluded (n_nan included);
      n_used        counted rows;
      <c>, <c>_lo, <c>_hi, <c>_n   for each of `fractions`: the fraction of True among counted rows
                    where <c> is not NA, its Wilson 95% interval (Polynomial Concentration App. B) and that denominator;
      <c>_median, <c>_n_inf        for each of `medians`: the median over counted rows, NaN ignored,
                    and how many counted rows hold +inf. `drop_inf` (True = every median column, False
                    = none, or a list of them) says in which columns those +inf values are left out of
                    the median: lambda_n is +inf on exact ties, which Hayase & Karakida 2026 §4.5.1 excludes.
    A group with nothing counted gets NaN statistics; an empty table with `by` columns gives no groups.
    """
    by, fractions, medians = _names(by), _names(fractions), _names(medians)
    _require(df, [*by, "status", *fractions, *medians])
    if isinstance(drop_inf, bool):
        drop_cols = set(medians) if drop_inf else set()
    else:
        drop_cols = set(_names(drop_inf))
        if not drop_cols <= set(medians):
            raise ArgumentError(
                f"drop_inf names {sorted(drop_cols - set(medians))}, which are not in medians {list(medians)}"
            )
    codes, out = _group_codes(df, by)
    n_groups = len(out)

    def count(weights: ArrayLike) -> np.ndarray:
        return np.bincount(codes, weights=np.asarray(weights, dtype=float), minlength=n_groups)

    status = df["status"]
    unreadable = status.isin(UNREADABLE).to_numpy(dtype=bool)
    used = _row_mask(df, where) & ~unreadable
    out["n_rows"] = np.bincount(codes, minlength=n_groups)
    out["n_nan"] = count(status == "nan").astype(np.int64)
    out["n_unreadable"] = count(unreadable).astype(np.int64)
    out["n_used"] = count(used).astype(np.int64)
    for c in fractions:
        v = _flag_values(df, c)
        counted = used & ~np.isnan(v)
        k = count(np.where(counted, v, 0.0))
        m = count(counted)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[c] = k / m
        out[f"{c}_lo"], out[f"{c}_hi"] = wilson(k, m)
        out[f"{c}_n"] = m.astype(np.int64)
    for c in medians:
        v = _float_values(df[c], c)
        pos_inf = used & np.isposinf(v)
        keep = used & ~np.isnan(v) & ~(pos_inf if c in drop_cols else False)
        med = pd.Series(np.where(keep, v, np.nan)).groupby(codes).median()
        out[f"{c}_median"] = med.reindex(range(n_groups)).to_numpy()
        out[f"{c}_n_inf"] = count(pos_inf).astype(np.int64)
    return out


def _unit_codes(df: pd.DataFrame, unit: str | Iterable[str]) -> tuple[np.ndarray, int]:
    """Unit number of every row for a unit column (or tuple of columns), and the number of units."""
    names = _names(unit)
    if not names:
        raise ArgumentError("unit must name a column (or columns) of the table, e.g. 'prompt'")
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise ArgumentError(f"unknown unit {missing}: not a column; the table has columns {list(df.columns)}")
    g = df.groupby(list(names), sort=True, dropna=False)
    return g.ngroup().to_numpy(dtype=np.int64), g.ngroups


def _draws(n_units: int, n_boot: int, seed: int | None) -> np.ndarray:
    """(n_boot, n_units) unit indices: each resample draws n_units units with replacement (Polynomial Concentration
    App. R; Hayase & Karakida 2026 App. F). Both bootstrap paths use this, so equal seeds give equal resamples."""
    if not (isinstance(n_boot, (int, np.integer)) and n_boot >= 1):
        raise ArgumentError(f"n_boot must be an int >= 1, got {n_boot!r}")
    return np.random.default_rng(seed).integers(0, n_units, size=(n_boot, n_units))


def _draw_counts(draws: np.ndarray, n_units: int) -> np.ndarray:
    """(n_boot, n_units) multiplicity of each unit in each resample."""
    n_boot = draws.shape[0]
    flat = (np.arange(n_boot)[:, None] * n_units + draws).ravel()
    return np.bincount(flat, minlength=n_boot * n_units).reshape(n_boot, n_units).astype(float)


def _percentile_interval(samples: np.ndarray, level: float) -> tuple[float, float]:
    """The (1 - level)/2 and (1 + level)/2 percentiles (2.5/97.5 at 95%, Polynomial Concentration App. R); resamples
    whose statistic is undefined (NaN) are left out."""
    if np.all(np.isnan(samples)):
        return np.nan, np.nan
    lo, hi = np.nanpercentile(samples, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ArgumentError(f"level must lie in (0, 1), got {level!r}")


def bootstrap_ci(
    df: pd.DataFrame,
    statistic: Callable[[pd.DataFrame], float],
    *,
    unit: str | Iterable[str] = "prompt",
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int | None = 0,
) -> tuple[float, float, float]:
    """(point, lo, hi): statistic(df) and its percentile bootstrap interval over `unit` (Polynomial Concentration
    App. R).

    Rows are clustered by unit (prompt, layer, head, position) and not i.i.d., so each resample draws
    as many units as there are, with replacement, takes all rows of each drawn unit (a unit drawn
    twice contributes its rows twice, keeping its unit label), and recomputes `statistic` on them.
    `unit` is a column name or a tuple of them. Resamples where `statistic` is NaN are left out of the
    percentiles. A table with no rows gives NaN bounds. For fractions use ``bootstrap_fraction``.
    """
    _check_level(level)
    codes, n_units = _unit_codes(df, unit)
    point = float(statistic(df))
    if n_units == 0:
        return point, np.nan, np.nan
    draws = _draws(n_units, n_boot, seed)
    # Rows sorted by unit: unit u owns order[start[u] : start[u] + size[u]].
    order = np.argsort(codes, kind="stable")
    size = np.bincount(codes, minlength=n_units)
    start = np.concatenate(([0], np.cumsum(size)[:-1]))
    samples = np.empty(n_boot)
    for b, drawn in enumerate(draws):
        lens = size[drawn]
        offset = np.repeat(start[drawn] - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
        samples[b] = statistic(df.take(order[offset]))
    lo, hi = _percentile_interval(samples, level)
    return point, lo, hi


def bootstrap_fraction(
    df: pd.DataFrame,
    column: str,
    *,
    unit: str | Iterable[str] = "prompt",
    where: Callable[[pd.DataFrame], ArrayLike] | ArrayLike | None = active_rows,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int | None = 0,
) -> tuple[float, float, float]:
    """``bootstrap_ci`` for the pooled fraction of True in a boolean `column`, fast.

    The fraction is (True rows) / (counted rows) over all rows of the resample, counted rows being
    those readable, passing `where` (default status == "active", as in ``aggregate``) and not NA in
    `column`. A resample's totals are sums of per-unit totals weighted by how often each unit was
    drawn, so the cost is one pass over the rows plus an (n_boot x units) product. Same `seed`, same
    resamples and same numbers as ``bootstrap_ci`` with the equivalent statistic.
    """
    _check_level(level)
    _require(df, ["status", column])
    codes, n_units = _unit_codes(df, unit)
    v = _flag_values(df, column)
    counted = _row_mask(df, where) & ~df["status"].isin(UNREADABLE).to_numpy(dtype=bool) & ~np.isnan(v)
    k = np.bincount(codes, weights=np.where(counted, v, 0.0), minlength=n_units)
    m = np.bincount(codes, weights=counted.astype(float), minlength=n_units)
    point = k.sum() / m.sum() if m.sum() > 0 else np.nan
    if n_units == 0:
        return float(point), np.nan, np.nan
    w = _draw_counts(_draws(n_units, n_boot, seed), n_units)
    with np.errstate(divide="ignore", invalid="ignore"):
        samples = (w @ k) / (w @ m)
    lo, hi = _percentile_interval(samples, level)
    return float(point), lo, hi


def _ols_slopes(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """OLS slope of each row of y (..., k) on t (k,); NaN where y has a NaN or t has < 2 points."""
    if t.size < 2:
        return np.full(y.shape[:-1], np.nan)
    tc = t - t.mean()
    return cast(np.ndarray, (y - y.mean(axis=-1, keepdims=True)) @ tc / (tc @ tc))  # numpy types this Any


def _unit_labels(unit: pd.DataFrame | ArrayLike, n_rows: int) -> tuple[np.ndarray, int]:
    """Unit number of every row from per-row labels (1-D) or a frame / 2-D array of label columns."""
    frame = unit if isinstance(unit, pd.DataFrame) else pd.DataFrame(np.asarray(unit))
    if len(frame) != n_rows:
        raise ArgumentError(f"unit has {len(frame)} labels but there are {n_rows} rows")
    g = frame.groupby(list(frame.columns), sort=True, dropna=False)
    return g.ngroup().to_numpy(dtype=np.int64), g.ngroups


@dataclass(frozen=True)
class ExponentFit:
    """``exponent``'s fit of X_n ~ (log n)^xi (Hayase & Karakida 2026 §4.5.1, App. F).

    xi_hat: the OLS slope of the bucket means on log log n; half_iqr: half the interquartile range of the bootstrap
    slopes; lo, hi: their 2.5 and 97.5 percentiles (NaN without ``unit``); n_buckets: grid points in the fit; grid:
    their n; bucket_mean: the mean of log X at each; bucket_count: its kept rows, K(c, n); n_rows: the rows given;
    n_excluded, n_invalid, n_off_grid: rows left out as excluded, with X NaN, infinite or <= 0, or with n off the
    grid; n_units: resampling units; n_boot_valid: resamples that gave a slope."""

    xi_hat: float
    half_iqr: float
    lo: float
    hi: float
    n_buckets: int
    grid: tuple[float, ...]
    bucket_mean: tuple[float, ...]
    bucket_count: tuple[int, ...]
    n_rows: int
    n_excluded: int
    n_invalid: int
    n_off_grid: int
    n_units: int
    n_boot_valid: int


def exponent(
    n: pd.Series | ArrayLike,
    x: pd.Series | ArrayLike,
    *,
    exclude: pd.Series | ArrayLike | None = None,
    buckets: ArrayLike | None = None,
    unit: pd.DataFrame | ArrayLike | None = None,
    n_boot: int = 200,
    seed: int | None = 0,
) -> ExponentFit:
    """Logarithmic growth exponent xi of X_n ~ (log n)^xi from per-row values (Hayase & Karakida 2026 §4.5.1).

    n: per-row context length (the key count of the row); x: per-row X in {Lambda_n, alpha_n,
    Delta_n} (any positive statistic). The estimator is Hayase & Karakida 2026's bucket-mean slope: at each grid
    point n the bucket is every kept row with that n, its bucket mean is the arithmetic mean of the
    natural log of X over those rows, K(c, n)^-1 sum_i log X_n^(i) (a mean of logs, not a log of
    means), and xi_hat is the OLS slope of the bucket means on log log n across the grid.

    Rows left out: `exclude` (a per-row boolean mask, NA = False) -- Hayase & Karakida 2026 excludes exact-tie rows
    log10 Lambda_n > 5 from the aggregates of all three coordinates, so pass ``tie_mask(lambda_n)``
    (or the row table's ``tie`` column) for Lambda, alpha and Delta alike; rows where X is NaN, +-inf
    or <= 0 (log undefined), counted as ``n_invalid``; rows whose n is not on the grid. `buckets` is the
    n-grid N(c): None = every distinct n among the rows; a list restricts the fit to those n (e.g.
    App. B.1's n >= 64). Grid points with no kept row are dropped from the fit. Every kept n must be
    > 1, where log log n is defined.

    Interval (Hayase & Karakida 2026 §4.5.1, App. F): `unit` gives each row's resampling unit, per-row labels or a
    frame of label columns (e.g. df[["layer", "head"]] on Qwen, (seed, layer, head) on nanoGPT, or
    prompt); each of `n_boot` (default B = 200) resamples draws as many units as there are with
    replacement, recomputes every bucket mean from the drawn units' rows and refits the slope;
    half_iqr = (q75 - q25) / 2 of those slopes, and lo, hi their 2.5 and 97.5 percentiles (a 95% percentile
    interval). A resample that leaves a grid point of the fit without rows has no slope and is left out
    (n_boot_valid counts the rest). unit=None: no bootstrap, NaN.

    Returns an ``ExponentFit``.
    """
    n_arr = _float_values(n, "n")
    x_arr = _float_values(x, "x")
    if len(n_arr) != len(x_arr):
        raise ArgumentError(f"n has {len(n_arr)} rows but x has {len(x_arr)}")
    excluded = np.zeros(len(n_arr), dtype=bool) if exclude is None else _bool_mask(exclude, len(n_arr), "exclude")
    with np.errstate(invalid="ignore"):
        valid = np.isfinite(x_arr) & (x_arr > 0)
    grid = np.unique(n_arr[~excluded & valid]) if buckets is None else np.unique(_float_values(buckets, "buckets"))
    on_grid = np.isin(n_arr, grid)
    keep = ~excluded & valid & on_grid
    if np.any(n_arr[keep] <= 1) or np.any(~np.isfinite(n_arr[keep])):
        raise ArgumentError("every kept row needs a finite n > 1 (log log n is undefined otherwise)")
    bucket = np.searchsorted(grid, n_arr[keep])
    logx = np.log(x_arr[keep])
    sums = np.bincount(bucket, weights=logx, minlength=grid.size)
    counts = np.bincount(bucket, minlength=grid.size)
    fit = counts > 0
    t = np.log(np.log(grid[fit]))
    mean = sums[fit] / counts[fit]
    result = ExponentFit(
        xi_hat=float(_ols_slopes(t, mean)),
        half_iqr=np.nan,
        lo=np.nan,
        hi=np.nan,
        n_buckets=int(fit.sum()),
        grid=tuple(grid[fit].tolist()),
        bucket_mean=tuple(mean.tolist()),
        bucket_count=tuple(counts[fit].tolist()),
        n_rows=len(n_arr),
        n_excluded=int(excluded.sum()),
        n_invalid=int((~excluded & ~valid).sum()),
        n_off_grid=int((~excluded & valid & ~on_grid).sum()),
        n_units=0,
        n_boot_valid=0,
    )
    if unit is None:
        return result
    # Units come from every input row, so a unit whose rows were all excluded is still drawn (and
    # contributes nothing), as the unit set T(c) of App. F is all (layer, head) tuples.
    codes, n_units = _unit_labels(unit, len(n_arr))
    result = replace(result, n_units=n_units)
    if n_units == 0 or fit.sum() < 2:
        return result
    nb = int(fit.sum())
    cell = codes[keep] * nb + np.searchsorted(grid[fit], n_arr[keep])
    unit_sums = np.bincount(cell, weights=logx, minlength=n_units * nb).reshape(n_units, nb)
    unit_counts = np.bincount(cell, minlength=n_units * nb).reshape(n_units, nb).astype(float)
    w = _draw_counts(_draws(n_units, n_boot, seed), n_units)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot_mean = (w @ unit_sums) / (w @ unit_counts)
    slopes = _ols_slopes(t, boot_mean)
    slopes = slopes[~np.isnan(slopes)]
    result = replace(result, n_boot_valid=int(slopes.size))
    if slopes.size:
        q25, q75 = np.percentile(slopes, [25, 75])
        lo, hi = _percentile_interval(slopes, 0.95)
        result = replace(result, half_iqr=float((q75 - q25) / 2), lo=lo, hi=hi)
    return result


def _estimate(value: ExponentFit | float, name: str) -> tuple[float, float | None]:
    """(xi, half-IQR or None) from a number or an ``exponent`` result."""
    if isinstance(value, ExponentFit):
        return value.xi_hat, value.half_iqr
    if isinstance(value, Mapping):
        raise ArgumentTypeError(f"{name}: pass an exponent() result (an ExponentFit) or a number, got a mapping")
    return float(value), None


def check_cor49(
    xi_lambda: ExponentFit | float,
    xi_alpha: ExponentFit | float,
    xi_delta: ExponentFit | float,
    *,
    half_iqrs: Iterable[float] | None = None,
    atol: float = 1e-9,
) -> dict[str, float | bool | None]:
    """Check Hayase & Karakida 2026 Cor. 4.9, eq. (4.7): xi_Lambda = xi_alpha - xi_Delta + 1.

    The identity is the contact formula (4.4) Lambda_n = alpha_n log n / Delta_n taken to exponents
    (log n contributes the +1; Delta_n enters with a minus because it divides). Each argument is a
    number or an ``exponent`` result. residual = xi_lambda - (xi_alpha - xi_delta + 1).

    Rule: holds iff |residual| <= h_Lambda + h_alpha + h_Delta + atol, the h being the half-IQRs
    (`half_iqrs` = (h_Lambda, h_alpha, h_Delta), else those of ``exponent`` results, else 0 for plain
    numbers, which makes it an exact check at `atol`). The half-widths are added linearly, not in
    quadrature: the three estimates come from the same rows and units, so their errors are not
    independent, and on one common row set the bucket-mean slopes satisfy (4.7) exactly (each row
    obeys (4.4)), leaving the residual to measure mismatched row sets or the contact gap's tolerance.
    holds is None when a half-IQR is NaN (no interval to judge with).

    Returns a dict: residual, predicted (xi_alpha - xi_delta + 1), tolerance, holds.
    """
    estimates = [_estimate(v, k) for v, k in ((xi_lambda, "xi_lambda"), (xi_alpha, "xi_alpha"), (xi_delta, "xi_delta"))]
    if half_iqrs is not None:
        widths = [float(h) for h in half_iqrs]
        if len(widths) != 3:
            raise ArgumentError(f"half_iqrs must be (h_Lambda, h_alpha, h_Delta), got {half_iqrs!r}")
    else:
        widths = [0.0 if h is None else h for _, h in estimates]
    (lam, _), (alpha, _), (delta, _) = estimates
    predicted = alpha - delta + 1
    residual = lam - predicted
    tolerance = float(sum(widths)) + atol
    holds = None if np.isnan(tolerance) else bool(abs(residual) <= tolerance)
    return {"residual": residual, "predicted": predicted, "tolerance": tolerance, "holds": holds}
