"""What every checkpoint command shares refuses bad input by its flag; a run's files appear only when it succeeds."""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from attnlab import io, tasks
from attnlab.analyses import run as runs
from attnlab.analyses.run import RunError
from checkpoints import save_checkpoint
from hostile_json import hostile, one_line
from offline import build_tokenizer


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    """A tiny checkpoint with a 40-token context, and its tokenizer."""
    return runs.load(str(save_checkpoint(tmp_path_factory.mktemp("short") / "model", context=40)))


# ------------------------------------------------------------------------------------------ options


@pytest.mark.parametrize(
    "name, value, low, message",
    [
        ("prompts", 0, 1, "--prompts must be an int >= 1, got 0"),
        ("rank_prompts", -3, 1, "--rank-prompts must be an int >= 1, got -3"),
        ("seed", -1, 0, "--seed must be an int >= 0, got -1"),
        ("prompts", True, 1, "--prompts must be an int >= 1, got True"),  # a bool is an int to Python, not to a user
        ("prompts", 2.0, 1, "--prompts must be an int >= 1, got 2.0"),
        ("prompts", "3", 1, "--prompts must be an int >= 1, got '3'"),
    ],
)
def test_check_count_names_the_flag_and_the_value(name, value, low, message):
    with pytest.raises(RunError) as exc:
        runs.check_count(name, value, low)
    assert str(exc.value) == message


def test_check_count_takes_ints_from_low_up_to_the_option_bound():
    for value, low in ((1, 1), (7, 1), (0, 0), (2**70, 1)):
        runs.check_count("no_bound", value, low)
    assert runs.check_count("n", 2**20) == 2**20
    with pytest.raises(RunError, match="--n must be at most 1,048,576"):
        runs.check_count("n", 2**20 + 1)
    with pytest.raises(ValueError, match="n_prompts takes an int of at most 100,000"):
        runs.check_count("n_prompts", 100_001, api=True)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"prompts": 0}, "--prompts must be an int >= 1"),
        ({"seed": -2}, "--seed must be an int >= 0"),
        ({"b_auto": math.nan}, "--b-auto must be finite, got nan"),
        ({"b_auto": -math.inf}, "--b-auto must be finite, got -inf"),
    ],
)
def test_a_suite_run_refuses_bad_values(kw, message):
    with pytest.raises(RunError, match=message):
        runs.SuiteRun(model="m", **kw)


def test_settings_leave_out_only_an_uncalibrated_b_auto():
    asked = runs.SuiteRun(model="m", prompts=3)
    expected = asdict(asked)
    del expected["b_auto"]
    assert runs.settings(asked) == expected
    given = runs.SuiteRun(model="m", prompts=3, b_auto=1.5)
    assert runs.settings(given) == asdict(given) and runs.settings(given)["b_auto"] == 1.5
    plain = runs.CheckpointRun(model="m")
    assert runs.settings(plain) == asdict(plain)


@pytest.mark.parametrize(
    "specs, values", [(["0"], [0.0]), (["0", "auto", "3.5"], [0.0, None, 3.5]), (["-1e-3", "2"], [-0.001, 2.0])]
)
def test_parse_biases_reads_numbers_and_auto(specs, values):
    assert runs.parse_biases(specs) == values


@pytest.mark.parametrize(
    "specs, message",
    [
        (["0", "lots"], "--b takes numbers or 'auto', got 'lots'"),
        (["inf"], "--b must be finite, got 'inf'"),
        (["nan"], "--b must be finite, got 'nan'"),
        ([], "--b needs distinct values, got []"),
        (["1", "auto", "1"], "--b needs distinct values, got ['1', 'auto', '1']"),
        (["auto", "auto"], "--b needs distinct values"),
    ],
)
def test_parse_biases_refuses_bad_lists(specs, message):
    with pytest.raises(RunError) as exc:
        runs.parse_biases(specs)
    assert message in str(exc.value)


@pytest.mark.parametrize("specs", [["1", "1.0"], ["0", "-0"]])
def test_parse_biases_refuses_one_value_spelled_twice(specs):
    with pytest.raises(RunError, match="distinct"):
        runs.parse_biases(specs)


# ------------------------------------------------------------------------------------------ staged output


def _files(folder):
    return {p.name: p.read_text() for p in folder.iterdir()}


