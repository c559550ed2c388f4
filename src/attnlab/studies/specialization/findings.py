"""The specialization study's findings (Zhu et al. 2026 §3-§5, Tables 1, 4, 8, Fig. 3): the paper's effects relative
to its control's perplexity, the decision rules fixed before any number is read (Student-t 95% intervals over
training seeds, the unit of replication), their null controls (every sign pattern of the paired differences, the
untrained model) and their power, the paired gains' intervals per architecture and arm, and each finding from the
study's per-seed tables."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd

from attnlab.diagnostics.paired import paired_interval, paired_mde
from attnlab.findings import calibrate
from attnlab.findings.finding import MDE, Finding, Null, named
from attnlab.findings.verdict import FPR_MAX, decide
from attnlab.studies.specialization import calibration
from attnlab.studies.specialization.rules import (
    DELAY_MARGIN,
    DELAY_NAME,
    DELAY_RULE,
    DEPENDENCE_MIN,
    DEPENDENCE_NAME,
    DEPENDENCE_RULE,
    GAIN_NAME,
    GAIN_RULE,
    PAPER_GAIN,
    PAPER_RELIANCE,
    PAPER_SHRINKAGE,
    PAPER_WRITE_CUTS,
    PATHWAY_NAME,
    PATHWAY_RULE,
    RELIANCE_NAME,
    RELIANCE_RULE,
    SHRINKAGE_NAME,
    SHRINKAGE_RULE,
    SIGN_FLIPS,
    SLOWS_NAME,
    above,
    below,
    sign_flip_share,
    write_cut,
)
from attnlab.studies.specialization.tables import PATHWAY_LABELS


def sign_flip_null(differences: Sequence[float], rule: Callable[[Sequence[float]], bool]) -> Null:
    share = sign_flip_share(differences, rule)
    n = len([x for x in differences if math.isfinite(x)])
    return Null(
        f"sign flips of the {n} pairs: {SIGN_FLIPS}",
        bool(share > FPR_MAX),
        f"the rule holds on {share:.1%} of the {2**n if n <= 16 else 65_536} sign patterns",
    )


def _interval(lo: float, hi: float) -> str:
    return f"[{lo:+.4f}, {hi:+.4f}]"


def _percent_interval(lo: float, hi: float) -> str:
    """A ratio's interval in the percent its mean is printed in beside it."""
    return f"[{lo:+.2%}, {hi:+.2%}]"


def _power(factory: Callable[[str, int, float], calibrate.Calibration], n: int, sd: float) -> float | None:
    """The rule's simulated power at the paper's effect (``specialization.calibration``), at this run's ``n`` seeds
    and its seed-to-seed ``sd`` in the calibration's unit; None where the run cannot size it."""
    return calibrate.power(factory("this run", int(n), float(sd))) if n >= 2 and math.isfinite(sd) else None


def _mde(
    values: Sequence[float],
    effect: float | None,
    unit: str,
    factory: Callable[[str, int, float], calibrate.Calibration],
) -> MDE:
    stats = paired_interval(values)
    value = paired_mde(stats["sd"], stats["n"])
    if not math.isfinite(value):
        return MDE(None, effect, unit, "fewer than two seeds: no spread to size the design's power")
    return MDE(
        float(value),
        effect,
        unit,
        f"paired t over {stats['n']} seeds (5% two-sided, 80% power) at their sd {stats['sd']:.4g}; power "
        "simulated at the paper's effect",
        power=_power(factory, stats["n"], stats["sd"]),
    )


