"""Shared setup of the report tests: the figures that the plot functions hand to save_figure."""

from __future__ import annotations

import importlib
import pkgutil
import xml.etree.ElementTree as ET

import pytest
from PIL import Image

import attnlab.report
from attnlab.report import figures


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

    for info in pkgutil.iter_modules(attnlab.report.__path__):
        module = importlib.import_module(f"attnlab.report.{info.name}")
        if getattr(module, "save_figure", None) is save:
            monkeypatch.setattr(module, "save_figure", keep)
    return kept
