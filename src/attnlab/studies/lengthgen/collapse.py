"""Representational collapse (Vasylenko et al. 2025 §3.3, Prop. 2 part 1, Prop. 3, App. D.2, Fig. 6): the one-token
extension probe of Barbero et al. (2024) through a 6-layer, d = 1 transformer with identity projections.

Two sequences differ only by a repeated last token, v^(0) = [v, v_a] (n tokens) and v*^(0) = [v, v_a, v_a] (n + 1);
the probe reads the L1 gap ||v_n^(L) - v*_{n+1}^(L)||_1 between their last tokens after L = 6 layers. Under
softmax the gap decays toward 0 as n grows (Barbero et al.); alpha-entmax (alpha > 1) keeps a margin, larger alpha
more (Fig. 6). Scenarios (App. D.2, d = 1, phi = 1.2): a constant prefix v_i = b / sqrt(phi) with b = 1, and a
random prefix v_i = b_i / sqrt(phi) with b_i ~ U(0, 1) drawn per token; v_a = sqrt(phi).

The block, where the paper leaves it open: neither the authors' repository (deep-spin/asentmax) nor Barbero et
al.'s code holds the probe's script, so this is the plainest reading. Causal attention; query = key = value = the
token's representation (identity projections, d = 1, scores z_ij = v_i v_j with no 1/sqrt(d) scaling, d being 1);
v^(l) = v^(l-1) + attention output (the residual); no normalization and no feed-forward block. Everything is float64.

Two exact shortcuts make n = 16384 affordable. (1) Causality: the prefix tokens never see the last ones, so the n - 1
prefix representations are the same in v and v* at every layer, and token n of v* is token n of v; one pass over the
prefix serves both sequences, and only the last two tokens are computed per sequence. (2) Nesting: the prefix of
the n case is the first n - 1 tokens of one draw of the longest prefix, so one causal pass serves every n of the
grid (the n's of one draw share their first tokens; every n's prefix is still i.i.d. U(0, 1)). A constant prefix
needs no pass at all: a token attending to copies of itself gets itself back under any normalized map, so its
representation doubles at each layer. The prefix pass attends in query blocks (memory O(block x n)) and, for
alpha > 1, drops the keys that cannot be in any row's support ((alpha - 1)(z - max z) < -1, App. A). Every row map
is attnlab's (``attnlab.rowmaps``): entmax_a1.5 and entmax_a2 take its fast paths, alpha = 1.75 its general
safeguarded Newton.

The finding reads the random-prefix draws (the unit of replication); the constant prefix is one deterministic case
reported beside it. Its rule (``RULE``, ``collapse_rule``), null control (the rule's margin half applied to softmax)
and calibrations (``calibrations``, registered on import) are fixed here before any number is read.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnlab import io, rowmaps
from attnlab.diagnostics.paired import t_quantile
from attnlab.errors import ArgumentError
from attnlab.findings import calibrate
from attnlab.findings.calibrate import Calibration, Coverage, World, register
from attnlab.findings.finding import MDE, Finding, Null
from attnlab.findings.verdict import decide

COLLAPSE_NAME = "lengthgen: representational collapse"
LAYERS = 6  # App. D.2: "a 6-layered transformer with residual connections"
PHI = 1.2  # v_a^T v_a (App. D.2, both scenarios)
B_CONST = 1.0  # the constant prefix's logit v_a^T v_i
ALPHAS = (1.0, 1.5, 1.75, 2.0)  # alpha = 1 is softmax
SCENARIOS = ("constant", "random")
BLOCK = 128  # query rows per block of the prefix pass: 128 x 16384 float64 scores is 16 MiB
TABLE = "collapse"  # the raw table: one row per scenario, draw, alpha and n
SUMMARY = "collapse_summary"


@dataclass(frozen=True)
class Sizes:
    """One budget of the probe: the grid of n (the original sequence's length; powers of two spanning at least 16x,
    so a 1/n decay ends well below ``COLLAPSE_FRAC``), the alphas (1.0 first: softmax) and the random-prefix draws."""

    ns: tuple[int, ...]
    alphas: tuple[float, ...]
    draws: int

    def __post_init__(self) -> None:
        if len(self.ns) < 2 or list(self.ns) != sorted(set(self.ns)) or self.ns[0] < 2:
            raise ArgumentError(f"ns must be at least two increasing lengths >= 2, got {self.ns!r}")
        if not self.alphas or self.alphas[0] != 1.0 or list(self.alphas) != sorted(set(self.alphas)):
            raise ArgumentError(f"alphas must be increasing and start at 1.0 (softmax), got {self.alphas!r}")
        if self.draws < 3:
            raise ArgumentError(f"the rule's intervals need at least 3 random-prefix draws, got {self.draws!r}")


def _grid(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(2**e for e in range(int(math.log2(lo)), int(math.log2(hi)) + 1))


# The paper: n in {128, ..., 16384}, alpha in {1, 1.5, 1.75, 2}. The full budget reads all of it; the demo stops at
# 4096 and the smoke budget at 2048 (measured times in the lengthgen guide). Ten draws: the printed t-interval's
# simulated coverage is 94% there (91.5% at 5 draws) and the rule's power at the paper's effect 97% (24% at 3 draws).
SIZES: dict[str, Sizes] = {
    "smoke": Sizes(_grid(128, 2048), ALPHAS, 10),
    "demo": Sizes(_grid(128, 4096), ALPHAS, 10),
    "full": Sizes(_grid(128, 16384), ALPHAS, 10),
}


# ---------------------------------------------------------------- the construction and the forward pass


def map_name(alpha: float) -> str:
    """attnlab's row map for ``alpha``: "softmax" at 1, else "entmax_a<alpha>"."""
    return "softmax" if alpha == 1.0 else f"entmax_a{alpha:g}"


