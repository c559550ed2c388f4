"""`attnlab train` refuses a bad --resume, says when warmup outlasts the run and trains where --device and --dtype say
(the config's precision unless --dtype names one); `prepare` writes shards once;
`release-replay` recomputes the release rule's variants from a run's logged scores."""

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
    assert (
        main(
            [
                "train",
                str(TINY),
                "--set",
                "train.steps=2",
                "--set",
                "data.max_tokens=4000",
                "--out",
                str(tmp_path / "run"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert "note: train.warmup (24) exceeds train.steps (2)" in capsys.readouterr().err


def test_dtype_overrides_the_configs_precision_only_when_named(tmp_path, capsys):
    import json

    short = ["--set", "train.steps=1", "--set", "data.max_tokens=4000", "--no-progress"]
    for dtype, expected in (("auto", "fp32"), ("bfloat16", "bf16")):
        out = tmp_path / dtype
        assert main(["train", str(TINY), *short, "--device", "cpu", "--dtype", dtype, "--out", str(out)]) == 0
        assert json.loads((out / "config.json").read_text())["train"]["precision"] == expected
    assert main(["train", str(TINY), *short, "--dtype", "float16", "--out", str(tmp_path / "half")]) == 1
    assert "--dtype float16 cannot train; training takes auto, float32 or bfloat16" in capsys.readouterr().err


def test_release_replay_recomputes_table_8_from_a_run_s_logged_scores(tmp_path, capsys):
    import pandas as pd

    from attnlab.train.release import TABLE8_RULES

    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                str(TINY),
                "--set",
                "train.steps=40",
                "--set",
                "train.eval_every=2",
                "--set",
                "train.warmup=1",
                "--set",
                "data.max_tokens=20000",
                "--set",
                "model.layers=2",
                "--set",
                "intervention.upper_qk_lr=0.25",
                "--set",
                "intervention.score=excess",
                "--out",
                str(run),
                "--no-progress",
            ]
        )
        == 0
    )
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
    # its own earlier table is replaced; a user's file of the same stem is not, unless --overwrite
    assert main(["release-replay", str(run), "--out", str(tmp_path / "replay")]) == 0
    (tmp_path / "mine.md").write_text("my notes")
    assert main(["release-replay", str(run), "--out", str(tmp_path / "mine")]) == 1
    assert "not a release-replay table" in capsys.readouterr().err and (tmp_path / "mine.md").read_text() == "my notes"
    assert not (tmp_path / "mine.csv").exists()
    assert main(["release-replay", str(run), "--out", str(tmp_path / "mine"), "--overwrite"]) == 0
    # --resume continues a run, never a folder of someone else's files; a new run refuses them too
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "data.txt").write_text("mine")
    for extra in (["--resume"], []):
        assert main(["train", str(TINY), *extra, "--out", str(theirs), "--no-progress"]) == 1
        err = capsys.readouterr().err
        assert "data.txt" in err and err.count("\n") == 1
        assert [p.name for p in theirs.iterdir()] == ["data.txt"]


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