@named(DEPENDENCE_NAME)
def dependence_finding(table: pd.DataFrame) -> Finding:
    """Finding 1, the precondition of the failure the intervention targets."""
    claim = (
        "the control becomes causally dependent on upper Q/K early: zeroing them raises its perplexity "
        "(Zhu et al. 2026 §5.3, Fig. 3D: +82.3 ppl at 3% of training)"
    )
    rule = above(DEPENDENCE_MIN)
    rel = list(table.get("early_rel_control", pd.Series(dtype=float)))
    nulls = list(table.get("untrained_rel", pd.Series(dtype=float)))
    stats = paired_interval(rel)
    evidence = (
        f"{stats['n']} control seeds, at their lower-copy maturity: zeroing upper Q/K raises perplexity by "
        + ", ".join(
            f"{d:+.3f} ppl ({x:+.2%}, step {step})"
            for d, x, step in zip(table.get("early_dppl_control", []), rel, table.get("early_step", []), strict=True)
        )
        + f"; mean {stats['mean']:+.1%}, 95% interval {_percent_interval(stats['lo'], stats['hi'])}"
    )
    null = Null(
        "the untrained model at each control's seed (its upper Q/K carry nothing yet)",
        rule(nulls) if len(nulls) >= 2 else None,
        "relative rise " + ", ".join(f"{x:+.2%}" for x in nulls),
    )
    mde = _mde(rel, None, "of the perplexity", calibration.dependence_calibration)
    mde = MDE(
        mde.value,
        None,
        mde.unit,
        mde.how + " (82.3 ppl on the control's final 26.80); the paper gives 82.3 ppl at 3% but not the "
        "perplexity it adds to, so no relative effect size to compare",
        power=mde.power,
    )
    return decide(
        claim, rule=DEPENDENCE_RULE, holds=rule(rel) if stats["n"] >= 2 else None, null=null, mde=mde, evidence=evidence
    )


def _absent(dependence: Finding) -> str | None:
    """The precondition reason the targeted failure gives when finding 1 does not hold (None when it does)."""
    if dependence.verdict == "reproduced":
        return None
    return (
        f"the failure the intervention targets is not shown at this scale (finding 1 {dependence.verdict}: "
        f"{dependence.evidence}); the paper's control loses 82.3 ppl at 3% to the same zeroing"
    )


def gains(table: pd.DataFrame) -> pd.DataFrame:
    """Per (arch, arm): mean, sd and Student-t 95% interval of the paired loss and perplexity gains, the
    perplexity gain's MDE (``paired_mde``) and the control's mean final perplexity."""
    out = []
    for (arch, arm), group in table.groupby(["arch", "arm"], sort=False):
        loss, ppl = paired_interval(group.loss_gain), paired_interval(group.ppl_gain)
        out.append(
            {
                "arch": arch,
                "arm": arm,
                "seeds": loss["n"],
                **{f"loss_gain_{k}": loss[k] for k in ("mean", "sd", "lo", "hi")},
                **{f"ppl_gain_{k}": ppl[k] for k in ("mean", "sd", "lo", "hi")},
                "ppl_gain_mde": paired_mde(ppl["sd"], ppl["n"]),
                "control_val_ppl": group.control_val_ppl.mean(),
            }
        )
    return pd.DataFrame(out)


def excludes(hi: float, effect: float, control: float) -> str:
    """Whether the gain's interval excludes the paper's effect, read at the bound in the effect's direction (a gain:
    the upper bound), in words."""
    return (
        f"its upper bound {hi:+.4f} ppl ({hi / control:+.2%} of the control's {control:.3f}) "
        + ("excludes" if hi < effect else "does not exclude")
        + f" the paper's 1.85% ({effect:.4f} ppl here)"
    )


def _short(mde: MDE) -> str:
    power = "" if mde.power is None else f", power {mde.power:.0%} at it"
    return f"the design detects {mde.value:.4f} {mde.unit}, the paper's effect is {mde.effect:.4f} {mde.unit}{power}"


