"""benchmarks/longctx.py runs every variant, fused and unfused, and reports ratios to the same round's baseline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "longctx.py"


@pytest.mark.slow  # six fresh processes, 10-20 s
def test_every_variant_runs_and_the_baseline_ratio_is_one(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_longctx", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.main(
        ["--lengths", "64", "--rounds", "1", "--threads", "1", "--unfused", "--out", str(tmp_path / "longctx.json")]
    )["rows"]
    assert [r["variant"] for r in rows] == [*bench.VARIANTS, "entmax_a1.5 unfused", "relu_p4_b0 unfused"]
    assert rows[0]["median_round_ratio"] == 1.0 and all(r["peak_rss_mib"] > 0 for r in rows)
    assert (tmp_path / "longctx.json").is_file()
