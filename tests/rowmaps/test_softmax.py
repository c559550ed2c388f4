"""softmax, temperature, SSMax, log-n scaling and top-k softmax match float64 loops, with masks (L = allowed keys), and have correct gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab import rowmaps
from rowmaps.rowmap_refs import UNIT, assert_close_np, np64, ref_logn, ref_softmax, ref_ssmax, ref_topk

TOL = {torch.float32: 1e-5, torch.float64: 1e-12}

# name -> reference(z, mask)
CASES = {
    "softmax": lambda z, m: ref_softmax(z, m),
    "softmax_t0.5": lambda z, m: ref_softmax(z, m, lambda L: 1 / 0.5),
    "softmax_t2": lambda z, m: ref_softmax(z, m, lambda L: 1 / 2.0),
    "ssmax_s0.43": lambda z, m: ref_ssmax(z, m, 0.43),
    "logn_xi2_n8": lambda z, m: ref_logn(z, m, 2.0, 8),
    "logn_xi0.5_n16": lambda z, m: ref_logn(z, m, 0.5, 16),
    "topk_k3": lambda z, m: ref_topk(z, m, 3),
    "topk_k1": lambda z, m: ref_topk(z, m, 1),
}


def _data(rows, n, scale, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(rows, n, generator=g, dtype=torch.float64) * scale).to(dtype)
    mask = torch.rand(rows, n, generator=g) > 0.35
    mask[0] = True  # every key allowed
    if rows > 2:
        mask[1] = False  # no allowed key
        mask[2] = False
        mask[2, n // 2] = True  # exactly one allowed key
    return z, mask


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_matches_float64_loop(name, dtype):
    rm = rowmaps.get(name)
    ref = CASES[name]
    for n in (1, 2, 5, 17, 40):
        for scale in (0.1, 1.0, 5.0):
            z, mask = _data(5, n, scale, seed=100 * n + int(10 * scale), dtype=dtype)
            assert_close_np(rm(z), ref(z, None), TOL[dtype], msg=f"{name} n={n} s={scale} nomask:")
            out = rm(z, mask)
            assert_close_np(out, ref(z, mask), TOL[dtype], msg=f"{name} n={n} s={scale} mask:")
            o = np64(out)
            assert (o[~mask.numpy()] == 0).all()
            sums = o.sum(-1)
            want = mask.any(-1).double().numpy()
            assert np.abs(sums - want).max() <= TOL[dtype]


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_low_precision_inputs(name, dtype):
    """bf16/fp16 in, same dtype out, within 2 unit roundoffs of the reference of the rounded input."""
    z, mask = _data(5, 17, 3.0, seed=71, dtype=dtype)
    out = rowmaps.get(name)(z, mask)
    assert out.dtype == dtype
    assert_close_np(out, CASES[name](z, mask), 2 * UNIT[dtype], msg=name)


def test_length_scalings_use_allowed_keys_not_row_length():
    """ssmax/logn read L = number of allowed keys: masking keys changes the scale of the rest."""
    z = torch.tensor([[2.0, 1.0, 0.5, -1.0] + [0.0] * 28], dtype=torch.float64)
    mask = torch.zeros_like(z, dtype=torch.bool)
    mask[0, :4] = True  # L = 4 of 32 keys
    for name, scale in (
        ("ssmax_s0.43", lambda L: 0.43 * math.log(L)),
        ("logn_xi2_n2", lambda L: max(1.0, math.log(L) / math.log(2)) ** 2),
    ):
        out = np64(rowmaps.get(name)(z, mask))[0, :4]
        v = np.array([2.0, 1.0, 0.5, -1.0]) * scale(4)
        expected = np.exp(v - v.max()) / np.exp(v - v.max()).sum()
        assert np.abs(out - expected).max() < 1e-12, name
        # and -inf scores count as masked for L as well
        z2 = z.clone()
        z2[0, 4:] = float("-inf")
        assert np.abs(np64(rowmaps.get(name)(z2))[0, :4] - expected).max() < 1e-12, name


def test_logn_is_plain_softmax_up_to_n_train():
    """m(L) = max(1, log L / log n_train)^xi is 1 for L <= n_train."""
    g = torch.Generator().manual_seed(3)
    z = torch.randn(3, 8, generator=g, dtype=torch.float64) * 3
    assert_close_np(rowmaps.get("logn_xi2_n8")(z), ref_softmax(z, None), 1e-12)
    z = torch.randn(3, 64, generator=g, dtype=torch.float64)
    # log 64 / log 8 = 2, so the multiplier is 2^2 = 4 exactly.
    assert_close_np(rowmaps.get("logn_xi2_n8")(z), ref_softmax(z, None, lambda L: 4.0), 1e-12)


def test_topk_keeps_all_ties_at_kth_value():
    z = torch.tensor(
        [[5.0, 3.0, 3.0, 3.0, 1.0, 0.0], [3.0, 3.0, 3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]],
        dtype=torch.float64,
    )
    out = np64(rowmaps.get("topk_k3")(z))
    e = math.exp(5.0) + 3 * math.exp(3.0)
    assert np.allclose(
        out[0], [math.exp(5) / e, math.exp(3) / e, math.exp(3) / e, math.exp(3) / e, 0, 0], atol=1e-14, rtol=0
    )
    assert np.allclose(out[1], np.full(6, 1 / 6), atol=1e-14, rtol=0)
    e3 = math.exp(4) + math.exp(5) + math.exp(6)
    assert np.allclose(out[2], [0, 0, 0, math.exp(4) / e3, math.exp(5) / e3, math.exp(6) / e3], atol=1e-14, rtol=0)
    # key order does not matter
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    assert np.array_equal(np64(rowmaps.get("topk_k3")(z[:, perm])), out[:, perm.numpy()])


def test_topk_with_fewer_allowed_keys_than_k():
    z = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    mask = torch.tensor([[True, False, True, False]])
    out = rowmaps.get("topk_k3")(z, mask)
    assert_close_np(out, ref_softmax(z, mask), 1e-14)
    assert_close_np(rowmaps.get("topk_k32")(z), ref_softmax(z, None), 1e-14)


def test_softmax_temperature_zero_or_negative_rejected():
    for name in ("softmax_t0", "softmax_t-1", "ssmax_s0", "ssmax_s-0.5"):
        with pytest.raises(ValueError):
            rowmaps.get(name)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("with_mask", [False, True], ids=["nomask", "mask"])
def test_gradcheck(name, with_mask):
    rm = rowmaps.get(name)
    g = torch.Generator().manual_seed(7)
    # n = 12 > n_train = 8 so logn's multiplier is active; values well separated so the top-k set is
    # stable under the finite-difference step.
    z = (
        torch.randperm(12, generator=g).double().reshape(1, 12).repeat(2, 1) * 0.3
        + 0.01 * torch.randn(2, 12, generator=g, dtype=torch.float64)
    ).requires_grad_()
    mask = None
    if with_mask:
        mask = torch.rand(2, 12, generator=g) > 0.25
        mask[:, :3] = True
    assert torch.autograd.gradcheck(lambda x: rm(x, mask), (z,))


def test_gradient_matches_softmax_jacobian_for_scaled_maps():
    """d softmax(c z)/dz = c (diag(p) - p p^T) for the length-scaled maps, c from L."""
    g = torch.Generator().manual_seed(9)
    z = torch.randn(20, generator=g, dtype=torch.float64)
    for name, c in (
        ("softmax_t0.5", 2.0),
        ("ssmax_s0.43", 0.43 * math.log(20)),
        ("logn_xi2_n8", (math.log(20) / math.log(8)) ** 2),
    ):
        jac = torch.autograd.functional.jacobian(rowmaps.get(name), z).numpy()
        p = ref_softmax(z, None, lambda L, c=c: c)
        assert np.abs(jac - c * (np.diag(p) - np.outer(p, p))).max() < 1e-12, name
