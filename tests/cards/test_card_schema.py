"""The typed card is card.json: ``build`` gives a ``Card`` whose ``to_dict`` is the file ``attnlab card`` writes,
"schema" first; ``Card.from_dict`` reads it back to an equal Card, reads schema-1 cards (with or without the field)
and refuses a newer schema, naming both."""

from __future__ import annotations

import dataclasses
import json

import pytest

import attnlab
from attnlab import hooks
from attnlab.cards import build as cards
from attnlab.cards.compare import compare
from attnlab.cards.types import (
    SCHEMA,
    AblationPanel,
    Card,
    CardError,
    LengthPanel,
    Multiplier,
    SubstitutionPanel,
    TemperatureFit,
    TemperaturePanel,
)
from attnlab.findings.finding import Finding
from cards.test_card import TINY


@pytest.fixture(scope="module")
def made(written):
    """The card.json ``attnlab card`` wrote of a tiny checkpoint (its text and data), and the card ``build`` gives
    of the same checkpoint in memory under the same plan."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(cards.PLANS, "quick", dataclasses.replace(cards.PLANS["quick"], **TINY))
        model, tok = hooks.load_model(written.checkpoint)
        built = cards.build(model, tok, cards.PLANS["quick"], name=str(written.checkpoint), target=2048)
    return written.text, written.data, built, written.out


def test_build_gives_typed_panels_and_findings(made):
    _, _, built, _ = made
    assert isinstance(built, Card) and isinstance(built.substitution, SubstitutionPanel)
    assert isinstance(built.ablation, AblationPanel) and isinstance(built.length, LengthPanel)
    heat = built.temperature
    assert isinstance(heat, TemperaturePanel) and isinstance(heat.multiplier, Multiplier)
    assert isinstance(heat.inside, TemperatureFit) and isinstance(heat.past, TemperatureFit)
    findings = (built.ablation.finding, built.length.finding, heat.inside.finding, heat.past.finding)
    assert all(isinstance(f, Finding) for f in findings)
    assert built.provenance is None and built.length.cut == ()  # provenance is the command's addition
    assert [r["L"] for r in built.length.past_rows] == [1024] and built.length.past is not None


def test_a_card_round_trips_and_to_dict_is_the_written_card_json(made):
    text, written, built, _ = made
    assert Card.from_dict(built.to_dict()) == built
    data = dataclasses.replace(built, provenance=written["provenance"]).to_dict()
    assert next(iter(data)) == "schema" and data["schema"] == SCHEMA == 2
    assert data == written
    # as attnlab card writes it (io.write_json): the same bytes
    assert json.dumps(data, indent=2, sort_keys=True) + "\n" == text
    card = Card.from_dict(written)
    assert card == dataclasses.replace(built, provenance=written["provenance"])
    assert Card.from_dict(card.to_dict()) == card and card.to_dict() == written


def test_a_newer_schema_is_refused_naming_both(made, tmp_path):
    _, written, _, _ = made
    newer = {**written, "schema": 99}
    with pytest.raises(CardError, match=r"schema 99.*schema 2\b") as raised:
        Card.from_dict(newer)
    assert isinstance(raised.value, attnlab.Error)
    (tmp_path / "card.json").write_text(json.dumps(newer), encoding="utf-8")
    with pytest.raises(CardError, match=r"card\.json: the card has schema 99.*schema 2\b"):
        compare([tmp_path])


def test_a_card_without_schema_reads_as_schema_1(made, tmp_path):
    _, written, _, out = made
    old = {k: v for k, v in written.items() if k != "schema"}  # written before card.json was versioned
    card = Card.from_dict(old)
    assert card == Card.from_dict(written) and card.to_dict() == written
    (tmp_path / "card.json").write_text(json.dumps(old), encoding="utf-8")
    assert compare([tmp_path]).equals(compare([out]))


def test_a_schema_1_card_reads_with_the_schema_2_fields_empty(made):
    _, written, _, _ = made
    old = {k: v for k, v in written.items() if k != "trained"} | {"schema": 1}
    old["length"] = {k: v for k, v in written["length"].items() if k not in ("past_rows", "past")}
    best = {k: v for k, v in written["substitution"]["best"].items() if k not in ("ahead", "reading", "power")}
    old["substitution"] = {**written["substitution"], "best": best}
    card = Card.from_dict(old)
    assert card.trained is None and card.length.past is None and card.length.past_rows == ()
    assert card.substitution.best.reading is None and card.substitution.best.recipe == best["recipe"]
    assert compare([card])["best recipe"].tolist() == [best["recipe"]]  # an old card named the highest recipe
