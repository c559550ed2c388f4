"""Concentration figures put each head, row, cell and length where its table says and count what they cannot draw."""

from __future__ import annotations

import math

import matplotlib.colors
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PathCollection

from attnlab.report import plot_concentration as pc


def test_phase_plot_has_a_panel_per_bias_a_curve_per_degree_and_a_point_per_head(tmp_path, drawn):
    heads = pd.DataFrame(
        {
            "b": [0.0, 0.0, 0.0, 1.5, 1.5],
            "layer": [0, 1, 2, 0, 1],
            "head": [3, 0, 1, 2, 2],
            "med rho": [0.1, 0.5, 0.9, 0.3, 0.05],
            "med a_act": [4.0, 30.0, 2.0, 8.0, 100.0],
        }
    )
    degrees = (2, 4, 8)
    pc.plot_phase(heads, degrees, tmp_path / "phase")
    (fig,) = drawn
    assert len(fig.axes) == 2
    for ax, b in zip(fig.axes, (0.0, 1.5)):
        part = heads[heads["b"] == b]
        assert ax.get_title() == f"b = {b}"
        assert len(ax.lines) == len(degrees)
        for line, p in zip(ax.lines, degrees):
            rho = np.asarray(line.get_xdata())
            assert np.allclose(line.get_ydata(), (1 - rho) ** -p)
        (points,) = ax.collections
        assert np.allclose(points.get_offsets(), part[["med rho", "med a_act"]].to_numpy())
        assert [t.get_text() for t in ax.texts] == [f"{l}.{h}" for l, h in zip(part["layer"], part["head"])]
        assert ax.get_ylim()[1] == pytest.approx(max(2 * part["med a_act"].max(), 10.0))


def test_p_star_histogram_shows_finite_rows_and_counts_the_rest_in_the_title(tmp_path, drawn):
    values = {
        "0": np.array([0.0, 0.0, 1.5, 3.0, 6.0, 12.0, math.inf, math.nan]),
        "auto": np.array([math.inf, math.inf, 0.7]),
    }
    pc.plot_p_star(values, (2, 16), tmp_path / "pstar")
    (fig,) = drawn
    for ax, (b, v) in zip(fig.axes, values.items()):
        finite = v[np.isfinite(v) & (v > 0)]
        zero, inf = int((v == 0).sum()), int(np.isinf(v).sum())
        assert ax.get_title() == f"b = {b}: {len(finite)} rows shown; {zero} at p* = 0, {inf} at p* = inf"
        assert sum(bar.get_height() for bar in ax.patches) == len(finite)
        assert [line.get_xdata()[0] for line in ax.lines] == [1.0, 4.0]  # log2 of the degrees


def test_phase_plot_colours_each_head_by_its_type_and_calls_the_rest_untyped(tmp_path, drawn):
    heads = pd.DataFrame(
        {
            "b": ["0", "0", "0", "auto"],
            "layer": [0, 0, 1, 1],
            "head": [0, 1, 0, 1],
            "med rho": [0.1, 0.5, 0.9, 0.3],
            "med a_act": [4.0, 30.0, 2.0, 8.0],
        }
    )
    types = {(0, 0): "sink", (0, 1): "diffuse", (1, 1): "sink"}  # (1, 0) is missing: untyped
    pc.plot_phase(heads, (2, 4), tmp_path / "phase", types=types)
    (fig,) = drawn
    for ax, (b, want) in zip(
        fig.axes,
        {
            "0": {"sink head": [(0.1, 4.0)], "diffuse head": [(0.5, 30.0)], "untyped head": [(0.9, 2.0)]},
            "auto": {"sink head": [(0.3, 8.0)]},
        }.items(),
    ):
        got = {c.get_label(): [tuple(o) for o in c.get_offsets()] for c in ax.collections}
        assert got == want, b
        colours = {c.get_label(): tuple(c.get_facecolor()[0]) for c in ax.collections}
        assert len(set(colours.values())) == len(colours)
        curve_colours = {tuple(matplotlib.colors.to_rgba(line.get_color())) for line in ax.lines}
        assert not curve_colours & set(colours.values())  # a head's colour is never a boundary's
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "A(1-rho)^2 = 1",
        "A(1-rho)^4 = 1",
        "sink head",
        "diffuse head",
        "untyped head",
    ]


