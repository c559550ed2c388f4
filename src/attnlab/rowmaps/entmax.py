"""alpha-entmax and sparsemax: exact thresholds, a fast root-finding forward and a closed-form backward.

Vasylenko et al. 2025 (Long-Context Generalization with Sparse Attention) §2.2 and App. A:

    alpha-entmax(z)_i = [(alpha - 1) z_i - tau]_+^(1 / (alpha - 1)),  tau such that the row sums to 1.

Write x = (alpha - 1)(z - max z) <= 0 and k = 1 / (alpha - 1). The threshold theta = tau - (alpha-1) max z
solves f(theta) = sum_i [x_i - theta]_+^k = 1 and lies in [-1, -L^(-1/k)] for L allowed keys
(App. A, eq. 16). Keys with x_i < -1 can therefore never be in the support.

Root finding ("newton", the default). Newton's method on g(theta) = ||[x - theta]_+||_k - 1, started at
theta = -1. For k >= 1 (alpha <= 2) g is convex and decreasing (a k-norm of convex, non-negative,
decreasing functions), so Newton's iterates increase monotonically to the root without overshoot and
converge quadratically; g is exactly linear when the support entries are equal, which is why Newton on
g needs far fewer passes than Newton on f (a naive safeguarded Newton on f measured 54-86x softmax).
The fast path serves alpha = 2, 1.5, 1.25 (k = 1, 2, 4: multiplications only): it works in z units
(threshold t = max z + theta / (alpha - 1)), so no scaled copy of the rows is made; starts from
Newton iterates on the maxima of 128 strided key groups (a subset of the row, so its iterates are
lower bounds on the row's root; 2-3 full passes remain instead of 4-8); stops Newton early and accepts
the threshold by the bound the weights' own sum gives (see _fast_forward); and reuses preallocated
buffers, since every fresh row-sized allocation can cost page faults under glibc's malloc. Every other alpha takes
the general path in float64: Newton safeguarded by bisection on the bracket above, because for
k < 1 (alpha > 2) g is not convex.

Sort-based ("sort"): the exact order-based algorithms for alpha = 2 (sparsemax, Martins & Astudillo 2016)
and alpha = 1.5 (Peters et al. 2019), cited in Vasylenko et al. 2025 App. A.

Backward (both methods): with s = p^(2 - alpha) on the support, dL/dz = s * (g - <s, g> / sum s)
(Peters et al. 2019), so no iteration is differentiated.

On CPU, float32 and float64 rows with alpha in {2, 1.5, 1.25} go through the compiled kernel
(``kernel.py``), which runs the same Newton iteration one cached row at a time, forward and backward;
the torch-ops path below serves everything else (GPU tensors, other alphas, machines without a C
compiler) and is tested to the same references.
"""

from __future__ import annotations

import math
import re
from typing import Any, cast

import torch
from torch.autograd.function import once_differentiable

from attnlab.errors import ArgumentError
from attnlab.rowmaps import kernel
from attnlab.rowmaps._rows import check_rows, denormal_floor, normalized_rows
from attnlab.rowmaps.registry import NUM, Built, register
from attnlab.rowmaps.softmax import softmax

MAX_ITER = 60
FAST_K = (1, 2, 4)
_GROUPS = 128
_SMALL = 1e-2  # Newton step (x units) ending the group-maxima phase (any iterate is a bound)
_LOOSE = 1e-3  # Newton step (x units) below which the weights' sum is checked instead
_SHIFT_ABOVE = 8.0  # |max z| above which the fast path shifts rows first (ulp(8): 1e-6 float32, 2e-15 float64)


def _is_int(k: float) -> bool:
    return abs(k - round(k)) < 1e-9


def _tol(dtype: torch.dtype) -> float:
    # Newton converges quadratically: a last step below eps^(2/3) leaves an error near eps^(4/3).
    return float(torch.finfo(dtype).eps ** (2.0 / 3.0))


