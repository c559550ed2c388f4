"""The ``specialization`` study (Zhu et al. 2026 §2-§5, Table 1, App. C-G): does slowing the upper half's
W_Q and W_K early in pretraining (learning-rate multiplier 0.25 until the lower-copy maturity rule releases
it) improve the final validation loss, and does a gated FFN shrink that gain?

Paired design, as the seed's Table 1: per architecture and seed, a control and an intervention run from
the same initialization and data order (the seed fixes both; the intervention changes no parameter, only
the upper Q/K learning rate), and more arms (``ARMS``: fixed releases, global learning rate x0.5, entropy
floor, other multipliers) when the budget names them. Each run logs the seed's probes at every evaluation
(``eval.csv``, ``attnlab.train.probes``) and the lower-copy score every 0.5% of training up to the forced
release (``copy.csv``), which the release rule reads, so the release is dated by maturity, not by the
evaluation cadence; the control logs the same readings, so its lower-copy maturity is dated on the same grid.

Findings, each decided by ``attnlab.studies.verdict.decide`` with its rule (the module constants below, fixed
before any number is read), a computed null control and the design's minimum detectable effect:

1. the control becomes causally dependent on upper Q/K early (§5.3: zeroing them adds 82.3 ppl at 3%): the
   precondition of the failure the intervention targets; the headline, the shrinkage and finding 4 are
   ``not checked`` where it is absent;
2. the intervention lowers the GELU model's final perplexity (Table 1), with the paired gain's MDE and, where
   the interval allows, an equivalence bound;
3. a gated FFN shrinks that gain (§3, Table 4);
4. the intervention leaves the model less reliant on upper Q/K at the end (§5.3, Fig. 3D);
5. the intervention does not delay lower-layer copy routing (§5.4, Fig. 3A);

and a software check that the intervention acts as defined (upper logits lower, entropy higher before release:
Q/K that learn 4x slower from the same initialization cannot do otherwise).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .. import io
from ..diagnostics.paired import paired_interval, paired_mde
from ..model.decoder import Decoder, loss
from ..registry import Registry
from ..report.plot_specialization import plot_probe_curves
from ..report.sections import Figure, Section, Table
from ..train import probes
from ..train.config import InterventionConfig, RunConfig
from ..train.release import maturity, reading_interval, replay, rule_score
from ..train.trainer import Trainer
from ..workers import run_all
from .runner import Study, StudyConfig, StudyError, load_config, register, section
from .specialization_findings import (_absent, dependence_finding, early_check, gains, headline_finding,
                                      reliance_finding, routing_finding, shrinkage_finding)

MULTIPLIER = 0.25  # Zhu et al. 2026 §2
FINAL = "final_eval.json"
CURVES = ("val_loss", "upper_entropy", "upper_logit", "upper_qk_sigma_max", "dppl_zero_qk", "lower_copy_excess")
# what the study keeps of the untrained model's probes: the null controls of findings 1 and 5
UNTRAINED = ("ppl", "dppl_zero_qk", "lower_copy", "lower_copy_chance", "upper_logit", "upper_entropy")

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


@dataclass(frozen=True)
class Plan:
    """One budget of the study (Zhu et al. 2026 §4, App. J): the model, its AdamW training with cosine decay, the
    evaluation cadence and batches, the byte data's cap (None: all of it), the architectures, arms and controls
    trained (``ARCHS``, ``ARMS``), the seeds per architecture, and the release rule's score and reading interval."""

    layers: int
    heads: int
    d_model: int
    context: int
    steps: int
    batch: int
    accum: int
    lr: float
    min_lr: float
    warmup: int
    weight_decay: float
    betas: tuple[float, float]
    eval_every: int
    eval_batches: int
    final_batches: int
    max_tokens: int | None
    precision: str
    archs: tuple[str, ...]
    arms: tuple[str, ...]
    controls: tuple[str, ...]
    seeds: Mapping[str, int]
    score: str
    score_every: float


