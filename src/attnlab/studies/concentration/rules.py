"""The concentration study's decision rules as small pure functions of counts (Polynomial Concentration §5.2, §5.5,
Tables 1, 4, 5, App. C): ``findings`` calls them on a run's tables and ``calibration`` on simulated worlds, so the
rule a label reports is the rule whose error rates were measured.

- placement (§5.2, Table 1, App. C): where a model's unsafe share at p = 2, b = 0 sits among the paper's models,
  per suite, on a Student-t interval over prompts;
- collapse screen (§5.5, Table 5 (i)): each cell with <= 3% of its answering rows measured safe over all heads,
  decided collapsed, preserved or undecided by the Wilson interval of its accuracy against 10% of softmax's;
- sufficiency (§5.5, Table 4): some cell with >= 66% measured safe loses against softmax, by Fisher's exact test
  on the two arms' counts, Holm-corrected over the cells.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from attnlab.diagnostics.paired import t_quantile
from attnlab.findings.stats import fisher_less, holm, wilson


@dataclass(frozen=True)
class Published:
    """One published line of Polynomial Concentration Table 1: ``model``'s unsafe % of active-unsaturated rows
    (S_p >= 1) at b = 0 on ``suite`` at prompt length ``L``, one per degree of ``PUBLISHED_DEGREES`` (None: not
    published there), and the median active-distractor count A_act at p = 2 (None: not published); ``where``: the
    place in the paper; ``note``: what a reader must know to weigh it."""

    model: str
    suite: str
    L: int
    unsafe: tuple[float | None, ...]
    a_act: int | None
    where: str = "Table 1"
    note: str = ""


# The findings' names (``Finding.name``): what the study declares, the calibrations and the claims table cite.
PREVALENCE_NAME = "concentration prevalence"
COLLAPSE_NAME = "concentration collapse screen"
SUFFICIENCY_NAME = "concentration sufficiency"
UNNORMALIZED_NAME = "concentration un-normalized recipes collapse"
BOUND_NAME = "concentration: the bound has no false negatives"
NAMES = (PREVALENCE_NAME, COLLAPSE_NAME, SUFFICIENCY_NAME, UNNORMALIZED_NAME, BOUND_NAME)

PUBLISHED_DEGREES = (2, 4, 8)
_OOD = " (past its 2048-token training length)"
# Polynomial Concentration, Table 1: the unsafe % at b = 0 at the longest context (L = 4096) of its four models on
# induction, copying and MQAR at p = 2, 4, 8 with the median A_act, and Table 1's note: Pythia-1.4b in distribution
# (L = 1024) at p = 2. attnlab's one copy of the table: the placement rule's edges below are two of its cells, and
# the card's comparison page shows it beside the cards.
TABLE_1 = (
    Published("Llama-3.2-1B", "induction", 4096, (19.6, 10.3, 4.7), 2),
    Published("Llama-3.2-1B", "copying", 4096, (30.2, 18.0, 9.6), 3),
    Published("Llama-3.2-1B", "mqar", 4096, (21.4, 11.0, 4.7), 2),
    Published("Qwen3-1.7B", "induction", 4096, (94.0, 79.3, 48.5), 1884),
    Published("Qwen3-1.7B", "copying", 4096, (96.7, 75.5, 36.5), 540),
    Published("Qwen3-1.7B", "mqar", 4096, (93.9, 80.1, 48.5), 1821),
    Published("Gemma-4-E2B", "induction", 4096, (71.3, 56.9, 37.6), 36),
    Published("Gemma-4-E2B", "copying", 4096, (96.1, 80.1, 49.4), 96),
    Published("Gemma-4-E2B", "mqar", 4096, (90.6, 71.6, 41.5), 53),
    Published("Pythia-1.4b", "induction", 4096, (99.2, 98.3, 95.1), 1407, note=_OOD),
    Published("Pythia-1.4b", "copying", 4096, (76.9, 64.6, 51.0), 148, note=_OOD),
    Published("Pythia-1.4b", "mqar", 4096, (95.3, 92.1, 84.6), 1351, note=_OOD),
    Published("Pythia-1.4b", "induction", 1024, (66.0, None, None), None, "Table 1's note", " (in distribution)"),
    Published("Pythia-1.4b", "copying", 1024, (61.7, None, None), None, "Table 1's note", " (in distribution)"),
    Published("Pythia-1.4b", "mqar", 1024, (63.4, None, None), None, "Table 1's note", " (in distribution)"),
)


# ---- placement (§5.2, Table 1, App. C) ----
# The paper's models at p = 2, b = 0, at their own training lengths: Llama-3.2-1B 18-22% on induction over
# L = 256-4096 (App. C) and at most 30.2% on any suite (copying, Table 1); Pythia-1.4b in distribution 61.7-66.0%
# (L = 1024, Table 1's note); Gemma-4-E2B 69-72% flat in window (App. C) and up to 96.1% (Table 1); Qwen3 90-94%
# (App. C) and up to 97.9% at 8B (App. W). The two groups leave 30.2-61.7% empty.
LLAMA_TOP = max(line.unsafe[0] for line in TABLE_1 if line.model.startswith("Llama"))  # 30.2, copying
UNSAFE_FLOOR = min(line.unsafe[0] for line in TABLE_1 if line.L == 1024)  # 61.7, Pythia's copying in distribution
# (upper edge, words): the evidence's placement of a point estimate among the paper's models
PLACES = (
    (18.0, "below every model of the paper (Llama's lowest: 18%)"),
    (LLAMA_TOP, "like Llama (18-30%)"),
    (UNSAFE_FLOOR, "between Llama (<= 30%) and the unsafe models (>= 62%)"),
    (69.0, "like Pythia in distribution (62-66%)"),
    (97.9, "like Qwen3/Gemma (>= 69%)"),
    (math.inf, "above every model of the paper in distribution (Qwen3-8B: 97.9%)"),
)
SIDES = ("llama", "unsafe")  # the two placements that sit with a group of the paper's models

PLACEMENT_RULE = (
    f"on every audited suite the 95% Student-t interval over prompts of the unsafe share at p = 2, b = 0 sits with "
    f"one group of the paper's models, the same on every suite: at or below {LLAMA_TOP:g}% (like Llama, the stated "
    f"exception) or at or above {UNSAFE_FLOOR:g}% (like the three unsafe models) and below the interval of i.i.d. "
    "N(0, 1) rows of the same key counts (not reproduced when a suite sits between the groups, in the other group "
    "or level with those rows; not checked when an interval straddles an edge). The last clause is why i.i.d. rows, "
    "the null, fail it: rows without learned margins are 97-98% unsafe at 256 keys, so an unsafe share level with "
    "them is what the key counts give, not the model's attention"
)


class Counts(NamedTuple):
    """One suite's audit, per prompt: unsafe rows and active rows (p = 2, b = 0)."""

    unsafe: np.ndarray
    active: np.ndarray


