"""alpha-entmax and sparsemax: exact thresholds, a fast root-finding forward and a closed-form backward.

Seed 001 (Long-Context Generalization with Sparse Attention) §2.2 and App. A:

    alpha-entmax(z)_i = [(alpha - 1) z_i - tau]_+^(1 / (alpha - 1)),  tau such that the row sums to 1.

Write x = (alpha - 1)(z - max z) <= 0 and k = 1 / (alpha - 1). The threshold theta = tau - (alpha-1) max z
solves f(theta) = sum_i [x_i - theta]_+^k = 1 and lies in [-1, -L^(-1/k)] for L allowed keys
(App. A, eq. 16). Keys with x_i < -1 can therefore never be in the support.

Root finding ("newton", the default). Newton's method on g(theta) = ||[x - theta]_+||_k - 1, started at
theta = -1. For k >= 1 (alpha <= 2) g is convex and decreasing (a k-norm of convex, non-negative,
decreasing functions), so Newton's iterates increase monotonically to the root without overshoot and
converge quadratically; g is exactly linear when the support entries are equal, which is why Newton on
g needs far fewer passes than Newton on f (measured in NOTES.md: 54-86x softmax for the naive loop).
alpha = 1.5 and 1.25 (k = 2, 4) use multiplications only. For k < 1 (alpha > 2) g is not convex and
the iteration is safeguarded by bisection on the bracket above.

Sort-based ("sort"): the exact order-based algorithms for alpha = 2 (sparsemax, Martins & Astudillo 2016)
and alpha = 1.5 (Peters et al. 2019), cited in seed 001 App. A.

Backward (both methods): with s = p^(2 - alpha) on the support, dL/dz = s * (g - <s, g> / sum s)
(Peters et al. 2019), so no iteration is differentiated.
"""

from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from ._rows import normalized_rows

MAX_ITER = 60


def _is_int(k: float) -> bool:
    return abs(k - round(k)) < 1e-9


def _tol(dtype: torch.dtype) -> float:
    # Newton converges quadratically: a last step below eps^(2/3) leaves an error near eps^(4/3).
    return torch.finfo(dtype).eps ** (2.0 / 3.0)


def _newton_threshold(x: torch.Tensor, k: float) -> torch.Tensor:
    """theta with sum_i [x_i - theta]_+^k = 1 for rows x <= 0 whose maximum is 0 (see module doc)."""
    theta = torch.full(x.shape[:-1] + (1,), -1.0, dtype=x.dtype)
    r = torch.empty_like(x)
    tol = _tol(x.dtype)
    if _is_int(k) and k >= 1:
        ki = int(round(k))
        for _ in range(MAX_ITER):
            torch.sub(x, theta, out=r).clamp_(min=0)
            if ki == 1:
                g = r.sum(-1, keepdim=True)
                step = (g - 1) / r.sign().sum(-1, keepdim=True)
            elif ki == 2:
                g = torch.linalg.vector_norm(r, 2, dim=-1, keepdim=True)
                step = (g - 1) * g / r.sum(-1, keepdim=True)
            else:
                rk1 = r.pow(ki - 1) if ki != 4 else r * r * r
                sk = (rk1 * r).sum(-1, keepdim=True)
                g = sk.pow(1.0 / ki)
                step = (g - 1) * sk / (g * rk1.sum(-1, keepdim=True))
            theta += step
            if float(step.max()) < tol:
                break
        return theta
    return _safeguarded_threshold(x, k, theta, r, tol)


