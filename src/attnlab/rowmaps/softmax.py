"""Softmax and its temperature and length scalings, and top-k softmax.

All take rows z over the last dimension (masked keys already at -inf, see ``_rows.apply_rows``).
"""

from __future__ import annotations

import math
import re

import torch

from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.rowmaps._rows import allowed_count, normalized_rows
from attnlab.rowmaps.registry import NUM, SCALE_RANGE, XI_RANGE, Built, register, within


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
    if not isinstance(n, torch.Tensor):
        raise ArgumentTypeError(f"length_multiplier: n must be a tensor of key counts, got {type(n).__name__}")
    within("length_multiplier", "xi", xi, XI_RANGE)
    if isinstance(n_train, bool) or not isinstance(n_train, (int, float)) or not 2 <= n_train < math.inf:
        raise ArgumentError(
            f"length_multiplier: n_train must be a finite number >= 2 (the training length), got {n_train!r}"
        )
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


@register("softmax", formula="exp(z_i) / sum_j exp(z_j)", source="every paper's baseline")
def _softmax_family(name: str, m: re.Match[str]) -> Built:
    return {}, softmax


@register(
    "softmax_t",
    pattern=rf"softmax_t({NUM})",
    example="softmax_t0.5",
    formula="softmax(z / t)",
    params="t in [1e-4, 1e4]: temperature",
    source="Hayase & Karakida 2026 §2",
    family="softmax",
)
def _temperature_family(name: str, m: re.Match[str]) -> Built:
    t = within(name, "temperature t", float(m[1]), SCALE_RANGE)
    return {"t": t}, lambda z: softmax_temperature(z, t)


@register(
    "ssmax",
    pattern=rf"ssmax_s({NUM})",
    example="ssmax_s0.43",
    formula="softmax(s log(L) z)",
    params="s in [1e-4, 1e4]; L = allowed keys",
    source="Vasylenko et al. 2025 §5 (Scalable-Softmax)",
)
def _ssmax_family(name: str, m: re.Match[str]) -> Built:
    s = within(name, "scale s", float(m[1]), SCALE_RANGE)
    return {"s": s}, lambda z: ssmax(z, s)


@register(
    "logn",
    pattern=rf"logn_xi({NUM})_n(\d+)",
    example="logn_xi2_n8192",
    formula="softmax(max(1, log L / log n_train)^xi z)",
    params="xi in [-8, 8]: exponent; n_train >= 2: training length; L = allowed keys",
    source="Hayase & Karakida 2026 App. A.2",
)
def _logn_family(name: str, m: re.Match[str]) -> Built:
    xi, n_train = within(name, "xi", float(m[1]), XI_RANGE), float(m[2])
    if not (math.isfinite(n_train) and n_train >= 2):
        raise ArgumentError(f"{name}: n_train = {n_train:g} must be a finite integer >= 2")
    return {"xi": xi, "n_train": n_train}, lambda z: logn_softmax(z, xi, n_train)


@register(
    "topk",
    pattern=r"topk_k(\d+)",
    example="topk_k32",
    formula="softmax over the k largest scores (ties kept)",
    params="k >= 1",
    source="Vasylenko et al. 2025 §5 (top-K)",
)
def _topk_family(name: str, m: re.Match[str]) -> Built:
    k = int(m[1])
    if k < 1:
        raise ArgumentError(f"{name}: k must be at least 1")
    return {"k": k}, lambda z: topk_softmax(z, k)
