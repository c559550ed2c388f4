"""The card comparison page fits a 1400 px window: the document does not scroll sideways, no table is wider than
its container, and the cross-model figure is shown."""

from __future__ import annotations

import json
import shutil

import pytest

from attnlab.cli import main
from browser import NEEDS_CHROMIUM, browser, served

# Per table: its width and its container's; the document's width and the window's.
WIDTHS = """
return {document: document.documentElement.scrollWidth, window: window.innerWidth,
        tables: [...document.querySelectorAll('table')].map(t => [t.scrollWidth, t.parentElement.clientWidth]),
        images: [...document.images].map(i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth}))};
"""


@pytest.fixture(scope="module")
def page(written, tmp_path_factory):
    """The comparison ``attnlab compare`` writes of the tiny card and a copy of it whose model's name is one long word,
    the widest cell a table must hold."""
    root = tmp_path_factory.mktemp("compare-browser")
    first, second = root / "cards" / "first", root / "cards" / "second"
    shutil.copytree(written.out, first)
    shutil.copytree(written.out, second)
    data = json.loads((second / "card.json").read_text(encoding="utf-8"))
    # no character a browser breaks a line at (a hyphen, a slash): a 230-character word
    data["model"] = "_".join(["a_rather_long_folder_name_of_checkpoints"] * 5) + "_ckpt"
    (second / "card.json").write_text(json.dumps(data), encoding="utf-8")
    assert main(["compare", str(first), str(second), "--out", str(root / "out")]) == 0
    return root / "out"


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_at_1400_px_the_page_does_not_scroll_sideways_and_shows_its_figure(page):
    with served(page) as address, browser() as driver:
        driver.set_window_size(1400, 1000)
        driver.get(f"{address}/index.html")
        seen = driver.execute_script(WIDTHS)
    assert seen["window"] <= 1400 and seen["document"] <= seen["window"], seen
    assert len(seen["tables"]) >= 7 and all(width <= room for width, room in seen["tables"]), seen["tables"]
    assert [i["alt"] for i in seen["images"]] == ["compare_unsafe_p2"]
    assert all(i["complete"] and i["width"] > 0 for i in seen["images"]), seen["images"]
