"""Per-row table statistics match hand/brute-force references: Wilson bounds, grouped fractions and medians with unreadable and +inf rows counted apart, unit bootstrap CIs, bucket-mean exponents, Cor. 4.9, and Student-t quantiles and paired intervals."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from attnlab.diagnostics import stats

Z = 1.959963984540054


def hand_wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson score interval written out from the textbook formula, scalar by scalar."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    denom = 1 + Z**2 / n
    center = (p + Z**2 / (2 * n)) / denom
    half = Z / denom * math.sqrt(p * (1 - p) / n + Z**2 / (4 * n**2))
    return max(0.0, center - half), min(1.0, center + half)


# ---------------------------------------------------------------- wilson


def test_wilson_matches_hand_formula():
    for k, n in [(7, 10), (1, 3), (78, 100), (156, 200), (0, 1), (5, 5), (123, 4567)]:
        lo, hi = stats.wilson(k, n)
        hlo, hhi = hand_wilson(k, n)
        assert lo == pytest.approx(hlo, abs=1e-13) and hi == pytest.approx(hhi, abs=1e-13), (k, n)
    # 7/10 by hand: center 0.6560..., half 0.2449... -> [0.3968, 0.8922]
    lo, hi = stats.wilson(7, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.3968, 0.8922)


def test_wilson_bounds_are_the_score_test_roots():
    k = np.array([0, 1, 3, 50, 99, 100, 200])
    n = np.array([10, 10, 7, 100, 100, 100, 200])
    lo, hi = stats.wilson(k, n)
    p = k / n
    for bound in (lo, hi):
        assert np.allclose((p - bound) ** 2, Z**2 * bound * (1 - bound) / n, atol=1e-12)
    assert np.all(lo <= p) and np.all(p <= hi)


def test_wilson_seed_figures():
    lo, hi = stats.wilson(200, 200)
    assert hi == 1.0
    assert lo == pytest.approx(0.98115, abs=1e-5)  # App. AG: 98.12%; App. B rounds it to 98.2%
    assert abs(lo - 0.982) < 1e-3
    lo, hi = stats.wilson(0, 200)
    assert lo == 0.0 and hi == pytest.approx(0.019, abs=5e-4)  # App. B: upper bound ~1.9%
    assert stats.wilson(500, 500)[0] == pytest.approx(0.9924, abs=5e-5)  # App. AG: 99.24%
    lo, hi = stats.wilson(100, 200)
    assert (hi - lo) / 2 == pytest.approx(0.069, abs=1e-3)  # "half-width at most ~7 pp" at n = 200


def test_wilson_zero_trials_and_bad_counts():
    assert all(math.isnan(v) for v in stats.wilson(0, 0))
    lo, hi = stats.wilson(np.array([1, 0]), np.array([2, 0]))
    assert not np.isnan(lo[0]) and np.isnan(lo[1]) and np.isnan(hi[1])
    with pytest.raises(ValueError, match="successes <= n"):
        stats.wilson(3, 2)
    with pytest.raises(ValueError):
        stats.wilson(-1, 2)


# ---------------------------------------------------------------- aggregate

STATUSES = ["active", "dead", "saturated", "nan", "inf", "empty"]


def random_rows(seed: int = 0, n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    status = rng.choice(STATUSES, n, p=[0.6, 0.1, 0.1, 0.1, 0.05, 0.05])
    s = rng.exponential(1.0, n)
    s[rng.random(n) < 0.05] = np.nan
    safe = pd.array(s < 1, dtype="boolean")
    safe[np.isnan(s)] = pd.NA
    lam = rng.exponential(2.0, n)
    lam[rng.random(n) < 0.15] = np.inf
    df = pd.DataFrame(
        {
            "layer": rng.integers(0, 3, n),
            "head": rng.integers(0, 4, n),
            "prompt": rng.integers(0, 30, n),
            "query": rng.integers(0, 64, n),
            "status": status,
            "s_p2": s,
            "safe_p2": safe,
            "pred_safe_p2": rng.random(n) < 0.4,
            "lambda_n": lam,
        }
    )
    unreadable = df["status"].isin(["nan", "inf", "empty"])
    # Unreadable rows get extreme values so that mixing them in would move every statistic.
    df.loc[unreadable, "safe_p2"] = True
    df.loc[unreadable, "pred_safe_p2"] = True
    df.loc[unreadable, "s_p2"] = -1e9
    df.loc[unreadable, "lambda_n"] = -1e9
    return df


def brute_force(df: pd.DataFrame, active_only: bool, drop_inf: bool) -> pd.DataFrame:
    lines = []
    for layer in sorted(df["layer"].unique()):
        for head in sorted(df["head"].unique()):
            g = df[(df["layer"] == layer) & (df["head"] == head)]
            if len(g) == 0:
                continue
            used = g[~g["status"].isin(["nan", "inf", "empty"])]
            if active_only:
                used = used[used["status"] == "active"]
            line = {
                "layer": layer,
                "head": head,
                "n_rows": len(g),
                "n_nan": int((g["status"] == "nan").sum()),
                "n_unreadable": int(g["status"].isin(["nan", "inf", "empty"]).sum()),
                "n_used": len(used),
            }
            for c in ("safe_p2", "pred_safe_p2"):
                known = [bool(v) for v in used[c] if v is not pd.NA]
                k, m = sum(known), len(known)
                line[c] = k / m if m else math.nan
                line[c + "_lo"], line[c + "_hi"] = hand_wilson(k, m)
                line[c + "_n"] = m
            for c in ("s_p2", "lambda_n"):
                vals = [float(v) for v in used[c] if not math.isnan(v)]
                n_inf = sum(v == math.inf for v in vals)
                if drop_inf:
                    vals = [v for v in vals if v != math.inf]
                line[c + "_median"] = float(np.median(vals)) if vals else math.nan
                line[c + "_n_inf"] = n_inf
            lines.append(line)
    return pd.DataFrame(lines)


@pytest.mark.parametrize("active_only", [True, False])
@pytest.mark.parametrize("drop_inf", [True, False])
def test_aggregate_matches_brute_force(active_only, drop_inf):
    df = random_rows()
    got = stats.aggregate(
        df,
        fractions=["safe_p2", "pred_safe_p2"],
        medians=["s_p2", "lambda_n"],
        where=stats.active_rows if active_only else None,
        drop_inf=drop_inf,
    )
    want = brute_force(df, active_only, drop_inf)
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got, want, check_dtype=False, rtol=1e-12, atol=1e-12)
    assert got["n_nan"].sum() == (df["status"] == "nan").sum() > 0
    assert got["lambda_n_n_inf"].sum() > 0


def test_aggregate_unreadable_rows_counted_never_mixed():
    df = random_rows(1)
    kw = dict(fractions=["safe_p2"], medians=["s_p2"], where=None)
    got = stats.aggregate(df, **kw)
    clean = stats.aggregate(df[~df["status"].isin(["nan", "inf", "empty"])], **kw)
    cols = ["safe_p2", "safe_p2_lo", "safe_p2_hi", "safe_p2_n", "s_p2_median", "n_used"]
    pd.testing.assert_frame_equal(got[cols], clean[cols])
    assert (got["n_rows"] - clean["n_rows"]).tolist() == got["n_unreadable"].tolist()
    assert (got["n_nan"] > 0).all()


def test_aggregate_inf_dropped_and_counted():
    df = pd.DataFrame(
        {"layer": 0, "head": 0, "status": "active", "lambda_n": [1.0, 2.0, np.inf, np.inf, np.inf, np.nan]}
    )
    dropped = stats.aggregate(df, medians=["lambda_n"])
    kept = stats.aggregate(df, medians=["lambda_n"], drop_inf=False)
    assert dropped["lambda_n_median"].item() == 1.5 and dropped["lambda_n_n_inf"].item() == 3
    assert kept["lambda_n_median"].item() == np.inf and kept["lambda_n_n_inf"].item() == 3


def test_aggregate_where_and_whole_table():
    df = pd.DataFrame(
        {
            "layer": [0, 0, 0, 1],
            "head": [0, 0, 0, 0],
            "status": ["active", "dead", "active", "nan"],
            "safe_p2": [True, False, False, True],
        }
    )
    by_head = stats.aggregate(df, fractions=["safe_p2"])
    assert by_head["safe_p2"].tolist()[0] == 0.5 and by_head["safe_p2_n"].tolist() == [2, 0]
    assert math.isnan(by_head["safe_p2"].tolist()[1]) and math.isnan(by_head["safe_p2_lo"].tolist()[1])
    mask = stats.aggregate(df, by=(), fractions=["safe_p2"], where=df["status"] != "dead")
    assert mask["safe_p2"].item() == 0.5 and mask["n_nan"].item() == 1 and mask["n_rows"].item() == 4
    everyone = stats.aggregate(df, by="layer", fractions=["safe_p2"], where=None)
    assert everyone["safe_p2"].tolist()[0] == pytest.approx(1 / 3)


def test_aggregate_empty_table():
    df = random_rows().iloc[:0]
    grouped = stats.aggregate(df, fractions=["safe_p2"], medians=["s_p2"])
    assert len(grouped) == 0 and "safe_p2_lo" in grouped.columns and "s_p2_n_inf" in grouped.columns
    whole = stats.aggregate(df, by=(), fractions=["safe_p2"], medians=["s_p2"])
    assert whole["n_rows"].tolist() == [0] and math.isnan(whole["safe_p2"].item())


def test_aggregate_input_errors():
    df = random_rows()
    with pytest.raises(ValueError, match=r"\['s_p99'\].*'layer', 'head'"):
        stats.aggregate(df, medians=["s_p99"])
    with pytest.raises(ValueError, match="status"):
        stats.aggregate(df.drop(columns=["status"]))
    with pytest.raises(TypeError, match="s_p2"):
        stats.aggregate(df, fractions=["s_p2"])
    with pytest.raises(ValueError, match="drop_inf"):
        stats.aggregate(df, medians=["s_p2"], drop_inf=["lambda_n"])
    with pytest.raises(ValueError, match="where"):
        stats.aggregate(df, where=np.ones(3, dtype=bool))


# ---------------------------------------------------------------- bootstrap


def pooled_safe(d: pd.DataFrame) -> float:
    ok = d[d["status"] == "active"]["safe_p2"].dropna()
    return ok.astype(float).mean() if len(ok) else math.nan


def test_bootstrap_identical_prompts_zero_width():
    one = pd.DataFrame({"status": "active", "safe_p2": [True, False, False, True, True]})
    df = pd.concat([one.assign(prompt=p) for p in range(40)], ignore_index=True)
    assert stats.bootstrap_fraction(df, "safe_p2") == (0.6, 0.6, 0.6)
    point, lo, hi = stats.bootstrap_ci(df, pooled_safe, n_boot=200)
    assert point == lo == hi == pytest.approx(0.6)


def test_bootstrap_two_prompts_resamples_prompts_not_rows():
    # Prompt 0: one safe row; prompt 1: three unsafe rows. Resamples: {0,0} -> 1, {0,1} -> 1/4,
    # {1,1} -> 0 with probabilities 1/4, 1/2, 1/4; the pooled point estimate is 1/4 (rows, not prompts).
    df = pd.DataFrame({"prompt": [0, 1, 1, 1], "status": "active", "safe_p2": [True, False, False, False]})
    assert stats.bootstrap_fraction(df, "safe_p2") == (0.25, 0.0, 1.0)
    assert stats.bootstrap_ci(df, pooled_safe) == (0.25, 0.0, 1.0)
    # The central 40% lies inside the {0,1} mass (25th to 75th percentile).
    assert stats.bootstrap_fraction(df, "safe_p2", level=0.4) == (0.25, 0.25, 0.25)
    # A row-level bootstrap on 400 copies of each prompt's rows would be tight; the prompt one is not.
    many = pd.concat([df] * 400, ignore_index=True)
    assert stats.bootstrap_fraction(many, "safe_p2")[1:] == (0.0, 1.0)


def test_bootstrap_fast_path_equals_generic_path():
    df = random_rows(2, 2000)
    fast = stats.bootstrap_fraction(df, "safe_p2", n_boot=300, seed=7)
    slow = stats.bootstrap_ci(df, pooled_safe, n_boot=300, seed=7)
    assert fast == pytest.approx(slow, abs=1e-12)
    assert fast[1] < fast[0] < fast[2]
    other = stats.bootstrap_fraction(df, "safe_p2", unit=("layer", "head"), n_boot=300, seed=7)
    assert other[0] == fast[0] and other[1:] != fast[1:]


def test_bootstrap_fraction_narrows_with_many_prompts():
    rng = np.random.default_rng(0)
    n_prompts, per_prompt = 200, 1_000
    df = pd.DataFrame(
        {
            "prompt": np.repeat(np.arange(n_prompts), per_prompt),
            "status": "active",
            "safe_p2": rng.random(n_prompts * per_prompt) < 0.3,
        }
    )
    point, lo, hi = stats.bootstrap_fraction(df, "safe_p2", n_boot=1000)
    assert lo < point < hi and hi - lo < 0.01


def test_bootstrap_errors():
    df = random_rows()
    with pytest.raises(ValueError, match=r"unknown unit \['document'\].*'prompt'"):
        stats.bootstrap_fraction(df, "safe_p2", unit="document")
    with pytest.raises(ValueError, match="unknown unit"):
        stats.bootstrap_ci(df, pooled_safe, unit="document")
    with pytest.raises(ValueError, match="level"):
        stats.bootstrap_fraction(df, "safe_p2", level=95)
    with pytest.raises(ValueError, match="n_boot"):
        stats.bootstrap_fraction(df, "safe_p2", n_boot=0)
    point, lo, hi = stats.bootstrap_fraction(df.iloc[:0], "safe_p2")
    assert math.isnan(point) and math.isnan(lo) and math.isnan(hi)


# ---------------------------------------------------------------- exponent

GRID = np.array([64, 128, 256, 512, 768, 1024])


@pytest.mark.parametrize("xi", [-1.5, 0.0, 0.54, 2.31])
def test_exponent_exact_power_law(xi):
    n = np.repeat(GRID, 5)
    res = stats.exponent(n, 3.7 * np.log(n) ** xi)
    assert res.xi_hat == pytest.approx(xi, abs=1e-10)
    assert res.n_buckets == 6 and res.bucket_count == (5,) * 6


def test_exponent_is_ols_of_bucket_mean_of_logs():
    rng = np.random.default_rng(3)
    n = rng.choice(GRID, 500)
    x = rng.lognormal(0.0, 1.0, 500) * np.log(n)
    res = stats.exponent(n, x)
    means = pd.Series(np.log(x)).groupby(n).mean()
    assert res.bucket_mean == pytest.approx(means.to_list(), abs=1e-12)
    slope = np.polyfit(np.log(np.log(means.index.to_numpy(float))), means.to_numpy(), 1)[0]
    assert res.xi_hat == pytest.approx(slope, abs=1e-12)
    # A mean of logs, not the log of a mean: at one grid point X in {1, e^2} has bucket mean 1.
    two = stats.exponent([64, 64, 128], [1.0, math.e**2, 1.0])
    assert two.bucket_mean[0] == pytest.approx(1.0)


def synthetic(xi: float, seed: int, units: int = 96, per_cell: int = 20):
    """X = C (log n)^xi * unit effect * row noise on the nanoGPT grid, with per-row unit labels."""
    rng = np.random.default_rng(seed)
    n = np.repeat(GRID, units * per_cell)
    unit = np.tile(np.repeat(np.arange(units), per_cell), GRID.size)
    effect = rng.normal(0.0, 0.3, units)
    x = 2.0 * np.log(n) ** xi * np.exp(effect[unit] + rng.normal(0.0, 0.5, n.size))
    return n, x, unit


def test_exponent_recovers_noisy_xi_with_bootstrap_half_iqr():
    for seed, xi in [(0, 0.7), (1, -0.9), (2, 2.3)]:
        n, x, unit = synthetic(xi, seed)
        res = stats.exponent(n, x, unit=unit)
        assert abs(res.xi_hat - xi) < 0.08
        assert 0.003 < res.half_iqr < 0.1
        assert abs(res.xi_hat - xi) < 4 * res.half_iqr
        assert res.n_units == 96 and res.n_boot_valid == 200
    fit = stats.exponent(n, x)
    assert all(math.isnan(v) for v in (fit.half_iqr, fit.lo, fit.hi))  # no unit, no interval


def test_exponent_percentile_interval_covers_xi_about_95_percent_of_the_time():
    hits = 0
    for seed in range(100):
        n, x, unit = synthetic(0.7, seed, units=24, per_cell=5)
        res = stats.exponent(n, x, unit=unit, seed=seed)
        assert res.lo < res.xi_hat < res.hi and res.hi - res.lo > 2 * res.half_iqr
        hits += res.lo <= 0.7 <= res.hi
    assert 0.88 <= hits / 100 <= 1.0


def test_exponent_identical_units_give_zero_half_iqr():
    n = np.repeat(GRID, 10)
    x = np.log(n) ** 0.5 * np.tile(np.linspace(0.5, 2.0, 10), GRID.size)
    unit = np.zeros(n.size, dtype=int)  # a single unit: every resample is the data itself
    assert stats.exponent(n, x, unit=unit).half_iqr == pytest.approx(0.0, abs=1e-12)
    same = np.tile(np.arange(5), 2 * GRID.size)  # five units with identical rows at every n
    x_same = np.repeat(np.log(GRID) ** 0.5, 10)
    assert stats.exponent(n, x_same, unit=same).half_iqr == pytest.approx(0.0, abs=1e-12)


def test_exponent_ties_and_invalid_rows_excluded_and_counted():
    n, x, unit = synthetic(1.2, 5, units=20)
    base = stats.exponent(n, x, unit=unit)
    tied_n = np.concatenate([n, np.full(30, 1024), np.full(7, 64), np.full(4, 128)])
    tied_x = np.concatenate([x, np.full(30, np.inf), np.full(7, 1e6), np.full(4, np.nan)])
    tied_unit = np.concatenate([unit, np.zeros(41, dtype=int)])
    res = stats.exponent(tied_n, tied_x, exclude=stats.tie_mask(tied_x), unit=tied_unit)
    assert res.xi_hat == pytest.approx(base.xi_hat, abs=1e-12)
    assert (res.n_excluded, res.n_invalid, res.n_rows) == (37, 4, n.size + 41)
    # Without the tie rule the finite 1e6 rows (log10 > 5) would move the slope.
    loose = stats.exponent(tied_n, tied_x)
    assert loose.n_invalid == 34 and abs(loose.xi_hat - base.xi_hat) > 0.01
    assert stats.tie_mask(pd.Series([1e5, 1.0001e5, np.inf, np.nan])).tolist() == [False, True, True, False]


def test_exponent_grid_and_edge_cases():
    n = np.repeat(GRID, 3)
    x = np.log(n) ** 0.8
    sub = stats.exponent(n, x, buckets=[128, 256, 512, 1024])
    assert sub.grid == (128, 256, 512, 1024) and sub.n_off_grid == 6
    assert sub.xi_hat == pytest.approx(0.8, abs=1e-10)
    assert math.isnan(stats.exponent([64, 64], [1.0, 2.0]).xi_hat)
    with pytest.raises(ValueError, match="n > 1"):
        stats.exponent([1, 64, 128], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="rows"):
        stats.exponent([64, 128], [1.0])


# ---------------------------------------------------------------- Cor. 4.9


def test_cor49_consistent_and_inconsistent():
    # Block configuration, bounded m_n (seed 003 §4.4): xi_alpha = -1, xi_Delta = -xi_Lambda.
    assert stats.check_cor49(1.7, -1.0, -1.7)["holds"] is True
    # Simplex slice: xi_alpha = 0, xi_Delta = 1 - xi_Lambda.
    assert stats.check_cor49(2.5, 0.0, -1.5)["holds"] is True
    # Seed 003 Table 2 rows, rounded to 0.01, hold within their half-IQRs.
    for lam, alpha, delta, h in [
        (2.31, -1.65, -2.96, (0.10, 0.08, 0.17)),
        (0.54, -0.90, -0.44, (0.03, 0.01, 0.04)),
        (0.69, -0.97, -0.66, (0.05, 0.02, 0.05)),
    ]:
        assert stats.check_cor49(lam, alpha, delta, half_iqrs=h)["holds"] is True
    bad = stats.check_cor49(2.0, -1.0, -1.0)
    assert bad["residual"] == pytest.approx(1.0) and bad["predicted"] == pytest.approx(1.0) and bad["holds"] is False
    # Sign convention: swapping alpha and Delta breaks the identity.
    assert stats.check_cor49(1.7, -1.7, -1.0)["holds"] is False
    assert stats.check_cor49(2.0, -1.0, -1.0, half_iqrs=(0.4, 0.3, 0.3))["holds"] is True
    assert stats.check_cor49(2.0, -1.0, -1.0, half_iqrs=(0.4, 0.3, 0.2))["holds"] is False
    assert stats.check_cor49(2.0, -1.0, -1.0, half_iqrs=(np.nan, 0.1, 0.1))["holds"] is None


def test_cor49_holds_exactly_on_rows_obeying_the_contact_formula():
    rng = np.random.default_rng(9)
    n, _, unit = synthetic(0.0, 9, units=30)
    alpha = 0.6 * np.log(n) ** -0.9 * rng.lognormal(0, 0.3, n.size)
    delta = 1.1 * np.log(n) ** -0.4 * rng.lognormal(0, 0.3, n.size)
    lam = alpha * np.log(n) / delta  # eq. (4.4)
    lam[:50] = np.inf  # ties: excluded from all three coordinates alike
    ties = stats.tie_mask(lam)
    xs = [stats.exponent(n, v, exclude=ties, unit=unit) for v in (lam, alpha, delta)]
    res = stats.check_cor49(*xs)
    assert abs(res["residual"]) < 1e-10 and res["holds"] is True
    assert res["tolerance"] == pytest.approx(sum(x.half_iqr for x in xs) + 1e-9)
    assert (
        stats.check_cor49(*xs[:2], dataclasses.replace(xs[2], xi_hat=xs[2].xi_hat + 1.0, half_iqr=0.0))["holds"]
        is False
    )
    with pytest.raises(TypeError, match="ExponentFit"):
        stats.check_cor49(*xs[:2], {"xi_hat": 0.0, "half_iqr": 0.0})
    no_interval = [stats.exponent(n, v, exclude=ties) for v in (lam, alpha, delta)]
    assert stats.check_cor49(*no_interval)["holds"] is None
