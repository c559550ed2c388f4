"""The lengthgen study decides Vasylenko et al. 2025's claim only on learned tasks, resumes without retraining, and
summarizes from the runs' CSV tables and configs alone."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from attnlab import studies
from attnlab.studies import lengthgen as study_lengthgen
from attnlab.studies import StudyConfig


def _summary(rows):
    return pd.DataFrame(rows, columns=["task", "variant", "in_distribution", "mean_past_training"])


def test_claim_is_reproduced_when_a_learned_entmax_map_beats_softmax_past_training():
    f = study_lengthgen.finding(_summary([
        ("copy", "softmax", 100.0, 0.0), ("copy", "entmax_a1.5", 99.0, 0.0), ("copy", "asentmax", 98.0, 0.0),
        ("sort", "softmax", 90.0, 10.0), ("sort", "entmax_a1.5", 95.0, 30.0), ("sort", "asentmax", 20.0, 90.0)]))
    assert f.verdict == "reproduced"
    assert "sort: mean score past training entmax_a1.5 30.0% vs softmax 10.0%" in f.evidence


def test_claim_is_not_reproduced_on_ties_and_not_checked_when_nothing_learned():
    tie = study_lengthgen.finding(_summary([("copy", "softmax", 100.0, 0.0), ("copy", "entmax_a1.5", 100.0, 0.0)]))
    assert tie.verdict == "not reproduced"
    unlearned = study_lengthgen.finding(_summary([
        ("mqmtar", "softmax", 0.0, 0.0), ("mqmtar", "entmax_a1.5", 40.0, 10.0)]))
    assert unlearned.verdict == "not checked"
    assert "mqmtar: not learned in distribution (softmax 0.0%, entmax_a1.5 40.0%)" in unlearned.evidence


def test_beyond_training_averages_only_lengths_past_training():
    acc = pd.DataFrame({"task": ["t"] * 3, "variant": ["v"] * 3, "multiple": [1, 2, 4], "score": [90.0, 30.0, 10.0]})
    row = study_lengthgen.beyond_training(acc).iloc[0]
    assert (row.in_distribution, row.mean_past_training) == (90.0, 20.0)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(study_lengthgen.BUDGETS, "smoke", {
        "budget": "smoke", "samples": 8, "eval_mult": (1, 2), "maps": ("softmax", "entmax_a1.5"),
        "tasks": {"copy": {"train_len": 8, "steps": 3}}})


def test_tiny_run_writes_tables_figures_and_resumes_without_retraining(tiny, tmp_path):
    section = studies.run(StudyConfig(study="lengthgen"), tmp_path)
    acc = pd.read_csv(tmp_path / "accuracy.csv")
    assert sorted(acc.variant.unique()) == ["entmax_a1.5", "softmax"] and sorted(acc.length.unique()) == [8, 16]
    assert acc.score.between(0, 100).all() and (acc.answer_support >= 1).all()
    for stem in ("accuracy", "dispersion"):
        assert (tmp_path / f"{stem}.png").is_file() and (tmp_path / f"{stem}.svg").is_file()
    assert section.findings[0].verdict in ("reproduced", "not reproduced", "not checked")
    cell = tmp_path / "copy" / "cells" / "softmax.json"
    stamp = cell.stat().st_mtime_ns
    again = studies.run(StudyConfig(study="lengthgen"), tmp_path)
    assert cell.stat().st_mtime_ns == stamp, "a finished cell was trained again"
    assert again == section


def test_summary_needs_only_the_csv_tables_and_configs(tiny, tmp_path):
    section = studies.run(StudyConfig(study="lengthgen"), tmp_path)
    acc = pd.read_csv(tmp_path / "accuracy.csv")
    for kept in ("cells", "runs"):
        shutil.rmtree(tmp_path / "copy" / kept)
    assert studies.summarize(tmp_path) == section
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "accuracy.csv"), acc)


def test_progress_draws_bars_only_on_a_terminal_and_a_log_gets_one_line_per_stage(tiny, tmp_path, capsys,
                                                                                   monkeypatch):
    import io
    import re
    import sys

    studies.run(StudyConfig(study="lengthgen"), tmp_path / "log", progress=True)
    err = capsys.readouterr().err
    assert re.fullmatch(r"study lengthgen: started, into \S+\nstudy lengthgen: finished in \d+ s\n", err), err

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    studies.run(StudyConfig(study="lengthgen"), tmp_path / "tty", progress=True)
    assert "\r" in terminal.getvalue() and "step" in terminal.getvalue()  # the trainer's bar, drawn


@pytest.mark.parametrize("budget", sorted(study_lengthgen.BUDGETS))
def test_every_budgets_plan_builds_for_every_task_without_training(budget):
    import torch

    from attnlab.commands import lengthgen
    from attnlab.model.decoder import Decoder
    from attnlab.tasks import TaskStream

    for task, cfg in study_lengthgen.configs(StudyConfig(study="lengthgen", budget=budget)).items():
        stream = TaskStream(cfg.task, cfg.train_len, seed=0, min_length=cfg.min_train_len, **cfg.params)
        for name in cfg.maps:
            run = lengthgen.run_config(cfg, name, stream.vocab_size)
            model = Decoder(run.model)
            for length in {cfg.min_train_len or cfg.train_len, cfg.train_len}:
                batch = cfg.task_def.generate(2, length, seed=0)
                with torch.no_grad():
                    assert model(batch.ids).shape[:2] == batch.ids.shape, (budget, task, name, length)
        assert cfg.lengths == [round(cfg.train_len * m) for m in cfg.plan["eval_mult"]]


def test_variants_below_half_in_distribution_are_named_not_learned():
    from attnlab.commands import lengthgen

    acc = pd.DataFrame({"1x": [98.0, 49.9, 50.0], "2x": [1.0, 60.0, 0.0]},
                       index=pd.Index(["softmax", "asentmax", "entmax_a1.5"], name="variant"))
    assert lengthgen.not_learned(acc) == {"asentmax": 49.9}
    assert lengthgen.not_learned(acc.drop(columns="1x")) == {}
