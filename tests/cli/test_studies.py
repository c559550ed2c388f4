"""`attnlab demo` writes tables and figures whose sums and supports match a float64 recount, or fails in one line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from attnlab.cli import main

SEED = 3
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _entmax_support(z: np.ndarray, alpha: float) -> int:
    """Support of alpha-entmax by bisection on tau in float64 (independent of attnlab's solver)."""
    y = (alpha - 1.0) * z
    lo, hi = y.max() - 1.0, y.max()
    for _ in range(200):
        tau = 0.5 * (lo + hi)
        total = (np.clip(y - tau, 0.0, None) ** (1.0 / (alpha - 1.0))).sum()
        lo, hi = (tau, hi) if total > 1.0 else (lo, tau)
    assert np.abs(y - tau).min() > 1e-6, "a key sits on the threshold; pick another seed"
    return int((y > tau).sum())


def _reference(name: str, z: np.ndarray) -> tuple[int, float | None]:
    """(support, sum or None if normalized) of map ``name`` on the allowed scores ``z``, from the formulas."""
    n = z.size
    if name.startswith(("softmax", "ssmax", "logn", "sigmoid")):
        return n, None
    if name == "topk_k4":
        return int((z >= np.sort(z)[-4]).sum()), None
    if name == "sparsemax":
        return _entmax_support(z, 2.0), None
    if name.startswith("entmax_a"):
        return _entmax_support(z, float(name.removeprefix("entmax_a"))), None
    if name.startswith("relu_p"):
        p, b = (float(v) for v in name.removeprefix("relu_p").split("_b"))
        r = np.clip(z + b, 0.0, None)
        w = r[r > 0] ** p / (r**p).sum()
        assert w.min() > 1e-30, "a weight is near float32 underflow, where the count is ambiguous"
        return int((r > 0).sum()), None
    if name == "wortsman_p2_sqrtL":
        return int((z > 0).sum()), float((np.clip(z, 0, None) ** 2).sum() / np.sqrt(n))
    if name == "reluattn":
        return int((z > 0).sum()), float(np.clip(z, 0, None).sum() / max(n - 2, 1))
    raise AssertionError(f"no reference for {name}")


def test_demo_unwritable_output_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["demo", "--out", str(blocker / "sub")]) == 1
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err


def test_demo_writes_consistent_outputs(tmp_path, capsys):
    assert main(["demo", "--studies", "rowmaps", "--out", str(tmp_path), "--seed", str(SEED)]) == 0
    printed = capsys.readouterr().out
    out_dir = tmp_path / "rowmaps"
    table = pd.read_csv(out_dir / "rowmaps.csv")
    config = json.loads((out_dir / "row.json").read_text())

    assert (out_dir / "rowmaps.png").read_bytes()[:8] == PNG_MAGIC
    assert (out_dir / "rowmaps.svg").read_text().lstrip().startswith("<?xml")
    markdown = (out_dir / "rowmaps.md").read_text().splitlines()
    assert markdown[0].startswith("| name | family |") and len(markdown) == 2 + len(table)
    assert config["seed"] == SEED
    assert list(table["name"]) == config["maps"]
    assert not list(tmp_path.rglob("*.tmp")), "a temporary file was left behind"
    assert f"report: {tmp_path / 'index.html'}" in printed

    normalized = table[table["normalized"]]
    assert len(normalized) == 12
    assert np.allclose(normalized["sum"], 1.0, rtol=0, atol=1e-5)

    z = np.array(config["row"], dtype=np.float64)[np.array(config["mask"], dtype=bool)]
    assert z.size == len(config["row"]) - 1
    for rec in table.itertuples(index=False):
        support, total = _reference(rec.name, z)
        assert rec.support == support, rec.name
        if total is not None:
            assert rec.sum == pytest.approx(total, rel=1e-5), rec.name
        assert np.isnan(rec.entropy) != rec.normalized, rec.name
