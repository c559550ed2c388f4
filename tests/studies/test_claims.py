"""The papers' claims tables are complete and true: every finding a study or the card declares is cited by a claim,
every cited finding is declared, every paper has its table, every row has a finding or a reason and a budget, and
the recorded demo run gives exactly the declared names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnlab import papers
from attnlab.cards.rules import FINDINGS as CARD_FINDINGS
from attnlab.errors import ArgumentError
from attnlab.studies import STUDIES, claims
from attnlab.studies.claims import Claim

RECORDS = Path(__file__).resolve().parents[2] / "docs" / "records"


def declared() -> set[str]:
    return {name for study in STUDIES.values() for name in study.findings} | set(CARD_FINDINGS)


def test_every_declared_finding_is_cited_by_a_claim():
    assert declared() - claims.cited() == set()


def test_every_cited_finding_is_declared():
    assert claims.cited() - declared() == set()


def test_every_study_declares_its_findings():
    assert [name for name, study in STUDIES.items() if not study.findings] == []


def test_every_paper_has_a_claims_table_of_unique_results():
    for key in papers.PAPERS:
        rows = claims.of(key)
        assert rows, f"{key} has no claims table"
        results = [c.result for c in rows]
        assert len(results) == len(set(results)), key


@pytest.mark.parametrize("study", ["rowmaps", "concentration", "lengthgen", "specialization", "temperature", "sinks"])
def test_the_recorded_demo_run_gives_exactly_the_declared_names(study):
    section = json.loads((RECORDS / "demo" / study / "section.json").read_text())
    names = [f.get("name", "") for f in section["findings"]]
    assert "" not in names, f"{study}: a recorded finding has no name"
    assert len(names) == len(set(names))
    assert set(names) == set(STUDIES[study].findings)


def test_recorded_cards_give_declared_card_names():
    cards = list(RECORDS.glob("cards/*/card.json"))
    assert cards
    for card in cards:
        found = claims.findings_in(json.loads(card.read_text()))
        assert found and all(f.get("name") in CARD_FINDINGS for f in found), card


def test_table_shows_each_claim_with_its_recorded_label_or_its_reason():
    paper = "Zhu et al. 2026"
    decided = next(c for c in claims.of(paper) if c.findings)
    labels = {decided.findings[0]: "reproduced"}
    table = claims.table(paper, labels)
    assert len(table) == len(claims.of(paper))
    row = table[table["result"] == decided.result].iloc[0]
    assert row["label (recorded run)"].split("; ")[0] == "reproduced"
    undecided = table[table["decided by"] == claims.UNDECIDED]
    assert (undecided["why not here"] != "").all() and (undecided["budget"] != "").all()
    assert (undecided["label (recorded run)"] == "").all()


def test_recorded_labels_read_sections_and_cards(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "c").mkdir()
    finding = {"claim": "x", "verdict": "reproduced", "evidence": "", "name": "a"}
    (tmp_path / "s" / "section.json").write_text(json.dumps({"findings": [finding]}))
    card = {"length": {"finding": {**finding, "verdict": "not checked", "name": "b"}}, "heads": [{"claim": 1}]}
    (tmp_path / "c" / "card.json").write_text(json.dumps(card))
    assert claims.recorded_labels([tmp_path / "s", tmp_path / "c"]) == {"a": "reproduced", "b": "not checked"}


@pytest.mark.parametrize(
    "fields, says",
    [
        ({}, "give the findings that decide it, or the reason"),
        ({"findings": ("a",), "reason": "r"}, "not both"),
        ({"findings": ["a"]}, "tuple of finding names"),
        ({"reason": "r", "budget": ""}, "budget must be a non-empty string"),
    ],
)
def test_a_claim_without_a_decision_or_a_reason_is_refused(fields, says):
    with pytest.raises(ArgumentError, match=says):
        Claim(**{"paper": "Zhu et al. 2026", "result": "Table 99", "where": "§9", "says": "s", "budget": "b", **fields})


def test_gpu_hours_is_the_6nt_rule_at_the_stated_utilization():
    # 270M parameters over 2.5B tokens: 4.05e18 FLOPs at 0.4 x 989 TFLOP/s
    assert claims.gpu_hours(270e6, 2.5e9) == pytest.approx(6 * 270e6 * 2.5e9 / (0.4 * 989e12) / 3600)
    assert "H100-hours" in claims.needs("a 270M decoder", "2.5B tokens", 270e6, 2.5e9, runs=6)
    with pytest.raises(ArgumentError, match="params > 0"):
        claims.gpu_hours(0, 1)
