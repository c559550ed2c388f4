"""Whether a call of :func:`attnlab.site.blockwise` goes to the fused Triton attention, and with which arguments.

The kernels (:func:`attnlab.site.triton.relu_sigmoid.relu_sigmoid_attention`,
:func:`attnlab.site.triton.entmax.entmax_attention`) form the site's scores z = scale * (q.k * scaling - m_h (i - j)_+)
with its causal and sliding-window masks, one row map for every head, and give gradients for q, k and v only. A call
takes them where nothing else is asked of the layer: no observer, dropout, length multiplier, softcap, bias function or
mask tensor, every head under one normalized ReLU^p (Polynomial Concentration §3, dead rows attending to nothing),
normalized sigmoid (App. T) or alpha-entmax (Vasylenko et al. 2025 §2.2) map, and no learnable tensor that would need a
gradient from them.
Everything else keeps the torch paths of :mod:`attnlab.site`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from attnlab.site.spec import Causal, Plan, Scores, Slopes

DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def triton_call(
    query: torch.Tensor, key: torch.Tensor, scores: Scores, mask: Causal | torch.Tensor | None, plan: Plan
) -> tuple[Callable[..., torch.Tensor], dict[str, Any]] | None:
    """The Triton kernel and its keyword arguments for a call already checked by ``attend``, or None where the
    call keeps the torch paths. The kernel takes (query, key, value) as ``attend`` does and returns (batch, heads,
    queries, head_dim)."""
    if plan.kernel == "torch" or (plan.kernel == "auto" and query.device.type != "cuda"):
        return None
    if (
        not plan.fused
        or plan.observers
        or plan.weight_observers
        or plan.dropout
        or plan.length_scale is not None
        or scores.softcap is not None
        or not (scores.bias is None or isinstance(scores.bias, Slopes))
        or isinstance(mask, torch.Tensor)
        or query.dtype not in DTYPES
        or 0 in (*query.shape, *key.shape)
    ):
        return None
    rowmaps = {rowmap.name: rowmap for rowmap in plan.maps.values()}
    if len(rowmaps) != 1 or set(plan.maps) != set(range(query.shape[1])):
        return None  # heads left to softmax, or a mix of maps
    (rowmap,) = rowmaps.values()
    slopes = scores.bias.slopes if isinstance(scores.bias, Slopes) else None
    scale = scores.scale
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (slopes, scale)):
        return None  # the kernels give no gradient for them
    if rowmap.family == "relu_p" and rowmap.params["dead"] == "zeros":
        args: dict[str, Any] = dict(family="relu_p", p=rowmap.params["p"], b=rowmap.params["b"])
    elif rowmap.family == "sigmoid":
        args = dict(family="sigmoid", b=rowmap.params["b"])
    elif rowmap.family == "entmax":
        args = dict(alpha=rowmap.params["alpha"])
    else:
        return None
    from attnlab.site.triton import relu_sigmoid_kernels as site_triton_kernels

    if site_triton_kernels.triton is None:
        return None
    kernel: Callable[..., torch.Tensor]
    if "alpha" in args:
        from attnlab.site.triton.entmax import entmax_attention as kernel
    else:
        from attnlab.site.triton.relu_sigmoid import relu_sigmoid_attention as kernel
    causal = isinstance(mask, Causal)
    args.update(
        scale=scores.scaling,
        causal=causal,
        window=mask.window if isinstance(mask, Causal) else None,
        slopes=slopes,
        query_scale=None if scale is None else scale.detach()[..., 0],
    )
    return kernel, args
