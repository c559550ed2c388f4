"""alpha-entmax / sparsemax match independent references (entmax package, a float64 bisection) in value, support and gradient."""

from __future__ import annotations

import importlib
import math

import entmax as entmax_pkg
import numpy as np
import pytest
import torch

from attnlab import rowmaps
from rowmaps.rowmap_refs import UNIT, assert_close_np, entmax_jacobian, np64, ref_entmax, ref_softmax

# Every test runs on both paths of alpha = 2, 1.5, 1.25: the compiled kernel and torch ops (conftest).
pytestmark = pytest.mark.usefixtures("kernel_path")

ALPHAS = (1.01, 1.25, 1.5, 2.0, 3.0, 4.0)
SCALES = (0.1, 1.0, 10.0)
LENGTHS = (1, 2, 17, 300)
ROWS = 6


def _cases(alpha):
    """(name, options) for every way the registry offers this alpha."""
    out = [(f"entmax_a{alpha:g}", {})]
    if alpha in (1.5, 2.0):
        out.append((f"entmax_a{alpha:g}", {"method": "sort"}))
    if alpha == 2.0:
        out += [("sparsemax", {}), ("sparsemax", {"method": "sort"})]
    return out


def _scores(n, scale, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(ROWS, n, generator=g, dtype=torch.float64) * scale).to(dtype)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_entmax_matches_bisection_reference(alpha, dtype):
    """Max abs error <= 1e-5 (float32 input) / 1e-10 (float64 input); rows sum to 1 likewise."""
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    for name, opts in _cases(alpha):
        rm = rowmaps.get(name, **opts)
        for scale in SCALES:
            for n in LENGTHS:
                z = _scores(n, scale, dtype, seed=1000 * n + int(10 * scale))
                p = rm(z)
                assert p.dtype == dtype and p.shape == z.shape
                ref = ref_entmax(z, None, alpha)
                assert_close_np(p, ref, tol, msg=f"{name} {opts} scale={scale} n={n} {dtype}:")
                sums = np64(p).sum(-1)
                assert np.abs(sums - 1).max() <= tol, f"{name} {opts} scale={scale} n={n}: sums {sums}"


@pytest.mark.parametrize("alpha", ALPHAS)
def test_entmax_matches_entmax_package_bisect(alpha):
    """Against entmax.entmax_bisect in float64 with n_iter=200 (float32 input, 1e-5)."""
    rm = rowmaps.get(f"entmax_a{alpha:g}")
    for scale in SCALES:
        for n in LENGTHS:
            z = _scores(n, scale, torch.float32, seed=7 + 1000 * n + int(10 * scale))
            ref = entmax_pkg.entmax_bisect(z.double(), alpha=alpha, dim=-1, n_iter=200).numpy()
            assert_close_np(rm(z), ref, 1e-5, msg=f"alpha={alpha} scale={scale} n={n}:")


