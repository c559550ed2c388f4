"""From a block of scores to attention weights: each head's row map (softmax, as eager computes it, where the
plan names none), after the plan's length multiplier. The block-materializing and the fused paths of
:func:`attnlab.site.blockwise` both form their weights here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from attnlab.rowmaps import length_multiplier
from attnlab.site.spec import Plan


def _softmax(z: torch.Tensor) -> torch.Tensor:
    # eager's float32 softmax; float64 stays float64 (gradchecks, references)
    return F.softmax(z, dim=-1, dtype=torch.float64 if z.dtype == torch.float64 else torch.float32)


def _apply(
    fn: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor, allowed: torch.Tensor, fill: float
) -> torch.Tensor:
    """``fn`` on the rows of z, a tensor of this block's own whose masked keys hold ``fill``. Softmax reads z
    as eager does (masked keys at the dtype's lowest value); a row map wants them at -inf: z is masked in
    place if need be, which spares the map a masked copy of the whole block."""
    if fn is not _softmax and fill != -math.inf:
        z.masked_fill_(~allowed, -math.inf)
    return fn(z)


def _head_groups(plan: Plan, n_heads: int) -> list[tuple[Callable[[torch.Tensor], torch.Tensor], list[int]]]:
    """(row map, heads) groups covering every head once; heads without a map keep softmax."""
    groups: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], list[int]]] = {}
    for head in range(n_heads):
        rowmap = plan.maps.get(head)
        name = "" if rowmap is None else rowmap.name
        groups.setdefault(name, (_softmax if rowmap is None else rowmap, []))[1].append(head)
    return list(groups.values())


def _weights(
    z: torch.Tensor,
    allowed: torch.Tensor,
    plan: Plan,
    groups: list[tuple[Callable[[torch.Tensor], torch.Tensor], list[int]]],
    dtype: torch.dtype,
    fill: float,
) -> torch.Tensor:
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
