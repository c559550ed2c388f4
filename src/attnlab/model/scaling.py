"""Learnable inverse temperatures of the own decoder: per-head, per-query multipliers on score rows.

Each scaler maps (the layer's normalized input x, the number n of keys each query may attend) to a
multiplier of shape (batch or 1, heads, queries, 1) that ``attnlab.site.blockwise`` applies to the scores
after the observers and before the row map. The map stays the config's ``rowmap``, so ASEntmax is the
``adaptive`` scaler with ``entmax_a1.5`` and ASSMax the same scaler with softmax (Vasylenko et al. 2025 §4.1);
its multiplier is the one ``attnlab.rowmaps.AdaptiveScale`` computes, not a second copy.

``SCALERS`` holds each scaler class under the name a config's ``scaler`` field takes; a class is built as
``cls(heads, dim, delta=..., bound=...)`` and called as ``module(x, n, beta)``, so
``@SCALERS.register("mine")`` on such a class adds one's own. The scalers of ``FIXED_GAMMA_SCALERS`` also
take ``gamma=`` (a fixed exponent of log n; the config's ``scaler_gamma``), which no other scaler is given.
Under NAPE the decoder applies the multiplier of a scaler in ``NOPE_ONLY_SCALERS`` to the NoPE heads alone
(``scaled_heads``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlab.errors import ArgumentError
from attnlab.registry import Registry
from attnlab.rowmaps.scalers import AdaptiveScale

SCALERS: Registry[type[nn.Module]] = Registry("scaler")
FIXED_GAMMA_SCALERS = ("adaptive", "direct")
# Vasylenko et al. 2025's length scalings (SSMax, ASEntmax/ASSMax, SEntmax): under NAPE they scale only the NoPE
# heads, as the authors' code does (deep-spin/asentmax, ``sparse_gemma.py``: ``_apply_length_scaling`` multiplies
# the last ``num_nope_heads`` queries); the ALiBi heads keep their biased scores, whose recency bias a
# multiplier would sharpen with length. Any other scaler scales every head under every position encoding.
NOPE_ONLY_SCALERS = ("log_n", "adaptive", "direct")


@SCALERS.register("log_n")
class LogNScale(nn.Module):
    """delta + s_h log n per head, s_h learned (Vasylenko et al. 2025 §4.1, Fig. 3: the SSMax fit, after
    Nakanishi 2025): the row map ``ssmax_s{s}`` with s learned per head instead of fixed.

    s_h starts at 0, so an untrained model attends as the unscaled one does; n is clamped to 2 as in
    ``rowmaps.softmax.ssmax`` (a row with one key is one-hot under any positive multiplier).
    """

    def __init__(self, heads: int, dim: int, *, delta: float, bound: float) -> None:
        super().__init__()
        self.delta = delta
        self.s = nn.Parameter(torch.zeros(heads))

    def forward(self, x: torch.Tensor, n: torch.Tensor, beta: torch.Tensor | None = None) -> torch.Tensor:
        log_n = torch.log(n.to(self.s.dtype).clamp_min(2))
        return (self.delta + self.s[:, None] * log_n)[None, :, :, None]


@SCALERS.register("adaptive")
class AdaptiveScaler(nn.Module):
    """delta + softplus(x w_beta) (log n)^(s tanh(x w_gamma)) per head and query (Vasylenko et al. 2025 eq. 8-9);
    the projections read the layer's normalized input, as ``rowmaps.AdaptiveScale`` defines them. With
    ``gamma`` the exponent is that constant and only beta is learned (App. H, Table 8)."""

    def __init__(self, heads: int, dim: int, *, delta: float, bound: float, gamma: float | None = None) -> None:
        super().__init__()
        self.scale = AdaptiveScale(heads, dim, delta=delta, s=bound, gamma=gamma)

    def forward(self, x: torch.Tensor, n: torch.Tensor, beta: torch.Tensor | None = None) -> torch.Tensor:
        return self.scale.multiplier(x, n[:, None], per_head=False)


@SCALERS.register("direct")
class DirectScaler(nn.Module):
    """delta + beta_h (log n)^gamma_h with beta_h and gamma_h learned per head, no projections of the input and
    no nonlinearity: the SEntmax of Vasylenko et al. 2025 App. G.2 (with an entmax rowmap). beta_h starts at
    log 2 and gamma_h at 0, the multiplier ASEntmax's zero-initialized projections start from, so the two
    differ only in what they learn; n is clamped to 2 as in ``rowmaps.AdaptiveScale``. With ``gamma``
    every head's exponent is that constant (a buffer, not learned)."""

    def __init__(self, heads: int, dim: int, *, delta: float, bound: float, gamma: float | None = None) -> None:
        super().__init__()
        self.delta = delta
        self.beta = nn.Parameter(torch.full((heads,), math.log(2.0)))
        if gamma is None:
            self.gamma = nn.Parameter(torch.zeros(heads))
        else:
            self.register_buffer("gamma", torch.full((heads,), float(gamma)))

    def forward(self, x: torch.Tensor, n: torch.Tensor, beta: torch.Tensor | None = None) -> torch.Tensor:
        log_n = torch.log(n.to(self.beta.dtype).clamp_min(2))
        return (self.delta + self.beta[:, None] * log_n.pow(self.gamma[:, None]))[None, :, :, None]


