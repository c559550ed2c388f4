"""Row maps: score row z -> attention weights. One registry, keyed by the names users type.

    >>> from attnlab import rowmaps
    >>> w = rowmaps.get("entmax_a1.5")(scores, mask)

Each family is declared once, next to its code, with ``register`` (``attnlab maps`` lists them all with
formula and source paper); ``rowmaps.register`` adds one's own in the same way.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from attnlab.rowmaps._rows import check_rows
from attnlab.rowmaps.entmax import entmax
from attnlab.rowmaps.pointwise import relu_attention, relu_power, sigmoid_normalized, wortsman
from attnlab.rowmaps.registry import FAMILIES, Family, RowMap, family_of, get, register
from attnlab.rowmaps.scalers import AdaptiveScale, ASEntmax, ASSMax

# The modules below declare their families on import, in the order ``attnlab maps`` lists them.
from attnlab.rowmaps.softmax import length_multiplier


class RowMapLayer(nn.Module):
    """A row map as a module: ``RowMapLayer("relu_p4_b1")(scores, mask)``."""

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__()
        self.rowmap = get(name, **options)

    def forward(self, scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.rowmap(scores, mask)

    def extra_repr(self) -> str:
        return self.rowmap.name


__all__ = [
    "FAMILIES",
    "ASEntmax",
    "ASSMax",
    "AdaptiveScale",
    "Family",
    "RowMap",
    "RowMapLayer",
    "check_rows",
    "entmax",
    "family_of",
    "get",
    "length_multiplier",
    "register",
    "relu_attention",
    "relu_power",
    "sigmoid_normalized",
    "wortsman",
]
