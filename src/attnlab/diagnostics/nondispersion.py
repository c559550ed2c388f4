"""Non-dispersion of alpha-entmax against softmax, checked on synthetic rows.

Vasylenko et al. 2025 (Long-Context Generalization with Sparse Attention) §3.2-§3.3, App. C and D.1-D.2: Lemma 2,
Prop. 1 and Prop. 3, stated with their closed forms in ``nondispersion_theory`` (re-exported here).

Predictions come from the paper's formulas (``nondispersion_theory``); measurements from attnlab's own row maps
(``rowmaps.get``) in float64. ``theory_checks`` sets one against the other on a grid and says, row by row, whether
each holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import torch

from attnlab import rowmaps
from attnlab.diagnostics.nondispersion_theory import (
    _alpha,
    _count,
    _positive,
    _prop3_rate,
    bounded_logits,
    lemma1_bmax,
    lemma2_gap,
    lemma2_support,
    prop3_limit,
    prop3_predicted_gap,
    prop3_range,
    prop3_sequences,
    softmax_entropy_floor,
    softmax_required_gap,
    softmax_weight_bounds,
    two_level_logits,
    two_level_threshold,
    two_level_weights,
)
from attnlab.errors import ArgumentError
from attnlab.rowmaps.registry import RowMap

__all__ = [
    "ALPHAS",
    "EPS",
    "LENGTHS",
    "bounded_logits",
    "lemma1_bmax",
    "lemma2_gap",
    "lemma2_support",
    "prop1_rows",
    "prop3_gap",
    "prop3_limit",
    "prop3_predicted_gap",
    "prop3_range",
    "prop3_sequences",
    "rowmap_for",
    "softmax_entropy_floor",
    "softmax_required_gap",
    "softmax_weight_bounds",
    "theory_checks",
    "two_level_logits",
    "two_level_threshold",
    "two_level_weights",
    "weight_tolerance",
]

EPS = torch.finfo(torch.float64).eps
LENGTHS = (2**4, 2**8, 2**12, 2**16)
ALPHAS = (1.25, 1.5, 2.0, 3.0)


def rowmap_for(alpha: float) -> RowMap:
    """attnlab's registered row map for alpha: softmax at 1, alpha-entmax above (Vasylenko et al. 2025 §2.2)."""
    alpha = _alpha(alpha, softmax=True)
    return rowmaps.get("softmax" if alpha == 1 else f"entmax_a{alpha!r}")


def _profile(w: torch.Tensor) -> dict[str, float]:
    entropy = float(-torch.special.xlogy(w, w).sum())
    n = w.shape[-1]
    return {
        "support": int((w > 0).sum()),
        "max_weight": float(w.max()),
        "min_weight": float(w.min()),
        "entropy": entropy,
        "entropy_norm": entropy / math.log(n) if n > 1 else math.nan,
    }


def prop1_rows(
    lengths: Sequence[int] = LENGTHS,
    alphas: Sequence[float] = (1.5,),
    k: int = 2,
    spread: float = 4.0,
    theta: float = 1.0,
    beta: float = 0.5,
) -> pd.DataFrame:
    """Support, max and min weight, entropy and entropy / log n of the rows Prop. 1 (ii)-(iii) speaks of, one
    record per map, logits and n (Vasylenko et al. 2025 Prop. 1, §3.2, App. C). Columns: map, alpha, logits, n,
    k (top tokens; NaN for the bounded rows), support, max_weight, min_weight, entropy, entropy_norm.

    ``logits``: "bounded" is softmax(bounded_logits(n, spread) / theta), part (ii); "two-level" is alpha-entmax
    of k tokens over n - k at Delta = 2 / (alpha-1), part (iii) for fixed k; "sublinear" the same with
    k = floor(n^beta), part (iii)'s growing support. Delta is twice lemma2_gap(1, alpha), hence above
    lemma2_gap(k, alpha) for every k.
    """
    lengths = _lengths(lengths)
    _count("k", k, 1)
    theta = _positive("theta", theta)
    if not (isinstance(beta, (int, float)) and 0 < beta < 1):
        raise ArgumentError(f"beta (support growth n^beta) must be in (0, 1), got {beta!r}")
    if k >= lengths[0]:
        raise ArgumentError(f"k must be below every length, got k={k} and length {lengths[0]}")
    softmax = rowmap_for(1.0)
    records = [
        {
            "map": "softmax",
            "alpha": 1.0,
            "logits": "bounded",
            "n": n,
            "k": math.nan,
            **_profile(softmax(bounded_logits(n, spread) / theta)),
        }
        for n in lengths
    ]
    for alpha in alphas:
        entmax, delta = rowmap_for(alpha), 2 * lemma2_gap(1, alpha)
        for n in lengths:
            for logits, top in (("two-level", k), ("sublinear", math.floor(n**beta))):
                records.append(
                    {
                        "map": entmax.name,
                        "alpha": float(alpha),
                        "logits": logits,
                        "n": n,
                        "k": top,
                        **_profile(entmax(two_level_logits(n, top, delta))),
                    }
                )
    return pd.DataFrame(records)


