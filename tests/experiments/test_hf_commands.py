"""The checkpoint commands run end to end on a saved tiny model, and every bad input is a one-line error
with a non-zero exit and no output left behind."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from attnlab.cli import main

from .checkpoints import save_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_checkpoint(tmp_path_factory.mktemp("ckpt"))


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_audit_command_writes_table_rows_and_config(checkpoint, tmp_path, capsys):
    out = tmp_path / "audit"
    code, stdout, err = _run(["audit", "--model", str(checkpoint), "--prompts", "2", "--pad", "2",
                              "--p", "2", "4", "--out", str(out)], capsys)
    assert code == 0, err
    assert "b_auto =" in stdout and "unsafe %" in stdout
    assert sorted(p.name for p in out.iterdir()) == ["audit.csv", "audit.md", "config.json", "rows_b0.parquet",
                                                    "rows_bauto.parquet"]
    config = json.loads((out / "config.json").read_text())
    table = pd.read_csv(out / "audit.csv")
    assert table.loc[table["b"] == "auto", "b value"].iloc[0] == pytest.approx(config["b_auto"])
    assert set(table["p"]) == {2, 4}


def test_substitute_command_scores_recipes_against_softmax(checkpoint, tmp_path, capsys):
    out = tmp_path / "sub"
    code, stdout, err = _run(["substitute", "--model", str(checkpoint), "--prompts", "3", "--pad", "1",
                              "--recipes", "relu_p4_bauto", "sigmoid_b0", "--out", str(out)], capsys)
    assert code == 0, err
    table = pd.read_csv(out / "substitute.csv")
    assert list(table["recipe"]) == ["softmax", "relu_p4_bauto", "sigmoid_b0"]
    assert table["map"].iloc[1].startswith("relu_p4_b") and table["map"].iloc[1] != "relu_p4_bauto"
    assert (table["n"] == 3).all()
    answers = pd.read_parquet(out / "answers.parquet")
    for recipe, group in answers.groupby("recipe"):
        line = table[table["recipe"] == recipe].iloc[0]
        assert line["correct"] == group["correct"].sum()
    base = table["accuracy %"].iloc[0]
    assert table["delta pp"].iloc[1:].tolist() == pytest.approx((table["accuracy %"].iloc[1:] - base).tolist())


def test_ablate_command_prints_the_decisive_table(checkpoint, tmp_path, capsys):
    out = tmp_path / "ablate"
    code, stdout, err = _run(["ablate", "--model", str(checkpoint), "--k", "1", "3", "--random-draws", "2",
                              "--rank-prompts", "2", "--rank-length", "40", "--prompts", "2", "--pad", "1",
                              "--out", str(out)], capsys)
    assert code == 0, err
    assert "decisive" in stdout and "b_auto =" in stdout
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["ablate.csv", "ablate.md", "cells.csv", "cells.md", "ranking.csv", "ranking.md", "rows_rank.parquet",
         "answers.parquet", "config.json"])
    assert pd.read_csv(out / "ablate.csv")["k"].tolist() == [1, 3]


def test_heads_command_counts_types(checkpoint, tmp_path, capsys):
    out = tmp_path / "heads"
    code, stdout, err = _run(["heads", "--model", str(checkpoint), "--prompts", "2", "--length", "40",
                              "--out", str(out)], capsys)
    assert code == 0, err
    assert "head type" in stdout
    assert len(pd.read_csv(out / "heads.csv")) == 2 * 4


def test_temperature_command_prints_xi_hat(checkpoint, tmp_path, capsys):
    out = tmp_path / "temperature"
    code, stdout, err = _run(["temperature", "--model", str(checkpoint), "--n", "16", "32", "64", "--docs", "2",
                              "--n-boot", "20", "--out", str(out)], capsys)
    assert code == 0, err
    assert "xi_hat_Lambda =" in stdout and "mean log Lambda" in stdout
    assert pd.read_csv(out / "temperature.csv")["n"].tolist() == [16, 32, 64]
    assert json.loads((out / "config.json").read_text())["cor49"]["residual"] is not None


def _bad_inputs(tmp_path, checkpoint):
    from transformers import AutoConfig

    config_only = tmp_path / "config_only"
    config_only.mkdir()
    AutoConfig.from_pretrained(checkpoint).save_pretrained(config_only)
    tiny_tok = save_checkpoint(tmp_path / "tinytok", tokenizer_kind="tiny")
    short = save_checkpoint(tmp_path / "short", context=40)
    model = str(checkpoint)
    return {
        "missing path": (["audit", "--model", str(tmp_path / "nope")], "neither a path nor a known model name"),
        "no weights": (["audit", "--model", str(config_only)], "has no weights"),
        "tokenizer cannot encode": (["audit", "--model", str(tiny_tok), "--pad", "2"], "tokenizer"),
        "too long": (["audit", "--model", str(short), "--pad", "20"], "context is 40"),
        "unknown recipe": (["substitute", "--model", model, "--recipes", "relu_p4_bfast", "--pad", "2"], "unknown row map"),
        "unknown suite": (["audit", "--model", model, "--suite", "poetry", "--pad", "2"], "unknown suite"),
        "bad b": (["audit", "--model", model, "--b", "0", "lots", "--pad", "2"], "--b takes numbers"),
        "k above heads": (["ablate", "--model", model, "--k", "9", "--pad", "1", "--rank-length", "40"],
                          "exceeds the model's 8 heads"),
        "heads too long": (["heads", "--model", str(short), "--length", "80"], "context is 40"),
        "temperature too long": (["temperature", "--model", str(short), "--n", "16", "64"], "context is 40"),
    }


def test_bad_inputs_fail_with_one_line_and_leave_nothing(checkpoint, tmp_path, capsys):
    cases = _bad_inputs(tmp_path, checkpoint)
    capsys.readouterr()
    for what, (argv, message) in cases.items():
        out = tmp_path / f"out_{what.replace(' ', '_')}"
        sized = [] if argv[0] == "temperature" else ["--prompts", "2"]
        code, _, err = _run([*argv, *sized, "--out", str(out)], capsys)
        assert code != 0, what
        lines = err.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], f"{what}: {err!r}"
        assert not out.exists(), f"{what}: left {list(out.iterdir())}"