def test_bound_scatter_counts_every_row_in_its_quadrant_and_draws_a_seeded_sample(tmp_path, drawn):
    rng = np.random.default_rng(3)
    p_star = np.exp(rng.normal(1.0, 2.0, 500))
    s_p = np.exp(rng.normal(0.0, 2.0, 500))
    p_star[:7], p_star[7:10], p_star[10] = 0.0, math.inf, math.nan  # off the x axis, and unknown
    s_p[20:22], s_p[30] = 0.0, math.nan  # off the y axis, and unknown
    pc.plot_bound({"0": p_star, "auto": p_star[::-1]}, {"0": s_p, "auto": s_p}, 2, tmp_path / "bound", max_points=100)
    (fig,) = drawn
    for ax, x in zip(fig.axes, (p_star, p_star[::-1])):
        known = ~np.isnan(x) & ~np.isnan(s_p)
        pred, meas = 2 >= x[known], s_p[known] < 1
        want = {"certified safe": pred & meas, "FN": pred & ~meas, "FP": ~pred & meas, "agree unsafe": ~pred & ~meas}
        got = dict(t.get_text().split("\n") for t in ax.texts)
        assert got == {k: str(int(v.sum())) for k, v in want.items()}
        assert sum(map(int, got.values())) == 498
        (points,) = ax.collections
        drawn_xy = points.get_offsets()
        assert len(drawn_xy) == 100
        pairs = set(zip(x[known], s_p[known]))
        assert all((a, b) in pairs and 0 < a < math.inf and b > 0 for a, b in drawn_xy)
        off = {
            "p* = 0": int((x[known] == 0).sum()),
            "p* = inf": int(np.isinf(x[known]).sum()),
            "S_p = 0 or inf": int((np.isfinite(x[known]) & (x[known] > 0) & (s_p[known] == 0)).sum()),
        }
        assert ax.get_title().endswith(", ".join(f"{n} at {k}" for k, n in off.items()))
        assert f"a random 100 of {int(known.sum()) - sum(off.values())})" in ax.get_title()
        assert [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--"][0] == 2
    first = fig.axes[0].collections[0].get_offsets().copy()
    pc.plot_bound({"0": p_star}, {"0": s_p}, 2, tmp_path / "again", max_points=100)
    assert np.array_equal(drawn[-1].axes[0].collections[0].get_offsets(), first)


def test_unsafe_by_length_draws_a_line_and_a_wilson_band_per_degree_and_bias(tmp_path, drawn):
    table = pd.DataFrame(
        {
            "L": [512, 256, 256, 512, 1024, 1024],
            "p": [2, 2, 2, 2, 2, 2],
            "b": ["0", "0", "auto", "auto", "0", "auto"],
            "unsafe %": [60.0, 50.0, 80.0, 85.0, 70.0, 90.0],
            "unsafe lo": [55, 45, 75, 80, 65, 86.0],
            "unsafe hi": [65, 55, 84, 89, 74, 93.0],
        }
    )
    pc.plot_unsafe_by_length(table, tmp_path / "lengths")
    (fig,) = drawn
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    assert [line.get_label() for line in ax.lines] == ["p = 2, b = 0", "p = 2, b = auto"]
    for line, band, b in zip(ax.lines, ax.collections, ("0", "auto")):
        part = table[table["b"] == b].sort_values("L")
        assert list(line.get_xdata()) == [256, 512, 1024] and list(line.get_ydata()) == part["unsafe %"].tolist()
        edge = band.get_paths()[0].vertices
        assert set(map(tuple, edge)) >= set(zip(part["L"], part["unsafe lo"])) | set(zip(part["L"], part["unsafe hi"]))


def _cells():
    return pd.DataFrame(
        {
            "p": [2, 2, 8],
            "all-head safe %": [10.0, 30.0, 80.0],
            "top-40 safe %": [5.0, 20.0, 60.0],
            "accuracy %": [40.0, 55.0, 90.0],
            "lo": [33.0, 48.0, 85.0],
            "hi": [47.0, 62.0, 94.0],
            "softmax %": [92.0, 92.0, 92.0],
        }
    )


def test_matched_plot_puts_each_cell_at_its_safe_fractions_with_its_interval(tmp_path, drawn):
    table = _cells()
    pc.plot_matched(table, 40, tmp_path / "matched")
    (fig,) = drawn
    (ax,) = fig.axes
    crosses = [c.get_offsets()[0].tolist() for c in ax.collections if isinstance(c, PathCollection)]
    assert crosses == table[["top-40 safe %", "accuracy %"]].to_numpy().tolist()
    circles = [
        (line.get_xdata()[0], line.get_ydata()[0])
        for line in ax.lines
        if line.get_marker() == "o" and len(line.get_xdata()) == 1
    ]
    assert circles == list(zip(table["all-head safe %"], table["accuracy %"]))
    intervals = [
        tuple(map(tuple, seg)) for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments()
    ]
    assert intervals == [((x, lo), (x, hi)) for x, lo, hi in zip(table["all-head safe %"], table["lo"], table["hi"])]
    (softmax,) = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert list(softmax.get_ydata()) == [92.0, 92.0]
    colours = {t.get_text(): h.get_color() for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert colours["p = 2"] != colours["p = 8"]


def test_substitution_plot_has_one_bar_per_recipe_top_to_bottom(tmp_path, drawn):
    table = pd.DataFrame(
        {
            "recipe": ["softmax", "relu_p2_b0", "sigmoid_b0"],
            "accuracy %": [80.0, 12.5, 60.0],
            "lo": [74.0, 8.0, 53.0],
            "hi": [85.0, 18.0, 66.0],
        }
    )
    pc.plot_substitution(table, tmp_path / "sub")
    (fig,) = drawn
    (ax,) = fig.axes
    bars = sorted(ax.patches, key=lambda r: -r.get_y())
    assert [bar.get_width() for bar in bars] == table["accuracy %"].tolist()
    labels = {t.get_text(): t.get_position()[1] for t in ax.get_yticklabels()}
    assert sorted(labels, key=lambda k: -labels[k]) == table["recipe"].tolist()
    (baseline,) = ax.lines[-1:]
    assert list(baseline.get_xdata()) == [80.0, 80.0]


def test_ablation_plot_draws_top_bottom_and_random_against_k(tmp_path, drawn):
    table = pd.DataFrame(
        {
            "k": [40, 5, 10],
            "top pp": [-60.0, -1.0, -20.0],
            "bottom pp": [0.0, 0.5, -1.0],
            "random mean pp": [-5.0, 0.0, -2.0],
            "random sd pp": [3.0, 0.5, 1.0],
            "random worst pp": [-10.0, -1.0, -4.0],
        }
    )
    pc.plot_ablation(table, tmp_path / "ablation")
    (fig,) = drawn
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}
    ordered = table.sort_values("k")
    for label, column in (
        ("top-K", "top pp"),
        ("bottom-K", "bottom pp"),
        ("random-K mean", "random mean pp"),
        ("random-K worst", "random worst pp"),
    ):
        assert list(lines[label].get_xdata()) == [5, 10, 40]
        assert list(lines[label].get_ydata()) == ordered[column].tolist()
    assert (tmp_path / "ablation.png").is_file() and (tmp_path / "ablation.svg").is_file()