@named(GAIN_NAME)
def headline_finding(
    table: pd.DataFrame, differences: Sequence[float] = (), precondition: str | None = None
) -> Finding:
    claim = (
        "the upper-Q/K intervention lowers the final validation perplexity of a GPT-style (GELU) model, "
        "paired over seeds (Zhu et al. 2026 Table 1: -0.50 +- 0.08 ppl, 1.85% of the control's, 3 seeds)"
    )
    row = table[(table.arch == "gelu") & (table.arm == "intervention")]
    if row.empty or row.seeds.iloc[0] < 2:
        return decide(
            claim,
            rule=GAIN_RULE,
            holds=None,
            null=Null("sign flips of the pairs", None, "not run"),
            mde=MDE(None, None, "ppl", "fewer than two GELU pairs"),
            evidence="fewer than two GELU pairs: no interval over seeds",
        )
    r = row.iloc[0]
    effect = float(PAPER_GAIN * r.control_val_ppl)
    power = _power(calibration.headline_calibration, r.seeds, r.ppl_gain_sd / r.control_val_ppl)
    evidence = (
        f"GELU, {r.seeds} paired seeds: perplexity gain {r.ppl_gain_mean:+.4f} +- {r.ppl_gain_sd:.4f} "
        f"(95% interval {_interval(r.ppl_gain_lo, r.ppl_gain_hi)}), loss gain {r.loss_gain_mean:+.4f} "
        f"+- {r.loss_gain_sd:.4f} ({_interval(r.loss_gain_lo, r.loss_gain_hi)}); "
        + excludes(r.ppl_gain_hi, effect, r.control_val_ppl)
        + f"; MDE {r.ppl_gain_mde:.4f} ppl"
        + ("" if power is None else f", power at the paper's effect {power:.0%}")
    )
    mde = MDE(
        float(r.ppl_gain_mde),
        effect,
        "ppl",
        f"paired t over {r.seeds} seeds (5% two-sided, 80% power) at their "
        f"sd {r.ppl_gain_sd:.4g}; the paper's effect is its 1.85% of this run's control perplexity; power simulated "
        "at that effect and this sd",
        power=power,
    )
    if precondition and mde.adequate is False:
        precondition += f"; and underpowered besides: {_short(mde)}"
    rule = above(0.0)
    return decide(
        claim,
        rule=GAIN_RULE,
        holds=rule(differences) if len(differences) else bool(r.ppl_gain_lo > 0),
        null=sign_flip_null(differences, rule),
        mde=mde,
        evidence=evidence,
        precondition=precondition,
    )


@named(SHRINKAGE_NAME)
def shrinkage_finding(table: pd.DataFrame, gained: pd.DataFrame, precondition: str | None = None) -> Finding:
    claim = (
        "a gated FFN shrinks the intervention's gain: GELU gains more than SwiGLU/GEGLU "
        "(Zhu et al. 2026 §3, Table 4: 0.5858 vs 0.1075 ppl, 1.78% of the control's perplexity)"
    )
    usable = table[table.seeds >= 2]
    if usable.empty:
        return decide(
            claim,
            rule=SHRINKAGE_RULE,
            holds=None,
            null=Null("sign flips of the pairs", None, "not run"),
            mde=MDE(None, None, "ppl", "no gated architecture with two or more seeds beside GELU"),
            evidence="no gated architecture with two or more paired seeds beside GELU",
        )
    gelu = gained[(gained.arch == "gelu") & (gained.arm == "intervention")]
    ppl = float(gelu.control_val_ppl.iloc[0]) if len(gelu) else math.nan
    effect = float(PAPER_SHRINKAGE * ppl)
    parts = [
        f"{r.arch}: GELU's gain minus {r.arch}'s {r.shrinkage_mean:+.4f} +- {r.shrinkage_sd:.4f} ppl "
        f"(95% interval {_interval(r.shrinkage_lo, r.shrinkage_hi)}, within +-"
        f"{max(abs(r.shrinkage_lo), abs(r.shrinkage_hi)):.4f}; MDE {r.shrinkage_mde:.4f})"
        for r in usable.itertuples()
    ]
    rule = above(0.0)
    holds = bool(all(rule(d) for d in usable.differences))
    shares = [sign_flip_share(d, rule) for d in usable.differences]
    null = Null(
        f"sign flips of each gated FFN's pairs: {SIGN_FLIPS}",
        bool(max(shares) > FPR_MAX),
        "; ".join(
            f"{a}: the rule holds on {s:.1%} of the sign patterns" for a, s in zip(usable.arch, shares, strict=True)
        ),
    )
    worst = float(usable.shrinkage_mde.max())
    powers = [_power(calibration.shrinkage_calibration, r.seeds, r.shrinkage_sd / ppl) for r in usable.itertuples()]
    mde = MDE(
        worst if math.isfinite(worst) else None,
        effect,
        "ppl",
        f"paired t over {int(usable.seeds.min())}+ seeds (5% two-sided, 80% power), the largest over gated "
        "FFNs; the paper's effect is its 1.78% of this run's GELU control perplexity; power simulated at it, the "
        "smallest over gated FFNs",
        power=None if None in powers or not math.isfinite(ppl) else min(powers),
    )
    gelu_gain = gelu.ppl_gain_lo.iloc[0] > 0 if len(gelu) else False
    if precondition is None and not gelu_gain:
        precondition = "GELU itself shows no gain beyond its interval, so there is no gain for a gated FFN to shrink"
    if precondition and mde.adequate is False:
        precondition += f"; and underpowered besides: {_short(mde)}"
    return decide(
        claim,
        rule=SHRINKAGE_RULE,
        holds=holds,
        null=null,
        mde=mde,
        evidence="; ".join(parts),
        precondition=precondition,
    )


