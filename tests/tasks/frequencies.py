"""What the per-task statistics tests share: sample sizes and the two readings of a batch they all take."""

from __future__ import annotations

import numpy as np
import torch

N = 2000  # rows for frequency checks; tolerances below are several standard errors wide
ROWS = 300


def freq(values: torch.Tensor, classes: int) -> np.ndarray:
    """The share of each class among ``values``."""
    return np.bincount(values.flatten().numpy(), minlength=classes) / values.numel()


def first_scored(targets) -> list[int]:
    """Per row, the position of its first scored target."""
    return (targets != -100).float().argmax(dim=1).tolist()
