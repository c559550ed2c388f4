"""Non-dispersion of alpha-entmax against softmax, checked on synthetic rows.

Vasylenko et al. 2025 (Long-Context Generalization with Sparse Attention) §3.2-§3.3, App. C and D.1-D.2:

- Lemma 2 (App. C): two-level logits, k tokens at M and n - k at m = M - Delta. alpha-entmax gives the k top
  tokens 1/k each and the rest 0 iff Delta >= k^-(alpha-1) / (alpha-1) (eq. 32), with threshold
  tau = (alpha-1) M - k^-(alpha-1) (eq. 29); softmax needs Delta / theta >= ln((n-k)/k * c/(1-c)) to put mass c
  on them (eq. 22).
- Proposition 1 (§3.2, proof in App. C): (i) appending keys at or below tau / (alpha-1) leaves alpha-entmax's
  weights unchanged (via Lemma 1, App. D.1), while softmax's always drop; (ii) on logits in [m, M] every softmax
  weight lies in [e^-Delta/theta / n, e^Delta/theta / n] (eq. 45), so H >= log n - Delta/theta and H / log n -> 1;
  (iii) on two-level logits above Lemma 2's gap alpha-entmax keeps support k, max weight 1/k and entropy log k
  for every n (eq. 47-49), and H / log n <= beta when k <= n^beta (eq. 50-51).
- Proposition 3 (App. D.2): sequences [v, v_a] and [v, v_a, v_a] give last-token outputs whose L1 distance
  is (q - p_n) ||v_bar - v_a||_1 (eq. 73; p_n, q the mass on v_a in each), which tends to
  (1 - p*) ||v_bar - v_a||_1 > 0 under alpha-entmax, p* = ((alpha-1)(phi-b))^(1/(alpha-1)) (eq. 82; the limit
  is 0.5 sqrt(0.5) = 0.354 in the paper's example, eq. 67), and to 0 under softmax.

Predictions come from the paper's formulas; measurements from attnlab's own row maps (``rowmaps.get``) in
float64. ``theory_checks`` sets one against the other on a grid and says, row by row, whether each holds.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import pandas as pd
import torch

from .. import rowmaps
from ..rowmaps.registry import RowMap

EPS = torch.finfo(torch.float64).eps
LENGTHS = (2**4, 2**8, 2**12, 2**16)
ALPHAS = (1.25, 1.5, 2.0, 3.0)


def _count(name: str, value: int, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _alpha(alpha: float, *, softmax: bool) -> float:
    number = not isinstance(alpha, bool) and isinstance(alpha, (int, float)) and math.isfinite(alpha)
    if not (number and (alpha >= 1 if softmax else alpha > 1)):
        allowed = "alpha >= 1 (1 is softmax)" if softmax else "alpha > 1 (alpha-entmax; softmax has no such bound)"
        raise ValueError(f"alpha must be a finite number with {allowed}, got {alpha!r}")
    return float(alpha)


def _two_level(n: int, k: int, delta: float) -> tuple[int, int, float]:
    n, k = _count("n", n, 2), _count("k", k, 1)
    if k >= n:
        raise ValueError(f"k (top tokens) must be below n (all tokens), got k={k}, n={n}")
    return n, k, _positive("delta (M - m)", delta)


def rowmap_for(alpha: float) -> RowMap:
    """attnlab's registered row map for alpha: softmax at 1, alpha-entmax above (Vasylenko et al. 2025 §2.2)."""
    alpha = _alpha(alpha, softmax=True)
    return rowmaps.get("softmax" if alpha == 1 else f"entmax_a{alpha!r}")


def lemma2_gap(k: int, alpha: float) -> float:
    """k^-(alpha-1) / (alpha-1): the least Delta = M - m at which alpha-entmax gives the k top tokens of two-level
    logits all the weight, whatever n (Vasylenko et al. 2025 Lemma 2 (i), App. C eq. 32)."""
    _count("k", k, 1)
    alpha = _alpha(alpha, softmax=False)
    return k ** (1 - alpha) / (alpha - 1)


