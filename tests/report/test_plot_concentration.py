"""Concentration figures draw, from a known table, one panel per bias with one boundary curve per degree and one
point per head, count the p* = 0 and p* = inf rows, and give each recipe or cell its own bar or marker."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PathCollection

from attnlab.report import plot_concentration as pc


def test_phase_plot_has_a_panel_per_bias_a_curve_per_degree_and_a_point_per_head(tmp_path, drawn):
    heads = pd.DataFrame({"b": [0.0, 0.0, 0.0, 1.5, 1.5], "layer": [0, 1, 2, 0, 1], "head": [3, 0, 1, 2, 2],
                          "med rho": [0.1, 0.5, 0.9, 0.3, 0.05], "med a_act": [4.0, 30.0, 2.0, 8.0, 100.0]})
    degrees = (2, 4, 8)
    pc.plot_phase(heads, degrees, tmp_path / "phase")
    fig, = drawn
    assert len(fig.axes) == 2
    for ax, b in zip(fig.axes, (0.0, 1.5)):
        part = heads[heads["b"] == b]
        assert ax.get_title() == f"b = {b}"
        assert len(ax.lines) == len(degrees)
        for line, p in zip(ax.lines, degrees):
            rho = np.asarray(line.get_xdata())
            assert np.allclose(line.get_ydata(), (1 - rho) ** -p)
        points, = ax.collections
        assert np.allclose(points.get_offsets(), part[["med rho", "med a_act"]].to_numpy())
        assert [t.get_text() for t in ax.texts] == [f"{l}.{h}" for l, h in zip(part["layer"], part["head"])]
        assert ax.get_ylim()[1] == pytest.approx(max(2 * part["med a_act"].max(), 10.0))


def test_p_star_histogram_shows_finite_rows_and_counts_the_rest_in_the_title(tmp_path, drawn):
    values = {"0": np.array([0.0, 0.0, 1.5, 3.0, 6.0, 12.0, math.inf, math.nan]),
              "auto": np.array([math.inf, math.inf, 0.7])}
    pc.plot_p_star(values, (2, 16), tmp_path / "pstar")
    fig, = drawn
    for ax, (b, v) in zip(fig.axes, values.items()):
        finite = v[np.isfinite(v) & (v > 0)]
        zero, inf = int((v == 0).sum()), int(np.isinf(v).sum())
        assert ax.get_title() == f"b = {b}: {len(finite)} rows shown; {zero} at p* = 0, {inf} at p* = inf"
        assert sum(bar.get_height() for bar in ax.patches) == len(finite)
        assert [line.get_xdata()[0] for line in ax.lines] == [1.0, 4.0]  # log2 of the degrees


def _cells():
    return pd.DataFrame({"p": [2, 2, 8], "all-head safe %": [10.0, 30.0, 80.0], "top-40 safe %": [5.0, 20.0, 60.0],
                         "accuracy %": [40.0, 55.0, 90.0], "lo": [33.0, 48.0, 85.0], "hi": [47.0, 62.0, 94.0],
                         "softmax %": [92.0, 92.0, 92.0]})


def test_matched_plot_puts_each_cell_at_its_safe_fractions_with_its_interval(tmp_path, drawn):
    table = _cells()
    pc.plot_matched(table, 40, tmp_path / "matched")
    fig, = drawn
    ax, = fig.axes
    crosses = [c.get_offsets()[0].tolist() for c in ax.collections if isinstance(c, PathCollection)]
    assert crosses == table[["top-40 safe %", "accuracy %"]].to_numpy().tolist()
    circles = [(line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines
               if line.get_marker() == "o" and len(line.get_xdata()) == 1]
    assert circles == list(zip(table["all-head safe %"], table["accuracy %"]))
    intervals = [tuple(map(tuple, seg)) for c in ax.collections if isinstance(c, LineCollection)
                 for seg in c.get_segments()]
    assert intervals == [((x, lo), (x, hi)) for x, lo, hi in zip(table["all-head safe %"], table["lo"], table["hi"])]
    softmax, = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert list(softmax.get_ydata()) == [92.0, 92.0]
    colours = {t.get_text(): h.get_color() for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert colours["p = 2"] != colours["p = 8"]


def test_substitution_plot_has_one_bar_per_recipe_top_to_bottom(tmp_path, drawn):
    table = pd.DataFrame({"recipe": ["softmax", "relu_p2_b0", "sigmoid_b0"], "accuracy %": [80.0, 12.5, 60.0],
                          "lo": [74.0, 8.0, 53.0], "hi": [85.0, 18.0, 66.0]})
    pc.plot_substitution(table, tmp_path / "sub")
    fig, = drawn
    ax, = fig.axes
    bars = sorted(ax.patches, key=lambda r: -r.get_y())
    assert [bar.get_width() for bar in bars] == table["accuracy %"].tolist()
    labels = {t.get_text(): t.get_position()[1] for t in ax.get_yticklabels()}
    assert sorted(labels, key=lambda k: -labels[k]) == table["recipe"].tolist()
    baseline, = ax.lines[-1:]
    assert list(baseline.get_xdata()) == [80.0, 80.0]


def test_ablation_plot_draws_top_bottom_and_random_against_k(tmp_path, drawn):
    table = pd.DataFrame({"k": [40, 5, 10], "top pp": [-60.0, -1.0, -20.0], "bottom pp": [0.0, 0.5, -1.0],
                          "random mean pp": [-5.0, 0.0, -2.0], "random sd pp": [3.0, 0.5, 1.0],
                          "random worst pp": [-10.0, -1.0, -4.0]})
    pc.plot_ablation(table, tmp_path / "ablation")
    fig, = drawn
    ax, = fig.axes
    lines = {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}
    ordered = table.sort_values("k")
    for label, column in (("top-K", "top pp"), ("bottom-K", "bottom pp"), ("random-K mean", "random mean pp"),
                          ("random-K worst", "random worst pp")):
        assert list(lines[label].get_xdata()) == [5, 10, 40]
        assert list(lines[label].get_ydata()) == ordered[column].tolist()
    assert (tmp_path / "ablation.png").is_file() and (tmp_path / "ablation.svg").is_file()
