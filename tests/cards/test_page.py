"""The card's page, read without a browser, opens with the three answers and the head map, shows each panel's figures
before its collapsed tables, gives every head one tooltip and loads nothing from another host."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pandas as pd
import pytest

from attnlab.cards.answers import answers
from attnlab.cards.page import PANELS, head_map_svg, panel_anchor, sections, write_card_page
from attnlab.cards.types import Card

FIGURES = ("img", "svg")
# a tooltip as head_map_svg writes it: layer, head, type (labels), first-token mass, median S_2
TIP = re.compile(
    r"layer (\d+), head (\d+): (\w+) \(labels ([\w+]+)\); first-token mass (-|\d\.\d{3}); median S_2 (\S+)$"
)


class _Tags(HTMLParser):
    """Every start tag in document order with its attributes, the panel (``section``) and ``details`` it opens
    inside, and the text of each SVG ``<title>``."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict, int | None, int]] = []  # tag, attrs, panel index, details depth
        self.titles: list[str] = []
        self.panel: int | None = None
        self.panels = -1
        self.details = 0
        self._title: list[str] | None = None
        self._svg = 0
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.panels += 1
            self.panel = self.panels
        self.details += tag == "details"
        self._svg += tag == "svg"
        if tag == "title" and self._svg:
            self._title = []
        self.tags.append((tag, attrs, self.panel, self.details))

    def handle_endtag(self, tag):
        if tag == "section":
            self.panel = None
        self.details -= tag == "details"
        self._svg -= tag == "svg"
        if tag == "title" and self._title is not None:
            self.titles.append("".join(self._title))
            self._title = None

    def handle_data(self, data):
        if self._title is not None:
            self._title.append(data)


@pytest.fixture(scope="module")
def page(written, tmp_path_factory):
    """The tiny checkpoint's card (conftest's ``written``) with its page written afresh: (Card, folder, page's text,
    its tags)."""
    folder = tmp_path_factory.mktemp("page")
    card = Card.from_dict(written.data)
    text = write_card_page(written.data, folder, folder / "index.html").read_text(encoding="utf-8")
    return card, folder, text, _Tags(text)


def _first(tags, names) -> int:
    return next(i for i, (tag, *_) in enumerate(tags) if tag in names)


def test_the_three_answers_come_first_each_labelled_and_linked_to_its_panel(page):
    card, _, text, parsed = page
    tags = parsed.tags
    told = [i for i, (tag, attrs, *_) in enumerate(tags) if tag == "ol" and attrs.get("class") == "answers"]
    assert len(told) == 1 and told[0] < _first(tags, FIGURES)
    ids = {attrs["id"] for tag, attrs, *_ in tags if tag == "h2"}
    assert ids == {panel_anchor(p) for p in PANELS}
    links = [attrs["href"] for tag, attrs, *_ in tags[told[0] : _first(tags, FIGURES)] if tag == "a"]
    badges = [attrs["class"] for tag, attrs, *_ in tags[told[0] : _first(tags, FIGURES)] if tag == "span"]
    given = answers(card)
    assert links == [f"#{panel_anchor(a.panel)}" for a in given] and {h[1:] for h in links} <= ids
    assert badges == [f"badge {a.label.replace(' ', '-')}" for a in given]
    positions = [text.index(a.question.replace("'", "&#x27;")) for a in given]
    assert positions == sorted(positions) and positions[-1] < text.index("<svg")


def test_no_table_comes_before_the_first_figure(page):
    tags = page[3].tags
    assert tags[_first(tags, FIGURES)][0] == "svg"  # the head map is the story figure
    assert "table" not in [tag for tag, *_ in tags[: _first(tags, FIGURES)]]