def test_staged_files_replace_their_namesakes_only_on_success(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "table.csv").write_text("old table")
    (out / "notes.txt").write_text("the user's notes")
    with runs.staged_output(out) as stage:
        assert stage.parent == out and stage.name.startswith(f"{runs.STAGING}{os.getpid()}-")
        (stage / "table.csv").write_text("new table")
        (stage / "config.json").write_text("{}")
        assert {p.name for p in out.iterdir() if not p.name.startswith(io.LOCK) and p.name != io.MARKER} == {
            "table.csv",
            "notes.txt",
            stage.name,
        }, "nothing moves early"
        assert f'"pid": {os.getpid()},' in (out / io.LOCK).read_text(), "the folder is held while the run writes"
        assert (out / "table.csv").read_text() == "old table"
    assert _files(out) == {"table.csv": "new table", "notes.txt": "the user's notes", "config.json": "{}"}


def test_config_json_is_moved_last(tmp_path, monkeypatch):
    # a folder holding config.json counts as finished, so it must not appear before the files it describes
    moved = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (moved.append(os.path.basename(dst)), real(src, dst)))
    with runs.staged_output(tmp_path / "run") as stage:
        for name in ("config.json", "z.parquet", "a.csv", "m.md"):
            (stage / name).write_text(name)
    assert [m for m in moved if m != io.MARKER] == ["a.csv", "m.md", "z.parquet", "config.json"]


@pytest.mark.parametrize("failure", [ValueError("bad input found late"), KeyboardInterrupt()])
def test_a_failed_run_keeps_the_previous_files_and_no_staging_folder(tmp_path, failure):
    out = tmp_path / "run"
    out.mkdir()
    (out / "table.csv").write_text("previous run")
    with pytest.raises(type(failure)):
        with runs.staged_output(out) as stage:
            (stage / "table.csv").write_text("half written")
            raise failure
    assert _files(out) == {"table.csv": "previous run"}


def test_a_failed_run_removes_the_folder_it_created(tmp_path):
    out = tmp_path / "new" / "run"
    with pytest.raises(RuntimeError):
        with runs.staged_output(out) as stage:
            (stage / "rows.parquet").write_bytes(b"partial")
            raise RuntimeError("crash")
    assert not out.exists()


def test_an_out_that_is_a_file_is_refused_untouched(tmp_path):
    out = tmp_path / "results"
    out.write_text("a user's file")
    with pytest.raises(RunError) as exc:
        with runs.staged_output(out):
            pytest.fail("the body must not run")
    assert str(exc.value) == f"--out {out} is a file; pass a folder"
    assert out.read_text() == "a user's file"


# ------------------------------------------------------------------------------------------ prompts


def test_suite_prompts_are_the_suites_own_when_they_fit(short):
    model, tok = short
    got = runs.suite_prompts(model, tok, "niah", 2, seed=1, pad=0)
    assert got == tasks.build_suite("niah", tok, 2, seed=1, pad=0)
    assert max(len(p.input_ids) + len(p.answer_ids) for p in got) <= 40


def test_suite_prompts_longer_than_the_context_are_refused(short):
    model, tok = short
    longest = max(len(p.input_ids) + len(p.answer_ids) for p in tasks.build_suite("niah", tok, 2, seed=0, pad=20))
    assert longest > 40
    with pytest.raises(RunError) as exc:
        runs.suite_prompts(model, tok, "niah", 2, seed=0, pad=20)
    assert str(exc.value) == (f"prompts reach {longest} tokens but the model's context is 40; lower --pad/--length")


def test_a_model_without_a_context_length_takes_any_prompt(short):
    _, tok = short
    model = SimpleNamespace(config=SimpleNamespace())
    assert runs.context_length(model) is None
    assert len(runs.suite_prompts(model, tok, "niah", 2, pad=20)) == 2


@pytest.mark.parametrize(
    "suite, kw, message",
    [
        ("poetry", {}, "unknown suite 'poetry'; choose one of "),
        ("niah", {"length": 5}, "length 5 is shorter than the template alone"),
    ],
)
def test_suite_prompts_refuse_what_cannot_be_built(short, suite, kw, message):
    model, tok = short
    with pytest.raises(RunError, match=message):
        runs.suite_prompts(model, tok, suite, 2, **kw)


@pytest.mark.parametrize(
    "kw, message",
    [({"pad": -1}, "--pad must be an int >= 0, got -1"), ({"length": 0}, "--length must be an int >= 1, got 0")],
)
def test_pad_and_length_are_checked_before_loading(kw, message):
    with pytest.raises(RunError, match=re.escape(message)):
        runs.SuiteRun(model="no/such/model", **kw)


