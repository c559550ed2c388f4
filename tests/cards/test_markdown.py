"""card.md is a Hub model card's section: YAML front matter with the card's identity and labels, the three answers,
the head-type image beside it by a relative name, a table in Polynomial Concentration Table 1's shape whose cells are
the card's unsafe shares, and the command that reproduces it; ``--format md`` writes it without the page."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from attnlab.cards import answers
from attnlab.cards import build as cards
from attnlab.cards.markdown import card_markdown, front_matter, table_1
from attnlab.cards.types import Card
from attnlab.cli import main
from cards.test_card import TINY


@pytest.fixture(scope="module")
def card(written) -> Card:
    return Card.from_dict(written.data)


def _parts(text: str) -> tuple[dict, str]:
    match = re.match(r"---\n(.*?)\n---\n(.*)", text, re.DOTALL)
    assert match, text[:200]
    return yaml.safe_load(match.group(1)), match.group(2)


def test_the_command_writes_card_md_whose_front_matter_holds_the_cards_identity_and_labels(written, card):
    meta, body = _parts((written.out / "card.md").read_text(encoding="utf-8"))
    assert meta == front_matter(card)
    fields = meta["attnlab_card"]
    assert "attnlab" in meta["tags"] and fields["schema"] == Card.SCHEMA and fields["model"] == card.model
    assert (fields["layers"], fields["heads_per_layer"], fields["budget"]) == (
        card.layers,
        card.heads_per_layer,
        "quick",
    )
    assert fields["model_sha256"] == card.provenance["model_sha256"]
    assert fields["answers"] == {a.key: a.label for a in answers(card)}
    for a in answers(card):
        assert f"**{a.question}** {a.sentence} *({a.label})*" in body


def test_the_image_card_md_shows_lies_beside_it_by_a_relative_name(written):
    body = (written.out / "card.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", body)
    assert images == ["head_types.png"] and (written.out / images[0]).is_file()


def test_the_table_has_table_1s_shape_and_the_cards_unsafe_shares(card):
    table = table_1(card)
    at_zero = [u for u in card.substitution.unsafe if u["b"] == "0"]
    suites = sorted({u["suite"] for u in at_zero})
    assert sorted(table.columns[3:]) == sorted(f"{s} unsafe %" for s in suites)
    assert table["p"].tolist() == sorted({f"{u['p']:g}" for u in at_zero}, key=float)
    for u in at_zero:
        cell = table.loc[table["p"] == f"{u['p']:g}", f"{u['suite']} unsafe %"].item()
        assert cell == f"{u['unsafe %']:.1f} [{u['unsafe lo']:.1f}, {u['unsafe hi']:.1f}]"
    assert "| model | p | b |" in card_markdown(card)


def test_the_reproduce_command_carries_the_cards_budget_and_target(card):
    text = card_markdown(card)
    assert f"attnlab card {card.model} --budget quick --target-length 2048 --out card" in text


def test_format_md_writes_card_md_card_json_and_the_image_but_no_page(written, tmp_path):
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(cards.PLANS, "quick", dataclasses.replace(cards.PLANS["quick"], **TINY))
        argv = ["card", str(written.checkpoint), "--format", "md", "--out", str(tmp_path / "md"), "--no-progress"]
        assert main(argv) == 0
    names = {p.name for p in (tmp_path / "md").iterdir()}
    assert {"card.md", "card.json", "head_types.png", "config.json"} <= names and "index.html" not in names
