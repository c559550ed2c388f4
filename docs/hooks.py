"""mkdocs hooks: pages whose content has one source elsewhere are filled in at build time.

- ``<!-- attnlab:cli -->`` becomes the command-line reference rendered from ``attnlab.cli.build_parser()``;
- ``<!-- attnlab:verdicts STUDY -->`` becomes the table of STUDY's findings read from the recorded demo run's
  ``docs/records/demo/STUDY/section.json``;
- ``<!-- attnlab:summary -->`` becomes the count of each verdict label per study of that run.

A marker naming a study with no record raises, so the strict build fails instead of showing a stale table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

RECORDS = Path(__file__).resolve().parent / "records" / "demo"
# The labels in the order the report counts them: findings first, software checks after.
LABELS = ("reproduced", "not reproduced", "underpowered", "not checked", "check passed", "check failed")

_CLI = "<!-- attnlab:cli -->"
_VERDICTS = re.compile(r"<!-- attnlab:verdicts ([\w-]+) -->")
_SUMMARY = "<!-- attnlab:summary -->"


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
    return _VERDICTS.sub(lambda m: verdict_table(m.group(1)), markdown)
