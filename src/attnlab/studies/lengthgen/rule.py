"""The paired comparison behind lengthgen's findings (Vasylenko et al. 2025 Table 1 read as a test): a (seeds x rows)
matrix of per-row differences in points of exact match, signed so that the paper's direction is positive; its
rule (a one-sided paired t per comparison, Holm over the family), its null control (labels exchanged in every
second seed), its power (the MDE at the strictest Holm step) and draws of families with no difference, on which
the rule's false-positive rate is simulated. Pure functions of such matrices."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist

import numpy as np

from attnlab.diagnostics.paired import paired_mde, t_cdf
from attnlab.errors import ArgumentError
from attnlab.findings.calibrate import World
from attnlab.findings.stats import holm as adjusted

# Paired learned seeds a comparison needs: at 2, seeds that each generalize fully or fail put both of one map's at
# 100% and both of the other's at 0% one time in 16, where any rule that sees Table 1's gaps fires (5-6% measured);
# at 3 that is one time in 64 per task, under the 2.5% design level.
MIN_SEEDS = 3
# Family-wise level of each finding's one-sided comparisons: 2.5%, a two-sided 5% test read in Table 1's direction,
# which leaves the rule's false-positive rate below 5% with room for the t statistic's departures from normality;
# and the power its MDE is read at.
ALPHA, POWER = 0.025, 0.8


def one_sided_p(delta: np.ndarray) -> float:
    """The one-sided p-value of the rule's t (lengthgen's ``PAIRED_RULE``) for one comparison's (seeds x rows)
    differences: 1 with fewer than two seeds or no positive mean; 0 where the mean is positive and nothing varies."""
    delta = np.asarray(delta, dtype=float)
    seeds, rows = delta.shape
    if seeds < MIN_SEEDS or rows < 1:
        return 1.0
    d, per_row = delta.mean(1), delta.mean(0)
    mean = float(d.mean())
    se_rows = float(per_row.std(ddof=1)) / math.sqrt(rows) if rows > 1 else 0.0
    se = max(float(d.std(ddof=1)) / math.sqrt(seeds), se_rows)
    if mean <= 0:
        return 1.0
    if se == 0:
        return 0.0
    return 1.0 - t_cdf(mean / se, seeds - 1)


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down: which of the hypotheses are rejected at family-wise level ``alpha``
    (``findings.stats.holm``'s adjusted p-values at or below it)."""
    return [p <= alpha for p in adjusted(pvalues)] if len(pvalues) else []


def paired_rule(deltas: Sequence[np.ndarray]) -> bool:
    """``PAIRED_RULE`` on a family of comparisons: some comparison rejects under Holm.

    Its false-positive rate under no difference is simulated with ``draw_no_difference`` and calibrated in
    ``lengthgen.calibration`` at each budget's seeds (``MIN_SEEDS`` and up)."""
    return bool(deltas) and any(holm([one_sided_p(d) for d in deltas]))


def exchanged(delta: np.ndarray) -> np.ndarray:
    """The null control's data: the two maps' labels exchanged in every second seed (the sign of its
    differences flipped)."""
    delta = np.asarray(delta, dtype=float)
    return delta * np.where(np.arange(delta.shape[0]) % 2, -1.0, 1.0)[:, None]


def design_mde(deltas: Sequence[np.ndarray], arm_sd: float) -> float:
    """The smallest mean difference (points) the rule detects with ``POWER`` at its strictest Holm step (one-sided
    ``ALPHA`` / k, k comparisons, i.e. ``paired_mde`` at two-sided 2 ALPHA / k), from S seeds whose scores vary by
    ``arm_sd`` within a map (so a difference of two independent seeds by sqrt(2) arm_sd), its standard error
    floored by the rows'."""
    seeds = min(d.shape[0] for d in deltas)
    if seeds < MIN_SEEDS:
        return math.nan
    se_rows = max(float(np.asarray(d, dtype=float).mean(0).std(ddof=1)) / math.sqrt(d.shape[1]) for d in deltas)
    se = max(math.sqrt(2) * arm_sd / math.sqrt(seeds), se_rows)
    return paired_mde(se * math.sqrt(seeds), seeds, alpha=2 * ALPHA / len(deltas), power=POWER)


