"""benchmarks/gpu.py runs end to end on CPU under Triton's interpreter: every kernel exact, every ratio against SDPA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu.py"


def test_the_dry_run_checks_every_kernel_and_times_it_against_sdpa(tmp_path):
    pytest.importorskip("triton")
    out = tmp_path / "gpu.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry", "--out", str(out)], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["dry"] and result["device"].startswith("cpu")
    checks = result["exactness"]
    assert len(checks) == 12 and all(max(c[k] for k in ("out", "dq", "dk", "dv")) < 1e-5 for c in checks)
    speed = result["speed"]
    assert [r["variant"] for r in speed] == ["SDPA", "relu_p4_b0", "relu_p2_b0.5", "sigmoid_b0", "entmax_a1.5"]
    assert speed[0]["forward ratio"] == 1.0 and all(r["forward+backward s"] > 0 for r in speed)
    assert result["not built"]  # the parts still missing are recorded, not silently skipped
