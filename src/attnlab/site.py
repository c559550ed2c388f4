"""The attention site: one call that turns a layer's query, key and value into its attention output.

Every model attnlab touches (a Hugging Face checkpoint through ``attnlab.hooks``, or attnlab's own
decoder) attends through :func:`attend`, so an observer that reads score rows and a per-head row-map
substitution work the same everywhere. A call says three things besides its tensors, each a small object:
how the scores are formed (:class:`Scores`: scaling, softcap, a position bias as :class:`Slopes` or a block
function, a learnable row scale), which keys a query may attend (:class:`Causal` with an optional window, a
mask tensor, or all), and what else the layer does (:class:`Plan`). Queries are processed in blocks, so
memory is O(block x keys) beyond the inputs, whatever the context length.

With no substitution and no length multiplier, the arithmetic is exactly that of transformers' eager
attention (``matmul * scaling``, tanh softcap, additive mask, float32 softmax cast back, ``matmul``):
outputs are bit-identical to the eager forward (float64 inputs get a float64 softmax instead). Blocks are split
evenly and never thinner than :data:`MIN_BLOCK` queries, because a GEMM over a handful of rows may take a different
kernel (a matrix-vector product for one row) whose float rounding differs.

Where nothing needs a block of scores (no observer, no gradient, no dropout) and the attention is causal,
a row-map plan takes the fused path instead (:func:`_attend_fused`): each query block computes only the
keys its queries may attend (about half the scores of a causal sequence), a position bias (ALiBi/NAPE
:class:`Slopes`) is built for that tile alone, and the causal mask is written only where it can hide a key.
Plain softmax with a position bias goes through ``scaled_dot_product_attention``: its heads with slope 0
(NAPE's NoPE half) in one call, the others one tile at a time with the bias tile as the kernel's mask. The
fused path equals the block-materializing one to float rounding; tests compare the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from . import site_kernel
from .rowmaps import length_multiplier
from .site_spec import (DEFAULT_BLOCK, MIN_BLOCK, VANILLA, Causal, LengthScale, Observer, Plan, ScoreBlock, Scores,
                        Slopes, WeightBlock, WeightObserver, describe)

__all__ = ["DEFAULT_BLOCK", "MIN_BLOCK", "VANILLA", "Causal", "LengthScale", "Observer", "Plan", "ScoreBlock", "Scores",
           "Slopes", "WeightBlock", "WeightObserver", "allowed_keys", "attend", "causal_mask", "key_span",
           "linear_bias", "position_bias", "query_blocks"]

def _check_call(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scores: Scores,
                mask: Causal | torch.Tensor | None, plan: Plan) -> None:
    """ValueError/TypeError naming the argument, before any arithmetic could broadcast a mistake into numbers."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
            raise TypeError(f"{name} must be a floating torch.Tensor, got {describe(t)}")
    if len({query.dtype, key.dtype, value.dtype}) > 1 or len({query.device, key.device, value.device}) > 1:
        raise TypeError(f"query, key and value must share dtype and device, got {query.dtype}/{query.device}, "
                        f"{key.dtype}/{key.device}, {value.dtype}/{value.device}")
    if (query.dim() != 4 or key.dim() != 4 or value.shape != key.shape or query.shape[0] != key.shape[0]
            or query.shape[-1] != key.shape[-1]):
        raise ValueError(f"query, key, value must be (batch, heads, tokens, head_dim) with one batch and head_dim "
                         f"and key and value alike; got {tuple(query.shape)}, {tuple(key.shape)}, "
                         f"{tuple(value.shape)}")
    if not isinstance(scores, Scores):
        raise TypeError(f"scores must be Scores(scaling, ...), got {describe(scores)}")
    if not isinstance(plan, Plan):
        raise TypeError(f"plan must be a Plan, got {describe(plan)}")
    if not isinstance(mask, (Causal, torch.Tensor, type(None))):
        raise TypeError(f"mask must be Causal(...), a tensor or None, got {type(mask).__name__}")
    if isinstance(mask, Causal) and query.shape[2] > key.shape[2]:
        # the last query sees every key, so the first ones would see none: a call whose keys were cut short
        raise ValueError(f"causal attention needs at least as many keys as queries, got {key.shape[2]} keys for "
                         f"{query.shape[2]} queries")
    full = (query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    # the mask is sliced on its query axis (the third), a row scale on its second-to-last
    for name, t, shape, dims in (("mask", mask, full, (4,)), ("scale", scores.scale, (*full[:3], 1), (2, 3, 4))):
        if not isinstance(t, torch.Tensor):
            continue
        if name == "mask" and not (t.dtype == torch.bool or t.is_floating_point()):
            raise TypeError(f"mask must be boolean (True = may attend) or additive floating, got {t.dtype}")
        try:
            fits = t.dim() in dims and torch.broadcast_shapes(t.shape, shape) == shape
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(f"{name} of shape {tuple(t.shape)} must have {' or '.join(map(str, dims))} dimensions "
                             f"and broadcast to {shape} (batch, heads, queries, {'keys' if name == 'mask' else 1})")


def query_blocks(n: int, block: int) -> list[tuple[int, int]]:
    """Split n queries into ceil(n / block) contiguous ranges whose sizes differ by at most one."""
    if n <= block:
        return [(0, n)]
    count = math.ceil(n / block)
    base, extra = divmod(n, count)
    bounds, start = [], 0
    for i in range(count):
        stop = start + base + (i < extra)
        bounds.append((start, stop))
        start = stop
    return bounds


def allowed_keys(mask: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """Boolean 'may attend' from a boolean mask or an additive float mask (disallowed = -inf or the
    dtype's lowest value, as transformers writes it)."""
    if mask is None:
        return torch.ones((1,) * like.dim(), dtype=torch.bool, device=like.device)
    if mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min


def causal_mask(n_queries: int, n_keys: int, start: int, stop: int, *, window: int | None = None,
                device: torch.device | None = None, keys: tuple[int, int] | None = None) -> torch.Tensor:
    """Boolean (1, 1, stop - start, n_keys) causal mask for queries start..stop-1 of n_queries, the last
    query seeing every key; with ``window``, a query sees only its ``window`` most recent keys. ``keys``
    (lo, hi) restricts the key axis to keys lo..hi-1."""
    pos = torch.arange(start, stop, device=device).unsqueeze(-1) + (n_keys - n_queries)
    keys = torch.arange(*(keys or (0, n_keys)), device=device)
    ok = keys <= pos
    if window is not None:
        ok &= keys > pos - window
    return ok[None, None]


def key_span(n_queries: int, n_keys: int, start: int, stop: int, window: int | None = None) -> tuple[int, int]:
    """Keys (lo, hi) that some query of start..stop-1 may attend under a causal (sliding-window) mask."""
    offset = n_keys - n_queries
    lo = 0 if window is None else max(0, start + offset - window + 1)
    return lo, stop + offset


def position_bias(slopes: torch.Tensor, n_queries: int, n_keys: int, start: int, stop: int,
                  keys: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    """The linear position bias -m_h (i - j)_+ (heads, stop - start, hi - lo) of queries start..stop-1 over
    keys lo..hi-1: ALiBi, and NAPE with zero slopes on its NoPE heads (Vasylenko et al. 2025 §4.2, App. E.2
    eq. 109). Keys after the query get 0: masking them is the causal mask's job."""
    offset = n_keys - n_queries
    pos = torch.arange(start + offset, stop + offset, device=slopes.device)
    return linear_bias(slopes, pos, torch.arange(*keys, device=slopes.device)).to(dtype)


def linear_bias(slopes: torch.Tensor, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    """-m_h (i - j)_+ (heads, queries, keys) for query positions i and key positions j (Vasylenko et al. 2025
    §4.2, App. E.2 eq. 109): the arithmetic of ``position_bias`` and of the model's ``alibi_bias``."""
    distance = (query_positions[:, None] - key_positions[None, :]).clamp(min=0)
    return -slopes[:, None, None] * distance


def _repeat_kv(t: torch.Tensor, groups: int) -> torch.Tensor:
    # the copy transformers' repeat_kv makes; the same layout keeps the matmuls bit-identical
    if groups == 1:
        return t
    b, h, n, d = t.shape
    return t[:, :, None].expand(b, h, groups, n, d).reshape(b, h * groups, n, d)


def _softmax(z: torch.Tensor) -> torch.Tensor:
    # eager's float32 softmax; float64 stays float64 (gradchecks, references)
    return F.softmax(z, dim=-1, dtype=torch.float64 if z.dtype == torch.float64 else torch.float32)


def _apply(fn: Callable, z: torch.Tensor, allowed: torch.Tensor, fill: float) -> torch.Tensor:
    """``fn`` on the rows of z, a tensor of this block's own whose masked keys hold ``fill``. Softmax reads z
    as eager does (masked keys at the dtype's lowest value); a row map wants them at -inf: z is masked in
    place if need be, which spares the map a masked copy of the whole block."""
    if fn is not _softmax and fill != -math.inf:
        z.masked_fill_(~allowed, -math.inf)
    return fn(z)


def _head_groups(plan: Plan, n_heads: int) -> list[tuple[Callable, list[int]]]:
    """(row map, heads) groups covering every head once; heads without a map keep softmax."""
    groups: dict[str, tuple[Callable, list[int]]] = {}
    for head in range(n_heads):
        rowmap = plan.maps.get(head)
        name = "" if rowmap is None else rowmap.name
        groups.setdefault(name, (_softmax if rowmap is None else rowmap, []))[1].append(head)
    return list(groups.values())


def _weights(z: torch.Tensor, allowed: torch.Tensor, plan: Plan, groups: list[tuple[Callable, list[int]]],
             dtype: torch.dtype, fill: float) -> torch.Tensor:
    if plan.length_scale is not None:
        n = allowed.expand_as(z).sum(-1, keepdim=True).to(z.dtype)
        z = z * length_multiplier(n, plan.length_scale.xi, plan.length_scale.n_train).to(z.dtype)
    if len(groups) == 1:
        return _apply(groups[0][0], z, allowed, fill).to(dtype)
    parts, order = [], []
    for fn, heads in groups:
        idx = torch.tensor(heads, device=z.device)
        sub = allowed if allowed.shape[1] == 1 else allowed.index_select(1, idx)
        parts.append(_apply(fn, z.index_select(1, idx), sub, fill).to(dtype))
        order.extend(heads)
    inverse = torch.argsort(torch.tensor(order, device=z.device))
    return torch.cat(parts, dim=1).index_select(1, inverse)


def attend(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scores: Scores,
           mask: Causal | torch.Tensor | None = None, plan: Plan = VANILLA) -> torch.Tensor:
    """Attention output (batch, queries, heads, head_dim) of one layer.

    query (batch, heads, queries, head_dim); key and value (batch, kv_heads, keys, head_dim) with
    heads a multiple of kv_heads (grouped-query attention). ``scores`` says how each row of scores is formed
    (:class:`Scores`), ``mask`` which keys a query may attend (:class:`Causal`, a tensor, or every key),
    ``plan`` what else the layer does (:class:`Plan`: row maps, observers, dropout...).
    """
    _check_call(query, key, value, scores, mask, plan)
    bsz, n_heads, n_q, _ = query.shape
    if n_heads % key.shape[1]:
        raise ValueError(f"query heads ({n_heads}) must be a multiple of key/value heads ({key.shape[1]}): "
                         "grouped-query attention")
    causal = isinstance(mask, Causal)
    window, explicit = (mask.window if causal else None), (None if causal else mask)
    scaling, softcap, scale = scores.scaling, scores.softcap, scores.scale
    slopes = scores.bias.slopes if isinstance(scores.bias, Slopes) else None
    bias = None if isinstance(scores.bias, Slopes) else scores.bias
    if slopes is not None and slopes.shape != (n_heads,):
        raise ValueError(f"slopes must be one per head ({n_heads},), got shape {tuple(slopes.shape)}")
    layer, dropout = plan.layer, plan.dropout
    bad = [h for h in plan.maps if not 0 <= h < n_heads]
    if bad:
        raise ValueError(f"layer {layer}: heads {bad} out of range for {n_heads} heads")
    groups = n_heads // key.shape[1]
    key_t = _repeat_kv(key, groups).transpose(2, 3)
    value = _repeat_kv(value, groups)
    n_k = key_t.shape[-1]
    out = query.new_empty(bsz, n_q, n_heads, value.shape[-1])
    groups = _head_groups(plan, n_heads)
    if bias is None and _fusable(plan, causal, dropout > 0, slopes):
        return _attend_fused(query, key_t, value, out, scaling=scaling, window=window, softcap=softcap,
                             plan=plan, groups=groups, slopes=slopes, scale=scale)
    # Masked keys hold the dtype's lowest value, as eager's, for softmax and score observers; when every head
    # has a row map and nothing observes the scores, they hold -inf at once, the one pass a map needs. Not
    # under a learnable scale: the gradient of z * scale with respect to scale is z, and -inf there makes it
    # NaN even though the masked keys get no weight.
    fill = (-math.inf if not plan.observers and scale is None and all(fn is not _softmax for fn, _ in groups)
            else torch.finfo(query.dtype).min)
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
            z = (z * (scale if scale.shape[-2] == 1 else scale[..., start:stop, :])).masked_fill(
                ~allowed, fill)
        w = _weights(z, allowed, plan, groups, query.dtype, fill)
        for observer in plan.weight_observers:
            observer(WeightBlock(layer, w, allowed, start, n_q))
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
        raise ValueError(f"bias({start}, {stop}) must give a tensor broadcasting to {tuple(shape)} (batch, heads, "
                         f"queries {start}..{stop - 1}, keys), got {describe(block)}")
    return block


def _fusable(plan: Plan, causal: bool, dropout: bool, slopes: torch.Tensor | None) -> bool:
    """Whether the fused path serves a call without a ``bias`` callable (whose blocks span every key): causal,
    nothing reads a block (observers, dropout) and a row map or a position bias to fuse; plain softmax
    without one stays eager's exact arithmetic."""
    return (plan.fused and causal and not dropout and not plan.observers and not plan.weight_observers
            and (bool(plan.maps) or slopes is not None))


def _mask_tile(z: torch.Tensor, allowed: torch.Tensor, start: int, offset: int, lo: int,
               window: int | None) -> None:
    """Write -inf at z's masked keys. Without a window only the keys after the tile's first query can be
    masked, so only those columns are touched (a pass over the whole tile costs as much as the map's)."""
    edge = 0 if window is not None else max(0, start + offset + 1 - lo)
    z[..., edge:].masked_fill_(~allowed[..., edge:], -math.inf)


def _attend_fused(query: torch.Tensor, key_t: torch.Tensor, value: torch.Tensor, out: torch.Tensor, *,
                  scaling: float, window: int | None, softcap: float | None, plan: Plan,
                  groups: list[tuple[Callable, list[int]]], slopes: torch.Tensor | None,
                  scale: torch.Tensor | None) -> torch.Tensor:
    """Causal attention without observers, one query block at a time over only the keys it may attend
    (:func:`key_span`): the work of the block-materializing loop less the scores every query of a block
    would mask, with the same arithmetic on the rest except that the queries are scaled before the product
    instead of the scores after it. Without autograd, the compiled kernel (:mod:`attnlab.site_kernel`)
    serves it where it applies; with autograd, the tiles are torch operations that autograd records (half
    the products of the block-materializing loop, and half the saved scores)."""
    n_q, n_k = query.shape[2], key_t.shape[-1]
    offset = n_k - n_q
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (query, key_t, value, scale))
    if not plan.maps and softcap is None and scale is None and plan.length_scale is None:
        return _attend_biased_softmax(query, key_t.transpose(2, 3), value, out, scaling=scaling, window=window,
                                      block=plan.block, slopes=slopes, grad=grad)
    if not grad and softcap is None and len(groups) == 1 and site_kernel.forward(
            query, key_t.transpose(2, 3), value, out, scaling=scaling, window=window,
            rowmap="softmax" if groups[0][0] is _softmax else groups[0][0], slopes=slopes,
            rowmul=_row_multiplier(scale, plan.length_scale, query.shape, n_k, window)):
        return out
    # Scaling the queries once spares a pass over every tile of scores (rounding differs by an ulp); so does a
    # row scale folded into them where nothing is added to the scores before it (under autograd the tile's
    # product with the scale and its backward cost more than the rest of the tile's arithmetic).
    fold = scale is not None and softcap is None and slopes is None
    scaled = query * (scale * scaling) if fold else query * scaling
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


def _row_multiplier(scale: torch.Tensor | None, length_scale: LengthScale | None, shape: torch.Size, n_k: int,
                    window: int | None) -> torch.Tensor | None:
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


def _attend_biased_softmax(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, out: torch.Tensor, *,
                           scaling: float, window: int | None, block: int, slopes: torch.Tensor,
                           grad: bool) -> torch.Tensor:
    """Softmax with a linear position bias: heads whose slope is 0 (NAPE's NoPE half) through PyTorch's fused
    kernel in one causal call over the whole sequence when queries and keys coincide, the others through
    the compiled kernel (:mod:`attnlab.site_kernel`), or where it does not apply one query block at a time
    through PyTorch's kernel with the bias tile of :func:`position_bias` as its mask."""
    n_q, n_k = query.shape[2], key.shape[2]
    flat = slopes == 0
    if n_q != n_k or window is not None:
        # the kernel's causal mask lines the first query up with the first key, and it has no window
        flat = torch.zeros_like(flat)
    if bool(flat.any()):
        idx = flat.nonzero()[:, 0]
        out[:, :, idx] = F.scaled_dot_product_attention(query[:, idx], key[:, idx], value[:, idx], is_causal=True,
                                                        scale=scaling).transpose(1, 2)
    rest = (~flat).nonzero()[:, 0]
    if not len(rest):
        return out
    query, key, value, slopes = query[:, rest], key[:, rest], value[:, rest], slopes[rest]
    part = query.new_empty(query.shape[0], n_q, len(rest), query.shape[-1])
    if not grad and site_kernel.forward(query, key, value, part, scaling=scaling, window=window, rowmap="softmax",
                                        slopes=slopes, rowmul=None):
        out[:, :, rest] = part
        return out
    for start, stop in query_blocks(n_q, block):
        lo, hi = key_span(n_q, n_k, start, stop, window)
        allowed = causal_mask(n_q, n_k, start, stop, window=window, device=query.device, keys=(lo, hi))
        bias = position_bias(slopes, n_q, n_k, start, stop, (lo, hi), query.dtype)
        _mask_tile(bias, allowed[0], start, n_k - n_q, lo, window)
        part = F.scaled_dot_product_attention(query[:, :, start:stop], key[:, :, lo:hi], value[:, :, lo:hi],
                                              attn_mask=bias, scale=scaling)
        out[:, start:stop, rest] = part.transpose(1, 2)
    return out