@named(RELIANCE_NAME)
def reliance_finding(table: pd.DataFrame, precondition: str | None = None) -> Finding:
    """Finding 4: at the end the intervention's model relies less on upper Q/K than the control's."""
    claim = (
        "the intervention leaves the model less reliant on upper Q/K: zeroing them at the end raises the "
        "control's perplexity more than the intervention's (Zhu et al. 2026 §5.3, Fig. 3D: +146.1 vs +17.4 "
        "ppl, 4.8x the control's perplexity apart)"
    )
    gaps = list(table.get("final_reliance_gap", pd.Series(dtype=float)))
    stats = paired_interval(gaps)
    rule = above(0.0)
    lines = [
        f"{r.arch} seed {r.seed}: early (step {r.early_step}) {r.early_dppl_control:+.3f} vs "
        f"{r.early_dppl_intervention:+.3f} ppl, final {r.final_dppl_control:+.3f} vs "
        f"{r.final_dppl_intervention:+.3f} ppl"
        for r in table.itertuples()
        if {"early_dppl_intervention", "final_dppl_intervention"} <= set(table.columns)
    ]
    evidence = (
        "control vs intervention, perplexity rise from zeroing upper Q/K: "
        + "; ".join(lines)
        + f"; the final gap relative to the control's perplexity {stats['mean']:+.2%} "
        f"(95% interval {_percent_interval(stats['lo'], stats['hi'])})"
    )
    return decide(
        claim,
        rule=RELIANCE_RULE,
        holds=rule(gaps) if stats["n"] >= 2 else None,
        null=sign_flip_null(gaps, rule),
        mde=_mde(gaps, PAPER_RELIANCE, "of the control's perplexity", calibration.reliance_calibration),
        evidence=evidence,
        precondition=precondition,
    )


@named(DELAY_NAME)
def routing_finding(table: pd.DataFrame, matured: pd.DataFrame, steps: int) -> Finding:
    """Finding 5: the intervention does not delay lower-copy routing."""
    claim = (
        "the intervention does not delay lower-layer copy routing: lower-copy maturity comes at the same "
        "point of training as in the control (Zhu et al. 2026 §5.4, Fig. 3A: 3% in both)"
    )
    rule = below(DELAY_MARGIN)
    d, null_d = list(table.delay), list(table.null_delay)
    stats = paired_interval(d)
    released = matured[matured.arm == "intervention"]
    evidence = (
        ", ".join(
            f"{r.arch} seed {r.seed}: control matures at step {_step(r.control_matured_at)}, "
            f"intervention at {_step(r.intervention_matured_at)}"
            for r in table.itertuples()
        )
        + f"; delay {stats['mean']:+.2%} of training (95% interval {_percent_interval(stats['lo'], stats['hi'])}); "
        "the interventions released at "
        + ", ".join(
            f"{r.released_at / steps:.1%}" if pd.notna(r.released_at) else "never" for r in released.itertuples()
        )
        + " (the paper's Table 8: 4.01%)"
    )
    censored = table[table.control_censored]
    precondition = (
        (
            "lower-copy routing did not mature in the control by its last reading in "
            + ", ".join(f"{r.arch} seed {r.seed}" for r in censored.itertuples())
            + ": there is no maturity to delay"
        )
        if len(censored)
        else None
    )
    # an arm that really delays lower-layer routing would be one more run per seed and a training option the study
    # does not have (``specialization.calibration``); its rule is calibrated on simulated delays instead
    null = Null(
        "the untrained model at each control's seed: its lower-copy score stays at its initial reading, "
        "so it matures at the first reading or never (dated at the last)",
        rule(null_d) if len(null_d) >= 2 and all(map(math.isfinite, null_d)) else None,
        "delay " + ", ".join(f"{x:+.2%}" for x in null_d),
    )
    return decide(
        claim,
        rule=DELAY_RULE,
        holds=rule(d) if stats["n"] >= 2 else None,
        null=null,
        mde=_mde(d, DELAY_MARGIN, "of training", calibration.routing_calibration),
        evidence=evidence,
        precondition=precondition,
    )


