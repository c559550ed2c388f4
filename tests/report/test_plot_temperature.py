"""Temperature figures recompute nothing wrongly: N_n(t) is the brute-force count, the contact star sits at
(Delta, N(Delta)), fitted lines have the given slopes through the bucket-mean centroid, minima are starred."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attnlab.diagnostics.stats import ExponentFit
from attnlab.report import plot_temperature as pt


def _step_value(t, x, y):
    """The value at t of a step curve drawn with where="post" through points (x, y)."""
    return y[np.searchsorted(x, t, side="right") - 1]


@pytest.mark.parametrize("gaps", [[0.0, 0.3, 0.3, 0.9, 1.4, 2.0], [0.0, 0.0, 0.5, 0.7, 2.5]])
def test_counting_curve_is_the_brute_force_count_with_the_contact_star(tmp_path, drawn, gaps):
    rng = np.random.default_rng(1)
    shuffled = rng.permutation(gaps)
    delta, lam, n = 0.9, 2.1, len(gaps)
    pt.plot_counting(shuffled, lam, delta, n, "row", tmp_path / "count")
    ax = drawn[0].axes[0]
    step = next(line for line in ax.lines if line.get_label() == "N_n(t)")
    x, y = np.asarray(step.get_xdata()), np.asarray(step.get_ydata())
    for t in [0.0, 0.1, 0.3, 0.5, 0.9, 1.0, 1.4, 2.0, 2.4, 3.0]:
        if t <= max(gaps):
            assert _step_value(t, x, y) == sum(g <= t for g in gaps), t
    star = next(line for line in ax.lines if line.get_marker() == "*")
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (delta, sum(g <= delta for g in gaps))
    envelope = next(line for line in ax.lines if line.get_linestyle() == "--")
    assert np.allclose(envelope.get_ydata(), np.exp(lam * np.asarray(envelope.get_xdata())))
    assert max(envelope.get_ydata()) <= 2 * n
    right = drawn[0].axes[1]
    low, high = ax.get_ylim()
    assert right.get_ylim() == pytest.approx((math.log(low) / math.log(n), math.log(high) / math.log(n)))


def _bucket_table():
    n = np.array([16.0, 32.0, 64.0, 128.0, 256.0])
    t = np.log(np.log(n))
    return pd.DataFrame(
        {
            "n": n,
            "mean log Lambda": 0.2 + 1.3 * t,
            "mean log alpha": -0.5 + 0.1 * t,
            "mean log Delta": 0.4 - 0.2 * t + np.array([0, 0.01, -0.01, 0.0, 0.0]),
        }
    ), t


def _fit(xi_hat: float, half_iqr: float) -> ExponentFit:
    return ExponentFit(xi_hat, half_iqr, math.nan, math.nan, 0, (), (), (), 0, 0, 0, 0, 0, 0)


def test_bucket_means_panels_draw_the_ols_line_through_the_centroid(tmp_path, drawn):
    table, t = _bucket_table()
    fits = {"Lambda": _fit(1.3, 0.05), "alpha": _fit(0.1, 0.0), "Delta": _fit(-0.2, 0.01)}
    pt.plot_bucket_means(table, fits, tmp_path / "buckets")
    panels = [ax for ax in drawn[0].axes if ax.get_xlabel() == "log log n"]
    assert len(panels) == 3
    for ax, (name, fit) in zip(panels, fits.items()):
        points, line = ax.lines
        y = table[f"mean log {name}"].to_numpy()
        assert np.allclose(points.get_xdata(), t) and np.allclose(points.get_ydata(), y)
        slope = np.diff(line.get_ydata()) / np.diff(line.get_xdata())
        assert np.allclose(slope, fit.xi_hat)
        assert np.interp(t.mean(), line.get_xdata(), line.get_ydata()) == pytest.approx(y.mean())
        assert ax.get_title() == f"xi_hat_{name} = {fit.xi_hat:.3f} +- {fit.half_iqr:.3f}"


def test_a_fit_without_a_slope_draws_only_the_points(tmp_path, drawn):
    table, _ = _bucket_table()
    fits = {k: _fit(math.nan, math.nan) for k in ("Lambda", "alpha", "Delta")}
    pt.plot_bucket_means(table, fits, tmp_path / "b")
    assert [len(ax.lines) for ax in drawn[0].axes if ax.get_xlabel() == "log log n"] == [1, 1, 1]


def test_real_lambda_has_the_ols_and_the_slope_one_line_through_one_centroid(tmp_path, drawn):
    table, t = _bucket_table()
    pt.plot_real_lambda(table, 1.3, 0.05, "qwen", tmp_path / "real")
    ax = drawn[0].axes[0]
    points, ols, one = ax.lines
    y0 = table["mean log Lambda"].mean()
    for line, slope in ((ols, 1.3), (one, 1.0)):
        assert np.allclose(np.diff(line.get_ydata()) / np.diff(line.get_xdata()), slope)
        assert np.interp(t.mean(), line.get_xdata(), line.get_ydata()) == pytest.approx(y0)
    assert ax.get_title().startswith("qwen: ")


def test_beta_fit_stars_the_mse_minimum_and_draws_its_curve(tmp_path, drawn):
    n = np.arange(1, 129, dtype=float)
    beta = pd.DataFrame({"n": n, "beta_n": 0.8 * np.log(np.maximum(n, 2)) ** 0.6})
    fit = pd.DataFrame(
        {"xi": [0.0, 0.5, 0.6, 1.0, 1.5], "mse": [3.0, 0.2, 0.01, 0.4, 2.0], "a1": [2.0, 0.9, 0.8, 0.5, 0.3]}
    )
    pt.plot_beta_fit(beta, fit, 8, tmp_path / "beta")
    left, right = drawn[0].axes[:2]
    star = next(line for line in right.lines if line.get_marker() == "*")
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (0.6, 0.01)
    best, unit = [line for line in left.lines if line.get_linestyle() in ("-", "--")]
    grid = np.asarray(best.get_xdata())
    assert grid.min() == 8 and grid.max() == 128
    assert np.allclose(best.get_ydata(), 0.8 * np.log(grid) ** 0.6)
    assert np.allclose(unit.get_ydata(), 0.5 * np.log(np.asarray(unit.get_xdata())))


def test_sweep_stars_the_minimum_of_each_window_beyond_training_only(tmp_path, drawn):
    ppl = pd.DataFrame(
        {
            "n_eval": [512, 1024, 2048],
            "xi=0": [10.0, 14.0, 30.0],
            "xi=1": [10.0, 12.0, 20.0],
            "xi=2": [10.0, 13.0, 18.0],
        }
    )
    pt.plot_sweep(ppl, 512, tmp_path / "sweep")
    ax = drawn[0].axes[0]
    curves = [line for line in ax.lines if line.get_marker() == "o"]
    assert [line.get_linestyle() for line in curves] == [":", "-", "-"]
    for line, (_, row) in zip(curves, ppl.iterrows()):
        assert list(line.get_xdata()) == [0.0, 1.0, 2.0]
        assert list(line.get_ydata()) == row[["xi=0", "xi=1", "xi=2"]].tolist()
    stars = [(line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines if line.get_marker() == "*"]
    assert stars == [(1.0, 12.0), (2.0, 18.0)]
