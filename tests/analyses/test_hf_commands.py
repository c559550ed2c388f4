"""The checkpoint commands run end to end on a saved tiny model; every bad input is a one-line error with a
non-zero exit and no output left behind, and a run never replaces files it did not write for its own settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from attnlab.cli import main
from checkpoints import save_checkpoint


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_audit_command_writes_table_rows_and_config(checkpoint, tmp_path, capsys):
    out = tmp_path / "audit"
    code, stdout, err = _run(
        ["audit", "--model", str(checkpoint), "--prompts", "2", "--pad", "2", "--p", "2", "4", "--out", str(out)],
        capsys,
    )
    assert code == 0, err
    assert "b_auto =" in stdout and "unsafe %" in stdout
    assert sorted(p.name for p in out.iterdir()) == [
        ".attnlab-run.json",
        "audit.csv",
        "audit.md",
        "config.json",
        "rows_b0.parquet",
        "rows_bauto.parquet",
    ]
    config = json.loads((out / "config.json").read_text())
    table = pd.read_csv(out / "audit.csv")
    assert table.loc[table["b"] == "auto", "b value"].iloc[0] == pytest.approx(config["b_auto"])
    assert set(table["p"]) == {2, 4}


def test_ablate_command_prints_the_decisive_table(checkpoint, tmp_path, capsys):
    out = tmp_path / "ablate"
    code, stdout, err = _run(
        [
            "ablate",
            "--model",
            str(checkpoint),
            "--k",
            "1",
            "3",
            "--random-draws",
            "2",
            "--rank-prompts",
            "2",
            "--rank-length",
            "40",
            "--prompts",
            "2",
            "--pad",
            "1",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    assert "decisive" in stdout and "b_auto =" in stdout
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            ".attnlab-run.json",
            "ablate.csv",
            "ablate.md",
            "cells.csv",
            "cells.md",
            "ranking.csv",
            "ranking.md",
            "rows_rank.parquet",
            "answers.parquet",
            "config.json",
        ]
    )
    assert pd.read_csv(out / "ablate.csv")["k"].tolist() == [1, 3]


def test_heads_command_counts_types(checkpoint, tmp_path, capsys):
    out = tmp_path / "heads"
    code, stdout, err = _run(
        ["heads", "--model", str(checkpoint), "--prompts", "2", "--length", "40", "--out", str(out)], capsys
    )
    assert code == 0, err
    assert "head type" in stdout
    assert len(pd.read_csv(out / "heads.csv")) == 2 * 4


def test_temperature_command_prints_xi_hat(checkpoint, tmp_path, capsys):
    out = tmp_path / "temperature"
    code, stdout, err = _run(
        [
            "temperature",
            "--model",
            str(checkpoint),
            "--n",
            "16",
            "32",
            "64",
            "--docs",
            "2",
            "--n-boot",
            "20",
            "--out",
            str(out),
        ],
        capsys,
    )
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
        "unknown recipe": (
            ["substitute", "--model", model, "--recipes", "relu_p4_bfast", "--pad", "2"],
            "unknown row map",
        ),
        "unknown suite": (["audit", "--model", model, "--suite", "poetry", "--pad", "2"], "unknown suite"),
        "bad b": (["audit", "--model", model, "--b", "0", "lots", "--pad", "2"], "--b takes numbers"),
        "k above heads": (
            ["ablate", "--model", model, "--k", "9", "--pad", "1", "--rank-length", "40"],
            "exceeds the model's 8 heads",
        ),
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


def _tree(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_rerun_replaces_only_its_own_configurations_files(checkpoint, tmp_path, capsys):
    out = tmp_path / "audit"
    base = ["audit", "--model", str(checkpoint), "--prompts", "2", "--pad", "1", "--p", "2", "--out", str(out)]
    assert _run(base, capsys)[0] == 0
    before = _tree(out)
    assert _run(base, capsys)[0] == 0, "the same configuration reruns (b_auto recalibrates to the stored value)"
    code, _, err = _run([*base, "--seed", "3"], capsys)
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert "other settings (seed: 0 there, 3 now)" in err and "--overwrite" in err
    assert _tree(out) == before
    assert _run([*base, "--seed", "3", "--overwrite"], capsys)[0] == 0
    assert json.loads((out / "config.json").read_text())["seed"] == 3


def test_files_attnlab_did_not_write_are_never_replaced_silently(checkpoint, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "audit.csv").write_text("my own table\n")
    argv = ["audit", "--model", str(checkpoint), "--prompts", "2", "--pad", "1", "--p", "2", "--out", str(out)]
    code, _, err = _run(argv, capsys)
    assert code != 0 and "holds files that attnlab audit did not write (audit.csv)" in err
    assert (out / "audit.csv").read_text() == "my own table\n"
    code, _, err = _run([*argv, "--overwrite"], capsys)  # --overwrite deletes or replaces only attnlab's own files
    assert code != 0 and "even with --overwrite" in err and (out / "audit.csv").read_text() == "my own table\n"


def test_a_killed_runs_staging_folder_is_removed_by_the_next_run(checkpoint, tmp_path, capsys):
    out = tmp_path / "audit"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = out / f".staging-{int(dead.stdout)}-abcd1234"
    stale.mkdir(parents=True)
    (stale / "rows_b0.parquet").write_bytes(b"partial")
    legacy = out / ".staging-k2j3h4"  # before the pid was in the name
    legacy.mkdir()
    live = out / f".staging-{os.getpid()}-live"
    live.mkdir()
    assert (
        _run(
            ["audit", "--model", str(checkpoint), "--prompts", "2", "--pad", "1", "--p", "2", "--out", str(out)], capsys
        )[0]
        == 0
    )
    assert not stale.exists() and not legacy.exists() and live.is_dir()


@pytest.mark.parametrize(
    "damage, message",
    [
        ("corrupt", "is not a readable safetensors file"),
        ("pickle", "hold Python objects beyond tensors, which are never unpickled"),
    ],
)
def test_damaged_weights_are_one_line(checkpoint, tmp_path, capsys, damage, message):
    import shutil

    import torch

    model = tmp_path / "model"
    shutil.copytree(checkpoint, model)
    weights = model / "model.safetensors"
    if damage == "corrupt":
        data = bytearray(weights.read_bytes())
        data[10:30] = b"\xff" * 20
        weights.write_bytes(bytes(data))
    else:
        weights.unlink()
        torch.save({"x": _Pickled()}, model / "pytorch_model.bin")
    code, _, err = _run(
        ["audit", "--model", str(model), "--prompts", "2", "--pad", "1", "--out", str(tmp_path / "out")], capsys
    )
    assert code != 0 and len(err.strip().splitlines()) == 1 and message in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


class _Pickled:
    def __reduce__(self):
        return (print, ("unpickled!",))
