"""A task of one's own: copy the source rotated left by one token (``attnlab tasks rotate`` shows it)."""

from dataclasses import dataclass

import numpy as np

from attnlab import tasks
from attnlab.tasks.sequences import Copy


@dataclass(frozen=True)
class Rotate(Copy):
    """``<bos> x_1..x_m <sep> x_2..x_m x_1 <eos>``: the answer is the source rotated left by one."""

    name: str = "rotate"

    def answer(self, x: np.ndarray) -> np.ndarray:
        return np.roll(x, -1, axis=1)


tasks.register(Rotate())
