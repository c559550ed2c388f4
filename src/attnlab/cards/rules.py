"""The card's decision rules as small pure functions of counts and tables: the panels call them on a run's numbers
and ``cards.calibration`` on simulated worlds, so the rule a card prints is the rule whose false-positive rate,
power and coverage were measured.

- ablation (Polynomial Concentration §5.4, App. I): top-K heads below softmax and below the pooled random-K draws,
  each a one-sided Fisher test on counts, Holm over K within each family;
- recipe ahead (§5.3, §5.5): one recipe's NIAH count above every other's, one-sided Fisher, Holm over the others;
- length (App. C, Fig. 5): the per-prompt slopes of unsafe % on log2 L, a t-interval over prompts, read against an
  equivalence band around the paper's in-window flatness.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from attnlab.diagnostics.paired import paired_interval
from attnlab.findings.stats import fisher_less, holm

ALPHA = 0.05  # each family's level: Holm keeps its family-wise error at this rate

# The card's findings' names (``Finding.name``), its calibrations' and the claims tables'; the recipe rule labels
# the swap answer, not a finding of its own.
ABLATION_NAME = "card ablation"
LENGTH_NAME = "card length"
TEMPERATURE_NAME = "card temperature"
RECIPE_NAME = "card recipe ahead"
FINDINGS = (ABLATION_NAME, LENGTH_NAME, TEMPERATURE_NAME)

ABLATION_RULE = (
    "at some K, top-K answers fewer NIAH prompts than softmax and fewer than the pooled random-K draws, each by a "
    "one-sided Fisher exact test on counts, Holm-adjusted over the K values within each family, both adjusted "
    "p <= 0.05"
)

# Polynomial Concentration App. C, Fig. 5: inside their windows Llama, Qwen3 and Gemma-4 move at most 4 pp over
# L = 256-4096, four doublings, so at most 1 pp per doubling; Pythia rises 16.5 pp per doubling past its window.
# The band of +-4 pp per doubling is their whole in-window spread per doubling: it holds a model as flat as theirs
# (1 pp per doubling) with room for the card's few prompts per length, and it lies a quarter of the way to
# Pythia's past-window rise, so a Pythia-like trend is far outside it.
FLAT_BAND = 4.0
PYTHIA_SLOPE = (99 - 66) / 2  # App. C: 66% at L = 1024 to 99% at 4096, past Pythia's 2048-token window
FLAT_RULE = (
    f"the 95% t-interval over prompts of the slope of each prompt's unsafe % on log2 L lies inside +-{FLAT_BAND:g} "
    "pp per doubling (flat, as App. C's in-window models: at most 4 pp over L = 256-4096); outside it: not flat"
)

RECIPE_RULE = (
    "the recipe of highest NIAH accuracy answers more prompts than every other recipe, each by a one-sided Fisher "
    "exact test on counts, Holm-adjusted over the others, every adjusted p <= 0.05"
)


class Arms(NamedTuple):
    """One K of the ablation sweep, as counts of ``n`` NIAH prompts: top-K, bottom-K, and the random-K draws pooled
    (``random`` correct of ``random_n`` answers)."""

    k: int
    n: int
    top: int
    bottom: int
    random: int
    random_n: int


def ablation_pvalues(softmax: tuple[int, int], sweep: Sequence[Arms], arm: str = "top") -> list[tuple[float, float]]:
    """Per K, the Holm-adjusted one-sided Fisher p-values that ``arm`` ("top" or "bottom") answers fewer prompts
    than softmax (``softmax`` = (correct, n)) and fewer than the pooled random draws, each family over the K values."""
    vs_softmax = [fisher_less(getattr(a, arm), a.n, softmax[0], softmax[1]) for a in sweep]
    vs_random = [fisher_less(getattr(a, arm), a.n, a.random, a.random_n) for a in sweep]
    return list(zip(holm(vs_softmax), holm(vs_random), strict=True)) if sweep else []


def ablation_ks(softmax: tuple[int, int], sweep: Sequence[Arms], arm: str = "top") -> list[int]:
    """The K at which ``arm`` meets ABLATION_RULE: both Holm-adjusted p-values <= ALPHA."""
    return [a.k for a, (ps, pr) in zip(sweep, ablation_pvalues(softmax, sweep, arm)) if ps <= ALPHA and pr <= ALPHA]


def ablation_rule(data: tuple[tuple[int, int], Sequence[Arms]]) -> bool:
    """ABLATION_RULE on (softmax counts, sweep), for top-K: Polynomial Concentration §5.4's claim holds."""
    return bool(ablation_ks(*data))


