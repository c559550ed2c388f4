"""Pointwise row maps: normalized ReLU^p and sigmoid, Wortsman's un-normalized ReLU, and ReLU/n."""

from __future__ import annotations

import torch

from ._rows import allowed_count, normalized_rows, pointwise_rows

DEAD_RULES = ("zeros", "uniform", "softmax")


def _power(q: torch.Tensor, p: float) -> torch.Tensor:
    """q^p by repeated squaring when p is a power of two (one pass each, unlike std::pow)."""
    if p == 1:
        return q
    if p >= 2 and float(p).is_integer() and (int(p) & (int(p) - 1)) == 0:
        for _ in range(int(p).bit_length() - 1):
            q = q * q
        return q
    return q.pow(p)


def _dead_fill(c: torch.Tensor, w: torch.Tensor, dead_row: torch.Tensor, dead: str) -> torch.Tensor:
    if dead == "zeros" or not bool(dead_row.any()):
        return w
    if dead == "uniform":
        allowed = (~torch.isneginf(c)).to(w.dtype)
        fill = allowed / allowed.sum(-1, keepdim=True).clamp_min(1)
    else:
        fill = torch.softmax(c, dim=-1)
    return torch.where(dead_row, fill, w)


def relu_power(z: torch.Tensor, p: float, b: float, dead: str = "zeros") -> torch.Tensor:
    """Normalized ReLU^p: r_i^p / sum_j r_j^p with r = ReLU(z + b).

    Seed 000 (When Does Polynomial Attention Concentrate?) §5.3, Algorithm 1. Computed as
    (r / r_max)^p / sum (r_j / r_max)^p, so every power lies in [0, 1]: p = 16 cannot overflow or
    underflow the sum even for bf16/fp16 input (seed 000 §5.5 lost its p = 16 results to this).

    A dead row (no allowed key with z + b > 0) gets, by ``dead``: "zeros" (the row attends to nothing),
    "uniform" (equal weight on the allowed keys) or "softmax" (softmax of the row).
    """
    if dead not in DEAD_RULES:
        raise ValueError(f"dead-row rule must be one of {DEAD_RULES}, got {dead!r}")

    def rows(c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        rmax = (m + b).clamp(min=0)
        scale = torch.where(rmax > 0, 1 / rmax, torch.zeros((), dtype=c.dtype))
        q = (c + b if b else c).clamp(min=0).mul_(scale)
        w = _power(q, p)
        w = w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
        return _dead_fill(c, w, rmax == 0, dead)

    return normalized_rows(z, rows)


def sigmoid_normalized(z: torch.Tensor, b: float) -> torch.Tensor:
    """Normalized sigmoid: sigma(z_i + b) / sum_j sigma(z_j + b). Seed 000 §5.3 and App. T.

    sigma > 0, so no row is dead. Rows whose largest z + b is so negative that sigma underflows are
    computed as softmax(log sigma(z + b)), the same quantity in log space.
    """
    def rows(c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        u = c + b if b else c
        w = torch.sigmoid(u)
        w = w / w.sum(-1, keepdim=True)
        low = (m + b) < (-60.0 if c.dtype == torch.float32 else -600.0)
        if bool(low.any()):
            w = torch.where(low, torch.softmax(torch.nn.functional.logsigmoid(u), dim=-1), w)
        return w

    return normalized_rows(z, rows)


def wortsman(z: torch.Tensor, p: float, by: str) -> torch.Tensor:
    """Un-normalized ReLU(z)^p / L (``by="L"``) or / sqrt(L) (``by="sqrtL"``), L = allowed keys.

    Wortsman et al. (2023) as used in seed 000 §5.3, Table 2 (b = 0: there is no row normalizer to
    absorb a bias shift). Rows do not sum to 1.
    """
    def rows(c: torch.Tensor) -> torch.Tensor:
        n = allowed_count(c).clamp_min(1)
        return _power(torch.relu(c), p) / (n if by == "L" else n.sqrt())

    return pointwise_rows(z, rows)


def relu_attention(z: torch.Tensor) -> torch.Tensor:
    """ReLU(z) / max(L - 2, 1), L = allowed keys (in a causal row, the 1-based query position i).

    Seed 004 (Attention Sinks Are Functionally Essential) §3.4: n_i = max(i - 2, 1) excludes BOS and the
    current token, so that ReLU attention can compute averages.
    """
    def rows(c: torch.Tensor) -> torch.Tensor:
        return torch.relu(c) / (allowed_count(c) - 2).clamp_min(1)

    return pointwise_rows(z, rows)
