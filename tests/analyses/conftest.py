"""Shared setup for the command tests: one tiny saved checkpoint that every test reads and none changes."""

from __future__ import annotations

import pytest

from checkpoints import save_checkpoint


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory):
    return save_checkpoint(tmp_path_factory.mktemp("ckpt"))