@pytest.mark.parametrize("method", ["newton", "sort"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_entmax15_and_sparsemax_match_entmax_package(method, dtype):
    """Against the exact sort-based entmax.entmax15 and entmax.sparsemax, evaluated in float64."""
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    for name, pkg in (
        ("entmax_a1.5", entmax_pkg.entmax15),
        ("sparsemax", entmax_pkg.sparsemax),
        ("entmax_a2", entmax_pkg.sparsemax),
    ):
        rm = rowmaps.get(name, method=method)
        for scale in SCALES:
            for n in LENGTHS:
                z = _scores(n, scale, dtype, seed=11 + 1000 * n + int(10 * scale))
                ref = pkg(z.double(), dim=-1).numpy()
                assert_close_np(rm(z), ref, tol, msg=f"{name} {method} scale={scale} n={n}:")


def test_reference_bisection_agrees_with_entmax_package():
    """Sanity of the test's own reference: it matches entmax_bisect / entmax15 / sparsemax to 1e-12."""
    z = _scores(17, 1.0, torch.float64, seed=3)
    for alpha in ALPHAS:
        ref = ref_entmax(z, None, alpha)
        pkg = entmax_pkg.entmax_bisect(z, alpha=alpha, n_iter=200).numpy()
        assert np.abs(ref - pkg).max() < 1e-12, alpha
    assert np.abs(ref_entmax(z, None, 1.5) - entmax_pkg.entmax15(z).numpy()).max() < 1e-12
    assert np.abs(ref_entmax(z, None, 2.0) - entmax_pkg.sparsemax(z).numpy()).max() < 1e-12


@pytest.mark.parametrize("alpha", ALPHAS)
def test_entmax_large_offsets_and_long_rows(alpha):
    """Rows far from 0 (|z| ~ 1e4, where a float32 threshold in z units has ulp 1e-3) and rows long
    enough for the group-maxima start (n >= 512), float32 input, against the reference (1e-5)."""
    g = torch.Generator().manual_seed(43)
    for name, opts in _cases(alpha):
        rm = rowmaps.get(name, **opts)
        for offset in (-1e4, 1e3, 1e4):
            for n in (17, 700):
                z = (offset + torch.randn(3, n, generator=g, dtype=torch.float64)).float()
                assert_close_np(rm(z), ref_entmax(z, None, alpha), 1e-5, msg=f"{name} {opts} offset={offset} n={n}:")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_entmax_low_precision_inputs(dtype):
    """bf16/fp16 in, same dtype out, within 2 unit roundoffs of the reference of the rounded input."""
    g = torch.Generator().manual_seed(47)
    z = (torch.randn(4, 33, generator=g, dtype=torch.float64) * 3).to(dtype)
    mask = torch.rand(4, 33, generator=g) > 0.3
    for alpha in ALPHAS:
        for name, opts in _cases(alpha):
            out = rowmaps.get(name, **opts)(z, mask)
            assert out.dtype == dtype
            assert_close_np(out, ref_entmax(z, mask, alpha), 2 * UNIT[dtype], msg=f"{name} {opts}:")


@pytest.mark.parametrize("alpha", ALPHAS)
def test_entmax_support_is_exact(alpha):
    """Keys the reference puts clearly below the threshold are exactly 0; clear support keys are > 0."""
    for name, opts in _cases(alpha):
        rm = rowmaps.get(name, **opts)
        for dtype in (torch.float32, torch.float64):
            for scale in SCALES:
                for n in (2, 17, 300):
                    z = _scores(n, scale, dtype, seed=5 + 1000 * n + int(10 * scale))
                    p = np64(rm(z))
                    ref, res = ref_entmax(z, None, alpha, return_residual=True)
                    outside = res < -1e-6
                    inside = ref > 1e-5
                    assert (p[outside] == 0.0).all(), f"{name} {opts} {dtype} s={scale} n={n}"
                    assert (p[inside] > 0.0).all(), f"{name} {opts} {dtype} s={scale} n={n}"
                    if alpha >= 1.5 and scale >= 1 and n >= 17:
                        assert outside.any(), "test data should exercise sparsity"


@pytest.mark.parametrize("alpha", ALPHAS)
def test_entmax_with_mask(alpha):
    """Masked keys (bool, True = allowed) and -inf scores are excluded; fully masked rows are 0."""
    g = torch.Generator().manual_seed(17)
    z = torch.randn(5, 9, generator=g, dtype=torch.float64)
    mask = torch.rand(5, 9, generator=g) > 0.4
    mask[0] = False  # no allowed key
    mask[1] = False
    mask[1, 4] = True  # one allowed key
    z[2, 3] = float("-inf")  # -inf at an allowed key acts as masked
    for name, opts in _cases(alpha):
        rm = rowmaps.get(name, **opts)
        for dtype, tol in ((torch.float32, 1e-5), (torch.float64, 1e-9)):
            zz = z.to(dtype)
            p = rm(zz, mask)
            ref = ref_entmax(zz, mask, alpha)
            assert_close_np(p, ref, tol, msg=f"{name} {opts} {dtype}:")
            pn = np64(p)
            assert (pn[~mask.numpy()] == 0).all() and pn[2, 3] == 0
            assert (pn[0] == 0).all() and pn[1, 4] == 1.0


@pytest.mark.parametrize("scale", [0.1, 1.0])
def test_entmax_tends_to_softmax_as_alpha_to_1(scale):
    """entmax_a(1+eps) -> softmax, with error bounded by a first-order expansion in eps.

    With d_i = z_i - max z, x-units threshold -a (a in [L^-eps, 1]), log p_i equals, up to a
    row constant, (1/eps) log(1 + eps d_i / a) = d_i + delta_i with
    |delta_i| <= eps (|d_i| log L + d_i^2 / 2) + O(eps^2). Since log(p_i / q_i) then lies within
    D = max_i |delta_i| of 0, |p_i - q_i| <= q_i (e^D - 1). The bound below takes D with a 1.5
    safety factor for the O(eps^2) terms. Also the error shrinks roughly linearly in eps.
    """
    g = torch.Generator().manual_seed(23)
    z = torch.randn(8, 17, generator=g, dtype=torch.float64) * scale
    q = ref_softmax(z, None)
    errs = {}
    for eps in (1e-2, 1e-3):
        p = np64(rowmaps.get(f"entmax_a{1 + eps:g}")(z))
        d = np64(z) - np64(z).max(-1, keepdims=True)
        L = z.shape[-1]
        D = 1.5 * eps * (np.abs(d) * math.log(L) + d**2 / 2).max(-1, keepdims=True)
        bound = q.max(-1, keepdims=True) * np.expm1(D)
        err = np.abs(p - q)
        assert (err <= bound).all(), f"eps={eps}: err {err.max():.3g} > bound {bound.min():.3g}"
        errs[eps] = err.max()
    assert errs[1e-3] < 0.2 * errs[1e-2]
    if scale == 1.0:
        assert errs[1e-3] < 1e-2


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.float64, 1e-13)])
def test_entmax_alpha_1_is_softmax(dtype, tol):
    g = torch.Generator().manual_seed(29)
    z = (torch.randn(6, 17, generator=g, dtype=torch.float64) * 3).to(dtype)
    mask = torch.rand(6, 17, generator=g) > 0.3
    for name in ("entmax_a1", "entmax_a1.0"):
        rm = rowmaps.get(name)
        assert_close_np(rm(z), ref_softmax(z, None), tol, msg=name)
        assert_close_np(rm(z, mask), ref_softmax(z, mask), tol, msg=name)


