"""Vasylenko et al. 2025's non-dispersion results as closed forms: the synthetic rows its lemmas and propositions
speak of, and what the paper predicts on them.

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

Everything here is the paper's side, computed from its formulas without a row map; ``nondispersion`` measures the
same rows with attnlab's row maps and sets the two against each other.
"""

from __future__ import annotations

import math
import numbers
from typing import cast

import torch

from attnlab.errors import ArgumentError

# typeshed types float ** float as Any (a negative base gives a complex); cast(float, ...) below states the real
# results these formulas have on their domains, and changes nothing at run time


def _count(name: str, value: int, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ArgumentError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ArgumentError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _alpha(alpha: float, *, softmax: bool) -> float:
    number = not isinstance(alpha, bool) and isinstance(alpha, (int, float)) and math.isfinite(alpha)
    if not (number and (alpha >= 1 if softmax else alpha > 1)):
        allowed = "alpha >= 1 (1 is softmax)" if softmax else "alpha > 1 (alpha-entmax; softmax has no such bound)"
        raise ArgumentError(f"alpha must be a finite number with {allowed}, got {alpha!r}")
    return float(alpha)


def _two_level(n: int, k: int, delta: float) -> tuple[int, int, float]:
    n, k = _count("n", n, 2), _count("k", k, 1)
    if k >= n:
        raise ArgumentError(f"k (top tokens) must be below n (all tokens), got k={k}, n={n}")
    return n, k, _positive("delta (M - m)", delta)


def lemma2_gap(k: int, alpha: float) -> float:
    """k^-(alpha-1) / (alpha-1): the least Delta = M - m at which alpha-entmax gives the k top tokens of two-level
    logits all the weight, whatever n (Vasylenko et al. 2025 Lemma 2 (i), App. C eq. 32)."""
    _count("k", k, 1)
    alpha = _alpha(alpha, softmax=False)
    return cast(float, k ** (1 - alpha)) / (alpha - 1)


def two_level_threshold(k: int, alpha: float, top: float = 0.0) -> float:
    """tau = (alpha-1) M - k^-(alpha-1), alpha-entmax's threshold on two-level logits with k tokens at M = ``top``
    once Delta >= lemma2_gap(k, alpha) (Vasylenko et al. 2025 Lemma 2 (i), App. C eq. 29)."""
    _count("k", k, 1)
    alpha = _alpha(alpha, softmax=False)
    return (alpha - 1) * top - cast(float, k ** (1 - alpha))


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

    alpha = 1: softmax at temperature 1 (eq. 34; pass Delta / theta for another). alpha > 1 with Delta >= lemma2_gap:
    (1/k, 0), eq. 33. Below the gap every token
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
        return cast(float, ((1 - (n - k) * p_m) / k) ** a - p_m**a) - a * delta

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
    return top - cast(float, p_top ** (alpha - 1)) / (alpha - 1)


def softmax_required_gap(n: int, k: int, c: float, theta: float = 1.0) -> float:
    """Delta = theta ln((n-k)/k * c/(1-c)): the logit gap at which softmax(z / theta) puts mass exactly c on the
    k top tokens of two-level logits, growing as log n (Vasylenko et al. 2025 Lemma 2 (ii), App. C eq. 22, 41).
    Negative when even equal logits give the top tokens more than c."""
    _count("n", n, 2)
    _count("k", k, 1)
    if k >= n:
        raise ArgumentError(f"k (top tokens) must be below n (all tokens), got k={k}, n={n}")
    if not (isinstance(c, (int, float)) and 0 < c < 1):
        raise ArgumentError(f"c (the mass on the top tokens) must be in (0, 1), got {c!r}")
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
        raise ArgumentError(f"b (v_a^T v_i) must be a finite number below phi = {phi:g}, got {b!r}")
    if isinstance(d, bool) or d not in (1, 2):
        raise ArgumentError(f"d must be 1 or 2 (the paper's two constructions), got {d!r}")


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
        raise ArgumentError(
            f"phi - b must lie in [{low:.6g}, {high:.6g}) for alpha={alpha:g} (eq. 74: dense "
            f"without the repeat, sparse with it), got {phi - b:.6g}"
        )
    p_star = ((alpha - 1) * (phi - b)) ** (1 / (alpha - 1))
    return cast(float, (1 - p_star) * _prop3_spread(phi, b, d))


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
    return cast(float, (e / a if a <= 1 else e ** (1 / a)) * spread)
