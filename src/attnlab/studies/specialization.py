"""The ``specialization`` study (Zhu et al. 2026 §2-§5, Table 1, App. C-G): does slowing the upper half's
W_Q and W_K early in pretraining (learning-rate multiplier 0.25 until the lower-copy maturity rule releases
it) improve the final validation loss, and does a gated FFN shrink that gain?

Paired design, as the seed's Table 1: per architecture and seed, a control and an intervention run from
the same initialization and data order (the seed fixes both; the intervention changes no parameter, only
the upper Q/K learning rate), and more arms (``ARMS``: fixed releases, global learning rate x0.5, entropy
floor, other multipliers) when the budget names them. The headline is read from the paired differences
control - arm of final validation loss and perplexity, one per seed: their mean, sample standard deviation
and Student-t 95% interval. Each run logs the seed's probes at every evaluation (``eval.csv``,
``attnlab.train.probes``), with the lower-copy score beside uniform attention's score on the same batch.

Findings: (1) the intervention lowers the final validation perplexity of the GELU model (the interval of the
paired gain lies above 0); (2) the gain is smaller with a gated FFN (the interval of the per-seed gain of
GELU minus that of the gated FFN lies above 0); (3) at the intervention's last evaluation before release,
upper logits are lower and upper entropy higher than the control's (§5.3-5.4), in every pair.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .. import io
from ..diagnostics.stats import paired_interval
from ..model.decoder import loss
from ..registry import Registry
from ..report.plot_specialization import plot_probe_curves
from ..report.sections import Figure, Finding, Section, Table
from ..train.config import RunConfig
from ..train.trainer import Trainer
from ..workers import run_all
from .runner import Study, StudyConfig, StudyError, load_config, register, section

MULTIPLIER = 0.25  # Zhu et al. 2026 §2
FINAL = "final_eval.json"
CURVES = ("val_loss", "upper_entropy", "upper_logit", "upper_qk_sigma_max", "dppl_zero_qk", "lower_copy_excess")

# Architectures: model-field changes over the plan's shape (Zhu et al. 2026 §3-§4, Tables 3-5); gated FFNs
# have the matched width of §4.
ARCHS: Registry[dict[str, Any]] = Registry("specialization architecture")
ARCHS.register("gelu", {"ffn": "gelu"})
ARCHS.register("swiglu", {"ffn": "swiglu"})
ARCHS.register("geglu", {"ffn": "geglu"})
ARCHS.register("gelu_rmsnorm", {"ffn": "gelu", "norm": "rmsnorm"})
ARCHS.register("gelu_biasless", {"ffn": "gelu", "bias": False})
ARCHS.register("llama", {"ffn": "swiglu", "norm": "rmsnorm", "bias": False})
GATED = ("swiglu", "geglu")

# Arms: intervention-table fields and a scale of the learning rate, over the plan's run. "control" is the
# pair's reference and must come first.
ARMS: Registry[dict[str, Any]] = Registry("specialization arm")
ARMS.register("control", {})
ARMS.register("intervention", {"intervention": {"upper_qk_lr": MULTIPLIER}})
# App. G, Table 10: the multiplier sweep
ARMS.register("intervention_m0.5", {"intervention": {"upper_qk_lr": 0.5}})
ARMS.register("intervention_m0.125", {"intervention": {"upper_qk_lr": 0.125}})
# App. F, Table 9: the same multiplier released at a fixed step
ARMS.register("fixed_3", {"intervention": {"upper_qk_lr": MULTIPLIER, "release": "fixed", "release_at": 0.03}})
ARMS.register("fixed_6", {"intervention": {"upper_qk_lr": MULTIPLIER, "release": "fixed", "release_at": 0.06}})
# App. D: the entropy floor lambda max(0, h0 - H_upper), lambda 0.10, h0 0.80, without the multiplier
ARMS.register("entropy_floor", {"intervention": {"entropy_floor": 0.10}})
# App. E: the whole run at half the learning rate, no intervention
ARMS.register("global_lr_half", {"lr_scale": 0.5})

# smoke: byte-level decoders on the standard library's .py files, all runs within 30 minutes on two CPU cores
# (two at a time); the final loss is read on 64 validation batches (131K tokens), the evaluations on 4
# (at 600 steps and 4 batches the paired loss gains spread by 0.012 over seeds). The rule compares the excess of the lower-copy score over uniform attention's (about
# 0.02 at context 128, above the seed's threshold 0.005 by itself), evaluated every 2% of training so that
# four evaluations fall in the 3-12% window. full: Zhu et al. 2026 §4 and App. J: 20 layers x 960 wide x 15
# heads, context 1024, 2.5B tokens in batches of 512 x 1024 tokens (4,768 steps), AdamW lr 2.5e-4 with
# cosine decay to 10% after 2% warmup, weight decay 0.1, betas (0.9, 0.95), bf16; evaluations every 0.5% of
# training as the seed's Table 8 cadence implies.
BUDGETS: dict[str, dict[str, Any]] = {
    "smoke": {"layers": 4, "heads": 4, "d_model": 64, "context": 128, "steps": 1500, "batch": 16, "accum": 1,
              "lr": 3e-3, "min_lr": 3e-4, "warmup": 30, "weight_decay": 0.1, "betas": (0.9, 0.95),
              "eval_every": 30, "eval_batches": 4, "final_batches": 64, "max_tokens": 2_000_000, "precision": "fp32",
              "archs": ("gelu", "swiglu"), "arms": ("control", "intervention"), "controls": (), "seeds": 3,
              "score": "excess"},
    "full": {"layers": 20, "heads": 15, "d_model": 960, "context": 1024, "steps": 4768, "batch": 512, "accum": 16,
             "lr": 2.5e-4, "min_lr": 2.5e-5, "warmup": 95, "weight_decay": 0.1, "betas": (0.9, 0.95),
             "eval_every": 24, "eval_batches": 8, "final_batches": 32, "max_tokens": None, "precision": "bf16",
             "archs": ("gelu", "swiglu", "geglu", "gelu_rmsnorm", "gelu_biasless", "llama"),
             "arms": ("control", "intervention"),
             "controls": ("fixed_3", "fixed_6", "global_lr_half", "entropy_floor", "intervention_m0.5",
                          "intervention_m0.125"),
             "seeds": 3, "score": "raw"},
}
# What attnlab demo runs: smoke's pairs and seeds over 600 steps (about a third of smoke's time).
BUDGETS["demo"] = {**BUDGETS["smoke"], "steps": 600, "warmup": 12, "eval_every": 12}


def run_name(arch: str, arm: str, seed: int) -> str:
    return f"{arch}_{arm}_seed{seed}"


def plan_runs(plan: dict[str, Any], first_seed: int) -> list[tuple[str, str, int]]:
    """(arch, arm, seed) of every run: each architecture's arms, and the controls (App. D-G) for the first
    architecture only, as the seed runs them for its GPT-style model."""
    seeds = [first_seed + i for i in range(plan["seeds"])]
    runs = [(arch, arm, s) for arch in plan["archs"] for arm in plan["arms"] for s in seeds]
    return runs + [(plan["archs"][0], arm, s) for arm in plan["controls"] for s in seeds]


def run_config(plan: dict[str, Any], arch: str, arm: str, seed: int, shards: str | None = None) -> RunConfig:
    changes = ARMS.find(arm)
    scale = changes.get("lr_scale", 1.0)
    model = {"context": plan["context"], "layers": plan["layers"], "heads": plan["heads"],
             "d_model": plan["d_model"], "positions": "rope", **ARCHS.find(arch)}
    train = {"steps": plan["steps"], "batch": plan["batch"], "accum": plan["accum"], "lr": plan["lr"] * scale,
             "min_lr": plan["min_lr"] * scale, "warmup": plan["warmup"], "weight_decay": plan["weight_decay"],
             "betas": list(plan["betas"]), "eval_every": plan["eval_every"], "eval_batches": plan["eval_batches"],
             "checkpoint_every": plan["eval_every"] * 10, "tensorboard": False, "seed": seed,
             "precision": plan["precision"]}
    intervention = {"score": plan["score"], **changes.get("intervention", {})}
    data = {"shards": shards} if shards is not None else {"max_tokens": plan["max_tokens"]}
    return RunConfig.from_dict({"model": model, "data": data, "train": train, "intervention": intervention})


@torch.no_grad()
def final_loss(model: torch.nn.Module, stream, batch: int, batches: int) -> dict[str, float]:
    """Mean validation loss of ``model`` over ``batches`` fixed validation batches (fewer if the split holds
    fewer), and its perplexity: the final figure of a run, on more text than each evaluation reads."""
    model.eval()
    pieces = stream.val_batches(batch, batches)
    value = sum(float(loss(model(x), y)) for x, y in pieces) / len(pieces)
    return {"val_loss": value, "val_ppl": math.exp(value), "batches": len(pieces),
            "tokens": int(sum(y.numel() for _, y in pieces))}


def train_run(plan: dict[str, Any], arch: str, arm: str, seed: int, shards: str | None, folder: Path,
              progress: bool) -> dict:
    """Train (or resume) one run, then score its final model on ``final_batches`` validation batches and keep
    that with the run's release reason, throughput and warnings (once: ``FINAL`` in the run folder, the raw
    result the summary reads; a run's summary.json may be deleted without changing the report)."""
    out = folder / "runs" / run_name(arch, arm, seed)
    # A finished run only loads its last checkpoint and returns its summary.
    trainer = Trainer(run_config(plan, arch, arm, seed, shards), out, resume=True, progress=progress)
    summary = trainer.run()
    if not (out / FINAL).is_file():
        io.write_json(out / FINAL, {**final_loss(trainer.model, trainer.stream, plan["batch"], plan["final_batches"]),
                                    **{k: summary[k] for k in ("release_reason", "tokens_per_s", "warnings")}})
    return summary


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    plan = BUDGETS[cfg.budget]
    if cfg.budget == "full" and cfg.data is None:
        raise StudyError("the full budget trains on your corpus (Zhu et al. 2026 App. J: GPT-2-tokenized "
                         "FineWeb-Edu): write it once with attnlab prepare --folder TEXT --tokenizer TOKENIZER "
                         "--out SHARDS and pass --data SHARDS")
    runs = plan_runs(plan, cfg.seed)
    # full-budget runs are GPU-sized: one at a time; smoke runs two (or more) at once on CPU cores
    jobs = 1 if cfg.budget == "full" else max(1, os.cpu_count() or 1)
    run_all(train_run, [(plan, arch, arm, seed, cfg.data, folder, progress and jobs == 1) for arch, arm, seed in runs],
            jobs)


