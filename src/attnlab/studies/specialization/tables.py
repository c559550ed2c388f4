"""The per-seed tables the ``specialization`` study's findings read (Zhu et al. 2026 §3, §5.3-§5.4, Tables 1 and 4,
Fig. 3): each seed's pair of control and arm (final gains, tokens to the control's loss), GELU's gain minus each
gated FFN's, upper logit and entropy before release, the perplexity rise from zeroing upper Q/K, the step
lower-copy routing matures in every run and the intervention's delay of it behind the control's; and the residual-write
pathway at 3% (§4, Table 5): each comparison's per-seed log ratio of the upper FFN write and the Table 5 shaped
summary. Pure functions of the runs, curves and readings tables the study reads back from its run folders."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from attnlab.diagnostics.paired import paired_interval, paired_mde
from attnlab.studies.specialization.plan import ARCHS, GATED, run_name
from attnlab.studies.specialization.rules import PAPER_PATHWAY
from attnlab.train.config import InterventionConfig
from attnlab.train.release import maturity, reading_interval, replay, rule_score


def pairs(runs: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """Per (arch, arm other than control, seed): the gains control - arm of final validation loss and
    perplexity (positive = the arm is better; the seed's "PPL reduction") and the tokens the arm took to
    reach its control's last evaluated loss (first evaluation at or below it, on the evaluations' own
    batches; NaN if never)."""
    control = runs[runs.arm == "control"].set_index(["arch", "seed"])
    out = []
    for r in runs[runs.arm != "control"].itertuples():
        ref = control.loc[(r.arch, r.seed)]
        mine = curves[curves.run == r.run]
        reached = mine[mine.val_loss <= ref.last_eval_val_loss]
        out.append(
            {
                "arch": r.arch,
                "arm": r.arm,
                "seed": r.seed,
                "control_val_loss": ref.final_val_loss,
                "arm_val_loss": r.final_val_loss,
                "loss_gain": ref.final_val_loss - r.final_val_loss,
                "control_val_ppl": ref.final_val_ppl,
                "arm_val_ppl": r.final_val_ppl,
                "ppl_gain": ref.final_val_ppl - r.final_val_ppl,
                "released_at": r.released_at,
                "tokens_to_control_final_loss": float(reached.tokens.iloc[0]) if len(reached) else math.nan,
            }
        )
    return pd.DataFrame(out)


def shrinkage(table: pd.DataFrame) -> pd.DataFrame:
    """Per gated architecture: the per-seed perplexity gain of GELU minus its own (the same seed trains both
    pairs on the same data order, on the seeds both have), with mean, sd, t interval and MDE; positive = the
    gated FFN gains less. ``differences`` keeps the per-seed values for the sign-flip null."""
    mine = table[table.arm == "intervention"].set_index(["arch", "seed"]).ppl_gain
    out = []
    for arch in [a for a in mine.index.get_level_values(0).unique() if ARCHS[a]["ffn"] in GATED]:
        seeds = sorted(set(mine.loc["gelu"].index) & set(mine.loc[arch].index)) if "gelu" in mine.index else []
        d = [float(mine.loc[("gelu", s)] - mine.loc[(arch, s)]) for s in seeds]
        stats = paired_interval(d)
        out.append(
            {
                "arch": arch,
                "seeds": stats["n"],
                **{f"shrinkage_{k}": stats[k] for k in ("mean", "sd", "lo", "hi")},
                "shrinkage_mde": paired_mde(stats["sd"], stats["n"]),
                "differences": d,
            }
        )
    return pd.DataFrame(
        out,
        columns=[
            "arch",
            "seeds",
            "shrinkage_mean",
            "shrinkage_sd",
            "shrinkage_lo",
            "shrinkage_hi",
            "shrinkage_mde",
            "differences",
        ],
    )


def early(runs: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """Per (arch, seed), at the intervention's last evaluation before its release: upper logit and entropy of
    the control and the intervention (the same step of both runs)."""
    rows = []
    for r in runs[runs.arm == "intervention"].itertuples():
        released = r.released_at if pd.notna(r.released_at) else math.inf
        inside = curves[(curves.run == r.run) & (curves.step <= released)]
        row = {"arch": r.arch, "seed": r.seed, "released_at": r.released_at}
        if not inside.empty:
            step = int(inside.step.max())
            at = curves[curves.step == step].set_index("run")
            runs_at = {"control": run_name(r.arch, "control", r.seed), "intervention": r.run}
            row.update(
                step=step,
                **{
                    f"{k}_{arm}": float(at.loc[name, k])
                    for k in ("upper_logit", "upper_entropy")
                    for arm, name in runs_at.items()
                },
            )
        rows.append(row)
    return pd.DataFrame(rows)


def zeroing(
    runs: pd.DataFrame, curves: pd.DataFrame, earliest: int, matured: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per (arch, seed): the perplexity rise from zeroing upper Q/K (Zhu et al. 2026 §5.3, on the first
    evaluation batch), relative to the same model's perplexity on that batch, in the control and the
    intervention early and at the final evaluation, and in the untrained model (the null of finding 1).

    Early is the first evaluation from the control's lower-copy maturity (``matured``: ``maturities``' table)
    and from step ``earliest`` (3% of training): the seed reads 3%, where its lower routing matures (Fig. 3A),
    and premature means upper Q/K already matter when the lower routing they attend over has just matured."""
    rows = []
    for r in runs[runs.arm == "intervention"].itertuples():
        names = {"control": run_name(r.arch, "control", r.seed), "intervention": r.run}
        row: dict[str, Any] = {"arch": r.arch, "seed": r.seed}
        start = earliest
        if matured is not None:
            control = matured[matured.run == names["control"]]
            if len(control) and pd.notna(control.matured_at.iloc[0]):
                start = max(earliest, int(control.matured_at.iloc[0]))
        for arm, name in names.items():
            mine = curves[curves.run == name].sort_values("step")
            for when, at in (("early", mine[mine.step >= start].head(1)), ("final", mine.tail(1))):
                if at.empty:
                    continue
                row[f"{when}_step"] = int(at.step.iloc[0])
                row[f"{when}_ppl_{arm}"] = float(at.ppl.iloc[0])
                row[f"{when}_dppl_{arm}"] = float(at.dppl_zero_qk.iloc[0])
                row[f"{when}_rel_{arm}"] = float(at.dppl_zero_qk.iloc[0] / at.ppl.iloc[0])
        control = runs[runs.run == names["control"]]
        if "untrained_dppl_zero_qk" in control:
            row["untrained_rel"] = float(control.untrained_dppl_zero_qk.iloc[0] / control.untrained_ppl.iloc[0])
        if {"final_dppl_control", "final_dppl_intervention"} <= row.keys():
            # in units of the control's perplexity on the batch, as the paper's effect is carried over
            row["final_reliance_gap"] = (row["final_dppl_control"] - row["final_dppl_intervention"]) / row[
                "final_ppl_control"
            ]
        rows.append(row)
    return pd.DataFrame(rows)


