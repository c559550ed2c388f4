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
                rows.append(
                    {
                        "task": task,
                        "variant": variant,
                        "length": length,
                        "multiple": length // trained,
                        "score": 100.0 - 10 * i * (v + 1) - t,
                        "trained_at": trained,
                        "metric": metric,
                        "answer_entropy": 0.5 + 0.1 * i + v,
                        "answer_support": 2.0 ** (i + v),
                    }
                )
    return pd.DataFrame(rows)


def _curves(ax):
    return [line for line in ax.lines if line.get_marker() == "o"]


def test_run_accuracy_has_one_curve_per_variant_through_its_row(tmp_path, drawn):
    acc = pd.DataFrame(
        {64: [100.0, 99.0], 128: [80.0, 95.5], 256: [20.0, 70.0], 512: [0.0, 41.0]},
        index=pd.Index(["softmax", "entmax_a1.5"], name="variant"),
    )
    png, svg = pl.plot_run_accuracy(acc, LENGTHS, "exact match (%)", "copy, trained at 64", tmp_path / "run")
    assert (png.name, svg.name) == ("run.png", "run.svg") and png.stat().st_size and svg.stat().st_size
    (ax,) = drawn[0].axes
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
    (fig,) = drawn
    assert len(fig.axes) == 2
    for ax, (task, part) in zip(fig.axes, acc.groupby("task", sort=False)):
        curves = _curves(ax)
        assert [line.get_label() for line in curves] == ["softmax", "entmax_a1.5", "asentmax"]
        for line, (_, rows) in zip(curves, part.groupby("variant", sort=False)):
            assert list(line.get_xdata()) == rows.length.tolist()
            assert list(line.get_ydata()) == rows.score.tolist()
        (train,) = [line for line in ax.lines if line.get_linestyle() == ":"]
        assert list(train.get_xdata()) == [part.trained_at.iloc[0]] * 2
        assert ax.get_title() == f"{task} (trained at {part.trained_at.iloc[0]})"
        assert ax.get_ylabel() == f"{part.metric.iloc[0]} (%)" and ax.get_xscale() == "log"
    # One legend for the figure: every panel has the same variants.
    assert fig.axes[0].get_legend() is not None and fig.axes[1].get_legend() is None


def test_task_dispersion_puts_entropy_above_support_per_task(tmp_path, drawn):
    acc = _long_table()
    pl.plot_task_dispersion(acc, tmp_path / "dispersion")
    (fig,) = drawn
    # subplots(2, tasks) lays the axes out row by row: entropy panels first, then support panels.
    tasks = list(acc.task.unique())
    top, bottom = fig.axes[: len(tasks)], fig.axes[len(tasks) :]
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


def _head_table(seeds=None):
    """A row per variant, length, layer and head (and seed), as studies.lengthgen.experiment.dispersion_table writes it."""
    rows = []
    for v, variant in enumerate(["softmax", "entmax_a1.5"]):
        for seed in seeds or [None]:
            for length in LENGTHS[:3]:
                for layer in range(2):
                    for head in range(2):
                        spread = length if variant == "softmax" else 2 + head
                        rows.append(
                            {
                                "variant": variant,
                                "length": length,
                                "log_length": np.log(length),
                                "layer": layer,
                                "head": head,
                                "entropy": 1.0 + v,
                                "support": 3.0,
                                "answer_entropy": np.log(spread) - 0.1 * layer + 0.01 * (seed or 0),
                                "answer_support": float(spread) / (1 + layer),
                            }
                            | ({} if seed is None else {"seed": seed})
                        )
    return pd.DataFrame(rows)


def test_head_dispersion_draws_a_line_per_head_against_length_per_variant(tmp_path, drawn):
    table = _head_table()
    png, svg = pl.plot_head_dispersion(table, tmp_path / "heads", "copy: answer rows per head")
    assert (png.name, svg.name) == ("heads.png", "heads.svg") and png.stat().st_size and svg.stat().st_size
    (fig,) = drawn
    assert fig.get_suptitle() == "copy: answer rows per head"
    top, bottom = fig.axes[:2], fig.axes[2:]
    assert [ax.get_title() for ax in top] == ["softmax", "entmax_a1.5"] and len(bottom) == 2
    for col, (_, part) in enumerate(table.groupby("variant", sort=False)):
        for panel, column, ceiling in ((top[col], "answer_entropy", np.log), (bottom[col], "answer_support", float)):
            assert panel.get_xscale() == "log"
            assert panel.get_yscale() == ("log" if column == "answer_support" else "linear")
            curves = _curves(panel)
            assert [line.get_label() for line in curves] == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"]
            for line, (_, rows) in zip(curves, part.groupby(["layer", "head"])):
                assert list(line.get_xdata()) == rows.length.tolist()
                assert np.allclose(line.get_ydata(), rows[column])
            (dotted,) = [line for line in panel.lines if line.get_linestyle() == ":"]
            assert np.allclose(dotted.get_ydata(), [ceiling(n) for n in LENGTHS[:3]])
    # Rows share the y axis so variants compare; one legend for the figure, a colour per head.
    assert top[0].get_shared_y_axes().joined(top[0], top[1])
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == 5


def test_head_dispersion_keeps_seeds_apart(tmp_path, drawn):
    table = _head_table(seeds=[0, 1])
    pl.plot_head_dispersion(table, tmp_path / "seeds", "two seeds")
    curves = _curves(drawn[0].axes[0])
    assert len(curves) == 8 and curves[0].get_label() == "seed 0 L0 H0" and curves[4].get_label() == "seed 1 L0 H0"
    assert curves[0].get_linestyle() != curves[4].get_linestyle() and curves[0].get_color() == curves[4].get_color()


@pytest.mark.parametrize(
    "table,match",
    [
        (_head_table().drop(columns="answer_support"), r"lacks columns \['answer_support'\]"),
        (_head_table().iloc[:0], "has no rows"),
        (pd.concat([_head_table(), _head_table().iloc[:1]]), "more than one row for"),
    ],
)
def test_head_dispersion_refuses_tables_it_cannot_draw(tmp_path, table, match):
    with pytest.raises(ValueError, match=match):
        pl.plot_head_dispersion(table, tmp_path / "bad", "bad")
