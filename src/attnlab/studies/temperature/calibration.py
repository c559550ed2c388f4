"""The ``temperature`` study's rules on simulated worlds (``attnlab.findings.calibrate``), at each budget's training
seeds (Hayase & Karakida 2026 §4.5.1-§4.5.2, Table 2, App. A.2).

The rules read per-training-seed estimates, so the worlds draw those: each seed's xi_hat_Lambda, xi_hat_beta,
xi_hat_Lambda past the window and xi*_PPL per window length are normal around the world's values with the
seed-to-seed spreads of ``Spread``; the seed's i.i.d.-row xi_hat_Lambda is normal around where i.i.d. N(0, 1) rows
land at the budget's grid and row counts. Worlds without the effect include i.i.d. rows at Table 2's nanoGPT
xi_hat_beta range (0.35 and 0.45) and the effect's opposite; the worlds with it are Table 2's cells. At run time the
findings call the same factories with the run's seeds and its measured spreads (``observed``).

The pretrained-checkpoint rule (REAL_RULE, §4.5.2) reads per-document bucket sums of log Lambda_n, so its worlds
draw those (``Documents``, ``real_calibration``): i.i.d. rows, a model at xi = 1 (the boundary) and Table 2's
pretrained cell nearest 1 (1.74), at the real part's documents and n-grids (``plan.REAL_PLANS`` read at SmolLM2's
8192-token window; the card's at its plans, ``cards.calibration``). At run time the finding calls the same factory
with its own documents and grid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from attnlab.analyses.temperature import document_interval
from attnlab.findings.calibrate import Calibration, Coverage, World, register
from attnlab.studies.temperature.plan import BUDGETS, REAL_PLANS, real_reading

# real imports findings, which imports this module: the package imports this module first, so findings finds it
# (partly run) in sys.modules and reads it only when a finding is built
from attnlab.studies.temperature.rules import (
    AGREE_NAME,
    AGREE_RULE,
    ARMS,
    EXT,
    PPL_NAME,
    PPL_RULE,
    REAL_EFFECT,
    REAL_NAME,
    REAL_RULE,
    SIDE_NAME,
    SIDE_RULE,
    agree_rule,
    interval,
    ppl_rule,
    real_rule,
    side_rule,
)

# Table 2's nanoGPT cells (SP 25k, SP 100k, OWT 25k, OWT 100k): (xi_hat_beta, xi_hat_Lambda). The worlds with the
# effect take their mean (0.41, 0.58: a gap of 0.17); the i.i.d. worlds sit at the range's ends.
NANOGPT = ((0.40, 0.54), (0.35, 0.52), (0.46, 0.57), (0.42, 0.69))
PAPER_BETA = float(np.mean([b for b, _ in NANOGPT]))
PAPER_LAMBDA = float(np.mean([lam for _, lam in NANOGPT]))
# Table 2's Qwen cells are where xi*_PPL is a perplexity optimum: the one nearest 1 has xi_hat_Lambda 1.74 beside
# xi*_PPL 1.74-2.00 (n_eval = 32768). The trained decoder's nanoGPT side (below 1) is where i.i.d. rows land too.
QWEN_LAMBDA, QWEN_PPL = 1.74, 2.0


@dataclass(frozen=True)
class Spread:
    """Seed-to-seed standard deviations of the per-seed estimates, and where a seed's i.i.d. rows land (mean, sd) on
    the n-grid and past the window."""

    lam: float
    beta: float
    iid: float
    iid_sd: float
    ext: float
    iid_ext: float
    iid_ext_sd: float
    optimum: float


# smoke: the demo record's three training seeds (xi_hat_Lambda sd 0.14, xi_hat_beta 0.03, past the window 0.92,
# xi*_PPL 0.22) and i.i.d. rows measured at the smoke budget's row counts (384 rows per n on the grid: 0.70 +- 0.10;
# 96 per n past the window: 0.57 +- 0.63). full: Table 2's nanoGPT half-IQRs (0.03-0.05, an sd near 0.07), its Qwen
# cells' (up to 0.1) for past the window and xi*_PPL, and i.i.d. rows at the full budget's counts (6912 rows per n:
# 0.67 +- 0.025; 1728 past the window: 0.65 +- 0.14).
SPREADS = {
    "smoke": Spread(lam=0.14, beta=0.03, iid=0.70, iid_sd=0.10, ext=0.92, iid_ext=0.57, iid_ext_sd=0.63, optimum=0.22),
    "full": Spread(lam=0.07, beta=0.03, iid=0.67, iid_sd=0.025, ext=0.15, iid_ext=0.65, iid_ext_sd=0.14, optimum=0.15),
}


def _normal(rng: np.random.Generator, mean: float, sd: float, seeds: int) -> np.ndarray:
    return rng.normal(mean, sd, seeds)


def side_calibration(budget: str, seeds: int, spread: Spread) -> Calibration:
    """SIDE_RULE: without the effect both exponents sit at 1 or above it; with it, at Table 2's nanoGPT mean."""

    def world(lam: float, beta: float):
        return lambda rng: (_normal(rng, lam, spread.lam, seeds), _normal(rng, beta, spread.beta, seeds))

    return Calibration(
        SIDE_NAME,
        budget,
        lambda d: side_rule(*d),
        SIDE_RULE,
        f"{seeds} training seeds",
        (
            World("both exponents at 1", False, world(1.0, 1.0)),
            World("the effect's opposite: both at 1.3", False, world(1.3, 1.3)),
            World(
                f"Table 2's nanoGPT mean: xi_Lambda {PAPER_LAMBDA:.2f}, xi_beta {PAPER_BETA:.2f}",
                True,
                world(PAPER_LAMBDA, PAPER_BETA),
            ),
        ),
        (_t_coverage("xi_hat_Lambda's interval over training seeds", PAPER_LAMBDA, spread.lam, seeds),),
    )


