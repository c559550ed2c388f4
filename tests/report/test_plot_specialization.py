"""The specialization figure draws, from a known curves table, one panel per probe with each run's curve over steps
(solid control, dashed intervention, one colour per architecture), a dotted line at each release step and the release
rule's readings as dots on the lower-copy panel, as PNG and SVG."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnlab.report import plot_specialization as ps

PROBES = ("val_loss", "upper_entropy", "upper_logit", "upper_qk_sigma_max", "dppl_zero_qk", "lower_copy_excess")
RUNS = (("gelu", "control"), ("gelu", "intervention"), ("swiglu", "control"), ("swiglu", "intervention"))
LABELS = [f"{arch} {arm}" for arch, arm in RUNS]


def _curves():
    """A row per run and step, as the specialization study's curves table has them (one seed)."""
    rng = np.random.default_rng(0)
    steps = [0, 50, 100, 150]
    rows = [
        {
            "run": f"{arch}_{arm}_seed0",
            "arch": arch,
            "arm": arm,
            "seed": 0,
            "step": step,
            "tokens": 1000 * step,
            **{p: float(rng.uniform(0, 3)) for p in PROBES},
        }
        for arch, arm in RUNS
        for step in steps
    ]
    return pd.DataFrame(rows)


def test_one_panel_per_probe_with_each_runs_curve_over_steps(tmp_path, drawn):
    curves = _curves()
    png, svg = ps.plot_probe_curves(curves, PROBES, {"gelu": 50, "swiglu": 100}, tmp_path / "curves")
    assert (png.name, svg.name) == ("curves.png", "curves.svg") and png.exists() and svg.exists()
    (fig,) = drawn
    assert len(fig.axes) == 6
    for ax, probe in zip(fig.axes, PROBES):
        assert ax.get_title() == ps.LABELS[probe] and ax.get_xlabel() == "step"
        runs = [line for line in ax.lines if line.get_linestyle() != ":"]
        assert [line.get_label() for line in runs] == LABELS
        for line, (arch, arm) in zip(runs, RUNS):
            part = curves[(curves.arch == arch) & (curves.arm == arm)]
            assert list(line.get_xdata()) == part.step.tolist() and list(line.get_ydata()) == part[probe].tolist()


def test_arms_are_told_by_line_style_and_ffns_by_colour(tmp_path, drawn):
    ps.plot_probe_curves(_curves(), PROBES, {}, tmp_path / "c")
    runs = {line.get_label(): line for line in drawn[0].axes[0].lines}
    assert [runs[label].get_linestyle() for label in LABELS] == ["-", "--", "-", "--"]
    colours = [runs[label].get_color() for label in LABELS]
    # one colour per architecture, in the order they first appear
    assert colours[0] == colours[1] == ps.COLORS[0] and colours[2] == colours[3] == ps.COLORS[1]


@pytest.mark.parametrize("released", [{}, {"gelu": 50}, {"gelu": 50, "swiglu": 100}])
def test_each_release_is_a_dotted_line_in_its_ffns_colour_on_every_panel(tmp_path, drawn, released):
    ps.plot_probe_curves(_curves(), PROBES, released, tmp_path / "c")
    for ax in drawn[0].axes:
        dotted = [line for line in ax.lines if line.get_linestyle() == ":"]
        colour = {"gelu": ps.COLORS[0], "swiglu": ps.COLORS[1]}
        assert [(line.get_xdata()[0], line.get_color()) for line in dotted] == [
            (step, colour[arch]) for arch, step in released.items()
        ]


def test_the_rule_s_readings_are_dots_of_their_excess_on_the_lower_copy_panel(tmp_path, drawn):
    readings = pd.DataFrame(
        [
            {
                "run": f"gelu_{arm}_seed0",
                "arch": "gelu",
                "arm": arm,
                "step": step,
                "lower_copy": 0.02 + 0.001 * step,
                "lower_copy_chance": 0.02,
            }
            for arm in ("control", "intervention")
            for step in (3, 6, 9)
        ]
    )
    ps.plot_probe_curves(_curves(), PROBES, {}, tmp_path / "c", readings=readings)
    panels = dict(zip(PROBES, drawn[0].axes))
    dots = [line for line in panels["lower_copy_excess"].lines if line.get_marker() == "."]
    assert len(dots) == 2 and list(dots[0].get_xdata()) == [3, 6, 9]
    assert list(dots[0].get_ydata()) == pytest.approx([0.003, 0.006, 0.009])
    assert not any(line.get_marker() == "." for line in panels["val_loss"].lines)