def prefix_tokens(scenario: str, length: int, rng: np.random.Generator | None = None, phi: float = PHI) -> np.ndarray:
    """The ``length`` prefix tokens v_1..v_{n-1} (d = 1): b / sqrt(phi) with b = ``B_CONST`` ("constant") or b ~
    U(0, 1) per token ("random", from ``rng``), so that v_a^T v_i = b (App. D.2)."""
    if scenario == "constant":
        return np.full(length, B_CONST / math.sqrt(phi))
    if scenario == "random":
        if rng is None:
            raise ArgumentError("the random prefix needs a generator")
        return rng.uniform(0.0, 1.0, length) / math.sqrt(phi)
    raise ArgumentError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")


def sequences(prefix: np.ndarray, phi: float = PHI) -> tuple[np.ndarray, np.ndarray]:
    """v^(0) = [v, v_a] and v*^(0) = [v, v_a, v_a] with v_a = sqrt(phi) (Prop. 3, eq. 56)."""
    va = math.sqrt(phi)
    return np.append(prefix, va), np.append(prefix, [va, va])


def block_weights(z: torch.Tensor, alpha: float) -> torch.Tensor:
    """The prefix pass's row map, attnlab's, on a block of rows ``z`` (masked keys at -inf)."""
    return rowmaps.get(map_name(alpha))(z, torch.isfinite(z))


def prefix_pass(prefix: np.ndarray, alpha: float, layers: int = LAYERS, block: int = BLOCK) -> torch.Tensor:
    """(layers, m) float64: the m prefix tokens' representations entering each layer 1..layers (row 0 is the
    input), under causal attention with identity projections and the residual (module doc)."""
    x = torch.as_tensor(prefix, dtype=torch.float64)
    m = x.shape[0]
    states = torch.empty(layers, m, dtype=torch.float64)
    states[0] = x
    if m and bool((x == x[0]).all()):
        # copies of one token: attention returns the token under any normalized map, so it doubles per layer
        for layer in range(1, layers):
            states[layer] = states[layer - 1] * 2.0
        return states
    cut = -1.0 / (alpha - 1.0) if alpha > 1.0 else None  # z - max z below this is outside every support
    for layer in range(1, layers):
        prev = states[layer - 1]
        out = torch.empty(m, dtype=torch.float64)
        for start in range(0, m, block):
            stop = min(m, start + block)
            keys = prev[:stop]
            z = prev[start:stop, None] * keys[None, :]
            causal = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]
            z.masked_fill_(~causal, -math.inf)
            values = keys
            if cut is not None:
                alive = ((z - z.amax(-1, keepdim=True)) >= cut).any(0)
                if not bool(alive.all()):
                    z, values = z[:, alive], keys[alive]
            out[start:stop] = block_weights(z, alpha) @ values
        states[layer] = prev + out
    return states


