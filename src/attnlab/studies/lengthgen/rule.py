"""The paired comparison behind lengthgen's findings (Vasylenko et al. 2025 Table 1 read as a test): a (seeds x rows)
matrix of per-row differences in points of exact match, signed so that the paper's direction is positive; its
rule (a one-sided paired t per comparison, Holm over the family), its null control (labels exchanged in every
second seed), its power (the MDE at the strictest Holm step) and draws of families with no difference, on which
the rule's false-positive rate is simulated. Pure functions of such matrices."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from attnlab.diagnostics.paired import paired_mde, t_cdf
from attnlab.errors import ArgumentError

MIN_SEEDS = 2  # paired learned seeds a comparison needs (a t statistic needs a spread)
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
    """Holm's step-down: which of the hypotheses are rejected at family-wise level ``alpha``."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    rejected = [False] * len(pvalues)
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (len(pvalues) - rank):
            break
        rejected[i] = True
    return rejected


def paired_rule(deltas: Sequence[np.ndarray]) -> bool:
    """``PAIRED_RULE`` on a family of comparisons: some comparison rejects under Holm.

    Its false-positive rate under no difference is simulated with ``draw_no_difference`` (<= 5% at 2 and 3
    seeds). One null it cannot hold to 5% at 2 seeds: every seed either solving the task perfectly or not at
    all, each with probability 1/2, puts both of one map's seeds at 100% and both of the other's at 0% with
    probability 1/16; any rule that can see Table 1's Reverse gap at 2 seeds fires there."""
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
    not, "zero" 0 half the time else uniform: the smoke runs' spread) and accuracy q^(1 + c) at the c-th
    multiple; each scores the same ``rows`` test rows, whose shared difficulty (a Gaussian copula with
    correlation ``rho``) makes two models right on the same rows. Returns the (seeds x rows) differences
    per multiple, in points."""
    if shape == "spread":
        quality = rng.beta(2.0, 2.0, size=(2, seeds))
    elif shape == "bimodal":
        quality = rng.beta(0.5, 0.5, size=(2, seeds))
    elif shape == "zero":
        quality = np.where(rng.random((2, seeds)) < 0.5, 0.0, rng.random((2, seeds)))
    else:
        raise ArgumentError(f"shape must be spread, bimodal or zero, got {shape!r}")
    normal = NormalDist()
    out = []
    for c in range(multiples):
        accuracy = quality ** (1 + c)
        cut = np.vectorize(lambda a: -np.inf if a <= 0 else np.inf if a >= 1 else normal.inv_cdf(a))(accuracy)
        latent = rho * rng.standard_normal(rows) + math.sqrt(1 - rho * rho) * rng.standard_normal((2, seeds, rows))
        right = (latent < cut[..., None]).astype(float)
        out.append(100.0 * (right[0] - right[1]))
    return out
