"""`attnlab train` refuses --resume on a missing folder in one line and says when the warmup outlasts the run."""

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
