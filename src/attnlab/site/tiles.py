"""Where a block of queries of :func:`attnlab.site.blockwise` looks: the query blocks, the causal (sliding-window)
mask of a block, the keys it may attend, and the linear position bias (ALiBi, NAPE) of a tile of scores.

Blocks are split evenly and never thinner than :data:`attnlab.site.spec.MIN_BLOCK` queries, because a GEMM over a
handful of rows may take a different kernel (a matrix-vector product for one row) whose float rounding differs.
``attnlab.site`` exports all of these.
"""

from __future__ import annotations

import math

import torch


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


def causal_mask(
    n_queries: int,
    n_keys: int,
    start: int,
    stop: int,
    *,
    window: int | None = None,
    device: torch.device | None = None,
    keys: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Boolean (1, 1, stop - start, n_keys) causal mask for queries start..stop-1 of n_queries, the last
    query seeing every key; with ``window``, a query sees only its ``window`` most recent keys. ``keys``
    (lo, hi) restricts the key axis to keys lo..hi-1."""
    pos = torch.arange(start, stop, device=device).unsqueeze(-1) + (n_keys - n_queries)
    key_pos = torch.arange(*(keys or (0, n_keys)), device=device)
    ok = key_pos <= pos
    if window is not None:
        ok &= key_pos > pos - window
    return ok[None, None]


def key_span(n_queries: int, n_keys: int, start: int, stop: int, window: int | None = None) -> tuple[int, int]:
    """Keys (lo, hi) that some query of start..stop-1 may attend under a causal (sliding-window) mask."""
    offset = n_keys - n_queries
    lo = 0 if window is None else max(0, start + offset - window + 1)
    return lo, stop + offset


def position_bias(
    slopes: torch.Tensor, n_queries: int, n_keys: int, start: int, stop: int, keys: tuple[int, int], dtype: torch.dtype
) -> torch.Tensor:
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
