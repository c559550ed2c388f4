"""lengthgen refuses bad flags at parse time, and another configuration's folder in one line leaving it unchanged."""

from __future__ import annotations

import json
import shutil

import pytest

from attnlab import io
from attnlab.cli import main
from attnlab.studies.lengthgen import experiment as lengthgen

BASE = {
    "--task": ["copy"],
    "--train-len": ["8"],
    "--maps": ["softmax"],
    "--eval-mult": ["1"],
    "--steps": ["2"],
    "--samples": ["2"],
}


def _argv(out, **changed) -> list[str]:
    flags = {**BASE, **{f"--{k.replace('_', '-')}": v for k, v in changed.items()}}
    return [
        "lengthgen",
        *(x for flag, values in flags.items() for x in (flag, *values)),
        "--no-progress",
        "--out",
        str(out),
    ]


def _files(out) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished copy run, made once: the tests copy it before writing into it."""
    out = tmp_path_factory.mktemp("lengthgen") / "copy"
    assert main(_argv(out)) == 0
    return out


@pytest.fixture
def folder(trained, tmp_path):
    return shutil.copytree(trained, tmp_path / "run")


def _refused(argv, capsys) -> str:
    capsys.readouterr()
    assert main(argv) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnlab lengthgen: error: "), captured.err
    return lines[0]


@pytest.mark.parametrize(
    "changed, named",
    [
        ({"task": ["reverse"]}, "task: 'copy' there, 'reverse' now"),
        ({"steps": ["3"]}, "steps: 2 there, 3 now"),
        ({"param": ["symbols=8"]}, "params: "),
        ({"seed": ["1"]}, "seed: 0 there, 1 now"),
        ({"pe": ["alibi"]}, "pe: 'nape' there, 'alibi' now"),
        ({"train_len": ["12"]}, "train_len: 8 there, 12 now"),
        ({"min_train_len": ["6"]}, "min_train_len: None there, 6 now"),
        ({"lr": ["0.01"]}, "lr: 0.003 there, 0.01 now"),
        ({"budget": ["full"]}, "budget: 'smoke' there, 'full' now"),
    ],
)
def test_a_run_that_would_train_another_model_is_refused_and_changes_nothing(folder, capsys, changed, named):
    before = _files(folder)
    line = _refused(_argv(folder, **changed), capsys)
    assert named in line and "--overwrite" in line, line
    assert _files(folder) == before


def test_results_without_a_lengthgen_config_are_refused_and_a_file_is_no_folder(folder, capsys):
    config = folder / "config.json"
    saved = json.loads(config.read_text())
    for text, says in (
        ("[]", "holds a JSON list; allowed: a JSON object"),
        (json.dumps({**saved, "plan": None}), "plan is null; allowed: an object with the keys of Plan"),
        ("{", "is not valid JSON"),
        (json.dumps({**saved, "task": "nope"}), "cannot reuse"),
    ):
        config.write_text(text)
        line = _refused(_argv(folder), capsys)
        assert "config.json" in line and says in line, line
    config.unlink()
    line = _refused(_argv(folder), capsys)
    assert "cells" in line and "runs" in line and "no config.json" in line, line
    (folder / "file").write_text("")
    assert "is a file" in _refused(_argv(folder / "file"), capsys)


def test_new_lengths_and_samples_reuse_the_trained_model(folder, capsys):
    checkpoints = {k: v for k, v in _files(folder).items() if k.startswith("runs/softmax/checkpoints")}
    assert main(_argv(folder, eval_mult=["1", "2"], samples=["3"])) == 0
    assert {k: v for k, v in _files(folder).items() if k.startswith("runs/softmax/checkpoints")} == checkpoints
    cell = json.loads((folder / "cells" / "softmax_seed0.json").read_text())
    assert sorted(cell["lengths"]) == ["16", "8"] and cell["lengths"]["8"]["samples"] == 3
    assert json.loads((folder / "config.json").read_text())["eval_mult"] == [1, 2]


def test_overwrite_starts_clean_and_keeps_files_lengthgen_did_not_write(folder, capsys):
    assert {p.name for p in folder.iterdir()} - {io.MARKER} <= set(lengthgen.WRITES)
    assert set(io.listed(folder)) == {p.name for p in folder.iterdir()} - {io.MARKER}  # each listed as written
    (folder / "notes.txt").write_text("mine")
    (folder / "runs" / "entmax_a1.5").mkdir()
    assert main([*_argv(folder, task=["reverse"]), "--overwrite"]) == 0
    assert json.loads((folder / "config.json").read_text())["task"] == "reverse"
    assert json.loads((folder / "cells" / "softmax_seed0.json").read_text())["settings"]["task"] == "reverse"
    assert not (folder / "runs" / "entmax_a1.5").exists() and (folder / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "flag, value, allowed",
    [
        ("pe", "rotary", "invalid choice: 'rotary' (choose from 'none', 'learned', 'rope', 'alibi', 'nape')"),
        ("samples", "-1", "must be an integer >= 1, got '-1'"),
        ("samples", "0", "must be an integer >= 1, got '0'"),
        ("steps", "0", "must be an integer >= 1, got '0'"),
        ("steps", "x", "must be an integer >= 1, got 'x'"),
        ("train_len", "0", "must be an integer >= 1, got '0'"),
        ("min_train_len", "-3", "must be an integer >= 1, got '-3'"),
        ("eval_mult", "0", "must be a finite number > 0, got '0'"),
        ("jobs", "0", "must be an integer >= 1, got '0'"),
        ("lr", "0", "must be a finite number > 0, got '0'"),
        ("lr", "nan", "must be a finite number > 0, got 'nan'"),
        ("seed", "-1", "must be in [0, 2^63), got -1"),
    ],
)
def test_a_bad_flag_fails_at_parse_time_with_its_allowed_values(tmp_path, capsys, monkeypatch, flag, value, allowed):
    def refuse(*args, **kwargs):
        raise AssertionError("lengthgen ran")

    monkeypatch.setattr(lengthgen, "run", refuse)
    with pytest.raises(SystemExit) as exc:
        main(_argv(tmp_path / "out", **{flag: [value]}))
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"attnlab lengthgen: error: argument --{flag.replace('_', '-')}: {allowed} (see "), err
    assert not (tmp_path / "out").exists()


def test_the_positions_the_parser_allows_are_the_model_s():
    from attnlab.cli import build_parser
    from attnlab.model.config import POSITIONS

    command = build_parser()._subparsers._group_actions[0].choices["lengthgen"]
    assert tuple(next(a for a in command._actions if a.dest == "pe").choices) == POSITIONS


def test_a_folder_trained_by_an_earlier_decoder_is_refused(folder, capsys):
    # before MODEL_VERSION 2 the length scalers scaled the ALiBi heads too: those checkpoints mean other weights
    config = folder / "config.json"
    saved = json.loads(config.read_text())
    assert saved["model_version"] == lengthgen.MODEL_VERSION == 2
    config.write_text(json.dumps({k: v for k, v in saved.items() if k != "model_version"}))
    line = _refused(_argv(folder), capsys)
    assert "model_version: 1 there, 2 now" in line and "--overwrite" in line, line