def tail_gaps(states: torch.Tensor, alpha: float, ns: Sequence[int], phi: float = PHI) -> np.ndarray:
    """Per n of ``ns``: ||v_n^(L) - v*_{n+1}^(L)||_1 from the prefix's representations ``states`` (``prefix_pass``,
    at least max(ns) - 1 tokens). The last token of v and the two last tokens of v* attend over the first n - 1
    prefix tokens (the last one of v* also over its twin), through ``attnlab.rowmaps``."""
    rowmap = rowmaps.get(map_name(alpha))
    layers = states.shape[0]
    out = []
    for n in ns:
        if n - 1 > states.shape[1]:
            raise ArgumentError(f"n = {n} needs {n - 1} prefix tokens, the pass has {states.shape[1]}")
        t1 = t2 = torch.tensor(math.sqrt(phi), dtype=torch.float64)  # v_a: token n of v (= of v*), token n+1 of v*
        mask = torch.ones(2, n + 1, dtype=torch.bool)
        mask[0, n] = False  # token n does not see token n + 1
        for layer in range(layers):
            keys = torch.cat([states[layer, : n - 1], t1.view(1), t2.view(1)])
            z = torch.stack([t1 * keys, t2 * keys]).masked_fill(~mask, -math.inf)
            new = rowmap(z, mask) @ keys
            t1, t2 = t1 + new[0], t2 + new[1]
        out.append(float((t1 - t2).abs()))
    return np.asarray(out)


def probe(prefix: np.ndarray, alpha: float, ns: Sequence[int], layers: int = LAYERS, phi: float = PHI) -> np.ndarray:
    """The gap at each n of ``ns`` for one prefix draw (its first n - 1 tokens for each n) and one alpha."""
    return tail_gaps(prefix_pass(prefix[: max(ns) - 1], alpha, layers), alpha, ns, phi)


# ---------------------------------------------------------------- compute and read back


def compute(budget: str, folder: Path, seed: int = 0) -> Path:
    """The raw table ``folder/collapse.csv`` at ``budget`` (``SIZES``): one row per scenario, draw, alpha and n with
    the gap and the seconds its pass took; skipped when the table exists (resumable)."""
    path = folder / f"{TABLE}.csv"
    if path.is_file():
        return path
    sizes = SIZES[budget]
    rows = []
    draws = [("constant", 0, prefix_tokens("constant", sizes.ns[-1] - 1))]
    rng = np.random.default_rng([seed, 1])
    draws += [("random", d, prefix_tokens("random", sizes.ns[-1] - 1, rng)) for d in range(sizes.draws)]
    for scenario, draw, prefix in draws:
        for alpha in sizes.alphas:
            began = time.perf_counter()
            gaps = probe(prefix, alpha, sizes.ns)
            took = time.perf_counter() - began
            rows += [
                {"scenario": scenario, "draw": draw, "alpha": alpha, "n": n, "gap": g, "seconds": took}
                for n, g in zip(sizes.ns, gaps, strict=True)
            ]
    io.write_table(folder / TABLE, pd.DataFrame(rows))
    return path


def read(folder: Path) -> pd.DataFrame:
    """The raw table as compute wrote it."""
    return pd.read_csv(folder / f"{TABLE}.csv")


def gap_array(raw: pd.DataFrame) -> tuple[np.ndarray, tuple[float, ...], tuple[int, ...]]:
    """The random-prefix gaps as (draws, alphas, ns), with the alphas and ns (increasing): what the rule reads."""
    rand = raw[raw.scenario == "random"]
    alphas = tuple(sorted(float(a) for a in rand.alpha.unique()))
    ns = tuple(sorted(int(n) for n in rand.n.unique()))
    cube = rand.pivot_table(index="draw", columns=["alpha", "n"], values="gap", aggfunc="first", dropna=False)
    cube = cube.reindex(columns=pd.MultiIndex.from_product([alphas, ns]))
    return cube.to_numpy(dtype=float).reshape(len(cube), len(alphas), len(ns)), alphas, ns


