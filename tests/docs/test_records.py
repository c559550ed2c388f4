"""The recorded demo run is what the README and the guides quote: every table included, every verdict count equal."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "docs" / "records" / "demo"
LABELS = ("reproduced", "not reproduced", "underpowered", "not checked", "check passed", "check failed")
FINDINGS = LABELS[:4]


def _verdicts(study: str) -> list[str]:
    return [f["verdict"] for f in json.loads((RECORDS / study / "section.json").read_text())["findings"]]


def _studies() -> list[str]:
    return sorted(p.parent.name for p in RECORDS.glob("*/section.json"))


def _readme_table() -> dict[str, str]:
    """study -> its 'demo verdicts' cell, from the README's table of studies."""
    lines = [ln for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("| `")]
    return {re.match(r"\| `([\w-]+)`", ln).group(1): ln.rstrip(" |").rsplit("|", 1)[1].strip() for ln in lines}


def test_the_record_holds_the_six_studies_and_stays_small():
    assert _studies() == ["concentration", "lengthgen", "rowmaps", "sinks", "specialization", "temperature"]
    size = sum(p.stat().st_size for p in RECORDS.rglob("*") if p.is_file())
    assert size < 2_000_000, size
    assert {p.suffix for p in RECORDS.rglob("*") if p.is_file()} <= {".md", ".json"}
    record = (RECORDS / "RECORD.md").read_text()
    for fact in ("attnlab demo --out runs/demo", "779c14d", "2026-12-06", "2-core"):
        assert fact in record, fact


def test_readme_verdict_counts_match_the_recorded_sections():
    table = _readme_table()
    assert sorted(table) == _studies()
    for study, cell in table.items():
        verdicts = _verdicts(study)
        parsed = {label: int(n) for n, label in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", cell)}
        assert parsed == {label: verdicts.count(label) for label in LABELS if label in verdicts}, (study, cell)


def test_readme_and_record_totals_match():
    every = [v for study in _studies() for v in _verdicts(study)]
    words = {
        "reproduced": "reproduced",
        "not reproduced": "not reproduced",
        "underpowered": "underpowered",
        "not checked": "not checked",
        "check passed": "software checks passed",
    }
    total = ", ".join(f"{every.count(label)} {words[label]}" for label in words if label in every)
    total = total.rsplit(", ", 1)
    sentence = f"In all: {total[0]} and {total[1]}."
    assert sentence in " ".join((ROOT / "README.md").read_text().split())
    assert f"{every.count('reproduced')} reproduced" in (RECORDS / "RECORD.md").read_text()


def test_every_recorded_table_is_included_by_a_page_and_every_study_shows_its_verdicts():
    pages = "\n".join(p.read_text() for p in (ROOT / "docs").rglob("*.md") if RECORDS not in p.parents)
    included = set(re.findall(r'--8<-- "docs/records/demo/([^"]+)"', pages))
    recorded = {str(p.relative_to(RECORDS)) for p in RECORDS.rglob("*.md")}
    assert included == recorded
    for study in _studies():
        assert f"<!-- attnlab:verdicts {study} -->" in pages, study
