"""`attnlab maps` lists every row-map family, and `attnlab demo` writes CSV/Markdown/PNG/config whose sums and supports match an independent float64 recount."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attnlab.cli import main
from attnlab.rowmaps import FAMILIES

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
        w = r[r > 0] ** p / (r ** p).sum()
        assert w.min() > 1e-30, "a weight is near float32 underflow, where the count is ambiguous"
        return int((r > 0).sum()), None
    if name == "wortsman_p2_sqrtL":
        return int((z > 0).sum()), float((np.clip(z, 0, None) ** 2).sum() / np.sqrt(n))
    if name == "reluattn":
        return int((z > 0).sum()), float(np.clip(z, 0, None).sum() / max(n - 2, 1))
    raise AssertionError(f"no reference for {name}")


def test_maps_lists_every_family(capsys):
    assert main(["maps"]) == 0
    out = capsys.readouterr().out
    for fam in FAMILIES.values():
        assert fam.example in out
        assert fam.source.split()[0] in out
    assert "C kernel (row maps, diagnostics): o" in out


def test_module_entry_point_runs():
    done = subprocess.run([sys.executable, "-m", "attnlab", "maps"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    for fam in FAMILIES.values():
        assert fam.example in done.stdout


def test_help_and_bad_input_exit_cleanly(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "maps" in out and "demo" in out
    for argv in (["no-such-command"], ["demo", "--seed", "x"], []):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert "error" in capsys.readouterr().err


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


# ------------------------------------------------------------------------------------------ diagnose


def _scores(tmp_path, suffix, tensors):
    import torch

    path = tmp_path / f"scores{suffix}"
    if suffix == ".npy":
        np.save(path, next(iter(tensors.values())).numpy())
    elif suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(tensors, path)
    else:
        torch.save(tensors if len(tensors) > 1 else next(iter(tensors.values())), path)
    return path


@pytest.mark.parametrize("suffix", [".npy", ".safetensors", ".pt"])
def test_diagnose_matches_row_stats_and_keeps_rows(tmp_path, capsys, suffix):
    import torch

    from attnlab.diagnostics import row_stats

    z = torch.randn(2, 3, 5, 8, generator=torch.Generator().manual_seed(1))
    path = _scores(tmp_path, suffix, {"scores": z})
    out = tmp_path / "rows.parquet"
    assert main(["diagnose", str(path), "--b", "0", "0.5", "--p", "2", "4", "--causal", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "safe% p2" in printed and "pred-safe% p4" in printed and f"wrote {out}" in printed
    rows = pd.read_parquet(out)
    causal = torch.ones(5, 8, dtype=torch.bool).tril(3)
    for b in (0.0, 0.5):
        ref = row_stats(z, causal, p=(2, 4), b=b)
        got = rows[rows["b"] == b].drop(columns=["b", "row"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, ref, check_dtype=False)


def test_diagnose_errors_are_one_line(tmp_path, capsys):
    import torch

    many = _scores(tmp_path, ".safetensors", {"a": torch.zeros(2, 3), "b": torch.zeros(2, 3)})
    ints = tmp_path / "ints.npy"
    np.save(ints, np.zeros((2, 3), dtype=np.int64))
    cases = [
        ([str(tmp_path / "missing.npy")], "no such file"),
        ([str(tmp_path / "x.csv")], "unknown tensor file type"),
        ([str(many)], "holds 2 tensors ['a', 'b']"),
        ([str(many), "--key", "c"], "has no tensor 'c'"),
        ([str(ints)], "dtype torch.int64"),
        ([str(many), "--key", "a", "--tau", "-1"], "tau must be"),
    ]
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10" + b"\x00" * 7 + b"{garbage}" + b"x" * 40)
    pickled = tmp_path / "pickled.pt"
    torch.save({"x": _Pickled()}, pickled)
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    cases += [
        ([str(bad)], "bad.safetensors: not a readable .safetensors tensor file"),
        ([str(pickled)], "holds Python objects beyond tensors, which attnlab never unpickles"),
        ([str(objects)], "not a readable .npy tensor file (Object arrays cannot be loaded"),
    ]
    for args, message in cases:
        assert main(["diagnose", *args]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


class _Pickled:
    def __reduce__(self):
        return (print, ("unpickled!",))


def test_diagnose_replaces_only_its_own_output(tmp_path, capsys):
    import torch

    scores = _scores(tmp_path, ".npy", {"s": torch.randn(3, 6, generator=torch.Generator().manual_seed(0))})
    out = tmp_path / "rows.parquet"
    out.write_text("a user's file\n")
    assert main(["diagnose", str(scores), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "was not written by this diagnose command; pass --overwrite" in err and err.count("\n") == 1
    assert out.read_text() == "a user's file\n"
    assert main(["diagnose", str(scores), "--out", str(out), "--overwrite"]) == 0
    assert main(["diagnose", str(scores), "--out", str(out)]) == 0, "the same command may rewrite its own file"
    assert main(["diagnose", str(scores), "--b", "1", "--out", str(out)]) == 1
    assert "not written by this diagnose command" in capsys.readouterr().err


def test_train_resume_on_a_missing_folder_is_refused(tmp_path, capsys):
    tiny = Path(__file__).resolve().parents[2] / "examples" / "tiny.yaml"
    assert main(["train", str(tiny), "--resume", "--out", str(tmp_path / "nothing"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "does not exist; drop --resume" in err and err.count("\n") == 1
    assert not (tmp_path / "nothing").exists()


def test_tasks_lists_every_task_and_shows_one(capsys):
    from attnlab.tasks import TASKS

    assert main(["tasks"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in TASKS)
    assert main(["tasks", "copy", "--length", "12"]) == 0
    assert "<sep>" in capsys.readouterr().out
    assert main(["tasks", "nope"]) == 1
    assert "unknown task 'nope'; known tasks: 2back" in capsys.readouterr().err


def test_a_warmup_longer_than_the_run_is_said_not_silent(tmp_path, capsys):
    tiny = Path(__file__).resolve().parents[2] / "examples" / "tiny.yaml"
    assert main(["train", str(tiny), "--set", "train.steps=2", "--set", "data.max_tokens=4000", "--out",
                 str(tmp_path / "run"), "--no-progress"]) == 0
    assert "note: train.warmup (24) exceeds train.steps (2)" in capsys.readouterr().err
