"""The trigger-conditional averaging task of Attention Sinks Essential (§3.1-3.2, App. A), the
continuous-vector task behind attnlab's ``model.inputs: vectors`` mode.

    >>> batch = TriggerAveraging().generate(128, 16, seed=0)
    >>> batch.inputs.shape, batch.targets.shape, batch.mask.shape     # (128, 16, 16) twice, (128, 16)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from attnlab.tasks.seqtask import Task, VectorBatch, need, register


def trigger_mask(inputs: torch.Tensor) -> torch.Tensor:
    """(n, length) bool: the trigger position of each row, where coordinate 2 (index 1) is 1; only the
    trigger token sets it (Attention Sinks Essential §3.2), so evaluation can score the trigger from the inputs
    alone."""
    return inputs[..., 1] == 1


@dataclass(frozen=True)
class TriggerAveraging(Task):
    """Trigger-conditional averaging (Attention Sinks Essential, §3.2, App. A); ``dim`` = the seed's n,
    ``length`` = its L.

    Per row, with 1-based positions: a trigger index ``j`` uniform over ``{3..L}`` (or fixed by
    ``trigger``; §4 shows every figure at ``j = 8`` with ``L = 16``); position 1 is the BOS one-hot
    ``e1``; position ``j`` the trigger one-hot ``e2``; every other position has coordinates 1 and 2 zero,
    coordinate n one (the bias channel) and coordinates ``3..n-1`` i.i.d. U(-1, 1) (App. A's choice of
    the seed's "some continuous distribution"). The target is zero except at ``j``, where it is the mean
    of positions ``2..j-1``, the preceding non-BOS tokens (so its bias coordinate is 1). §3.1 asks
    ``n >= 5`` and ``L >= 4``; App. A trains with ``n = 16`` under the squared l2 loss on all positions.
    """

    name: str = "trigger_averaging"
    dim: int = 16
    trigger: int | None = None
    kind: ClassVar[str] = "vector"
    source: ClassVar[str] = "Attention Sinks Essential §3.1-3.2, §4, App. A"
    layout: ClassVar[str] = "e1, then non-trigger vectors (0, 0, U(-1,1)^(n-3), 1), e2 at j ~ U{3..L}"

    def __post_init__(self):
        need(self.dim >= 5, f"trigger_averaging: dim {self.dim}; allowed: dim >= 5 (Attention Sinks Essential §3.1)")
        need(
            self.trigger is None or self.trigger >= 3,
            f"trigger_averaging: trigger {self.trigger}; allowed: None (uniform) or a 1-based index >= 3",
        )

    @property
    def vocab_size(self) -> int:
        """0: vectors have no vocabulary (the trainer checks vocabularies of token streams only)."""
        return 0

    @property
    def specials(self) -> dict[str, int]:
        return {}

    @property
    def min_length(self) -> int:
        return max(4, self.trigger or 0)

    def sizes(self, length: int) -> dict[str, int]:
        return {"positions": length, "dim": self.dim}

    def draw(self, rng: np.random.Generator, n: int, length: int) -> VectorBatch:
        x = np.zeros((n, length, self.dim))
        x[:, 1:, 2:-1] = rng.uniform(-1.0, 1.0, size=(n, length - 1, self.dim - 3))
        x[:, 1:, -1] = 1.0
        x[:, 0, 0] = 1.0
        j = (np.full(n, self.trigger) if self.trigger else rng.integers(3, length + 1, size=n)) - 1  # 0-based
        rows = np.arange(n)
        # Prefix sums of positions 1..: sum over positions 2..j-1 (1-based) is prefix[j - 2] (0-based j).
        prefix = np.cumsum(x[:, 1:], axis=1)
        y = np.zeros_like(x)
        y[rows, j] = prefix[rows, j - 2] / (j - 1)[:, None]
        x[rows, j] = 0.0
        x[rows, j, 1] = 1.0
        mask = np.zeros((n, length), dtype=bool)
        mask[rows, j] = True
        return VectorBatch(torch.from_numpy(x).float(), torch.from_numpy(y).float(), torch.from_numpy(mask))

    def describe(self) -> dict:
        return {
            **super().describe(),
            "dim": self.dim,
            "targets": "zero except at the trigger: mean of positions 2..j-1 (1-based); squared l2 loss",
            "mask": "inputs[..., 1] == 1 marks the trigger position (trigger_mask)",
        }


register(TriggerAveraging(), stream=11)
