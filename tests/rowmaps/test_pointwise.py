"""Pointwise maps (normalized ReLU^p and sigmoid, Wortsman, ReLU/n) match float64 references, stay on the simplex in bf16/fp16 at p=16, follow the dead-row rules, and have correct gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab import rowmaps
from rowmaps.rowmap_refs import (
    UNIT,
    assert_close_np,
    np64,
    ref_relu_power,
    ref_reluattn,
    ref_sigmoid,
    ref_softmax,
    ref_wortsman,
)

# Every test runs on both paths of ReLU^p (p a power of two up to 16): the compiled kernel and torch ops.
pytestmark = pytest.mark.usefixtures("kernel_path")

TOL = {torch.float32: 1e-5, torch.float64: 1e-12}
POWERS = (1, 2, 4, 8, 16)
BIASES = ("0", "0.5", "-0.3")


def _data(rows, n, scale, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(rows, n, generator=g, dtype=torch.float64) * scale).to(dtype)
    mask = torch.rand(rows, n, generator=g) > 0.35
    mask[0] = True
    if rows > 2:
        mask[1] = False
        mask[2] = False
        mask[2, n // 2] = True
    return z, mask


def _check(rm, ref, dtype, msg, rtol=0.0):
    """Compare with ``ref`` on rows of several lengths and scales, with and without a mask."""
    for n in (1, 2, 7, 33):
        for scale in (0.1, 1.0, 10.0):
            z, mask = _data(6, n, scale, seed=31 * n + int(10 * scale), dtype=dtype)
            z[3, 0] = float("-inf")
            for m in (None, mask):
                out = rm(z, m)
                assert out.dtype == dtype and out.shape == z.shape
                assert_close_np(out, ref(z, m), TOL[dtype], rtol, msg=f"{msg} n={n} s={scale} mask={m is not None}:")
            assert (np64(out)[~mask.numpy()] == 0).all()


@pytest.mark.parametrize("p", POWERS)
@pytest.mark.parametrize("b", BIASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_relu_power_matches_reference(p, b, dtype):
    name = f"relu_p{p}_b{b}"
    rm = rowmaps.get(name)
    assert rm.normalized
    _check(rm, lambda z, m: ref_relu_power(z, m, p, float(b)), dtype, name)


def test_relu_dead_row_with_masked_keys():
    """A dead row (no allowed key with z + b > 0) that has masked or -inf keys follows the dead rule
    like any other dead row: all zeros under the default rule (documented: the row attends to
    nothing), never NaN. Checked for every p, b, rule and dtype."""
    failures = []
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        for p in POWERS:
            for b in BIASES:
                bb = float(b)
                z = torch.tensor(
                    [[-0.5 - bb, -2.0 - bb, 3.0, -1.0 - bb], [-0.5 - bb, float("-inf"), -2.0 - bb, -0.125 - bb]],
                    dtype=torch.float64,
                ).to(dtype)
                mask = torch.tensor([[True, True, False, True], [True, True, True, True]])
                for dead in ("zeros", "uniform", "softmax"):
                    out = rowmaps.get(f"relu_p{p}_b{b}", dead=dead)(z, mask)
                    ref = ref_relu_power(z, mask, p, bb, dead)
                    err = np.abs(np64(out) - ref)
                    if not (err <= max(2 * UNIT[dtype], 1e-6)).all():  # NaN fails too
                        failures.append(f"relu_p{p}_b{b} dead={dead} {dtype}: {out.tolist()}")
    assert not failures, f"{len(failures)} cases, e.g. " + "; ".join(failures[:3])


@pytest.mark.parametrize("b", ["0", "1.5"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_sigmoid_matches_reference(b, dtype):
    rm = rowmaps.get(f"sigmoid_b{b}")
    assert rm.normalized
    _check(rm, lambda z, m: ref_sigmoid(z, m, float(b)), dtype, f"sigmoid_b{b}")


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("by", ["L", "sqrtL"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_wortsman_matches_reference(p, by, dtype):
    rm = rowmaps.get(f"wortsman_p{p}_{by}")
    assert not rm.normalized
    # un-normalized: values reach ~(40)^2, so the float32 bound is relative (plus the absolute floor)
    _check(rm, lambda z, m: ref_wortsman(z, m, p, by), dtype, f"wortsman_p{p}_{by}", rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_reluattn_matches_reference(dtype):
    rm = rowmaps.get("reluattn")
    assert not rm.normalized
    _check(rm, ref_reluattn, dtype, "reluattn", rtol=TOL[dtype])


def test_wortsman_and_reluattn_divisors():
    """The divisors L, sqrt(L), max(L - 2, 1) count allowed keys only."""
    z = torch.tensor([[3.0, -1.0, 2.0, 5.0, float("-inf"), 1.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False, True, True]])  # L = 4 (one masked, one -inf)
    r = np.array([3.0, 0.0, 2.0, 0.0, 0.0, 1.0])
    cases = {
        "wortsman_p1_L": r / 4,
        "wortsman_p2_L": r**2 / 4,
        "wortsman_p1_sqrtL": r / 2,
        "wortsman_p2_sqrtL": r**2 / 2,
        "reluattn": r / 2,
    }
    for name, expected in cases.items():
        assert np.abs(np64(rowmaps.get(name)(z, mask))[0] - expected).max() < 1e-15, name
    # L - 2 < 1 -> divide by 1
    z = torch.tensor([[0.5, 2.0]], dtype=torch.float64)
    assert np.array_equal(np64(rowmaps.get("reluattn")(z))[0], [0.5, 2.0])


def test_relu_bias_parsed_with_sign():
    z = torch.tensor([[0.2, 0.4, 1.0, -0.5]], dtype=torch.float64)
    for b in (-0.3, 0.5, 3.55, -1.0):
        out = rowmaps.get(f"relu_p2_b{b:g}")(z)
        assert_close_np(out, ref_relu_power(z, None, 2, b), 1e-14, msg=f"b={b}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("b", BIASES)
@pytest.mark.parametrize("magnitude", [1e4, 1e2, 1e-3])
def test_relu_p16_low_precision(dtype, b, magnitude):
    """p = 16 in bf16/fp16 with |z| up to 1e4 and tiny |z|: finite, on the simplex, and within one
    output rounding (u = unit roundoff, outputs <= 1) of the float64 reference of the rounded input."""
    rm = rowmaps.get(f"relu_p16_b{b}")
    g = torch.Generator().manual_seed(int(magnitude * 1000) % 9973)
    z = ((torch.rand(8, 24, generator=g, dtype=torch.float64) * 2 - 1) * magnitude).to(dtype)
    z[0, :] = torch.linspace(-magnitude, magnitude, 24, dtype=torch.float64).to(dtype)
    z[1, 0] = torch.tensor(magnitude, dtype=dtype)  # one dominant key
    out = rm(z)
    assert out.dtype == dtype
    o = np64(out)
    assert np.isfinite(o).all() and (o >= 0).all()
    ref = ref_relu_power(z, None, 16, float(b))
    u = UNIT[dtype]
    assert np.abs(o - ref).max() <= 2 * u
    sums = o.sum(-1)
    alive = ref.sum(-1) > 0
    assert (np.abs(sums[alive] - 1) <= 2 * u).all()
    assert (sums[~alive] == 0).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_relu_low_precision_all_powers(dtype):
    g = torch.Generator().manual_seed(5)
    z = (torch.randn(6, 17, generator=g, dtype=torch.float64) * 3).to(dtype)
    for p in POWERS:
        out = rowmaps.get(f"relu_p{p}_b0.5")(z)
        assert out.dtype == dtype
        assert np.abs(np64(out) - ref_relu_power(z, None, p, 0.5)).max() <= 2 * UNIT[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_relu_power_tiny_positive_maximum(dtype):
    """A row whose largest z + b is positive but subnormal is alive: finite weights on the simplex.
    (1 / r_max overflows to inf there, so a scale-by-1/r_max implementation must guard it.)"""
    tiny = torch.finfo(dtype).tiny
    rows = torch.tensor(
        [
            [tiny / 2**20, 0.0, -1.0],  # smallest subnormals
            [tiny / 4, tiny / 8, -3.0],  # two subnormal keys
            [tiny * 0.5, tiny * 0.25, tiny * 0.125],
        ],
        dtype=torch.float64,
    ).to(dtype)
    for p in POWERS:
        out = rowmaps.get(f"relu_p{p}_b0")(rows)
        assert_close_np(out, ref_relu_power(rows, None, p, 0.0), TOL[dtype], msg=f"p={p}:")


DEAD_ROW = torch.tensor([[-0.5, -2.0, -0.1, -3.0, 0.0]], dtype=torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_dead_row_rules(dtype):
    """A row with every z + b <= 0 (here b = 0, max z = 0 exactly) gets the chosen rule."""
    z = DEAD_ROW.to(dtype)
    mask = torch.tensor([[True, True, False, True, True]])
    tol = max(2 * UNIT[dtype], 1e-12)
    out = rowmaps.get("relu_p2_b0")(z)  # default rule is "zeros"
    assert (np64(out) == 0).all()
    out = np64(rowmaps.get("relu_p2_b0", dead="uniform")(z))
    assert np.abs(out - 0.2).max() <= tol
    out = rowmaps.get("relu_p2_b0", dead="softmax")(z)
    assert_close_np(out, ref_softmax(z, None), max(tol, 1e-6))
    # with a mask: uniform / softmax over the allowed keys only (the "zeros" rule with masked keys
    # is pinned in test_relu_dead_row_with_masked_keys)
    out = np64(rowmaps.get("relu_p2_b0", dead="uniform")(z, mask))
    assert np.abs(out - np.array([[0.25, 0.25, 0.0, 0.25, 0.25]])).max() <= tol
    out = rowmaps.get("relu_p2_b0", dead="softmax")(z, mask)
    assert_close_np(out, ref_softmax(z, mask), max(tol, 1e-6))


@pytest.mark.parametrize("with_mask", [False, True], ids=["nomask", "mask"])
def test_relu_dead_row_gradients(with_mask):
    """Backward through a dead row: 0 under "zeros" and "uniform" (constant in z), the softmax
    Jacobian under "softmax"; finite in every case, with or without masked keys."""
    z = torch.tensor([[-0.5, -2.0, 3.0, -1.0], [-0.25, -1.5, -3.0, -0.75]], dtype=torch.float64)
    mask = torch.tensor([[True, True, False, True]] * 2) if with_mask else None
    if not with_mask:
        z[0, 2] = -3.0
    gout = torch.tensor([[0.3, -1.0, 2.0, 0.5], [1.0, 0.2, -0.7, 0.1]], dtype=torch.float64)
    for dead in ("zeros", "uniform", "softmax"):
        x = z.clone().requires_grad_()
        rowmaps.get("relu_p2_b0", dead=dead)(x, mask).backward(gout)
        grad = x.grad.numpy()
        expected = np.zeros_like(grad)
        if dead == "softmax":
            q = ref_softmax(z, mask)
            for i in range(2):
                expected[i] = gout[i].numpy() @ (np.diag(q[i]) - np.outer(q[i], q[i]))
        assert np.isfinite(grad).all() and np.abs(grad - expected).max() < 1e-12, (dead, grad)


def test_dead_rule_only_touches_dead_rows():
    z = torch.cat([DEAD_ROW, torch.tensor([[0.5, -1.0, 2.0, 0.1, -0.2]], dtype=torch.float64)])
    for dead in ("zeros", "uniform", "softmax"):
        out = rowmaps.get("relu_p2_b-0.3", dead=dead)(z)
        assert_close_np(out, ref_relu_power(z, None, 2, -0.3, dead), 1e-14, msg=dead)
    # a dead row under a positive bias is alive: z + b > 0 somewhere
    out = rowmaps.get("relu_p2_b0.5")(DEAD_ROW)
    assert_close_np(out, ref_relu_power(DEAD_ROW, None, 2, 0.5), 1e-14)
    # fully masked row: zeros under every rule
    none = torch.zeros(1, 5, dtype=torch.bool)
    for dead in ("zeros", "uniform", "softmax"):
        assert (np64(rowmaps.get("relu_p2_b0", dead=dead)(DEAD_ROW, none)) == 0).all(), dead


@pytest.mark.parametrize("b", ["0", "1.5"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_sigmoid_underflow_regime(b, dtype):
    """Rows with z + b around -200 (sigmoid underflows float32), and rows straddling the regime
    boundaries, match softmax(log sigmoid(z + b)) computed in float64."""
    rm = rowmaps.get(f"sigmoid_b{b}")
    bb = float(b)
    g = torch.Generator().manual_seed(13)
    rows = [
        -200 - bb + torch.randn(17, generator=g, dtype=torch.float64),  # ~ -200
        -200 - bb + 10 * torch.randn(17, generator=g, dtype=torch.float64),  # wide, ~ -200
        -60 - bb + 3 * torch.randn(17, generator=g, dtype=torch.float64),  # around float32 switch
        -90 - bb + 40 * torch.rand(17, generator=g, dtype=torch.float64),  # -90 .. -50
        -600 - bb + 3 * torch.randn(17, generator=g, dtype=torch.float64),  # around float64 switch
        -745 - bb + 2 * torch.randn(17, generator=g, dtype=torch.float64),  # exp underflows float64
        -5 - bb + 30 * torch.randn(17, generator=g, dtype=torch.float64),  # mixed signs
    ]
    z = torch.stack(rows).to(dtype)
    out = rm(z)
    o = np64(out)
    assert np.isfinite(o).all()
    assert_close_np(out, ref_sigmoid(z, None, bb), TOL[dtype], msg=f"sigmoid_b{b} {dtype}:")
    mask = torch.rand(z.shape, generator=g) > 0.3
    assert_close_np(rm(z, mask), ref_sigmoid(z, mask, bb), TOL[dtype], msg="masked:")


def test_sigmoid_far_negative_row_is_softmax():
    """For z + b << 0, sigma(u) ~ e^u, so the normalized sigmoid is softmax(z)."""
    g = torch.Generator().manual_seed(17)
    z = -300 + torch.randn(3, 9, generator=g, dtype=torch.float64)
    assert_close_np(rowmaps.get("sigmoid_b0")(z), ref_softmax(z, None), 1e-12)
    assert_close_np(rowmaps.get("sigmoid_b0")(z.float()), ref_softmax(z.float(), None), 1e-5)


def _grad_z(n, seed, b, with_mask, scale=1.0):
    """Scores whose z + b stay >= 0.05 away from the ReLU kink at 0."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(3, n, generator=g, dtype=torch.float64) * scale
    u = z + b
    z = torch.where(u.abs() < 0.05, z + 0.1 * torch.sign(u + 1e-12), z)
    z[:, 0] = 1.0 - b + 0.5 * torch.rand(3, generator=g, dtype=torch.float64)  # alive rows
    mask = None
    if with_mask:
        mask = torch.rand(3, n, generator=g) > 0.3
        mask[:, 0] = True
    return z.requires_grad_(), mask


