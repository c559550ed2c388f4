"""Shared setup of the card tests: the card ``attnlab card`` writes of one tiny checkpoint under a 2-prompt plan,
made once for the session."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import NamedTuple

import pytest

from attnlab.cards import build as cards
from attnlab.cli import main
from cards.test_card import TINY
from checkpoints import save_checkpoint


class Written(NamedTuple):
    checkpoint: Path
    out: Path
    text: str
    data: dict


@pytest.fixture(scope="session")
def written(tmp_path_factory) -> Written:
    folder = tmp_path_factory.mktemp("card")
    checkpoint = save_checkpoint(folder / "ckpt")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(cards.PLANS, "quick", dataclasses.replace(cards.PLANS["quick"], **TINY))
        argv = ["card", str(checkpoint), "--target-length", "2048", "--out", str(folder / "out"), "--no-progress"]
        assert main(argv) == 0
    text = (folder / "out" / "card.json").read_text(encoding="utf-8")
    return Written(checkpoint, folder / "out", text, json.loads(text, parse_constant=pytest.fail))