# smoke: byte-level decoders on the standard library's .py files, all runs within 30 minutes on two CPU cores
# (two at a time); the final loss is read on 64 validation batches (131K tokens), the evaluations on 4
# (at 600 steps and 4 batches the paired loss gains spread by 0.012 over seeds). The rule compares the excess
# of the lower-copy score over uniform attention's (about 0.02 at context 128, above the seed's threshold
# 0.005 by itself), read on the first evaluation batch every 0.5% of training up to the forced release, so that
# patience 3 can fire at 4% as the seed's Table 8 does (4.01%); the evaluations every 3% put one at the seed's
# 3% readout. full: Zhu et al. 2026 §4 and App. J: 20 layers x 960 wide x 15 heads, context 1024, 2.5B tokens
# in batches of 512 x 1024 tokens (4,768 steps), AdamW lr 2.5e-4 with cosine decay to 10% after 2% warmup,
# weight decay 0.1, betas (0.9, 0.95), bf16; evaluations every 0.5% of training as the seed's Table 8 cadence
# implies. seeds: a count per architecture.
BUDGETS: dict[str, Plan] = {
    "smoke": Plan(layers=4, heads=4, d_model=64, context=128, steps=1500, batch=16, accum=1, lr=3e-3, min_lr=3e-4,
                  warmup=30, weight_decay=0.1, betas=(0.9, 0.95), eval_every=45, eval_batches=4, final_batches=64,
                  max_tokens=2_000_000, precision="fp32", archs=("gelu", "swiglu"), arms=("control", "intervention"),
                  controls=(), seeds={"gelu": 3, "swiglu": 3}, score="excess", score_every=0.005),
    "full": Plan(layers=20, heads=15, d_model=960, context=1024, steps=4768, batch=512, accum=16, lr=2.5e-4,
                 min_lr=2.5e-5, warmup=95, weight_decay=0.1, betas=(0.9, 0.95), eval_every=24, eval_batches=8,
                 final_batches=32, max_tokens=None, precision="bf16", arms=("control", "intervention"),
                 archs=("gelu", "swiglu", "geglu", "gelu_rmsnorm", "gelu_biasless", "llama"),
                 controls=("fixed_3", "fixed_6", "global_lr_half", "entropy_floor", "intervention_m0.5",
                           "intervention_m0.125"),
                 seeds=dict.fromkeys(("gelu", "swiglu", "geglu", "gelu_rmsnorm", "gelu_biasless", "llama"), 3),
                 score="raw", score_every=0.005),
}
# What attnlab demo runs: smoke's pairs over 600 steps, evaluations every 3% (18 steps), and as many pairs as
# the time of its former 3 + 3 pairs evaluated every 2% allows, 7: 5 GELU pairs, the fewest whose one-sided sign-flip
# test can reach 5% (1/32; at 4 pairs the smallest share is 1/16), so the GELU findings can be reproduced; 2 SwiGLU.
BUDGETS["demo"] = replace(BUDGETS["smoke"], steps=600, warmup=12, eval_every=18, seeds={"gelu": 5, "swiglu": 2})


def run_name(arch: str, arm: str, seed: int) -> str:
    return f"{arch}_{arm}_seed{seed}"


def plan_runs(plan: Plan, first_seed: int) -> list[tuple[str, str, int]]:
    """(arch, arm, seed) of every run: each architecture's arms over its seeds, and the controls (App. D-G) for
    the first architecture only, as the seed runs them for its GPT-style model."""
    def seeds(arch: str) -> list[int]:
        return [first_seed + i for i in range(plan.seeds[arch])]

    runs = [(arch, arm, s) for arch in plan.archs for arm in plan.arms for s in seeds(arch)]
    return runs + [(plan.archs[0], arm, s) for arm in plan.controls for s in seeds(plan.archs[0])]


def run_config(plan: Plan, arch: str, arm: str, seed: int, shards: str | None = None) -> RunConfig:
    changes = ARMS.find(arm)
    scale = changes.get("lr_scale", 1.0)
    model = {"context": plan.context, "layers": plan.layers, "heads": plan.heads,
             "d_model": plan.d_model, "positions": "rope", **ARCHS.find(arch)}
    train = {"steps": plan.steps, "batch": plan.batch, "accum": plan.accum, "lr": plan.lr * scale,
             "min_lr": plan.min_lr * scale, "warmup": plan.warmup, "weight_decay": plan.weight_decay,
             "betas": list(plan.betas), "eval_every": plan.eval_every, "eval_batches": plan.eval_batches,
             "checkpoint_every": plan.eval_every * 10, "tensorboard": False, "seed": seed,
             "precision": plan.precision}
    # every arm reads the lower-copy score on the rule's grid, the control included (finding 5 dates both)
    intervention = {"score": plan.score, "score_every": plan.score_every, **changes.get("intervention", {})}
    data = {"shards": shards} if shards is not None else {"max_tokens": plan.max_tokens}
    return RunConfig.from_dict({"model": model, "data": data, "train": train, "intervention": intervention})