# ---------------------------------------------------------------- the rule, fixed before any number is read

# The paper (§3.3, App. D.2, Fig. 6): softmax's gap "rapidly decays toward 0 with length" (Barbero et al.: O(1/n),
# so over a 16x grid a quarter is generous), alpha-entmax "preserves a non-vanishing margin ... with larger alpha
# yielding stronger preservation" (flat lines in Fig. 6: keeping half is lenient). The floor is 1% of |v_a|'s order.
COLLAPSE_FRAC = 0.25
KEEP_FRAC = 0.5
FLOOR = 0.01
LEVEL = 0.95
RULE = (
    "over the random-prefix draws (95% t-intervals over draws): softmax's gap at the largest n is at most "
    f"{COLLAPSE_FRAC:g} of its gap at the smallest n (upper end of the per-draw ratio) and still falling over the "
    "last doubling (upper end of the last step's ratio below 1); every alpha > 1 keeps a margin: the lower ends of "
    f"its gap at the largest n and of its ratio to the smallest n's are at least {FLOOR:g} and {KEEP_FRAC:g}; and "
    "the mean gaps at the largest n do not decrease with alpha over alpha > 1"
)


def _interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The t-interval of the mean of ``values`` (nan where fewer than 2 or any is not finite)."""
    values = np.asarray(values, dtype=float)
    if values.size < 2 or not np.isfinite(values).all():
        return math.nan, math.nan
    mean, se = float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size))
    half = t_quantile(0.5 + level / 2, values.size - 1) * se
    return mean - half, mean + half


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1.0), math.nan)


def collapses(gaps: np.ndarray) -> bool:
    """The collapse half of ``RULE`` on one map's gaps (draws, ns)."""
    ratio_hi = _interval(_ratio(gaps[:, -1], gaps[:, 0]))[1]
    step_hi = _interval(_ratio(gaps[:, -1], gaps[:, -2]))[1]
    return bool(ratio_hi <= COLLAPSE_FRAC and step_hi < 1.0)


def keeps_margin(gaps: np.ndarray) -> bool:
    """The margin half of ``RULE`` on one map's gaps (draws, ns): what the null control applies to softmax."""
    gap_lo = _interval(gaps[:, -1])[0]
    ratio_lo = _interval(_ratio(gaps[:, -1], gaps[:, 0]))[0]
    return bool(gap_lo >= FLOOR and ratio_lo >= KEEP_FRAC)


def collapse_rule(gaps: np.ndarray) -> bool:
    """``RULE`` on the random-prefix gaps (draws, alphas, ns), alphas increasing with softmax (1.0) first."""
    gaps = np.asarray(gaps, dtype=float)
    if gaps.ndim != 3 or gaps.shape[1] < 2 or gaps.shape[2] < 2 or not np.isfinite(gaps).all():
        return False
    means = gaps[:, 1:, -1].mean(0)
    ordered = bool(np.all(np.diff(means) >= -1e-12 * np.abs(means[1:]).clip(min=1.0)))
    return collapses(gaps[:, 0]) and all(keeps_margin(gaps[:, a]) for a in range(1, gaps.shape[1])) and ordered


def null_rule(gaps: np.ndarray) -> bool:
    """The null control: ``RULE``'s margin half applied to softmax (alpha = 1, column 0) of the same draws."""
    return keeps_margin(np.asarray(gaps, dtype=float)[:, 0])


# ---------------------------------------------------------------- calibration: simulated worlds of the statistic

SPREAD = 0.3  # per-draw relative spread (lognormal sigma) of a gap in the simulated worlds
PAPER_LEVELS = (1.0, 1.5, 2.0)  # Fig. 6's ordering: alpha > 1 keeps gaps growing with alpha (relative levels)


