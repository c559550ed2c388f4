"""The scaled softmaxes (temperature, Scalable-Softmax, log-length) keep float32 precision on rows far from 0: they match float64 references at offsets up to 3e5, masked and not."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab import rowmaps
from rowmaps.rowmap_refs import assert_close_np, ref_logn, ref_softmax, ref_ssmax

# float32 rounds the scaled scores c (z - max z) by 6e-8 relative; |c (z - max z)| <= ~30 where a
# weight is above 1e-13, so weights are off by ~2e-6 relative at worst.
TOL = 2e-6


def _reference(rm, z, mask):
    if rm.family == "ssmax":
        return ref_ssmax(z, mask, rm.params["s"])
    if rm.family == "logn":
        return ref_logn(z, mask, rm.params["xi"], rm.params["n_train"])
    return ref_softmax(z, mask, lambda L: 1.0 / rm.params["t"])


@pytest.mark.parametrize("name", ["ssmax_s0.43", "ssmax_s1", "softmax_t0.7", "softmax_t0.5", "logn_xi2_n8"])
@pytest.mark.parametrize("offset", [3e5, -3e5, 1e4, 0.0])
def test_offset_rows_match_float64(name, offset):
    rm = rowmaps.get(name)
    g = torch.Generator().manual_seed(11)
    z = torch.randn(8, 64, generator=g) + offset
    mask = torch.rand(8, 64, generator=g) > 0.3
    for m in (None, mask):
        assert_close_np(rm(z, m), _reference(rm, z, m), TOL, rtol=TOL, msg=f"{name} offset={offset:g}:")


def test_reported_ssmax_row():
    z = torch.randn(64, generator=torch.Generator().manual_seed(0)) + 3e5
    zz = z.double() - z.double().max()
    ref = torch.softmax(zz * 0.43 * math.log(64), -1)
    assert (rowmaps.get("ssmax_s0.43")(z).double() - ref).abs().max() < TOL