@pytest.mark.parametrize("p", POWERS)
@pytest.mark.parametrize("b", BIASES)
@pytest.mark.parametrize("with_mask", [False, True], ids=["nomask", "mask"])
def test_relu_power_gradcheck(p, b, with_mask):
    rm = rowmaps.get(f"relu_p{p}_b{b}")
    z, mask = _grad_z(8, seed=p * 7 + len(b), b=float(b), with_mask=with_mask)
    assert torch.autograd.gradcheck(lambda x: rm(x, mask), (z,))


@pytest.mark.parametrize(
    "name",
    [
        "sigmoid_b0",
        "sigmoid_b1.5",
        "wortsman_p1_L",
        "wortsman_p2_L",
        "wortsman_p1_sqrtL",
        "wortsman_p2_sqrtL",
        "reluattn",
    ],
)
@pytest.mark.parametrize("with_mask", [False, True], ids=["nomask", "mask"])
def test_pointwise_gradcheck(name, with_mask):
    rm = rowmaps.get(name)
    z, mask = _grad_z(8, seed=len(name), b=0.0, with_mask=with_mask, scale=2.0)
    assert torch.autograd.gradcheck(lambda x: rm(x, mask), (z,))


@pytest.mark.parametrize("offset", [-200.0, -700.0])  # -700: past float64's switch to log space (-600)
def test_sigmoid_gradcheck_in_underflow_regime(offset):
    g = torch.Generator().manual_seed(19)
    z = (offset + torch.randn(2, 6, generator=g, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(rowmaps.get("sigmoid_b0"), (z,))


def test_relu_power_gradient_closed_form():
    """d/dz_j of r_i^p / sum r^p = (p / r_j) y_j (delta_ij - y_i) on alive keys (r = z + b > 0)."""
    g = torch.Generator().manual_seed(23)
    z = torch.randn(10, generator=g, dtype=torch.float64)
    z[0] = 1.5
    for p in POWERS:
        for b in (0.0, 0.5, -0.3):
            jac = torch.autograd.functional.jacobian(rowmaps.get(f"relu_p{p}_b{b:g}"), z).numpy()
            r = np.maximum(z.numpy() + b, 0.0)
            y = r**p / (r**p).sum()
            dr = np.where(r > 0, p / np.where(r > 0, r, 1.0), 0.0)
            expected = (np.diag(y) - np.outer(y, y)) * dr[None, :]
            assert np.abs(jac - expected).max() < 1e-10, (p, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("p", [2, 3])
def test_relu_power_backward_at_subnormal_rows_keeps_zero_weight_keys_at_zero(dtype, p):
    """A row whose largest r is subnormal makes p / r_max overflow; a key of zero weight still gets gradient 0
    (not 0 * inf = NaN), and a weighted key the closed form's value, inf only where that overflows the dtype."""
    tiny = torch.finfo(dtype).tiny
    z = torch.tensor([[0.5, -0.5, 0.25]], dtype=torch.float64) * tiny / 4  # subnormal scores
    x = z.to(dtype).requires_grad_(True)
    y = rowmaps.get(f"relu_p{p}_b0")(x)
    y[0, 0].backward()
    g = x.grad[0]
    assert g[1] == 0 and not g.isnan().any()
    # d y_0 / d z_j = (p / r_j) y_j (delta_0j - y_0) on the weighted keys j = 0, 2, in float64
    r = np64(x.detach())[0]
    q = r.clip(0) / r.max()  # r^p itself underflows
    w = q**p / (q**p).sum()
    with np.errstate(over="ignore"):  # divided last: where the value itself overflows, inf
        ref = np.array([p * w[0] * (1 - w[0]) / r[0], 0.0, -p * w[2] * w[0] / r[2]])
    big = np.abs(ref) > torch.finfo(dtype).max
    assert torch.isinf(g[torch.from_numpy(big)]).all()
    np.testing.assert_allclose(g.double().numpy()[~big], ref[~big], rtol=1e-5)