def prompt_interval(unsafe: ArrayLike, active: ArrayLike) -> tuple[float, float, float]:
    """The pooled unsafe % of rows and its 95% Student-t interval over prompts: the ratio estimator sum(u) / sum(a)
    with its linearized standard error sqrt(sum (u_i - share a_i)^2 / (n (n - 1))) / mean(a), t with n - 1 degrees
    of freedom. Prompts are the unit (rows of one prompt share its tokens; Polynomial Concentration App. R);
    a percentile bootstrap over 4-20 prompts covers 83-91%, this interval >= 93% (``calibration``). NaN bounds
    with fewer than two prompts with active rows."""
    u, a = np.asarray(unsafe, dtype=float), np.asarray(active, dtype=float)
    u, a = u[a > 0], a[a > 0]
    if len(a) == 0:
        return math.nan, math.nan, math.nan
    share = float(u.sum() / a.sum())
    if len(a) < 2:
        return 100 * share, math.nan, math.nan
    se = math.sqrt(float(((u - share * a) ** 2).sum()) / (len(a) * (len(a) - 1))) / float(a.mean())
    half = t_quantile(0.975, len(a) - 1) * se
    return 100 * share, 100 * max(0.0, share - half), 100 * min(1.0, share + half)


def side(lo: float, hi: float, noise_lo: float) -> str | None:
    """Where one suite's interval [lo, hi] (%) sits: "llama" (at or below LLAMA_TOP), "unsafe" (at or above
    UNSAFE_FLOOR and below ``noise_lo``, the i.i.d. rows' lower bound), "noise" (at or above UNSAFE_FLOOR and
    reaching the i.i.d. rows' interval: not told from rows without learned margins), "between" (strictly between
    the groups), or None when it straddles an edge."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    if hi <= LLAMA_TOP:
        return "llama"
    if lo >= UNSAFE_FLOOR:
        return "unsafe" if hi < noise_lo else "noise"
    if lo > LLAMA_TOP and hi < UNSAFE_FLOOR:
        return "between"
    return None


def placement_outcome(sides: Sequence[str | None]) -> bool | None:
    """PLACEMENT_RULE on the suites' sides: False when a decided suite sits between the groups, level with noise or
    in another group than a second suite; None when no suite says so but one straddles an edge; else True."""
    decided = [s for s in sides if s is not None]
    if any(s not in SIDES for s in decided) or len(set(decided)) > 1:
        return False
    return None if len(decided) < len(sides) or not sides else True


def placement_sides(suites: Sequence[Counts], noise: Counts) -> list[str | None]:
    """Each suite's side, against the i.i.d. rows ``noise``."""
    noise_lo = prompt_interval(*noise)[1]
    return [side(*prompt_interval(*s)[1:], noise_lo) for s in suites]


