"""Independent float64 (numpy) references for the row maps, imported by the rowmaps tests.

Nothing here imports attnlab: every reference is written from the formulas in the seed papers
(001 eq. 8-9 and App. A; 000 Alg. 1 and App. T; 003 App. A.2; 004 §3.4) and the row rules of
``attnlab.rowmaps._rows`` (masked and -inf keys get 0; a row with no allowed key is all 0; a row with
NaN at an allowed key is all NaN; NaN at a masked key is ignored).
"""

from __future__ import annotations

import math

import numpy as np
import torch

# Unit roundoff of each dtype (half an ulp at 1): the error of rounding one output in (0, 1].
UNIT = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}

# How close a normalized row's sum must be to 1. float32/float64 from the acceptance criteria; for
# float16/bfloat16 every output is rounded with relative error <= u, so the sum is off by <= u; 2u
# leaves room for the float32 computation before the final rounding.
SUM_TOL = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 2 * 2.0**-11, torch.bfloat16: 2 * 2.0**-8}


def np64(t: torch.Tensor) -> np.ndarray:
    """The exact float64 value of a tensor of any float dtype (bf16/fp16/f32 embed exactly in f64)."""
    return t.detach().to(torch.float64).cpu().numpy()


def allowed_np(z: np.ndarray, mask) -> np.ndarray:
    """Keys a row may attend: mask True (or no mask) and score not -inf."""
    allowed = ~np.isneginf(z)
    if mask is not None:
        m = mask.cpu().numpy() if isinstance(mask, torch.Tensor) else np.asarray(mask)
        allowed = allowed & np.broadcast_to(m, z.shape)
    return allowed


def rowwise(z, mask, row_fn) -> np.ndarray:
    """Apply ``row_fn(values, L) -> weights`` to the allowed keys of every row (last axis).

    ``values`` are the allowed scores (float64, order kept), L = len(values) >= 1. Handles the
    special rows itself: no allowed key -> zeros, NaN at an allowed key -> NaN everywhere.
    """
    z = np64(z) if isinstance(z, torch.Tensor) else np.asarray(z, dtype=np.float64)
    allowed = allowed_np(z, mask)
    out = np.zeros_like(z)
    flat_z = z.reshape(-1, z.shape[-1])
    flat_a = allowed.reshape(-1, z.shape[-1])
    flat_o = out.reshape(-1, z.shape[-1])
    for i in range(flat_z.shape[0]):
        a = flat_a[i]
        vals = flat_z[i][a]
        if vals.size == 0:
            continue
        if np.isnan(vals).any():
            flat_o[i] = np.nan
            continue
        flat_o[i][a] = row_fn(vals, vals.size)
    return out


# --- softmax family ----------------------------------------------------------------------------


def _softmax_vals(v: np.ndarray) -> np.ndarray:
    m = max(v)
    e = np.array([math.exp(x - m) for x in v])
    return e / math.fsum(e)


def ref_softmax(z, mask=None, mult=lambda L: 1.0) -> np.ndarray:
    """softmax(mult(L) * z) over the allowed keys; L = number of allowed keys."""
    return rowwise(z, mask, lambda v, L: _softmax_vals(mult(L) * v))


def ref_ssmax(z, mask, s):
    """Scalable-Softmax: softmax(s log(L) z)."""
    return ref_softmax(z, mask, lambda L: s * math.log(L))


def ref_logn(z, mask, xi, n_train):
    """softmax(max(1, log L / log n_train)^xi z) (seed 003 App. A.2)."""
    return ref_softmax(z, mask, lambda L: max(1.0, math.log(L) / math.log(n_train)) ** xi)


def ref_topk(z, mask, k):
    """Softmax over the keys whose score is >= the k-th largest allowed score (ties all kept)."""

    def row(v, L):
        kth = sorted(v, reverse=True)[min(k, L) - 1]
        keep = v >= kth
        w = np.zeros_like(v)
        w[keep] = _softmax_vals(v[keep])
        return w

    return rowwise(z, mask, row)


# --- alpha-entmax ------------------------------------------------------------------------------


