"""The cross-model figure draws each measured model's point and interval and each published value where its suite is."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnlab.report import plot_concentration as pc


def test_each_model_is_drawn_at_its_suites_with_its_interval_and_the_published_ones_hollow(tmp_path, drawn):
    measured = pd.DataFrame(
        {
            "model": ["_ckpt", "_ckpt", "other"],
            "suite": ["niah", "induction", "induction"],
            "unsafe %": [90.0, 60.0, 20.0],
            "unsafe lo": [80.0, np.nan, 15.0],  # a bound of fewer than two prompts: no bar below
            "unsafe hi": [95.0, np.nan, 26.0],
        }
    )
    published = pd.DataFrame(
        {"model": ["Llama-3.2-1B", "Llama-3.2-1B"], "suite": ["induction", "copying"], "unsafe %": [19.6, 30.2]}
    )
    png, svg = pc.plot_unsafe_beside_published(measured, published, tmp_path / "figure")
    assert png.stat().st_size > 0 and svg.stat().st_size > 0
    (fig,) = drawn
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["niah", "induction", "copying"]
    # a label starting with "_" is shown all the same
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["_ckpt", "other", "Llama-3.2-1B (published)"]
    (hollow,) = [line for line in ax.get_lines() if line.get_markerfacecolor() == "none"]
    assert hollow.get_ydata().tolist() == [19.6, 30.2] and hollow.get_xdata()[1] > 1.5  # at induction, copying
    points = [bars.lines[0] for bars in ax.containers]  # one error-bar container per measured model
    assert [line.get_ydata().tolist() for line in points] == [[90.0, 60.0], [20.0]]
    (_, _, (spans,)), (_, _, (other,)) = (bars.lines for bars in ax.containers)
    assert [s[:, 1].tolist() for s in spans.get_segments()] == [[80.0, 95.0], [60.0, 60.0]]
    assert [s[:, 1].tolist() for s in other.get_segments()] == [[15.0, 26.0]]
