"""A card's page renders in headless Chromium with every panel and every figure present."""

from __future__ import annotations

import dataclasses
import json

import pytest

from attnlab.cards import build as cards
from attnlab.cards import page as card_page
from attnlab.cli import main
from browser import NEEDS_CHROMIUM, browser, served
from cards.test_card import TINY
from checkpoints import save_checkpoint

# Per h2: its text, the tables and the images between it and the next h2 (a section's part of the page).
PARTS = """
return Array.from(document.querySelectorAll('h2')).map(h => {
  const tables = [], images = [];
  for (let n = h.nextElementSibling; n && n.tagName !== 'H2'; n = n.nextElementSibling) {
    if (n.matches('table')) tables.push(n);
    if (n.matches('img')) images.push(n);
    tables.push(...n.querySelectorAll('table'));
    images.push(...n.querySelectorAll('img'));
  }
  return {title: h.textContent, tables: tables.length,
          images: images.map(i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth}))};
});
"""


@pytest.fixture(scope="module")
def card(tmp_path_factory):
    """The folder of a tiny checkpoint's card, written by the command under the TINY plan."""
    folder = tmp_path_factory.mktemp("card")
    checkpoint = save_checkpoint(folder / "ckpt")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(cards.PLANS, "quick", dataclasses.replace(cards.PLANS["quick"], **TINY))
        assert main(["card", str(checkpoint), "--out", str(folder / "out"), "--no-progress"]) == 0
    return folder / "out"


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_every_panel_figure_and_table_of_the_card_is_on_the_rendered_page(card):
    sections = card_page.sections(json.loads((card / "card.json").read_text(encoding="utf-8")))
    with served(card) as address, browser() as driver:
        driver.get(f"{address}/index.html")
        parts = driver.execute_script(PARTS)
        broken = driver.execute_script(
            "return [...document.images].filter(i => !i.complete || !i.naturalWidth).map(i => i.alt)"
        )
        # the browser asks the server for /favicon.ico on its own; the page names no file it does not carry
        logs = driver.get_log("browser")
        severe = [e["message"] for e in logs if e["level"] == "SEVERE" and "/favicon.ico " not in e["message"]]
    assert [p["title"] for p in parts] == [s.title for s in sections]
    assert set(card_page.PANELS) <= {p["title"] for p in parts}
    for section, part in zip(sections, parts):
        assert [i["alt"] for i in part["images"]] == [f.stem for f in section.figures], section.title
        assert all(i["complete"] and i["width"] > 0 for i in part["images"]), (section.title, part["images"])
        assert part["tables"] >= (1 if section.tables else 0), section.title
    assert broken == [] and severe == []
