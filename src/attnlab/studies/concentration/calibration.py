"""What the concentration study's labels mean, measured: each rule of ``rules`` (the functions ``findings`` calls)
run on simulated worlds at a budget's sample sizes, with ``findings.calibrate``.

Per finding a factory builds the ``Calibration`` from sample sizes; ``register_budgets`` registers one per budget
("concentration collapse screen @ smoke", "... @ smoke --model", ...), and ``findings`` calls the same factory
with the run's own sizes to set its MDE's power (``findings.calibrate.power``):

- placement (Polynomial Concentration §5.2, Table 1, App. C; pretrained budgets only, where the study decides it):
  without the effect the model sits between the groups (SmolLM2-135M's 52-67%), one suite just outside a group,
  level with i.i.d. rows (97.7% at this study's key counts) or with Llama on one suite and the unsafe models on
  the others; with it, every suite like Qwen3 (90-94%), Gemma (69-72%) or Llama (18-22%) in window (App. C). Each
  prompt's share varies around its suite's (sd ``SPREAD``); the printed interval's coverage is measured at a
  homogeneous (NIAH-like, 2 pp), a wide (MQAR-like, 20 pp) and a two-cluster spread of prompts;
- collapse screen (§5.5, Table 5 (i)): without the effect the low-safe cells keep 100%, 30% or exactly the 10%
  line of softmax's accuracy; with it, they score 0 (Table 5: five of five at -100 pp) or keep 2.5% of softmax
  (the middle of a near-collapse's 0-5%);
- sufficiency (§5.5, Table 4): without the effect every high-safe cell scores at softmax's rate (softmax against
  itself), or above it; with it, one of them loses 19 pp (Llama relu_p2_b0) while the others keep softmax's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from attnlab.findings.calibrate import Calibration, Coverage, World, register
from attnlab.findings.stats import wilson
from attnlab.studies.concentration import rules

ROWS = 1000  # active rows per prompt and suite (SmolLM2-135M reads ~4,000 at 256 tokens: fewer is harsher)
SPREAD = 0.08  # sd of one prompt's unsafe share around its suite's at 50%: SmolLM2's NIAH ~0.02, MQAR ~0.2
NOISE_SHARE = 0.977  # i.i.d. N(0, 1) rows' unsafe share at the study's key counts (16-256 keys)
NULL_ROWS = 4000  # i.i.d. rows the study draws for its noise reference (``findings.NULL_ROWS``)
# softmax's NIAH accuracy the registered worlds assume: the toy model learns its suite (~100%); SmolLM2-135M
# scores 80% at pad 8 (the pretrained smoke budget); the paper's models 200/200 at pad 128
SOFTMAX = {"toy": 1.0, "pretrained": 0.8}
LOW_CELLS = 2  # low-safe cells per model: Table 5 has two for Gemma and for Pythia, one for Qwen3
HIGH_CELLS = 2  # high-safe cells per model: SmolLM2's relu_p16_b0 and relu_p16_bauto
UNNORMALIZED_CELLS = 4  # the un-normalized recipes of §5.1: the four Wortsman maps


# ---- placement ----


def _shares(rng: np.random.Generator, prompts: int, mean: float, spread: float) -> np.ndarray:
    """Per-prompt unsafe shares around ``mean``: a beta whose sd is ``spread`` at a mean of 50% and shrinks as
    sqrt(mean (1 - mean)) towards 0 or 1, where shares have less room to vary."""
    var = min(4 * spread**2, 0.9) * mean * (1 - mean)
    if var <= 0:
        return np.full(prompts, mean)
    k = mean * (1 - mean) / var - 1
    return rng.beta(mean * k, (1 - mean) * k, prompts)


def _suite(rng: np.random.Generator, shares: np.ndarray) -> rules.Counts:
    active = rng.poisson(ROWS, len(shares)) + 1
    return rules.Counts(rng.binomial(active, shares), active)


def _noise(rng: np.random.Generator, prompts: int) -> rules.Counts:
    # i.i.d. rows have no prompt structure: the study splits NULL_ROWS of them into as many pseudo-prompts
    per = max(NULL_ROWS // max(prompts, 1), 1)
    active = np.full(prompts, per)
    return rules.Counts(rng.binomial(active, NOISE_SHARE), active)


def _placement_world(name: str, effect: bool, prompts: int, levels: Sequence[float], spread: float) -> World:
    def draw(rng: np.random.Generator):
        suites = [_suite(rng, _shares(rng, prompts, level, spread)) for level in levels]
        return suites, _noise(rng, prompts)

    return World(name, effect, draw)


def _placement_coverage(name: str, prompts: int, draw_shares) -> Coverage:
    def draw(rng: np.random.Generator):
        shares, truth = draw_shares(rng)
        _, lo, hi = rules.prompt_interval(*_suite(rng, shares))
        return lo, hi, 100 * truth

    return Coverage(name, draw)


def _spread(level: float, suites: int, width: float) -> list[float]:
    # a suite-to-suite spread of the paper's size (App. C's in-window ranges) around ``level``
    return list(np.linspace(level - width / 2, level + width / 2, suites))


def placement(budget: str, prompts: int, suites: int, spread: float = SPREAD) -> Calibration:
    """The placement rule (``rules.placement_rule``) with ``prompts`` audited prompts on each of ``suites``
    suites, each prompt's share varying with sd ``spread`` around its suite's."""
    worlds = [
        _placement_world(
            "between the groups: every suite at 52-67% (SmolLM2-135M)",
            False,
            prompts,
            _spread(0.595, suites, 0.15),
            spread,
        ),
        _placement_world(
            "one suite just below the unsafe group (58%), the others like Gemma (70%)",
            False,
            prompts,
            [0.58] + [0.70] * (suites - 1),
            spread,
        ),
        _placement_world(
            "one suite just above Llama (34%), the others like Llama (20%)",
            False,
            prompts,
            [0.34] + [0.20] * (suites - 1),
            spread,
        ),
        _placement_world(f"i.i.d. rows: every suite at {NOISE_SHARE:.1%}", False, prompts, [NOISE_SHARE] * suites, 0.0),
        _placement_world(
            "one suite like Llama (20%), the others like Qwen3 (92%)",
            False,
            prompts,
            [0.20] + [0.92] * (suites - 1),
            spread,
        ),
    ]
    worlds += [
        _placement_world(
            f"like {model}, every suite at {lo:.0%}-{hi:.0%}",
            True,
            prompts,
            _spread((lo + hi) / 2, suites, hi - lo),
            spread,
        )
        for model, lo, hi in (
            ("Qwen3 (App. C)", 0.90, 0.94),
            ("Gemma (App. C)", 0.69, 0.72),
            ("Llama (App. C)", 0.18, 0.22),
        )
    ]

    def two_clusters(rng: np.random.Generator):
        high = rng.random(prompts) < 0.3
        return np.where(high, 0.95, 0.55), 0.3 * 0.95 + 0.7 * 0.55

    coverage = (
        _placement_coverage(
            "t-interval over prompts, 60%, sd 2 pp (NIAH-like)",
            prompts,
            lambda rng: (_shares(rng, prompts, 0.60, 0.02), 0.60),
        ),
        _placement_coverage(
            "t-interval over prompts, 65%, sd 20 pp (MQAR-like)",
            prompts,
            lambda rng: (_shares(rng, prompts, 0.65, 0.20), 0.65),
        ),
        _placement_coverage("t-interval over prompts, 30% of prompts at 95%, the rest at 55%", prompts, two_clusters),
    )
    return Calibration(
        rules.PREVALENCE_NAME,
        budget,
        rules.placement_rule,
        rules.PLACEMENT_RULE,
        f"{prompts} prompts on each of {suites} suites, ~{ROWS} active rows each, per-prompt sd {spread:.0%}; "
        f"{NULL_ROWS} i.i.d. rows",
        tuple(worlds),
        coverage,
    )


# ---- collapse screen ----


def _screen_world(name: str, effect: bool, n: int, softmax: float, kept: float, cells: int) -> World:
    def draw(rng: np.random.Generator):
        base = rng.binomial(n, softmax) / n
        return rules.Screen(base, n, tuple(int(k) for k in rng.binomial(n, kept * softmax, cells)))

    return World(name, effect, draw)


def _wilson_coverage(name: str, n: int, rate: float) -> Coverage:
    def draw(rng: np.random.Generator):
        lo, hi = wilson(int(rng.binomial(n, rate)), n)
        return 100 * lo, 100 * hi, 100 * rate

    return Coverage(name, draw)


def collapse(
    budget: str, n: int, softmax: float, cells: int = LOW_CELLS, name: str = rules.COLLAPSE_NAME
) -> Calibration:
    """The collapse screen's rule (``rules.collapse_rule``) with ``n`` scored prompts per cell, ``cells`` screened
    cells and softmax answering a share ``softmax`` of prompts; ``name``: the finding that reads it (the screen's
    low-safe cells, whose paper effect is Table 5's 0 and 2.5% of softmax, or the un-normalized recipes,
    ``rules.UNNORMALIZED_RULE``, whose paper effect is Table 3's -100 pp, so 0 and 1% of softmax)."""
    screen = name == rules.COLLAPSE_NAME
    effects, cells_are = ((0.0, 0.025), "low-safe cells") if screen else ((0.0, 0.01), "un-normalized recipes")
    worlds = [
        _screen_world(f"{cells_are} keep {kept:.0%} of softmax's {softmax:.0%}", False, n, softmax, kept, cells)
        for kept in (1.0, 0.30, rules.COLLAPSE)
    ]
    worlds += [
        _screen_world(f"{cells_are} keep {kept:.1%} of softmax's {softmax:.0%}", True, n, softmax, kept, cells)
        for kept in effects
    ]
    coverage = tuple(
        _wilson_coverage(f"a cell's Wilson interval at {rate:.1%} ({n} prompts)", n, rate)
        for rate in (0.05 * softmax, rules.COLLAPSE * softmax, softmax)
    )
    return Calibration(
        name,
        budget,
        rules.collapse_rule,
        rules.COLLAPSE_RULE if screen else rules.UNNORMALIZED_RULE,
        f"{n} NIAH prompts per cell, {cells} {'low-safe cell(s)' if screen else 'un-normalized recipes'}, softmax at "
        f"{softmax:.0%}",
        tuple(worlds),
        coverage,
    )


# ---- sufficiency ----


def _arms_world(name: str, effect: bool, n: int, softmax: float, rates: Sequence[float]) -> World:
    def draw(rng: np.random.Generator):
        return rules.Arms((int(rng.binomial(n, softmax)), n), tuple((int(rng.binomial(n, q)), n) for q in rates))

    return World(name, effect, draw)


def sufficiency(budget: str, n: int, softmax: float, cells: int = HIGH_CELLS) -> Calibration:
    """The sufficiency rule (``rules.sufficiency_rule``) with ``n`` scored prompts per cell, ``cells`` high-safe
    cells and softmax answering a share ``softmax`` of prompts."""
    drop = rules.HIGH_DROP / 100
    above = min(1.0, softmax + 0.1)
    worlds = [
        _arms_world(f"every high-safe cell at softmax's {softmax:.0%}", False, n, softmax, [softmax] * cells),
        _arms_world(f"8 high-safe cells at softmax's {softmax:.0%}", False, n, softmax, [softmax] * 8),
        _arms_world(f"high-safe cells above softmax ({above:.0%})", False, n, softmax, [above] * cells),
        _arms_world(
            f"one high-safe cell loses {rules.HIGH_DROP:g} pp, the others at softmax's {softmax:.0%}",
            True,
            n,
            softmax,
            [max(0.0, softmax - drop)] + [softmax] * (cells - 1),
        ),
    ]
    return Calibration(
        rules.SUFFICIENCY_NAME,
        budget,
        rules.sufficiency_rule,
        rules.SUFFICIENCY_RULE,
        f"{n} NIAH prompts per cell, {cells} high-safe cell(s), softmax at {softmax:.0%}",
        tuple(worlds),
    )


def register_budgets(toy: Mapping, pretrained: Mapping) -> None:
    """Register each finding's calibration at each budget's sample sizes: the toy budgets (``plan.BUDGETS``) as
    "smoke"/"full", the pretrained ones (``plan.REAL``) as "smoke --model"/"full --model". Placement only at the
    latter: the toy study audits no pretrained model and does not decide it."""
    for kind, plans, suffix in (("toy", toy, ""), ("pretrained", pretrained, " --model")):
        for name, plan in plans.items():
            budget = f"{name}{suffix}"
            register(collapse(budget, plan.prompts, SOFTMAX[kind]))
            register(collapse(budget, plan.prompts, SOFTMAX[kind], UNNORMALIZED_CELLS, rules.UNNORMALIZED_NAME))
            register(sufficiency(budget, plan.prompts, SOFTMAX[kind]))
            if kind == "pretrained":
                register(placement(budget, plan.audit_prompts, len(plan.suites)))