def agreement_calibration(budget: str, seeds: int, spread: Spread) -> Calibration:
    """AGREE_RULE: without the effect the trained scores are i.i.d. rows (at xi_hat_beta 0.35 and 0.45, Table 2's
    range) or farther from the multipliers than i.i.d. rows; with it, Table 2's nanoGPT mean gap."""

    def world(lam: float | None, beta: float):
        def draw(rng):
            mean, sd = (spread.iid, spread.iid_sd) if lam is None else (lam, spread.lam)
            return (
                _normal(rng, mean, sd, seeds),
                _normal(rng, beta, spread.beta, seeds),
                _normal(rng, spread.iid, spread.iid_sd, seeds),
            )

        return draw

    return Calibration(
        AGREE_NAME,
        budget,
        lambda d: agree_rule(*d),
        AGREE_RULE,
        f"{seeds} training seeds",
        (
            World("i.i.d. rows as the trained scores, xi_beta 0.35", False, world(None, 0.35)),
            World("i.i.d. rows as the trained scores, xi_beta 0.45", False, world(None, 0.45)),
            World(
                "the effect's opposite: xi_Lambda 0.3 farther from xi_beta than i.i.d. rows",
                False,
                world(spread.iid + 0.3, PAPER_BETA),
            ),
            World(
                f"Table 2's nanoGPT mean: xi_Lambda {PAPER_LAMBDA:.2f}, xi_beta {PAPER_BETA:.2f}",
                True,
                world(PAPER_LAMBDA, PAPER_BETA),
            ),
        ),
        (
            _t_coverage(
                "xi_hat_Lambda - xi_hat_beta's interval",
                PAPER_LAMBDA - PAPER_BETA,
                math.hypot(spread.lam, spread.beta),
                seeds,
            ),
        ),
    )


def ppl_calibration(budget: str, seeds: int, lengths: int, spread: Spread) -> Calibration:
    """PPL_RULE at ``lengths`` window lengths past training: without the effect xi_hat_Lambda past the window sits
    at 1, is i.i.d. rows (beside xi*_PPL below 1, where i.i.d. rows land) or lies on the other side; with it,
    Table 2's Qwen cell nearest 1 (the cells where xi*_PPL is a perplexity optimum)."""

    def world(ext: float | None, optimum: float):
        def draw(rng):
            mean, sd = (spread.iid_ext, spread.iid_ext_sd) if ext is None else (ext, spread.ext)
            return (
                _normal(rng, mean, sd, seeds),
                [_normal(rng, optimum, spread.optimum, seeds) for _ in range(lengths)],
                _normal(rng, spread.iid_ext, spread.iid_ext_sd, seeds),
            )

        return draw

    return Calibration(
        PPL_NAME,
        budget,
        lambda d: ppl_rule(*d),
        PPL_RULE,
        f"{seeds} training seeds, {lengths} window lengths past training",
        (
            World("xi_Lambda past the window at 1, xi*_PPL 0.5", False, world(1.0, 0.5)),
            World("i.i.d. rows as the trained scores, xi*_PPL 0.5", False, world(None, 0.5)),
            World("the effect's opposite: xi_Lambda 0.69, xi*_PPL 2", False, world(0.69, QWEN_PPL)),
            World(
                f"Table 2's Qwen cell nearest 1: xi_Lambda {QWEN_LAMBDA:g}, xi*_PPL {QWEN_PPL:g}",
                True,
                world(QWEN_LAMBDA, QWEN_PPL),
            ),
        ),
        (_t_coverage("xi_hat_Lambda past the window's interval", QWEN_LAMBDA, spread.ext, seeds),),
    )


