"""The ``specialization`` study (Zhu et al. 2026 §2-§5, App. C, F): does slowing the
upper half's W_Q and W_K early in pretraining (learning-rate multiplier 0.25 until the lower-copy maturity
rule releases it) delay upper-layer attention specialization, and what does it do to the loss?

Four runs from the same initialization and data order: GELU control, GELU intervention, and the same pair
with a matched-width SwiGLU FFN (§3). Each run logs the seed's probes at every evaluation (``eval.csv``,
``attnlab.train.probes``): validation loss, upper-half attention entropy and logit magnitude, the top
singular value of the upper W_Q^T W_K, the perplexity increase when the upper Q/K are zeroed (causal
readout), and the lower-copy score that drives the release rule.

The finding (Zhu et al. 2026 §5.3-5.4): the intervention lowers early upper-Q/K logit growth and raises
early upper entropy relative to control. "Early" is the intervention run's window before release (Zhu et al.
2026 §2: the multiplier holds until the rule fires at 3-12% of training); the pairs are compared at the last
evaluation inside it, where both runs have seen the same data from the same weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from .. import io
from ..report.plot_specialization import plot_probe_curves
from ..report.sections import Figure, Finding, Section, Table
from ..train.config import RunConfig
from ..train.trainer import Trainer, outcome
from .runner import Study, StudyConfig, load_config, register, section

MULTIPLIER = 0.25  # Zhu et al. 2026 §2
RUNS = {"gelu_control": ("gelu", 1.0), "gelu_intervention": ("gelu", MULTIPLIER),
        "swiglu_control": ("swiglu", 1.0), "swiglu_intervention": ("swiglu", MULTIPLIER)}
CURVES = ("val_loss", "upper_entropy", "upper_logit", "upper_qk_sigma_max", "dppl_zero_qk", "lower_copy")

# smoke: a byte-level decoder on the standard library's .py files, a minute per run on two CPU cores; the
# evaluations every 3% of training let the release rule (3 evaluations in a row, not before 3%) fire inside
# the seed's 3-12% window. full: Zhu et al. 2026's GPT-2-small shape (12 x 12 x 768, context 1024).
BUDGETS: dict[str, dict[str, Any]] = {
    "smoke": {"layers": 4, "heads": 4, "d_model": 64, "context": 128, "steps": 300, "batch": 16, "lr": 3e-3,
              "eval_every": 9, "eval_batches": 1, "max_tokens": 1_000_000, "precision": "fp32"},
    "full": {"layers": 12, "heads": 12, "d_model": 768, "context": 1024, "steps": 20_000, "batch": 512,
             "lr": 6e-4, "eval_every": 100, "eval_batches": 8, "max_tokens": None, "precision": "bf16"},
}


def run_config(plan: dict[str, Any], ffn: str, multiplier: float, seed: int) -> RunConfig:
    model = {"context": plan["context"], "layers": plan["layers"], "heads": plan["heads"],
             "d_model": plan["d_model"], "ffn": ffn, "positions": "rope"}
    train = {"steps": plan["steps"], "batch": plan["batch"], "lr": plan["lr"], "min_lr": plan["lr"] / 10,
             "warmup": max(1, plan["steps"] // 50), "eval_every": plan["eval_every"],
             "eval_batches": plan["eval_batches"], "checkpoint_every": plan["eval_every"] * 5,
             "tensorboard": False, "seed": seed, "precision": plan["precision"]}
    return RunConfig.from_dict({"model": model, "data": {"max_tokens": plan["max_tokens"]}, "train": train,
                                "intervention": {"upper_qk_lr": multiplier}})


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    plan = BUDGETS[cfg.budget]
    for name, (ffn, multiplier) in RUNS.items():
        # A finished run only loads its last checkpoint and returns its summary.
        Trainer(run_config(plan, ffn, multiplier, cfg.seed), folder / "runs" / name, resume=True,
                progress=progress).run()


def read_runs(folder: Path) -> tuple[dict[str, dict[str, Any]], pd.DataFrame]:
    """run -> its settings and final figures (``trainer.outcome``), and every run's eval.csv stacked
    (columns run, step, tokens, CURVES): all from the runs' CSV logs and the study's config."""
    plan = BUDGETS[load_config(folder).budget]
    results, curves = {}, []
    for name, (ffn, multiplier) in RUNS.items():
        run = folder / "runs" / name
        results[name] = {"run": name, "ffn": ffn, "upper_qk_lr": multiplier, "summary": outcome(run)}
        frame = pd.read_csv(run / "eval.csv")
        curves.append(frame.assign(run=name, tokens=frame.step * plan["batch"] * plan["context"])
                      [["run", "step", "tokens", *CURVES]])
    return results, pd.concat(curves, ignore_index=True)


def outcomes(results: dict[str, dict[str, Any]], curves: pd.DataFrame) -> pd.DataFrame:
    """Per run: final validation loss and perplexity, release step, and the tokens it took to reach its
    pair's control's final loss (first evaluation at or below it; NaN if never)."""
    rows = []
    for name, result in results.items():
        ffn = result["ffn"]
        target = results[f"{ffn}_control"]["summary"]["val_loss"]
        mine = curves[curves.run == name]
        reached = mine[mine.val_loss <= target]
        rows.append({"run": name, "ffn": ffn, "upper_qk_lr": result["upper_qk_lr"],
                     "final_val_loss": result["summary"]["val_loss"], "final_val_ppl": result["summary"]["val_ppl"],
                     "released_at": result["summary"]["released_at"],
                     "tokens_to_control_final_loss": float(reached.tokens.iloc[0]) if len(reached) else float("nan")})
    return pd.DataFrame(rows)


def early(results: dict[str, dict[str, Any]], curves: pd.DataFrame) -> pd.DataFrame:
    """Per FFN pair, at the intervention's last evaluation before release: upper logit and entropy of both."""
    rows = []
    for ffn in ("gelu", "swiglu"):
        released = results[f"{ffn}_intervention"]["summary"]["released_at"]
        inside = curves[(curves.run == f"{ffn}_intervention") & (curves.step <= (released or float("inf")))]
        if inside.empty:
            rows.append({"ffn": ffn, "step": float("nan"), "released_at": released})
            continue
        step = int(inside.step.max())
        at = curves[curves.step == step].set_index("run")
        rows.append({"ffn": ffn, "step": step, "released_at": released,
                     **{f"{k}_{arm}": float(at.loc[f"{ffn}_{arm}", k])
                        for k in ("upper_logit", "upper_entropy") for arm in ("control", "intervention")}})
    return pd.DataFrame(rows)


