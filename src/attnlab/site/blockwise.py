"""The block-wise ``attend`` call: checks, query blocks, the per-head row map and the fused and kernel
routes (``attnlab.site`` documents the whole site)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.site.fused import _attend_fused, _fusable
from attnlab.site.route import triton_call
from attnlab.site.spec import VANILLA, Causal, Plan, ScoreBlock, Scores, Slopes, WeightBlock, describe
from attnlab.site.tiles import allowed_keys, causal_mask, position_bias, query_blocks
from attnlab.site.weights import _head_groups, _softmax, _weights


def _check_call(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    scores: Scores,
    mask: Causal | torch.Tensor | None,
    plan: Plan,
) -> None:
    """ValueError/TypeError naming the argument, before any arithmetic could broadcast a mistake into numbers."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
            raise ArgumentTypeError(f"{name} must be a floating torch.Tensor, got {describe(t)}")
    if len({query.dtype, key.dtype, value.dtype}) > 1 or len({query.device, key.device, value.device}) > 1:
        raise ArgumentTypeError(
            f"query, key and value must share dtype and device, got {query.dtype}/{query.device}, "
            f"{key.dtype}/{key.device}, {value.dtype}/{value.device}"
        )
    if (
        query.dim() != 4
        or key.dim() != 4
        or value.shape != key.shape
        or query.shape[0] != key.shape[0]
        or query.shape[-1] != key.shape[-1]
    ):
        raise ArgumentError(
            f"query, key, value must be (batch, heads, tokens, head_dim) with one batch and head_dim "
            f"and key and value alike; got {tuple(query.shape)}, {tuple(key.shape)}, "
            f"{tuple(value.shape)}"
        )
    if not isinstance(scores, Scores):
        raise ArgumentTypeError(f"scores must be Scores(scaling, ...), got {describe(scores)}")
    if not isinstance(plan, Plan):
        raise ArgumentTypeError(f"plan must be a Plan, got {describe(plan)}")
    for name in ("scaling", "softcap"):
        number, largest = getattr(scores, name), torch.finfo(query.dtype).max
        if number is not None and number > largest:  # inf in the scores' dtype: every row NaN
            raise ArgumentError(f"{name} {number:g} overflows {query.dtype}: it must be at most {largest:g}")
    if not isinstance(mask, (Causal, torch.Tensor, type(None))):
        raise ArgumentTypeError(f"mask must be Causal(...), a tensor or None, got {type(mask).__name__}")
    if isinstance(mask, Causal) and query.shape[2] > key.shape[2]:
        # the last query sees every key, so the first ones would see none: a call whose keys were cut short
        raise ArgumentError(
            f"causal attention needs at least as many keys as queries, got {key.shape[2]} keys for "
            f"{query.shape[2]} queries"
        )
    full = (query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    # the mask is sliced on its query axis (the third), a row scale on its second-to-last
    for name, arg, shape, dims in (("mask", mask, full, (4,)), ("scale", scores.scale, (*full[:3], 1), (2, 3, 4))):
        if not isinstance(arg, torch.Tensor):
            continue
        if name == "mask" and not (arg.dtype == torch.bool or arg.is_floating_point()):
            raise ArgumentTypeError(f"mask must be boolean (True = may attend) or additive floating, got {arg.dtype}")
        try:
            fits = arg.dim() in dims and torch.broadcast_shapes(arg.shape, shape) == shape
        except RuntimeError:
            fits = False
        if not fits:
            raise ArgumentError(
                f"{name} of shape {tuple(arg.shape)} must have {' or '.join(map(str, dims))} dimensions "
                f"and broadcast to {shape} (batch, heads, queries, {'keys' if name == 'mask' else 1})"
            )


def _repeat_kv(t: torch.Tensor, groups: int) -> torch.Tensor:
    # the copy transformers' repeat_kv makes; the same layout keeps the matmuls bit-identical
    if groups == 1:
        return t
    b, h, n, d = t.shape
    return t[:, :, None].expand(b, h, groups, n, d).reshape(b, h * groups, n, d)


def attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    scores: Scores,
    mask: Causal | torch.Tensor | None = None,
    plan: Plan = VANILLA,
) -> torch.Tensor:
    """Attention output (batch, queries, heads, head_dim) of one layer.

    query (batch, heads, queries, head_dim); key and value (batch, kv_heads, keys, head_dim) with
    heads a multiple of kv_heads (grouped-query attention). ``scores`` says how each row of scores is formed
    (:class:`Scores`), ``mask`` which keys a query may attend (:class:`Causal`, a tensor, or every key),
    ``plan`` what else the layer does (:class:`Plan`: row maps, observers, dropout...).
    """
    _check_call(query, key, value, scores, mask, plan)
    bsz, n_heads, n_q, _ = query.shape
    if n_heads % key.shape[1]:
        raise ArgumentError(
            f"query heads ({n_heads}) must be a multiple of key/value heads ({key.shape[1]}): grouped-query attention"
        )
    causal = isinstance(mask, Causal)
    # isinstance again, not causal: mypy narrows mask only on the isinstance itself
    window = mask.window if isinstance(mask, Causal) else None
    explicit = None if isinstance(mask, Causal) else mask
    scaling, softcap, scale = scores.scaling, scores.softcap, scores.scale
    slopes = scores.bias.slopes if isinstance(scores.bias, Slopes) else None
    bias = None if isinstance(scores.bias, Slopes) else scores.bias
    if slopes is not None and slopes.shape != (n_heads,):
        raise ArgumentError(f"slopes must be one per head ({n_heads},), got shape {tuple(slopes.shape)}")
    layer, dropout = plan.layer, plan.dropout
    bad = [h for h in plan.maps if not 0 <= h < n_heads]
    if bad:
        raise ArgumentError(f"layer {layer}: heads {bad} out of range for {n_heads} heads")
    routed = triton_call(query, key, scores, mask, plan)
    if routed is not None:
        kernel, args = routed
        # contiguous, as the torch paths' output, for callers that view it as (batch, queries, hidden)
        return kernel(query, key, value, **args).transpose(1, 2).contiguous()
    repeats = n_heads // key.shape[1]
    key_t = _repeat_kv(key, repeats).transpose(2, 3)
    value = _repeat_kv(value, repeats)
    n_k = key_t.shape[-1]
    out = query.new_empty(bsz, n_q, n_heads, value.shape[-1])
    groups = _head_groups(plan, n_heads)
    if bias is None and _fusable(plan, causal, dropout > 0, slopes):
        return _attend_fused(
            query,
            key_t,
            value,
            out,
            scaling=scaling,
            window=window,
            softcap=softcap,
            plan=plan,
            groups=groups,
            slopes=slopes,
            scale=scale,
        )
    # Masked keys hold the dtype's lowest value, as eager's, for softmax and score observers; when every head
    # has a row map and nothing observes the scores, they hold -inf at once, the one pass a map needs. Not
    # under a learnable scale: the gradient of z * scale with respect to scale is z, and -inf there makes it
    # NaN even though the masked keys get no weight.
    fill = (
        -math.inf
        if not plan.observers and scale is None and all(fn is not _softmax for fn, _ in groups)
        else torch.finfo(query.dtype).min
    )
    for start, stop in query_blocks(n_q, plan.block):
        # In place where autograd allows it: each full-size temporary is a fresh allocation and a pass over
        # memory; the arithmetic, and so every bit of the result, is eager's.
        z = torch.matmul(query[:, :, start:stop], key_t).mul_(scaling)
        if softcap is not None:
            z = z / softcap
            z = torch.tanh(z)
            z = z * softcap
        if bias is not None:
            z = z + _bias_block(bias, start, stop, z.shape)
        elif slopes is not None:
            z = z + position_bias(slopes, n_q, n_k, start, stop, (0, n_k), z.dtype)
        if causal:
            allowed = causal_mask(n_q, n_k, start, stop, window=window, device=z.device)
            z.masked_fill_(~allowed, fill)
        elif explicit is not None:
            block_mask = explicit[:, :, start:stop] if explicit.shape[-2] != 1 else explicit
            allowed = allowed_keys(block_mask, z)
            if block_mask.dtype == torch.bool:
                z.masked_fill_(~allowed, fill)
            else:
                if fill == -math.inf:
                    block_mask = block_mask.masked_fill(~allowed, fill)
                if torch.broadcast_shapes(block_mask.shape, z.shape) == z.shape:
                    z.add_(block_mask)
                else:
                    z = z + block_mask
        else:
            allowed = allowed_keys(None, z)
        for observer in plan.observers:
            observer(ScoreBlock(layer, z, allowed, start, n_q))
        if scale is not None:
            # re-masked because a learnable scale may turn negative and lift masked keys to the top
            z = (z * (scale if scale.shape[-2] == 1 else scale[..., start:stop, :])).masked_fill(~allowed, fill)
        w = _weights(z, allowed, plan, groups, query.dtype, fill)
        for weight_observer in plan.weight_observers:
            weight_observer(WeightBlock(layer, w, allowed, start, n_q))
        if dropout:
            w = F.dropout(w, p=dropout, training=True)
        out[:, start:stop] = torch.matmul(w, value).transpose(1, 2)
    return out


def _bias_block(bias: Callable[[int, int], torch.Tensor], start: int, stop: int, shape: torch.Size) -> torch.Tensor:
    """The bias function's block for queries start..stop-1, checked: a wrong shape would broadcast into numbers."""
    block = bias(start, stop)
    try:
        fits = isinstance(block, torch.Tensor) and torch.broadcast_shapes(block.shape, shape) == shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ArgumentError(
            f"bias({start}, {stop}) must give a tensor broadcasting to {tuple(shape)} (batch, heads, "
            f"queries {start}..{stop - 1}, keys), got {describe(block)}"
        )
    return block
