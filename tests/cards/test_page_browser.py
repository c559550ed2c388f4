"""In headless Chromium at 1400x900 and 400x850 the card's page shows its answers and head map above the fold."""

from __future__ import annotations

import pytest

from attnlab.cards import page as card_page
from attnlab.cards.types import Card
from browser import NEEDS_CHROMIUM, browser, served

VIEWPORTS = ((1400, 900), (400, 850))

# What the page shows in the viewport as loaded, then its width with every table opened.
LAYOUT = """
const top = s => document.querySelector(s).getBoundingClientRect().top;
const shown = {inner: [innerWidth, innerHeight], answers: top('ol.answers'), story: top('figure.story svg'),
               closed: document.documentElement.scrollWidth};
const first = document.querySelector('img, svg, table');
shown.first = first.tagName.toLowerCase();
shown.panels = [...document.querySelectorAll('section.panel')].map(p => {
  const figures = [...p.querySelectorAll('img, svg')], tables = [...p.querySelectorAll('table')];
  return {title: p.querySelector('h2').textContent, images: [...p.querySelectorAll('img')].map(i => i.alt),
          tables: tables.length, collapsed: tables.every(t => t.closest('details') !== null),
          figuresFirst: figures.every(f => tables.every(t => f.compareDocumentPosition(t) & 4))};
});
shown.tips = [...document.querySelectorAll('svg.heads g.cell')].map(g => g.querySelector('title').textContent);
shown.broken = [...document.images].filter(i => !i.complete || !i.naturalWidth).map(i => i.alt);
document.querySelectorAll('details').forEach(d => { d.open = true; });
shown.opened = document.documentElement.scrollWidth;
return shown;
"""

# The head table's visible rows, as "layer/head", and its pager's words.
ROWS = """
const table = [...document.querySelectorAll('table')].find(t => t.tHead.textContent.includes('head_type'));
table.closest('details').open = true;
return {rows: [...table.tBodies[0].rows].filter(r => !r.hidden).map(r => r.cells[0].textContent + '/' +
        r.cells[1].textContent), pager: table.parentNode.nextElementSibling.textContent};
"""


def _viewport(driver, width: int, height: int) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def _severe(driver) -> list[str]:
    # the browser asks the server for /favicon.ico on its own; the page names no file it does not carry
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE" and "/favicon.ico " not in e["message"]
    ]


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_answers_and_head_map_are_above_the_fold_and_each_panel_shows_figures_first(written):
    card = Card.from_dict(written.data)
    sections = card_page.sections(card)
    seen = {}
    with served(written.out) as address, browser() as driver:
        for width, height in VIEWPORTS:
            _viewport(driver, width, height)
            driver.get(f"{address}/index.html")
            seen[width] = driver.execute_script(LAYOUT)
        severe = _severe(driver)
    for width, height in VIEWPORTS:
        shown = seen[width]
        assert shown["inner"] == [width, height]
        assert 0 <= shown["answers"] < shown["story"] < height, (width, shown)
        assert shown["closed"] <= width and shown["opened"] <= width, (width, shown)  # no sideways scroll
        assert shown["first"] == "svg"  # the story figure, before any table
        assert [p["title"] for p in shown["panels"]] == [s.title for s in sections] == list(card_page.PANELS)
        for section, part in zip(sections, shown["panels"]):
            assert part["figuresFirst"] and part["collapsed"], (width, part)
            assert part["tables"] == len(section.tables), (width, part)
            figures = [] if section.title == "Heads" else [f.stem for f in section.figures]  # Heads links the map
            assert part["images"] == figures, (width, part)
        assert len(shown["tips"]) == len(card.heads) and all("first-token mass" in t for t in shown["tips"])
        assert shown["broken"] == []
    assert severe == []


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_a_long_head_table_shows_30_rows_at_a_time_and_a_sort_starts_it_again(written, tmp_path):
    data = dict(written.data)
    data["heads"] = [
        {**written.data["heads"][0], "layer": layer, "head": head, "first-token mass": (layer * 8 + head) / 96}
        for layer in range(12)
        for head in range(8)
    ]
    card_page.write_card_page(data, tmp_path, tmp_path / "index.html")
    with served(tmp_path) as address, browser() as driver:
        driver.get(f"{address}/index.html")
        first = driver.execute_script(ROWS)
        driver.execute_script(
            "[...document.querySelectorAll('.pager button')].find(b => b.textContent == 'next').click()"
        )
        second = driver.execute_script(ROWS)
        driver.execute_script("document.querySelector('table[data-page] th').click()")  # layer, ascending
        driver.execute_script("document.querySelector('table[data-page] th').click()")  # layer, descending
        sorted_ = driver.execute_script(ROWS)
        severe = _severe(driver)
    assert first["rows"] == [f"{i // 8}/{i % 8}" for i in range(30)] and first["pager"] == "prevrows 1-30 of 96next"
    assert second["rows"] == [f"{i // 8}/{i % 8}" for i in range(30, 60)] and "rows 31-60 of 96" in second["pager"]
    assert len(sorted_["rows"]) == 30 and sorted_["rows"][0].startswith("11/") and "rows 1-30" in sorted_["pager"]
    assert severe == []
