"""benchmarks/gpu.py runs end to end on CPU under Triton's interpreter: every kernel exact, every ratio against SDPA,
every command of the device part run and compared, an optimizer step of every training study's model and both arms
of the Reverse run scored at every multiple."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu.py"


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> dict:
    pytest.importorskip("triton")
    folder = tmp_path_factory.mktemp("gpu")
    out = folder / "gpu.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry", "--out", str(out)], capture_output=True, text=True, env=env, cwd=folder
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(out.read_text())


def test_the_dry_run_checks_every_kernel_and_times_it_against_sdpa(dry_run):
    result = dry_run
    assert result["dry"] and result["device"].startswith("cpu") and result["dry shapes"]
    checks = result["exactness"]
    assert len(checks) == 12 and all(max(c[k] for k in ("out", "dq", "dk", "dv")) < 1e-5 for c in checks)
    speed = result["speed"]
    assert [r["variant"] for r in speed] == [
        "SDPA",
        "relu_p4_b0",
        "relu_p2_b0.5",
        "sigmoid_b0",
        "entmax_a1.5",
        "NAPE softmax",
    ]
    assert speed[0]["forward ratio"] == 1.0 and all(r["forward+backward s"] > 0 for r in speed)
    assert result["not built"] == [] and 0 < result["seconds"] < result["budget seconds"]


def test_the_dry_run_runs_every_command_of_the_device_part_and_compares_it(dry_run):
    rows = dry_run["commands"]
    assert [r["command"] for r in rows] == ["audit", "substitute", "diagnose", "lengthgen"]
    for row in rows:  # the CPU against itself: a command that reads the device wrongly would fail or differ
        assert row["status"] == "ok" and row["largest difference"] == 0.0, row


def test_the_dry_run_times_a_step_of_every_study_that_trains(dry_run):
    from attnlab.studies import STUDIES

    rows = dry_run["training step"]
    assert {r["study"] for r in rows} == set(STUDIES) - {"rowmaps"}  # rowmaps trains nothing
    for row in rows:
        assert row["status"] == "ok", row
        assert row["parameters"] > 0 and row["tokens per step"] > 0 and row["batch"] == 2
        assert math.isfinite(row["tokens/s"]) and row["tokens/s"] > 0 and row["seconds"] > 0


def test_the_dry_run_trains_both_reverse_arms_and_scores_them_at_every_multiple(dry_run):
    reverse = dry_run["reverse"]
    assert reverse["task"] == "reverse" and reverse["positions"] == "nape"
    assert set(reverse["arms"]) == {"asentmax", "softmax"}
    for name, arm in reverse["arms"].items():
        assert arm["status"] == "ok" and arm["steps"] > 0 and arm["train s"] > 0, name
        for kind in ("accuracy", "token accuracy"):
            assert {"1.5x", "2x", "4x"} <= set(arm[kind]), (name, kind)
            assert all(0 <= value <= 1 for value in arm[kind].values()), (name, kind)
