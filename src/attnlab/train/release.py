"""The Zhu et al. 2026 release rule: when the early upper-Q/K slowing (and the entropy floor) end.

Zhu et al. 2026 §2 and App. F: release once the lower-copy score has been >= ``threshold`` for ``patience``
consecutive evaluations from ``earliest`` of the steps on; forced at ``forced`` of the steps if the rule
has not fired; then a linear ramp over ``ramp`` of the steps. A fixed-release variant releases at
``release_at`` regardless of the score (App. F's controls). The score is the raw lower-copy mass or its
excess over uniform attention's on the same batch (``InterventionConfig.score``). The state is plain data
so that checkpoints carry it and a resumed run releases where the uninterrupted one would; ``replay``
re-runs rule variants on a finished run's logged scores (App. F, Table 8).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from attnlab.train.config import InterventionConfig

# App. F, Table 8: the main rule and its neighbours, as InterventionConfig changes.
TABLE8_RULES: dict[str, dict[str, float]] = {
    "main rule": {},
    "lower threshold": {"threshold": 0.003},
    "higher threshold": {"threshold": 0.007},
    "no patience": {"patience": 1},
    "stricter patience": {"patience": 5},
    "shorter forced window": {"forced": 0.08},
}


def _at(fraction: float, steps: int) -> int:
    return math.ceil(fraction * steps)


def reading_interval(cfg: InterventionConfig, steps: int) -> int:
    """Steps between the rule's own lower-copy readings (``score_every`` of ``steps``, at least 1); 0 when the
    rule reads the evaluations instead."""
    return 0 if cfg.score_every <= 0 else max(1, round(cfg.score_every * steps))


def reads_score(cfg: InterventionConfig, steps: int, step: int) -> bool:
    """Whether the lower-copy score is read after ``step`` steps: every ``reading_interval`` steps up to the
    forced release, where the rule's decision is over (the readings past it would date nothing)."""
    every = reading_interval(cfg, steps)
    return every > 0 and step > 0 and step % every == 0 and step <= _at(cfg.forced, steps)


def maturity(cfg: InterventionConfig, readings: Iterable[tuple[int, float, float]]) -> int | None:
    """The step at which lower-copy routing matures in logged (step, lower_copy, chance) readings: the first of
    ``patience`` consecutive readings whose rule score reaches ``threshold``, with no window (Zhu et al. 2026
    §5.4, Fig. 3A dates maturity at the first threshold crossing; the patience run keeps one noisy reading from
    dating it). None when it never matures in the readings."""
    ordered = sorted(readings)
    run = 0
    for i, (_, raw, chance) in enumerate(ordered):
        run = run + 1 if rule_score(cfg, raw, chance) >= cfg.threshold else 0
        if run == cfg.patience:
            return ordered[i - cfg.patience + 1][0]
    return None


def rule_score(cfg: InterventionConfig, lower_copy: float, chance: float) -> float:
    """What the rule compares with the threshold: the raw score, or its excess over ``chance`` (NaN when
    either is unknown, which never counts as mature)."""
    return lower_copy if cfg.score == "raw" else lower_copy - chance


@dataclass
class Release:
    """Decides the gate g(step) in [0, 1]: 0 while the intervention holds, 1 once fully released."""

    cfg: InterventionConfig
    steps: int
    scores: list[tuple[int, float, float]] = field(default_factory=list)
    released_at: int | None = None
    reason: str | None = None

    def observe(self, step: int, lower_copy: float, chance: float = math.nan) -> None:
        """Record an evaluation's lower-copy score at ``step`` and uniform attention's score on the same batch
        (``probes.lower_copy_chance``); the rule may fire here."""
        self.scores.append((step, float(lower_copy), float(chance)))
        earliest = _at(self.cfg.earliest, self.steps)
        if not self.cfg.active or self.released_at is not None or self.cfg.release != "rule" or step < earliest:
            return
        counted = self.scores if self.cfg.count_early else [s for s in self.scores if s[0] >= earliest]
        recent = [rule_score(self.cfg, raw, chance) for _, raw, chance in counted[-self.cfg.patience :]]
        if len(recent) == self.cfg.patience and all(s >= self.cfg.threshold for s in recent):
            self.released_at, self.reason = step, "rule"

    def advance(self, step: int) -> None:
        """Apply the step-driven releases (fixed, forced) before ``step`` is trained; the release is dated at
        its own step, so a caller that skips steps (``replay``) dates it as the trainer does."""
        if not self.cfg.active or self.released_at is not None:
            return
        if self.cfg.release == "fixed" and step >= (at := _at(self.cfg.release_at, self.steps)):
            self.released_at, self.reason = at, "fixed"
        elif self.cfg.release == "rule" and step >= (at := _at(self.cfg.forced, self.steps)):
            self.released_at, self.reason = at, "forced"

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
        # checkpoints written before the chance baseline was logged hold (step, score) pairs
        self.scores = [(int(s[0]), float(s[1]), float(s[2]) if len(s) > 2 else math.nan) for s in state["scores"]]
        self.released_at, self.reason = state["released_at"], state["reason"]


