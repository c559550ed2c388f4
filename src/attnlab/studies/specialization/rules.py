"""The specialization study's decision rules as pure functions of per-seed values (Zhu et al. 2026 §3-§5, Tables 1,
4, 8, Fig. 3), with the paper's effects they are sized against: the study's findings and
``specialization.calibration`` call these same functions, the one on a run's paired tables, the other on simulated
pairs. Intervals are Student-t 95% over training seeds, the unit of replication.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from attnlab.diagnostics.paired import paired_interval
from attnlab.findings.verdict import FPR_MAX

# The findings' names (``Finding.name``): what the study declares, the calibrations and the claims table cite.
DEPENDENCE_NAME = "specialization: early dependence on upper Q/K"
GAIN_NAME = "specialization: the intervention lowers GELU's perplexity"
SHRINKAGE_NAME = "specialization: a gated FFN shrinks the gain"
RELIANCE_NAME = "specialization: less reliance on upper Q/K at the end"
DELAY_NAME = "specialization: lower-copy routing on time"
SLOWS_NAME = "specialization: the intervention slows upper Q/K"
PATHWAY_NAME = "specialization: gated FFNs cut the upper residual write"
NAMES = (DEPENDENCE_NAME, GAIN_NAME, SHRINKAGE_NAME, RELIANCE_NAME, DELAY_NAME, SLOWS_NAME, PATHWAY_NAME)

# The paper's effects, relative to its control's perplexity so that they carry to another scale.
# Table 1: 26.7981 -> 26.3014 ppl (-0.4967), 1.85% of the control's perplexity.
PAPER_GAIN = 0.4967 / 26.7981
# Table 4: GELU gains 0.5858 of 26.7382, SwiGLU 0.1075 of 26.2083.
PAPER_SHRINKAGE = 0.5858 / 26.7382 - 0.1075 / 26.2083
# §5.3, Fig. 3D: zeroing upper Q/K at the end adds 146.1 ppl to the control, 17.4 to the intervention.
PAPER_RELIANCE = (146.1 - 17.4) / 26.7981
# §4, Table 5 (App. C), at 3% of training, per architecture: upper-half FFN write RMS, upper logit, upper entropy,
# first-upper write RMS. GELU is GELU-3840 (4 d_model), gelu_matched GELU-2560 (the gated FFNs' hidden width).
PAPER_PATHWAY = {
    "gelu": (0.1205, 1.3128, 0.6277, 0.1262),
    "gelu_matched": (0.0938, 1.1496, 0.6750, 0.0960),
    "swiglu": (0.0542, 0.9491, 0.7423, 0.0469),
    "geglu": (0.0573, 0.9994, 0.7226, 0.0505),
}
# the paper's effects as log ratios gated / reference of the upper write RMS, per (gated, reference): -55.0%, -42.2%
# (SwiGLU against GELU and the width-matched GELU), -52.4%, -38.9% (GEGLU)
PAPER_WRITE_CUTS = {
    (gated, ref): math.log(PAPER_PATHWAY[gated][0] / PAPER_PATHWAY[ref][0])
    for gated in ("swiglu", "geglu")
    for ref in ("gelu", "gelu_matched")
}

# Decision rules, fixed before any number is read. Intervals are Student-t 95% over training seeds (the unit
# of replication); each rule's false-positive rate under its null is simulated in the study's tests.
GAIN_RULE = (
    "the Student-t 95% interval of the paired gains control - intervention of final validation "
    "perplexity, one per seed, lies above 0"
)
SHRINKAGE_RULE = (
    "for every gated FFN, the Student-t 95% interval of GELU's per-seed perplexity gain minus the "
    "gated FFN's (same seed) lies above 0"
)
DEPENDENCE_MIN = 0.10
DEPENDENCE_RULE = (
    "the Student-t 95% interval over seeds of the control's perplexity rise from zeroing upper Q/K, "
    "relative to its perplexity, at the first evaluation from its lower-copy maturity (and from 3% "
    "of training), lies above 10%"
)
RELIANCE_RULE = (
    "the Student-t 95% interval over seeds of the control's minus the intervention's perplexity rise "
    "from zeroing upper Q/K at the final evaluation, relative to the control's perplexity, lies above 0"
)
DELAY_MARGIN = 0.01
DELAY_RULE = (
    "the Student-t 95% interval over seeds of the delay of lower-copy maturity (the intervention's "
    "minus the control's, as a fraction of training) lies below +1% of training"
)
PATHWAY_RULE = (
    "for every gated FFN (SwiGLU, GEGLU) and both references (GELU at 4 d_model, GELU at the gated FFNs' hidden "
    "width), the per-seed log ratio gated / reference of the upper-half FFN write RMS at the 3% evaluation (the "
    "same seed: the same data order) has a mean below 0 by a one-sided paired t-test at 5% (the one-sided 95% "
    "upper bound below 0), on 2 or more pairs; the claim is all four, so it holds only when every test does (an "
    "intersection-union test: its false-positive rate is at most each test's 5%, with no multiplicity correction)"
)
SIGN_FLIPS = (
    "every sign pattern of the paired differences (no effect: each pair's sign is a coin flip), the "
    "rule applied to each; it passes when it holds on more than 5% of them"
)


# --- decision rules: each takes the per-seed values and says whether the claim holds ---


def above(bound: float) -> Callable[[Sequence[float]], bool]:
    """The rule "the Student-t 95% interval of the mean lies above ``bound``" (needs two or more values)."""

    def rule(values: Sequence[float]) -> bool:
        stats = paired_interval(values)
        return bool(stats["n"] >= 2 and stats["lo"] > bound)

    return rule


def below(bound: float) -> Callable[[Sequence[float]], bool]:
    """The rule "the Student-t 95% interval of the mean lies below ``bound``" (needs two or more values)."""

    def rule(values: Sequence[float]) -> bool:
        stats = paired_interval(values)
        return bool(stats["n"] >= 2 and stats["hi"] < bound)

    return rule


def write_cut(comparisons: Sequence[Sequence[float]]) -> bool:
    """PATHWAY_RULE on the per-seed log ratios of each comparison: every one's one-sided paired t-test at 5% says
    its mean is below 0 (``paired_interval`` at level 0.90: its upper bound is the one-sided 95% bound); False with
    no comparison or one with fewer than two finite values."""
    if not len(comparisons):
        return False
    for values in comparisons:
        stats = paired_interval(values, level=0.90)
        if not (stats["n"] >= 2 and stats["hi"] < 0):
            return False
    return True


def sign_flip_share(differences: Sequence[float], rule: Callable[[Sequence[float]], bool]) -> float:
    """The share of the 2^n sign patterns of ``differences`` on which ``rule`` holds: under no effect every
    pattern is as likely as the observed one (the paired randomization null). Beyond 16 pairs, 65,536 patterns
    drawn with a fixed seed."""
    d = np.asarray([x for x in differences if math.isfinite(x)], dtype=float)
    if len(d) <= 16:
        patterns = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    else:
        patterns = np.random.default_rng(0).choice((1.0, -1.0), size=(65_536, len(d)))
    return float(np.mean([rule(d * signs) for signs in patterns]))


def reproduces(values: Sequence[float], rule: Callable[[Sequence[float]], bool]) -> bool:
    """What the label "reproduced" needs of paired values: ``rule`` holds on them and on at most ``FPR_MAX`` of
    their sign patterns (the sign-flip null fails it). The share is computed only where the rule holds."""
    return bool(rule(values) and sign_flip_share(values, rule) <= FPR_MAX)