def _sums(r: torch.Tensor, tmp: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """G = ||r||_k, d = sum r^(k-1) and (k = 4 only, else None) m2 = sum r^(k-2) over the last dim,
    for k in FAST_K; for k = 4, ``tmp`` gets r^2 and ``r`` is then overwritten with r^3."""
    if k == 1:
        return r.sum(-1, keepdim=True), r.sign().sum(-1, keepdim=True), None
    if k == 2:
        return torch.linalg.vector_norm(r, 2, dim=-1, keepdim=True), r.sum(-1, keepdim=True), None
    torch.mul(r, r, out=tmp)
    g = torch.linalg.vector_norm(tmp, 2, dim=-1, keepdim=True).sqrt_()
    m2 = tmp.sum(-1, keepdim=True)
    return g, r.mul_(tmp).sum(-1, keepdim=True), m2


def _step(g: torch.Tensor, d: torch.Tensor, k: int, target: float, m2: torch.Tensor | None = None) -> torch.Tensor:
    """Step on h = ||r||_k - target from G = ||r||_k, d = sum r^(k-1) and, when given, m2 = sum r^(k-2).

    Newton: h' = -d / G^(k-1), so the step is (G - target) G^(k-1) / d. Given m2, Halley's correction:
    h'' = (k-1) G^(1-2k) (G^k m2 - d^2) >= 0 (Cauchy-Schwarz), and the Newton step is divided by
    1 - c, c = (G - target) h'' / (2 h'^2), capped at 1/2 so a step is at most twice Newton's. Halley
    converges cubically, which saves a full-row pass for k = 4, where m2 is one reduction of the r^2
    already formed. Every op here is on one number per row, where PyTorch's per-op cost dominates:
    keep them few.
    """
    h = g - target
    if k == 1:
        return h.div_(d)
    gk1 = g if k == 2 else g.pow(k - 1)
    if m2 is None:
        return h.mul_(gk1).div_(d)
    newton = h.mul(gk1).div_(d)
    d2 = d.square()
    c = gk1.mul(g).mul_(m2).sub_(d2).mul_(h).mul_((k - 1) / 2.0).div_(d2.mul_(g)).clamp_(max=0.5)
    return newton.div_(c.neg_().add_(1.0))


def _fast_step(
    z: torch.Tensor, t: torch.Tensor, r: torch.Tensor, tmp: torch.Tensor, k: int, target: float, halley: bool
) -> torch.Tensor:
    """Step on h(t) = ||[z - t]_+||_k - target (target = 1/(alpha-1)) for k in FAST_K (see _step).

    ``r`` and ``tmp`` are scratch of z's shape (``tmp`` is used for k = 4 only).
    """
    torch.sub(z, t, out=r).relu_()
    sk, d, m2 = _sums(r, tmp, k)
    return _step(sk, d, k, target, m2 if halley else None)


def _fast_newton(
    z: torch.Tensor,
    t: torch.Tensor,
    r: torch.Tensor,
    tmp: torch.Tensor,
    k: int,
    target: float,
    tol: float,
    halley: bool,
) -> torch.Tensor:
    """Iterate from a lower bound ``t`` (updated in place) until a step is below ``tol``.

    Newton's iterates stay lower bounds (h is convex); Halley's may end just above the root.
    """
    for _ in range(MAX_ITER):
        step = _fast_step(z, t, r, tmp, k, target, halley)
        t.add_(step)
        if float((step.abs_() if halley else step).max()) < tol:
            break
    return t


def _fast_threshold(
    z: torch.Tensor, m: torch.Tensor, k: int, alpha: float, r: torch.Tensor, tmp: torch.Tensor
) -> torch.Tensor:
    """alpha-entmax's threshold t (z units) to within ~_LOOSE (module doc)."""
    target = 1.0 / (alpha - 1.0)
    t = m - target
    n = z.shape[-1]
    if n >= 4 * _GROUPS:
        # The group maxima and their scratch live inside r (free at this point; n >= 3 * _GROUPS):
        # a separate allocation each call costs page faults (see the module doc).
        shape = z.shape[:-1] + (_GROUPS,)
        size = math.prod(shape)
        part = [r.view(-1)[i * size : (i + 1) * size].view(shape) for i in range(3)]
        torch.amax(z[..., : n - n % _GROUPS].unflatten(-1, (-1, _GROUPS)), -2, out=part[0])
        # Iterates on a subset of the row must stay lower bounds of the row's root: Newton only.
        _fast_newton(part[0], t, part[1], part[2], k, target, _SMALL * target, halley=False)
    return _fast_newton(z, t, r, tmp, k, target, _LOOSE * target, halley=True)


def _fast_forward(
    z: torch.Tensor, m: torch.Tensor, k: int, alpha: float, need_s: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """alpha-entmax weights (and s for the backward) for k in FAST_K.

    Newton stops early (step below _LOOSE); the weights' own sum f = sum ((alpha-1) r)^k then bounds
    the threshold's error by |f - 1| / (k ((alpha-1) r_max)^(k-1)), f's slope being at least that, so
    the usual confirming iteration is needed only when that bound is not small enough.
    """
    a = alpha - 1.0
    if float(m.abs().max()) > _SHIFT_ABOVE:
        # t = m + theta / (alpha - 1) carries m's rounding (ulp(1e4) = 1e-3 in float32, ulp(1e8) = 1.5e-8
        # in float64); rows shifted to max 0 keep the threshold's absolute error at the eps of small numbers.
        z, m = z - m, torch.zeros_like(m)
    r = torch.empty_like(z)
    tmp = torch.empty_like(z) if k == 4 else r
    t = _fast_threshold(z, m, k, alpha, r, tmp)
    floor = denormal_floor(k, z.shape[-1], z.dtype) / a
    accept = 16 * torch.finfo(z.dtype).eps
    converged = False
    for _ in range(MAX_ITER):
        torch.nn.functional.threshold_(torch.sub(z, t, out=r), floor, 0.0)  # type: ignore[attr-defined]  # not in the stub
        if k == 4:
            torch.mul(r, r, out=tmp)
        total = _power_sum(r, tmp, k)
        # |f - 1| / slope with slope = k (a (m - t))^(k-1), in few ops on one number per row.
        err = total.mul(a**k).sub_(1.0).abs_()
        if k > 1:
            err.div_((m - t).pow_(k - 1))
        if converged or float(err.max()) <= accept * k * a ** (k - 1):
            return _fast_weights(r, tmp, total, k, a, need_s)
        # r (and r^2 in tmp) still hold this pass: the step needs only sum r^(k-1) (and r^(k-2)) more.
        m2 = tmp.sum(-1, keepdim=True) if k == 4 else None
        d = (r.sign() if k == 1 else r if k == 2 else r.mul_(tmp)).sum(-1, keepdim=True)
        step = _step(total.pow(1.0 / k), d, k, 1.0 / a, m2)
        t.add_(step)
        converged = float(step.abs().max()) < _tol(z.dtype) / a
    return _fast_weights(r, tmp, total, k, a, need_s)


def _safeguarded_threshold(x: torch.Tensor, k: float) -> torch.Tensor:
    """theta for rows x <= 0 with max 0: Newton on g inside [-1, -N^(-1/k)], bisecting when a step
    leaves the bracket."""
    theta = torch.full(x.shape[:-1] + (1,), -1.0, dtype=x.dtype)
    lo = theta.clone()
    hi = torch.full_like(theta, -(x.shape[-1] ** (-1.0 / k)))
    r = torch.empty_like(x)
    # Run to the float's resolution: for k < 1 a threshold error d moves a weight by up to d^k.
    tol = 8 * torch.finfo(x.dtype).eps
    for _ in range(2 * MAX_ITER):
        torch.sub(x, theta, out=r).relu_()
        g = torch.linalg.vector_norm(r, k, dim=-1, keepdim=True)
        # A row whose norm is 1 to a few ulps is solved: moving it on lets rounding (g a hair under 1 below the
        # root) set its bracket's upper end under the root, after which every step bisects (55 passes, not 6).
        solved = (g - 1).abs() <= 4 * torch.finfo(x.dtype).eps
        if bool(solved.all()):
            break
        support = r > 0
        dk = torch.where(support, r, 1).pow(k - 1).mul(support).sum(-1, keepdim=True)
        above = g >= 1
        lo = torch.where(above, theta, lo)
        hi = torch.where(above, hi, theta)
        new = theta + (g - 1) * g.pow(k - 1) / dk
        new = torch.where(solved, theta, torch.where((new > lo) & (new < hi), new, (lo + hi) / 2))
        step = (new - theta).abs()
        theta = new
        if float(step.max()) < tol or float((hi - lo).max()) < tol:
            break
    return theta


def _sort_threshold(x: torch.Tensor, k: float) -> torch.Tensor:
    """Exact order-based theta for k = 1 (sparsemax) and k = 2 (alpha = 1.5), rows x <= 0 with max 0."""
    xs = torch.sort(x.clamp(min=-2.0), dim=-1, descending=True).values
    j = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    csum = xs.cumsum(-1)
    if round(k) == 1:
        tau_j = (csum - 1) / j
    else:
        mean = csum / j
        ss = xs.square().cumsum(-1) / j - mean.square()
        tau_j = mean - torch.sqrt(((1 / j) - ss).clamp(min=0))
    size = (tau_j < xs).sum(-1, keepdim=True).clamp(min=1)
    return tau_j.gather(-1, size - 1)


def _power_sum(r: torch.Tensor, r2: torch.Tensor, k: int) -> torch.Tensor:
    """sum r^k for k in FAST_K, with r2 = r^2 already computed when k = 4."""
    if k == 1:
        return r.sum(-1, keepdim=True)
    # torch.linalg.vector_norm is typed Any (a docstring-wrapped builtin)
    return cast(torch.Tensor, torch.linalg.vector_norm(r if k == 2 else r2, 2, dim=-1, keepdim=True)).square_()


def _fast_weights(
    r: torch.Tensor, r2: torch.Tensor, total: torch.Tensor, k: int, a: float, need_s: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """p = r^k / total and, when needed, s = p^(2-alpha) = (a r)^(k-1), from r = [z - t]_+.

    On the solution a r (a = alpha - 1) is the x-unit residual with sum (a r)^k = 1. For k = 4, r2
    holds r^2. The buffers are consumed: p and s are returned in them where possible.
    """
    if k == 1:
        s = torch.sign(r) if need_s else None
        return r.div_(total), s
    if k == 2:
        if need_s:
            return (r * r).div_(total), r.mul_(a)
        return r.mul_(r).div_(total), None
    s = r.mul_(r2).mul_(a**3) if need_s else None
    return r2.mul_(r2).div_(total), s


def _general_weights(x: torch.Tensor, k: float, method: str) -> tuple[torch.Tensor, torch.Tensor]:
    theta = _sort_threshold(x, k) if method == "sort" else _safeguarded_threshold(x, k)
    r = torch.nn.functional.threshold_(x.sub_(theta), denormal_floor(k, x.shape[-1], x.dtype), 0.0)  # type: ignore[attr-defined]
    support = r > 0
    s = torch.where(support, r, 1).pow_(k - 1).mul_(support)
    p = s * r
    return p.div_(p.sum(-1, keepdim=True)), s


class _Entmax(torch.autograd.Function):
    """Rows z (masked keys at -inf) and their detached maxima m -> alpha-entmax weights.

    The gradient is taken with respect to z directly: d/dz = (alpha - 1) d/dx and the k = 1/(alpha-1)
    of dp/dx cancel, so the backward needs only s.
    """

    @staticmethod
    def forward(ctx: Any, z: torch.Tensor, m: torch.Tensor, alpha: float, method: str) -> torch.Tensor:
        k = 1.0 / (alpha - 1.0)
        need_s = ctx.needs_input_grad[0]
        if method == "newton" and _is_int(k) and round(k) in FAST_K:
            fused = kernel.for_rows(z, m)
            if fused is not None:
                p, s = fused.forward(
                    z, m, round(k), alpha - 1.0, denormal_floor(round(k), z.shape[-1], z.dtype), need_s
                )
            else:
                p, s = _fast_forward(z, m, round(k), alpha, need_s)
        else:
            p, s = _general_weights((z - m).mul_(alpha - 1.0), k, method)
        ctx.save_for_backward(s if need_s else None)
        return p

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dp: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        # Jacobian diag(s) - s s^T / sum s with s = p^(2 - alpha) (Peters et al. 2019):
        # dz = s * (dp - <s, dp> / sum s).
        (s,) = ctx.saved_tensors
        dp = dp.contiguous()
        fused = kernel.for_rows(s, dp)
        if fused is not None:
            return fused.backward(s, dp), None, None, None
        sg = s * dp
        q = sg.sum(-1, keepdim=True).div_(s.sum(-1, keepdim=True))
        return sg.addcmul_(s, q, value=-1.0), None, None, None


# Past alpha = 4 float64 cannot place the threshold finely enough: a key whose distance r to it is below the
# threshold's ulp (2^-53 at |theta| ~ 1) gets weight r^(1/(alpha-1)), so weights up to (2^-53)^(1/(alpha-1)) are
# unresolved: 4.8e-6 at 4 (1.1e-9 measured against a 60-digit bisection on rows built to sit at the threshold),
# 7e-4 measured at 6, and 0.33 at 50 (entmax_a50 on [0, -0.01] gave [0.669, 0.331] for the exact [0.986, 0.014]).
ALPHA_MAX = 4.0


def check(alpha: float, method: str) -> None:
    """Raise ValueError unless 1 <= alpha <= ``ALPHA_MAX`` and ``method`` exists for it."""
    if isinstance(alpha, bool) or not (
        isinstance(alpha, (int, float)) and math.isfinite(alpha) and 1 <= alpha <= ALPHA_MAX
    ):
        raise ArgumentError(
            f"alpha must be a number in [1, {ALPHA_MAX:g}] (alpha = 1 is softmax; past {ALPHA_MAX:g} "
            f"float64 cannot resolve the threshold), got {alpha!r}"
        )
    if method not in ("newton", "sort"):
        raise ArgumentError(f"method must be 'newton' or 'sort', got {method!r}")
    if method == "sort" and alpha not in (1.5, 2.0):
        raise ArgumentError(f"the sort method exists for alpha = 1.5 and 2 only, got alpha={alpha:g}")


def entmax(z: torch.Tensor, alpha: float, method: str = "newton") -> torch.Tensor:
    """alpha-entmax over the last dimension of rows z (masked keys at -inf), 1 <= alpha <= ``ALPHA_MAX``.

    alpha = 1 is softmax; alpha = 2 is sparsemax. ``method`` is "newton" (any alpha) or "sort"
    (alpha in {1.5, 2} only). Vasylenko et al. 2025 §2.2, App. A.
    """
    check(alpha, method)
    check_rows(z, None, -1)
    if alpha == 1:
        return softmax(z)
    k = 1.0 / (alpha - 1.0)

    def rows(c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        if method == "newton" and not (_is_int(k) and round(k) in FAST_K):
            # The general path goes through pow and a safeguarded iteration; for k < 1 (alpha > 2),
            # p = r^k has unbounded slope at the threshold, so a float32 threshold error of 1e-7
            # moves small weights by ~1e-4. It solves in float64.
            # torch leaves Function.apply unannotated (an untyped call returning Any)
            return cast(torch.Tensor, _Entmax.apply(c.double(), m.double(), alpha, method)).to(c.dtype)  # type: ignore[no-untyped-call]
        return cast(torch.Tensor, _Entmax.apply(c, m, alpha, method))  # type: ignore[no-untyped-call]

    return normalized_rows(z, rows)


def _entmax_map(name: str, alpha: float, method: str) -> Built:
    try:
        check(alpha, method)
    except ValueError as exc:
        raise ArgumentError(f"{name}: {exc}") from None
    return {"alpha": alpha, "method": method}, lambda z: entmax(z, alpha, method)


@register(
    "entmax",
    pattern=rf"entmax_a({NUM})",
    example="entmax_a1.5",
    formula="[(alpha-1) z_i - tau]_+^(1/(alpha-1)), tau so the row sums to 1",
    params="1 <= alpha <= 4 (1 = softmax, 2 = sparsemax; float64 resolves the threshold up to 4); "
    "option method=newton|sort",
    source="Vasylenko et al. 2025 §2.2, App. A",
    options=("method",),
)
def _entmax_family(name: str, m: re.Match[str], method: str = "newton") -> Built:
    return _entmax_map(name, float(m[1]), method)


@register(
    "sparsemax",
    formula="[z_i - tau]_+ (alpha-entmax at alpha = 2)",
    params="option method=newton|sort",
    source="Vasylenko et al. 2025 App. A",
    options=("method",),
    family="entmax",
)
def _sparsemax_family(name: str, m: re.Match[str], method: str = "newton") -> Built:
    return _entmax_map(name, 2.0, method)
