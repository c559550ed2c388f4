"""attnlab fit-xi: on rows built with Lambda_n = (log n)^{1 + xi} it recovers xi_Lambda = 1 + xi, xi_alpha = 0 and
xi_Delta = -xi; on Gaussian rows its xi_hat and half-IQR are the estimator applied by hand, whether the rows come
one length per file, padded with -inf in one file, or as a causal score matrix; bad input is one clear error."""

from __future__ import annotations

import json
import math
import shlex

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

from attnlab.analyses import fit_xi, sections
from attnlab.analyses.run import RunError
from attnlab.cli import main
from attnlab.diagnostics import row_stats
from attnlab.diagnostics.stats import ExponentFit, exponent

LENGTHS = (16, 64, 256, 1024)


def _two_level_rows(n: int, xi: float, rows: int, rng) -> torch.Tensor:
    """Rows of n keys: the maximum 0 and n - 1 keys at gap u = (log n)^-xi e^eps, so that N_n(t) jumps from 1 to n
    at u and Lambda_n = log n / u, alpha_n = 1, Delta_n = u (Defs. 4.3-4.5)."""
    u = math.log(n) ** -xi * np.exp(rng.normal(0, 0.05, size=(rows, 1)))
    z = np.broadcast_to(-u, (rows, n)).copy()
    z[:, 0] = 0.0
    return torch.from_numpy(z)


def _cfg(paths, **kw):
    return fit_xi.FitXiConfig(scores=tuple(paths), **kw)


