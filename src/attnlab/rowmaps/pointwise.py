"""Pointwise row maps: normalized ReLU^p and sigmoid, Wortsman's un-normalized ReLU, and ReLU/n."""

from __future__ import annotations

import re
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from attnlab.errors import ArgumentError
from attnlab.rowmaps import kernel
from attnlab.rowmaps._rows import allowed_count, check_rows, denormal_floor, normalized_rows, pointwise_rows
from attnlab.rowmaps.registry import BIAS_RANGE, NUM, Built, bias, degree, register, within

DEAD_RULES = ("zeros", "uniform", "softmax")


def _power_of_two(p: float) -> bool:
    return p >= 1 and float(p).is_integer() and (int(p) & (int(p) - 1)) == 0


def _power(q: torch.Tensor, p: float, out: torch.Tensor) -> torch.Tensor:
    """q^p written into ``out`` (which may be q itself), by repeated squaring when p is a power of two:
    one pass each, where std::pow costs ~25 passes."""
    if _power_of_two(p):
        if out is not q:
            out.copy_(q)
        for _ in range(int(p).bit_length() - 1):
            out.mul_(out)
        return out
    return torch.pow(q, p, out=out)


def _dead_fill(c: torch.Tensor, w: torch.Tensor, dead_row: torch.Tensor, dead: str) -> torch.Tensor:
    if dead == "zeros" or not bool(dead_row.any()):
        return w
    if dead == "uniform":
        allowed = (~torch.isneginf(c)).to(w.dtype)
        fill = allowed / allowed.sum(-1, keepdim=True).clamp_min(1)
    else:
        fill = torch.softmax(c, dim=-1)
    return torch.where(dead_row, fill, w)


class _ReluPower(torch.autograd.Function):
    """Rows z (masked keys at -inf) with detached maxima m -> ReLU(z + b)^p / sum ReLU(z + b)^p.

    With q = ReLU(z + b) / r_max and y the output, dy/dz has the closed form
    dz = (p / r) y (dy - <dy, y>), which replaces log2(p) saved squarings in autograd's backward.
    On CPU, p a power of two up to 16 runs on the compiled kernel (``kernel.py``), forward and backward.
    """

    @staticmethod
    def forward(ctx: Any, z: torch.Tensor, m: torch.Tensor, p: float, b: float) -> torch.Tensor:
        rmax = m + b
        # A dead row (rmax <= 0) is divided by 1: every z + b <= 0 then thresholds to 0, and masked
        # keys stay -inf rather than -inf * 0 = NaN. Dividing (not multiplying by 1/rmax) keeps a
        # subnormal rmax from overflowing the reciprocal.
        rmax = torch.where(rmax > 0, rmax, torch.ones((), dtype=z.dtype))
        floor = denormal_floor(p, z.shape[-1], z.dtype)
        keep = ctx.needs_input_grad[0]
        ctx.p, ctx.floor = p, floor
        fused = kernel.for_rows(z, rmax) if _power_of_two(p) and p <= 16 else None
        if fused is not None:
            y, q = fused.relu_power_forward(z, rmax, int(p), b, floor, keep)
            ctx.save_for_backward(y, q, rmax)
            return y
        q = (z + b if b else z) / rmax
        torch.nn.functional.threshold_(q, floor, 0.0)  # type: ignore[attr-defined]  # missing from torch's stub
        w = _power(q, p, torch.empty_like(q) if keep else q)
        y = w.div_(w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny))
        ctx.save_for_backward(y, q, rmax)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        y, q, rmax = ctx.saved_tensors
        dy = dy.contiguous()
        fused = kernel.for_rows(y, q, rmax, dy)
        if fused is not None:
            return fused.relu_power_backward(y, q, rmax, dy, ctx.p, ctx.floor), None, None, None
        c = (dy * y).sum(-1, keepdim=True)
        # divided by r_max last: a subnormal r_max would make p / r_max inf, and 0 * inf a NaN at zero weights
        dz = (dy - c).mul_(y).div_(q.clamp_min(ctx.floor)).mul_(ctx.p).div_(rmax)
        return dz, None, None, None


