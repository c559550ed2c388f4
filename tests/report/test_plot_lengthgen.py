"""Length-generalization figures draw, from a known table, one curve per variant whose points are the table's lengths
and scores (entropy and support in the dispersion figure), one panel per task with its training length dotted, and
write each figure as PNG and SVG."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnlab.report import plot_lengthgen as pl

LENGTHS = [64, 128, 256, 512]


def _long_table():
    """A row per task, variant and length, as the lengthgen study's accuracy table has them."""
    rows = []
    for t, (task, trained, metric) in enumerate([("copy", 64, "exact match"), ("2back", 128, "token accuracy")]):
        lengths = LENGTHS if task == "copy" else LENGTHS[1:]
        for v, variant in enumerate(["softmax", "entmax_a1.5", "asentmax"]):
            for i, length in enumerate(lengths):
                rows.append({"task": task, "variant": variant, "length": length, "multiple": length // trained,
                             "score": 100.0 - 10 * i * (v + 1) - t, "trained_at": trained, "metric": metric,
                             "answer_entropy": 0.5 + 0.1 * i + v, "answer_support": 2.0 ** (i + v)})
    return pd.DataFrame(rows)


def _curves(ax):
    return [line for line in ax.lines if line.get_marker() == "o"]


def test_run_accuracy_has_one_curve_per_variant_through_its_row(tmp_path, drawn):
    acc = pd.DataFrame({64: [100.0, 99.0], 128: [80.0, 95.5], 256: [20.0, 70.0], 512: [0.0, 41.0]},
                       index=pd.Index(["softmax", "entmax_a1.5"], name="variant"))
    png, svg = pl.plot_run_accuracy(acc, LENGTHS, "exact match (%)", "copy, trained at 64", tmp_path / "run")
    assert (png.name, svg.name) == ("run.png", "run.svg") and png.stat().st_size and svg.stat().st_size
    ax, = drawn[0].axes
    curves = _curves(ax)
    assert [line.get_label() for line in curves] == list(acc.index)
    for line, (_, row) in zip(curves, acc.iterrows()):
        assert list(line.get_xdata()) == LENGTHS and list(line.get_ydata()) == row.tolist()
    assert ax.get_xscale() == "log" and ax.get_ylim() == (-2, 102)
    assert (ax.get_ylabel(), ax.get_title()) == ("exact match (%)", "copy, trained at 64")


def test_task_accuracy_has_a_panel_per_task_a_curve_per_variant_and_the_training_length(tmp_path, drawn):
    acc = _long_table()
    png, svg = pl.plot_task_accuracy(acc, tmp_path / "accuracy")
    assert png.suffix == ".png" and svg.suffix == ".svg" and png.exists() and svg.exists()
    fig, = drawn
    assert len(fig.axes) == 2
    for ax, (task, part) in zip(fig.axes, acc.groupby("task", sort=False)):
        curves = _curves(ax)
        assert [line.get_label() for line in curves] == ["softmax", "entmax_a1.5", "asentmax"]
        for line, (_, rows) in zip(curves, part.groupby("variant", sort=False)):
            assert list(line.get_xdata()) == rows.length.tolist()
            assert list(line.get_ydata()) == rows.score.tolist()
        train, = [line for line in ax.lines if line.get_linestyle() == ":"]
        assert list(train.get_xdata()) == [part.trained_at.iloc[0]] * 2
        assert ax.get_title() == f"{task} (trained at {part.trained_at.iloc[0]})"
        assert ax.get_ylabel() == f"{part.metric.iloc[0]} (%)" and ax.get_xscale() == "log"
    # One legend for the figure: every panel has the same variants.
    assert fig.axes[0].get_legend() is not None and fig.axes[1].get_legend() is None


def test_task_dispersion_puts_entropy_above_support_per_task(tmp_path, drawn):
    acc = _long_table()
    pl.plot_task_dispersion(acc, tmp_path / "dispersion")
    fig, = drawn
    # subplots(2, tasks) lays the axes out row by row: entropy panels first, then support panels.
    tasks = list(acc.task.unique())
    top, bottom = fig.axes[:len(tasks)], fig.axes[len(tasks):]
    assert len(bottom) == len(tasks)
    for col, (task, part) in enumerate(acc.groupby("task", sort=False)):
        assert top[col].get_title() == task
        assert bottom[col].get_yscale() == "log" and top[col].get_yscale() == "linear"
        for panel, column in ((top[col], "answer_entropy"), (bottom[col], "answer_support")):
            curves = _curves(panel)
            assert len(curves) == 3
            for line, (_, rows) in zip(curves, part.groupby("variant", sort=False)):
                assert np.array_equal(line.get_xdata(), rows.length) and np.array_equal(line.get_ydata(), rows[column])


@pytest.mark.parametrize("plot", [pl.plot_task_accuracy, pl.plot_task_dispersion])
def test_a_single_task_gets_a_single_column(tmp_path, drawn, plot):
    acc = _long_table()
    plot(acc[acc.task == "copy"], tmp_path / "one")
    assert len(drawn[0].axes) == (1 if plot is pl.plot_task_accuracy else 2)
