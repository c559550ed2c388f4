"""`attnlab train` refuses a bad --resume and says when warmup outlasts the run; `prepare` writes shards once."""

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


def test_prepare_writes_shards_reports_throughput_and_refuses_in_one_line(tmp_path, capsys):
    corpus, out = tmp_path / "corpus", tmp_path / "shards"
    corpus.mkdir()
    for i in range(4):
        (corpus / f"{i}.txt").write_text(f"document {i} " * 50)
    assert main(["prepare", "--folder", str(corpus), "--out", str(out), "--val-fraction", "0.25"]) == 0
    shown = capsys.readouterr().out
    assert "tokens/s" in shown and f"--set data.shards={out}" in shown
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "train.bin", "val.bin"]
    assert main(["prepare", "--folder", str(corpus), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "already exists; pass --overwrite" in err and err.count("\n") == 1
    assert main(["prepare", "--folder", str(corpus), "--out", str(out), "--val-fraction", "0.9"]) == 1
    assert "--val-fraction must be in (0, 0.5], got 0.9" in capsys.readouterr().err
    assert main(["prepare", "--folder", str(tmp_path / "none"), "--out", str(tmp_path / "x")]) == 1
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "x").exists()