def draw_no_difference(
    rng: np.random.Generator, *, seeds: int, multiples: int, rows: int, shape: str = "spread", rho: float = 0.7
) -> list[np.ndarray]:
    """One family of comparisons in which the two maps do not differ: 2 x ``seeds`` models drawn alike, each
    with a quality q (``shape``: "spread" Beta(2, 2), "bimodal" Beta(0.5, 0.5), seeds that generalize or
    not, "all or none" 0 or 1 with probability 1/2 each, "zero" 0 half the time else uniform: the smoke runs'
    spread) and accuracy q^(1 + c) at the c-th
    multiple; each scores the same ``rows`` test rows, whose shared difficulty (a Gaussian copula with
    correlation ``rho``) makes two models right on the same rows. Returns the (seeds x rows) differences
    per multiple, in points."""
    if shape == "spread":
        quality = rng.beta(2.0, 2.0, size=(2, seeds))
    elif shape == "bimodal":
        quality = rng.beta(0.5, 0.5, size=(2, seeds))
    elif shape == "all or none":
        quality = (rng.random((2, seeds)) < 0.5).astype(float)
    elif shape == "zero":
        quality = np.where(rng.random((2, seeds)) < 0.5, 0.0, rng.random((2, seeds)))
    else:
        raise ArgumentError(f"shape must be spread, bimodal, all or none or zero, got {shape!r}")
    normal = NormalDist()
    out = []
    for c in range(multiples):
        accuracy = quality ** (1 + c)
        cut = np.vectorize(lambda a: -np.inf if a <= 0 else np.inf if a >= 1 else normal.inv_cdf(a))(accuracy)
        latent = rho * rng.standard_normal(rows) + math.sqrt(1 - rho * rho) * rng.standard_normal((2, seeds, rows))
        right = (latent < cut[..., None]).astype(float)
        out.append(100.0 * (right[0] - right[1]))
    return out


KAPPA = 20.0  # Beta concentration of a seed's accuracy around Table 1's cell (sd 0.1 at 50%)
RHO = 0.7  # the rows' shared difficulty, as ``draw_no_difference``'s
NULLS = ("spread", "bimodal", "all or none", "zero")


def draw_table1(rng: np.random.Generator, seeds: int, rows: int, cells) -> list[np.ndarray]:
    """One task's differences with Table 1's accuracies (``cells``: (multiple, the map's, softmax's accuracy %)),
    signed in Table 1's direction: each seed's accuracy Beta around the cell (``KAPPA``), the two maps' right answers
    tied by the rows' shared difficulty (``RHO``) as in ``draw_no_difference``."""
    normal = NormalDist()
    out = []
    for _, a_map, a_soft in cells:
        mean = np.clip(np.array([a_map, a_soft]) / 100, 0.005, 0.995)[:, None]
        accuracy = rng.beta(KAPPA * mean, KAPPA * (1 - mean), size=(2, seeds))
        cut = np.vectorize(normal.inv_cdf)(np.clip(accuracy, 1e-9, 1 - 1e-9))
        latent = RHO * rng.standard_normal(rows) + math.sqrt(1 - RHO * RHO) * rng.standard_normal((2, seeds, rows))
        right = (latent < cut[..., None]).astype(float)
        out.append(math.copysign(100.0, a_map - a_soft) * (right[0] - right[1]))
    return out


def paired_worlds(
    cells: Mapping[str, Sequence[tuple[float, float, float]]], seeds: int, rows: int
) -> tuple[World, ...]:
    """The worlds of a family of comparisons (task -> its ``cells``) at ``seeds`` paired seeds and ``rows`` test rows:
    no difference, each of ``NULLS``'s seed shapes, and Table 1's accuracies (``findings.calibrate``)."""

    def null(shape: str):
        return lambda rng: [
            d
            for task in cells.values()
            for d in draw_no_difference(rng, seeds=seeds, multiples=len(task), rows=rows, shape=shape)
        ]

    def effect(rng):
        return [d for task in cells.values() for d in draw_table1(rng, seeds, rows, task)]

    return (
        *(World(f"no difference, {shape} seeds", False, null(shape)) for shape in NULLS),
        World("Table 1's accuracies", True, effect),
    )
