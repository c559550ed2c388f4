"""The fused path of :func:`attnlab.site.blockwise`, taken where nothing needs a block of scores (no observer, no
gradient, no dropout), the attention is causal and the plan has a row map or a position bias.

Each query block computes only the keys its queries may attend (about half the scores of a causal sequence), a
position bias (ALiBi/NAPE :class:`~attnlab.site.spec.Slopes`) is built for that tile alone, and the causal mask is
written only where it can hide a key. Plain softmax with a position bias goes through
``scaled_dot_product_attention``: its heads with slope 0 (NAPE's NoPE half) in one call, the others one tile at a
time with the bias tile as the kernel's mask. The fused path equals the block-materializing one to float rounding;
tests compare the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from attnlab.rowmaps import length_multiplier
from attnlab.site import cpu_kernel as site_kernel
from attnlab.site.spec import LengthScale, Plan
from attnlab.site.tiles import causal_mask, key_span, position_bias, query_blocks
from attnlab.site.weights import _softmax, _weights


def _fusable(plan: Plan, causal: bool, dropout: bool, slopes: torch.Tensor | None) -> bool:
    """Whether the fused path serves a call without a ``bias`` callable (whose blocks span every key): causal,
    nothing reads a block (observers, dropout) and a row map or a position bias to fuse; plain softmax
    without one stays eager's exact arithmetic."""
    return (
        plan.fused
        and causal
        and not dropout
        and not plan.observers
        and not plan.weight_observers
        and (bool(plan.maps) or slopes is not None)
    )


def _mask_tile(z: torch.Tensor, allowed: torch.Tensor, start: int, offset: int, lo: int, window: int | None) -> None:
    """Write -inf at z's masked keys. Without a window only the keys after the tile's first query can be
    masked, so only those columns are touched (a pass over the whole tile costs as much as the map's)."""
    edge = 0 if window is not None else max(0, start + offset + 1 - lo)
    z[..., edge:].masked_fill_(~allowed[..., edge:], -math.inf)


def _attend_fused(
    query: torch.Tensor,
    key_t: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    *,
    scaling: float,
    window: int | None,
    softcap: float | None,
    plan: Plan,
    groups: list[tuple[Callable[[torch.Tensor], torch.Tensor], list[int]]],
    slopes: torch.Tensor | None,
    scale: torch.Tensor | None,
) -> torch.Tensor:
    """Causal attention without observers, one query block at a time over only the keys it may attend
    (:func:`key_span`): the work of the block-materializing loop less the scores every query of a block
    would mask, with the same arithmetic on the rest except that the queries are scaled before the product
    instead of the scores after it. Without autograd, the compiled kernel (:mod:`attnlab.site.cpu_kernel`)
    serves it where it applies; with autograd, the tiles are torch operations that autograd records (half
    the products of the block-materializing loop, and half the saved scores)."""
    n_q, n_k = query.shape[2], key_t.shape[-1]
    offset = n_k - n_q
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (query, key_t, value, scale))
    if not plan.maps and softcap is None and scale is None and plan.length_scale is None:
        assert slopes is not None  # _fusable: a call without row maps has a position bias
        return _attend_biased_softmax(
            query,
            key_t.transpose(2, 3),
            value,
            out,
            scaling=scaling,
            window=window,
            block=plan.block,
            slopes=slopes,
            grad=grad,
        )
    if (
        not grad
        and softcap is None
        and len(groups) == 1
        and site_kernel.forward(
            query,
            key_t.transpose(2, 3),
            value,
            out,
            scaling=scaling,
            window=window,
            rowmap="softmax" if groups[0][0] is _softmax else groups[0][0],
            slopes=slopes,
            rowmul=_row_multiplier(scale, plan.length_scale, query.shape, n_k, window),
        )
    ):
        return out
    # Scaling the queries once spares a pass over every tile of scores (rounding differs by an ulp); so does a
    # row scale folded into them where nothing is added to the scores before it (under autograd the tile's
    # product with the scale and its backward cost more than the rest of the tile's arithmetic).
    fold = scale is not None and softcap is None and slopes is None
    scaled = query * (scale * scaling) if fold and scale is not None else query * scaling
    for start, stop in query_blocks(n_q, plan.block):
        lo, hi = key_span(n_q, n_k, start, stop, window)
        allowed = causal_mask(n_q, n_k, start, stop, window=window, device=query.device, keys=(lo, hi))
        z = torch.matmul(scaled[:, :, start:stop], key_t[..., lo:hi])
        # in place where autograd does not need the overwritten values (tanh's output, z for scale's gradient)
        if softcap is not None:
            z = torch.tanh(z / softcap) * softcap if grad else z.div_(softcap).tanh_().mul_(softcap)
        if slopes is not None:
            z.add_(position_bias(slopes, n_q, n_k, start, stop, (lo, hi), z.dtype))
        if scale is not None and not fold:
            row_scale = scale if scale.shape[-2] == 1 else scale[..., start:stop, :]
            z = z * row_scale if grad else z.mul_(row_scale)
        _mask_tile(z, allowed, start, offset, lo, window)
        w = _weights(z, allowed, plan, groups, query.dtype, -math.inf)
        out[:, start:stop] = torch.matmul(w, value[:, :, lo:hi]).transpose(1, 2)
    return out