def _grad_input(n_rows, n, seed, with_mask):
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(n_rows, n, generator=g, dtype=torch.float64)).requires_grad_()
    mask = None
    if with_mask:
        mask = torch.rand(n_rows, n, generator=g) > 0.3
        mask[:, 0] = True
    return z, mask


GRAD_CASES = [(1.25, "newton"), (1.5, "newton"), (1.5, "sort"), (2.0, "newton"), (2.0, "sort"), (3.0, "newton")]


@pytest.mark.parametrize("alpha,method", GRAD_CASES)
@pytest.mark.parametrize("with_mask", [False, True], ids=["nomask", "mask"])
def test_entmax_gradcheck(alpha, method, with_mask):
    rm = rowmaps.get(f"entmax_a{alpha:g}", method=method)
    z, mask = _grad_input(3, 7, seed=31, with_mask=with_mask)
    # Finite differences need every key away from the support boundary (where entmax has a kink).
    _, res = ref_entmax(z, mask, alpha, return_residual=True)
    finite = np.isfinite(res)
    assert np.abs(res[finite]).min() > 1e-4
    assert torch.autograd.gradcheck(lambda x: rm(x, mask), (z,))


@pytest.mark.parametrize("alpha,method", GRAD_CASES)
@pytest.mark.parametrize("with_mask", [False, True], ids=["nomask", "mask"])
def test_entmax_backward_matches_closed_form_jacobian(alpha, method, with_mask):
    """d p / d z = diag(s) - s s^T / sum(s), s = p^(2 - alpha) on the support (Peters et al. 2019)."""
    rm = rowmaps.get(f"entmax_a{alpha:g}", method=method)
    g = torch.Generator().manual_seed(37)
    for trial in range(3):
        z = torch.randn(11, generator=g, dtype=torch.float64) * 2
        mask = (torch.rand(11, generator=g) > 0.3) if with_mask else None
        if mask is not None:
            mask[0] = True
        jac = torch.autograd.functional.jacobian(lambda x, mask=mask: rm(x, mask), z).numpy()
        p = ref_entmax(z, mask, alpha)
        expected = entmax_jacobian(p, alpha)
        assert np.abs(jac - expected).max() < 1e-8, f"trial {trial}"
        # Vector-Jacobian product through .backward on a batch as well.
        zb = z.detach().repeat(2, 1).requires_grad_()
        gout = torch.randn(2, 11, generator=g, dtype=torch.float64)
        rm(zb, mask).backward(gout)
        assert np.abs(zb.grad.numpy() - gout.numpy() @ expected).max() < 1e-8


