"""The README's Python examples run as printed: the row map in one's own attention, and the audit and substitution of SmolLM2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    # A subprocess in a scratch folder: the audit example writes rows.parquet into its working directory.
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def test_the_readme_shows_two_python_examples():
    assert len(_examples()) == 2


def test_row_map_in_ones_own_attention(tmp_path):
    run = _run(_examples()[0] + "\nassert out.shape == (2, 8, 16, 64) and out.isfinite().all()\n", tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.mark.real
def test_audit_and_substitution_of_a_fetched_model(tmp_path):
    from attnlab.loading import fetch

    if fetch.fetched("smollm2") is None:
        pytest.skip("real model smollm2 is not fetched; run `attnlab fetch smollm2`")
    check = (
        "\nassert {'layer', 'head', 'prompt', 'query', 's_p2'} <= set(rows.columns) and len(rows) > 0"
        "\nassert model.config._attn_implementation == 'attnlab_entmax_a1.5'"
        "\nassert model(**tok('The capital of France is', return_tensors='pt')).logits.isfinite().all()\n"
    )
    run = _run(_examples()[1] + check, tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "relu_p4_bauto" in run.stdout
