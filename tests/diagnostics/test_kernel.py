"""The diagnostics kernel takes only CPU contiguous float64 rows; each of its columns equals row_stats' torch path."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import native
from attnlab.diagnostics import kernel, row_stats

P = (1, 2, 2.5, 16)
GAPS = {
    "lambda": "lambda_n",
    "cgap": "contact_gap",
    "ccount": "contact_count",
    "alpha": "alpha_n",
    "cent": "contact_entropy",
}
FIXED = (
    "n_keys",
    "first",
    "second",
    "rest",
    "a_act",
    "sink",
    "lambda",
    "tie",
    "cgap",
    "ccount",
    "alpha",
    "cent",
    "lam_r",
)
PER_BETA = ("entropy", "support", "max_weight", "top2_gap", "target_mass", "sink_mass")


@pytest.fixture
def loaded():
    k = kernel.get()
    if k is None:
        pytest.skip(kernel.status())
    return k


@pytest.fixture
def library_off(monkeypatch):
    monkeypatch.setattr(native, "library", lambda: None)


def test_for_rows_takes_only_cpu_contiguous_float64(loaded):
    z = torch.randn(4, 6, dtype=torch.float64)
    assert kernel.for_rows(z) is loaded
    assert kernel.for_rows(z.t()) is None, "a transposed view is not contiguous"
    assert kernel.for_rows(z[:, ::2]) is None
    assert kernel.for_rows(z.float()) is None and kernel.for_rows(z.to(torch.bfloat16)) is None
    assert kernel.for_rows(torch.empty(4, 6, dtype=torch.float64, device="meta")) is None


def test_with_the_library_off_there_is_no_kernel(library_off):
    assert kernel.get() is None
    assert kernel.for_rows(torch.zeros(3, 5, dtype=torch.float64)) is None


def _rows():
    """12 rows of 40 keys, -inf at masked ones: random, tied maxima, a plateau, one or two allowed keys."""
    g = torch.Generator().manual_seed(11)
    z = torch.randn(12, 40, generator=g, dtype=torch.float64) * 2
    z[torch.rand(12, 40, generator=g) < 0.3] = -math.inf
    z[:, 5] = torch.randn(12, generator=g, dtype=torch.float64)  # every row keeps an allowed key
    z[1, 9] = z[1, 20] = z[1].max() + 1  # two maxima
    z[2, :] = 0.5  # a plateau
    z[3, :] = -math.inf
    z[3, 7] = 1.0  # one allowed key
    z[4, :] = -math.inf
    z[4, 30], z[4, 2] = 0.25, 3.0  # two
    z[5] = torch.round(z[5] * 2) / 2  # many ties below the maximum
    return z.contiguous()


def _brute(z, sink):
    """second (runner-up, first index, the argmax itself when alone), rest (its score) and sink (the
    sink-th allowed key, -1 where there is none), by loops."""
    second, rest, sinks = [], [], []
    for row in z.tolist():
        keys = [j for j, v in enumerate(row) if v > -math.inf]
        first = max(keys, key=lambda j: (row[j], -j))
        others = [j for j in keys if j != first]
        best = max(others, key=lambda j: (row[j], -j)) if others else first
        second.append(best)
        rest.append(row[best] if others else -math.inf)
        sinks.append(keys[sink] if sink < len(keys) else -1)
    return second, rest, sinks


def _col(frame, name):
    values = frame[name]
    if values.dtype == "boolean":
        return values.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    return values.astype(float).to_numpy(dtype=float, na_value=np.nan)


@pytest.mark.parametrize(
    "with_target, b, tau, betas, sink, r",
    [
        (False, 0.0, None, (1.0,), 0, None),
        (False, 0.4, 3.0, (0.5, 2.0), 2, 0.5),
        (True, -0.3, None, (1.0, 3.0), 1, "auto"),
    ],
)
def test_kernel_columns_equal_the_torch_path(loaded, monkeypatch, with_target, b, tau, betas, sink, r):
    z = _rows()
    allowed = z > -math.inf
    target = None
    if with_target:
        g = torch.Generator().manual_seed(3)
        target = (
            torch.stack(
                [torch.nonzero(m).flatten()[torch.randint(0, int(m.sum()), (1,), generator=g)] for m in allowed]
            )
            .squeeze(-1)
            .contiguous()
        )
    eps = 1e-6
    r_mode, r_value = {None: (0, 0.0), "auto": (2, 0.0)}.get(r, (1, r))
    table = loaded.diag_rows(
        z,
        target,
        b,
        tau,
        torch.tensor(P, dtype=torch.float64),
        torch.tensor(betas, dtype=torch.float64),
        sink,
        eps,
        r_mode,
        r_value,
    )
    assert table.shape == (kernel.DIAG_FIXED + len(P) + kernel.DIAG_PER_BETA * len(betas), z.shape[0])
    got = dict(zip(FIXED, table[: kernel.DIAG_FIXED].numpy()))

    monkeypatch.setattr(native, "library", lambda: None)
    ref = row_stats(z, allowed, target=target, b=b, tau=tau, p=P, beta=betas, sink=sink, eps=eps, r=r)

    def same(values, expected, what):
        np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-14, equal_nan=True, err_msg=what)

    second, rest, sinks = _brute(z, sink)
    same(got["n_keys"], allowed.sum(-1).numpy(), "n_keys")
    same(got["n_keys"], _col(ref, "n_keys"), "n_keys")
    same(got["first"], _col(ref, "argmax"), "first")
    same(got["second"], second, "second")
    same(got["rest"], rest, "rest")
    same(got["a_act"], _col(ref, "a_act"), "a_act")
    same(got["sink"], sinks, "sink")
    same(got["tie"] > 0, _col(ref, "tie") > 0, "tie")
    for mine, theirs in GAPS.items():
        same(got[mine], _col(ref, theirs), mine)
    if r is not None:
        same(got["lam_r"], _col(ref, "lambda_resolved"), "lambda_resolved")
    for i, p in enumerate(P):
        same(table[kernel.DIAG_FIXED + i].numpy(), _col(ref, f"s_p{p:g}"), f"s_p{p:g}")
    per_beta = table[kernel.DIAG_FIXED + len(P) :].reshape(len(betas), kernel.DIAG_PER_BETA, z.shape[0]).numpy()
    for beta, cols in zip(betas, per_beta):
        suffix = "" if len(betas) == 1 else f"_beta{beta:g}"
        for name, values in zip(PER_BETA, cols):
            same(values, _col(ref, name + suffix), name + suffix)


def test_row_stats_hands_the_kernel_one_contiguous_float64_copy(loaded, monkeypatch):
    # row_stats upcasts every block to one contiguous float64 copy, so any input dtype reaches the kernel
    calls = []
    real = kernel.for_rows

    def spy(zm):
        calls.append((zm.dtype, zm.is_contiguous()))
        return real(zm)

    monkeypatch.setattr(kernel, "for_rows", spy)
    z = torch.randn(3, 2, 9)
    on = row_stats(z)
    assert calls == [(torch.float64, True)]
    monkeypatch.setattr(native, "library", lambda: None)
    pd.testing.assert_frame_equal(row_stats(z), on, rtol=1e-12, atol=1e-14)