def _t_coverage(name: str, truth: float, sd: float, seeds: int) -> Coverage:
    def draw(rng):
        return (*interval(rng.normal(truth, sd, seeds)), truth)

    return Coverage(f"{name}, {seeds} seeds", draw)


def observed(table: pd.DataFrame, budget: str) -> Spread:
    """The run's own spreads from its per-seed table (columns arm, estimate names), each falling back to
    ``budget``'s where the run cannot give it (fewer than two seeds)."""

    def pick(arm: str, col: str, how: str) -> float:
        part = table.loc[table["arm"] == arm]
        values = part[col].to_numpy(float) if col in part else np.array([])
        values = values[np.isfinite(values)]
        if len(values) < 2:
            return math.nan
        return float(values.mean() if how == "mean" else values.std(ddof=1))

    optima = [c for c in table.columns if str(c).startswith("xi*_PPL")]
    optimum = [pick("trained", c, "sd") for c in optima]
    found = {
        "lam": pick("trained", "xi_hat_Lambda", "sd"),
        "beta": pick("trained", "xi_hat_beta", "sd"),
        "iid": pick(ARMS[2], "xi_hat_Lambda", "mean"),
        "iid_sd": pick(ARMS[2], "xi_hat_Lambda", "sd"),
        "ext": pick("trained", EXT, "sd"),
        "iid_ext": pick(ARMS[2], EXT, "mean"),
        "iid_ext_sd": pick(ARMS[2], EXT, "sd"),
        "optimum": float(np.nanmax(optimum)) if optimum and np.isfinite(optimum).any() else math.nan,
    }
    fallback = SPREADS[budget]
    return replace(fallback, **{k: v for k, v in found.items() if math.isfinite(v)})


REAL_WINDOW = 8192  # SmolLM2-135M's training window (the model ``attnlab fetch smollm2`` gives): the budgets' n_eval
# i.i.d. N(0, 1) rows (``findings.iid_rows``, 12000 per n) at n_eval x {1/4, 1/2, 3/4, 1}: xi_hat_Lambda 0.66 +- 0.04
# at n_eval 1024, 0.77 +- 0.09 at 10240, 0.57 +- 0.10 at 16384; the highest is taken. log Lambda_n's sd over rows: 1.04.
IID_LAMBDA = 0.77
IID_SD = 1.04


@dataclass(frozen=True)
class Documents:
    """How a model's documents differ (an assumption of the pretrained worlds). Each document d has its own exponent
    xi + slope x z_d and level a_d (sd ``level``); its bucket mean of log Lambda_n at n is a_d + xi_d log log n plus
    noise of sd ``noise``, over ``rows`` rows (layers x heads) less a share of exact ties drawn uniform up to
    ``ties``, so the documents weigh unequally in the pooled bucket means. ``tails``: z_d and the noise Student-t
    with 3 degrees of freedom (scaled to unit variance) rather than normal.

    Measured on SmolLM2-135M's quick card (4 documents of the bundled novel, n = 256 .. 1024, 30 x 9 heads): its pooled
    bucket means lie off their line by 0.045 (sd, 2 df), so one document's by about 0.045 x sqrt(4) = 0.09; the
    bootstrap's half-IQR of 0.25 over the documents makes one document's slope vary by 0.25 / 0.674 x sqrt(4 / 3) x
    sqrt(4) = 0.86 on that grid, of which a noise of 0.10 explains 0.10 / sqrt(0.028) = 0.59, leaving about 0.63
    (0.65 here) to the document's exponent. Ties were 1 row in 4320; 2% is a harsher spread of weights. The level's
    spread, which matters only through those weights, is not measured."""

    noise: float = 0.10
    slope: float = 0.65
    level: float = 0.3
    rows: int = 270
    ties: float = 0.02
    tails: bool = False


