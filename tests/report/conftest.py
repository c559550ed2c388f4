"""Shared setup of the report tests: the figures that the plot functions hand to save_figure."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from PIL import Image

from attnlab.report import figures, plot_concentration, plot_sinks, plot_temperature


@pytest.fixture
def drawn(monkeypatch):
    """The figures any report module saves, kept for inspection; each is still saved and closed, and its PNG
    and SVG files are read back before the plot function returns."""
    kept = []
    save = figures.save_figure

    def keep(fig, path, dpi=120):
        kept.append(fig)
        png, svg = save(fig, path, dpi=dpi)
        with Image.open(png) as image:
            image.verify()
        ET.parse(svg)
        return png, svg

    for module in (figures, plot_concentration, plot_sinks, plot_temperature):
        monkeypatch.setattr(module, "save_figure", keep)
    return kept
