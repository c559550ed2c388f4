"""What a label means, measured: each finding's rule run on simulated worlds at a budget's sample sizes.

A finding's rule is a function of the data that the study, the card and this module all call. For each finding
and budget its module registers a ``Calibration``: the rule, worlds without the claim's effect (the null the
study runs, and harsher ones: the effect's opposite, bimodal seeds, i.i.d. rows at the paper's own parameters)
and worlds with the paper's effect at the budget's sample sizes, and the intervals the finding prints, each
with the truth it should cover. ``calibrate`` draws them and gives, per world, how often the rule fires: the
false-positive rate where the world has no effect (at most ``FPR_MAX``), the power where it has the paper's
effect (at least ``POWER_MIN``; below it the finding is labelled ``underpowered`` at that budget, whatever
the point estimate), and each interval's coverage (at least ``COVERAGE_MIN`` for a nominal 95%).
``attnlab verdicts --calibrate`` writes the table; ``power`` is what a finding calls at run time, on its own
sample sizes, to set its MDE's power.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnlab.errors import ArgumentError
from attnlab.findings.finding import POWER_MIN
from attnlab.findings.stats import wilson
from attnlab.findings.verdict import FPR_MAX
from attnlab.registry import Registry

COVERAGE_MIN = 0.93  # the simulated coverage a nominal 95% interval must reach
RUNTIME_DRAWS = 400  # draws of ``power`` at run time: its standard error is at most 2.5 pp


@dataclass(frozen=True)
class World:
    """A simulated world: ``draw(rng)`` gives one data set as the rule reads it. ``effect``: False for a world
    without the claim's effect (the rule firing there is a false positive), True for the paper's effect."""

    name: str
    effect: bool
    draw: Callable[[np.random.Generator], Any]


@dataclass(frozen=True)
class Coverage:
    """An interval the finding prints: ``draw(rng)`` gives (lo, hi, truth) for one simulated data set."""

    name: str
    draw: Callable[[np.random.Generator], tuple[float, float, float]]
    nominal: float = 0.95


@dataclass(frozen=True)
class Calibration:
    """One finding's rule at one budget: ``rule(data) -> bool`` fires when the data support the claim (the study's
    own rule function, not a copy), ``rule_text`` states it, ``worlds`` and ``coverage`` are drawn by
    ``calibrate``; ``sizes`` says the sample sizes the worlds use, in words."""

    finding: str
    budget: str
    rule: Callable[[Any], bool]
    rule_text: str
    sizes: str
    worlds: tuple[World, ...]
    coverage: tuple[Coverage, ...] = ()

    def __post_init__(self) -> None:
        if not any(w.effect for w in self.worlds) or all(w.effect for w in self.worlds):
            raise ArgumentError(
                f"{self.key}: a calibration needs at least one world without the effect and one with it"
            )

    @property
    def key(self) -> str:
        return f"{self.finding} @ {self.budget}"


CALIBRATIONS: Registry[Calibration] = Registry("calibration")


def register(calibration: Calibration) -> Calibration:
    """Add ``calibration`` to ``CALIBRATIONS`` under "finding @ budget"."""
    return CALIBRATIONS.register(calibration.key, calibration)


@dataclass(frozen=True)
class Rate:
    """How often, over ``draws`` simulated data sets of ``world``, the rule fired (``measure`` "false-positive
    rate" or "power") or the interval covered its truth ("coverage"), with a Wilson 95% interval on the rate."""

    finding: str
    budget: str
    measure: str
    world: str
    hits: int
    draws: int

    @property
    def rate(self) -> float:
        return self.hits / self.draws

    @property
    def interval(self) -> tuple[float, float]:
        lo, hi = wilson(self.hits, self.draws)
        return float(lo), float(hi)

    @property
    def target(self) -> str:
        return {
            "false-positive rate": f"<= {FPR_MAX:.0%}",
            "power": f">= {POWER_MIN:.0%}",
            "coverage": f">= {COVERAGE_MIN:.0%}",
        }[self.measure]

    @property
    def meets(self) -> bool:
        if self.measure == "false-positive rate":
            return self.rate <= FPR_MAX
        if self.measure == "power":
            return self.rate >= POWER_MIN
        return self.rate >= COVERAGE_MIN

    def record(self) -> dict[str, Any]:
        lo, hi = self.interval
        return {
            "finding": self.finding,
            "budget": self.budget,
            "measure": self.measure,
            "world": self.world,
            "rate %": round(100 * self.rate, 2),
            "95% lo": round(100 * lo, 2),
            "95% hi": round(100 * hi, 2),
            "draws": self.draws,
            "target": self.target,
            "meets": self.meets,
        }


def _seed(seed: int, name: str) -> np.random.Generator:
    # each world's draws depend on its own name, so adding a world leaves the others' numbers unchanged
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def fire_rate(rule: Callable[[Any], bool], world: World, draws: int, seed: int = 0) -> int:
    """How many of ``draws`` data sets drawn from ``world`` make ``rule`` fire."""
    if draws < 1:
        raise ArgumentError(f"draws must be >= 1, got {draws!r}")
    rng = _seed(seed, world.name)
    return sum(bool(rule(world.draw(rng))) for _ in range(draws))


def covered(interval: Coverage, draws: int, seed: int = 0) -> int:
    """How many of ``draws`` simulated intervals contain their truth."""
    if draws < 1:
        raise ArgumentError(f"draws must be >= 1, got {draws!r}")
    rng = _seed(seed, interval.name)
    hits = 0
    for _ in range(draws):
        lo, hi, truth = interval.draw(rng)
        hits += bool(math.isfinite(lo) and math.isfinite(hi) and lo <= truth <= hi)
    return hits


def rates(calibration: Calibration, draws: int, seed: int = 0) -> list[Rate]:
    """Every world's false-positive rate or power, and every interval's coverage, of one calibration."""
    out = [
        Rate(
            calibration.finding,
            calibration.budget,
            "power" if w.effect else "false-positive rate",
            w.name,
            fire_rate(calibration.rule, w, draws, seed),
            draws,
        )
        for w in calibration.worlds
    ]
    out += [
        Rate(calibration.finding, calibration.budget, "coverage", c.name, covered(c, draws, seed), draws)
        for c in calibration.coverage
    ]
    return out


def calibrate(keys: Iterable[str] | None = None, *, draws: int = 2000, seed: int = 0) -> list[Rate]:
    """The rates of the calibrations ``keys`` (None: every registered one), ``draws`` data sets per world."""
    chosen = list(CALIBRATIONS) if keys is None else list(keys)
    return [r for key in chosen for r in rates(CALIBRATIONS.find(key), draws, seed)]


def power(calibration: Calibration, draws: int = RUNTIME_DRAWS, seed: int = 0) -> float:
    """The rule's power: the smallest firing rate over the worlds with the paper's effect."""
    return min(fire_rate(calibration.rule, w, draws, seed) / draws for w in calibration.worlds if w.effect)


def status(found: list[Rate]) -> dict[str, str]:
    """Per "finding @ budget": "calibrated" (every rate meets its target), "underpowered" (false-positive
    rates and coverage meet theirs, some power does not: the finding says underpowered there) or "fails"
    (a false-positive rate or a coverage misses its target)."""
    out: dict[str, str] = {}
    for r in found:
        key = f"{r.finding} @ {r.budget}"
        word = "calibrated" if r.meets else ("underpowered" if r.measure == "power" else "fails")
        if out.get(key) != "fails" and not (out.get(key) == "underpowered" and word == "calibrated"):
            out[key] = word
    return out
