"""The Zhu et al. 2026 release rule: when the early upper-Q/K slowing (and the entropy floor) end.

Zhu et al. 2026 §2 and App. F: release once the lower-copy score has been >= ``threshold`` for ``patience``
consecutive evaluations, never before ``earliest`` of the steps; forced at ``forced`` of the steps if
the rule has not fired; then a linear ramp over ``ramp`` of the steps. A fixed-release variant releases at
``release_at`` regardless of the score (App. F's controls). The state is plain data so that checkpoints
carry it and a resumed run releases where the uninterrupted one would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .config import InterventionConfig


def _at(fraction: float, steps: int) -> int:
    return math.ceil(fraction * steps)


@dataclass
class Release:
    """Decides the gate g(step) in [0, 1]: 0 while the intervention holds, 1 once fully released."""

    cfg: InterventionConfig
    steps: int
    scores: list[tuple[int, float]] = field(default_factory=list)
    released_at: int | None = None
    reason: str | None = None

    def observe(self, step: int, lower_copy: float) -> None:
        """Record an evaluation's lower-copy score at ``step``; the rule may fire here."""
        self.scores.append((step, float(lower_copy)))
        waiting = step < _at(self.cfg.earliest, self.steps)
        if not self.cfg.active or self.released_at is not None or self.cfg.release != "rule" or waiting:
            return
        recent = [s for _, s in self.scores[-self.cfg.patience:]]
        # NaN (no repeated token in the batch) never counts as mature
        if len(recent) == self.cfg.patience and all(s >= self.cfg.threshold for s in recent):
            self.released_at, self.reason = step, "rule"

    def advance(self, step: int) -> None:
        """Apply the step-driven releases (fixed, forced) before ``step`` is trained."""
        if not self.cfg.active or self.released_at is not None:
            return
        if self.cfg.release == "fixed" and step >= _at(self.cfg.release_at, self.steps):
            self.released_at, self.reason = step, "fixed"
        elif self.cfg.release == "rule" and step >= _at(self.cfg.forced, self.steps):
            self.released_at, self.reason = step, "forced"

    def gate(self, step: int) -> float:
        if self.released_at is None or step < self.released_at:
            return 0.0
        ramp = self.cfg.ramp * self.steps
        return 1.0 if ramp <= 0 else min(1.0, (step - self.released_at) / ramp)

    def upper_qk_multiplier(self, step: int) -> float:
        m = self.cfg.upper_qk_lr
        return m + (1.0 - m) * self.gate(step)

    def entropy_floor(self, step: int) -> float:
        return self.cfg.entropy_floor * (1.0 - self.gate(step))

    def state_dict(self) -> dict:
        return {"scores": [list(x) for x in self.scores], "released_at": self.released_at, "reason": self.reason}

    def load_state_dict(self, state: dict) -> None:
        self.scores = [(int(s), float(v)) for s, v in state["scores"]]
        self.released_at, self.reason = state["released_at"], state["reason"]