def read_runs(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per run its settings and final figures (``FINAL``; the release step from the last evaluation), and every
    run's eval.csv stacked (columns run, arch, arm, seed, step, tokens, the probes): all from the runs' files."""
    cfg = load_config(folder)
    plan = BUDGETS[cfg.budget]
    rows, curves = [], []
    for arch, arm, seed in plan_runs(plan, cfg.seed):
        name = run_name(arch, arm, seed)
        run = folder / "runs" / name
        final = json.loads((run / FINAL).read_text())
        frame = pd.read_csv(run / "eval.csv")
        released = frame.released_at.iloc[-1]
        released = None if pd.isna(released) else int(released)
        rows.append({"run": name, "arch": arch, "arm": arm, "seed": seed, "final_val_loss": final["val_loss"],
                     "final_val_ppl": final["val_ppl"], "final_tokens": final["tokens"],
                     "last_eval_val_loss": float(frame.val_loss.iloc[-1]), "released_at": released,
                     "release_reason": final["release_reason"],
                     "released_fraction": released / plan["steps"] if released is not None else math.nan,
                     "lower_copy_chance": float(frame.lower_copy_chance.mean()),
                     "tokens_per_s": final["tokens_per_s"], "warnings": len(final["warnings"])})
        curves.append(frame.assign(run=name, arch=arch, arm=arm, seed=seed,
                                   tokens=frame.step * plan["batch"] * plan["context"])
                      [["run", "arch", "arm", "seed", "step", "tokens", *CURVES, "lower_copy", "lower_copy_chance"]])
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


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
        out.append({"arch": r.arch, "arm": r.arm, "seed": r.seed, "control_val_loss": ref.final_val_loss,
                    "arm_val_loss": r.final_val_loss, "loss_gain": ref.final_val_loss - r.final_val_loss,
                    "control_val_ppl": ref.final_val_ppl, "arm_val_ppl": r.final_val_ppl,
                    "ppl_gain": ref.final_val_ppl - r.final_val_ppl, "released_at": r.released_at,
                    "tokens_to_control_final_loss": float(reached.tokens.iloc[0]) if len(reached) else math.nan})
    return pd.DataFrame(out)


def gains(table: pd.DataFrame) -> pd.DataFrame:
    """Per (arch, arm): mean, sd and Student-t 95% interval of the paired loss and perplexity gains."""
    out = []
    for (arch, arm), group in table.groupby(["arch", "arm"], sort=False):
        loss, ppl = paired_interval(group.loss_gain), paired_interval(group.ppl_gain)
        out.append({"arch": arch, "arm": arm, "seeds": loss["n"],
                    **{f"loss_gain_{k}": loss[k] for k in ("mean", "sd", "lo", "hi")},
                    **{f"ppl_gain_{k}": ppl[k] for k in ("mean", "sd", "lo", "hi")}})
    return pd.DataFrame(out)


def shrinkage(table: pd.DataFrame) -> pd.DataFrame:
    """Per gated architecture: the per-seed perplexity gain of GELU minus its own (the same seed trains both
    pairs on the same data order), with mean, sd and t interval; positive = the gated FFN gains less."""
    mine = table[table.arm == "intervention"].set_index(["arch", "seed"]).ppl_gain
    out = []
    for arch in [a for a in mine.index.get_level_values(0).unique() if ARCHS[a]["ffn"] in GATED]:
        seeds = sorted(set(mine.loc["gelu"].index) & set(mine.loc[arch].index)) if "gelu" in mine.index else []
        d = [mine.loc[("gelu", s)] - mine.loc[(arch, s)] for s in seeds]
        stats = paired_interval(d)
        out.append({"arch": arch, "seeds": stats["n"], **{f"shrinkage_{k}": stats[k]
                                                          for k in ("mean", "sd", "lo", "hi")}})
    return pd.DataFrame(out, columns=["arch", "seeds", "shrinkage_mean", "shrinkage_sd", "shrinkage_lo",
                                      "shrinkage_hi"])


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
            row.update(step=step, **{f"{k}_{arm}": float(at.loc[name, k]) for k in ("upper_logit", "upper_entropy")
                                     for arm, name in runs_at.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def _interval(lo: float, hi: float) -> str:
    return f"[{lo:+.4f}, {hi:+.4f}]"


def headline_finding(table: pd.DataFrame) -> Finding:
    claim = ("the upper-Q/K intervention lowers the final validation perplexity of a GPT-style (GELU) model, "
             "paired over seeds (Zhu et al. 2026 Table 1: -0.50 +- 0.08 ppl, -0.019 +- 0.003 loss over 3 seeds)")
    row = table[(table.arch == "gelu") & (table.arm == "intervention")]
    if row.empty or row.seeds.iloc[0] < 2:
        return Finding(claim, "not checked", "fewer than two GELU pairs: no interval over seeds")
    r = row.iloc[0]
    evidence = (f"GELU, {r.seeds} paired seeds: perplexity gain {r.ppl_gain_mean:+.4f} +- {r.ppl_gain_sd:.4f} "
                f"(95% interval {_interval(r.ppl_gain_lo, r.ppl_gain_hi)}), loss gain {r.loss_gain_mean:+.4f} "
                f"+- {r.loss_gain_sd:.4f} ({_interval(r.loss_gain_lo, r.loss_gain_hi)})")
    if r.ppl_gain_lo > 0:
        return Finding(claim, "reproduced", evidence + ": the interval lies above 0.")
    where = "covers 0: not reproduced at this scale" if r.ppl_gain_hi >= 0 else "lies below 0: the intervention hurt"
    return Finding(claim, "not reproduced", f"{evidence}; the interval {where}.")


def shrinkage_finding(table: pd.DataFrame, gained: pd.DataFrame) -> Finding:
    claim = ("a gated FFN shrinks the intervention's gain: GELU gains more than SwiGLU/GEGLU "
             "(Zhu et al. 2026 §3, Fig. 2)")
    if table.empty or (table.seeds < 2).all():
        return Finding(claim, "not checked", "no gated architecture with two or more paired seeds beside GELU")
    parts = [f"{r.arch}: GELU's gain minus {r.arch}'s {r.shrinkage_mean:+.4f} +- {r.shrinkage_sd:.4f} ppl "
             f"(95% interval {_interval(r.shrinkage_lo, r.shrinkage_hi)})" for r in table.itertuples()]
    gelu = gained[(gained.arch == "gelu") & (gained.arm == "intervention")]
    if gelu.empty or not gelu.ppl_gain_lo.iloc[0] > 0:
        return Finding(claim, "not checked", "; ".join(parts) + "; GELU itself shows no gain beyond its interval, "
                       "so there is no gain for a gated FFN to shrink at this scale.")
    held = (table.shrinkage_lo > 0).all()
    return Finding(claim, "reproduced" if held else "not reproduced",
                   "; ".join(parts) + (": every interval lies above 0." if held else ": an interval reaches 0."))


def early_finding(table: pd.DataFrame) -> Finding:
    claim = ("the intervention lowers early upper-layer logit growth and raises early upper-layer attention "
             "entropy relative to control (Zhu et al. 2026 §5.3-5.4)")
    if "step" not in table or table.step.isna().any():
        missing = table[table.get("step", pd.Series(math.nan, table.index)).isna()]
        return Finding(claim, "not checked", "no evaluation fell before the release step in "
                       + ", ".join(f"{r.arch} seed {r.seed}" for r in missing.itertuples()) + "; evaluate more often")
    held = ((table.upper_logit_intervention < table.upper_logit_control)
            & (table.upper_entropy_intervention > table.upper_entropy_control))
    lines = [f"{r.arch} seed {r.seed} at step {r.step}: logit {r.upper_logit_intervention:.3f} vs "
             f"{r.upper_logit_control:.3f}, entropy {r.upper_entropy_intervention:.3f} vs {r.upper_entropy_control:.3f}"
             for r in table.itertuples()]
    return Finding(claim, "reproduced" if held.all() else "not reproduced",
                   f"{int(held.sum())} of {len(held)} pairs: " + "; ".join(lines) + ".")


def summarize(folder: Path) -> Section:
    runs, curves = read_runs(folder)
    paired = pairs(runs, curves)
    gained, shrunk, table_early = gains(paired), shrinkage(paired), early(runs, curves)
    for name, table in (("runs", runs), ("curves", curves), ("pairs", paired), ("gains", gained),
                        ("shrinkage", shrunk), ("early", table_early)):
        io.write_table(folder / name, table)
    cfg = load_config(folder)
    plan = BUDGETS[cfg.budget]
    first = curves[curves.seed == cfg.seed]
    released = {r.arch: int(r.released_at) for r in runs[(runs.arm == "intervention") & (runs.seed == cfg.seed)
                                                          & runs.released_at.notna()].itertuples()}
    plot_probe_curves(first[first.arm.isin(("control", "intervention"))], CURVES, released, folder / "curves")
    intervention = runs[runs.arm == "intervention"]
    notes = [f"{cfg.budget} budget: {plan['layers']} layers x {plan['heads']} heads x {plan['d_model']} wide, context "
             f"{plan['context']}, {plan['steps']} steps of {plan['batch']} sequences on "
             f"{'the token shards ' + cfg.data if cfg.data else 'bytes of the Python standard library'}, seeds "
             f"{cfg.seed}-{cfg.seed + plan['seeds'] - 1}; the seed trains 270M-parameter models on 2.5B tokens of "
             "FineWeb-Edu.",
             f"Release rule on the {plan['score']} lower-copy score (threshold 0.005, patience 3, window 3-12%): "
             f"uniform attention alone scores {runs.lower_copy_chance.mean():.4f} at this context; the "
             "interventions released at " + ", ".join(
                 f"{r.arch} seed {r.seed}: step {r.released_at} ({r.release_reason})"
                 for r in intervention.itertuples()) + ".",
             f"Throughput: {runs.tokens_per_s.min():,.0f}-{runs.tokens_per_s.max():,.0f} tokens/s per run."]
    if runs.warnings.sum():
        notes.append(f"{int(runs.warnings.sum())} run warnings (in each run's {FINAL} and summary.json).")
    return section(
        "specialization", folder,
        question="Does slowing the upper layers' W_Q and W_K early in pretraining lower the final loss, paired "
                 "over seeds, and does a gated FFN shrink the gain?",
        findings=(headline_finding(gained), shrinkage_finding(shrunk, gained), early_finding(table_early)),
        tables=(Table("gains", "Per architecture and arm: the paired gains control - arm of final validation "
                               "loss and perplexity over seeds (mean, sd, Student-t 95% interval)."),
                Table("shrinkage", "Per gated FFN: GELU's perplexity gain minus its own, paired by seed."),
                Table("pairs", "Every seed's pair: final losses, perplexities, gains, release step and tokens to "
                               "the control's final loss."),
                Table("early", "At the intervention's last evaluation before release: upper logit and entropy of "
                               "control and intervention, per architecture and seed."),
                Table("runs", "Every run: final loss, perplexity, release step and reason, uniform attention's "
                              "lower-copy score, tokens/s."),
                Table("curves", "Every evaluation of every run: the probes over training.")),
        figures=(Figure("curves", f"The Zhu et al. 2026 probes over training, seed {cfg.seed} (solid: control, "
                                  "dashed: intervention). Left of the dotted release line the intervention's upper "
                                  "logit should sit below and its upper entropy above the control's."),),
        notes=tuple(notes))


STUDY = register(Study(
    name="specialization", title="Premature upper-layer attention specialization",
    source="Zhu et al. 2026",
    compute=compute, summarize=summarize, takes_data=True, demo=True))
