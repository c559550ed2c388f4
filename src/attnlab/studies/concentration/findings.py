"""The concentration study's findings (Polynomial Concentration §5.2, §5.5, Tables 1, 4, 5): their rules, fixed
before any number is read, their null controls (i.i.d. Gaussian rows for prevalence, the safest cells for the
collapse screen, softmax through the same hook for sufficiency) and their power; pure functions of the study's
tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from attnlab.findings.finding import MDE, Finding, Null
from attnlab.findings.verdict import decide

UNSAFE_MOST = 70.0  # % unsafe at p = 2, b = 0 that three of Polynomial Concentration's four models cross on every suite
HIGH_SAFE = 66.0  # Polynomial Concentration Table 4's middle cells: >= 66% measured safe ...
HIGH_DROP = 19.0  # ... yet losing >= 19 pp: a high safe fraction is not sufficient
LOW_SAFE = 3.0  # % of active rows measured safe at or below which a cell counts as "very low"
COLLAPSE = 0.10  # a cell collapses when it keeps at most this share of softmax's accuracy
LEARNED = 50.0  # softmax accuracy (%) below which the finding is not checked


def _top_column(table: pd.DataFrame) -> str:
    return next(c for c in table.columns if c.startswith("top-") and c.endswith(" safe %"))


# The decision rules, fixed before any number is read (Polynomial Concentration §5.2, §5.5, Tables 1, 4, 5).
PREVALENCE_RULE = (
    f"every audited suite's unsafe share at p = 2, b = 0 has its 95% interval over prompts at or above "
    f"{UNSAFE_MOST:g}% (not reproduced when some suite's interval lies below it; not checked when an "
    "interval contains it)"
)
COLLAPSE_RULE = (
    f"every ReLU cell with <= {LOW_SAFE:g}% measured-safe answering rows (all heads or the causal top-K) "
    f"keeps <= {100 * COLLAPSE:g}% of softmax's accuracy, while the same number of the safest ReLU cells "
    "do not all collapse (the null)"
)
SUFFICIENCY_RULE = (
    f"some ReLU cell with >= {HIGH_SAFE:g}% measured-safe active rows loses >= {HIGH_DROP:g} pp, with "
    "its Wilson 95% upper bound below softmax's accuracy"
)
NULL_ROWS = 4000  # i.i.d. Gaussian rows drawn for the prevalence null
Z_ALPHA, Z_POWER = 1.959964, 0.841621  # two-sided 5%, 80% power


def accuracy_mde(base: float, n: int) -> float:
    """The smallest accuracy drop (pp) from softmax's ``base`` % that a two-sample test of ``n`` prompts per cell
    detects (two-sided 5%, 80% power, normal approximation at softmax's rate)."""
    q = min(max(base / 100, 0.5 / n), 1 - 0.5 / n)
    return 100 * (Z_ALPHA + Z_POWER) * (2 * q * (1 - q) / n) ** 0.5


def iid_prevalence(n_keys, prompts: int, seed: int = 0) -> dict[str, float]:
    """The prevalence null: i.i.d. N(0, 1) score rows with the audited rows' key counts (drawn with replacement),
    split into as many prompts as the audit had; their unsafe share at p = 2, b = 0 with its 95% interval over
    prompts. Rows with no margin structure at all: a rule they pass says nothing about a trained model."""
    from attnlab.diagnostics import row_stats
    from attnlab.diagnostics.stats import bootstrap_fraction

    rng = np.random.default_rng(seed)
    keys = rng.choice(np.asarray(n_keys, dtype=int), size=NULL_ROWS)
    frames = []
    for n in np.unique(keys):
        count = int((keys == n).sum())
        stats = row_stats(torch.from_numpy(rng.standard_normal((count, int(n)))), p=(2,), b=0.0)
        frames.append(stats[["status", "safe_p2"]])
    rows = pd.concat(frames, ignore_index=True).assign(prompt=lambda t: np.arange(len(t)) % max(prompts, 1))
    active = rows[rows["status"] == "active"].assign(safe_p2=lambda t: t["safe_p2"].astype(bool))
    share, lo, hi = bootstrap_fraction(active, "safe_p2", unit="prompt")
    return {
        "unsafe %": 100 * (1 - share),
        "unsafe lo": 100 * (1 - hi),
        "unsafe hi": 100 * (1 - lo),
        "rows": len(active),
    }


def _prevalence_outcome(cells: pd.DataFrame) -> bool | None:
    """PREVALENCE_RULE on per-suite intervals: True, False, or None when an interval contains the threshold."""
    if (cells["unsafe lo"] >= UNSAFE_MOST).all():
        return True
    if (cells["unsafe hi"] < UNSAFE_MOST).any():
        return False
    return None


def prevalence_finding(prevalence: pd.DataFrame, null: dict[str, float]) -> Finding:
    """Polynomial Concentration §5.2 / Table 1: three of its four pretrained models have >= 70% unsafe active rows at
    p = 2, b = 0 on every diagnostic suite; decided on this model's suites by PREVALENCE_RULE, each interval a
    bootstrap over prompts (App. R), against i.i.d. Gaussian rows of the same key counts (``iid_prevalence``)."""
    claim = (
        f"a pretrained model's active rows are mostly polynomial-unsafe: >= {UNSAFE_MOST:g}% unsafe at p = 2, "
        "b = 0 on every diagnostic suite (Polynomial Concentration §5.2, Table 1; true of three of its four "
        "models)"
    )
    cells = prevalence[(prevalence["p"] == 2) & (prevalence["b"].astype(str) == "0")]
    text = "; ".join(
        f"{r.suite} {r['unsafe %']:.1f}% [{r['unsafe lo']:.1f}, {r['unsafe hi']:.1f}]" for _, r in cells.iterrows()
    )
    holds = _prevalence_outcome(cells)
    straddle = [r.suite for _, r in cells.iterrows() if r["unsafe lo"] < UNSAFE_MOST <= r["unsafe hi"]]
    null_holds = null["unsafe lo"] >= UNSAFE_MOST
    half = float(((cells["unsafe hi"] - cells["unsafe lo"]) / 2).max())
    return decide(
        claim,
        rule=PREVALENCE_RULE,
        holds=bool(holds) if holds is not None else False,
        null=Null(
            f"{null['rows']} i.i.d. N(0, 1) score rows with the audited rows' key counts",
            bool(null_holds),
            f"{null['unsafe %']:.1f}% unsafe [{null['unsafe lo']:.1f}, {null['unsafe hi']:.1f}]",
        ),
        mde=MDE(
            half,
            None,
            "pp",
            "the widest half-width of the suites' 95% intervals over prompts: the design "
            "places each share to within it; the claim is a level, so the paper gives no "
            "effect size to set beside it",
        ),
        evidence=f"unsafe % of active rows at p = 2, b = 0 (95% over prompts): {text}; "
        f"{int((cells['unsafe %'] >= UNSAFE_MOST).sum())} of {len(cells)} suites at or above "
        f"{UNSAFE_MOST:g}% by point estimate.",
        precondition=(
            f"the 95% interval of {', '.join(straddle)} contains {UNSAFE_MOST:g}%: its prompts cannot place "
            "the share on either side"
            if holds is None
            else None
        ),
    )


def _collapsed(cells: pd.DataFrame, base: float) -> pd.Series:
    return cells["accuracy %"] <= COLLAPSE * base


def finding(table: pd.DataFrame, prompts: int) -> Finding:
    """Polynomial Concentration's negative screen (§5.5, Table 5 (i)): every ReLU cell whose measured-safe
    fraction is very low collapses. Table 5 reports that fraction over all heads and over the causal top-K
    heads, and every cell at or below LOW_SAFE% in either column collapses there (8 of 8); a cell is flagged
    here by either column, so that a model whose all-head fraction never falls that low is still tested. The
    null is the screen's other arm: as many of the safest cells (by the larger of the two columns); if they
    collapse as well, collapse is not told by the safe fraction."""
    top = _top_column(table)
    claim = (
        f"rows with very low measured-safe fraction collapse under substitution (Polynomial Concentration "
        f"§5.5, Table 5): every ReLU cell with <= {LOW_SAFE:g}% of its answering rows measured safe, over all "
        f"heads or over the causal {top.removesuffix(' safe %')} heads, keeps <= {100 * COLLAPSE:g}% of "
        "softmax's accuracy"
    )
    base = float(table["softmax %"].iloc[0])
    is_low = (table["all-head safe %"] <= LOW_SAFE) | (table[top] <= LOW_SAFE)
    low = table[is_low]
    safest = (
        table[~is_low]
        .assign(safety=lambda t: t[["all-head safe %", top]].max(axis=1))
        .nlargest(max(len(low), 1), "safety")
    )
    lowest = table.loc[table[top].idxmin()]
    safe_range = (
        f"measured-safe ranges {table['all-head safe %'].min():.1f}%-{table['all-head safe %'].max():.1f}% "
        f"over all heads and {table[top].min():.1f}%-{table[top].max():.1f}% over the {top[:-7]} heads; "
        f"the least safe there, {lowest.recipe}, scores {lowest['accuracy %']:.1f}%"
    )
    kept = _collapsed(low, base)
    cells = "; ".join(
        f"{r.recipe}: {r['all-head safe %']:.1f}% / {r[top]:.1f}% safe, accuracy "
        f"{r['accuracy %']:.1f}% [{r['lo']:.1f}, {r['hi']:.1f}]"
        for _, r in low.iterrows()
    )
    null_cells = "; ".join(
        f"{r.recipe}: {r['all-head safe %']:.1f}% / {r[top]:.1f}% safe, accuracy {r['accuracy %']:.1f}%"
        for _, r in safest.iterrows()
    )
    null_passes = None if safest.empty else bool(_collapsed(safest, base).all())
    precondition = (
        f"softmax scores only {base:.1f}% (< {LEARNED:g}%): nothing to collapse"
        if base < LEARNED
        else f"no ReLU cell has <= {LOW_SAFE:g}% measured-safe rows"
        if low.empty
        else None
    )
    return decide(
        claim,
        rule=COLLAPSE_RULE,
        holds=bool(kept.all()) if len(low) else False,
        null=Null(
            f"the {len(safest)} safest ReLU cell(s), under the same collapse rule",
            null_passes,
            null_cells or "no other ReLU cell",
        ),
        mde=MDE(
            accuracy_mde(base, prompts),
            (1 - COLLAPSE) * base,
            "pp of accuracy",
            f"two-sample test of {prompts} prompts per cell at softmax's rate (5% two-sided, 80% power), "
            "against the drop a collapse means",
        ),
        evidence=f"softmax {base:.1f}%; {len(low)} low-safe cell(s) (all heads / {top[:-7]}), {int(kept.sum())} "
        f"collapsed (<= {COLLAPSE * base:.1f}%): {cells or 'none'}; {safe_range}.",
        precondition=precondition,
    )


def sufficiency_finding(table: pd.DataFrame, prompts: int) -> Finding:
    """The other half of Polynomial Concentration's screen (§5.5, Table 4; abstract): a high measured-safe fraction
    does not guarantee preservation. Decided on the ReLU cells with >= HIGH_SAFE% of active rows measured safe
    by SUFFICIENCY_RULE; the null is softmax put back in place of itself through the same hook and scoring (the
    sweep's baseline), which must not lose."""
    claim = (
        f"a high measured-safe fraction does not guarantee preservation (Polynomial Concentration §5.5, "
        f"Table 4): some ReLU cell with >= {HIGH_SAFE:g}% of active rows measured safe still loses >= "
        f"{HIGH_DROP:g} pp"
    )
    base = float(table["softmax %"].iloc[0])
    high = table[table["all-head safe %"] >= HIGH_SAFE]
    lost = high[(-high["delta pp"] >= HIGH_DROP) & (high["hi"] < base)]
    cells = "; ".join(
        f"{r.recipe}: {r['all-head safe %']:.1f}% safe, {r['delta pp']:+.1f} pp (upper bound {r['hi']:.1f}%)"
        for _, r in high.iterrows()
    )
    precondition = (
        f"softmax scores only {base:.1f}% (< {LEARNED:g}%): no drop to measure"
        if base < LEARNED
        else f"no ReLU cell has >= {HIGH_SAFE:g}% measured-safe rows (the safest has "
        f"{table['all-head safe %'].max():.1f}%)"
        if high.empty
        else None
    )
    return decide(
        claim,
        rule=SUFFICIENCY_RULE,
        holds=bool(len(lost)),
        null=Null(
            "softmax through the same hook and scoring (the sweep's baseline)", False, f"{base:.1f}%, a change of 0 pp"
        ),
        mde=MDE(
            accuracy_mde(base, prompts),
            HIGH_DROP,
            "pp of accuracy",
            f"two-sample test of {prompts} prompts per cell at softmax's rate (5% two-sided, 80% power), against "
            "Table 4's smallest drop of a high-safe cell",
        ),
        evidence=f"softmax {base:.1f}%; {len(high)} high-safe cell(s), {len(lost)} losing >= {HIGH_DROP:g} pp "
        f"significantly: {cells or 'none'}.",
        precondition=precondition,
    )
