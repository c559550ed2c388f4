"""The typed card is card.json: ``attnlab.card`` gives a ``Card`` whose ``to_dict`` is the file ``attnlab card``
writes, "schema" first, valid under the JSON Schema the package ships; ``Card.from_dict`` reads it back to an equal
Card, reads schema-1 cards (with or without the field) and refuses a newer schema, naming both; ``Card.save`` writes
the page, card.json and card.md."""

from __future__ import annotations

import copy
import dataclasses
import json
from importlib import resources

import jsonschema
import pytest

import attnlab
from attnlab import hooks
from attnlab.cards import build as cards
from attnlab.cards.compare import compare
from attnlab.cards.types import (
    SCHEMA,
    SCHEMA_FILE,
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
        built = attnlab.card(model, tok, name=str(written.checkpoint), target_length=2048)
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


def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_json_schema_ships_with_the_package_and_is_this_schema():
    shipped = resources.files("attnlab.cards").joinpath("card.schema.json")
    assert shipped.is_file() and json.loads(shipped.read_text(encoding="utf-8")) == json.loads(SCHEMA_FILE.read_text())
    assert _validator().schema["properties"]["schema"]["const"] == SCHEMA


def test_the_written_card_json_is_valid_under_the_json_schema(made):
    _, written, built, _ = made
    validator = _validator()
    assert list(validator.iter_errors(written)) == []
    assert list(validator.iter_errors(built.to_dict())) == []


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.pop("model"),
        lambda d: d.update(schema="2"),
        lambda d: d.update(layers=0),
        lambda d: d.update(surprise=1),
        lambda d: d["heads"][0].update(head_type="other"),
        lambda d: d["length"]["finding"].update(verdict="probably"),
        lambda d: d["temperature"]["multiplier"].update(m="big"),
        lambda d: d["substitution"].pop("best"),
    ],
    ids=["no model", "schema as text", "0 layers", "unknown key", "head type", "verdict", "multiplier", "no best"],
)
def test_the_json_schema_refuses_what_a_card_never_holds(made, change):
    data = copy.deepcopy(made[1])
    change(data)
    assert list(_validator().iter_errors(data)) != []


def test_save_writes_the_page_a_schema_valid_card_json_and_card_md(made, tmp_path):
    _, _, built, _ = made
    paths = built.save(tmp_path / "card")
    assert {p.name for p in paths.values()} == {"index.html", "card.json", "card.md"}
    assert list(_validator().iter_errors(json.loads(paths["json"].read_text(encoding="utf-8")))) == []
    assert json.loads(paths["json"].read_text(encoding="utf-8")) == json.loads(built.to_json())
    assert "<!DOCTYPE html>" in paths["html"].read_text(encoding="utf-8")
    assert paths["md"].read_text(encoding="utf-8").startswith("---\n")
    assert (tmp_path / "card" / "head_types.png").is_file()  # the image card.md shows, beside it


def test_save_names_an_unknown_format_before_writing_anything(made, tmp_path):
    with pytest.raises(attnlab.Error, match="unknown card format 'pdf'; choose one of json, "):
        made[2].save(tmp_path / "card", formats=("json", "pdf"))
    assert not (tmp_path / "card").exists()


def test_repr_is_one_line_naming_the_model_and_each_panels_label(made):
    built = made[2]
    text = repr(built)
    assert "\n" not in text and len(text) < 400
    assert (
        text.startswith(f"Card({built.model!r}: ") and f"{built.layers} layers x {built.heads_per_layer} heads" in text
    )
    assert f"length: {built.length.finding.verdict}" in text and f"ablation: {built.ablation.finding.verdict}" in text
