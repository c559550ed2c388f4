"""Fused attention for the normalized ReLU^p and sigmoid row maps in Triton, forward and backward, with the
scores, masks and position bias of :func:`attnlab.site.blockwise`: no (queries x keys) tensor is ever stored.

    >>> out = relu_sigmoid_attention(q, k, v, family="relu_p", p=4.0, b=0.5, window=512)

Runs on CUDA tensors, or on CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1`` set before this
module is imported).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, cast

import torch
from torch.autograd.function import once_differentiable

from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.rowmaps.registry import BIAS_RANGE, degree, within
from attnlab.site.spec import describe
from attnlab.site.triton import relu_sigmoid_kernels as kernels

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
FAMILIES = ("relu_p", "sigmoid")


class _Attention(torch.autograd.Function):
    """Saves q, k, v and two float32 numbers per query row (the online normalizer's final m and l) and a flag per
    (batch, head) (a row holding a +inf score); the backward recomputes every tile of scores from them, as flash
    attention does."""

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        slopes: torch.Tensor | None,
        row_scale: torch.Tensor | None,
        launch: kernels.Launch,
    ) -> torch.Tensor:
        out, m, l, flags = kernels.forward(q, k, v, slopes, row_scale, launch)
        ctx.save_for_backward(q, k, v, m, l, flags, slopes, row_scale)
        ctx.launch = launch
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None, None, None]:
        q, k, v, m, l, flags, slopes, row_scale = ctx.saved_tensors
        dq, dk, dv = kernels.backward(q, k, v, dout.contiguous(), m, l, flags, slopes, row_scale, ctx.launch)
        return dq, dk, dv, None, None, None


def relu_sigmoid_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    family: str,
    p: float = 2.0,
    b: float = 0.0,
    scale: float | None = None,
    causal: bool = True,
    window: int | None = None,
    slopes: torch.Tensor | None = None,
    query_scale: torch.Tensor | None = None,
    block_q: int = 64,
    block_k: int = 64,
) -> torch.Tensor:
    """Attention output (B, Hq, Q, Dv) with the row map ``relu_p{p}_b{b}`` (``family="relu_p"``: ReLU(z + b)^p
    normalized over the allowed keys, Polynomial Concentration §3) or ``sigmoid_b{b}`` (``family="sigmoid"``:
    sigmoid(z + b) normalized, App. T; ``p`` is ignored), equal to those row maps applied to the masked scores.

    q (B, Hq, Q, D); k (B, Hkv, K, D); v (B, Hkv, K, Dv); Hq a multiple of Hkv, query head h reading kv head
    h // (Hq / Hkv). Query i sits at key position K - Q + i (the last Q of the K keys, as after a key cache).
    Scores z = (scale * q.k - slopes[h] * (i' - j)_+) * query_scale[batch, h, i], i' the query's key position,
    scale defaulting to 1 / sqrt(D) (ALiBi, NAPE with slope 0 on its NoPE heads: the site's bias). Query i may
    attend key j if j <= i' (``causal``) and j > i' - window (``window``: its ``window`` most recent keys, itself
    included; needs ``causal``). Masked keys get weight exactly 0; a ReLU^p row whose allowed r = ReLU(z + b) are
    all 0 attends to nothing (output 0, gradient 0), as the row map's default ``dead="zeros"``. Rows with infinite
    scores are the row maps' limits (``attnlab.rowmaps._rows.normalized_rows``), gradients included: ReLU^p splits a
    row holding +inf evenly over its +inf keys, the sigmoid gives each +inf key sigma(+inf) = 1 beside the finite
    keys' own, and a row whose every allowed score is -inf attends to nothing.

    ReLU^p runs an online normalizer in the manner of flash attention: the running max m of r and sums of
    (r / m)^p and (r / m)^p v, rescaled by (m_old / m_new)^p as m grows, so every power lies in [0, 1] and p = 16
    with large scores cannot overflow float32. The sigmoid keeps a running sum of sigma(z + b) e^-c, with c the
    row's largest min(z + b, 0) so far: c = 0, a plain sum, unless every z + b is negative, where the shift keeps
    rows below float32's sigmoid range exact (the row map's log-space rows).

    Inputs float32, bfloat16 or float16, on one device; products accumulate in float32 (float32 ones in full
    IEEE precision, not TF32) and the output has the input dtype. Differentiable in q, k and v only: ``slopes``
    (Hq,) and ``query_scale`` (broadcastable to (B, Hq, Q)) are constants, and a ValueError says so if they
    require grad. ``block_q`` and ``block_k`` (powers of two, at least 16) are the tile sizes.
    """
    _check_tensors(q, k, v, causal)
    launch = kernels.Launch(
        sigmoid=_family(family) == "sigmoid",
        p=degree("relu_sigmoid_attention", p) if family == "relu_p" else 1.0,
        b=within("relu_sigmoid_attention", "bias b", b, BIAS_RANGE),
        scale=1.0 / math.sqrt(q.shape[-1]) if scale is None else _scale(scale),
        causal=bool(causal),
        window=_window(window, causal),
        block_q=_block("block_q", block_q),
        block_k=_block("block_k", block_k),
    )
    slopes = _constant("slopes", slopes, (q.shape[1],), q.device)
    query_scale = _constant("query_scale", query_scale, q.shape[:3], q.device)
    q, k, v = (t.contiguous() for t in (q, k, v))
    return cast(torch.Tensor, _Attention.apply(q, k, v, slopes, query_scale, launch))  # type: ignore[no-untyped-call]


def _check_tensors(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> None:
    if kernels.triton is None:
        raise ModuleNotFoundError("relu_sigmoid_attention needs triton: pip install triton")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dtype not in DTYPES:
            raise ArgumentTypeError(f"{name} must be a float32, bfloat16 or float16 tensor, got {describe(t)}")
        if t.dim() != 4:
            raise ArgumentError(f"{name} must be 4-D (batch, heads, tokens, head_dim), got shape {tuple(t.shape)}")
    if len({q.dtype, k.dtype, v.dtype}) > 1:
        raise ArgumentTypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if len({q.device, k.device, v.device}) > 1:
        raise ArgumentError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    if q.device.type != "cuda" and not kernels.INTERPRETED:
        raise ArgumentError(
            f"relu_sigmoid_attention runs on CUDA tensors, got {q.device}; set TRITON_INTERPRET=1 before "
            "importing attnlab.site.triton.relu_sigmoid to run it on the CPU"
        )
    (bsz, heads, n_q, dim), (kbsz, kv_heads, n_k, kdim) = q.shape, k.shape
    if kbsz != bsz or kdim != dim or v.shape[:3] != k.shape[:3]:
        raise ArgumentError(
            f"q (B, Hq, Q, D), k (B, Hkv, K, D) and v (B, Hkv, K, Dv) disagree: {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if dim == 0:
        raise ArgumentError("q and k need a head_dim of at least 1, got 0")
    if kv_heads == 0 or heads % kv_heads:
        raise ArgumentError(f"query heads ({heads}) must be a multiple of key/value heads ({kv_heads})")
    if causal and n_q > n_k:
        raise ArgumentError(
            f"causal attention needs at least as many keys as queries, got {n_k} keys for {n_q} queries"
        )


def _family(family: object) -> str:
    if family not in FAMILIES:
        raise ArgumentError(f"family must be one of {FAMILIES}, got {family!r}")
    return family


def _scale(scale: object) -> float:
    # typeshed's numbers.Real declares < and <= only, so mypy refuses scale > 0
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not (math.isfinite(scale) and scale > 0):  # type: ignore[operator]
        raise ArgumentError(f"scale must be a finite number > 0, got {scale!r}")
    return float(scale)


def _window(window: object, causal: bool) -> int | None:
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1:
        raise ArgumentError(f"window must be an int >= 1 or None, got {window!r}")
    if not causal:
        raise ArgumentError("a sliding window needs causal=True (it counts keys back from the query's position)")
    return int(window)


def _block(name: str, size: object) -> int:
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 16 or size & (size - 1):
        raise ArgumentError(f"{name} must be a power of two >= 16, got {size!r}")
    return int(size)


def _constant(name: str, t: torch.Tensor | None, shape: tuple[int, ...], device: torch.device) -> torch.Tensor | None:
    """A slope or row-scale tensor as the kernels read it: float32, contiguous, of ``shape``, on ``device``."""
    if t is None:
        return None
    if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
        raise ArgumentTypeError(f"{name} must be a floating tensor, got {describe(t)}")
    if t.requires_grad and torch.is_grad_enabled():
        raise ArgumentError(f"{name} must not require grad: the kernel's backward gives gradients for q, k, v only")
    if t.device != device:
        raise ArgumentError(f"{name} must be on the inputs' device {device}, got {t.device}")
    try:
        fits = torch.broadcast_shapes(t.shape, shape) == tuple(shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise ArgumentError(f"{name} of shape {tuple(t.shape)} must broadcast to {tuple(shape)}")
    return t.to(torch.float32).expand(shape).contiguous()