def two_level_threshold(k: int, alpha: float, top: float = 0.0) -> float:
    """tau = (alpha-1) M - k^-(alpha-1), alpha-entmax's threshold on two-level logits with k tokens at M = ``top``
    once Delta >= lemma2_gap(k, alpha) (Vasylenko et al. 2025 Lemma 2 (i), App. C eq. 29)."""
    _count("k", k, 1)
    alpha = _alpha(alpha, softmax=False)
    return (alpha - 1) * top - k ** (1 - alpha)


def lemma2_support(n: int, k: int, delta: float, alpha: float) -> int:
    """alpha-entmax's support on two-level logits: k when Delta >= lemma2_gap(k, alpha), else all n, the n - k
    low tokens sharing one value (Vasylenko et al. 2025 Lemma 2 (i), App. C eq. 25-32)."""
    n, k, delta = _two_level(n, k, delta)
    return k if delta >= lemma2_gap(k, alpha) else n


def two_level_logits(n: int, k: int, delta: float, top: float = 0.0) -> torch.Tensor:
    """The float64 row of Lemma 2: k tokens at M = ``top`` first, then n - k at m = M - Delta
    (Vasylenko et al. 2025 Lemma 2, App. C)."""
    n, k, delta = _two_level(n, k, delta)
    z = torch.full((n,), top - delta, dtype=torch.float64)
    z[:k] = top
    return z


def two_level_weights(n: int, k: int, delta: float, alpha: float) -> tuple[float, float]:
    """(p_M, p_m): the weight of each top and each low token of two-level logits (Vasylenko et al. 2025 Lemma 2,
    App. C).

    alpha = 1: softmax at temperature 1 (eq. 34; pass Delta / theta for another). alpha > 1 with Delta >= lemma2_gap: (1/k, 0), eq. 33. Below the gap every token
    is in the support and eq. 75-78, written for k = 1 in App. D.2, give for any k
    p_M^(alpha-1) - p_m^(alpha-1) = (alpha-1) Delta with k p_M + (n-k) p_m = 1, solved here for p_m by bisection
    to the last float (the left side falls from k^-(alpha-1) - (alpha-1) Delta > 0 at p_m = 0 to
    -(alpha-1) Delta < 0 at p_m = 1/n). Solving for p_m rather than p_M keeps p_m's relative precision
    when it is tiny, near the gap.
    """
    n, k, delta = _two_level(n, k, delta)
    alpha = _alpha(alpha, softmax=True)
    if alpha == 1:
        # exp(-Delta) instead of exp(Delta): no overflow for large gaps.
        p_top = 1 / (k + (n - k) * math.exp(-delta))
        return p_top, p_top * math.exp(-delta)
    if delta >= lemma2_gap(k, alpha):
        return 1.0 / k, 0.0
    a = alpha - 1

    def excess(p_m: float) -> float:
        return ((1 - (n - k) * p_m) / k) ** a - p_m**a - a * delta

    lo, hi = 0.0, 1.0 / n
    while lo < (mid := (lo + hi) / 2) < hi:
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    p_m = (lo + hi) / 2
    return (1 - (n - k) * p_m) / k, p_m


def lemma1_bmax(n: int, k: int, delta: float, alpha: float, top: float = 0.0) -> float:
    """b_max = tau(z) / (alpha-1) for the two-level row z: keys appended at or below it get no weight and leave
    z's alpha-entmax weights unchanged (Vasylenko et al. 2025 Lemma 1, App. D.1 eq. 54; used by Prop. 1 (i),
    App. C eq. 42). tau = (alpha-1) M - p_M^(alpha-1) (App. D.2 eq. 76) holds in both of Lemma 2's regimes."""
    alpha = _alpha(alpha, softmax=False)
    p_top, _ = two_level_weights(n, k, delta, alpha)
    return top - p_top ** (alpha - 1) / (alpha - 1)


