"""The specialization study compares each pair inside the early window, counts tokens to the control's loss,
and resumes."""

from __future__ import annotations

import pandas as pd
import pytest

from attnlab import studies
from attnlab.studies import specialization as spec
from attnlab.studies import StudyConfig


def _results(released=20):
    return {name: {"run": name, "ffn": ffn, "upper_qk_lr": m,
                   "summary": {"val_loss": 2.0 if m == 1.0 else 1.9, "val_ppl": 7.0,
                               "released_at": None if m == 1.0 else released}}
            for name, (ffn, m) in spec.RUNS.items()}


def _curves(logit_gap=0.2, entropy_gap=0.1):
    rows = []
    for name, (ffn, m) in spec.RUNS.items():
        arm = m != 1.0
        for step in (10, 20, 30):
            rows.append({"run": name, "step": step, "tokens": step * 100,
                         "val_loss": 3.0 - step / 10 * (0.4 if arm else 0.33),
                         "upper_entropy": 0.8 + (entropy_gap if arm else 0.0),
                         "upper_logit": 1.0 + step / 10 - (logit_gap if arm else 0.0),
                         "upper_qk_sigma_max": 1.0, "dppl_zero_qk": 0.5, "lower_copy": 0.05})
    return pd.DataFrame(rows)


def test_early_window_is_the_last_evaluation_before_release_and_decides_the_verdict():
    table = spec.early(_results(released=20), _curves())
    assert list(table.step) == [20, 20]
    assert spec.finding(table).verdict == "reproduced"
    flipped = spec.early(_results(released=20), _curves(logit_gap=-0.2))
    assert spec.finding(flipped).verdict == "not reproduced"
    too_early = spec.early(_results(released=5), _curves())
    f = spec.finding(too_early)
    assert f.verdict == "not checked" and "gelu, swiglu" in f.evidence


def test_tokens_to_reach_the_control_final_loss():
    out = spec.outcomes(_results(), _curves()).set_index("run")
    # the intervention's loss 3 - 0.04 step reaches 2.0 at step 25, first evaluated at step 30
    assert out.loc["gelu_intervention", "tokens_to_control_final_loss"] == 3000
    # the control's own curve 3 - 0.033 step stays above 2.0 at every evaluation
    assert pd.isna(out.loc["gelu_control", "tokens_to_control_final_loss"])


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(spec.BUDGETS, "smoke", {**spec.BUDGETS["smoke"], "layers": 2, "d_model": 32, "context": 32,
                                                "steps": 8, "batch": 4, "eval_every": 2, "max_tokens": 20_000})


def test_tiny_run_writes_curves_and_resumes_without_retraining(tiny, tmp_path):
    section = studies.run(StudyConfig(study="specialization"), tmp_path)
    curves = pd.read_csv(tmp_path / "curves.csv")
    assert sorted(curves.run.unique()) == sorted(spec.RUNS) and set(curves.step) == {2, 4, 6, 8}
    assert (tmp_path / "curves.png").is_file() and section.findings[0].verdict in (
        "reproduced", "not reproduced", "not checked")
    done = tmp_path / "runs" / "gelu_control" / "summary.json"
    stamp = done.stat().st_mtime_ns
    assert studies.run(StudyConfig(study="specialization"), tmp_path) == section
    assert done.stat().st_mtime_ns == stamp, "a finished run was trained again"
