"""`attnlab diagnose` equals row_stats per bias, says each bad input in one line and replaces only its own --out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnlab.cli import main


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