def _step(value: float) -> str:
    return "never" if pd.isna(value) else str(int(value))


@named(SLOWS_NAME)
def early_check(table: pd.DataFrame) -> Finding:
    """The intervention acts as defined: a software check, not a finding (Q/K that learn 4x slower from the
    same initialization have smaller logits and flatter rows before release whatever the paper claims)."""
    claim = (
        "check: the intervention slows upper Q/K as defined: at its last evaluation before release, upper "
        "logits lower and upper entropy higher than the control's in every pair (Zhu et al. 2026 §5.3-5.4)"
    )
    if "step" not in table or table.step.isna().any():
        missing = table[table.get("step", pd.Series(math.nan, table.index)).isna()]
        return Finding(
            claim,
            "check failed",
            "no evaluation fell before the release step in "
            + ", ".join(f"{r.arch} seed {r.seed}" for r in missing.itertuples())
            + "; evaluate more often",
        )
    held = (table.upper_logit_intervention < table.upper_logit_control) & (
        table.upper_entropy_intervention > table.upper_entropy_control
    )
    lines = [
        f"{r.arch} seed {r.seed} at step {r.step}: logit {r.upper_logit_intervention:.3f} vs "
        f"{r.upper_logit_control:.3f}, entropy {r.upper_entropy_intervention:.3f} vs {r.upper_entropy_control:.3f}"
        for r in table.itertuples()
    ]
    return Finding(
        claim,
        "check passed" if held.all() else "check failed",
        f"{int(held.sum())} of {len(held)} pairs: " + "; ".join(lines) + ".",
    )


