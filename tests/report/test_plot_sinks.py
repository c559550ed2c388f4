"""Sink figures draw each given map, mass and curve as given: one heat map per (row, column) on a shared scale per
kind, BOS and trigger outlined, a deep model's maps tiled by layer and head, one bar per head at its mass, one
printed value per (layer, head), a pair of loss bars per run with its zero-predictor tick, one line per run per
position with its null dashed."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.image import AxesImage

from attnlab.report import plot_sinks as ps


def _images(fig):
    return [(ax, image) for ax in fig.axes for image in ax.get_images() if isinstance(image, AxesImage)]


def test_heatmaps_one_per_cell_with_a_scale_per_kind_and_the_sink_outlined(tmp_path, drawn):
    rng = np.random.default_rng(0)
    rows, cols, length, trigger = ["softmax", "relu"], ["mean", "std"], 6, 4
    maps = {(r, c): rng.uniform(0, 0.3 if c == "std" else 1.7, (length, length)) for r in rows for c in cols}
    ps.plot_heatmaps(maps, rows, cols, trigger, tmp_path / "heat", title="T")
    (fig,) = drawn
    images = _images(fig)
    assert len(images) == len(rows) * len(cols)
    top_mean = max(maps[(r, "mean")].max() for r in rows)
    top_std = max(maps[(r, "std")].max() for r in rows)
    for (ax, image), key in zip(images, [(r, c) for r in rows for c in cols]):
        assert np.array_equal(image.get_array(), maps[key])
        assert image.get_clim() == (0.0, top_std if key[1] == "std" else top_mean)
        assert ax.get_title() == f"{key[0]}\n{key[1]}"
        bos, trig = [(p.get_x(), p.get_y(), p.get_width(), p.get_height()) for p in ax.patches]
        assert bos == (0.5, 0.5, 1, length) and trig == (0.5, trigger - 0.5, length, 1)
    assert len(fig.axes) == len(images) + 2, "one colour bar per kind"
    assert fig.get_suptitle() == "T"


def test_a_mean_map_below_one_keeps_the_scale_at_one(tmp_path, drawn):
    maps = {("a", "mean"): np.full((4, 4), 0.25)}
    ps.plot_heatmaps(maps, ["a"], ["mean"], 2, tmp_path / "h", title="t")
    ((_, image),) = _images(drawn[0])
    assert image.get_clim() == (0.0, 1.0)


def test_heat_mosaic_tiles_each_layer_and_head_with_a_scale_per_kind(tmp_path, drawn):
    rng = np.random.default_rng(1)
    layers, heads, length, trigger = 3, 2, 5, 4
    blocks = {
        "softmax mean": rng.uniform(0, 1.4, (layers, heads, length, length)),
        "softmax std": rng.uniform(0, 0.2, (layers, heads, length, length)),
        "relu mean": rng.uniform(0, 0.5, (layers, heads, length, length)),
    }
    ps.plot_heat_mosaic(blocks, trigger, tmp_path / "mosaic", title="M")
    (fig,) = drawn
    images = _images(fig)
    assert [ax.get_title() for ax, _ in images] == list(blocks)
    for (ax, image), (name, data) in zip(images, blocks.items()):
        tile = np.asarray(image.get_array().filled(np.nan))
        assert tile.shape == (layers * 6 - 1, heads * 6 - 1)
        for d in range(layers):
            for h in range(heads):
                assert np.array_equal(tile[6 * d : 6 * d + 5, 6 * h : 6 * h + 5], data[d, h]), (name, d, h)
        assert np.isnan(tile[5]).all() and np.isnan(tile[:, 5]).all()  # the gaps between maps
        kind = [b for n, b in blocks.items() if n.endswith("std") == name.endswith("std")]
        assert image.get_clim() == (0.0, max(1.0 if not name.endswith("std") else 0, max(b.max() for b in kind)))
        boxes = [(p.get_x(), p.get_y(), p.get_width(), p.get_height()) for p in ax.patches]
        assert len(boxes) == 2 * layers * heads
        assert (6 * 1 - 0.5, 6 * 2 - 0.5, 1, length) in boxes  # layer 3, head 2: BOS column
        assert (6 * 1 - 0.5, 6 * 2 - 0.5 + trigger - 1, length, 1) in boxes  # ... and its trigger row
        assert [t.get_text() for t in ax.get_yticklabels()] == ["layer 1", "layer 2", "layer 3"]
    assert len(fig.axes) == len(images) + 2 and fig.get_suptitle() == "M"


def test_linf_curves_draw_each_run_and_the_target(tmp_path, drawn):
    curves = {"a": (np.arange(1, 4), np.array([2.0, 0.5, 0.02])), "b": (np.arange(1, 3), np.array([1.0, 0.1]))}
    ps.plot_linf_curves(curves, 0.01, tmp_path / "linf")
    (ax,) = drawn[0].axes
    lines = ax.get_lines()
    assert [list(line.get_ydata()) for line in lines[:2]] == [[2.0, 0.5, 0.02], [1.0, 0.1]]
    assert list(lines[2].get_ydata()) == [0.01, 0.01] and ax.get_yscale() == "log"


def test_bos_mass_bars_are_the_masses_floored_and_coloured_by_group(tmp_path, drawn):
    labels = ["s L0H0", "s L0H1", "r L0H0", "r L0H1"]
    mass = [0.97, 0.5, 0.0, 2e-3]
    groups = ["softmax", "softmax", "relu", "relu"]
    ps.plot_bos_mass(labels, mass, groups, high=0.9, low=0.05, path=tmp_path / "bos")
    (fig,) = drawn
    (ax,) = fig.axes
    bars = [p for p in ax.patches if p.get_x() > -1 and p.get_width() == pytest.approx(0.8)]
    assert [b.get_height() for b in bars] == [max(m, 1e-6) for m in mass]
    colours = [b.get_facecolor() for b in bars]
    assert colours[0] == colours[1] != colours[2] == colours[3]
    assert [t.get_text() for t in ax.get_xticklabels()] == labels
    assert [t.get_text() for t in ax.texts] == [f"{m:.2g}" for m in mass]
    assert sorted(line.get_ydata()[0] for line in ax.lines) == [0.05, 0.9]


def test_loss_curves_one_line_per_run_and_the_zero_predictor(tmp_path, drawn):
    curves = {"softmax": (np.arange(5), np.linspace(1, 0.1, 5)), "relu": (np.arange(3), np.array([2.0, 1.0, 0.5]))}
    ps.plot_loss_curves(curves, zero=0.75, path=tmp_path / "loss")
    (ax,) = drawn[0].axes
    runs, zero = ax.lines[:-1], ax.lines[-1]
    assert [line.get_label() for line in runs] == list(curves)
    for line, (step, loss) in zip(runs, curves.values()):
        assert np.array_equal(line.get_xdata(), step) and np.array_equal(line.get_ydata(), loss)
    assert list(zero.get_ydata()) == [0.75, 0.75]


@pytest.mark.parametrize("skip", [0, 2])
def test_first_token_mass_prints_every_value_and_draws_each_layer_line(tmp_path, drawn, skip):
    mass = np.array([[0.95, 0.1, 0.02], [0.5, 0.61, 0.0], [0.33, 0.2, 0.9], [0.0, 1.0, 0.45]])
    lines = {"median head": np.median(mass, 1), "largest head": mass.max(1)}
    uniform = 1 / np.arange(5, 9)
    ps.plot_first_token_mass(mass, lines, uniform, 0.5, skip, tmp_path / "first", title="m")
    (fig,) = drawn
    heat, side = fig.axes[:2]
    ((_, image),) = _images(fig)
    assert np.array_equal(image.get_array(), mass)
    printed = {(t.get_position()[1], t.get_position()[0]): t.get_text() for t in heat.texts}
    assert printed == {(layer, head): f"{v:.2f}" for (layer, head), v in np.ndenumerate(mass)}
    drawn_lines = {line.get_label(): line for line in side.lines}
    for label, values in lines.items():
        assert np.array_equal(drawn_lines[label].get_xdata(), values)
        assert list(drawn_lines[label].get_ydata()) == list(range(4))
    assert np.array_equal(drawn_lines["uniform share"].get_xdata(), uniform)
    assert list(drawn_lines["sink threshold 0.5"].get_xdata()) == [0.5, 0.5]
    shaded = [p for p in side.patches if p.get_label() == "left out of the verdict"]
    assert len(shaded) == (1 if skip else 0)


def test_masking_bars_are_each_runs_losses_with_its_zero_and_tolerance_ticks(tmp_path, drawn):
    labels, loss, masked, zero = ["softmax s0", "relu s0"], [2e-6, 1e-12], [1.2, 3e-6], [0.12, 0.13]
    ps.plot_masking(labels, loss, masked, zero, 0.01, tmp_path / "masking", title="T")
    (ax,) = drawn[0].axes
    bars = sorted((p for p in ax.patches if p.get_width() == pytest.approx(0.4)), key=lambda b: b.get_x())
    assert [b.get_height() for b in bars] == [2e-6, 1.2, 1e-9, 3e-6]  # pairs per run, floored at 1e-9
    assert bars[0].get_facecolor() == bars[2].get_facecolor() != bars[1].get_facecolor()
    ticks = [c for c in ax.collections]
    assert [seg[0][1] for seg in ticks[0].get_segments()] == zero
    assert [seg[0][1] for seg in ticks[1].get_segments()] == pytest.approx([0.0012, 0.0013])
    assert [t.get_text() for t in ax.get_xticklabels()] == labels


def test_positions_one_solid_line_per_run_its_null_dashed_and_the_threshold(tmp_path, drawn):
    pos = np.arange(2, 16)
    curves = {"softmax 2x2 s0": (pos, np.ones(14)), "softmax 2x2 s1": (pos, np.linspace(0.5, 1, 14))}
    nulls = {"softmax 2x2 s0": (pos, np.zeros(14))}
    ps.plot_positions(curves, nulls, 0.9, tmp_path / "positions", title="T")
    (ax,) = drawn[0].axes
    solid = [line for line in ax.lines if line.get_linestyle() == "-"]
    dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert [list(line.get_ydata()) for line in solid] == [list(c[1]) for c in curves.values()]
    assert sorted(line.get_ydata()[0] for line in dashed) == [0.0, 0.9]
    assert dashed[0].get_color() == solid[0].get_color()
