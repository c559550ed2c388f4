"""The concentration study's findings (Polynomial Concentration §5.2, §5.5, Tables 1, 4, 5, App. C): the rules of
``rules`` applied to the study's tables, their null controls (i.i.d. Gaussian rows for the placement, the safest
cells for the collapse screen, softmax against itself on a second half of its prompts for sufficiency) and their
power, simulated by ``calibration`` at the run's own sample sizes; pure functions of the study's tables."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from attnlab import rowmaps
from attnlab.analyses import substitute
from attnlab.diagnostics.rows import RowOptions
from attnlab.findings import calibrate
from attnlab.findings.finding import MDE, Finding, Null, named
from attnlab.findings.stats import wilson
from attnlab.findings.verdict import decide
from attnlab.studies.concentration import calibration, rules
from attnlab.studies.concentration.rules import COLLAPSE, HIGH_DROP, HIGH_SAFE, LOW_SAFE, Counts

LEARNED = 50.0  # softmax accuracy (%) below which the screen's findings are not checked
NULL_ROWS = calibration.NULL_ROWS  # i.i.d. Gaussian rows drawn for the placement's noise reference and null
Z_ALPHA, Z_POWER = 1.959964, 0.841621  # two-sided 5%, 80% power


def accuracy_mde(base: float, n: int) -> float:
    """The smallest accuracy drop (pp) from softmax's ``base`` % that a two-sample test of ``n`` prompts per cell
    detects (two-sided 5%, 80% power, normal approximation at softmax's rate)."""
    q = min(max(base / 100, 0.5 / n), 1 - 0.5 / n)
    return 100 * (Z_ALPHA + Z_POWER) * (2 * q * (1 - q) / n) ** 0.5


def iid_counts(n_keys, prompts: int, seed: int = 0) -> Counts:
    """NULL_ROWS i.i.d. N(0, 1) score rows with the audited rows' key counts (drawn with replacement), split into
    as many pseudo-prompts as the audit had: per pseudo-prompt, the active rows unsafe at p = 2, b = 0 and all
    active rows. Rows with no margin structure at all."""
    from attnlab.diagnostics import row_stats

    rng = np.random.default_rng(seed)
    keys = rng.choice(np.asarray(n_keys, dtype=int), size=NULL_ROWS)
    frames = []
    for n in np.unique(keys):
        count = int((keys == n).sum())
        frames.append(row_stats(torch.from_numpy(rng.standard_normal((count, int(n)))), p=(2,), b=0.0))
    rows = pd.concat(frames, ignore_index=True)
    active = rows["status"] == "active"
    # rows go to pseudo-prompts at random, so that the interval carries the draw's mix of key counts too
    prompt = rng.permutation(len(rows)) % max(prompts, 1)
    unsafe = np.bincount(
        prompt, weights=(active & ~rows["safe_p2"].fillna(True).astype(bool)).to_numpy(float), minlength=prompts
    )
    return Counts(unsafe, np.bincount(prompt, weights=active.to_numpy(float), minlength=prompts))


def iid_prevalence(n_keys, prompts: int, seed: int = 0) -> dict[str, float]:
    """``iid_counts``' unsafe share at p = 2, b = 0 with its 95% t-interval over the pseudo-prompts."""
    counts = iid_counts(n_keys, prompts, seed)
    share, lo, hi = rules.prompt_interval(*counts)
    return {"unsafe %": share, "unsafe lo": lo, "unsafe hi": hi, "rows": int(counts.active.sum())}


def _suite_counts(shares: pd.DataFrame) -> dict[str, Counts]:
    """Each suite's counts, in order; a categorical suite column keeps a suite without rows, as empty counts."""
    column = shares["suite"]
    names = column.cat.categories if isinstance(column.dtype, pd.CategoricalDtype) else column.unique()
    return {
        str(suite): Counts(g["unsafe"].to_numpy(float), g["active"].to_numpy(float))
        for suite in names
        for g in (shares[column == suite],)
    }


@named(rules.PREVALENCE_NAME)
def prevalence_finding(shares: pd.DataFrame, noise: tuple[Counts, Counts]) -> Finding:
    """Polynomial Concentration §5.2, Table 1, App. C as a placement: where this model's unsafe share at p = 2,
    b = 0 sits among the paper's models, per suite (``shares``: suite, prompt, unsafe and active rows), by
    ``rules.PLACEMENT_RULE`` on Student-t intervals over prompts. ``noise``: two independent draws of i.i.d.
    N(0, 1) rows of the audited key counts (``iid_counts``), the first the rule's reference, the second the null
    control, placed by the same rule against the first."""
    claim = (
        "a pretrained model sits where one group of Polynomial Concentration's models sits (§5.2, Table 1, "
        f"App. C): on every suite mostly polynomial-unsafe at p = 2, b = 0 like Qwen3, Gemma and Pythia (>= "
        f"{rules.UNSAFE_FLOOR:g}%), or safe like Llama, the stated exception (<= {rules.LLAMA_TOP:g}%)"
    )
    suites = _suite_counts(shares)
    reference, control = noise
    control_words = (
        f"{int(control.active.sum())} i.i.d. N(0, 1) score rows with the audited rows' key counts, placed "
        "against a second such draw"
    )
    if empty := [s for s, c in suites.items() if not c.active.sum()] or ([] if suites else ["every suite"]):
        # a share of no rows is no prevalence: never placed, so never a success
        return decide(
            claim,
            rule=rules.PLACEMENT_RULE,
            holds=None,
            null=Null(control_words, None, "not run: a suite has no share to place against"),
            mde=MDE(None, None, "pp", "none: a suite has no active rows to give an interval"),
            evidence=f"suites without an active row at p = 2, b = 0 (or with no known flag): {', '.join(empty)}.",
            precondition=f"{', '.join(empty)} has no active row with a known safe flag, so its prevalence is not "
            "measured",
        )
    sides = rules.placement_sides(list(suites.values()), reference)
    holds = rules.placement_outcome(sides)
    intervals = {s: rules.prompt_interval(*c) for s, c in suites.items()}
    text = "; ".join(
        f"{s} {share:.1f}% [{lo:.1f}, {hi:.1f}] {rules.place(share)}" for s, (share, lo, hi) in intervals.items()
    )
    ref = rules.prompt_interval(*reference)
    null = rules.prompt_interval(*control)
    null_side = rules.placement_sides([control], reference)[0]
    straddle = [s for s, side in zip(suites, sides) if side is None]
    prompts = min(len(c.active) for c in suites.values())
    half = max((hi - lo) / 2 for _, lo, hi in intervals.values())
    power = calibrate.power(calibration.placement("run", prompts, len(suites)), draws=calibrate.RUNTIME_DRAWS)
    return decide(
        claim,
        rule=rules.PLACEMENT_RULE,
        holds=bool(holds),
        null=Null(
            control_words,
            rules.placement_outcome([null_side]) is True,
            f"{null[0]:.1f}% unsafe [{null[1]:.1f}, {null[2]:.1f}] against {ref[0]:.1f}% [{ref[1]:.1f}, "
            f"{ref[2]:.1f}]: {null_side or 'straddles an edge'}",
        ),
        mde=MDE(
            half,
            None,
            "pp",
            f"the widest half-width of the suites' 95% t-intervals over {prompts} or more prompts; power: the "
            "share of simulated models placed like Qwen3, Gemma or Llama in window (App. C) that the rule places",
            power=power,
        ),
        evidence=f"unsafe % of active rows at p = 2, b = 0 (95% t-interval over prompts): {text}; i.i.d. rows "
        f"of the same key counts {ref[0]:.1f}% [{ref[1]:.1f}, {ref[2]:.1f}]; sides: "
        + ", ".join(f"{s} {side or 'straddles an edge'}" for s, side in zip(suites, sides))
        + ".",
        precondition=(
            f"the 95% interval of {', '.join(straddle)} straddles an edge of the paper's groups "
            f"({rules.LLAMA_TOP:g}% or {rules.UNSAFE_FLOOR:g}%) or the i.i.d. rows' bound: its prompts cannot "
            "place it"
            if holds is None
            else None
        ),
    )


def _counts(table: pd.DataFrame, prompts: int) -> tuple[int, ...]:
    return tuple(int(round(a * prompts / 100)) for a in table["accuracy %"])


def _states_text(cells: pd.DataFrame, states: Sequence[int], prompts: int) -> str:
    words = {1: "collapsed", -1: "preserved", 0: "undecided"}
    parts = []
    for (_, r), state in zip(cells.iterrows(), states):
        lo, hi = wilson(int(round(r["accuracy %"] * prompts / 100)), prompts)
        parts.append(
            f"{r.recipe}: {r['all-head safe %']:.1f}% safe, accuracy {r['accuracy %']:.1f}% "
            f"[{100 * lo:.1f}, {100 * hi:.1f}] {words[state]}"
        )
    return "; ".join(parts)


@named(rules.COLLAPSE_NAME)
def finding(table: pd.DataFrame, prompts: int) -> Finding:
    """Polynomial Concentration's negative screen (§5.5, Table 5 (i)): every ReLU cell whose all-head measured-safe
    fraction is at most LOW_SAFE% collapses (five of five there). Each such cell is decided by the Wilson interval
    of its accuracy against COLLAPSE x softmax's (``rules.collapse_states``); the null is the screen's other arm,
    as many of the safest cells under the same rule: if they collapse as well, collapse is not told by the safe
    fraction. The causal top-K column describes the cells and flags none: the paper's screen reads all heads."""
    claim = (
        f"rows with very low measured-safe fraction collapse under substitution (Polynomial Concentration §5.5, "
        f"Table 5): every ReLU cell with <= {LOW_SAFE:g}% of its answering rows measured safe over all heads keeps "
        f"<= {100 * COLLAPSE:g}% of softmax's accuracy"
    )
    base = float(table["softmax %"].iloc[0])
    is_low = table["all-head safe %"] <= LOW_SAFE
    low = table[is_low]
    safest = table[~is_low].nlargest(max(len(low), 1), "all-head safe %")
    low_states = rules.collapse_states(rules.Screen(base / 100, prompts, _counts(low, prompts)))
    null_states = rules.collapse_states(rules.Screen(base / 100, prompts, _counts(safest, prompts)))
    holds = rules.collapse_outcome(low_states)
    least = table.loc[table["all-head safe %"].idxmin()]
    power = calibrate.power(
        calibration.collapse("run", prompts, base / 100, max(len(low), 1)), draws=calibrate.RUNTIME_DRAWS
    )
    undecided = [r.recipe for (_, r), s in zip(low.iterrows(), low_states) if s == 0]
    precondition = (
        f"softmax scores only {base:.1f}% (< {LEARNED:g}%): nothing to collapse"
        if base < LEARNED
        else f"no ReLU cell has <= {LOW_SAFE:g}% of its answering rows measured safe over all heads (the least: "
        f"{least.recipe}, {least['all-head safe %']:.1f}%): the screen (Table 5 (i)) says nothing above it"
        if low.empty
        else f"the Wilson interval of {', '.join(undecided)} contains the collapse line "
        f"({COLLAPSE * base:.1f}%): {prompts} prompts cannot say whether it collapsed"
        if holds is None and power >= calibrate.POWER_MIN
        else None
    )
    return decide(
        claim,
        rule=rules.COLLAPSE_RULE,
        holds=bool(holds),
        null=Null(
            f"the {len(safest)} safest ReLU cell(s) by all-head measured-safe fraction, under the same rule",
            None if safest.empty else rules.collapse_outcome(null_states) is True,
            _states_text(safest, null_states, prompts) or "no other ReLU cell",
        ),
        mde=MDE(
            accuracy_mde(base, prompts),
            (1 - COLLAPSE) * base,
            "pp of accuracy",
            f"two-sample test of {prompts} prompts per cell at softmax's rate (5% two-sided, 80% power), against "
            "the drop a collapse means; power: the share of simulated runs whose low-safe cells score 0 or keep "
            "2.5% of softmax (Table 5) that the rule calls collapsed",
            power=power,
        ),
        evidence=f"softmax {base:.1f}%; {len(low)} cell(s) with <= {LOW_SAFE:g}% measured safe over all heads, "
        f"{low_states.count(1)} collapsed (Wilson upper bound <= {COLLAPSE * base:.1f}%), "
        f"{low_states.count(-1)} preserved, {low_states.count(0)} undecided: "
        f"{_states_text(low, low_states, prompts) or 'none'}; all-head measured-safe ranges "
        f"{table['all-head safe %'].min():.1f}%-{table['all-head safe %'].max():.1f}%.",
        precondition=precondition,
    )


@named(rules.SUFFICIENCY_NAME)
def sufficiency_finding(table: pd.DataFrame, prompts: int, halves: tuple[tuple[int, int], ...]) -> Finding:
    """The other half of Polynomial Concentration's screen (§5.5, Table 4; abstract): a high measured-safe fraction
    does not guarantee preservation. Decided on the ReLU cells with >= HIGH_SAFE% of their answering rows measured
    safe by ``rules.SUFFICIENCY_RULE``; the null is softmax against itself: ``halves``, softmax's (correct, n) on
    the first and on the second half of the scored prompts (two draws through the same hook and scoring), under
    the same rule."""
    claim = (
        f"a high measured-safe fraction does not guarantee preservation (Polynomial Concentration §5.5, "
        f"Table 4, where cells with >= {HIGH_SAFE:g}% measured safe lose {HIGH_DROP:g} and 100 pp): some ReLU cell "
        f"with >= {HIGH_SAFE:g}% of its answering rows measured safe scores significantly below softmax"
    )
    base = float(table["softmax %"].iloc[0])
    high = table[table["all-head safe %"] >= HIGH_SAFE]
    softmax = (int(round(base * prompts / 100)), prompts)
    adjusted = rules.loss_pvalues(rules.Arms(softmax, tuple((k, prompts) for k in _counts(high, prompts))))
    cells = "; ".join(
        f"{r.recipe}: {r['all-head safe %']:.1f}% safe, {r['accuracy %'] - base:+.1f} pp (Holm-adjusted p = {p:.2g})"
        for (_, r), p in zip(high.iterrows(), adjusted)
    )
    null_arms = rules.Arms(halves[1], (halves[0],)) if len(halves) == 2 else None
    null_p = rules.loss_pvalues(null_arms)[0] if null_arms else float("nan")
    power = calibrate.power(
        calibration.sufficiency("run", prompts, base / 100, max(len(high), 1)), draws=calibrate.RUNTIME_DRAWS
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
        rule=rules.SUFFICIENCY_RULE,
        holds=any(p <= rules.ALPHA for p in adjusted),
        null=Null(
            "softmax against itself: its first half of the scored prompts against its second, through the same hook "
            "and scoring",
            None if null_arms is None else rules.sufficiency_rule(null_arms),
            "not run: fewer than two scored prompts"
            if null_arms is None
            else f"{halves[0][0]}/{halves[0][1]} against {halves[1][0]}/{halves[1][1]}, p = {null_p:.2g}",
        ),
        mde=MDE(
            accuracy_mde(base, prompts),
            HIGH_DROP,
            "pp of accuracy",
            f"two-sample test of {prompts} prompts per cell at softmax's rate (5% two-sided, 80% power), against "
            "Table 4's smallest drop of a high-safe cell; power: the share of simulated runs with one high-safe "
            f"cell {HIGH_DROP:g} pp below softmax that the rule detects",
            power=power,
        ),
        evidence=f"softmax {softmax[0]}/{prompts} ({base:.1f}%); {len(high)} high-safe cell(s), "
        f"{sum(p <= rules.ALPHA for p in adjusted)} significantly below softmax: {cells or 'none'}.",
        precondition=precondition,
    )


# the audit's measured-safe tolerance (S_p <= 1 + eps), under which Table 8's residual false negatives vanish (App. P)
EPS = RowOptions().eps


def unnormalized(sub: pd.DataFrame) -> pd.DataFrame:
    """The substitution sweep's rows whose map does not normalize its weights (Wortsman, sigmoid)."""
    return sub[[not rowmaps.get(m).normalized for m in sub["map"]]]


@named(rules.UNNORMALIZED_NAME)
def unnormalized_finding(sub: pd.DataFrame, prompts: int, halves: tuple[tuple[int, int], ...]) -> Finding:
    """Polynomial Concentration §5.3, Table 3: no un-normalized recipe is a drop-in replacement, every one collapses
    (the four Wortsman variants, -100 pp on every model). Decided by the collapse screen's own rule
    (``rules.collapse_rule``) on the sweep's un-normalized recipes; the null is softmax against itself, its second
    half of the scored prompts screened against its first half's accuracy, which the rule must not call collapsed."""
    claim = (
        "un-normalized recipes collapse under zero-shot substitution (Polynomial Concentration §5.3, Table 3: all "
        f"four Wortsman variants -100 pp on every model): every one keeps <= "
        f"{100 * COLLAPSE:g}% of softmax's accuracy"
    )
    base = float(sub.set_index("recipe").loc[substitute.BASELINE, "accuracy %"])
    cells = unnormalized(sub)
    states = rules.collapse_states(rules.Screen(base / 100, prompts, _counts(cells, prompts)))
    holds = rules.collapse_outcome(states)
    null_screen = rules.Screen(halves[0][0] / halves[0][1], halves[1][1], (halves[1][0],)) if len(halves) == 2 else None
    power = calibrate.power(
        calibration.collapse("run", prompts, base / 100, max(len(cells), 1), rules.UNNORMALIZED_NAME)
    )
    words = {1: "collapsed", -1: "preserved", 0: "undecided"}
    evidence = "; ".join(
        f"{r.recipe}: {r['correct']}/{r['n']} ({r['accuracy %']:.1f}%) {words[s]}"
        for (_, r), s in zip(cells.iterrows(), states)
    )
    return decide(
        claim,
        rule=rules.UNNORMALIZED_RULE,
        holds=bool(holds),
        null=Null(
            "softmax against itself: its second half of the scored prompts screened against its first half's "
            "accuracy, through the same hook and scoring",
            None if null_screen is None else rules.collapse_rule(null_screen),
            "not run: fewer than two scored prompts"
            if null_screen is None
            else f"{halves[1][0]}/{halves[1][1]} against the line {100 * COLLAPSE * null_screen.softmax:.1f}% "
            f"({halves[0][0]}/{halves[0][1]} on the first half)",
        ),
        mde=MDE(
            accuracy_mde(base, prompts),
            base,
            "pp of accuracy",
            f"two-sample test of {prompts} prompts per cell at softmax's rate (5% two-sided, 80% power), against "
            "Table 3's -100 pp; power: the share of simulated runs whose un-normalized cells score 0 or keep 1% "
            "of softmax that the rule calls collapsed",
            power=power,
        ),
        evidence=f"softmax {base:.1f}% on {prompts} NIAH prompts; collapse line {COLLAPSE * base:.1f}%; "
        f"{states.count(1)} of {len(cells)} un-normalized recipes collapsed: {evidence or 'none in the sweep'}.",
        precondition=f"softmax scores only {base:.1f}% (< {LEARNED:g}%): nothing to collapse"
        if base < LEARNED
        else "the sweep holds no un-normalized recipe"
        if cells.empty
        else None,
    )


def bound_check(valid: pd.DataFrame) -> Finding:
    """Cor. 4.3 on the audited rows, as Table 8 reads it (App. P): no row predicted safe (p >= p*) is measured
    unsafe beyond the tolerance ``EPS``. An implication of the bound, so a software check of attnlab's
    S_p and p*, not a paper's finding."""
    fn = valid["FN eps"].astype(int)
    worst = valid.loc[fn.idxmax()]
    return Finding(
        "the worst-case bound is conservative on the audited rows (Polynomial Concentration Cor. 4.3, Table 8, App. "
        f"P): no row predicted safe (p >= p*) has S_p > 1 + {EPS:g}",
        "check passed" if int(fn.sum()) == 0 else "check failed",
        f"false negatives at tolerance {EPS:g}: {int(fn.sum())} over {len(valid)} (b, p) cells of "
        f"{int(valid['rows'].max())} rows each (most: {int(worst['FN eps'])} at b = {worst['b']}, p = {worst['p']}); "
        f"without tolerance {int(valid['FN'].sum())}; conservative flags (FP) {int(valid['FP'].min())} to "
        f"{int(valid['FP'].max())} per cell",
        rule=f"every (b, p) cell has 0 rows with p >= p* and S_p > 1 + {EPS:g}",
        name=rules.BOUND_NAME,
    )