def maturities(runs: pd.DataFrame, readings: pd.DataFrame, rule: InterventionConfig, steps: int) -> pd.DataFrame:
    """Per run: the step its lower-copy routing matures (``release.maturity`` on its readings; NaN if never up
    to the last reading), the release the rule gives on those readings (``release.replay``: the intervention's
    own release; for a control, where the rule would have released it) and the run's actual release."""
    rows = []
    for r in runs.itertuples():
        mine = readings[readings.run == r.run]
        logged = list(zip(mine.step.astype(int), mine.lower_copy, mine.lower_copy_chance, strict=True))
        matured = maturity(rule, logged)
        replayed = replay(rule, steps, logged)
        rows.append(
            {
                "run": r.run,
                "arch": r.arch,
                "arm": r.arm,
                "seed": r.seed,
                "readings": len(logged),
                "last_reading": int(mine.step.max()) if len(mine) else math.nan,
                "matured_at": math.nan if matured is None else matured,
                "matured_fraction": math.nan if matured is None else matured / steps,
                "rule_release": replayed.released_at,
                "rule_release_fraction": replayed.released_at / steps if replayed.released_at is not None else math.nan,
                "rule_reason": replayed.reason,
                "released_at": r.released_at,
                "release_reason": r.release_reason,
            }
        )
    return pd.DataFrame(rows)


def delays(matured: pd.DataFrame, runs: pd.DataFrame, rule: InterventionConfig, steps: int) -> pd.DataFrame:
    """Per (arch, seed): the delay of the intervention's lower-copy maturity behind the control's, as a fraction
    of training (a run that never matured is dated at its last reading, so its delay is a lower bound), and the
    null's: the untrained model, whose score stays at its initial reading, against the same control (it matures
    at the first reading if that reading already reaches the threshold, else never)."""
    rows = []
    last = min(matured.last_reading.dropna(), default=math.nan)
    for r in matured[matured.arm == "intervention"].itertuples():
        control = matured[(matured.arch == r.arch) & (matured.seed == r.seed) & (matured.arm == "control")]
        if control.empty:
            continue
        c = control.iloc[0]
        dated = {
            name: (row.last_reading if math.isnan(row.matured_at) else row.matured_at)
            for name, row in (("control", c), ("intervention", r))
        }
        runs_c = runs[runs.run == c.run]
        untrained = math.nan
        if "untrained_lower_copy" in runs_c:
            score = rule_score(
                rule, float(runs_c.untrained_lower_copy.iloc[0]), float(runs_c.untrained_lower_copy_chance.iloc[0])
            )
            untrained = (
                (reading_interval(rule, steps) if score >= rule.threshold else last)
                if math.isfinite(last)
                else math.nan
            )
        rows.append(
            {
                "arch": r.arch,
                "seed": r.seed,
                "control_matured_at": c.matured_at,
                "intervention_matured_at": r.matured_at,
                "delay": (dated["intervention"] - dated["control"]) / steps,
                "null_delay": (untrained - dated["control"]) / steps,
                "control_censored": bool(math.isnan(c.matured_at)),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "arch",
            "seed",
            "control_matured_at",
            "intervention_matured_at",
            "delay",
            "null_delay",
            "control_censored",
        ],
    )


