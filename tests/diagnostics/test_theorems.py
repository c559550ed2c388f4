"""Seed 000's theorems hold on generated rows: S_p non-increasing in p, p >= p* implies S_p <= 1, ReLU^p target mass = 1 / (1 + S_p), on the kernel and the torch-ops path."""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from attnlab import rowmaps
from attnlab.diagnostics import row_stats

pytestmark = pytest.mark.usefixtures("kernel_path")

DEGREES = (1, 1.5, 2, 3, 4, 8, 16, 32)

rows = hnp.arrays(
    np.float64,
    st.tuples(st.integers(1, 6), st.integers(1, 24)),
    elements=st.one_of(st.floats(-50, 50), st.sampled_from([0.0, 1.0, 2.0, -1.0])),
)


@settings(max_examples=150, deadline=None)
@given(rows, st.floats(-3, 3))
def test_s_p_non_increasing_in_p_on_active_rows(z, b):
    df = row_stats(torch.from_numpy(z), p=DEGREES, b=b)
    active = df[df["status"] == "active"]
    s = active[[f"s_p{p:g}" for p in DEGREES]].to_numpy()
    assert (np.diff(s, axis=1) <= 1e-12 * np.maximum(s[:, :-1], 1)).all()


@settings(max_examples=150, deadline=None)
@given(rows, st.floats(-3, 3))
@example(np.array([[-0.0, 0.0, 0.0]]), 1.0)  # rho = -0.0 once gave p* = -inf, "safe" at every degree
def test_degree_above_p_star_is_safe(z, b):
    """Seed 000 Cor. 4.3: p >= p*_exact implies S_p <= 1 (weakly; exact ties give S_p = 1)."""
    df = row_stats(torch.from_numpy(z), p=DEGREES, b=b)
    active = df[(df["status"] == "active") & (df["rho"] < 0.99)]
    for p in DEGREES:
        covered = active[active["p_star"] <= p]
        assert (covered[f"s_p{p:g}"] <= 1 + 1e-9).all(), p


@settings(max_examples=100, deadline=None)
@given(rows, st.sampled_from([1, 2, 4, 16]), st.floats(-2, 2))
def test_relu_target_mass_is_one_over_one_plus_s_p(z, p, b):
    """Seed 000 eq. (3) against attnlab's own normalized ReLU^p."""
    t = torch.from_numpy(z)
    df = row_stats(t, p=(p,), b=b)
    w = rowmaps.get(f"relu_p{p}_b{b!r}")(t)
    mass = w.gather(-1, torch.tensor(df["target"].to_numpy(dtype=np.int64)).unsqueeze(-1)).squeeze(-1)
    active = (df["status"] == "active").to_numpy()
    expected = 1.0 / (1.0 + df[f"s_p{p}"].to_numpy())
    assert np.allclose(mass.numpy()[active], expected[active], rtol=1e-9, atol=1e-12)


def test_p_star_is_tight_for_equal_distractors():
    """A distractors all at u_* (1 - rho): S_p = A (1 - rho)^p, so S_p = 1 exactly at p = p*."""
    a, rho = 7, 0.3
    z = torch.tensor([[1.0] + [1.0 - rho] * a + [-1.0] * 3], dtype=torch.float64)
    df = row_stats(z, p=(2,))
    ps = df["p_star"].iloc[0]
    assert math.isclose(ps, math.log(a) / math.log(1 / (1 - rho)))
    at = row_stats(z, p=(ps,))
    assert math.isclose(at[f"s_p{ps:g}"].iloc[0], 1.0, rel_tol=1e-5)
