"""The sparsity study runs, resumes from its folder and recomputes its verdict from its files alone."""

import pandas as pd

import sparsity  # noqa: F401  (registers the study)
from attnlab import studies


def test_study_runs_and_its_report_is_rebuilt_from_files(tmp_path):
    cfg = studies.StudyConfig(study="sparsity", seed=0)
    section = studies.run(cfg, tmp_path / "run")
    assert section.findings[0].verdict == "reproduced"
    support = pd.read_csv(tmp_path / "run" / "support.csv")
    assert (support["softmax"] == 64).all() and (support["entmax_a1.5"] < 64).all()
    assert studies.summarize(tmp_path / "run") == section