@pytest.mark.parametrize("alpha", [1.5, 2.0])
def test_entmax_float32_gradient_close_to_closed_form(alpha):
    """Backward in float32 (the fast Newton path) agrees with the float64 closed form to 1e-5."""
    rm = rowmaps.get(f"entmax_a{alpha:g}")
    g = torch.Generator().manual_seed(41)
    z = torch.randn(4, 17, generator=g, dtype=torch.float64)
    gout = torch.randn(4, 17, generator=g, dtype=torch.float64)
    z32 = z.float().requires_grad_()
    rm(z32).backward(gout.float())
    p = ref_entmax(z.float(), None, alpha)
    expected = np.stack([gout[i].numpy() @ entmax_jacobian(p[i], alpha) for i in range(4)])
    assert np.abs(z32.grad.double().numpy() - expected).max() < 1e-5


def test_sort_method_rejected_for_other_alphas():
    with pytest.raises(ValueError, match="sort"):
        rowmaps.get("entmax_a1.25", method="sort")


def _decimal_entmax(z: list[float], alpha: float) -> list[float]:
    """alpha-entmax of one row by 400 halvings of the threshold bracket at 80 significant digits (decimal), far
    below float64's resolution of the threshold."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 80
        k, top = Decimal(1) / (Decimal(alpha) - 1), max(z)
        x = [(Decimal(alpha) - 1) * (Decimal(v) - Decimal(top)) for v in z]
        lo, hi = Decimal(-1), Decimal(0)
        for _ in range(400):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if sum((v - mid) ** k for v in x if v > mid) > 1 else (lo, mid)
        return [float((v - lo) ** k) if v > lo else 0.0 for v in x]


def test_entmax_at_the_largest_alpha_resolves_keys_at_the_threshold():
    """At alpha = 4, the bound: a second key placed just inside the first key's support edge, where the
    threshold's float64 rounding matters most, still gets its weight to 1e-8 (theory: at most (2^-53)^(1/3))."""
    rm = rowmaps.get("entmax_a4")
    worst = 0.0
    for c in np.linspace(0.9, 1.0, 41) / 3:
        z = [0.0, -float(c)]
        got = rm(torch.tensor([z], dtype=torch.float64))[0].numpy()
        worst = max(worst, float(np.abs(got - _decimal_entmax(z, 4.0)).max()))
    assert worst < 1e-8, worst


def test_the_general_solver_stops_on_rows_solved_to_rounding(monkeypatch):
    # rows of near-ties (products of U(0, 1) values, as the collapse probe's): moving a row on once its norm is 1 to
    # rounding let the bracket's upper end fall under the root and every later pass bisect, 55 passes instead of 9
    entmax_module = importlib.import_module("attnlab.rowmaps.entmax")
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4096, generator=g, dtype=torch.float64)
    z = x[:128, None] * x[None, :]
    rows = (z - z.amax(-1, keepdim=True)) * 0.75
    calls = []
    norm = torch.linalg.vector_norm
    monkeypatch.setattr(torch.linalg, "vector_norm", lambda *a, **k: calls.append(1) or norm(*a, **k))
    theta = entmax_module._safeguarded_threshold(rows, 1 / 0.75)
    monkeypatch.undo()
    assert len(calls) <= 15
    total = norm((rows - theta).clamp(min=0), 1 / 0.75, dim=-1)
    assert float((total - 1).abs().max()) <= 1e-14
