"""The suite's property tests draw the same examples on every run (derandomized, no example database), unless
ATTNLAB_HYPOTHESIS=explore asks for fresh draws."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings


@pytest.mark.skipif(os.environ.get("ATTNLAB_HYPOTHESIS", "ci") != "ci", reason="an exploring run draws at random")
def test_the_default_profile_is_derandomized():
    assert settings.default.derandomize is True and settings.default.database is None
    assert settings.get_profile("explore").derandomize is False