def placement(top_loss: float, random_loss: float) -> str:
    """Where a top-K loss against softmax (pp) places the model among Polynomial Concentration Fig. 4's (NIAH): Qwen3
    and Gemma-4 lose 80-100 pp at top-K, Llama nothing, Pythia's ranking does not discriminate (random-K as bad)."""
    if top_loss >= 80:
        where = "like Qwen3 and Gemma-4 in Fig. 4 (80-100 pp at top-K)"
    elif top_loss <= 5:
        where = "like Llama and the bottom-K in Fig. 4 (no loss)"
    else:
        where = "between Llama (no loss) and Qwen3/Gemma-4 (80-100 pp) in Fig. 4"
    if top_loss > 5 and random_loss >= top_loss - 5:
        where += "; random-K heads cost as much, as Pythia's non-discriminating ranking in Fig. 3"
    return where


class Reading(NamedTuple):
    """The recipe panel's reading: ``ahead`` (the recipe ahead of every other, or None), ``tied`` (the recipes not
    told apart from the leader), ``none`` (every recipe below softmax, or all at 0: none preserves NIAH)."""

    ahead: str | None
    tied: tuple[str, ...]
    none: bool


def recipe_reading(softmax: tuple[int, int], recipes: Sequence[tuple[str, int, int]]) -> Reading:
    """RECIPE_RULE on ``recipes`` = (name, correct, n) in listed order (the first listed leads a tie), and whether
    every recipe answers fewer prompts than softmax (one-sided Fisher, Holm over the recipes) or none answers any."""
    leader = max(recipes, key=lambda r: r[1] / r[2])
    others = [r for r in recipes if r is not leader]
    adjusted = holm([fisher_less(c, n, leader[1], leader[2]) for _, c, n in others]) if others else []
    behind = [p <= ALPHA for p in adjusted]
    below = holm([fisher_less(c, n, softmax[0], softmax[1]) for _, c, n in recipes])
    none = all(p <= ALPHA for p in below) or all(c == 0 for _, c, _ in recipes)
    tied = (leader[0], *(r[0] for r, b in zip(others, behind) if not b))
    ahead = leader[0] if others and all(behind) else None
    return Reading(ahead, tied if ahead is None else (), none)


def recipe_rule(data: tuple[tuple[int, int], Sequence[tuple[str, int, int]]]) -> bool:
    """RECIPE_RULE on (softmax counts, recipe counts): some recipe is ahead of every other."""
    return recipe_reading(*data).ahead is not None


def slopes(unsafe: np.ndarray, log2_lengths: np.ndarray) -> np.ndarray:
    """Each prompt's OLS slope of unsafe % (rows: prompts, columns: lengths; NaN where not read) on log2 L, in pp per
    doubling; NaN for a prompt with fewer than two lengths read."""
    y = np.asarray(unsafe, dtype=float)
    x = np.broadcast_to(np.asarray(log2_lengths, dtype=float), y.shape)
    ok = np.isfinite(y)
    count = ok.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        xm = np.where(ok, x, 0).sum(axis=1) / count
        ym = np.where(ok, y, 0).sum(axis=1) / count
        dx = np.where(ok, x - xm[:, None], 0)
        sxx = (dx * dx).sum(axis=1)
        out = (dx * np.where(ok, y - ym[:, None], 0)).sum(axis=1) / sxx
    return np.where((count >= 2) & (sxx > 0), out, np.nan)


def slope_interval(unsafe: np.ndarray, log2_lengths: np.ndarray) -> tuple[float, float, float]:
    """The mean of the per-prompt slopes (``slopes``) and its 95% t-interval over prompts (Polynomial Concentration
    App. R: the prompt is the unit of replication); NaN ends with fewer than two prompts' slopes."""
    stats = paired_interval(slopes(unsafe, log2_lengths))
    return stats["mean"], stats["lo"], stats["hi"]


def flat_call(lo: float, hi: float, band: float = FLAT_BAND) -> str | None:
    """ "flat" when [lo, hi] lies inside +-band, "not flat" when it lies wholly outside (a rise or a fall beyond the
    band), "undecided" when it straddles an edge; None when the interval could not be computed."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    if -band < lo and hi < band:
        return "flat"
    if lo > band or hi < -band:
        return "not flat"
    return "undecided"


def flat_rule(data: tuple[np.ndarray, np.ndarray]) -> bool:
    """FLAT_RULE on (unsafe % table, log2 L): the slope's interval lies inside the band."""
    _, lo, hi = slope_interval(*data)
    return flat_call(lo, hi) == "flat"