def finding(table: pd.DataFrame) -> Finding:
    claim = ("the upper-Q/K intervention lowers early upper-layer logit growth and raises early upper-layer "
             "attention entropy relative to control (Zhu et al. 2026 §5.3-5.4)")
    if table.step.isna().any():
        return Finding(claim, "not checked", "no evaluation fell before the release step in "
                       + ", ".join(table.ffn[table.step.isna()]) + "; evaluate more often")
    held, lines = [], []
    for r in table.itertuples():
        ok = (r.upper_logit_intervention < r.upper_logit_control
              and r.upper_entropy_intervention > r.upper_entropy_control)
        held.append(ok)
        lines.append(f"{r.ffn} at step {r.step} (release at {r.released_at}): upper logit "
                     f"{r.upper_logit_intervention:.3f} vs control {r.upper_logit_control:.3f}, upper entropy "
                     f"{r.upper_entropy_intervention:.3f} vs control {r.upper_entropy_control:.3f}")
    return Finding(claim, "reproduced" if all(held) else "not reproduced", "; ".join(lines) + ".")


def summarize(folder: Path) -> Section:
    results, curves = read_runs(folder)
    table_out, table_early = outcomes(results, curves), early(results, curves)
    io.write_table(folder / "curves", curves)
    io.write_table(folder / "outcomes", table_out)
    io.write_table(folder / "early", table_early)
    released = {r["ffn"]: r["summary"]["released_at"] for r in results.values()
                if r["upper_qk_lr"] != 1.0 and r["summary"]["released_at"]}
    plot_probe_curves(curves, CURVES, released, folder / "curves")
    cfg = load_config(folder)
    plan = BUDGETS[cfg.budget]
    return section(
        "specialization", folder,
        question="Does slowing the upper layers' W_Q and W_K early in pretraining delay their attention "
                 "specialization, and does the model reach the control's loss sooner?",
        findings=(finding(table_early),),
        tables=(Table("early", "At the intervention's last evaluation before release: upper logit and entropy of "
                               "control and intervention, per FFN."),
                Table("outcomes", "Final validation loss and perplexity, release step, and tokens to reach the "
                                  "control's final loss (empty if never reached)."),
                Table("curves", "Every evaluation of every run: the probes over training.")),
        figures=(Figure("curves", "The Zhu et al. 2026 probes over training for the four runs (solid: control, dashed: "
                                  "intervention; blue GELU, orange SwiGLU). Left of the dotted release line the "
                                  "intervention's upper logit should sit below and its upper entropy above the "
                                  "control's."),),
        notes=(f"{cfg.budget} budget: {plan['layers']} layers x {plan['heads']} heads x {plan['d_model']} wide, "
               f"context {plan['context']}, {plan['steps']} steps of {plan['batch']} sequences on bytes of the "
               "Python standard library; the seed trains GPT-2-small-sized models for billions of tokens.",))


STUDY = register(Study(
    name="specialization", title="Premature upper-layer attention specialization",
    source="Zhu et al. 2026",
    compute=compute, summarize=summarize))