def softmax_required_gap(n: int, k: int, c: float, theta: float = 1.0) -> float:
    """Delta = theta ln((n-k)/k * c/(1-c)): the logit gap at which softmax(z / theta) puts mass exactly c on the
    k top tokens of two-level logits, growing as log n (Vasylenko et al. 2025 Lemma 2 (ii), App. C eq. 22, 41).
    Negative when even equal logits give the top tokens more than c."""
    _count("n", n, 2)
    _count("k", k, 1)
    if k >= n:
        raise ValueError(f"k (top tokens) must be below n (all tokens), got k={k}, n={n}")
    if not (isinstance(c, (int, float)) and 0 < c < 1):
        raise ValueError(f"c (the mass on the top tokens) must be in (0, 1), got {c!r}")
    return _positive("theta", theta) * math.log((n - k) / k * c / (1 - c))


def bounded_logits(n: int, spread: float) -> torch.Tensor:
    """z_1..z_n = spread * frac(i g), g = (sqrt 5 - 1) / 2: a fixed bounded logit sequence in [0, spread)
    whose prefixes are the rows of growing length that Prop. 1 (ii) speaks of (Vasylenko et al. 2025 §3.2,
    Def. 1). A Weyl sequence rather than seeded noise: z_{1:n} is the same prefix for every n and fills the
    interval evenly."""
    _count("n", n, 1)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return _positive("spread", spread) * torch.frac(i * ((math.sqrt(5) - 1) / 2))


def softmax_weight_bounds(n: int, spread: float, theta: float = 1.0) -> tuple[float, float]:
    """(e^(-Delta/theta) / n, e^(Delta/theta) / n): the bounds on every softmax(z_{1:n} / theta) weight for logits
    within an interval of width Delta = ``spread`` (Vasylenko et al. 2025 Prop. 1 (ii), App. C eq. 45)."""
    ratio = _positive("spread", spread) / _positive("theta", theta)
    return math.exp(-ratio) / _count("n", n, 1), math.exp(ratio) / n


def softmax_entropy_floor(n: int, spread: float, theta: float = 1.0) -> float:
    """log n - Delta/theta: softmax's entropy on such logits is at least this, every weight being at most
    e^(Delta/theta) / n (eq. 45), so H / log n >= 1 - Delta / (theta log n) -> 1 (Vasylenko et al. 2025
    Prop. 1 (ii), App. C eq. 46)."""
    return math.log(_count("n", n, 1)) - _positive("spread", spread) / _positive("theta", theta)


def _profile(w: torch.Tensor) -> dict[str, float]:
    entropy = float(-torch.special.xlogy(w, w).sum())
    n = w.shape[-1]
    return {"support": int((w > 0).sum()), "max_weight": float(w.max()), "min_weight": float(w.min()),
            "entropy": entropy, "entropy_norm": entropy / math.log(n) if n > 1 else math.nan}


def prop1_rows(lengths: Sequence[int] = LENGTHS, alphas: Sequence[float] = (1.5,), k: int = 2,
               spread: float = 4.0, theta: float = 1.0, beta: float = 0.5) -> pd.DataFrame:
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
        raise ValueError(f"beta (support growth n^beta) must be in (0, 1), got {beta!r}")
    if k >= lengths[0]:
        raise ValueError(f"k must be below every length, got k={k} and length {lengths[0]}")
    softmax = rowmap_for(1.0)
    records = [{"map": "softmax", "alpha": 1.0, "logits": "bounded", "n": n, "k": math.nan,
                **_profile(softmax(bounded_logits(n, spread) / theta))} for n in lengths]
    for alpha in alphas:
        entmax, delta = rowmap_for(alpha), 2 * lemma2_gap(1, alpha)
        for n in lengths:
            for logits, top in (("two-level", k), ("sublinear", math.floor(n**beta))):
                records.append({"map": entmax.name, "alpha": float(alpha), "logits": logits, "n": n, "k": top,
                                **_profile(entmax(two_level_logits(n, top, delta)))})
    return pd.DataFrame(records)


