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

from ._rows import denormal_floor, normalized_rows

MAX_ITER = 60
# Candidate count for the starting bound: the maxima of M strided groups of keys are a subset of the
# row, and the root of any subset is a lower bound on the row's root (fewer terms, smaller sum).
_GROUPS = 128


def _is_int(k: float) -> bool:
    return abs(k - round(k)) < 1e-9


def _tol(dtype: torch.dtype) -> float:
    # Newton converges quadratically: a last step below eps^(2/3) leaves an error near eps^(4/3).
    return torch.finfo(dtype).eps ** (2.0 / 3.0)


def _residual(x: torch.Tensor, theta: torch.Tensor, r: torch.Tensor, k: int) -> torch.Tensor:
    """Newton step on g(theta) = ||[x - theta]_+||_k - 1; ``r`` is overwritten with [x - theta]_+."""
    torch.sub(x, theta, out=r).relu_()
    if k == 1:
        return r.sum(-1, keepdim=True).sub_(1).div_(r.sign().sum(-1, keepdim=True))
    if k == 2:
        g = torch.linalg.vector_norm(r, 2, dim=-1, keepdim=True)
        return torch.addcmul(-g, g, g).div_(r.sum(-1, keepdim=True))
    if k == 4:
        r2 = r * r
        sk = torch.linalg.vector_norm(r2, 2, dim=-1, keepdim=True).square_()
        d = (r2.mul_(r)).sum(-1, keepdim=True)
    else:
        rk1 = r.pow(k - 1)
        sk = (rk1 * r).sum(-1, keepdim=True)
        d = rk1.sum(-1, keepdim=True)
    g = sk.pow(1.0 / k)
    return (g - 1).mul_(sk).div_(g.mul_(d))


def _newton(x: torch.Tensor, k: int, theta: torch.Tensor, tol: float) -> torch.Tensor:
    """Iterate from a lower bound ``theta`` (updated in place) until the step is below ``tol``."""
    r = torch.empty_like(x)
    for _ in range(MAX_ITER):
        step = _residual(x, theta, r, k)
        theta.add_(step)
        if float(step.max()) < tol:
            break
    return theta


def _newton_threshold(x: torch.Tensor, k: float) -> torch.Tensor:
    """theta with sum_i [x_i - theta]_+^k = 1 for rows x <= 0 whose maximum is 0 (see module doc)."""
    theta = torch.full(x.shape[:-1] + (1,), -1.0, dtype=x.dtype)
    tol = _tol(x.dtype)
    if not (_is_int(k) and k >= 1):
        return _safeguarded_threshold(x, k, theta, torch.empty_like(x), tol)
    ki = int(round(k))
    n = x.shape[-1]
    if n >= 4 * _GROUPS:
        maxima = x[..., : n - n % _GROUPS].unflatten(-1, (-1, _GROUPS)).amax(-2)
        theta = _newton(maxima, ki, theta, 1e-3)
    return _newton(x, ki, theta, tol)


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


def _weights(r: torch.Tensor, k: float, need_s: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """p = r^k / sum r^k and, for the backward, s = r^(k-1) = p^(2-alpha) on the support."""
    ki = int(round(k)) if _is_int(k) else None
    if ki == 1:
        p, s = r, (r.sign() if need_s else None)
    elif ki == 2:
        p, s = r * r, r
    elif ki == 4:
        r2 = r * r
        p, s = r2 * r2, (r2 * r if need_s else None)
    else:
        support = r > 0
        s = torch.where(support, r, 1).pow(k - 1).mul_(support)
        p = s * r
    return p.div_(p.sum(-1, keepdim=True)), s


class _Entmax(torch.autograd.Function):
    """Rows z (masked keys at -inf) and their detached maxima m -> alpha-entmax weights.

    The gradient is taken with respect to z directly: d/dz = (alpha - 1) d/dx and the k = 1/(alpha-1)
    of dp/dx cancel it, so the backward needs only s. x's buffer becomes the output's.
    """

    @staticmethod
    def forward(ctx, z: torch.Tensor, m: torch.Tensor, alpha: float, method: str) -> torch.Tensor:
        k = 1.0 / (alpha - 1.0)
        x = (z - m).mul_(alpha - 1.0)
        theta = _sort_threshold(x, k) if method == "sort" else _newton_threshold(x, k)
        r = torch.nn.functional.threshold_(x.sub_(theta), denormal_floor(k, x.dtype), 0.0)
        p, s = _weights(r, k, ctx.needs_input_grad[0])
        ctx.save_for_backward(s)
        return p

    @staticmethod
    @once_differentiable
    def backward(ctx, dp: torch.Tensor):
        # Jacobian diag(s) - s s^T / sum s with s = p^(2 - alpha) (Peters et al. 2019).
        (s,) = ctx.saved_tensors
        sg = s * dp
        q = sg.sum(-1, keepdim=True).div_(s.sum(-1, keepdim=True))
        return sg.sub_(s * q), None, None, None


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
        if k < 1:
            # p = r^k with k < 1 has unbounded slope at the threshold: a float32 threshold error of
            # 1e-7 moves small weights by ~1e-4, so alpha > 2 solves in float64.
            return _Entmax.apply(c.double(), m.double(), alpha, method).to(c.dtype)
        return _Entmax.apply(c, m, alpha, method)

    return normalized_rows(z, rows)