def test_each_panel_shows_its_figures_before_its_tables_and_its_tables_collapsed(page):
    card, folder, _, parsed = page
    panels = sections(card)
    assert parsed.panels + 1 == len(panels) == len(PANELS)
    for index, section in enumerate(panels):
        mine = [(i, tag, attrs, depth) for i, (tag, attrs, panel, depth) in enumerate(parsed.tags) if panel == index]
        figures = [i for i, tag, *_ in mine if tag in FIGURES]
        tables = [i for i, tag, *_ in mine if tag == "table"]
        details = [i for i, tag, *_ in mine if tag == "details"]
        assert not figures or not tables or max(figures) < min(tables), section.title
        assert all(depth > 0 for _, tag, _, depth in mine if tag == "table"), section.title
        assert len(details) == len(section.tables), section.title
        csv = [
            attrs["href"] for _, tag, attrs, depth in mine if tag == "a" and depth and attrs["href"].endswith(".csv")
        ]
        assert csv == [f"{t.stem}.csv" for t in section.tables] and all((folder / c).is_file() for c in csv)
        if section.title != "Heads":  # the head map is the story figure, which the Heads panel links to
            assert len([i for i, tag, *_ in mine if tag == "img"]) == len(section.figures), section.title


def test_every_head_has_one_tooltip_naming_layer_head_type_mass_and_s2(page):
    card, _, _, parsed = page
    tips = {}
    for title in parsed.titles:
        found = TIP.match(title)
        assert found, title
        layer, head, kind, labels, mass, s2 = found.groups()
        tips[int(layer), int(head)] = (kind, labels, mass, s2)
    assert len(tips) == len(parsed.titles) == len(card.heads)
    for h in card.heads:
        kind, labels, mass, s2 = tips[h["layer"], h["head"]]
        assert (kind, labels) == (h["head_type"], h["labels"])
        assert mass == f"{h['first-token mass']:.3f}" and s2 == f"{h['med s_p2']:.3g}"


def test_nothing_is_loaded_from_another_host_and_no_absolute_path_is_linked(page):
    _, _, text, parsed = page
    for tag, attrs, *_ in parsed.tags:
        assert tag not in ("link", "iframe", "object", "embed"), tag
        assert "src" not in attrs or attrs["src"].startswith("data:image/png;base64,"), (tag, attrs)
        link = attrs.get("href")
        assert link is None or link.startswith("#") or re.fullmatch(r"[\w.-]+", link), link
    assert "url(" not in text and "@import" not in text


def test_the_map_of_a_large_model_scales_to_the_page_with_one_tooltip_per_head():
    layers, width = 100, 64
    heads = pd.DataFrame(
        [
            {
                "layer": layer,
                "head": head,
                "head_type": "sink",
                "labels": "sink",
                "first-token mass": 0.5,
                "med s_p2": 2.0,
            }
            for layer in range(layers)
            for head in range(width)
        ]
    )
    svg = head_map_svg(heads)
    parsed = _Tags(svg)
    assert len(parsed.titles) == layers * width and all(TIP.match(t) for t in parsed.titles)
    (attrs,) = [attrs for tag, attrs, *_ in parsed.tags if tag == "svg"]
    assert attrs["width"] == "100%" and re.fullmatch(r"0 0 \d+(\.\d+)? \d+(\.\d+)?", attrs["viewbox"])
    assert 'class="mass"' not in svg  # past 1024 heads the numbers are left to the tooltips
    assert 'class="mass"' in head_map_svg(heads[heads["layer"] < 10])


def test_the_page_names_only_files_beside_it(page):
    _, folder, text, _ = page
    named = set(re.findall(r'href="([\w.-]+)"', text))
    assert named and all((folder / name).is_file() for name in named)
    assert text.count(str(folder)) == 1  # once, where it says which folder holds the files


def test_a_card_written_before_the_later_panels_renders_the_panels_it_has(written, tmp_path):
    older = {k: v for k, v in written.data.items() if k not in ("ablation", "length", "temperature", "commands")}
    older = {**older, "schema": 1}
    card = Card.from_dict(older)
    write_card_page(card, tmp_path, tmp_path / "index.html")
    titles = [s.title for s in sections(card)]
    assert titles == [t for t in PANELS if t not in ("Ablation", "Length", "Temperature")]
    text = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert all(f">{t}<" in text for t in titles) and "not recorded on this card" in text
    assert [a.label for a in answers(card)][1:] == ["not read", "not read"]
