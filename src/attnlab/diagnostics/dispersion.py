"""Dispersion of a row map's weights and the mass it puts on a sink key.

Vasylenko et al. 2025 §3.2 and Hayase & Karakida 2026 Def. 4.1 (entropy, support, the top-two gap as collapse
observables); Attention Sinks Essential §3 and Polynomial Concentration App. H (sink mass: the weight on the first
allowed key, BOS under a causal mask). Rows are float64 zm (R, n) with -inf at masked keys; the map is any
normalized registered row map at inverse temperature beta.
"""

from __future__ import annotations

import math

import torch

from attnlab.errors import ArgumentError
from attnlab.rowmaps.registry import RowMap


def weights(zm: torch.Tensor, rowmap: RowMap, beta: float) -> torch.Tensor:
    """The map's weights on beta * z (float64, exact zeros at masked keys).

    Rows here are already checked (finite maximum, -inf only at masked keys), so plain softmax skips
    the registry's row checks, which cost about a softmax pass of their own.
    """
    if not rowmap.normalized:
        raise ArgumentError(f"dispersion needs a normalized row map (weights on the simplex); {rowmap.name!r} is not")
    if rowmap.name == "softmax":
        # softmax(beta (z - max z)): scaling first rounds beta z to its ulp (float64 at 1e15: 0.125)
        return torch.softmax((zm - zm.amax(-1, keepdim=True)).mul_(beta), -1)
    return rowmap(zm * beta)


def normalized_entropy(entropy: torch.Tensor, n_keys: torch.Tensor) -> torch.Tensor:
    """Entropy / log L, L the allowed keys of the row; NaN where L = 1 (Vasylenko et al. 2025 §3.2)."""
    return entropy / torch.where(n_keys > 1, n_keys.to(entropy.dtype).log(), math.nan)


def dispersion(
    w: torch.Tensor,
    zm: torch.Tensor,
    first: torch.Tensor,
    second: torch.Tensor,
    n_keys: torch.Tensor,
    beta: float,
    softmax: bool,
) -> dict[str, torch.Tensor]:
    """Shannon entropy, entropy / log L (L = allowed keys; NaN when L = 1), support (weights > 0),
    max weight and top-two weight gap of each row (Vasylenko et al. 2025 §3.2, Hayase & Karakida 2026 Def. 4.1).

    ``first`` and ``second`` index the largest and second-largest score (equal on a single-key row):
    every registered map is nondecreasing in each score, so the two largest weights sit there. For
    softmax the entropy comes from H = -log w_max - beta (sum_i w_i z_i - z_max) (log w_i = log w_max +
    beta (z_i - z_max)), which avoids an elementwise log.
    """
    w_max = w.gather(-1, first.unsqueeze(-1)).squeeze(-1)
    w_2nd = torch.where(first == second, 0.0, w.gather(-1, second.unsqueeze(-1)).squeeze(-1))
    if softmax:
        z_max = zm.gather(-1, first.unsqueeze(-1)).squeeze(-1)
        # Masked keys carry w = 0 and z = -inf; a finite floor keeps 0 * z at 0 instead of NaN.
        mean_z = (w * zm.clamp(min=-torch.finfo(zm.dtype).max)).sum(-1)
        entropy = (mean_z - z_max).mul_(-beta).sub_(w_max.log()).clamp_(min=0.0)
    else:
        entropy = -torch.special.xlogy(w, w).sum(-1)
    return {
        "entropy": entropy,
        "entropy_norm": normalized_entropy(entropy, n_keys),
        "support": w.sign().sum(-1).to(torch.int64),  # w >= 0: sign counts nonzeros without a bool pass
        "max_weight": w_max,
        "top2_gap": w_max - w_2nd,
    }


def sink_index(zm: torch.Tensor, n_keys: torch.Tensor, sink: int, full: bool) -> torch.Tensor:
    """Key index of the sink-th allowed key of each row (0 = the first allowed key), -1 where the row
    has no more than ``sink`` allowed keys (the sink is not visible from that query). ``full`` says
    every key of every row is allowed, where the index is ``sink`` itself."""
    if full:
        index = torch.full_like(n_keys, sink)
    else:
        # Keys before the sink-th allowed one are those where fewer than sink + 1 allowed keys are seen.
        seen = (zm > -math.inf).cumsum(-1)
        index = (seen <= sink).sum(-1)
    return torch.where(n_keys > sink, index, -1)


def key_mass(w: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """w[row, index[row]], NaN where index is -1 (Attention Sinks Essential: sink mass; Polynomial Concentration
    App. H: induction mass)."""
    safe = index.clamp(min=0).unsqueeze(-1)
    return torch.where(index >= 0, w.gather(-1, safe).squeeze(-1), math.nan)