def _world(
    ns: Sequence[int],
    alphas: Sequence[float],
    draws: int,
    kept: Callable[[float], float],
    soft: Callable[[float], float] = lambda r: 1.0 / r,
    level: float = 0.3,
) -> Callable[[np.random.Generator], np.ndarray]:
    """Draws (draws, alphas, ns) gaps: softmax as level * ``soft(n / n0)``; alpha > 1 as level times its
    ``PAPER_LEVELS`` factor times ``kept(n / n0)``; each draw's curve scaled by a lognormal factor (sigma
    ``SPREAD``) and each point by a smaller one (sigma ``SPREAD`` / 3)."""
    n0 = ns[0]
    factors = np.interp(np.asarray(alphas[1:]), [1.5, 1.75, 2.0], PAPER_LEVELS)
    curve_soft = np.array([soft(n / n0) for n in ns])
    curve_kept = np.array([kept(n / n0) for n in ns])
    base = np.vstack([curve_soft, factors[:, None] * curve_kept[None, :]]) * level

    def draw(rng: np.random.Generator) -> np.ndarray:
        curve = rng.lognormal(0.0, SPREAD, (draws, len(alphas), 1))
        point = rng.lognormal(0.0, SPREAD / 3, (draws, len(alphas), len(ns)))
        return base[None] * curve * point

    return draw


def _at(ns: Sequence[int], share: float) -> Callable[[float], float]:
    # a power-law decay that keeps exactly ``share`` of the smallest n's gap at the largest n
    exponent = math.log(share) / math.log(ns[-1] / ns[0])
    return lambda r: r**exponent


def worlds(ns: Sequence[int], alphas: Sequence[float], draws: int) -> tuple[World, ...]:
    """Without the effect: every map collapses as softmax (1/n); alpha-entmax decays as n^-1/2 (slower than softmax,
    but no margin); alpha-entmax keeps exactly ``KEEP_FRAC`` at the largest n (the margin's edge); softmax keeps
    exactly ``COLLAPSE_FRAC`` (the collapse's edge); no map collapses (softmax flat too). With it: the paper's
    (softmax as 1/n, alpha-entmax flat, ordered by alpha)."""
    flat = _world(ns, alphas, draws, lambda r: 1.0)
    return (
        World("every map collapses as 1/n", False, _world(ns, alphas, draws, lambda r: 1.0 / r)),
        World("alpha-entmax decays as n^-1/2", False, _world(ns, alphas, draws, lambda r: r**-0.5)),
        World(
            f"alpha-entmax keeps exactly {KEEP_FRAC:g} of its gap", False, _world(ns, alphas, draws, _at(ns, KEEP_FRAC))
        ),
        World(
            f"softmax keeps exactly {COLLAPSE_FRAC:g} of its gap",
            False,
            _world(ns, alphas, draws, lambda r: 1.0, _at(ns, COLLAPSE_FRAC)),
        ),
        World("no map collapses (softmax flat too)", False, lambda rng: _flat_softmax(flat(rng))),
        World("the paper's: softmax as 1/n, alpha-entmax flat, ordered by alpha", True, flat),
    )


def _flat_softmax(gaps: np.ndarray) -> np.ndarray:
    gaps = gaps.copy()
    gaps[:, 0] = gaps[:, 1] * 0.8
    return gaps


def coverage(draws: int) -> Coverage:
    """The printed interval: the 95% t-interval of the mean gap at the largest n over ``draws`` lognormal draws."""
    truth = 0.3 * math.exp(SPREAD**2 / 2)

    def draw(rng: np.random.Generator) -> tuple[float, float, float]:
        lo, hi = _interval(0.3 * rng.lognormal(0.0, SPREAD, draws))
        return lo, hi, truth

    return Coverage(f"the mean gap's 95% t-interval, {draws} draws", draw)


def calibration(budget: str, sizes: Sizes | None = None) -> Calibration:
    """``collapse_rule`` on the simulated worlds at ``budget``'s grid, alphas and draws."""
    sizes = SIZES[budget] if sizes is None else sizes
    return Calibration(
        COLLAPSE_NAME,
        budget,
        collapse_rule,
        RULE,
        f"{sizes.draws} random-prefix draws, n = {sizes.ns[0]}..{sizes.ns[-1]}, alpha in "
        + ", ".join(f"{a:g}" for a in sizes.alphas),
        worlds(sizes.ns, sizes.alphas, sizes.draws),
        (coverage(sizes.draws),),
    )


CALIBRATIONS = [register(calibration(budget)) for budget in SIZES]