def ref_entmax(z, mask, alpha, n_iter=200, return_residual=False):
    """alpha-entmax by bisection, in float64, written from seed 001 eq. 4 / App. A.

    p_i = [x_i - tau]_+^(1/(alpha-1)) with x = (alpha-1) z and tau chosen so the row sums to 1.
    tau lies in [max x - 1, max x] (the top key alone gives f(max x - 1) >= 1 and f(max x) = 0), so
    ``n_iter`` halvings of that bracket give tau to float64 resolution. Rows are shifted by their
    maximum first (exact for scores that came from float32 or narrower). alpha = 1 is softmax.

    With ``return_residual`` also returns x - tau (the signed distance from the threshold).
    """
    if alpha == 1:
        p = ref_softmax(z, mask)
        return (p, None) if return_residual else p
    z = np64(z) if isinstance(z, torch.Tensor) else np.asarray(z, dtype=np.float64)
    allowed = allowed_np(z, mask)
    k = 1.0 / (alpha - 1.0)
    zz = np.where(allowed, z, -np.inf)
    with np.errstate(invalid="ignore"):
        zmax = zz.max(-1, keepdims=True)
        empty = np.isneginf(zmax)
        nanrow = (np.isnan(z) & allowed).any(-1, keepdims=True)
        safe_max = np.where(empty | nanrow, 0.0, zmax)
        x = np.where(allowed & ~nanrow, (alpha - 1.0) * (zz - safe_max), -np.inf)
    lo = np.full(zmax.shape, -1.0)
    hi = np.zeros(zmax.shape)
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        f = (np.clip(x - mid, 0.0, None) ** k).sum(-1, keepdims=True)
        above = f >= 1.0
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    tau = lo
    p = np.clip(x - tau, 0.0, None) ** k
    with np.errstate(invalid="ignore"):
        p = p / p.sum(-1, keepdims=True)
    p = np.where(empty, 0.0, p)
    p = np.where(nanrow, np.nan, p)
    res = x - tau
    return (p, res) if return_residual else p


def entmax_jacobian(p: np.ndarray, alpha: float) -> np.ndarray:
    """Closed-form Jacobian dp/dz of alpha-entmax at one row's output p (Peters et al. 2019):
    J = diag(s) - s s^T / sum(s), s = p^(2 - alpha) on the support, 0 off it."""
    s = np.where(p > 0, np.where(p > 0, p, 1.0) ** (2.0 - alpha), 0.0)
    return np.diag(s) - np.outer(s, s) / s.sum()


# --- pointwise maps ----------------------------------------------------------------------------


def ref_relu_power(z, mask, p, b, dead="zeros"):
    """ReLU(z + b)^p / sum_j ReLU(z_j + b)^p (seed 000 Alg. 1); dead rows by ``dead``."""

    def row(v, L):
        r = np.maximum(v + b, 0.0)
        rmax = r.max()
        if rmax <= 0:
            if dead == "zeros":
                return np.zeros_like(v)
            if dead == "uniform":
                return np.full_like(v, 1.0 / L)
            return _softmax_vals(v)
        w = (r / rmax) ** p  # every term in [0, 1]: no overflow even at p = 16
        return w / math.fsum(w)

    return rowwise(z, mask, row)


def log_sigmoid(u: float) -> float:
    """log sigma(u), exact in float64 for any finite u."""
    return -math.log1p(math.exp(-u)) if u >= 0 else u - math.log1p(math.exp(u))


def ref_sigmoid(z, mask, b):
    """sigma(z_i + b) / sum_j sigma(z_j + b), computed as softmax(log sigma(z + b)) (seed 000 App. T)."""

    def row(v, L):
        return _softmax_vals(np.array([log_sigmoid(x + b) for x in v]))

    return rowwise(z, mask, row)


def ref_wortsman(z, mask, p, by):
    """ReLU(z)^p / L (by="L") or / sqrt(L) (by="sqrtL"), un-normalized."""

    def row(v, L):
        return np.maximum(v, 0.0) ** p / (L if by == "L" else math.sqrt(L))

    return rowwise(z, mask, row)


def ref_reluattn(z, mask):
    """ReLU(z) / max(L - 2, 1) (seed 004 §3.4)."""
    return rowwise(z, mask, lambda v, L: np.maximum(v, 0.0) / max(L - 2, 1))


def assert_close_np(actual: torch.Tensor, expected: np.ndarray, atol: float, rtol: float = 0.0, msg: str = "") -> None:
    """|actual - expected| <= atol + rtol |expected| elementwise, NaN matching NaN."""
    a = np64(actual)
    assert a.shape == expected.shape, f"{msg} shape {a.shape} != {expected.shape}"
    nan_a, nan_e = np.isnan(a), np.isnan(expected)
    assert (nan_a == nan_e).all(), f"{msg} NaN pattern differs"
    a, e = np.where(nan_a, 0.0, a), np.where(nan_e, 0.0, expected)
    err = np.abs(a - e)
    bound = atol + rtol * np.abs(e)
    if not (err <= bound).all():
        i = np.unravel_index(np.argmax(err - bound), err.shape)
        raise AssertionError(
            f"{msg} max abs error {err.max():.3g} (allowed {atol:.3g} + {rtol:.3g}|ref|); "
            f"worst at {i}: got {a[i]!r}, reference {e[i]!r}"
        )
