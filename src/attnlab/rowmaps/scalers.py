"""Learnable length scalers: ASEntmax and ASSMax (Vasylenko et al. 2025 §4.1, eq. 8-9).

    scale = delta + beta (log n)^gamma,   beta = softplus(x w_beta),   gamma = s tanh(x w_gamma),

per head and per query, with n the query's number of allowed keys. The modules return the scaled
scores, so any row map can follow; ``attend`` applies the module's own map (alpha-entmax for ASEntmax,
softmax for ASSMax).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlab.errors import ArgumentError
from attnlab.rowmaps.registry import RowMap, get


class AdaptiveScale(nn.Module):
    """Per-head, per-query multiplier delta + beta (log n)^gamma on score rows (Vasylenko et al. 2025 eq. 8-9).

    Args:
        n_heads: heads H; scores are (..., H, Q, K).
        dim: feature size d of ``x``, the per-query input the projections read (the layer input
            X of Vasylenko et al. 2025, shape (..., Q, d) shared by all heads, or (..., H, Q, d) per head).
        delta: the constant term (Vasylenko et al. 2025 uses delta = 1).
        s: the bound on |gamma|.
        row_map: the map ``attend`` applies after scaling.
        gamma: a fixed gamma for every head and query instead of the learned s tanh(x w_gamma): the
            "beta learned, gamma fixed" ASEntmax of Vasylenko et al. 2025 App. H (Table 8); ``s`` then
            plays no part.

    n is clamped to at least 2 so that (log n)^gamma stays finite; a row with one allowed key gets
    weight 1 on it under any normalized map whatever the scale.
    """

    def __init__(
        self,
        n_heads: int,
        dim: int,
        *,
        delta: float = 1.0,
        s: float = 1.0,
        row_map: str = "softmax",
        gamma: float | None = None,
    ) -> None:
        super().__init__()
        if n_heads < 1 or dim < 1:
            raise ArgumentError(f"n_heads and dim must be positive, got {n_heads}, {dim}")
        if s <= 0:
            raise ArgumentError(f"s (the bound on |gamma|) must be positive, got {s}")
        if gamma is not None and not math.isfinite(gamma):
            raise ArgumentError(f"gamma must be a finite number or None (learned), got {gamma}")
        self.n_heads, self.dim, self.delta, self.s = n_heads, dim, float(delta), float(s)
        self.gamma = None if gamma is None else float(gamma)
        self.w_beta = nn.Parameter(torch.zeros(n_heads, dim))
        # A fixed gamma has no projection: a parameter that never gets a gradient would still be saved,
        # counted and decayed by the optimizer.
        self.w_gamma = nn.Parameter(torch.zeros(n_heads, dim)) if gamma is None else None
        self.row_map: RowMap = get(row_map)

    def multiplier(self, x: torch.Tensor, n: torch.Tensor, per_head: bool) -> torch.Tensor:
        """delta + beta (log n)^gamma of shape (..., H, Q, 1), n broadcastable to (..., H, Q, 1).

        ``x`` is (..., H, Q, d) when ``per_head``, else (..., Q, d) shared by the heads.
        """
        if x.shape[-1] != self.dim:
            raise ArgumentError(f"x has feature size {x.shape[-1]}, expected {self.dim}")
        beta = nn.functional.softplus(self._project(x, self.w_beta, per_head))[..., None]
        gamma: float | torch.Tensor
        if self.w_gamma is None:
            assert self.gamma is not None  # a fixed gamma is what leaves w_gamma out (__init__)
            gamma = self.gamma
        else:
            gamma = (self.s * torch.tanh(self._project(x, self.w_gamma, per_head)))[..., None]
        log_n = torch.log(n.to(beta.dtype).clamp_min(2))
        return self.delta + beta * log_n.pow(gamma)

    @staticmethod
    def _project(x: torch.Tensor, w: torch.Tensor, per_head: bool) -> torch.Tensor:
        if per_head:
            return (x * w[:, None, :]).sum(-1)
        return torch.einsum("...qd,hd->...hq", x, w)

    def forward(self, scores: torch.Tensor, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Scaled scores (..., H, Q, K); n counts the allowed keys of each row under ``mask``."""
        if scores.dim() < 3 or scores.shape[-3] != self.n_heads:
            raise ArgumentError(f"scores must be (..., H={self.n_heads}, Q, K), got {tuple(scores.shape)}")
        if mask is None:
            n = torch.full(scores.shape[:-1] + (1,), scores.shape[-1], dtype=scores.dtype)
        else:
            n = mask.expand(scores.shape).sum(-1, keepdim=True)
        if x.dim() == scores.dim() and x.shape[-3] == self.n_heads:
            per_head = True
        elif x.dim() == scores.dim() - 1:
            per_head = False
        else:
            raise ArgumentError(
                f"x must be (..., Q, d) shared by the heads or (..., H, Q, d) per head for scores "
                f"{tuple(scores.shape)}, got {tuple(x.shape)}"
            )
        return scores * self.multiplier(x, n, per_head).to(scores.dtype)

    def attend(self, scores: torch.Tensor, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Weights: the module's row map applied to the scaled scores."""
        return self.row_map(self(scores, x, mask), mask)


class ASEntmax(AdaptiveScale):
    """Adaptive-Scalable alpha-entmax (Vasylenko et al. 2025 §4.1): AdaptiveScale followed by alpha-entmax."""

    def __init__(self, n_heads: int, dim: int, *, alpha: float = 1.5, delta: float = 1.0, s: float = 1.0) -> None:
        super().__init__(n_heads, dim, delta=delta, s=s, row_map=f"entmax_a{alpha:g}")


class ASSMax(AdaptiveScale):
    """Adaptive-Scalable softmax (Vasylenko et al. 2025 §5 baseline): AdaptiveScale followed by softmax."""

    def __init__(self, n_heads: int, dim: int, *, delta: float = 1.0, s: float = 1.0) -> None:
        super().__init__(n_heads, dim, delta=delta, s=s, row_map="softmax")
