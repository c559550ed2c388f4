"""The per-seed tables the ``specialization`` study's findings read (Zhu et al. 2026 §3, §5.3-§5.4, Tables 1 and 4,
Fig. 3): each seed's pair of control and arm (final gains, tokens to the control's loss), GELU's gain minus each
gated FFN's, upper logit and entropy before release, the perplexity rise from zeroing upper Q/K, the step
lower-copy routing matures in every run and the intervention's delay of it behind the control's. Pure functions
of the runs, curves and readings tables the study reads back from its run folders."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from attnlab.diagnostics.paired import paired_interval, paired_mde
from attnlab.studies.specialization.plan import ARCHS, GATED, run_name
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