def test_recovers_a_known_exponent(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for n in LENGTHS:  # one file per n: 2 layers x 3 heads x 4 rows
        path = tmp_path / f"n{n}.pt"
        torch.save(_two_level_rows(n, 0.7, 24, rng).reshape(2, 3, 4, n), path)
        paths.append(path)
    result = fit_xi.run(_cfg(paths, unit_axes=(0, 1), n_boot=100), tmp_path / "out", progress=False)
    xi = result["table"].set_index("exponent")
    assert xi.loc["xi_Lambda", "xi_hat"] == pytest.approx(1.7, abs=0.05)
    assert xi.loc["xi_alpha", "xi_hat"] == pytest.approx(0.0, abs=1e-9)
    assert xi.loc["xi_Delta", "xi_hat"] == pytest.approx(-0.7, abs=0.05)
    assert result["cor49"]["residual"] == pytest.approx(0.0, abs=1e-9) and result["cor49"]["holds"]
    assert (xi["half_iqr"] >= 0).all() and xi.loc["xi_Lambda", "half_iqr"] > 0
    assert "xi_hat_Lambda = " in result["summary"] and "(axis0, axis1)" in result["summary"]


def _by_hand(blocks: list[torch.Tensor], unit: np.ndarray | None, n_boot: int) -> ExponentFit:
    """exponent() on the Lambda_n of row_stats, rows pooled from every block: the estimator applied by hand."""
    stats = pd.concat([row_stats(b.reshape(-1, b.shape[-1]), p=2) for b in blocks], ignore_index=True)
    tied = np.log10(stats["lambda_n"].astype(float)) > 5
    kept = stats[~tied]
    means = kept.groupby("n_keys")["lambda_n"].apply(lambda x: np.log(x.astype(float)).mean())
    slope = np.polyfit(np.log(np.log(means.index.to_numpy(float))), means.to_numpy(), 1)[0]
    fit = exponent(stats["n_keys"], stats["lambda_n"], exclude=tied, unit=unit, n_boot=n_boot, seed=0)
    assert fit.xi_hat == pytest.approx(slope, rel=1e-9)
    return fit


def test_gaussian_rows_give_the_hand_estimator_from_every_input_form(tmp_path):
    gen = torch.Generator().manual_seed(1)
    blocks = [torch.randn(2, 3, 5, n, generator=gen, dtype=torch.float64) for n in LENGTHS]
    unit = np.concatenate([np.indices((2, 3, 5)).reshape(3, -1)[:2].T for _ in LENGTHS])  # (layer, head) per row
    want = _by_hand(blocks, unit, 100)

    per_file = []
    for n, b in zip(LENGTHS, blocks, strict=True):
        per_file.append(tmp_path / f"n{n}.npy")
        np.save(per_file[-1], b.numpy())
    padded = torch.full((len(LENGTHS), 2, 3, 5, max(LENGTHS)), -math.inf, dtype=torch.float64)
    for i, b in enumerate(blocks):
        padded[i, ..., : b.shape[-1]] = b
    save_file({"scores": padded, "other": torch.zeros(1)}, tmp_path / "pad.safetensors")
    for paths, kw in (
        (per_file, dict(unit_axes=(0, 1))),
        ([tmp_path / "pad.safetensors"], dict(key="scores", unit_axes=(1, 2))),
    ):
        got = fit_xi.run(_cfg(paths, n_boot=100, **kw), tmp_path / f"out{len(paths)}", progress=False)
        lam = got["table"].set_index("exponent").loc["xi_Lambda"]
        assert lam["xi_hat"] == pytest.approx(want.xi_hat, rel=1e-9)
        assert lam["half_iqr"] == pytest.approx(want.half_iqr, rel=1e-9)
    with pytest.raises(RunError, match="holds 2 tensors"):
        fit_xi.run(_cfg([tmp_path / "pad.safetensors"]), tmp_path / "x", progress=False)

    # one causal (queries, keys) matrix: query i sees i + 1 keys; fit the rows of LENGTHS keys
    z = torch.randn(max(LENGTHS), max(LENGTHS), generator=gen, dtype=torch.float64)
    np.save(tmp_path / "causal.npy", z.numpy())
    got = fit_xi.run(_cfg([tmp_path / "causal.npy"], causal=True, n=LENGTHS, n_boot=50), tmp_path / "c", progress=False)
    rows = [z[n - 1 : n, :n] for n in LENGTHS]
    want = _by_hand(rows, np.arange(len(LENGTHS)), 50)  # each row its own unit
    assert got["table"].set_index("exponent").loc["xi_Lambda", "xi_hat"] == pytest.approx(want.xi_hat, rel=1e-9)
    assert list(got["per_n"]["n"]) == list(LENGTHS) and (got["per_n"]["rows"] == 1).all()


def test_command_writes_its_tables(tmp_path, capsys):
    rng = np.random.default_rng(2)
    for n in LENGTHS:
        np.save(tmp_path / f"n{n}.npy", _two_level_rows(n, 0.5, 6, rng).numpy())
    out = tmp_path / "fit"
    argv = ["fit-xi", *(str(tmp_path / f"n{n}.npy") for n in LENGTHS), "--n-boot", "20", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    stdout = capsys.readouterr().out
    assert "growth exponents of the rows of 4 score file(s)" in stdout and "xi_Lambda" in stdout
    assert sorted(p.name for p in out.iterdir()) == [
        ".attnlab-run.json",
        "config.json",
        "exponents.csv",
        "exponents.md",
        "fit_xi.csv",
        "fit_xi.md",
        "rows_contact.parquet",
    ]
    config = json.loads((out / "config.json").read_text())
    assert config["rows fitted"] == config["rows read"] == 24 and config["cor49"]["holds"]
    assert pd.read_csv(out / "fit_xi.csv")["n"].tolist() == list(LENGTHS)
    # attnlab report reads the folder back, and its command line remakes it
    section = sections.section(out)
    assert section.study == "fit-xi" and [t.stem for t in section.tables] == ["exponents", "fit_xi"]
    assert shlex.split(section.command) == ["attnlab", *argv[:5], "--n-boot", "20", "--out", str(out)]
    assert "residual" in section.notes[-1] and "24 of 24 rows fitted" in section.notes[0]
    assert main(["report", str(out), "--out", str(tmp_path / "page")]) == 0
    assert "Contact exponents of 4 score file(s)" in (tmp_path / "page" / "index.html").read_text()


def test_bad_input_is_one_clear_error(tmp_path, capsys):
    np.save(tmp_path / "one.npy", np.zeros((3, 8)))
    np.save(tmp_path / "two.npy", np.zeros((3, 16)))
    np.save(tmp_path / "ints.npy", np.zeros((3, 8), dtype=np.int64))
    save_file({"scores": torch.zeros(3, 8), "mask": torch.ones(3, 8)}, tmp_path / "masked.safetensors")
    save_file(
        {"scores": torch.zeros(3, 8), "mask": torch.ones(2, 5, dtype=torch.bool)}, tmp_path / "shaped.safetensors"
    )
    files = [str(tmp_path / "one.npy"), str(tmp_path / "two.npy")]
    cases = {
        "one length": ([str(tmp_path / "one.npy")], "at least two lengths n >= 2"),
        "missing file": ([str(tmp_path / "none.npy")], "no such file"),
        "integer scores": ([str(tmp_path / "ints.npy"), *files], "floating-point tensor"),
        "float mask": (
            [str(tmp_path / "masked.safetensors"), "--key", "scores", "--mask-key", "mask"],
            "must name a boolean tensor",
        ),
        "float mask, causal": (
            [str(tmp_path / "masked.safetensors"), "--key", "scores", "--mask-key", "mask", "--causal"],
            "must name a boolean tensor",
        ),
        # checked before the causal AND, whose broadcast failed on it with a traceback
        "misshapen mask, causal": (
            [str(tmp_path / "shaped.safetensors"), "--key", "scores", "--mask-key", "mask", "--causal"],
            "mask shape (2, 5) does not broadcast to scores shape (3, 8)",
        ),
        "unit axis beyond": ([*files, "--unit-axes", "1"], "--unit-axes [1] out of range"),
        "n not in the rows": ([*files, "--n", "8", "12"], "--n [12]: no readable row has that many allowed keys"),
        "one n": ([*files, "--n", "8"], "--n takes at least two row lengths"),
    }
    for what, (args, message) in cases.items():
        code = main(["fit-xi", *args, "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 1 and message in err and err.count("\n") == 1, (what, err)
    assert not (tmp_path / "out").exists()  # every refusal comes before anything is written