def rule_config(plan: Plan) -> InterventionConfig:
    """The intervention arm's release rule: what dates lower-copy maturity in every arm."""
    return run_config(plan, plan.archs[0], "intervention", 0).intervention


@torch.no_grad()
def final_loss(model: torch.nn.Module, stream, batch: int, batches: int) -> dict[str, float]:
    """Mean validation loss of ``model`` over ``batches`` fixed validation batches (fewer if the split holds
    fewer), and its perplexity: the final figure of a run, on more text than each evaluation reads."""
    model.eval()
    pieces = stream.val_batches(batch, batches)
    value = sum(float(loss(model(x), y)) for x, y in pieces) / len(pieces)
    return {"val_loss": value, "val_ppl": math.exp(value), "batches": len(pieces),
            "tokens": int(sum(y.numel() for _, y in pieces))}


def untrained_probes(trainer: Trainer) -> dict[str, float]:
    """The probes of the run's model at initialization (the trainer seeds the same draw), on the first
    evaluation batch: the null controls of an upper Q/K the model cannot yet rely on and of lower-copy routing
    that never matures."""
    cfg = trainer.cfg
    torch.manual_seed(cfg.train.seed)
    model = Decoder(cfg.model)
    ids, targets = trainer.stream.val_batches(max(1, cfg.train.batch // cfg.train.accum), cfg.train.eval_batches)[0]
    record = probes.probe(model, ids, targets)
    return {k: record[k] for k in UNTRAINED}


def train_run(plan: Plan, arch: str, arm: str, seed: int, shards: str | None, folder: Path,
              progress: bool) -> dict:
    """Train (or resume) one run, then score its final model on ``final_batches`` validation batches and keep
    that with the run's release reason, throughput, warnings and the untrained model's probes (once: ``FINAL``
    in the run folder, the raw result the summary reads; a run's summary.json may be deleted without changing
    the report)."""
    out = folder / "runs" / run_name(arch, arm, seed)
    # A finished run only loads its last checkpoint and returns its summary.
    trainer = Trainer(run_config(plan, arch, arm, seed, shards), out, resume=True, progress=progress)
    summary = trainer.run()
    if not (out / FINAL).is_file():
        io.write_json(out / FINAL, {**final_loss(trainer.model, trainer.stream, plan.batch, plan.final_batches),
                                    **{k: summary[k] for k in ("release_reason", "tokens_per_s", "warnings",
                                                                "seconds")},
                                    "untrained": untrained_probes(trainer)})
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


def read_runs(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """From the runs' files: per run its settings, final figures (``FINAL``; the release step from the last
    evaluation) and untrained probes (``untrained_*``); every run's eval.csv stacked (columns run, arch, arm,
    seed, step, tokens, the probes); and every run's lower-copy readings (copy.csv: run, arch, arm, seed, step,
    lower_copy, lower_copy_chance)."""
    cfg = load_config(folder)
    plan = BUDGETS[cfg.budget]
    rows, curves, readings = [], [], []
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
                     "released_fraction": released / plan.steps if released is not None else math.nan,
                     "lower_copy_chance": float(frame.lower_copy_chance.mean()),
                     "tokens_per_s": final["tokens_per_s"], "seconds": final.get("seconds", math.nan),
                     "warnings": len(final["warnings"]),
                     **{f"untrained_{k}": v for k, v in final.get("untrained", {}).items()}})
        curves.append(frame.assign(run=name, arch=arch, arm=arm, seed=seed,
                                   tokens=frame.step * plan.batch * plan.context)
                      [["run", "arch", "arm", "seed", "step", "tokens", *CURVES, "ppl", "lower_copy",
                        "lower_copy_chance"]])
        if (run / "copy.csv").is_file():
            read = pd.read_csv(run / "copy.csv")
            readings.append(read.assign(run=name, arch=arch, arm=arm, seed=seed)
                            [["run", "arch", "arm", "seed", "step", "lower_copy", "lower_copy_chance"]])
    read = (pd.concat(readings, ignore_index=True) if readings else
            pd.DataFrame(columns=["run", "arch", "arm", "seed", "step", "lower_copy", "lower_copy_chance"]))
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True), read


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
        out.append({"arch": arch, "seeds": stats["n"], **{f"shrinkage_{k}": stats[k]
                                                          for k in ("mean", "sd", "lo", "hi")},
                    "shrinkage_mde": paired_mde(stats["sd"], stats["n"]), "differences": d})
    return pd.DataFrame(out, columns=["arch", "seeds", "shrinkage_mean", "shrinkage_sd", "shrinkage_lo",
                                      "shrinkage_hi", "shrinkage_mde", "differences"])


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