def _last_token_output(v: torch.Tensor, rowmap: RowMap) -> torch.Tensor:
    # One attention layer with identity projections, as in the proof: the last token queries every token.
    return rowmap(v @ v[-1]) @ v


def prop3_gap(n: int, alpha: float, phi: float, b: float, d: int = 2) -> float:
    """||v_n^(1) - v*_{n+1}^(1)||_1 measured: the L1 distance between the last tokens' outputs of one attention
    layer (identity projections, attnlab's row map for alpha) on prop3_sequences (Vasylenko et al. 2025 Prop. 3,
    App. D.2 eq. 57, 70-73)."""
    v, v_star = prop3_sequences(n, phi, b, d)
    rowmap = rowmap_for(alpha)
    return float((_last_token_output(v, rowmap) - _last_token_output(v_star, rowmap)).abs().sum())


def _lengths(lengths: Sequence[int]) -> list[int]:
    lengths = sorted({_count("length", n, 16) for n in lengths})
    if not lengths:
        raise ArgumentError("lengths must name at least one length (an integer >= 16)")
    return lengths


def weight_tolerance(n: int, alpha: float) -> float:
    """How far float64 alpha-entmax weights of an n-key row may sit from the exact ones, summed over the row:
    n s delta for s = 1/(alpha-1) >= 1, n delta^s for s < 1 (alpha > 2), at least 1e-9; delta = 16 eps is a
    threshold error in x units. Each weight is r^s of a residual r <= 1 whose threshold carries delta: for s >= 1
    it moves by at most s delta, for s < 1 by up to delta^s, the slope being unbounded at the threshold
    (rowmaps.entmax's module doc). Softmax (alpha = 1) counts as s = 1."""
    alpha = _alpha(alpha, softmax=True)
    s = 1.0 / (alpha - 1) if alpha > 1 else 1.0
    delta = 16 * EPS
    return max(1e-9, n * (s * delta if s >= 1 else delta**s))


def _error(relation: str, predicted: float, measured: float) -> float:
    if relation == "==":
        return abs(measured - predicted)
    if relation == "<=":
        return max(0.0, measured - predicted)
    if relation == ">=":
        return max(0.0, predicted - measured)
    # Strict relations (">" and "<") state a sign, which no tolerance can rescue.
    return 0.0 if (measured > predicted if relation == ">" else measured < predicted) else math.inf


def _row(
    statement: str,
    setting: str,
    relation: str,
    predicted: float,
    measured: float,
    tolerance: float,
    n: int,
    alpha: float,
    error: float | None = None,
) -> dict[str, object]:
    """One check; ``error`` overrides the one measured and predicted give (a whole row's worst deviation)."""
    error = _error(relation, predicted, measured) if error is None else error
    return {
        "statement": statement,
        "setting": setting,
        "n": n,
        "alpha": alpha,
        "relation": relation,
        "predicted": float(predicted),
        "measured": float(measured),
        "error": error,
        "tolerance": tolerance,
        "holds": bool(error <= tolerance),
    }


def _lemma2_checks(lengths: list[int], alphas: Sequence[float]) -> list[dict[str, object]]:
    rows = []
    for alpha in alphas:
        rowmap = rowmap_for(alpha)
        for n in (lengths[0], lengths[-1]):
            for k in (1, 4):
                for factor in (0.99, 1.01):
                    delta = factor * lemma2_gap(k, alpha)
                    w = rowmap(two_level_logits(n, k, delta))
                    p_top, p_low = two_level_weights(n, k, delta, alpha)
                    exact = torch.full((n,), p_low, dtype=torch.float64)
                    exact[:k] = p_top
                    setting = f"n={n} k={k} alpha={alpha:g} Delta={delta:.6g} ({factor:g} x gap)"
                    rows.append(
                        _row(
                            "Lemma 2 (i): support is k iff Delta >= k^-(alpha-1)/(alpha-1)",
                            setting,
                            "==",
                            lemma2_support(n, k, delta, alpha),
                            int((w > 0).sum()),
                            0,
                            n,
                            alpha,
                        )
                    )
                    rows.append(
                        _row(
                            "Lemma 2 (i): top weight (1/k above the gap, eq. 75-78 below; max error over the row)",
                            setting,
                            "==",
                            p_top,
                            float(w[0]),
                            weight_tolerance(n, alpha),
                            n,
                            alpha,
                            error=float((w - exact).abs().max()),
                        )
                    )
    softmax, k, c = rowmap_for(1.0), 4, 0.5
    for n in lengths:
        delta = softmax_required_gap(n, k, c)
        mass = float(softmax(two_level_logits(n, k, delta))[:k].sum())
        rows.append(
            _row(
                "Lemma 2 (ii): softmax top-k mass = c at Delta = ln((n-k)/k c/(1-c))",
                f"n={n} k={k} c={c:g} theta=1 Delta={delta:.6g}",
                "==",
                c,
                mass,
                1e-12,
                n,
                1.0,
            )
        )
    return rows


