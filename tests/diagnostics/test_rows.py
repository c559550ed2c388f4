"""row_stats matches a per-row brute-force loop for status, margins, S_p, p*, dispersion and sink mass, on random and hand-built rows, on the kernel and the torch-ops path."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import rowmaps
from attnlab.diagnostics import row_stats
from diagnostics.row_refs import concentration_row, dispersion_row, sink_key, softmax_row

pytestmark = pytest.mark.usefixtures("kernel_path")

PS = (2, 4, 8, 16)


def _close(a, b, rel=1e-9, abs_=1e-12):
    if isinstance(b, float) and math.isnan(b):
        return isinstance(a, float) and math.isnan(a) or a is pd.NA
    if b == math.inf or b == -math.inf:
        return a == b
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=abs_)


def _random_rows(seed, rows=40, n=33, masked=True):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, n, generator=g, dtype=torch.float64) * 2
    z[::7, 3] = z[::7, 5]  # ties among distractors
    mask = torch.rand(rows, n, generator=g) > 0.3 if masked else torch.ones(rows, n, dtype=torch.bool)
    mask[:, 0] = True
    return z, mask


@pytest.mark.parametrize("b,tau", [(0.0, None), (0.7, None), (-0.5, None), (0.3, 2.5)])
def test_concentration_matches_loop(b, tau):
    z, mask = _random_rows(1)
    df = row_stats(z, mask, p=PS, b=b, tau=tau)
    for i in range(z.shape[0]):
        ref = concentration_row(z[i].tolist(), mask[i].tolist(), b=b, tau=tau, ps=PS)
        got = df.iloc[i]
        for k, v in ref.items():
            if k == "status":
                assert got[k] == v, (i, k)
            else:
                assert _close(got[k], float(v) if not isinstance(v, bool) else v), (i, k, got[k], v)


def test_answer_key_target_matches_loop():
    z, mask = _random_rows(2)
    g = torch.Generator().manual_seed(3)
    target = torch.stack(
        [torch.nonzero(m).flatten()[torch.randint(0, int(m.sum()), (1,), generator=g)] for m in mask]
    ).squeeze(-1)
    df = row_stats(z, mask, target=target, b=0.5)
    assert (~df["target_is_max"]).sum() > 0, "the test needs targets that are not the row argmax"
    for i in range(z.shape[0]):
        ref = concentration_row(z[i].tolist(), mask[i].tolist(), b=0.5, target=int(target[i]), ps=PS)
        for k in ("delta", "rho", "a_act", "s_p2", "s_p16", "p_star", "target_is_max"):
            assert _close(df[k].iloc[i], ref[k]), (i, k)


@pytest.mark.parametrize("beta", [0.3, 1.0, 4.0])
def test_softmax_dispersion_and_sink_match_loop(beta):
    z, mask = _random_rows(4)
    df = row_stats(z, mask, beta=beta, sink=1)
    for i in range(z.shape[0]):
        zi, mi = z[i].tolist(), mask[i].tolist()
        w = softmax_row(zi, mi, beta)
        ref = dispersion_row(w, mi)
        for k, v in ref.items():
            assert _close(df[k].iloc[i], v, rel=1e-9, abs_=1e-12), (i, k, df[k].iloc[i], v)
        key = sink_key(mi, 1)
        assert _close(df["sink_mass"].iloc[i], w[key] if key is not None else math.nan)
        assert _close(df["target_mass"].iloc[i], max(w))


@pytest.mark.parametrize("name", ["entmax_a1.5", "sparsemax", "relu_p2_b0.5", "softmax_t0.5"])
def test_dispersion_of_other_maps_matches_loop(name):
    z, mask = _random_rows(5)
    df = row_stats(z, mask, rowmap=name, beta=2.0)
    w_all = rowmaps.get(name)(z * 2.0, mask)
    for i in range(z.shape[0]):
        ref = dispersion_row(w_all[i].tolist(), mask[i].tolist())
        for k, v in ref.items():
            assert _close(df[k].iloc[i], v, rel=1e-9, abs_=1e-12), (name, i, k)
    if name != "softmax_t0.5":
        assert (df["support"] < df["n_keys"]).any(), "sparse maps must show exact zeros"


def test_sink_not_yet_visible_is_nan():
    z = torch.zeros(4, 4, dtype=torch.float64)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    df = row_stats(z, causal, sink=2)
    assert df["sink_mass"].isna().tolist() == [True, True, False, False]
    assert np.allclose(df["sink_mass"].iloc[2:], [1 / 3, 1 / 4])


def test_boundary_equality_strict_unsafe_eps_safe():
    """Seed 000 App. P: a tied distractor gives S_p == 1 exactly; strict says unsafe, eps = 1e-6 safe."""
    df = row_stats(torch.tensor([[2.0, 2.0, -1.0]]), p=PS)
    row = df.iloc[0]
    assert row["delta"] == 0 and row["rho"] == 0 and row["a_act"] == 1
    for p in PS:
        assert row[f"s_p{p}"] == 1.0
        assert not row[f"safe_p{p}"] and row[f"safe_eps_p{p}"]
        assert row[f"pred_safe_p{p}"]  # A (1 - rho)^p = 1 <= 1: Cor. 4.3's weak safety holds


def test_hand_built_rows():
    z = torch.tensor(
        [
            [1.0, -1.0, -2.0],  # A_act = 0
            [-1.0, -2.0, -3.0],  # dead at b = 0
            [1.0, 1e-9, 1e-9],  # rho -> 1 (clipped at 0.99)
            [1.0, 1.0, 1.0],  # rho = 0, A = 2: no degree suffices
            [3.0, 1.0, 0.5],  # ordinary row
        ],
        dtype=torch.float64,
    )
    df = row_stats(z)
    assert df["a_act"].tolist()[0] == 0 and df["s_p2"].iloc[0] == 0 and df["p_star"].iloc[0] == 0
    assert df["status"].iloc[1] == "dead" and math.isnan(df["s_p2"].iloc[1]) and math.isnan(df["rho"].iloc[1])
    assert df["safe_p2"].isna().iloc[1] and df["pred_safe_p2"].isna().iloc[1]
    assert df["p_star"].iloc[2] == pytest.approx(math.log(2) / math.log(100))
    assert df["p_star"].iloc[3] == math.inf and not df["pred_safe_p16"].iloc[3]
    assert df["s_p2"].iloc[4] == pytest.approx((1 / 3) ** 2 + (0.5 / 3) ** 2)
    sat = row_stats(torch.tensor([[3.0, 1.0]]), tau=2.0)
    assert sat["status"].iloc[0] == "saturated" and sat["s_p2"].iloc[0] == pytest.approx(0.25)


def test_special_rows_are_labelled_not_mixed():
    z = torch.tensor([[1.0, 0.0], [math.nan, 0.0], [math.inf, 0.0], [1.0, 2.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True], [True, True], [True, True], [False, False]])
    df = row_stats(z, mask)
    assert df["status"].tolist() == ["active", "nan", "inf", "empty"]
    assert df.iloc[1:][["s_p2", "entropy", "rho", "sink_mass"]].isna().all().all()
    assert df["safe_p2"].iloc[1:].isna().all() and df["a_act"].iloc[1:].isna().all()
    masked_nan = row_stats(torch.tensor([[1.0, math.nan]]), torch.tensor([[True, False]]))
    assert masked_nan["status"].iloc[0] == "active"


def test_leading_dims_flatten_in_c_order_and_dtypes():
    z = torch.randn(2, 3, 5, 7)
    df = row_stats(z)
    assert len(df) == 30
    flat = row_stats(z.reshape(30, 7))
    pd.testing.assert_frame_equal(df, flat)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        out = row_stats(z.to(dtype))
        ref = row_stats(z.to(dtype).double())
        pd.testing.assert_frame_equal(out, ref)


@pytest.mark.parametrize(
    "bad,err,match",
    [
        (lambda: row_stats(torch.tensor(1.0)), ValueError, "at least one dimension"),
        (lambda: row_stats(torch.zeros(3, 0)), ValueError, "empty key axis"),
        (lambda: row_stats(torch.zeros(3, 4, dtype=torch.int64)), TypeError, "dtype torch.int64"),
        (lambda: row_stats(torch.zeros(3, 4), torch.ones(3, 5, dtype=torch.bool)), ValueError, "mask shape"),
        (lambda: row_stats(torch.zeros(3, 4), torch.ones(3, 4)), TypeError, "mask must be a bool"),
        (lambda: row_stats(torch.zeros(3, 4), target=torch.tensor([0, 1])), ValueError, "target shape"),
        (lambda: row_stats(torch.zeros(3, 4), target=torch.tensor([0, 1, 4])), ValueError, r"\[0, 4\)"),
        (
            lambda: row_stats(torch.zeros(3, 4), target="a"),
            TypeError,
            "target must hold integer key indices .* got str",
        ),
        (lambda: row_stats(torch.zeros(2, 4), target=[[0], [1, 2]]), TypeError, "got list"),
        (lambda: row_stats(torch.zeros(2, 4), target=torch.tensor([1j, 0j])), TypeError, "dtype torch.complex64"),
        (
            lambda: row_stats(torch.zeros(1, 4), torch.tensor([[True, False, True, True]]), target=1),
            ValueError,
            "masked key",
        ),
        (lambda: row_stats(torch.zeros(3, 4), p=()), ValueError, "p must be"),
        (lambda: row_stats(torch.zeros(3, 4), tau=0.0), ValueError, "tau"),
        (lambda: row_stats(torch.zeros(3, 4), beta=-1.0), ValueError, "beta"),
        (lambda: row_stats(torch.zeros(3, 4), rowmap="wortsman_p2_L"), ValueError, "normalized"),
        (lambda: row_stats(torch.zeros(3, 4), rowmap="nope"), ValueError, "nope"),
    ],
)
def test_malformed_input_is_named(bad, err, match):
    with pytest.raises(err, match=match):
        bad()


def test_several_betas_get_suffixes():
    df = row_stats(torch.randn(4, 9), beta=(0.5, 2.0))
    assert {"entropy_beta0.5", "entropy_beta2", "sink_mass_beta2", "p_star_n_beta0.5"} <= set(df.columns)
    assert "entropy" not in df.columns


def test_blocks_of_rows_give_the_same_table(monkeypatch):
    """row_stats works a block of rows at a time (bounded memory); the blocking must not show."""
    from attnlab.diagnostics import rows as rows_module

    z, mask = _random_rows(6, rows=37, n=600)
    z[5, 2] = math.nan
    target = torch.zeros(37, dtype=torch.int64)
    whole = row_stats(z, mask, target=target, r="auto")
    monkeypatch.setattr(rows_module, "CHUNK_VALUES", 5 * 600)  # 5 rows a block, the last one short
    pd.testing.assert_frame_equal(row_stats(z, mask, target=target, r="auto"), whole)


def test_subnormal_weights_count_in_the_support_as_the_weights_do():
    """Support counts w > 0 with w = e / Z: exp(-744) is subnormal but positive, while exp(-744.4) / 4
    rounds to 0 (the kernel recounts such rows exactly)."""
    z = torch.tensor([[0.0, -744.0, -800.0, -math.inf], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    z[1, 3] = -744.4
    df = row_stats(z, torch.tensor([[True, True, True, False], [True] * 4]))
    for i in range(2):
        w = softmax_row(z[i].tolist(), [True] * 3 + [i == 1])
        assert df["support"].iloc[i] == sum(1 for x in w if x > 0) == [2, 3][i]


def test_diverse_rows_match_the_other_path(kernel_path, monkeypatch):
    """Both paths give the same table (up to rounding) on long rows with ties, plateaus, masks and targets,
    at 1 and 2 threads."""
    from attnlab.diagnostics import kernel

    z, mask = _random_rows(7, rows=24, n=3000)
    z[0] = torch.round(z[0] * 4) / 4
    z[1, 10] = z[1].max()
    z[2, :50] = 5.0
    target = torch.randint(0, 3000, (24,), generator=torch.Generator().manual_seed(7))
    mask[torch.arange(24), target] = True
    kw = dict(target=target, b=0.3, tau=4.0, p=(1, 2, 2.5, 3, 16), beta=(0.5, 2.0), sink=3, r="auto")
    got = row_stats(z, mask, **kw)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pd.testing.assert_frame_equal(row_stats(z, mask, **kw), got)
    finally:
        torch.set_num_threads(threads)
    if kernel_path == "kernel":
        monkeypatch.setattr(kernel, "get", lambda: None)
    else:
        monkeypatch.undo()  # the fixture's switch to the torch path
        if kernel.get() is None:
            pytest.skip(kernel.status())
    other = row_stats(z, mask, **kw)
    pd.testing.assert_frame_equal(other, got, rtol=1e-12, atol=1e-14)
