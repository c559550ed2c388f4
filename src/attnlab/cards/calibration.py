"""What the card's labels mean, measured: each card rule (``cards.rules``, the functions the panels call) run on
simulated worlds at a plan's sample sizes, with ``findings.calibrate``.

Per finding, a factory builds the ``Calibration`` from sample sizes; ``register_plans`` registers one per plan
("card ablation @ quick", ...), and the panels call the same factory with the run's own sizes (and softmax's
accuracy, or the prompts' measured spread) to set their MDE's power (``findings.calibrate.power``):

- ablation (Polynomial Concentration §5.4, Fig. 4): without the effect every head subset scores alike (top-, bottom-
  and random-K at one accuracy, softmax at or above it); with it, top-K loses 80 pp at the largest K only
  (Qwen3/Gemma-4 lose 80-100 pp at K >= 20) while random-K loses 10 pp (App. I: random means -8 to -18 pp);
- length (App. C, Fig. 5): without the effect the share moves by the band's edge (up or down) or by Pythia's
  past-window 16.5 pp per doubling; with it, 0 or 1 pp per doubling (the paper's in-window models); per-prompt
  spread 1 pp (Gemma 3 270M's quick card) and 3.5 pp (SmolLM2-135M's), the sd of one prompt's unsafe % at one L;
- recipe ahead (§5.5, Table 3): without the effect every recipe scores alike, or two preserve NIAH together
  (Llama's relu_p4_bauto and relu_p8_bauto); with it, one recipe keeps softmax's accuracy (Gemma's relu_p8_bauto)
  and the others lose 50 pp or more (Qwen3's best cell, -50.5 pp);
- temperature (A Unified Framework for Critical Scaling of Inverse Temperature in Self-Attention, §4.5.2, Table 2):
  the temperature study's pretrained rule and worlds (``studies.temperature.calibration.real_calibration``: i.i.d.
  rows, a model at xi = 1, Table 2's pretrained cell nearest 1 at 1.74) at the plan's novel windows, read past the
  window at the longest n_eval the plan allows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from attnlab.cards import rules
from attnlab.findings.calibrate import Calibration, Coverage, World, register
from attnlab.findings.stats import clopper_pearson
from attnlab.studies.temperature.calibration import real_calibration

EFFECT_LOSS = 0.80  # §5.4: top-K loses 80-100 pp at K >= 20; the smaller end
RANDOM_LOSS = 0.10  # App. I: random-K means lose 8 to 18 pp on the literary suite
SPREADS = (1.0, 3.5)  # pp: one prompt's unsafe % at one L, sd, as measured on Gemma 3 270M and SmolLM2-135M
FLAT_SLOPES = (0.0, 1.0)  # pp per doubling: App. C's in-window models
RECIPE_LOSS = 0.50  # Table 3: Qwen3's best recipe loses 50.5 pp; the others at this or below


def _sweep(rng: np.random.Generator, n: int, ks: Sequence[int], draws: int, rates: Sequence[tuple[float, float]]):
    """One sweep: per K, (top rate, random rate); bottom-K at the random rate."""
    out = []
    for k, (top, random) in zip(ks, rates, strict=True):
        out.append(
            rules.Arms(
                k,
                n,
                int(rng.binomial(n, top)),
                int(rng.binomial(n, random)),
                int(rng.binomial(draws * n, random)),
                draws * n,
            )
        )
    return out


def _ablation_world(name: str, effect: bool, n: int, ks, draws: int, softmax: float, per_k) -> World:
    def draw(rng: np.random.Generator):
        return (int(rng.binomial(n, softmax)), n), _sweep(rng, n, ks, draws, per_k)

    return World(name, effect, draw)


def ablation(budget: str, n: int, ks: Sequence[int], draws: int, softmax: float = 1.0) -> Calibration:
    """The ablation rule (``rules.ablation_rule``) with ``n`` NIAH prompts per cell, K in ``ks``, ``draws`` random
    draws per K and softmax answering a share ``softmax`` of prompts (the paper's NIAH baselines: 200/200)."""
    ks = tuple(int(k) for k in ks)
    worlds = [
        _ablation_world(
            f"every head alike: subsets at {q:.0%}, softmax at {s:.0%}", False, n, ks, draws, s, [(q, q)] * len(ks)
        )
        for s, q in ((softmax, softmax), (softmax, 0.9 * softmax), (softmax, 0.5 * softmax))
    ]
    top = max(0.0, softmax - EFFECT_LOSS)
    random = max(0.0, softmax - RANDOM_LOSS)
    effect = [(random, random)] * (len(ks) - 1) + [(top, random)]
    worlds.append(
        _ablation_world(
            f"top-K loses {EFFECT_LOSS:.0%} at the largest K only, random-K {RANDOM_LOSS:.0%}, softmax {softmax:.0%}",
            True,
            n,
            ks,
            draws,
            softmax,
            effect,
        )
    )
    return Calibration(
        rules.ABLATION_NAME,
        budget,
        rules.ablation_rule,
        rules.ABLATION_RULE,
        f"{n} NIAH prompts per cell, K = {list(ks)}, {draws} random draws per K",
        tuple(worlds),
        accuracy_coverage(n, softmax),
    )


def _length_table(rng: np.random.Generator, x: np.ndarray, prompts: int, slope: float, spread: float, tails: bool):
    noise = rng.standard_t(3, (prompts, len(x))) / np.sqrt(3) if tails else rng.standard_normal((prompts, len(x)))
    return 50 + slope * (x - x[0]) + spread * noise


def _length_world(name: str, effect: bool, x: np.ndarray, prompts: int, slope: float, spread: float) -> World:
    return World(name, effect, lambda rng: (_length_table(rng, x, prompts, slope, spread, False), x))


def _length_coverage(name: str, x: np.ndarray, prompts: int, slope: float, spread: float, tails: bool) -> Coverage:
    def draw(rng: np.random.Generator):
        _, lo, hi = rules.slope_interval(_length_table(rng, x, prompts, slope, spread, tails), x)
        return lo, hi, slope

    return Coverage(name, draw)


def length(budget: str, lengths: Sequence[int], prompts: int, spreads: Sequence[float] = SPREADS) -> Calibration:
    """The flat-in-L rule (``rules.flat_rule``) with ``prompts`` induction prompts at each L of ``lengths`` and a
    per-prompt spread (sd of one prompt's unsafe % at one L, pp) of each of ``spreads``."""
    x = np.log2(np.asarray(lengths, dtype=float))
    worst = max(spreads)
    worlds = [
        _length_world(f"{slope:+g} pp per doubling, spread {worst:g} pp", False, x, prompts, slope, worst)
        for slope in (rules.FLAT_BAND, -rules.FLAT_BAND, rules.PYTHIA_SLOPE)
    ]
    worlds += [
        _length_world(f"flat {slope:g} pp per doubling, spread {s:g} pp", True, x, prompts, slope, s)
        for slope in FLAT_SLOPES
        for s in spreads
    ]
    coverage = tuple(
        _length_coverage(
            f"slope's t-interval, 1 pp per doubling, spread {worst:g} pp{', t3 tails' if tails else ''}",
            x,
            prompts,
            1.0,
            worst,
            tails,
        )
        for tails in (False, True)
    )
    return Calibration(
        rules.LENGTH_NAME,
        budget,
        rules.flat_rule,
        rules.FLAT_RULE,
        f"{prompts} induction prompts at each L = {[int(n) for n in lengths]}; spread {list(spreads)} pp",
        tuple(worlds),
        coverage,
    )


ACCURACY_RATES = (0.02, 0.5, 0.8)  # where Wilson's coverage dips at the card's sizes (85% at n = 8, 92.8% at 40)


def _exact_coverage(name: str, n: int, rate: float) -> Coverage:
    def draw(rng: np.random.Generator):
        lo, hi = clopper_pearson(int(rng.binomial(n, rate)), n)
        return 100 * lo, 100 * hi, 100 * rate

    return Coverage(name, draw)


def accuracy_coverage(n: int, softmax: float) -> tuple[Coverage, ...]:
    """The coverage of the exact interval the card prints beside each cell's NIAH accuracy
    (``panels.exact_intervals``), at ``n`` prompts, at softmax's rate, half of it and Wilson's dips."""
    rates = sorted({round(r, 4) for r in (softmax, 0.5 * softmax, *ACCURACY_RATES)})
    return tuple(_exact_coverage(f"a cell's exact interval at {r:.0%} ({n} prompts)", n, r) for r in rates)


def _recipe_world(name: str, effect: bool, n: int, softmax: float, shares: Sequence[float]) -> World:
    def draw(rng: np.random.Generator):
        counts = [(f"r{i}", int(rng.binomial(n, q)), n) for i, q in enumerate(shares)]
        return (int(rng.binomial(n, softmax)), n), counts

    return World(name, effect, draw)


def recipe(budget: str, n: int, recipes: int, softmax: float = 1.0) -> Calibration:
    """The recipe-ahead rule (``rules.recipe_rule``) with ``recipes`` recipes scored on ``n`` NIAH prompts each."""
    worlds = [
        _recipe_world(f"every recipe at {q:.0%}", False, n, softmax, [q] * recipes)
        for q in (softmax, 0.5 * softmax, 0.1)
    ]
    worlds.append(
        _recipe_world(
            f"two recipes at softmax's {softmax:.0%}, the others {RECIPE_LOSS:.0%} lower",
            False,
            n,
            softmax,
            [softmax, softmax] + [softmax - RECIPE_LOSS] * (recipes - 2),
        )
    )
    worlds.append(
        _recipe_world(
            f"one recipe at softmax's {softmax:.0%}, the others {RECIPE_LOSS:.0%} lower",
            True,
            n,
            softmax,
            [softmax] + [max(0.0, softmax - RECIPE_LOSS)] * (recipes - 1),
        )
    )
    return Calibration(
        rules.RECIPE_NAME,
        budget,
        rules.recipe_rule,
        rules.RECIPE_RULE,
        f"{recipes} recipes on {n} NIAH prompts each",
        tuple(worlds),
        accuracy_coverage(n, softmax),
    )


FRACTIONS = (0.25, 0.5, 0.75, 1.0)  # the panel's rows at n = n_eval x these, as the temperature study's real part


def temperature(budget: str, docs: int, n_eval: int) -> Calibration:
    """The pretrained temperature rule (the temperature study's, ``real_finding``'s) at ``docs`` documents read at
    n = n_eval x ``FRACTIONS``."""
    grid = sorted({max(2, round(f * n_eval)) for f in FRACTIONS})
    return replace(real_calibration(budget, docs, grid), finding=rules.TEMPERATURE_NAME)


def register_plans(plans: Mapping) -> None:
    """Register the ablation, length, recipe and temperature calibrations at each plan's sample sizes
    (``cards.build.PLANS``); temperature at its novel windows read past the window at the plan's longest reach."""
    for name, cfg in plans.items():
        register(ablation(name, cfg.prompts, cfg.ks, cfg.draws))
        register(length(name, cfg.lengths, cfg.length_prompts))
        register(recipe(name, cfg.prompts, len(cfg.recipes)))
        register(temperature(name, cfg.temperature_docs, cfg.past_tokens))