def _prop1_checks(lengths: list[int], alphas: Sequence[float]) -> list[dict[str, object]]:
    # Prop. 1 (i) extends a row of n0 keys; at least to 2 n0, so that something is appended.
    rows, n0, n_max = [], 16, max(lengths[-1], 32)
    spread, k, beta = 4.0, 2, 0.5
    table = prop1_rows(lengths, alphas, k=k, spread=spread, beta=beta)
    # (i) retention: extend a dense two-level row of n0 keys to n_max keys just below, then just above, b_max.
    softmax = rowmap_for(1.0)
    for alpha in alphas:
        rowmap, delta = rowmap_for(alpha), 0.5 * lemma2_gap(k, alpha)
        z = two_level_logits(n0, k, delta)
        b_max = lemma1_bmax(n0, k, delta, alpha)
        setting = f"n={n0} -> N={n_max} k={k} alpha={alpha:g} Delta={delta:.6g} b_max={b_max:.6g}"
        for side, shift, relation in (
            ("at b_max - 1e-3: old weights unchanged", -1e-3, "=="),
            ("at b_max + 1e-3: old weights change", 1e-3, ">"),
        ):
            extended = torch.cat([z, torch.full((n_max - n0,), b_max + shift, dtype=torch.float64)])
            change = float((rowmap(z) - rowmap(extended)[:n0]).abs().max())
            tolerance = weight_tolerance(n_max, alpha) if relation == "==" else 0.0
            rows.append(
                _row(
                    f"Prop. 1 (i) / Lemma 1: keys appended {side}",
                    setting,
                    relation,
                    0.0,
                    change,
                    tolerance,
                    n_max,
                    alpha,
                )
            )
    z = bounded_logits(n0, spread)
    rise = float((softmax(torch.cat([z, bounded_logits(n_max, spread)[n0:]]))[:n0] - softmax(z)).max())
    rows.append(
        _row(
            "Prop. 1 (i): softmax leaks, every old weight drops when keys are appended",
            f"n={n0} -> N={n_max} bounded logits in [0, {spread:g})",
            "<",
            0.0,
            rise,
            0.0,
            n_max,
            1.0,
        )
    )
    # (ii) softmax on bounded logits.
    for r in table[table.logits == "bounded"].itertuples():
        low, high = softmax_weight_bounds(r.n, spread)
        setting = f"n={r.n} bounded logits in [0, {spread:g}) theta=1"
        rows.append(
            _row(
                "Prop. 1 (ii): softmax max weight <= e^Delta / n (eq. 45)",
                setting,
                "<=",
                high,
                r.max_weight,
                1e-15,
                r.n,
                1.0,
            )
        )
        rows.append(
            _row(
                "Prop. 1 (ii): softmax min weight >= e^-Delta / n (eq. 45)",
                setting,
                ">=",
                low,
                r.min_weight,
                1e-15,
                r.n,
                1.0,
            )
        )
        rows.append(
            _row(
                "Prop. 1 (ii): softmax entropy >= log n - Delta, H/log n -> 1 (eq. 46)",
                setting,
                ">=",
                softmax_entropy_floor(r.n, spread),
                r.entropy,
                1e-12,
                r.n,
                1.0,
            )
        )
    # (iii) alpha-entmax on two-level logits above the gap.
    for r in table[table.logits == "two-level"].itertuples():
        setting = f"n={r.n} k={r.k:.0f} alpha={r.alpha:g} Delta={2 * lemma2_gap(1, r.alpha):.6g}"
        rows.append(
            _row("Prop. 1 (iii): entmax support stays k (eq. 47)", setting, "==", r.k, r.support, 0, r.n, r.alpha)
        )
        rows.append(
            _row(
                "Prop. 1 (iii): entmax max weight stays 1/k (eq. 47)",
                setting,
                "==",
                1 / r.k,
                r.max_weight,
                1e-12,
                r.n,
                r.alpha,
            )
        )
        rows.append(
            _row(
                "Prop. 1 (iii): entmax entropy stays log k, H/log n -> 0 (eq. 48-49)",
                setting,
                "==",
                math.log(r.k),
                r.entropy,
                1e-12,
                r.n,
                r.alpha,
            )
        )
    for r in table[table.logits == "sublinear"].itertuples():
        setting = f"n={r.n} k=floor(n^{beta:g})={r.k:.0f} alpha={r.alpha:g}"
        rows.append(
            _row(
                "Prop. 1 (iii): entmax H/log n <= beta for support n^beta (eq. 50-51)",
                setting,
                "<=",
                beta,
                r.entropy_norm,
                1e-12,
                r.n,
                r.alpha,
            )
        )
    return rows


