"""attnlab lengths: each length's line equals an audit at that length under the one b_auto; bad sizes are refused."""

from __future__ import annotations

import json
import re
import shlex

import pandas as pd
import pytest

from attnlab.analyses import audit, lengths, sections
from attnlab.analyses.run import RunError
from attnlab.cli import main

LENGTHS = (32, 64)


@pytest.fixture(scope="module")
def sweep(checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("lengths") / "sweep"
    cfg = lengths.LengthsConfig(
        model=str(checkpoint), lengths=LENGTHS, prompts=2, p=(2, 4), b=("0", "auto"), queries="every:4"
    )
    return lengths.run(cfg, out, progress=False), out


def test_each_length_is_an_audit_at_that_length_with_one_b_auto(checkpoint, sweep, tmp_path):
    result, out = sweep
    table = pd.read_csv(out / "lengths.csv", dtype={"b": str})
    assert table[["L", "b", "p"]].values.tolist() == [[L, b, p] for L in LENGTHS for b in ("0", "auto") for p in (2, 4)]
    config = json.loads((out / "config.json").read_text())
    assert config["b_auto"] == result["b_auto"] and config["calibration text"].startswith("generated")
    for length in LENGTHS:
        own = audit.run(
            audit.AuditConfig(
                model=str(checkpoint),
                suite="induction",
                length=length,
                prompts=2,
                p=(2, 4),
                b=("0", "auto"),
                queries="every:4",
            ),
            tmp_path / f"a{length}",
            progress=False,
        )
        assert own["b_auto"] == result["b_auto"]  # the calibration does not depend on the length
        mine = table[table["L"] == length].reset_index(drop=True)
        assert mine["unsafe %"].notna().all() and mine["active"].gt(0).all()
        pd.testing.assert_frame_equal(mine.drop(columns=["L", "tokens"]), own["table"], check_dtype=False)
        assert (mine["tokens"] == length).all()  # induction prompts are exactly L tokens
        for b in ("0", "auto"):
            pd.testing.assert_frame_equal(
                pd.read_parquet(out / f"rows_L{length}_b{b}.parquet"), pd.read_parquet(own["paths"][f"rows_b{b}"])
            )


def test_the_report_draws_fig_5_and_names_the_command_line(sweep, tmp_path, capsys):
    _, out = sweep
    section = sections.section(out)
    assert sections.command_of(out).name == "lengths"
    assert [f.stem for f in section.figures] == ["unsafe_by_length"] and [t.stem for t in section.tables] == ["lengths"]
    assert (out / "unsafe_by_length.png").is_file() and (out / "unsafe_by_length.svg").is_file()
    argv = shlex.split(section.command)
    assert argv[:2] == ["attnlab", "lengths"] and argv[argv.index("--lengths") + 1 :][:2] == ["32", "64"]
    assert main(["report", str(out), "--out", str(tmp_path / "page")]) == 0
    assert "Length sweep of" in (tmp_path / "page" / "index.html").read_text()


def test_several_sweeps_are_drawn_on_one_fig_5(checkpoint, sweep, tmp_path):
    from checkpoints import save_checkpoint

    _, out = sweep
    other = save_checkpoint(tmp_path / "other", seed=1)
    lengths.run(
        lengths.LengthsConfig(model=str(other), lengths=LENGTHS, prompts=2, queries="every:4"),
        tmp_path / "other_sweep",
        progress=False,
    )
    ((section, where),) = sections.comparisons([out, tmp_path / "other_sweep"], tmp_path / "page")
    table = pd.read_csv(where / "lengths_by_model.csv", dtype={"b": str})
    assert set(table["model"]) == {f"{checkpoint} (induction)", f"{other} (induction)"}
    mine = table[table["model"] == f"{checkpoint} (induction)"].reset_index(drop=True)
    pd.testing.assert_series_equal(mine["unsafe %"], pd.read_csv(out / "lengths.csv")["unsafe %"])
    assert (where / "unsafe_by_length.png").is_file() and section.figures[0].stem == "unsafe_by_length"


def test_the_cli_prints_the_table_and_writes_the_rows_of_every_length(checkpoint, tmp_path, capsys):
    out = tmp_path / "sweep"
    code = main(
        [
            "lengths",
            "--model",
            str(checkpoint),
            "--lengths",
            "40",
            "24",
            "--prompts",
            "1",
            "--suite",
            "mqar",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "length sweep of" in captured.out and "unsafe %" in captured.out
    assert sorted(p.name for p in out.iterdir()) == [
        ".attnlab-run.json",
        "config.json",
        "lengths.csv",
        "lengths.md",
        "rows_L24_b0.parquet",
        "rows_L40_b0.parquet",
    ]
    assert pd.read_csv(out / "lengths.csv")["L"].tolist() == [40, 24]


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"pad": 3}, "--pad counts haystack sentences"),
        ({"length": 64}, "drop --length"),
        ({"lengths": (64, 64)}, "--lengths takes distinct lengths"),
        ({"lengths": (0, 64)}, "--lengths must be an int >= 1"),
        ({"suite": "poems"}, "unknown suite 'poems'"),
    ],
)
def test_bad_sizes_are_refused_before_loading(kw, message):
    with pytest.raises(RunError, match=re.escape(message)):
        lengths.LengthsConfig(model="no/such/model", **kw)


def test_a_length_beyond_the_context_is_refused_before_any_file(tmp_path):
    from checkpoints import save_checkpoint

    short = save_checkpoint(tmp_path / "short", context=48)
    with pytest.raises(RunError, match=re.escape("--lengths 64 exceeds the model's context of 48 tokens")):
        lengths.run(
            lengths.LengthsConfig(model=str(short), lengths=(32, 64), prompts=1), tmp_path / "out", progress=False
        )
    assert not (tmp_path / "out").exists()