def placement_rule(data: tuple[Sequence[Counts], Counts]) -> bool:
    """Whether PLACEMENT_RULE fires on (suites, i.i.d. rows)."""
    return placement_outcome(placement_sides(*data)) is True


def place(share: float) -> str:
    """The words placing an unsafe share (%) among the paper's models."""
    return next(words for edge, words in PLACES if share < edge)


# ---- collapse screen (§5.5, Table 5 (i)) ----
LOW_SAFE = 3.0  # % of the answering rows measured safe over all heads at or below which Table 5 sees collapse (5/5)
COLLAPSE = 0.10  # a cell collapses when it keeps at most this share of softmax's accuracy

COLLAPSE_RULE = (
    f"every ReLU cell with <= {LOW_SAFE:g}% of its answering rows measured safe over all heads collapses: the "
    f"Wilson 95% upper bound of its accuracy is at or below {100 * COLLAPSE:g}% of softmax's accuracy (preserved, "
    "so not reproduced, when a cell's lower bound is above that line; undecided otherwise); the null is as many "
    "of the safest ReLU cells under the same rule"
)


class Screen(NamedTuple):
    """The screen's data: softmax's accuracy (a share), prompts per cell and each screened cell's correct count."""

    softmax: float
    n: int
    correct: tuple[int, ...]


def collapse_states(screen: Screen) -> list[int]:
    """Per cell: 1 collapsed (Wilson upper bound <= COLLAPSE x softmax), -1 preserved (lower bound above that
    line), 0 undecided (the interval contains the line)."""
    line = COLLAPSE * screen.softmax
    states = []
    for k in screen.correct:
        lo, hi = wilson(k, screen.n)
        states.append(1 if hi <= line else -1 if lo > line else 0)
    return states


def collapse_outcome(states: Sequence[int]) -> bool | None:
    """COLLAPSE_RULE on the cells' states: False when one is preserved, None when none is but one is undecided (or
    there is no cell), True when all collapsed."""
    if any(s < 0 for s in states):
        return False
    return None if not states or any(s == 0 for s in states) else True


def collapse_rule(screen: Screen) -> bool:
    """Whether COLLAPSE_RULE fires: every screened cell collapsed."""
    return collapse_outcome(collapse_states(screen)) is True


# ---- un-normalized recipes (§5.3, Table 3, App. T) ----
UNNORMALIZED_RULE = (
    "every un-normalized recipe (the four Wortsman maps) collapses: the Wilson 95% upper "
    f"bound of its accuracy is at or below {100 * COLLAPSE:g}% of softmax's accuracy (the collapse screen's line; "
    "preserved, so not reproduced, when a recipe's lower bound is above it); the null is softmax's second half of "
    "the scored prompts screened against its first half's accuracy"
)


# ---- sufficiency (§5.5, Table 4) ----
HIGH_SAFE = 66.0  # Table 4's middle cells: >= 66% measured safe ...
HIGH_DROP = 19.0  # ... yet losing >= 19 pp (Llama relu_p2_b0 -19.0, Qwen3 relu_p8_bauto -100)
ALPHA = 0.05

SUFFICIENCY_RULE = (
    f"some ReLU cell with >= {HIGH_SAFE:g}% of its answering rows measured safe over all heads scores below "
    f"softmax: one-sided Fisher exact test of its correct count against softmax's, Holm-adjusted over those "
    f"cells, p <= {ALPHA:g}"
)


class Arms(NamedTuple):
    """Softmax's (correct, n) and each high-safe cell's (correct, n)."""

    softmax: tuple[int, int]
    cells: tuple[tuple[int, int], ...]


def loss_pvalues(arms: Arms) -> list[float]:
    """Holm-adjusted one-sided Fisher p-values that each cell scores below softmax."""
    if not arms.cells:
        return []
    k0, n0 = arms.softmax
    return holm([fisher_less(int(k), int(n), int(k0), int(n0)) for k, n in arms.cells])


def sufficiency_rule(arms: Arms) -> bool:
    """Whether SUFFICIENCY_RULE fires: some cell's adjusted p-value is at most ALPHA."""
    return any(p <= ALPHA for p in loss_pvalues(arms))
