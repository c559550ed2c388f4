"""Every compiled-kernel row map (alpha-entmax at alpha 1.25, 1.5, 2; ReLU^p) matches a float64 reference on rows offset up to 1e30, float32 and float64, on the kernel and torch-ops paths."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnlab import rowmaps
from rowmaps.rowmap_refs import SUM_TOL, assert_close_np, np64, ref_entmax, ref_relu_power

pytestmark = pytest.mark.usefixtures("kernel_path")

MAPS = ("entmax_a1.25", "entmax_a1.5", "entmax_a2", "sparsemax", "relu_p2_b1", "relu_p4_b1", "relu_p16_b1")
DTYPES = (torch.float32, torch.float64)
# Absolute error of one weight: the float64 path is exact to rounding; the float32 path rounds
# r = (alpha-1)(z - max z) - theta once per operation (relative 6e-8 on |r| <= 8 here) and raises it to
# k <= 16, so a few float32 ulps at 1.
TOL = {torch.float32: 2e-6, torch.float64: 1e-12}


def _reference(name: str, z: torch.Tensor) -> np.ndarray:
    """The map in float64 on the input as given (each reference shifts by the row max itself)."""
    rm = rowmaps.get(name)
    if rm.family == "entmax":
        return ref_entmax(z, None, rm.params["alpha"])
    return ref_relu_power(z, None, rm.params["p"], rm.params["b"])


def _ulp(x: float, dtype: torch.dtype) -> float:
    return math.ulp(x) if dtype == torch.float64 else float(np.spacing(np.float32(x)))


@st.composite
def offset_rows(draw, dtype):
    """Rows offset + spacing * v, |offset| in [1, 1e30] (log-uniform) or 3e5, v in [-8, 8], rounded to
    ``dtype``; the spacing is 1 or one ulp of the offset, so rows far out still hold distinct keys."""
    magnitude = draw(st.one_of(st.floats(0, 30).map(lambda e: 10.0**e), st.just(3e5)))
    offset = magnitude * draw(st.sampled_from([1, -1]))
    spacing = draw(st.sampled_from([1.0, 0.25, _ulp(magnitude, dtype)]))
    rows, n = draw(st.integers(1, 3)), draw(st.integers(1, 12))
    v = draw(st.lists(st.lists(st.floats(-8, 8), min_size=n, max_size=n), min_size=rows, max_size=rows))
    return (offset + spacing * torch.tensor(v, dtype=torch.float64)).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", MAPS)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_offset_rows_match_the_float64_reference(name, dtype, data):
    z = data.draw(offset_rows(dtype))
    assert_close_np(rowmaps.get(name)(z), _reference(name, z), TOL[dtype], msg=f"{name} z={z.tolist()}:")


@pytest.mark.parametrize("name", MAPS)
def test_gaussian_rows_at_3e5_sum_to_one(name):
    """float32 rows randn + 3e5 (input ulp 1/32): sums within float32 rounding and the float64 value."""
    g = torch.Generator().manual_seed(7)
    z = torch.randn(2000, 16, generator=g) + 3e5
    p = rowmaps.get(name)(z)
    assert np.abs(np64(p).sum(-1) - 1).max() <= SUM_TOL[torch.float32]
    assert_close_np(p, _reference(name, z), TOL[torch.float32], msg=name)


@pytest.mark.parametrize("name", MAPS[:4])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_reported_rows(name, dtype):
    """A key 16 below a top key at 1e8, a constant row at -1e10 and a row at 1e30 (float64 1e30 - 2^50)."""
    far = 2.0**50 if dtype == torch.float64 else 2.0**77
    for row in ([1e8, 1e8 - 16, 0.0], [-1e10] * 3, [1e30, 1e30, 1e30 - far]):
        z = torch.tensor(row, dtype=dtype)
        assert_close_np(rowmaps.get(name)(z), _reference(name, z), TOL[dtype], msg=f"{name} {row}:")
