"""Every name users were given before the package layout still imports, and is the object its new home defines."""

from __future__ import annotations

import importlib

import pytest

import attnlab

# (where users import it, the name, where it lives now)
MOVED = [
    ("attnlab.report.sections", "Finding", "attnlab.findings.finding"),
    ("attnlab.report.sections", "Null", "attnlab.findings.finding"),
    ("attnlab.report.sections", "MDE", "attnlab.findings.finding"),
    ("attnlab.report.sections", "VERDICTS", "attnlab.findings.finding"),
    ("attnlab.studies.verdict", "decide", "attnlab.findings.verdict"),
    ("attnlab.studies.verdict", "false_positive_rate", "attnlab.findings.verdict"),
    ("attnlab.hooks.fetch", "register", "attnlab.loading.fetch"),
    ("attnlab.hooks.fetch", "RealModel", "attnlab.loading.fetch"),
    ("attnlab.hooks", "load_model", "attnlab.loading.load"),
    ("attnlab.hooks", "provenance", "attnlab.loading.load"),
    ("attnlab.hooks", "LoadError", "attnlab.loading.common"),
    ("attnlab.site", "attend", "attnlab.site.blockwise"),
    ("attnlab.site", "ScoreBlock", "attnlab.site.spec"),
    ("attnlab.site", "causal_mask", "attnlab.site.tiles"),
    ("attnlab.cards", "PLANS", "attnlab.cards.build"),
    ("attnlab.studies.sinks", "theorem3_model", "attnlab.studies.sinks.measures"),
    ("attnlab.report.readback", "ReadBackError", "attnlab.readback"),
    ("attnlab.report.readback", "check", "attnlab.readback"),
    ("attnlab.report.readback", "read_object", "attnlab.readback"),
    ("attnlab.report.readback", "read_record", "attnlab.readback"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED)
def test_an_old_import_gives_the_object_of_its_new_home(old, name, new):
    assert getattr(importlib.import_module(old), name) is getattr(importlib.import_module(new), name)


def test_the_top_level_api_and_the_site_exports_are_whole():
    assert attnlab.card is importlib.import_module("attnlab.cards.build").card
    for name in ("audit", "substitute", "heads", "sinks", "row_stats"):
        assert getattr(attnlab, name) is getattr(importlib.import_module("attnlab.api.entry"), name)
    site = importlib.import_module("attnlab.site")
    assert all(hasattr(site, name) for name in site.__all__) and callable(site.attend)
