"""save_figure writes a PNG and SVG pair that PIL and an XML parser read, atomically and closing the figure; the
row-weights figure draws one panel per map with the weights it was given."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.artist import Artist
from PIL import Image

from attnlab.report.figures import plot_row_weights, save_figure


class _Broken(Artist):
    def draw(self, renderer):
        raise RuntimeError("cannot draw")


def test_pair_is_readable_has_the_asked_size_and_the_figure_is_closed(tmp_path):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    png, svg = save_figure(fig, tmp_path / "deep" / "f.pdf", dpi=50)
    assert (png, svg) == (tmp_path / "deep" / "f.png", tmp_path / "deep" / "f.svg")
    with Image.open(png) as image:
        assert image.format == "PNG" and image.size == (150, 100)
    assert ET.parse(svg).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert not plt.fignum_exists(fig.number)
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["f.png", "f.svg"]


def test_a_figure_that_fails_to_draw_leaves_the_old_pair_and_no_temporary(tmp_path):
    fig, ax = plt.subplots()
    save_figure(fig, tmp_path / "f")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    fig, ax = plt.subplots()
    ax.add_artist(_Broken())
    with pytest.raises(RuntimeError, match="cannot draw"):
        save_figure(fig, tmp_path / "f")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert not plt.fignum_exists(fig.number)


def test_row_weights_draws_the_scores_and_one_panel_per_map(tmp_path, drawn):
    row = np.array([2.0, -1.0, 0.5, 3.0, 0.0, -2.0])
    masked = np.array([False, False, True, False, False, True])
    weights = {
        "softmax": [0.2, 0.1, 0.0, 0.6, 0.1, 0.0],
        "sparsemax": [0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
        "relu": [0.3, 0.0, 0.0, 0.7, 0.0, 0.0],
        "entmax": [0.25, 0.0, 0.0, 0.75, 0.0, 0.0],
    }
    png, svg = plot_row_weights(row, weights, tmp_path / "w", masked=masked, cols=3)
    assert png.is_file() and svg.is_file()
    (fig,) = drawn
    top, *panels = fig.axes
    heights = [bar.get_height() for bar in top.patches]
    assert heights == [*row[~masked], *row[masked]]
    assert len(panels) == len(weights)
    for ax, (name, w) in zip(panels, weights.items()):
        bars = [p for p in ax.patches if p.get_width() == pytest.approx(0.8)]
        assert [b.get_height() for b in bars] == w
        nonzero = sum(v != 0 for v in w)
        assert ax.get_title().startswith(f"{name}   (nonzero {nonzero}/4, sum ")
        # a grey tick marks each allowed key whose weight is exactly 0
        (ticks,) = [line for line in ax.lines if line.get_marker() == "|"]
        assert list(ticks.get_xdata()) == [j for j in range(6) if w[j] == 0 and not masked[j]]
        assert len([p for p in ax.patches if p.get_width() != pytest.approx(0.8)]) == masked.sum()
