"""b_auto: the 5%-mass-budget bias of Polynomial Concentration App. B and J.

b_auto is the smallest b for which the average softmax row (over every layer, head and query of a
held-out generic input) puts at most ``budget`` of its mass on keys whose score is below -b. With
C(t) = mean over rows of the mass on scores < t, that is b = -v for the smallest score v whose inclusive
cumulative mass exceeds the budget: a weighted quantile of all (score, weight) pairs of the forward.

A forward at 1024 tokens holds billions of such pairs, so the quantile is found in two passes that keep
O(65536) numbers: the first bins the pairs by the top 16 bits of the float32 score (exact for bfloat16
models, whose scores are those 16 bits) and finds the bin that crosses the budget; the second collects
only the pairs inside that bin and finishes exactly.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlab.errors import ArgumentError
from attnlab.hooks.hf import last_forward, observed
from attnlab.site import ScoreBlock

N_BINS = 1 << 16


def _order_keys(z: torch.Tensor) -> torch.Tensor:
    # int32 keys that sort like the float32 values: flip the magnitude bits of negatives
    bits = z.to(torch.float32).contiguous().view(torch.int32)
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


def _bins(z: torch.Tensor) -> torch.Tensor:
    # int32 throughout: bincount takes it, and an int64 copy of a block of scores costs as much as the binning
    return (_order_keys(z) >> 16).add_(N_BINS // 2)


class _Pass:
    """Observer that accumulates weighted score pairs, binned (first pass) or within one bin (second)."""

    def __init__(self, target_bin: int | None) -> None:
        self.target_bin = target_bin
        self.rows = 0
        self.hist = torch.zeros(N_BINS, dtype=torch.float64)
        self.values: list[torch.Tensor] = []
        self.weights: list[torch.Tensor] = []

    def __call__(self, block: ScoreBlock) -> None:
        z = block.scores
        allowed = block.allowed.expand_as(z)
        w = torch.softmax(z, dim=-1, dtype=torch.float32)
        live = allowed.any(-1) & ~torch.isnan(z).any(-1)
        self.rows += int(live.sum())
        keep = allowed & live.unsqueeze(-1) & (w > 0)
        # Binned in place of selected: a boolean selection copies the block's pairs, which cost more than
        # the binning itself; pairs left out weigh 0 in the histogram.
        bins = _bins(torch.where(keep, z, 0.0))
        if self.target_bin is None:
            weights = torch.where(keep, w, 0.0).flatten().to(torch.float64)
            self.hist += torch.bincount(bins.flatten(), weights=weights, minlength=N_BINS)
        else:
            inside = keep & (bins == self.target_bin)
            self.values.append(z[inside].to(torch.float64))
            self.weights.append(w[inside].to(torch.float64))


def _forward(model: nn.Module, input_ids: torch.Tensor, observer: _Pass) -> None:
    with observed(model, observer), torch.no_grad():
        last_forward(model, input_ids)


def calibrate_b_auto(model: nn.Module, input_ids: torch.Tensor, *, budget: float = 0.05) -> float:
    """b_auto of Polynomial Concentration App. B/J on ``input_ids`` (batch, tokens): held-out generic text, 1024 tokens
    in the seed. Returns the bias as a float (a score value of the model, negated)."""
    if not 0 < budget < 1:
        raise ArgumentError(f"mass budget must be in (0, 1), got {budget!r}")
    if input_ids.dim() != 2 or input_ids.shape[1] < 2:
        raise ArgumentError(
            f"calibration input must be (batch, tokens) with at least 2 tokens, got shape {tuple(input_ids.shape)}"
        )
    first = _Pass(None)
    _forward(model, input_ids, first)
    if first.rows == 0:
        raise ArgumentError("calibration saw no attention row with an allowed key")
    mass = first.hist / first.rows
    cumulative = torch.cumsum(mass, 0)
    target = int(torch.searchsorted(cumulative, torch.tensor([budget], dtype=torch.float64), right=True))
    below = float(cumulative[target - 1]) if target > 0 else 0.0
    second = _Pass(target)
    _forward(model, input_ids, second)
    values = torch.cat(second.values)
    weights = torch.cat(second.weights) / second.rows
    order = torch.argsort(values, stable=True)
    values, weights = values[order], weights[order]
    distinct, inverse = torch.unique_consecutive(values, return_inverse=True)
    per_value = torch.zeros(len(distinct), dtype=torch.float64).index_add_(0, inverse, weights)
    crossing = int(
        torch.searchsorted(below + torch.cumsum(per_value, 0), torch.tensor([budget], dtype=torch.float64), right=True)
    )
    crossing = min(crossing, len(distinct) - 1)
    b = -float(distinct[crossing])
    if not math.isfinite(b):
        raise ArgumentError(f"calibration found a non-finite score at the {budget:g} mass quantile")
    return b