# ---------------------------------------------------------------- summary and finding


def summary(raw: pd.DataFrame) -> pd.DataFrame:
    """Per scenario, alpha and n: the mean gap over draws, its 95% t-interval (random prefix; the constant prefix is
    one deterministic case) and the draws."""
    out = []
    for (scenario, alpha, n), part in raw.groupby(["scenario", "alpha", "n"], sort=True):
        lo, hi = _interval(part.gap.to_numpy()) if len(part) > 1 else (math.nan, math.nan)
        out.append(
            {
                "scenario": scenario,
                "alpha": alpha,
                "map": map_name(float(alpha)),
                "n": int(n),
                "gap": float(part.gap.mean()),
                "lo": lo,
                "hi": hi,
                "draws": len(part),
            }
        )
    return pd.DataFrame(out)


def _words(table: pd.DataFrame, scenario: str, ns: tuple[int, int]) -> str:
    part = table[table.scenario == scenario]
    return "; ".join(
        f"alpha {alpha:g}: "
        + " -> ".join(f"{float(part[(part.alpha == alpha) & (part.n == n)].gap.iloc[0]):.3g}" for n in ns)
        for alpha in sorted(part.alpha.unique())
    )


CLAIM = (
    "Representational collapse: in the one-token extension probe (6 layers, d = 1), softmax's last-token gap "
    "||v_n - v*_{n+1}||_1 decays toward 0 as n grows, while alpha-entmax keeps a margin, larger alpha more "
    "(Vasylenko et al. 2025 Prop. 2 part 1, Prop. 3, Fig. 6)"
)


def collapse_finding(raw: pd.DataFrame, budget: str | None = None) -> Finding:
    """The finding from the raw table: ``collapse_rule`` on the random-prefix draws, its null ``null_rule`` on the
    same draws, the power ``collapse_rule``'s on this run's grid and draws (``calibration``)."""
    gaps, alphas, ns = gap_array(raw)
    table = summary(raw)
    sizes_words = f"{gaps.shape[0]} random-prefix draws, n = {ns[0]}..{ns[-1]}"
    how = "a threshold rule on gaps, not a difference; the power is simulated at this run's grid and draws"
    try:
        sizes = Sizes(ns, alphas, gaps.shape[0])
    except ArgumentError as err:
        return decide(
            CLAIM,
            rule=RULE,
            holds=None,
            null=Null("the rule's margin half applied to softmax (alpha = 1)", None, "not run"),
            mde=MDE(None, None, "L1 gap", how),
            evidence=f"The run's grid cannot be read: {err}.",
            precondition=f"the run's grid does not fit the rule ({err})",
            name=COLLAPSE_NAME,
        )
    run = calibration(budget or "this run", sizes)
    soft = gaps[:, 0]
    null = Null(
        "the rule's margin half applied to softmax (alpha = 1) on the same draws",
        null_rule(gaps),
        f"softmax's mean gap {soft[:, -1].mean():.3g} at n = {ns[-1]} (95% lower end "
        f"{_interval(soft[:, -1])[0]:.3g}), {np.nanmean(_ratio(soft[:, -1], soft[:, 0])):.3g} of its n = {ns[0]} gap",
    )
    ends = (ns[0], ns[-1])
    intervals = "; ".join(
        f"alpha {a:g} [{lo:.3g}, {hi:.3g}]"
        for a, (lo, hi) in zip(alphas, (_interval(gaps[:, i, -1]) for i in range(len(alphas))), strict=True)
    )
    evidence = (
        f"Mean gap at n = {ns[0]} -> {ns[-1]}, random prefix ({gaps.shape[0]} draws): {_words(table, 'random', ends)}"
        f" (95% intervals at n = {ns[-1]}: {intervals}). Constant prefix (b = 1): {_words(table, 'constant', ends)}."
    )
    return decide(
        CLAIM,
        rule=RULE,
        holds=collapse_rule(gaps),
        null=null,
        mde=MDE(None, None, "L1 gap", f"{how} ({sizes_words})", power=calibrate.power(run)),
        evidence=evidence,
        reads={"random-prefix gaps": gaps},
        null_reads={"softmax's gaps": soft},
        name=COLLAPSE_NAME,
    )
