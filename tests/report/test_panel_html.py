"""A panel of a page that shows what commands wrote escapes all user text, puts its figures before its tables, collapses
and pages its tables, and links its files relative to the page."""

from __future__ import annotations

import pandas as pd

from attnlab.report.html import PAGE_ROWS, collapsed_table_html, page_html, panel_html, table_html
from report.test_html import HOSTILE, _Page, _study


def test_a_panel_escapes_user_text_and_shows_its_figures_before_its_collapsed_tables(tmp_path):
    folder = tmp_path / "s"
    section = _study(folder)
    page = page_html("t", panel_html(section, folder, "s0", tmp_path))
    parsed = _Page(page)
    tags = [t for t, _ in parsed.tags]
    assert tags.count("script") == 1 and tags.count("b") == 0, "only the page's own script may run"
    # heading, figure caption, question, warning, finding claim and evidence, source, command, note, table caption, cell
    assert "".join(parsed.text).count(HOSTILE) == 11
    assert tags.index("img") < tags.index("details") < tags.index("table")
    links = [attrs["href"] for tag, attrs in parsed.tags if tag == "a"]
    assert links == ["s/f.png", "s/f.svg", "s/t.csv"]  # relative to the page's folder, not absolute
    assert str(tmp_path) not in page


def test_a_long_table_is_paged_with_every_row_while_a_study_page_keeps_its_table(tmp_path):
    csv = tmp_path / "long.csv"
    pd.DataFrame(
        {"i": range(75), "why": ["a sentence long enough to need room as prose, not a word a line"] * 75}
    ).to_csv(csv, index=False)
    collapsed = collapsed_table_html(csv, "long", tmp_path)
    parsed = _Page(collapsed)
    (table,) = [attrs for tag, attrs in parsed.tags if tag == "table"]
    assert table["data-page"] == str(PAGE_ROWS) and len(parsed.rows) == 76
    assert "(75 rows)" in "".join(parsed.text) and [c for _, c in parsed.rows[0]] == ["num", "text prose"]
    plain = _Page(table_html(csv))
    assert "data-page" not in table_html(csv) and [c for _, c in plain.rows[0]] == ["num", "text"]
    empty = tmp_path / "empty.csv"
    empty.write_text("\n")  # what a panel that read nothing writes
    assert "(0 rows)" in collapsed_table_html(empty, "none", tmp_path)