def zeroing(runs: pd.DataFrame, curves: pd.DataFrame, earliest: int,
            matured: pd.DataFrame | None = None) -> pd.DataFrame:
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
            row["final_reliance_gap"] = ((row["final_dppl_control"] - row["final_dppl_intervention"])
                                         / row["final_ppl_control"])
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
        rows.append({"run": r.run, "arch": r.arch, "arm": r.arm, "seed": r.seed, "readings": len(logged),
                     "last_reading": int(mine.step.max()) if len(mine) else math.nan,
                     "matured_at": math.nan if matured is None else matured,
                     "matured_fraction": math.nan if matured is None else matured / steps,
                     "rule_release": replayed.released_at, "rule_release_fraction": replayed.released_at / steps
                     if replayed.released_at is not None else math.nan, "rule_reason": replayed.reason,
                     "released_at": r.released_at, "release_reason": r.release_reason})
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
        dated = {name: (row.last_reading if math.isnan(row.matured_at) else row.matured_at)
                 for name, row in (("control", c), ("intervention", r))}
        runs_c = runs[runs.run == c.run]
        untrained = math.nan
        if "untrained_lower_copy" in runs_c:
            score = rule_score(rule, float(runs_c.untrained_lower_copy.iloc[0]),
                               float(runs_c.untrained_lower_copy_chance.iloc[0]))
            untrained = (reading_interval(rule, steps) if score >= rule.threshold else last) if math.isfinite(last) \
                else math.nan
        rows.append({"arch": r.arch, "seed": r.seed, "control_matured_at": c.matured_at,
                     "intervention_matured_at": r.matured_at,
                     "delay": (dated["intervention"] - dated["control"]) / steps,
                     "null_delay": (untrained - dated["control"]) / steps,
                     "control_censored": bool(math.isnan(c.matured_at))})
    return pd.DataFrame(rows, columns=["arch", "seed", "control_matured_at", "intervention_matured_at", "delay",
                                       "null_delay", "control_censored"])


def findings(runs: pd.DataFrame, curves: pd.DataFrame, readings: pd.DataFrame, plan: Plan) -> dict:
    """Every table the findings read and the findings, in the report's order."""
    rule, steps = rule_config(plan), plan.steps
    paired = pairs(runs, curves)
    gained, shrunk = gains(paired), shrinkage(paired)
    matured = maturities(runs, readings, rule, steps)
    zeroed = zeroing(runs, curves, math.ceil(rule.earliest * steps), matured)
    delayed = delays(matured, runs, rule, steps)
    gelu = paired[(paired.arch == "gelu") & (paired.arm == "intervention")]
    dependence = dependence_finding(zeroed[zeroed.arch == "gelu"])
    absent = _absent(dependence)
    return {"tables": {"pairs": paired, "gains": gained, "shrinkage": shrunk.drop(columns="differences"),
                       "early": early(runs, curves), "zeroing": zeroed, "maturity": matured, "delays": delayed},
            "findings": (dependence, headline_finding(gained, list(gelu.ppl_gain), absent),
                         shrinkage_finding(shrunk, gained, absent),
                         reliance_finding(zeroed[zeroed.arch == "gelu"], absent),
                         routing_finding(delayed, matured, steps), early_check(early(runs, curves)))}