def _unit(rng: np.random.Generator, tails: bool, size) -> np.ndarray:
    return rng.standard_t(3, size) / math.sqrt(3) if tails else rng.standard_normal(size)


def _documents(rng: np.random.Generator, grid: np.ndarray, docs: int, xi: float, spread: Documents):
    t = np.log(np.log(grid))
    counts = spread.rows - rng.binomial(spread.rows, rng.uniform(0, spread.ties, (docs, 1)), (docs, len(t)))
    own = xi + spread.slope * _unit(rng, spread.tails, (docs, 1))
    means = rng.normal(0, spread.level, (docs, 1)) + own * t + spread.noise * _unit(rng, spread.tails, (docs, len(t)))
    return grid, counts * means, counts


def _iid_documents(rng: np.random.Generator, grid: np.ndarray, docs: int, rows: int):
    # the null's documents are a split of i.i.d. rows: no document differs from another but by its rows' noise
    counts = np.full((docs, len(grid)), rows)
    means = IID_LAMBDA * np.log(np.log(grid))
    return grid, counts * means + np.sqrt(counts) * IID_SD * rng.standard_normal(counts.shape), counts


def _document_coverage(name: str, grid: np.ndarray, docs: int, xi: float, spread: Documents) -> Coverage:
    def draw(rng):
        return (*document_interval(*_documents(rng, grid, docs, xi, spread))[1:], xi)

    return Coverage(f"{name}, {docs} documents", draw)


def real_calibration(budget: str, docs: int, grid: Sequence[float], spread: Documents = Documents()) -> Calibration:
    """REAL_RULE at ``docs`` documents read at n in ``grid``: without the effect i.i.d. rows (the finding's null,
    ``findings.iid_real``) and a model at xi = 1 exactly, its documents spread as ``spread`` says (normal, and
    Student-t tails); with it, Table 2's pretrained cell nearest 1. Coverage at that cell, normal and t-tailed."""
    n = np.asarray(sorted(grid), dtype=float)
    tailed = replace(spread, tails=True)
    effect = 1 + REAL_EFFECT

    def world(xi: float, shape: Documents):
        return lambda rng: _documents(rng, n, docs, xi, shape)

    return Calibration(
        REAL_NAME,
        budget,
        real_rule,
        REAL_RULE,
        f"{docs} documents, n = {[int(k) for k in n]}, {spread.rows} rows per document and n",
        (
            World(f"i.i.d. rows at xi {IID_LAMBDA:g}", False, lambda rng: _iid_documents(rng, n, docs, spread.rows)),
            World("documents at xi = 1", False, world(1.0, spread)),
            World("documents at xi = 1, t3 tails", False, world(1.0, tailed)),
            World(f"Table 2's pretrained cell nearest 1: xi {effect:g}", True, world(effect, spread)),
        ),
        (
            _document_coverage(f"xi_hat_Lambda's interval at xi {effect:g}", n, docs, effect, spread),
            _document_coverage(f"xi_hat_Lambda's interval at xi {effect:g}, t3 tails", n, docs, effect, tailed),
        ),
    )


def calibrations(budget: str) -> list[Calibration]:
    """The three trained-decoder findings at ``budget``'s training seeds and window lengths past training."""
    plan = BUDGETS[budget]
    lengths = sum(n > plan.context for n in plan.sweep_lengths)
    spread = SPREADS[budget]
    return [
        side_calibration(budget, plan.train_seeds, spread),
        agreement_calibration(budget, plan.train_seeds, spread),
        ppl_calibration(budget, plan.train_seeds, lengths, spread),
    ]


def real_calibrations() -> list[Calibration]:
    """The pretrained finding at each real budget: its documents, read past SmolLM2's window as the budget reads
    it (``plan.real_reading``)."""
    return [
        real_calibration(budget, plan.docs, real_reading(plan, REAL_WINDOW, True)[1])
        for budget, plan in REAL_PLANS.items()
    ]


CALIBRATIONS = [register(c) for budget in BUDGETS for c in calibrations(budget)]
CALIBRATIONS += [register(c) for c in real_calibrations()]
