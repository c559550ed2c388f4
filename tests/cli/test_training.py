"""`attnlab train` refuses --resume on a missing folder in one line and says when the warmup outlasts the run; `attnlab release-replay` recomputes the release rule variants from a run's logged scores."""

from __future__ import annotations

from pathlib import Path

from attnlab.cli import main

TINY = Path(__file__).resolve().parents[2] / "examples" / "tiny.yaml"


def test_train_resume_on_a_missing_folder_is_refused(tmp_path, capsys):
    assert main(["train", str(TINY), "--resume", "--out", str(tmp_path / "nothing"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "does not exist; drop --resume" in err and err.count("\n") == 1
    assert not (tmp_path / "nothing").exists()


def test_a_warmup_longer_than_the_run_is_said_not_silent(tmp_path, capsys):
    assert main(["train", str(TINY), "--set", "train.steps=2", "--set", "data.max_tokens=4000", "--out",
                 str(tmp_path / "run"), "--no-progress"]) == 0
    assert "note: train.warmup (24) exceeds train.steps (2)" in capsys.readouterr().err


def test_release_replay_recomputes_table_8_from_a_run_s_logged_scores(tmp_path, capsys):
    import pandas as pd

    from attnlab.train.release import TABLE8_RULES

    run = tmp_path / "run"
    assert main(["train", str(TINY), "--set", "train.steps=40", "--set", "train.eval_every=2", "--set",
                 "train.warmup=1", "--set", "data.max_tokens=20000", "--set", "model.layers=2", "--set",
                 "intervention.upper_qk_lr=0.25", "--set", "intervention.score=excess", "--out", str(run),
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["release-replay", str(run), "--out", str(tmp_path / "replay")]) == 0
    out = capsys.readouterr().out
    table = pd.read_csv(tmp_path / "replay.csv")
    assert list(table.rule) == list(TABLE8_RULES) and set(table.score) == {"excess"}
    main_rule = table.set_index("rule").loc["main rule"]
    summary = pd.read_json(run / "summary.json", typ="series")
    # the replay of the run's own rule releases where training did
    assert main_rule.released_at == summary.released_at and "main rule" in out
    assert main(["release-replay", str(run), "--score", "raw"]) == 0
    assert "| raw" in capsys.readouterr().out
    assert main(["release-replay", str(tmp_path / "nothing")]) == 1
    assert "not a run folder" in capsys.readouterr().err