def _row_multiplier(
    scale: torch.Tensor | None, length_scale: LengthScale | None, shape: torch.Size, n_k: int, window: int | None
) -> torch.Tensor | None:
    """(batch x heads, queries) factor on each causal row's scores: the learnable ``scale`` times the length
    multiplier of the row's number of allowed keys; None when there is neither."""
    if scale is None and length_scale is None:
        return None
    bsz, heads, n_q, _ = shape
    mul = torch.ones(bsz, heads, n_q, 1)
    if scale is not None:
        mul = mul * scale.detach().float()
    if length_scale is not None:
        n = torch.arange(n_k - n_q + 1, n_k + 1)
        n = n if window is None else n.clamp(max=window)
        mul = mul * length_multiplier(n.float(), length_scale.xi, length_scale.n_train)[:, None]
    return mul.reshape(bsz * heads, n_q)


def _attend_biased_softmax(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    *,
    scaling: float,
    window: int | None,
    block: int,
    slopes: torch.Tensor,
    grad: bool,
) -> torch.Tensor:
    """Softmax with a linear position bias: heads whose slope is 0 (NAPE's NoPE half) through PyTorch's fused
    kernel in one causal call over the whole sequence when queries and keys coincide, the others through
    the compiled kernel (:mod:`attnlab.site.cpu_kernel`), or where it does not apply one query block at a time
    through PyTorch's kernel with the bias tile of :func:`position_bias` as its mask."""
    n_q, n_k = query.shape[2], key.shape[2]
    flat = slopes == 0
    if n_q != n_k or window is not None:
        # the kernel's causal mask lines the first query up with the first key, and it has no window
        flat = torch.zeros_like(flat)
    if bool(flat.any()):
        idx = flat.nonzero()[:, 0]
        out[:, :, idx] = F.scaled_dot_product_attention(
            query[:, idx], key[:, idx], value[:, idx], is_causal=True, scale=scaling
        ).transpose(1, 2)
    rest = (~flat).nonzero()[:, 0]
    if not len(rest):
        return out
    query, key, value, slopes = query[:, rest], key[:, rest], value[:, rest], slopes[rest]
    part = query.new_empty(query.shape[0], n_q, len(rest), query.shape[-1])
    if not grad and site_kernel.forward(
        query, key, value, part, scaling=scaling, window=window, rowmap="softmax", slopes=slopes, rowmul=None
    ):
        out[:, :, rest] = part
        return out
    for start, stop in query_blocks(n_q, block):
        lo, hi = key_span(n_q, n_k, start, stop, window)
        allowed = causal_mask(n_q, n_k, start, stop, window=window, device=query.device, keys=(lo, hi))
        bias = position_bias(slopes, n_q, n_k, start, stop, (lo, hi), query.dtype)
        _mask_tile(bias, allowed[0], start, n_k - n_q, lo, window)
        part = F.scaled_dot_product_attention(
            query[:, :, start:stop], key[:, :, lo:hi], value[:, :, lo:hi], attn_mask=bias, scale=scaling
        )
        out[:, start:stop, rest] = part.transpose(1, 2)
    return out