@SCALERS.register("beta_n")
class BetaNScale(nn.Module):
    """s_{l,h} beta_n + b_{l,h} (Hayase & Karakida 2026 eq. A.1, App. A.3): beta_n is one learnable vector over
    positions shared by every layer and head (it lives on the decoder and arrives as ``beta``); s starts
    at 1 and b at 0. Queries beyond the vector's length (evaluation past the training context) use its
    last entry, since the vector was only ever trained up to there."""

    def __init__(self, heads: int, dim: int, *, delta: float, bound: float) -> None:
        super().__init__()
        self.s = nn.Parameter(torch.ones(heads))
        self.b = nn.Parameter(torch.zeros(heads))

    def forward(self, x: torch.Tensor, n: torch.Tensor, beta: torch.Tensor | None = None) -> torch.Tensor:
        if beta is None:
            raise ValueError("the beta_n scaler needs the decoder's beta_n vector")
        index = (n - 1).clamp(0, beta.shape[0] - 1)
        per_query = beta[index]
        return (self.s[:, None] * per_query + self.b[:, None])[None, :, :, None]


def scaled_heads(kind: str, slopes: torch.Tensor | None, positions: str, heads: int) -> torch.Tensor:
    """Which heads (bool, (heads,)) the scaler ``kind`` multiplies: under NAPE the NoPE heads (slope 0) for the
    scalers of ``NOPE_ONLY_SCALERS``, every head otherwise."""
    if positions == "nape" and kind in NOPE_ONLY_SCALERS and slopes is not None:
        return slopes == 0
    return torch.ones(heads, dtype=torch.bool)


def make_scaler(
    kind: str, heads: int, dim: int, *, delta: float, bound: float, gamma: float | None = None
) -> nn.Module | None:
    """The scaler module of one attention layer, or None for unscaled rows (``kind`` "none"); ``gamma``
    fixes the exponent of a scaler in ``FIXED_GAMMA_SCALERS`` (None learns it)."""
    if kind == "none":
        return None
    cls = SCALERS.find(kind)
    if gamma is None:
        return cls(heads, dim, delta=delta, bound=bound)
    if kind not in FIXED_GAMMA_SCALERS:
        raise ArgumentError(f"a fixed gamma applies to the scalers {', '.join(FIXED_GAMMA_SCALERS)}, not {kind!r}")
    return cls(heads, dim, delta=delta, bound=bound, gamma=gamma)
