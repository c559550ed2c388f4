"""mkdocs hooks: pages whose content has one source elsewhere are filled in at build time.

- ``<!-- attnlab:cli -->`` becomes the command-line reference rendered from ``attnlab.cli.build_parser()``;
- ``<!-- attnlab:verdicts STUDY -->`` becomes the table of STUDY's findings read from the recorded demo run's
  ``docs/records/demo/STUDY/section.json``;
- ``<!-- attnlab:summary -->`` becomes the count of each verdict label per study of that run;
- ``<!-- attnlab:claims STUDY -->`` becomes the claims table of STUDY's paper (``attnlab.studies.claims``): every
  numbered result, the finding that decides it with its label in the recorded runs (demo and cards), or why none
  does here and the budget that would;
- ``<!-- attnlab:card NAME -->`` becomes the recorded card NAME's three answers, its head-type map and a link to its
  page; every recorded card (``docs/records/cards/NAME/card.json``) is rendered at build time into
  ``cards/NAME/`` (the page ``attnlab card`` writes, from card.json, nothing recomputed) and all of them into
  ``cards/compare/`` (the page ``attnlab compare`` writes), so the gallery always shows the current page.

A marker naming a study with no record raises, so the strict build fails instead of showing a stale table.
"""

from __future__ import annotations

import functools
import json
import re
import tempfile
from pathlib import Path

RECORDS = Path(__file__).resolve().parent / "records" / "demo"
CARDS = Path(__file__).resolve().parent / "records" / "cards"
GALLERY = "cards"
# The labels in the order the report counts them: findings first, software checks after.
LABELS = ("reproduced", "not reproduced", "underpowered", "not checked", "check passed", "check failed")

_CLI = "<!-- attnlab:cli -->"
_VERDICTS = re.compile(r"<!-- attnlab:verdicts ([\w-]+) -->")
_SUMMARY = "<!-- attnlab:summary -->"
_CARD = re.compile(r"<!-- attnlab:card ([\w.-]+) -->")
_CLAIMS = re.compile(r"<!-- attnlab:claims ([\w-]+) -->")


def section(study: str) -> dict:
    path = RECORDS / study / "section.json"
    if not path.is_file():
        raise FileNotFoundError(f"no recorded section for study {study!r}: {path}")
    return json.loads(path.read_text(encoding="utf-8"))


def counts(study: str) -> str:
    """``1 reproduced, 2 not reproduced``: each label the study's findings carry, in ``LABELS`` order."""
    verdicts = [f["verdict"] for f in section(study)["findings"]]
    unknown = set(verdicts) - set(LABELS)
    if unknown:
        raise ValueError(f"{study}: unknown verdict labels {sorted(unknown)}")
    return ", ".join(f"{verdicts.count(label)} {label}" for label in LABELS if label in verdicts)


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|") if text not in (None, "") else ""


def _null(null: dict | None) -> str:
    if not null:
        return ""
    passes = "passes the rule" if null.get("passes") else "fails the rule"
    return _cell(f"{null.get('control', '')}: {null.get('outcome', '')} ({passes})")


def _mde(finding: dict) -> str:
    parts = []
    mde = finding.get("mde")
    if mde and mde.get("value") is not None:
        effect = f" against the paper's {mde['effect']:.3g}" if mde.get("effect") is not None else ""
        parts.append(f"MDE {mde['value']:.3g} {mde.get('unit') or ''}{effect}".strip())
    if mde and mde.get("power") is not None:
        parts.append(f"power at the paper's effect {mde['power']:.0%}")
    if finding.get("reason"):
        parts.append(finding["reason"])
    return _cell("; ".join(parts))


def verdict_table(study: str) -> str:
    sec = section(study)
    lines = [
        f"Recorded verdicts of `{sec['command']}` ({counts(study)}):",
        "",
        "| finding | verdict | evidence | null control | MDE / reason |",
        "|---|---|---|---|---|",
    ]
    for f in sec["findings"]:
        lines.append(
            f"| {_cell(f['claim'])} | **{f['verdict']}** | {_cell(f.get('evidence'))} | "
            f"{_null(f.get('null'))} | {_mde(f)} |"
        )
    return "\n".join(lines) + "\n"