def _prop3_checks(lengths: list[int], alphas: Sequence[float]) -> list[dict[str, object]]:
    # The paper's example (alpha = 2, phi = 0.5, b = 0, d = 1) and softmax on the same inputs; then eq. 74's
    # general construction (d = 2, b = 0) at the middle of the allowed phi - b for each alpha.
    cases = [(1.0, 0.5, 0.0, 1), (2.0, 0.5, 0.0, 1)]
    cases += [(alpha, sum(prop3_range(alpha)) / 2, 0.0, 2) for alpha in alphas]
    rows = []
    for alpha, phi, b, d in cases:
        setting = f"alpha={alpha:g} phi={phi:.6g} b={b:g} d={d}"
        for n in lengths:
            rows.append(
                _row(
                    "Prop. 3: L1 gap of the last outputs = (q - p_n)||v_bar - v_a||_1 (eq. 73, 79)",
                    f"n={n} {setting}",
                    "==",
                    prop3_predicted_gap(n, alpha, phi, b, d),
                    prop3_gap(n, alpha, phi, b, d),
                    weight_tolerance(n + 1, alpha),
                    n,
                    alpha,
                )
            )
        n = lengths[-1]
        limit = prop3_limit(alpha, phi, b, d)
        statement = (
            "Prop. 3: softmax gap -> 0, within e^Delta/(n-1)||v_bar - v_a||_1 (collapse)"
            if alpha == 1
            else "Prop. 3: entmax gap -> (1-p*)||v_bar - v_a||_1 > 0 (eq. 82; 0.354 in eq. 67)"
        )
        rows.append(
            _row(
                statement,
                f"n={n} {setting}",
                "==",
                limit,
                prop3_gap(n, alpha, phi, b, d),
                _prop3_rate(n, alpha, phi, b, d) + weight_tolerance(n + 1, alpha),
                n,
                alpha,
            )
        )
    return rows


def theory_checks(lengths: Sequence[int] = LENGTHS, alphas: Sequence[float] = ALPHAS) -> pd.DataFrame:
    """Lemma 2, Prop. 1 and Prop. 3 of Vasylenko et al. 2025 (§3.2-§3.3, App. C, D.1-D.2) measured on synthetic
    float64 rows with attnlab's row maps, one row per check.

    Columns: statement (the claim, with its lemma / proposition and equation), setting (n, k, alpha, Delta...),
    n, alpha (1 = softmax), relation (==, <=, >=, or strict < / >), predicted (the paper's value or bound),
    measured, error (|measured - predicted| for ==, the violation for <= / >=, inf for a strict relation that
    fails), tolerance (float64 resolution, or the convergence rate for the limits), holds (error <= tolerance).

    Lemma 2 runs at the smallest and largest length, k in {1, 4}, Delta at 0.99 and 1.01 times its gap; the
    other checks at every length (integers >= 16). ``alphas`` are the alpha-entmax maps (each > 1).

    Prop. 3's limit rows compare the gap at the largest length with its limit within the rate eq. 79 allows,
    which shrinks as n^-(alpha-1): they tell a collapsed gap from the limit only while that rate is below the
    limit (at 2^16: 0.53 against 0.82 for alpha = 1.25, far tighter for larger alpha).
    """
    lengths = _lengths(lengths)
    alphas = [_alpha(alpha, softmax=False) for alpha in alphas]
    if not alphas:
        raise ArgumentError("alphas must name at least one alpha > 1")
    rows = _lemma2_checks(lengths, alphas) + _prop1_checks(lengths, alphas) + _prop3_checks(lengths, alphas)
    return pd.DataFrame(rows)