def replay(cfg: InterventionConfig, steps: int, evaluations: Iterable[tuple[int, float, float]]) -> Release:
    """The rule ``cfg`` run over logged (step, lower_copy, chance) evaluations of a ``steps``-step run, in the
    trainer's order (the evaluation after step s is observed before step s is trained); Zhu et al. 2026
    App. F's offline replay."""
    rule = Release(cfg, steps)
    for step, raw, chance in sorted(evaluations):
        rule.advance(step - 1)
        rule.observe(step, raw, chance)
    rule.advance(steps - 1)
    return rule


def table8(
    cfg: InterventionConfig,
    steps: int,
    evaluations: Iterable[tuple[int, float, float]],
    rules: dict[str, dict[str, float]] | None = None,
) -> list[dict]:
    """Per rule variant (Table 8's by default, each a change to ``cfg``): its threshold, patience, window and
    the release step and fraction of training the replay gives."""
    evaluations = list(evaluations)
    rows = []
    for name, changes in (TABLE8_RULES if rules is None else rules).items():
        variant = dataclasses.replace(cfg, **changes)
        rule = replay(variant, steps, evaluations)
        rows.append(
            {
                "rule": name,
                "score": variant.score,
                "threshold": variant.threshold,
                "patience": variant.patience,
                "window": f"{variant.earliest:.0%}-{variant.forced:.0%}",
                "released_at": rule.released_at,
                "fraction": None if rule.released_at is None else rule.released_at / steps,
                "reason": rule.reason,
            }
        )
    return rows


def cadence_warnings(cfg: InterventionConfig, steps: int, eval_every: int, chance: float) -> list[str]:
    """Why a rule-released run's release would not measure maturity: too few readings (evaluations, or the
    rule's own readings with ``score_every``) inside the window for ``patience``, or a raw threshold that
    uniform attention (lower-copy score ``chance`` on the first validation batch) already meets at
    initialization."""
    if not cfg.active or cfg.release != "rule":
        return []
    found = []
    earliest, forced = _at(cfg.earliest, steps), _at(cfg.forced, steps)
    eval_every = reading_interval(cfg, steps) or eval_every
    evals = [s for s in range(eval_every, steps + 1, eval_every)]
    inside = [s for s in evals if earliest <= s < forced]
    usable = len([s for s in evals if s < forced]) if cfg.count_early and inside else len(inside)
    if usable < cfg.patience:
        fix = (
            f"evaluate at least every {(forced - earliest) // cfg.patience} steps"
            if forced - earliest >= cfg.patience
            else "train for more steps"
        )
        found.append(
            f"the release rule cannot fire: {len(inside)} evaluations (every {eval_every} steps) fall in "
            f"its window, steps {earliest} to {forced - 1} of {steps}, and it needs {cfg.patience} in a "
            f"row; it will be forced at step {forced}: {fix}"
        )
    if cfg.score == "raw" and math.isfinite(chance) and chance >= cfg.threshold:
        found.append(
            f"uniform attention alone scores {chance:.4f} on the lower-copy metric of this context, at or "
            f"above the threshold {cfg.threshold}: the raw rule fires at its first chance whatever the "
            f"model learned (it fires at initialization); set intervention.score: excess"
        )
    return found