def prop3_sequences(n: int, phi: float, b: float, d: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """v^(0) = [v, v_a] (n x d) and v*^(0) = [v, v_a, v_a] ((n+1) x d) with v_a^T v_a = phi and v_a^T v_i = b
    (Vasylenko et al. 2025 Prop. 3, App. D.2 eq. 56, 60-61). d = 2: v_a = sqrt(phi) e1,
    v_i = b / sqrt(phi) e1 + e2 (eq. 83-86); d = 1: v_a = sqrt(phi), v_i = b / sqrt(phi) (the paper's
    example, eq. 62-67, takes phi = 0.5, b = 0)."""
    _count("n", n, 2)
    _prop3_inputs(phi, b, d)
    root = math.sqrt(phi)
    v_a = torch.tensor([root, 0.0][:d], dtype=torch.float64)
    v_i = torch.tensor([b / root, 1.0][:d], dtype=torch.float64)
    v = torch.cat([v_i.expand(n - 1, d), v_a[None]])
    return v, torch.cat([v, v_a[None]])


def _prop3_inputs(phi: float, b: float, d: int) -> None:
    _positive("phi (v_a^T v_a)", phi)
    if isinstance(b, bool) or not (isinstance(b, (int, float)) and math.isfinite(b) and b < phi):
        raise ValueError(f"b (v_a^T v_i) must be a finite number below phi = {phi:g}, got {b!r}")
    if isinstance(d, bool) or d not in (1, 2):
        raise ValueError(f"d must be 1 or 2 (the paper's two constructions), got {d!r}")


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


def _prop3_spread(phi: float, b: float, d: int) -> float:
    """||v_bar - v_a||_1 for prop3_sequences (eq. 86)."""
    return abs(b - phi) / math.sqrt(phi) + (1.0 if d == 2 else 0.0)


def prop3_predicted_gap(n: int, alpha: float, phi: float, b: float, d: int = 2) -> float:
    """(q - p_n) ||v_bar - v_a||_1 (Vasylenko et al. 2025 Prop. 3, App. D.2 eq. 72-73): p_n is the weight of the
    single top token of [b, ..., b, phi] and q the mass on the two top tokens of [b, ..., b, phi, phi], both from
    two_level_weights (Lemma 2). Under alpha-entmax in eq. 74's range q = 1 (eq. 69) and p_n solves eq. 79;
    under softmax both follow eq. 34."""
    _prop3_inputs(phi, b, d)
    delta = phi - b
    p_n, _ = two_level_weights(n, 1, delta, alpha)
    q = 2 * two_level_weights(n + 1, 2, delta, alpha)[0]
    return (q - p_n) * _prop3_spread(phi, b, d)


def prop3_range(alpha: float) -> tuple[float, float]:
    """[2^-(alpha-1) / (alpha-1), 1 / (alpha-1)): the phi - b for which [b.., phi] stays dense and [b.., phi, phi]
    is sparse as n grows (Vasylenko et al. 2025 Prop. 3, App. D.2 eq. 74); the upper end is excluded."""
    return lemma2_gap(2, alpha), lemma2_gap(1, alpha)


def prop3_limit(alpha: float, phi: float, b: float, d: int = 2) -> float:
    """lim_n ||v_n^(1) - v*_{n+1}^(1)||_1: (1 - p*) ||v_bar - v_a||_1 with p* = ((alpha-1)(phi-b))^(1/(alpha-1))
    for alpha-entmax (Vasylenko et al. 2025 Prop. 3, App. D.2 eq. 73, 82; 0.5 sqrt(0.5) = 0.354 in eq. 67), and
    0 for softmax (alpha = 1: collapse, Barbero et al. 2024). alpha > 1 needs phi - b in prop3_range(alpha)."""
    _prop3_inputs(phi, b, d)
    if _alpha(alpha, softmax=True) == 1:
        return 0.0
    low, high = prop3_range(alpha)
    if not low <= phi - b < high:
        raise ValueError(f"phi - b must lie in [{low:.6g}, {high:.6g}) for alpha={alpha:g} (eq. 74: dense "
                         f"without the repeat, sparse with it), got {phi - b:.6g}")
    p_star = ((alpha - 1) * (phi - b)) ** (1 / (alpha - 1))
    return (1 - p_star) * _prop3_spread(phi, b, d)


def _prop3_rate(n: int, alpha: float, phi: float, b: float, d: int) -> float:
    """How far the gap at n may be from its limit, from eq. 79: the low tokens' weights shrink as 1/n.

    softmax: the gap itself, at most e^Delta / (n-1) ||v_bar - v_a||_1 (eq. 34). alpha-entmax: with x = p_n^(a),
    y = p*^(a), a = alpha - 1, x - y = p_b^a <= ((1-p*)/(n-1))^a =: e; p_n - p* = x^(1/a) - y^(1/a) is at most
    e / a for a <= 1 (mean value theorem, x <= 1) and e^(1/a) for a > 1 (x^(1/a) is subadditive).
    """
    spread = _prop3_spread(phi, b, d)
    if alpha == 1:
        return math.exp(phi - b) / (n - 1) * spread
    a = alpha - 1
    e = ((1 - ((alpha - 1) * (phi - b)) ** (1 / a)) / (n - 1)) ** a
    return (e / a if a <= 1 else e ** (1 / a)) * spread


def _lengths(lengths: Sequence[int]) -> list[int]:
    lengths = sorted({_count("length", n, 16) for n in lengths})
    if not lengths:
        raise ValueError("lengths must name at least one length (an integer >= 16)")
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


def _row(statement: str, setting: str, relation: str, predicted: float, measured: float, tolerance: float,
         n: int, alpha: float, error: float | None = None) -> dict:
    """One check; ``error`` overrides the one measured and predicted give (a whole row's worst deviation)."""
    error = _error(relation, predicted, measured) if error is None else error
    return {"statement": statement, "setting": setting, "n": n, "alpha": alpha, "relation": relation,
            "predicted": float(predicted), "measured": float(measured), "error": error,
            "tolerance": tolerance, "holds": bool(error <= tolerance)}


def _lemma2_checks(lengths: list[int], alphas: Sequence[float]) -> list[dict]:
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
                    rows.append(_row("Lemma 2 (i): support is k iff Delta >= k^-(alpha-1)/(alpha-1)", setting, "==",
                                     lemma2_support(n, k, delta, alpha), int((w > 0).sum()), 0, n, alpha))
                    rows.append(_row("Lemma 2 (i): top weight (1/k above the gap, eq. 75-78 below; max error "
                                     "over the row)", setting, "==", p_top, float(w[0]), weight_tolerance(n, alpha),
                                     n, alpha, error=float((w - exact).abs().max())))
    softmax, k, c = rowmap_for(1.0), 4, 0.5
    for n in lengths:
        delta = softmax_required_gap(n, k, c)
        mass = float(softmax(two_level_logits(n, k, delta))[:k].sum())
        rows.append(_row("Lemma 2 (ii): softmax top-k mass = c at Delta = ln((n-k)/k c/(1-c))",
                         f"n={n} k={k} c={c:g} theta=1 Delta={delta:.6g}", "==", c, mass, 1e-12, n, 1.0))
    return rows


def _prop1_checks(lengths: list[int], alphas: Sequence[float]) -> list[dict]:
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
        for side, shift, relation in (("at b_max - 1e-3: old weights unchanged", -1e-3, "=="),
                                      ("at b_max + 1e-3: old weights change", 1e-3, ">")):
            extended = torch.cat([z, torch.full((n_max - n0,), b_max + shift, dtype=torch.float64)])
            change = float((rowmap(z) - rowmap(extended)[:n0]).abs().max())
            tolerance = weight_tolerance(n_max, alpha) if relation == "==" else 0.0
            rows.append(_row(f"Prop. 1 (i) / Lemma 1: keys appended {side}", setting, relation, 0.0, change,
                             tolerance, n_max, alpha))
    z = bounded_logits(n0, spread)
    rise = float((softmax(torch.cat([z, bounded_logits(n_max, spread)[n0:]]))[:n0] - softmax(z)).max())
    rows.append(_row("Prop. 1 (i): softmax leaks, every old weight drops when keys are appended",
                     f"n={n0} -> N={n_max} bounded logits in [0, {spread:g})", "<", 0.0, rise, 0.0, n_max, 1.0))
    # (ii) softmax on bounded logits.
    for r in table[table.logits == "bounded"].itertuples():
        low, high = softmax_weight_bounds(r.n, spread)
        setting = f"n={r.n} bounded logits in [0, {spread:g}) theta=1"
        rows.append(_row("Prop. 1 (ii): softmax max weight <= e^Delta / n (eq. 45)", setting, "<=", high,
                         r.max_weight, 1e-15, r.n, 1.0))
        rows.append(_row("Prop. 1 (ii): softmax min weight >= e^-Delta / n (eq. 45)", setting, ">=", low,
                         r.min_weight, 1e-15, r.n, 1.0))
        rows.append(_row("Prop. 1 (ii): softmax entropy >= log n - Delta, H/log n -> 1 (eq. 46)", setting, ">=",
                         softmax_entropy_floor(r.n, spread), r.entropy, 1e-12, r.n, 1.0))
    # (iii) alpha-entmax on two-level logits above the gap.
    for r in table[table.logits == "two-level"].itertuples():
        setting = f"n={r.n} k={r.k:.0f} alpha={r.alpha:g} Delta={2 * lemma2_gap(1, r.alpha):.6g}"
        rows.append(_row("Prop. 1 (iii): entmax support stays k (eq. 47)", setting, "==", r.k, r.support, 0,
                         r.n, r.alpha))
        rows.append(_row("Prop. 1 (iii): entmax max weight stays 1/k (eq. 47)", setting, "==", 1 / r.k,
                         r.max_weight, 1e-12, r.n, r.alpha))
        rows.append(_row("Prop. 1 (iii): entmax entropy stays log k, H/log n -> 0 (eq. 48-49)", setting, "==",
                         math.log(r.k), r.entropy, 1e-12, r.n, r.alpha))
    for r in table[table.logits == "sublinear"].itertuples():
        setting = f"n={r.n} k=floor(n^{beta:g})={r.k:.0f} alpha={r.alpha:g}"
        rows.append(_row("Prop. 1 (iii): entmax H/log n <= beta for support n^beta (eq. 50-51)", setting, "<=",
                         beta, r.entropy_norm, 1e-12, r.n, r.alpha))
    return rows


def _prop3_checks(lengths: list[int], alphas: Sequence[float]) -> list[dict]:
    # The paper's example (alpha = 2, phi = 0.5, b = 0, d = 1) and softmax on the same inputs; then eq. 74's
    # general construction (d = 2, b = 0) at the middle of the allowed phi - b for each alpha.
    cases = [(1.0, 0.5, 0.0, 1), (2.0, 0.5, 0.0, 1)]
    cases += [(alpha, sum(prop3_range(alpha)) / 2, 0.0, 2) for alpha in alphas]
    rows = []
    for alpha, phi, b, d in cases:
        setting = f"alpha={alpha:g} phi={phi:.6g} b={b:g} d={d}"
        for n in lengths:
            rows.append(_row("Prop. 3: L1 gap of the last outputs = (q - p_n)||v_bar - v_a||_1 (eq. 73, 79)",
                             f"n={n} {setting}", "==", prop3_predicted_gap(n, alpha, phi, b, d),
                             prop3_gap(n, alpha, phi, b, d), weight_tolerance(n + 1, alpha), n, alpha))
        n = lengths[-1]
        limit = prop3_limit(alpha, phi, b, d)
        statement = ("Prop. 3: softmax gap -> 0, within e^Delta/(n-1)||v_bar - v_a||_1 (collapse)" if alpha == 1
                     else "Prop. 3: entmax gap -> (1-p*)||v_bar - v_a||_1 > 0 (eq. 82; 0.354 in eq. 67)")
        rows.append(_row(statement, f"n={n} {setting}", "==", limit, prop3_gap(n, alpha, phi, b, d),
                         _prop3_rate(n, alpha, phi, b, d) + weight_tolerance(n + 1, alpha), n, alpha))
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
        raise ValueError("alphas must name at least one alpha > 1")
    rows = _lemma2_checks(lengths, alphas) + _prop1_checks(lengths, alphas) + _prop3_checks(lengths, alphas)
    return pd.DataFrame(rows)
