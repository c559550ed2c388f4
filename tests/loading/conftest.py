"""Shared setup of the loading tests: an empty attnlab cache of the test's own (``ATTNLAB_CACHE``)."""

from __future__ import annotations

import pytest


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """The cache conversions and fetches write into, empty and private to the test."""
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"