@named(PATHWAY_NAME)
def pathway_finding(
    cuts: pd.DataFrame, table: pd.DataFrame, null_ratios: Sequence[float], step: int | None = None
) -> Finding:
    """The residual-write mechanism (Zhu et al. 2026 §4, Table 5, App. C): at 3% of training every gated FFN writes
    less into the upper half's residual stream than GELU and than a width-matched GELU, paired by seed.

    ``cuts``: ``tables.write_cuts`` over ``plan.PATHWAY_COMPARISONS``; ``table``: ``tables.table5`` (the logit and
    entropy beside the writes, per architecture); ``null_ratios``: the per-seed log ratios of GELU controls of other
    seeds over GELU's (a real world without the effect), which the same rule must not pass."""
    claim = (
        "at 3% of training the gated FFNs (SwiGLU, GEGLU) write less into the upper half's residual stream than GELU "
        "and than a GELU of their hidden width (Zhu et al. 2026 §4, Table 5: upper FFN write RMS -55.0% and -52.4% "
        "against GELU-3840, -42.2% and -38.9% against GELU-2560; the paper's same checkpoints also have lower upper "
        "logits and higher upper entropy, shown beside, not decided here)"
    )
    ratios = [list(r) for r in cuts.ratios] if len(cuts) else []
    at = "" if step is None else f" (step {step})"
    if len(cuts) == 0 or int(cuts.seeds.min()) < 2:
        return decide(
            claim,
            rule=PATHWAY_RULE,
            holds=None,
            null=Null("GELU against GELU of other seeds", None, "not run"),
            mde=MDE(None, None, "log ratio", "fewer than two paired seeds of some pathway architecture"),
            evidence="fewer than two paired seeds of some pathway architecture at 3%" + at,
            precondition="the pathway runs at 3% are missing or hold fewer than two paired seeds per architecture: "
            "rerun the study command to train them",
        )
    parts = [
        f"{PATHWAY_LABELS.get(r.gated, r.gated)} against {PATHWAY_LABELS.get(r.reference, r.reference)}: upper write "
        f"{-r.cut_mean:+.1%} (95% interval {_percent_interval(-r.cut_hi, -r.cut_lo)}, {r.seeds} seeds; the paper "
        f"{math.expm1(PAPER_WRITE_CUTS[(r.gated, r.reference)]):+.1%})"
        for r in cuts.itertuples()
    ]
    rows = [
        f"{r['Architecture']} {r['Upper logit']:.3f} / {r['Upper entropy']:.3f} (paper {r['Upper logit (paper)']:.3f} "
        f"/ {r['Upper entropy (paper)']:.3f})"
        for r in table.to_dict("records")
    ]
    null_stats = paired_interval(null_ratios)
    null_holds = write_cut([null_ratios]) if null_stats["n"] >= 2 else None
    null = Null(
        "GELU against GELU: GELU controls of as many other seeds over each seed's GELU control (no FFN differs)",
        null_holds,
        f"{null_stats['n']} pairs: upper write {math.expm1(null_stats['mean']):+.1%} "
        f"(95% interval {_percent_interval(math.expm1(null_stats['lo']), math.expm1(null_stats['hi']))})",
    )
    n, sd = int(cuts.seeds.min()), float(cuts.log_ratio_sd.max())
    effect = min(abs(v) for v in PAPER_WRITE_CUTS.values())
    value = paired_mde(sd, n, alpha=0.10)
    mde = MDE(
        float(value) if math.isfinite(value) else None,
        effect,
        "log ratio",
        f"one-sided paired t at 5% over {n} seeds, 80% power, at the largest sd of the four comparisons' log ratios "
        f"({sd:.3g}); the paper's smallest effect is -38.9% (log ratio -{effect:.3f}); power simulated at Table 5's "
        "four effects and this sd",
        power=_power(calibration.pathway_calibration, n, sd),
    )
    holds = write_cut(ratios)
    evidence = "; ".join(parts) + f". Upper logit / entropy at 3%{at}: " + ", ".join(rows) + _beside(table)
    return decide(
        claim,
        rule=PATHWAY_RULE,
        holds=holds,
        null=null,
        mde=mde,
        evidence=evidence,
        reads={"log ratios of the upper write": [x for r in ratios for x in r]},
        null_reads={"GELU / GELU log ratios": list(null_ratios)},
    )


def _beside(table: pd.DataFrame) -> str:
    """Whether the run's means of upper logit and entropy go the paper's way (every gated FFN's logit below and
    entropy above both GELUs'), in words: context for the write, not part of the rule."""
    rows = table.set_index("Architecture")
    gated = [PATHWAY_LABELS[a] for a in ("swiglu", "geglu") if PATHWAY_LABELS[a] in rows.index]
    refs = [PATHWAY_LABELS[a] for a in ("gelu", "gelu_matched") if PATHWAY_LABELS[a] in rows.index]
    if not gated or not refs:
        return ""
    logit = all(rows.loc[g, "Upper logit"] < rows.loc[r, "Upper logit"] for g in gated for r in refs)
    entropy = all(rows.loc[g, "Upper entropy"] > rows.loc[r, "Upper entropy"] for g in gated for r in refs)
    return (
        "; the paper's direction beside the write (the gated FFNs' upper logit below both GELUs', their upper "
        f"entropy above both) in this run: logit {'yes' if logit else 'no'}, entropy {'yes' if entropy else 'no'}"
    )
