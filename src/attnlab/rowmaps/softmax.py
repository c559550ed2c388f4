"""Softmax and its temperature and length scalings, and top-k softmax.

All take rows z over the last dimension (masked keys already at -inf, see ``_rows.apply_rows``).
"""

from __future__ import annotations

import math

import torch

from ._rows import allowed_count, normalized_rows


def _softmax_rows(z: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return torch.softmax(z, dim=-1)


def _scaled_softmax(c: torch.Tensor, m: torch.Tensor, factor: float | torch.Tensor) -> torch.Tensor:
    """softmax(factor * c) for rows c with maxima m, factor > 0, computed as softmax(factor * (c - m)).

    The same for any positive factor; scaling first would round factor * c to the ulp of factor * m
    (float32 at m = 3e5: 0.03) before torch.softmax subtracts the maximum, where c - m is exact.
    """
    return torch.softmax((c - m).mul_(factor), dim=-1)


def softmax(z: torch.Tensor) -> torch.Tensor:
    """softmax(z)_i = exp(z_i) / sum_j exp(z_j)."""
    return normalized_rows(z, _softmax_rows)


def softmax_temperature(z: torch.Tensor, t: float) -> torch.Tensor:
    """softmax(z / t), t > 0 the temperature."""
    return normalized_rows(z, lambda c, m: _scaled_softmax(c, m, 1.0 / t))


def ssmax(z: torch.Tensor, s: float) -> torch.Tensor:
    """Scalable-Softmax: softmax(s log(L) z), L = allowed keys of the row.

    Vasylenko et al. 2025 (Long-Context Generalization with Sparse Attention) §5 baselines, after Nakanishi (2025).
    """
    def rows(c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        # L is clamped to 2: a row with one allowed key is one-hot under any positive factor, and a
        # zero factor would turn its masked -inf keys into NaN.
        return _scaled_softmax(c, m, s * torch.log(allowed_count(c).clamp_min(2)))

    return normalized_rows(z, rows)


def length_multiplier(n: torch.Tensor, xi: float, n_train: float) -> torch.Tensor:
    """m(n; xi) = max(1, log n / log n_train)^xi.

    Hayase & Karakida 2026 (A Unified Framework for Critical Scaling of Inverse Temperature), App. A.2.
    """
    ratio = torch.log(n.clamp_min(1)) / math.log(n_train)
    return ratio.clamp_min(1.0).pow(xi)


def logn_softmax(z: torch.Tensor, xi: float, n_train: float) -> torch.Tensor:
    """softmax(m(n; xi) z) with n = allowed keys of the row (Hayase & Karakida 2026 App. A.2)."""
    def rows(c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return _scaled_softmax(c, m, length_multiplier(allowed_count(c), xi, n_train))

    return normalized_rows(z, rows)


def topk_softmax(z: torch.Tensor, k: int) -> torch.Tensor:
    """Softmax over the k largest allowed scores of the row, zero elsewhere.

    Keys tied with the k-th largest score are all kept, so the result does not depend on key order.
    Vasylenko et al. 2025 §5 (top-K baseline).
    """
    def rows(c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        kk = min(k, c.shape[-1])
        kth = torch.topk(c.detach(), kk, dim=-1).values[..., -1:]
        return torch.softmax(c.masked_fill(c < kth, float("-inf")), dim=-1)

    return normalized_rows(z, rows)