def summarize(folder: Path) -> Section:
    runs, curves, readings = read_runs(folder)
    cfg = load_config(folder)
    plan = BUDGETS[cfg.budget]
    decided = findings(runs, curves, readings, plan)
    for name, table in (("runs", runs), ("curves", curves), ("readings", readings), *decided["tables"].items()):
        io.write_table(folder / name, table)
    first = curves[curves.seed == cfg.seed]
    released = {r.arch: int(r.released_at) for r in runs[(runs.arm == "intervention") & (runs.seed == cfg.seed)
                                                          & runs.released_at.notna()].itertuples()}
    plot_probe_curves(first[first.arm.isin(("control", "intervention"))], CURVES, released, folder / "curves",
                      readings=readings[(readings.seed == cfg.seed) & readings.arm.isin(("control", "intervention"))])
    intervention = runs[runs.arm == "intervention"]
    seeds = ", ".join(f"{arch} {n}" for arch, n in plan.seeds.items() if arch in plan.archs)
    notes = [f"{cfg.budget} budget: {plan.layers} layers x {plan.heads} heads x {plan.d_model} wide, context "
             f"{plan.context}, {plan.steps} steps of {plan.batch} sequences on "
             f"{'the token shards ' + cfg.data if cfg.data else 'bytes of the Python standard library'}, seeds "
             f"from {cfg.seed} ({seeds}); the seed trains 270M-parameter models on 2.5B tokens of FineWeb-Edu.",
             f"Release rule on the {plan.score} lower-copy score (threshold 0.005, patience 3, window 3-12%), read "
             f"every {plan.score_every:.1%} of training on the first evaluation batch: uniform attention alone "
             f"scores {runs.lower_copy_chance.mean():.4f} at this context; the interventions released at " + ", ".join(
                 f"{r.arch} seed {r.seed}: step {r.released_at} ({r.released_fraction:.1%}, {r.release_reason})"
                 for r in intervention.itertuples()) + "; the paper's Table 8 releases at 4.01%.",
             f"Throughput: {runs.tokens_per_s.min():,.0f}-{runs.tokens_per_s.max():,.0f} tokens/s per run."]
    if runs.warnings.sum():
        notes.append(f"{int(runs.warnings.sum())} run warnings (in each run's {FINAL} and summary.json).")
    return section(
        "specialization", folder,
        question="Does slowing the upper layers' W_Q and W_K early in pretraining lower the final loss, paired "
                 "over seeds, and does a gated FFN shrink the gain? Is the failure it targets (early reliance on "
                 "upper Q/K) present, and is lower-copy routing left on time?",
        findings=decided["findings"],
        tables=(Table("gains", "Per architecture and arm: the paired gains control - arm of final validation "
                               "loss and perplexity over seeds (mean, sd, Student-t 95% interval, MDE)."),
                Table("shrinkage", "Per gated FFN: GELU's perplexity gain minus its own, paired by seed."),
                Table("zeroing", "Per architecture and seed: the perplexity rise from zeroing upper Q/K in control "
                                 "and intervention at the first evaluation from the control's lower-copy maturity "
                                 "(and 3%) and at the end, and in the untrained model."),
                Table("maturity", "Every run: the step its lower-copy routing matures on the 0.5% readings, the "
                                  "release the rule gives on them, and its actual release."),
                Table("delays", "Per architecture and seed: the intervention's delay of lower-copy maturity behind "
                                "the control's, and the untrained model's (the null)."),
                Table("pairs", "Every seed's pair: final losses, perplexities, gains, release step and tokens to "
                               "the control's final loss."),
                Table("early", "At the intervention's last evaluation before release: upper logit and entropy of "
                               "control and intervention, per architecture and seed."),
                Table("runs", "Every run: final loss, perplexity, release step and reason, uniform attention's "
                              "lower-copy score, tokens/s, seconds, the untrained model's probes."),
                Table("readings", "Every run's lower-copy readings (every 0.5% of training up to 12%)."),
                Table("curves", "Every evaluation of every run: the probes over training.")),
        figures=(Figure("curves", f"The Zhu et al. 2026 probes over training, seed {cfg.seed} (solid: control, "
                                  "dashed: intervention). Left of the dotted release line the intervention's upper "
                                  "logit should sit below and its upper entropy above the control's; dots: the "
                                  "release rule's lower-copy readings every 0.5% up to 12%."),),
        notes=tuple(notes))


STUDY = register(Study(
    name="specialization", title="Premature upper-layer attention specialization",
    source="Zhu et al. 2026",
    compute=compute, summarize=summarize, takes_data=True, demo=True))