# the readings of one pathway control at 3% (``study.read_pathway``): Table 5's columns
PATHWAY_READS = ("upper_ffn_write_rms", "first_upper_write_rms", "upper_logit", "upper_entropy")
# Table 5's row names: GELU-3840 and GELU-2560 at the paper's d_model 960
PATHWAY_LABELS = {"gelu": "GELU (4d)", "gelu_matched": "GELU (gated width)", "swiglu": "SwiGLU", "geglu": "GEGLU"}


def write_ratios(table: pd.DataFrame, gated: str, reference: str, seeds: Sequence[int]) -> list[float]:
    """Per seed of ``seeds`` (in order): log(gated / reference) of the upper-half FFN write RMS at the 3% evaluation,
    the same seed's two controls (same initialization draw and data order); NaN where either is missing."""
    rms = table.set_index(["arch", "seed"]).upper_ffn_write_rms
    out = []
    for s in seeds:
        a, b = rms.get((gated, s), math.nan), rms.get((reference, s), math.nan)
        out.append(float(np.log(a / b)) if a > 0 and b > 0 else math.nan)
    return out


def write_cuts(table: pd.DataFrame, comparisons: Sequence[tuple[str, str]], seeds: Sequence[int]) -> pd.DataFrame:
    """Per (gated, reference): the per-seed log ratios (``ratios``), their mean, sd, one-sided 95% upper bound and
    two-sided 95% interval, and the same as a reduction in % of the reference's write (1 - exp(log ratio): positive =
    the gated FFN writes less)."""
    rows = []
    for gated, reference in comparisons:
        d = write_ratios(table, gated, reference, seeds)
        two, one = paired_interval(d), paired_interval(d, level=0.90)
        rows.append(
            {
                "gated": gated,
                "reference": reference,
                "seeds": two["n"],
                "log_ratio_mean": two["mean"],
                "log_ratio_sd": two["sd"],
                "log_ratio_one_sided_hi": one["hi"],
                "log_ratio_lo": two["lo"],
                "log_ratio_hi": two["hi"],
                "cut_mean": 1 - math.exp(two["mean"]) if math.isfinite(two["mean"]) else math.nan,
                "cut_lo": 1 - math.exp(two["hi"]) if math.isfinite(two["hi"]) else math.nan,
                "cut_hi": 1 - math.exp(two["lo"]) if math.isfinite(two["lo"]) else math.nan,
                "ratios": d,
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "gated",
            "reference",
            "seeds",
            "log_ratio_mean",
            "log_ratio_sd",
            "log_ratio_one_sided_hi",
            "log_ratio_lo",
            "log_ratio_hi",
            "cut_mean",
            "cut_lo",
            "cut_hi",
            "ratios",
        ],
    )


def table5(table: pd.DataFrame, widths: dict[str, int], seeds: Sequence[int]) -> pd.DataFrame:
    """Zhu et al. 2026 Table 5 beside this run's: per pathway architecture (``widths``: its FFN hidden width), the mean
    over ``seeds`` of the upper-half FFN write RMS, upper logit, upper entropy and first-upper write RMS at the 3%
    evaluation, each with the paper's value next to it (the paper's widths are 3840 and 2560 at d_model 960)."""
    rows = []
    for arch, width in widths.items():
        mine = table[(table.arch == arch) & table.seed.isin(list(seeds))]
        paper = PAPER_PATHWAY[arch]
        row: dict[str, Any] = {"Architecture": PATHWAY_LABELS.get(arch, arch), "FFN hidden width": width}
        row["Seeds"] = len(mine)
        for (label, column), value in zip(
            (
                ("Upper FFN write RMS", "upper_ffn_write_rms"),
                ("Upper logit", "upper_logit"),
                ("Upper entropy", "upper_entropy"),
                ("First-upper write RMS", "first_upper_write_rms"),
            ),
            paper,
            strict=True,
        ):
            row[label] = float(mine[column].mean()) if len(mine) else math.nan
            row[f"{label} (paper)"] = value
        rows.append(row)
    return pd.DataFrame(rows)