def test_b_auto_is_a_number_or_an_earlier_runs_stored_value(tmp_path):
    import argparse
    import json

    assert runs.stored_b_auto("3.5") == 3.5
    (tmp_path / "config.json").write_text(json.dumps({"b_auto": 0.0405932, "model": "m"}))
    assert runs.stored_b_auto(str(tmp_path)) == runs.stored_b_auto(str(tmp_path / "config.json")) == 0.0405932
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "config.json").write_text(json.dumps({"b_auto": None}))
    for text, message in (
        ("nope", "not a number: 'nope'"),
        ("inf", "must be finite"),
        (str(tmp_path / "none"), "holds no calibrated b_auto (got None)"),
        (str(tmp_path / "none" / "config.json"), "holds no calibrated b_auto"),
        (str(tmp_path / "missing"), "not a number"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
            runs.stored_b_auto(text)
    (tmp_path / "torn.json").write_text("{")
    with pytest.raises(argparse.ArgumentTypeError, match="is not a run's config.json"):
        runs.stored_b_auto(str(tmp_path / "torn.json"))


def test_a_haystack_file_is_checked_before_loading_and_read_for_the_prompts(checkpoint, tmp_path):
    with pytest.raises(RunError, match=re.escape("--haystack /nonexistent/h.txt is not a file")):
        runs.SuiteRun(model="no/such/model", haystack="/nonexistent/h.txt")
    hay = tmp_path / "hay.txt"
    hay.write_text(" ".join(f"Sentence number {i} of the text." for i in range(12)))
    model, tok = runs.load(str(checkpoint))
    got = runs.suite_prompts(model, tok, "niah", 2, seed=0, pad=2, haystack=str(hay))
    assert got == tasks.build_suite("niah", tok, 2, seed=0, pad=2, haystack=hay.read_text())
    assert got != tasks.build_suite("niah", tok, 2, seed=0, pad=2)


def test_the_suite_option_names_every_built_in_suite():
    from dataclasses import fields

    from attnlab.options import OPTION

    (suite,) = [f for f in fields(runs.SuiteRun) if f.name == "suite"]
    named = set(re.findall(r"\w+", suite.metadata[OPTION]["help"]))
    assert set(tasks.SUITES) <= named


def test_run_prompts_passes_a_runs_prompt_settings_and_overrides(tmp_path):
    import json

    model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=4096))
    tok = build_tokenizer(tmp_path, "bpe")
    text = tmp_path / "p.txt"
    text.write_text("## One\n" + "The dog ran to the old barn and sat in the warm sun all day long. " * 4)
    cfg = runs.SuiteRun(model="m", suite="literary", prompts=3, pad=5, passages=str(text), seed=2)
    got = runs.run_prompts(model, tok, cfg)
    assert got == tasks.build_suite("literary", tok, 3, seed=2, pad=5, passages=text.read_text())
    assert runs.run_prompts(model, tok, cfg, n_prompts=1, pad=7)[0].meta["pad"] == 7
    assert json.dumps(asdict(cfg))  # the new fields stay JSON-able for config.json


@pytest.mark.parametrize(
    "suite, pad, length, used",
    [
        ("niah", None, None, (128, None)),
        ("induction", None, None, (None, 1024)),
        ("niah", 3, None, (3, None)),
        ("induction", None, 40, (None, 40)),
    ],
)
def test_prompt_record_names_the_sizes_the_suite_built_with(tmp_path, suite, pad, length, used):
    built = tasks.build_suite(suite, build_tokenizer(tmp_path, "bpe"), 3, pad=pad, length=length)
    record = runs.prompt_record(built, suite, pad, length)
    assert (record["pad_used"], record["length_used"]) == used
    assert record["prompt_tokens"] == [min(len(p.input_ids) for p in built), max(len(p.input_ids) for p in built)]


@pytest.mark.parametrize(("label", "data"), hostile({"b_auto": 3.55}, "b_auto", "b_auto"))
def test_a_hostile_config_json_given_as_b_auto_is_one_flag_error(tmp_path, label, data):
    (tmp_path / "config.json").write_bytes(data)
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        runs.stored_b_auto(str(tmp_path))
    one_line(caught.value, tmp_path / "config.json", kind=argparse.ArgumentTypeError)
