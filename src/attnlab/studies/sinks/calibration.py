"""The sinks study's rules on simulated worlds (``attnlab.findings.calibrate``), at each budget's seeds and held-out
inputs: how often each rule fires where the claim is false, and how often where it holds as Attention Sinks
Essential reports it.

The rules compare per-seed statistics with fixed thresholds, so what can go wrong is sampling noise near the
threshold. The worlds are drawn at the level of those statistics: a seed's fraction of its ``samples`` held-out
inputs with a sink is binomial around its true fraction; a ReLU seed's BOS mass, a masking loss ratio and a
pretrained layer's median first-token mass carry a relative noise (``NOISE``) around their true values. The
harsh null worlds sit just short of each threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnlab.findings.calibrate import Calibration, World, register
from attnlab.studies.sinks.findings import (
    MASK_TOL,
    NEED,
    NO_SINK,
    RULE_LAYERS,
    RULE_MASK,
    RULE_THM1,
    needs_sink,
    no_sink,
    sink_free,
    sinks_everywhere,
)
from attnlab.studies.sinks.measures import ARCHS, DELTA
from attnlab.studies.sinks.plan import BUDGETS
from attnlab.studies.sinks.real import REAL_NAME, REAL_PLANS, RULE_REAL, SINK_MASS, real_sinks

# Seed-to-seed spread of a measured loss ratio or mass around its true value, relative: generous against the
# study's runs, whose statistics average 1000 held-out inputs.
NOISE = 0.05
# Attention Sinks Essential §4 (Figs. 2-3): a trained softmax model sinks on essentially every input, a ReLU one
# puts next to nothing on BOS; masking BOS costs softmax more than the all-zeros predictor's loss.
SINK_RATE, RELU_MASS, SOFT_RISE, RELU_RISE = 0.99, 0.02, 2.0, 0.001
# A pretrained LM's median head over later layers: SmolLM2 and Gemma 3 read 0.6-0.9 (the demo's runs).
REAL_MASS = 0.6
LAYERS = 28  # later layers read on a 30-layer model (SmolLM2-135M), the first SKIP_LAYERS skipped


@dataclass(frozen=True)
class Seeds:
    """One simulated run of a shape: each softmax seed's fraction of held-out inputs with a sink, and each ReLU
    seed's largest BOS mass before the trigger."""

    soft: np.ndarray
    relu: np.ndarray


def _noisy(rng: np.random.Generator, value: float, size: int) -> np.ndarray:
    return np.clip(value * (1 + NOISE * rng.standard_normal(size)), 0.0, None)


def _seeds(sink: float, relu_mass: float, seeds: int, samples: int):
    def draw(rng: np.random.Generator) -> Seeds:
        return Seeds(rng.binomial(samples, sink, seeds) / samples, _noisy(rng, relu_mass, seeds))

    return draw


def theorem_rule(data: Seeds) -> bool:
    """RULE_THM1/RULE_THM2 as ``findings.finding`` applies it: every softmax seed sinks, no ReLU seed does."""
    return sinks_everywhere(data.soft) and no_sink(data.relu)


def mask_rule(data: tuple[np.ndarray, np.ndarray]) -> bool:
    """RULE_MASK on loss rises in units of the all-zeros loss (softmax seeds, ReLU seeds)."""
    soft, relu = data
    return needs_sink(soft, np.ones_like(soft)) and sink_free(relu, np.ones_like(relu))


def _ratios(soft: float, relu: float, seeds: int):
    return lambda rng: (_noisy(rng, soft, seeds), _noisy(rng, relu, seeds))


def calibrations(budget: str) -> list[Calibration]:
    """The theorem, layer and masking rules at ``budget``'s smallest seed count and its held-out inputs."""
    plan = BUDGETS[budget]
    seeds, n = min(plan.seeds[a] for a in ARCHS), plan.samples
    short = 1 - DELTA - 0.03  # a model that sinks on most inputs, just short of the claim's 1 - DELTA
    sizes = f"{seeds} seed(s) per shape (the budget's fewest), {n} held-out inputs per seed"
    sink_worlds = (
        World("untrained softmax: no sink on any input", False, _seeds(0.0, RELU_MASS, seeds, n)),
        World(
            f"softmax sinks on {short:.0%} of inputs (short of {1 - DELTA:g})",
            False,
            _seeds(short, RELU_MASS, seeds, n),
        ),
        World(f"ReLU with a sink: BOS mass {1.5 * NO_SINK:g}", False, _seeds(SINK_RATE, 1.5 * NO_SINK, seeds, n)),
        World(
            f"the paper's: softmax sinks on {SINK_RATE:.0%} of inputs, ReLU BOS mass {RELU_MASS:g}",
            True,
            _seeds(SINK_RATE, RELU_MASS, seeds, n),
        ),
    )
    return [
        Calibration(
            "sinks: sink at every position (Theorems 1-2)", budget, theorem_rule, RULE_THM1, sizes, sink_worlds
        ),
        Calibration(
            "sinks: a sink head in every layer",
            budget,
            lambda d: sinks_everywhere(d.soft),
            RULE_LAYERS,
            sizes,
            sink_worlds[:2] + sink_worlds[3:],
        ),
        Calibration(
            "sinks: masking BOS",
            budget,
            mask_rule,
            RULE_MASK,
            f"{seeds} seed(s) per arm, loss ratios with {NOISE:.0%} relative noise",
            (
                World(
                    f"masking costs softmax {0.9 * NEED:g} x the all-zeros loss",
                    False,
                    _ratios(0.9 * NEED, RELU_RISE, seeds),
                ),
                World(f"masking costs ReLU {2 * MASK_TOL:g} x it", False, _ratios(SOFT_RISE, 2 * MASK_TOL, seeds)),
                World("the paper's: softmax needs its sink, ReLU does not", True, _ratios(SOFT_RISE, RELU_RISE, seeds)),
            ),
        ),
    ]


def real_calibration(budget: str) -> Calibration:
    """The pretrained-model rule on LAYERS later layers' median first-token masses."""

    def layers(mass: float):
        return lambda rng: _noisy(rng, mass, LAYERS)

    plan = REAL_PLANS[budget]
    return Calibration(
        REAL_NAME,
        f"real {budget}",
        real_sinks,
        RULE_REAL,
        f"{LAYERS} later layers, medians over {plan.documents} documents x {plan.tokens} tokens",
        (
            World("uniform attention over 256 keys", False, layers(1 / 256)),
            World(f"median heads at {0.8 * SINK_MASS:g}, short of {SINK_MASS:g}", False, layers(0.8 * SINK_MASS)),
            World(f"median heads at {REAL_MASS:g}, as SmolLM2 and Gemma 3 read", True, layers(REAL_MASS)),
        ),
    )


CALIBRATIONS = [
    *(register(c) for budget in BUDGETS for c in calibrations(budget)),
    *(register(real_calibration(budget)) for budget in REAL_PLANS),
]