def summary_table() -> str:
    lines = ["| study | paper | verdicts |", "|---|---|---|"]
    for path in sorted(RECORDS.glob("*/section.json")):
        study = path.parent.name
        lines.append(f"| `{study}` | {section(study)['source']} | {counts(study)} |")
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if _CLI in markdown:
        from attnlab.cli.reference import markdown as cli_reference

        markdown = markdown.replace(_CLI, cli_reference())
    if _SUMMARY in markdown:
        markdown = markdown.replace(_SUMMARY, summary_table())
    markdown = _CARD.sub(lambda m: card_block(m.group(1), page), markdown)
    markdown = _CLAIMS.sub(lambda m: claims_block(m.group(1)), markdown)
    return _VERDICTS.sub(lambda m: verdict_table(m.group(1)), markdown)


def recorded_cards() -> list[Path]:
    """The recorded card folders, by name."""
    return sorted(p.parent for p in CARDS.glob("*/card.json"))


def render_gallery(out: Path) -> list[Path]:
    """Each recorded card's page, tables and figures into ``out``/NAME/ and their comparison into ``out``/compare/;
    returns every file written."""
    from attnlab.cards.compare import read_card, write_compare_page
    from attnlab.cards.page import write_card_page

    folders = recorded_cards()
    for folder in folders:
        write_card_page(read_card(folder), out / folder.name, out / folder.name / "index.html")
    links = [f"../{folder.name}/index.html" for folder in folders]
    (out / "compare").mkdir(parents=True, exist_ok=True)
    write_compare_page(folders, out / "compare", out / "compare" / "index.html", links=links)
    return sorted(p for p in out.rglob("*") if p.is_file())


def on_files(files, config):
    """Add the rendered gallery to the site's files, so pages may link to it and the strict build checks those
    links."""
    from mkdocs.structure.files import File

    global _RENDERED
    _RENDERED = tempfile.TemporaryDirectory(prefix="attnlab-gallery-")
    out = Path(_RENDERED.name)
    for path in render_gallery(out):
        if path.suffix == ".md":  # the tables' Markdown copies would become pages; the CSVs are what pages link
            continue
        uri = f"{GALLERY}/{path.relative_to(out).as_posix()}"
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


_RENDERED: tempfile.TemporaryDirectory | None = None  # the gallery's files live until the build ends


def card_block(name: str, page) -> str:
    """The recorded card ``name``'s three answers with their labels, its head-type map and links to its page."""
    from attnlab.cards import answers
    from attnlab.cards.compare import read_card

    folder = CARDS / name
    if not (folder / "card.json").is_file():
        raise FileNotFoundError(f"no recorded card {name!r}: {folder / 'card.json'}")
    card = read_card(folder)
    up = "../" * page.file.src_uri.count("/")
    base = f"{up}{GALLERY}/{name}"
    image = f"{base}/head_types.png"
    lines = [f"- **{a.question}** {a.sentence} *({a.label})*" for a in answers(card)]
    lines += [
        "",
        f'[![{card.model}: layer x head map of head types]({image}){{ width="520" }}]({base}/index.html)',
        "",
        f"[The whole card of {card.model}]({base}/index.html) (the map links there too).",
        "",
    ]
    return "\n".join(lines)


@functools.cache
def recorded_labels() -> dict[str, str]:
    """finding name -> its label in the recorded demo run and cards, read once per build for every claims page."""
    from attnlab.studies import claims

    return claims.recorded_labels([*sorted(p.parent for p in RECORDS.glob("*/section.json")), *recorded_cards()])


def claims_block(study: str) -> str:
    """The claims table of ``study``'s paper, with the labels of the recorded demo run and cards, and its counts."""
    from attnlab.studies import STUDIES, claims

    if study not in STUDIES:
        raise ValueError(f"claims marker names {study!r}, not a study; one of {', '.join(STUDIES)}")
    paper = STUDIES[study].source
    table = claims.table(paper, recorded_labels())
    decided = int((table["decided by"] != claims.UNDECIDED).sum())
    lines = [
        f"{len(table)} numbered results of {paper}: {decided} decided by a finding of attnlab's, "
        f"{len(table) - decided} not decided here (each with the reason and the budget that would decide it).",
        "",
        "| " + " | ".join(table.columns) + " |",
        "|" + "---|" * len(table.columns),
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines) + "\n"
