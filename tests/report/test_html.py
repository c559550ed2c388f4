"""The report page escapes all user text, shows each CSV cell as the file holds it, embeds each PNG byte for byte,
and links every finding to its section."""

from __future__ import annotations

import base64
import math
import re
from html.parser import HTMLParser

import matplotlib.pyplot as plt
import pandas as pd

from attnlab.findings.finding import MDE, Finding, Null
from attnlab.report.figures import save_figure
from attnlab.report.html import render, table_html
from attnlab.report.sections import Figure, Section, Table

HOSTILE = "<script>alert(\"x\")</script> & 'q' <b>"


def claim(text: str, verdict: str, evidence: str) -> Finding:
    """A paper's claim as a study states it: with its rule, null control and MDE."""
    return Finding(
        text,
        verdict,
        evidence,
        rule="the rule",
        null=Null("the null", False, "its outcome"),
        mde=MDE(None, None, "", "no effect size applies"),
        reason="the reason" if verdict in ("not checked", "underpowered") else "",
    )


class _Page(HTMLParser):
    """Tags with their attributes, the text of every table cell, and all text, as a browser would read them."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.rows: list[list[tuple[str, str]]] = []
        self.text: list[str] = []
        self._cell: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
            self._class = dict(attrs).get("class", "")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(("".join(self._cell), self._class))
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _study(folder, title=HOSTILE, study="sinks"):
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"name": [HOSTILE, "b"], "score": [1.5, 99.0]}).to_csv(folder / "t.csv", index=False)
    fig, ax = plt.subplots(figsize=(2, 1), dpi=40)
    ax.plot([0, 1], [1, 0])
    save_figure(fig, folder / "f", dpi=40)
    return Section(
        study=study,
        title=title,
        source=HOSTILE,
        question=HOSTILE,
        command=HOSTILE,
        findings=(claim(HOSTILE, "not checked", HOSTILE), claim("second", "reproduced", "ok")),
        tables=(Table("t", HOSTILE),),
        figures=(Figure("f", HOSTILE),),
        notes=(HOSTILE,),
        warnings=(HOSTILE,),
    )


def test_user_text_is_escaped_everywhere_and_reads_back_unchanged(tmp_path):
    section = _study(tmp_path / "s")
    page = render([(section, tmp_path / "s")], title=HOSTILE)
    parsed = _Page(page)
    assert [t for t, _ in parsed.tags].count("script") == 1, "only the page's own sort script may run"
    assert [t for t, _ in parsed.tags].count("b") == 0
    # <title>, <h1>, contents entry, summary claim, <h2>, source, question, command (under the heading and
    # under the figure), warning, finding claim and evidence, note, table caption, table cell, figure caption
    assert "".join(parsed.text).count(HOSTILE) == 16


def test_table_cells_are_the_csv_values_formatted_and_aligned(tmp_path):
    csv = tmp_path / "t.csv"
    frame = pd.DataFrame(
        {
            "text": ["a<b", "c & d", ""],
            "count": [1, 20, 300],
            "x": [0.123456789, math.nan, 12345678.0],
            "flag": [True, False, True],
        }
    )
    frame.to_csv(csv, index=False)
    rows = _Page(table_html(csv)).rows
    assert rows[0] == [("text", "text"), ("count", "num"), ("x", "num"), ("flag", "text")]
    want = [["a<b", "1", "0.1235", "True"], ["c & d", "20", "-", "False"], ["-", "300", "1.235e+07", "True"]]
    assert [[text for text, _ in r] for r in rows[1:]] == want
    assert all([cls for _, cls in r] == ["text", "num", "num", "text"] for r in rows[1:])


def test_figures_are_embedded_byte_for_byte_and_nothing_is_fetched(tmp_path):
    section = _study(tmp_path / "s")
    page = render([(section, tmp_path / "s")])
    images = [attrs for tag, attrs in _Page(page).tags if tag == "img"]
    assert len(images) == 1
    prefix = "data:image/png;base64,"
    assert images[0]["src"].startswith(prefix)
    assert base64.b64decode(images[0]["src"][len(prefix) :]) == (tmp_path / "s" / "f.png").read_bytes()
    assert not [
        attrs
        for tag, attrs in _Page(page).tags
        if tag in ("link", "iframe") or any(str(v).startswith(("http:", "https:", "//")) for v in attrs.values() if v)
    ]


def test_the_summary_lists_every_finding_and_links_to_its_section(tmp_path):
    sections = [(_study(tmp_path / name, title=name, study=name), tmp_path / name) for name in ("sinks", "temperature")]
    parsed = _Page(render(sections))
    ids = {attrs["id"] for tag, attrs in parsed.tags if tag == "h2"}
    links = [attrs["href"] for tag, attrs in parsed.tags if tag == "a"]
    assert len(ids) == 2 and {h[1:] for h in links} == ids
    summary = [r for r in parsed.rows if len(r) == 5 and r[0][0] in ("sinks", "temperature")]
    assert [(r[0][0], r[1][0], r[2][0]) for r in summary] == [
        (name, f.verdict, f.claim) for name in ("sinks", "temperature") for f in sections[0][0].findings
    ]
    boxes = [attrs["class"] for tag, attrs in parsed.tags if tag == "div" and "finding" in attrs.get("class", "")]
    assert boxes == ["finding not-checked", "finding reproduced"] * 2


def test_a_page_without_findings_has_no_summary_table(tmp_path):
    section = Section("rowmaps", "T", "Vasylenko et al. 2025", "q", "cmd")
    parsed = _Page(render([(section, tmp_path)]))
    assert not [t for t, _ in parsed.tags if t == "table"]
    assert re.search(r"written \d{4}-\d\d-\d\d \d\d:\d\d UTC", "".join(parsed.text))


def test_a_study_name_cannot_open_a_tag(tmp_path):
    section = Section('x"><i>', "T", "src", "q", "cmd")
    parsed = _Page(render([(section, tmp_path)]))
    assert "i" not in [t for t, _ in parsed.tags]


def test_the_page_says_which_tables_it_recomputed_and_which_it_shows_as_found(tmp_path):
    import dataclasses

    section = _study(tmp_path / "copy")
    found = dataclasses.replace(section, tables=(Table("t", "as written", found=True),))
    page = "".join(_Page(render([(found, tmp_path / "copy")], sources={tmp_path / "copy": tmp_path / "given"})).text)
    assert (
        f"folder {tmp_path / 'given'}" in page and f"from a copy of the folder's files, in {tmp_path / 'copy'}" in page
    )
    assert "except the tables marked shown as found" in page and "shown as found: t.csv as its command wrote it" in page
    mine = "".join(_Page(render([(section, tmp_path / "copy")])).text)
    assert "shown as found" not in mine and "computed from the folder's files" in mine
    assert "recomputed" not in "".join(_Page(render([(section, tmp_path / "copy")], recomputed=False)).text)
