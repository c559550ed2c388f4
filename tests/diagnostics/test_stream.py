"""RowStatsWriter writes exactly row_stats' records with their locations, samples queries, keeps metadata, never leaves a half-written table, and refuses rows once closed or aborted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab.diagnostics import row_stats
from attnlab.diagnostics.rows import RowOptions
from attnlab.diagnostics.stream import RowStatsWriter, read_rows
from attnlab.io import PARQUET_META_KEY
from attnlab.readback import ReadBackError
from hostile_json import hostile, one_line


def _blocks(seed=0, b=2, h=3, q=10, k=16):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(b, h, q, k, generator=g)
    causal = torch.ones(q, k, dtype=torch.bool).tril(k - q)
    return scores, causal


def test_round_trip_matches_row_stats_with_locations(tmp_path):
    opts = RowOptions.make(p=(2, 4), b=0.25)
    blocks = {layer: _blocks(layer) for layer in (0, 3)}
    path = tmp_path / "rows.parquet"
    with RowStatsWriter(path, opts, config={"model": "tiny", "seq": 10}, chunk_values=50) as w:
        for layer, (scores, causal) in blocks.items():
            w.add(scores, causal, layer=layer, prompt=[7, 8])
    df, meta = read_rows(path)
    assert meta["config"] == {"model": "tiny", "seq": 10} and meta["options"]["b"] == 0.25
    assert len(df) == 2 * 2 * 3 * 10
    for layer, (scores, causal) in blocks.items():
        ref = row_stats(scores, causal, p=(2, 4), b=0.25)
        got = df[df["layer"] == layer].reset_index(drop=True)
        b, h, q = np.meshgrid(np.arange(2), np.arange(3), np.arange(10), indexing="ij")
        assert got["prompt"].tolist() == [7] * 30 + [8] * 30
        assert got["head"].tolist() == h.ravel().tolist() and got["query"].tolist() == q.ravel().tolist()
        pd.testing.assert_frame_equal(got.drop(columns=["layer", "head", "prompt", "query"]), ref, check_dtype=False)


@pytest.mark.parametrize("kw,expected", [({"every": 4}, [0, 4, 12]), ({"positions": [3, 13, 99]}, [3, 13])])
def test_query_sampling_uses_absolute_positions(tmp_path, kw, expected):
    scores, _ = _blocks(q=6, k=20)
    path = tmp_path / "s.parquet"
    with RowStatsWriter(path, **kw) as w:
        w.add(scores[:1, :1], layer=0, query_offset=0)
        w.add(scores[1:, :1], layer=0, query_offset=10)
    df, _ = read_rows(path)
    assert sorted(df["query"].tolist()) == expected


def test_failed_run_leaves_previous_table_intact(tmp_path):
    path = tmp_path / "rows.parquet"
    scores, causal = _blocks()
    with RowStatsWriter(path) as w:
        w.add(scores, causal, layer=0)
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="boom"):
        with RowStatsWriter(path, chunk_values=16) as w:
            w.add(scores, causal, layer=1)
            raise RuntimeError("boom")
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["rows.parquet"]


def test_empty_writer_and_bad_blocks(tmp_path):
    with RowStatsWriter(tmp_path / "e.parquet") as w:
        pass
    df, _ = read_rows(tmp_path / "e.parquet")
    assert len(df) == 0 and {"layer", "s_p2", "lambda_n"} <= set(df.columns)
    w = RowStatsWriter(tmp_path / "x.parquet")
    with pytest.raises(ValueError, match="batch, heads, queries, keys"):
        w.add(torch.zeros(4, 5), layer=0)
    with pytest.raises(ValueError, match="mask shape"):
        w.add(torch.zeros(1, 2, 3, 4), torch.ones(5, dtype=torch.bool), layer=0)
    with pytest.raises(ValueError, match="prompt ids"):
        w.add(torch.zeros(2, 2, 3, 4), layer=0, prompt=[1])
    with pytest.raises(FileNotFoundError):
        RowStatsWriter(tmp_path / "missing" / "x.parquet")
    w.abort()


def test_flags_are_declared_once_and_given_on_every_add(tmp_path):
    with RowStatsWriter(tmp_path / "f.parquet", flags=("answer_key",)) as w:
        w.add(torch.randn(2, 3, 4), layer=0, flags={"answer_key": True})
        w.add(torch.randn(2, 1, 4), layer=1, flags={"answer_key": False})
        with pytest.raises(ValueError, match="exactly the flags"):
            w.add(torch.randn(2, 1, 4), layer=1)
    df, _ = read_rows(tmp_path / "f.parquet")
    assert df["answer_key"].tolist() == [True] * 6 + [False] * 2
    with RowStatsWriter(tmp_path / "e.parquet", flags=("answer_key",)):
        pass
    assert "answer_key" in read_rows(tmp_path / "e.parquet")[0].columns
    with pytest.raises(ValueError, match="shadow"):
        RowStatsWriter(tmp_path / "g.parquet", flags=("s_p2",))


def test_a_finished_writer_refuses_more_rows(tmp_path):
    path = tmp_path / "rows.parquet"
    scores, causal = _blocks()
    w = RowStatsWriter(path)
    w.add(scores, causal, layer=0)
    assert w.close() == path and w.close() == path
    with pytest.raises(
        ValueError, match=re.escape(f"cannot add rows: the RowStatsWriter for {path} is already closed")
    ):
        w.add(scores, causal, layer=1)
    w.abort()
    assert len(read_rows(path)[0]) == scores.shape[:3].numel()
    dropped = RowStatsWriter(tmp_path / "dropped.parquet")
    dropped.abort()
    with pytest.raises(ValueError, match="is already aborted"):
        dropped.add(scores, causal, layer=0)
    with pytest.raises(ValueError, match="cannot close: .* already aborted"):
        dropped.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.parquet"]


MEMORY_SCRIPT = textwrap.dedent("""
    import resource, sys, torch
    from attnlab.diagnostics.stream import RowStatsWriter
    torch.set_num_threads(2)
    heads, n, block = 8, 8192, 256
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    with RowStatsWriter(sys.argv[1]) as w:
        for h in range(heads):
            for q0 in range(0, n, block):
                g = torch.Generator().manual_seed(h * n + q0)
                scores = torch.randn(1, 1, block, n, generator=g)
                w.add(scores, causal[q0:q0 + block], layer=0, heads=[h], query_offset=q0)
    print(w.rows_written, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
""")


@pytest.mark.slow
def test_streaming_8_heads_8192_squared_stays_below_1_gib(tmp_path):
    """A (1 x 8 x 8192 x 8192) score tensor, produced in query blocks, streams in < 1 GiB peak RSS."""
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(tmp_path / "big.parquet")], capture_output=True, text=True, check=True
    )
    rows, peak_kib = map(int, out.stdout.split())
    assert rows == 8 * 8192
    assert peak_kib < 1024 * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB"


@pytest.mark.parametrize(("label", "data"), hostile({"config": {"model": "m"}, "every": 1}, "config", "every"))
def test_hostile_metadata_is_one_line_and_a_writers_own_keys_come_back_as_written(tmp_path, label, data):
    """read_rows' metadata is the writer's (any JSON object): bytes that are not one end in one line naming the file;
    an object comes back as it was written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"a": [1]}).replace_schema_metadata({PARQUET_META_KEY: data}), path)
    if label in ("config of the wrong type", "every missing"):
        assert read_rows(path)[1] == json.loads(data)
        return
    with pytest.raises(ReadBackError) as caught:
        read_rows(path)
    one_line(caught.value, path)
