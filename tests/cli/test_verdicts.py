"""`attnlab verdicts` lists every registered calibration with its rule, --calibrate writes the rates table (CSV and
Markdown, human column names) for the chosen ones, an unknown key is refused; and every registered rule, at every
budget, holds its false-positive rate and its intervals' coverage (a power short of 80% is allowed: the finding
then reads underpowered)."""

from __future__ import annotations

import pandas as pd
import pytest

import attnlab.cards
import attnlab.studies  # noqa: F401  (both register their findings' calibrations)
from attnlab.cli import main
from attnlab.findings.calibrate import CALIBRATIONS, COVERAGE_MIN, rates
from attnlab.findings.verdict import FPR_MAX

KEY = "sinks: masking BOS @ smoke"


def test_verdicts_lists_each_calibration_with_its_rule(capsys):
    assert main(["verdicts"]) == 0
    out = capsys.readouterr().out
    assert f"{KEY}: masking BOS in every layer" in out


def test_calibrate_writes_the_table(tmp_path, capsys):
    assert main(["verdicts", "--calibrate", "--only", KEY, "--draws", "50", "--out", str(tmp_path)]) == 0
    assert f"{KEY}: calibrated" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "calibration.csv")
    # the columns are the records' keys (pinned in tests/findings/test_calibrate.py)
    assert list(table.columns) == list(rates(CALIBRATIONS[KEY], 1)[0].record())
    assert set(table["measure"]) == {"false-positive rate", "power"} and (table["draws"] == 50).all()
    assert (tmp_path / "calibration.md").read_text().startswith("| finding | budget |")


def test_an_unknown_calibration_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["verdicts", "--only", "nope @ smoke"])
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("key", list(CALIBRATIONS))
def test_every_registered_rule_holds_its_error_rates(key):
    # 200 draws place a rate to within a few points: a rule fails here only where its count is significantly
    # beyond the target (Wilson 95%); the recorded table, at 2000 draws, judges the point estimates
    found = rates(CALIBRATIONS[key], 200, seed=2)
    beyond = [
        r.record()
        for r in found
        if (r.measure == "false-positive rate" and r.interval[0] > FPR_MAX)
        or (r.measure == "coverage" and r.interval[1] < COVERAGE_MIN)
    ]
    assert not beyond, beyond