def _safeguarded_threshold(
    x: torch.Tensor, k: float, theta: torch.Tensor, r: torch.Tensor, tol: float
) -> torch.Tensor:
    """Newton on g inside the bracket [-1, -N^(-1/k)], bisecting when a step leaves it."""
    lo = theta.clone()
    hi = torch.full_like(theta, -(x.shape[-1] ** (-1.0 / k)))
    for _ in range(MAX_ITER):
        torch.sub(x, theta, out=r).clamp_(min=0)
        g = torch.linalg.vector_norm(r, k, dim=-1, keepdim=True)
        support = r > 0
        dk = torch.where(support, r, 1).pow(k - 1).mul(support).sum(-1, keepdim=True)
        above = g >= 1
        lo = torch.where(above, theta, lo)
        hi = torch.where(above, hi, theta)
        new = theta + (g - 1) * g.pow(k - 1) / dk
        new = torch.where((new > lo) & (new < hi), new, (lo + hi) / 2)
        step = (new - theta).abs()
        theta = new
        if float(step.max()) < tol or float((hi - lo).max()) < tol:
            break
    return theta


def _sort_threshold(x: torch.Tensor, k: float) -> torch.Tensor:
    """Exact order-based threshold for k = 1 (sparsemax) and k = 2 (alpha = 1.5)."""
    xs = torch.sort(x.clamp(min=-2.0), dim=-1, descending=True).values
    j = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    csum = xs.cumsum(-1)
    if _is_int(k) and round(k) == 1:
        tau_j = (csum - 1) / j
    else:
        mean = csum / j
        ss = xs.square().cumsum(-1) / j - mean.square()
        tau_j = mean - torch.sqrt(((1 / j) - ss).clamp(min=0))
    size = (tau_j < xs).sum(-1, keepdim=True).clamp(min=1)
    return tau_j.gather(-1, size - 1)


class _Entmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, k: float, method: str) -> torch.Tensor:
        theta = _sort_threshold(x, k) if method == "sort" else _newton_threshold(x, k)
        r = (x - theta).clamp_(min=0)
        if _is_int(k) and round(k) == 1:
            p, s = r, r.sign()
        elif _is_int(k) and round(k) == 2:
            p, s = r * r, r
        else:
            support = r > 0
            s = torch.where(support, r, 1).pow(k - 1).mul_(support)
            p = s * r
        p = p / p.sum(-1, keepdim=True)
        ctx.save_for_backward(s)
        ctx.k = k
        return p

    @staticmethod
    @once_differentiable
    def backward(ctx, dp: torch.Tensor):
        (s,) = ctx.saved_tensors
        sg = s * dp
        q = sg.sum(-1, keepdim=True) / s.sum(-1, keepdim=True)
        # p_i = r_i^k gives dp/dx = k (diag(s) - s s^T / sum s); x = (alpha - 1) z brings the 1/k back.
        return sg.sub_(s * q).mul_(ctx.k), None, None


def entmax(z: torch.Tensor, alpha: float, method: str = "newton") -> torch.Tensor:
    """alpha-entmax over the last dimension of rows z (masked keys at -inf), alpha >= 1.

    alpha = 1 is softmax; alpha = 2 is sparsemax. ``method`` is "newton" (any alpha) or "sort"
    (alpha in {1.5, 2} only). Seed 001 §2.2, App. A.
    """
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha >= 1):
        raise ValueError(f"entmax alpha must be a finite number >= 1, got {alpha!r}")
    if method not in ("newton", "sort"):
        raise ValueError(f"entmax method must be 'newton' or 'sort', got {method!r}")
    if alpha == 1:
        return normalized_rows(z, lambda c, m: torch.softmax(c, dim=-1))
    k = 1.0 / (alpha - 1.0)
    if method == "sort" and not (_is_int(k) and round(k) in (1, 2)):
        raise ValueError(f"the sort method exists for alpha = 1.5 and 2 only, got alpha={alpha}")

    def rows(c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        x = (c - m) * (alpha - 1.0)
        if k < 1:
            # p = r^k with k < 1 has unbounded slope at the threshold: a float32 threshold error of
            # 1e-7 moves small weights by ~1e-4, so alpha > 2 solves in float64.
            return _Entmax.apply(x.double(), k, method).to(c.dtype)
        return _Entmax.apply(x, k, method)

    return normalized_rows(z, rows)
