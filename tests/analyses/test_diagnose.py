"""diagnose's rows are row_stats' per bias under its causal mask, and its --out is replaced only when it wrote it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab.analyses.diagnose import DiagnoseConfig, DiagnoseError, causal_mask, check_out, run
from attnlab.diagnostics import row_stats
from attnlab.diagnostics.summary import summarize
from attnlab.io import PARQUET_META_KEY
from hostile_json import hostile, one_line


@pytest.fixture
def scores(tmp_path):
    """A saved (2, 3, 4, 6) float32 score tensor: 4 queries, the last 4 of 6 positions."""
    z = np.random.default_rng(5).normal(size=(2, 3, 4, 6)).astype(np.float32)
    path = tmp_path / "scores.npy"
    np.save(path, z)
    return path, torch.from_numpy(z)


def test_settings_are_every_option_but_overwrite_as_text():
    cfg = DiagnoseConfig(scores="s.npy", p=(2, 4), b=(0.0, 0.5), causal=True)
    got = cfg.settings()
    names = {f.name for f in dataclasses.fields(DiagnoseConfig)} - {"overwrite"}
    assert set(got) == names | {"command"} and got["command"] == "diagnose"
    assert all(isinstance(v, str) for v in got.values())
    assert (got["scores"], got["p"], got["b"], got["causal"], got["out"]) == (
        "s.npy",
        "[2, 4]",
        "[0.0, 0.5]",
        "True",
        "None",
    )
    assert dataclasses.replace(cfg, overwrite=True).settings() == got
    assert dataclasses.replace(cfg, b=(0.0,)).settings() != got


@pytest.mark.parametrize("q, k", [(1, 1), (3, 3), (1, 5), (3, 7), (5, 6)])
def test_causal_mask_lets_each_query_see_the_keys_up_to_its_position(q, k):
    expected = torch.tensor([[j <= k - q + i for j in range(k)] for i in range(q)])
    assert torch.equal(causal_mask(q, k), expected)


def _out_cfg(scores_path, out, **kw):
    return DiagnoseConfig(scores=scores_path, out=out, **kw)


def test_check_out_accepts_its_own_parquet_and_refuses_a_foreign_one(scores, tmp_path):
    path, _ = scores
    out = tmp_path / "rows.parquet"
    cfg = _out_cfg(path, out, b=(0.0, 1.0))
    check_out(cfg)  # no file yet
    run(cfg)
    check_out(cfg)
    with pytest.raises(DiagnoseError, match="was not written by this diagnose command"):
        check_out(_out_cfg(path, out, b=(0.0,)))
    check_out(_out_cfg(path, out, b=(0.0,), overwrite=True))

    foreign = tmp_path / "foreign.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(foreign)
    text = tmp_path / "text.parquet"
    text.write_text("a user's notes")
    for other in (foreign, text):
        with pytest.raises(DiagnoseError) as exc:
            check_out(_out_cfg(path, other))
        assert str(exc.value) == (
            f"--out {other} exists and was not written by this diagnose command; pass "
            "--overwrite to replace it, or choose another file"
        )
        check_out(_out_cfg(path, other, overwrite=True))


def test_check_out_refuses_a_folder_and_an_unwritable_place(scores, tmp_path):
    path, _ = scores
    (tmp_path / "folder.parquet").mkdir()
    with pytest.raises(DiagnoseError, match="is a folder; pass a file name ending in .parquet"):
        check_out(_out_cfg(path, tmp_path / "folder.parquet"))
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    with pytest.raises(DiagnoseError):
        check_out(_out_cfg(path, blocker / "rows.parquet"))


@pytest.mark.parametrize("causal", [False, True])
def test_run_equals_row_stats_per_bias(scores, tmp_path, causal):
    path, z = scores
    out = tmp_path / "rows.parquet"
    cfg = DiagnoseConfig(scores=path, b=(0.0, 0.5, -1.0), p=(2, 8), causal=causal, sink=1, out=out)
    shape, n_rows, summary = run(cfg)
    assert shape == (2, 3, 4, 6) and n_rows == 2 * 3 * 4
    mask = torch.ones(4, 6, dtype=torch.bool).tril(2) if causal else None
    rows = pd.read_parquet(out)
    expected = []
    for b in cfg.b:
        ref = row_stats(z, mask, p=(2, 8), b=b, sink=1)
        got = rows[rows["b"] == b]
        assert got["row"].tolist() == list(range(n_rows))
        pd.testing.assert_frame_equal(got.drop(columns=["b", "row"]).reset_index(drop=True), ref, check_dtype=False)
        expected.append(ref.assign(b=b, row=range(n_rows)))
    pd.testing.assert_frame_equal(summary, summarize(pd.concat(expected, ignore_index=True), p=(2, 8), by="b"))
    if causal:
        assert (rows["n_keys"] == np.tile(np.arange(3, 7), 2 * 3 * 3)).all()


def test_a_mask_file_and_causal_combine(scores, tmp_path):
    path, z = scores
    keep = torch.tensor([True, False, True, True, True, False])
    np.save(tmp_path / "mask.npy", keep.numpy())
    run(DiagnoseConfig(scores=path, mask=tmp_path / "mask.npy", causal=True, p=(2,), out=tmp_path / "rows.parquet"))
    rows = pd.read_parquet(tmp_path / "rows.parquet")
    ref = row_stats(z, keep & torch.ones(4, 6, dtype=torch.bool).tril(2), p=(2,))
    pd.testing.assert_frame_equal(rows.drop(columns=["b", "row"]), ref, check_dtype=False)


@pytest.mark.parametrize(
    "make, kw, message",
    [
        (
            lambda p: np.save(p, np.zeros(5, dtype=np.float32)),
            {"causal": True},
            "--causal needs scores of shape (..., queries, keys); got (5,)",
        ),
        (None, {}, "no such file"),
        (lambda p: np.save(p, np.zeros((2, 3), dtype=np.float32)), {"b": (0.0,), "sink": -1}, "sink"),
    ],
)
def test_bad_input_is_a_diagnose_error(tmp_path, make, kw, message):
    path = tmp_path / "s.npy"
    if make is not None:
        make(path)
    with pytest.raises(DiagnoseError) as exc:
        run(DiagnoseConfig(scores=path, **kw))
    assert message in str(exc.value)


@pytest.mark.parametrize(
    "mask, message",
    [
        (np.ones((4, 6), np.float32), "mask must be a bool tensor (True = key may be attended), got torch.float32"),
        (np.ones((4, 6), np.int64), "mask must be a bool tensor (True = key may be attended), got torch.int64"),
        (np.ones((3, 5), bool), "mask shape (3, 5) does not broadcast to scores shape (2, 3, 4, 6)"),
        (np.ones((2, 2, 3, 4, 6), bool), "mask shape (2, 2, 3, 4, 6) would enlarge scores shape (2, 3, 4, 6)"),
    ],
)
@pytest.mark.parametrize("causal", [False, True])
def test_a_mask_that_is_not_one_is_refused_with_or_without_causal(scores, tmp_path, mask, message, causal):
    """The mask's own checks come first: under --causal a float mask failed in the AND with the causal mask, and a
    misshapen one in its broadcast, each with a traceback."""
    path, _ = scores
    np.save(tmp_path / "mask.npy", mask)
    with pytest.raises(DiagnoseError) as exc:
        run(DiagnoseConfig(scores=path, mask=tmp_path / "mask.npy", causal=causal))
    assert str(exc.value) == message


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"p": (2, 2.0)}, "p has repeated degrees: (2, 2.0); give each degree once"),
        ({"b": (0.0, -0.0)}, "--b takes distinct biases (one summary row each), got [0.0, -0.0]"),
        ({"b": ()}, "--b takes distinct biases"),
        ({"rowmap": "sigmoid_b1e5"}, "bias b = 100000 is outside the allowed range [-10000, 10000]"),
    ],
)
def test_the_config_refuses_before_any_score_file_is_read(kw, message):
    with pytest.raises(DiagnoseError) as exc:
        DiagnoseConfig(scores="no/such/scores.npy", **kw)
    assert message in str(exc.value)


@pytest.mark.parametrize(("label", "data"), hostile({"command": "diagnose", "args": {}}, "command", "args"))
def test_an_out_file_whose_metadata_is_hostile_is_not_ours(tmp_path, label, data):
    """--out's Parquet metadata that does not read back, or names another command, is not this command's output: it
    is refused in one line unless --overwrite."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"a": [1]}).replace_schema_metadata({PARQUET_META_KEY: data}), out)
    with pytest.raises(DiagnoseError) as caught:
        check_out(DiagnoseConfig(scores=tmp_path / "s.npy", out=out))
    one_line(caught.value, out, "--overwrite")
    check_out(DiagnoseConfig(scores=tmp_path / "s.npy", out=out, overwrite=True))