def relu_power(z: torch.Tensor, p: float, b: float, dead: str = "zeros") -> torch.Tensor:
    """Normalized ReLU^p: r_i^p / sum_j r_j^p with r = ReLU(z + b).

    Polynomial Concentration (When Does Polynomial Attention Concentrate?) §5.3, Algorithm 1. Computed as
    (r / r_max)^p / sum (r_j / r_max)^p, so every power lies in [0, 1]: p = 16 cannot overflow or
    underflow the sum even for bf16/fp16 input (Polynomial Concentration §5.5 lost its p = 16 results to this).

    A dead row (no allowed key with z + b > 0) gets, by ``dead``: "zeros" (the row attends to nothing),
    "uniform" (equal weight on the allowed keys) or "softmax" (softmax of the row).
    """
    check_rows(z, None, -1)
    degree("relu_power", p)
    within("relu_power", "bias b", b, BIAS_RANGE)
    if dead not in DEAD_RULES:
        raise ArgumentError(f"dead-row rule must be one of {DEAD_RULES}, got {dead!r}")

    def rows(c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return _dead_fill(c, _ReluPower.apply(c, m, p, b), (m + b) <= 0, dead)  # type: ignore[no-untyped-call]

    return normalized_rows(z, rows)


class _SigmoidNormalized(torch.autograd.Function):
    """Rows z (masked keys at -inf) with detached maxima m -> sigma(z + b) / S, S = sum_j sigma(z_j + b).

    With y the output, du = y (1 - y S) (dy - <dy, y>) (sigma = y S), which needs only y and S: autograd
    would keep sigma and walk back through the division, the sum and the sigmoid.
    """

    @staticmethod
    def forward(ctx: Any, z: torch.Tensor, m: torch.Tensor, b: float) -> torch.Tensor:
        u = z + b if b else z
        w = torch.sigmoid(u)
        total = w.sum(-1, keepdim=True)
        y = w.div_(total)
        low = (m + b) < (-60.0 if z.dtype == torch.float32 else -600.0)
        if bool(low.any()):
            # sigma underflows there: the same quantity in log space. S is then 0 to working precision,
            # and 1 - y S = 1 in the backward is its limit.
            y = torch.where(low, torch.softmax(torch.nn.functional.logsigmoid(u), dim=-1), y)
        ctx.save_for_backward(y, total)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        y, total = ctx.saved_tensors
        dy = dy.contiguous()
        fused = kernel.for_rows(y, total, dy)
        if fused is not None:
            return fused.sigmoid_backward(y, total, dy), None, None
        c = (dy * y).sum(-1, keepdim=True)
        return (dy - c).mul_(y).mul_(1.0 - y * total), None, None


def sigmoid_normalized(z: torch.Tensor, b: float) -> torch.Tensor:
    """Normalized sigmoid: sigma(z_i + b) / sum_j sigma(z_j + b). Polynomial Concentration §5.3 and App. T.

    sigma > 0, so no row is dead. Rows whose largest z + b is so negative that sigma underflows are
    computed as softmax(log sigma(z + b)), the same quantity in log space. sigma is bounded, so a +inf key takes
    sigma(+inf) = 1 beside the other keys' sigma (the limit z_i -> inf: [1, inf, inf, 0] gives
    [0.226, 0.309, 0.309, 0.155]), not the even split of an unbounded map.
    """
    check_rows(z, None, -1)
    within("sigmoid_normalized", "bias b", b, BIAS_RANGE)
    return normalized_rows(
        z,
        lambda c, m: _SigmoidNormalized.apply(c, m, b),  # type: ignore[no-untyped-call]
        bounded=True,
    )


def wortsman(z: torch.Tensor, p: float, by: str) -> torch.Tensor:
    """Un-normalized ReLU(z)^p / L (``by="L"``) or / sqrt(L) (``by="sqrtL"``), L = allowed keys.

    Wortsman et al. (2023) as used in Polynomial Concentration §5.3, Table 2 (b = 0: there is no row normalizer to
    absorb a bias shift). Rows do not sum to 1.
    """
    check_rows(z, None, -1)
    degree("wortsman", p)
    if by not in ("L", "sqrtL"):
        raise ArgumentError(f"wortsman: by must be 'L' or 'sqrtL', got {by!r}")

    def rows(c: torch.Tensor) -> torch.Tensor:
        n = allowed_count(c).clamp_min(1)
        r = torch.relu(c)
        return (r.pow(p) if p != 1 else r) / (n if by == "L" else n.sqrt())

    return pointwise_rows(z, rows)


def relu_attention(z: torch.Tensor) -> torch.Tensor:
    """ReLU(z) / max(L - 2, 1), L = allowed keys (in a causal row, the 1-based query position i).

    Attention Sinks Essential §3.4: n_i = max(i - 2, 1) excludes BOS and the
    current token, so that ReLU attention can compute averages.
    """
    check_rows(z, None, -1)

    def rows(c: torch.Tensor) -> torch.Tensor:
        return torch.relu(c) / (allowed_count(c) - 2).clamp_min(1)

    return pointwise_rows(z, rows)


@register(
    "relu_p",
    pattern=rf"relu_p({NUM})_b({NUM}|auto)",
    example="relu_p4_b3.55",
    formula="ReLU(z_i + b)^p / sum_j ReLU(z_j + b)^p",
    params="p in (0, 256]; b in [-1e4, 1e4] or 'auto' (resolved by the caller); option dead=zeros|uniform|softmax",
    source="Polynomial Concentration §5.3, Alg. 1",
    options=("dead",),
)
def _relu_family(name: str, m: re.Match[str], dead: str = "zeros") -> Built:
    p, b = degree(name, float(m[1])), bias(name, m[2])
    if dead not in DEAD_RULES:
        raise ArgumentError(f"{name}: dead-row rule must be one of {DEAD_RULES}, got {dead!r}")
    return {"p": p, "b": b, "dead": dead}, None if b is None else (lambda z: relu_power(z, p, b, dead))


@register(
    "sigmoid",
    pattern=rf"sigmoid_b({NUM}|auto)",
    example="sigmoid_b0",
    formula="sigmoid(z_i + b) / sum_j sigmoid(z_j + b)",
    params="b in [-1e4, 1e4]: bias, or 'auto'",
    source="Polynomial Concentration §5.3, App. T",
)
def _sigmoid_family(name: str, m: re.Match[str]) -> Built:
    b = bias(name, m[1])
    return {"b": b}, None if b is None else (lambda z: sigmoid_normalized(z, b))


@register(
    "wortsman",
    pattern=rf"wortsman_p({NUM})_(L|sqrtL)",
    example="wortsman_p2_sqrtL",
    formula="ReLU(z_i)^p / L or / sqrt(L)",
    params="p in (0, 256]; L = allowed keys; not normalized",
    source="Polynomial Concentration §5.3 (Wortsman et al. 2023)",
    normalized=False,
)
def _wortsman_family(name: str, m: re.Match[str]) -> Built:
    p, by = degree(name, float(m[1])), m[2]
    return {"p": p, "by": by}, lambda z: wortsman(z, p, by)


@register(
    "reluattn",
    formula="ReLU(z_i) / max(L - 2, 1)",
    params="L = allowed keys; not normalized",
    source="Attention Sinks Essential §3.4",
    normalized=False,
)
def _reluattn_family(name: str, m: re.Match[str]) -> Built:
    return {}, relu_attention
