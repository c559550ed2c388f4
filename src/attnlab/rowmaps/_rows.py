"""Row plumbing shared by every row map: validation, dtype policy, masking and special rows.

Conventions:
- maps work over the last dimension after moving ``dim`` there, batched over every leading dimension;
- float16/bfloat16/float32 compute in float32, float64 in float64, and the result has the input dtype;
- ``mask`` is boolean, True = the key may be attended; a score of -inf is treated as masked too;
- a row with no allowed key returns zeros; a row with NaN at an allowed key returns NaN in every
  position (the propagation rule torch.softmax follows); NaN at a masked key is ignored;
- input with no rows or no keys returns an empty tensor of its shape, as torch.softmax does.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from attnlab.errors import ArgumentError, ArgumentTypeError

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
NEG_INF = float("-inf")


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_rows(scores: torch.Tensor, mask: torch.Tensor | None, dim: int) -> int:
    """Validate scores, mask and dim with errors naming what is wrong and what is allowed; return dim >= 0."""
    if not isinstance(scores, torch.Tensor):
        raise ArgumentTypeError(f"scores must be a torch.Tensor, got {type(scores).__name__}")
    if scores.dtype not in FLOAT_DTYPES:
        raise ArgumentTypeError(f"scores has dtype {scores.dtype}; allowed: float16, bfloat16, float32, float64")
    if scores.dim() == 0:
        raise ArgumentError("scores must have at least one dimension (the key axis)")
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise ArgumentTypeError(f"dim must be an int (the key axis), got {type(dim).__name__}")
    if not -scores.dim() <= dim < scores.dim():
        raise ArgumentError(f"dim={dim} is out of range for scores with {scores.dim()} dimensions")
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise ArgumentTypeError(f"mask must be a bool tensor (True = key may be attended), got {got}")
        try:
            torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError:
            raise ArgumentError(
                f"mask shape {tuple(mask.shape)} does not broadcast to scores shape {tuple(scores.shape)}"
            ) from None
        if torch.broadcast_shapes(mask.shape, scores.shape) != scores.shape:
            raise ArgumentError(f"mask shape {tuple(mask.shape)} would enlarge scores shape {tuple(scores.shape)}")
    return dim % scores.dim()


def apply_rows(
    scores: torch.Tensor, mask: torch.Tensor | None, dim: int, fn: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """Validate, move ``dim`` last, upcast, mask with -inf, run ``fn`` on the rows, restore."""
    dim = check_rows(scores, mask, dim)
    z = scores.to(compute_dtype(scores.dtype))
    if mask is not None:
        z = z.masked_fill(~mask, NEG_INF)
    z = z.movedim(dim, -1)
    if z.shape[-1] == 0:
        return scores.clone()
    out = fn(z.contiguous())
    return out.movedim(-1, dim).to(scores.dtype)


def denormal_floor(k: float, n: int, dtype: torch.dtype) -> float:
    """Smallest base r worth keeping in r^k for a row of n keys whose largest r^k is about 1.

    Below it r^k, or r^k divided by the row sum (at most n), would be a denormal float: denormals
    cost ~100x per operation on x86, and such a term is far below the resolution of the row, so the
    base is set to exactly 0.
    """
    return float((4.0 * n * torch.finfo(dtype).tiny) ** (1.0 / max(k, 1.0)))


def row_max(z: torch.Tensor) -> torch.Tensor:
    """Row maximum (keepdim), NaN if the row has a NaN, -inf if no key is allowed."""
    return z.detach().amax(-1, keepdim=True)


def allowed_count(z: torch.Tensor) -> torch.Tensor:
    """Number of allowed keys L per row (keepdim), in z's dtype: keys whose score is not -inf."""
    return (z.shape[-1] - torch.isneginf(z).sum(-1, keepdim=True)).to(z.dtype)


def _nan_rows(p: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    # One reduction and one sync decide the common case: per-op overhead dominates at one number a row.
    if not math.isnan(float(m.sum())):
        return p
    return torch.where(torch.isnan(m), torch.full((), float("nan"), dtype=p.dtype), p)


def normalized_rows(
    z: torch.Tensor, weights: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *, bounded: bool = False
) -> torch.Tensor:
    """Run a normalized map ``weights(rows, row_max)`` under the special-row rules.

    Rows whose maximum is not finite are computed on zeros (so no NaN reaches the map's arithmetic or
    its gradient) and then overwritten: no allowed key gives zeros, NaN gives NaN, and +inf at some keys
    gives the limit z_i -> inf of a normalized map, an even split over the +inf keys. A ``bounded`` map (its
    value saturates as z grows: sigmoid) has another limit there: each +inf key takes the map's saturated value
    beside the finite keys' own, so the map runs on the row with +inf replaced by the dtype's largest finite
    score, where it has saturated. Input with no rows or no keys gives an empty result of its shape, as
    torch.softmax does.
    """
    if z.numel() == 0:
        # The maps reduce over all rows at once (the largest |max z|, the largest Newton step), and a
        # reduction over nothing has no value.
        return z.clone()
    if bounded and bool(torch.isposinf(z).any()):
        z = torch.where(torch.isposinf(z), torch.finfo(z.dtype).max, z)
    m = row_max(z)
    if math.isfinite(float(m.sum())):
        return weights(z, m)
    bad = ~torch.isfinite(m)
    clean = torch.where(bad, torch.zeros((), dtype=z.dtype), z)
    p = weights(clean, row_max(clean))
    p = torch.where(torch.isneginf(m), torch.zeros((), dtype=p.dtype), p)
    top = torch.isposinf(z).to(p.dtype)
    p = torch.where(torch.isposinf(m), top / top.sum(-1, keepdim=True).clamp_min(1), p)
    return _nan_rows(p, m)


def pointwise_rows(z: torch.Tensor, weights: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Run an un-normalized map elementwise; a row with NaN at an allowed key becomes all NaN.

    Masked keys (-inf) must map to 0 and +inf scores keep the map's own (infinite) value. Input with no rows or
    no keys gives an empty result of its shape, as ``normalized_rows``.
    """
    if z.numel() == 0:
        return z.clone()
    return _nan_rows(weights(z), row_max(z))
