"""The documentation's Python card example runs as printed: ``attnlab.card(model, tok).save(dir)`` writes the page,
a schema-valid card.json and card.md (on a tiny checkpoint under a 2-prompt plan; on SmolLM2 itself when slow tests
run)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jsonschema
import pytest

from attnlab.cards import SCHEMA_FILE
from attnlab.cards import build as cards
from cards.test_card import TINY
from checkpoints import save_checkpoint

PAGE = Path(__file__).resolve().parents[2] / "docs" / "checkpoints.md"


def _example() -> str:
    (code,) = [
        c for c in re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL) if ".save(" in c
    ]
    return code


def _check(folder: Path) -> None:
    assert {"index.html", "card.json", "card.md", "head_types.png"} <= {p.name for p in folder.iterdir()}
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.validate(json.loads((folder / "card.json").read_text(encoding="utf-8")), schema)


def test_the_card_example_saves_page_card_json_and_card_md(tmp_path, monkeypatch, capsys):
    checkpoint = save_checkpoint(tmp_path / "ckpt")
    monkeypatch.setitem(cards.PLANS, "quick", dataclasses.replace(cards.PLANS["quick"], **TINY))
    monkeypatch.chdir(tmp_path)
    code = _example()
    assert code.count('"smollm2"') == 1
    exec(code.replace('"smollm2"', repr(str(checkpoint))), {})
    _check(tmp_path / "runs" / "card")
    printed = capsys.readouterr().out
    assert printed.startswith("Card(") and printed.count("?") >= 3  # the card, then its three answers


@pytest.mark.slow
@pytest.mark.real
def test_the_card_example_runs_on_smollm2(tmp_path, monkeypatch):
    from attnlab.loading import fetch

    if fetch.fetched("smollm2") is None:
        pytest.skip("real model smollm2 is not fetched; run `attnlab fetch smollm2`")
    monkeypatch.chdir(tmp_path)
    exec(_example(), {})
    _check(tmp_path / "runs" / "card")
