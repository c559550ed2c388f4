"""Row maps: score row z -> attention weights. One registry, keyed by the names users type.

    >>> from attnlab import rowmaps
    >>> w = rowmaps.get("entmax_a1.5")(scores, mask)

See ``registry.FAMILIES`` (or ``attnlab maps``) for every family, its formula and its seed.
"""

from __future__ import annotations

import torch
from torch import nn

from .entmax import entmax
from .pointwise import relu_attention, relu_power, sigmoid_normalized, wortsman
from .registry import FAMILIES, Family, RowMap, get
from .scalers import AdaptiveScale, ASEntmax, ASSMax
from .softmax import length_multiplier


class RowMapLayer(nn.Module):
    """A row map as a module: ``RowMapLayer("relu_p4_b1")(scores, mask)``."""

    def __init__(self, name: str, **options) -> None:
        super().__init__()
        self.rowmap = get(name, **options)

    def forward(self, scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.rowmap(scores, mask)

    def extra_repr(self) -> str:
        return self.rowmap.name


__all__ = [
    "FAMILIES", "ASEntmax", "ASSMax", "AdaptiveScale", "Family", "RowMap", "RowMapLayer", "entmax",
    "get", "length_multiplier", "relu_attention", "relu_power", "sigmoid_normalized", "wortsman",
]
