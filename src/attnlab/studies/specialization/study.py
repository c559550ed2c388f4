"""The ``specialization`` study (Zhu et al. 2026 §2-§5, Table 1, App. C-G): does slowing the upper half's
W_Q and W_K early in pretraining (learning-rate multiplier 0.25 until the lower-copy maturity rule releases
it) improve the final validation loss, and does a gated FFN shrink that gain?

Paired design, as the seed's Table 1: per architecture and seed, a control and an intervention run from
the same initialization and data order, and more arms when the budget names them (``specialization_plan``:
architectures, arms, budgets and each run's config). Each run logs the seed's probes at every evaluation
(``eval.csv``, ``attnlab.train.probes``) and the lower-copy score every 0.5% of training up to the forced
release (``copy.csv``), which the release rule reads, so the release is dated by maturity, not by the
evaluation cadence; the control logs the same readings, so its lower-copy maturity is dated on the same grid.

Findings, each decided by ``attnlab.findings.verdict.decide`` on the per-seed tables of ``specialization_tables``
with its rule (``specialization_findings``' constants, fixed before any number is read), a computed null control
and the design's minimum detectable effect:

1. the control becomes causally dependent on upper Q/K early (§5.3: zeroing them adds 82.3 ppl at 3%): the
   precondition of the failure the intervention targets; the headline, the shrinkage and finding 4 are
   ``not checked`` where it is absent;
2. the intervention lowers the GELU model's final perplexity (Table 1), with the paired gain's MDE and, where
   the interval allows, an equivalence bound;
3. a gated FFN shrinks that gain (§3, Table 4);
4. the intervention leaves the model less reliant on upper Q/K at the end (§5.3, Fig. 3D);
5. the intervention does not delay lower-layer copy routing (§5.4, Fig. 3A);
6. at 3% of training the gated FFNs write less into the upper residual stream than GELU and a width-matched GELU
   (§4, Table 5, App. C), read on the controls at their 3% evaluation (short runs, ``train.stop_at``, where the
   budget does not train a control fully: ``specialization_plan.pathway_runs``);

and a software check that the intervention acts as defined (upper logits lower, entropy higher before release:
Q/K that learn 4x slower from the same initialization cannot do otherwise).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnlab import devices, io
from attnlab.model.decoder import Decoder, loss
from attnlab.report.plot_specialization import plot_pathway, plot_probe_curves
from attnlab.report.readback import read_record
from attnlab.report.sections import Figure, Section, Table
from attnlab.studies.runner import Study, StudyConfig, StudyError, load_config, register, section
from attnlab.studies.specialization.findings import (
    _absent,
    dependence_finding,
    early_check,
    gains,
    headline_finding,
    pathway_finding,
    reliance_finding,
    routing_finding,
    shrinkage_finding,
)
from attnlab.studies.specialization.plan import (
    BUDGETS,
    FINAL,
    PATHWAY_COMPARISONS,
    Plan,
    hidden_width,
    pathway_name,
    pathway_runs,
    pathway_step,
    plan_runs,
    rule_config,
    run_config,
    run_name,
)
from attnlab.studies.specialization.rules import NAMES
from attnlab.studies.specialization.tables import (
    PATHWAY_LABELS,
    PATHWAY_READS,
    delays,
    early,
    maturities,
    pairs,
    shrinkage,
    table5,
    write_cuts,
    zeroing,
)
from attnlab.train import probes
from attnlab.train.trainer import Trainer
from attnlab.workers import in_process, spread

CURVES = ("val_loss", "upper_entropy", "upper_logit", "upper_qk_sigma_max", "dppl_zero_qk", "lower_copy_excess")
# what the study keeps of the untrained model's probes: the null controls of findings 1 and 5
UNTRAINED = ("ppl", "dppl_zero_qk", "lower_copy", "lower_copy_chance", "upper_logit", "upper_entropy")


@torch.no_grad()
def final_loss(model: torch.nn.Module, stream, batch: int, batches: int) -> dict[str, float]:
    """Mean validation loss of ``model`` over ``batches`` fixed validation batches (fewer if the split holds
    fewer), and its perplexity: the final figure of a run, on more text than each evaluation reads."""
    model.eval()
    pieces = stream.val_batches(batch, batches)
    device = devices.model_device(model)
    value = sum(float(loss(model(x.to(device)), y.to(device))) for x, y in pieces) / len(pieces)
    return {
        "val_loss": value,
        "val_ppl": math.exp(value),
        "batches": len(pieces),
        "tokens": int(sum(y.numel() for _, y in pieces)),
    }


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


def train_run(
    plan: Plan,
    arch: str,
    arm: str,
    seed: int,
    shards: str | None,
    folder: Path,
    progress: bool,
    device: str = "auto",
    dtype: str = "auto",
    stop_at: int | None = None,
) -> dict:
    """Train (or resume) one run on ``device`` in ``dtype`` (``attnlab.devices``), then score its final model on
    ``final_batches`` validation batches and keep that with the run's release reason, throughput, warnings and
    the untrained model's probes (once: ``FINAL`` in the run folder, the raw result the summary reads; a run's
    summary.json may be deleted without changing the report). ``stop_at``: a short pathway run (``pathway_name``),
    trained to that step on the full run's schedule; its eval.csv is all the summary reads of it."""
    name = run_name(arch, arm, seed) if stop_at is None else pathway_name(arch, seed, plan)
    out = folder / "runs" / name
    # A finished run only loads its last checkpoint and returns its summary.
    run = devices.training(run_config(plan, arch, arm, seed, shards, stop_at=stop_at), dtype, device)
    trainer = Trainer(run, out, resume=True, progress=progress, device=device)
    summary = trainer.run()
    if stop_at is None and not (out / FINAL).is_file():
        io.write_json(
            out / FINAL,
            {
                **final_loss(trainer.model, trainer.stream, plan.batch, plan.final_batches),
                **{k: summary[k] for k in ("release_reason", "tokens_per_s", "warnings", "seconds")},
                "untrained": untrained_probes(trainer),
            },
        )
    return summary


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    plan = BUDGETS[cfg.budget]
    if cfg.budget == "full" and cfg.data is None:
        raise StudyError(
            "the full budget trains on your corpus (Zhu et al. 2026 App. J: GPT-2-tokenized "
            "FineWeb-Edu): write it once with attnlab prepare --folder TEXT --tokenizer TOKENIZER "
            "--out SHARDS and pass --data SHARDS"
        )
    runs = plan_runs(plan, cfg.seed)
    short = [(arch, seed) for arch, seed, _, cut in pathway_runs(plan, cfg.seed) if cut]
    # on the CPU, full-budget runs one at a time and smoke runs two (or more) at once; on GPUs, one per GPU
    jobs = 1 if cfg.budget == "full" else max(1, os.cpu_count() or 1)
    shown = progress and in_process(len(runs), jobs=jobs, device=cfg.device, launch=cfg)
    calls = [(plan, arch, arm, seed, cfg.data, folder, shown, cfg.device, cfg.dtype) for arch, arm, seed in runs]
    # the pathway's short controls last: up to the 3% evaluation only
    step = pathway_step(plan)
    calls += [
        (plan, arch, "control", seed, cfg.data, folder, shown, cfg.device, cfg.dtype, step) for arch, seed in short
    ]
    spread(train_run, calls, jobs=jobs, device=cfg.device, launch=cfg, folder=folder)


@dataclass(frozen=True)
class Final:
    """A run's ``FINAL`` as ``run_piece`` writes it: the final model's validation loss, perplexity and tokens read,
    and the run's release reason, throughput, warnings, seconds and untrained probes."""

    val_loss: float
    val_ppl: float
    tokens: int
    release_reason: str | None
    tokens_per_s: float
    warnings: tuple[str, ...]
    seconds: float = math.nan  # runs written before it was kept
    untrained: dict[str, float | None] = field(default_factory=dict)


def read_final(run: Path) -> dict:
    """A run folder's ``FINAL``, checked against ``Final`` (``readback.read_record``)."""
    return read_record(run / FINAL, Final)


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
        final = read_final(run)
        frame = pd.read_csv(run / "eval.csv")
        released = frame.released_at.iloc[-1]
        released = None if pd.isna(released) else int(released)
        rows.append(
            {
                "run": name,
                "arch": arch,
                "arm": arm,
                "seed": seed,
                "final_val_loss": final["val_loss"],
                "final_val_ppl": final["val_ppl"],
                "final_tokens": final["tokens"],
                "last_eval_val_loss": float(frame.val_loss.iloc[-1]),
                "released_at": released,
                "release_reason": final["release_reason"],
                "released_fraction": released / plan.steps if released is not None else math.nan,
                "lower_copy_chance": float(frame.lower_copy_chance.mean()),
                "tokens_per_s": final["tokens_per_s"],
                "seconds": final.get("seconds", math.nan),
                "warnings": len(final["warnings"]),
                **{f"untrained_{k}": v for k, v in final.get("untrained", {}).items()},
            }
        )
        curves.append(
            frame.assign(run=name, arch=arch, arm=arm, seed=seed, tokens=frame.step * plan.batch * plan.context)[
                ["run", "arch", "arm", "seed", "step", "tokens", *CURVES, "ppl", "lower_copy", "lower_copy_chance"]
            ]
        )
        if (run / "copy.csv").is_file():
            read = pd.read_csv(run / "copy.csv")
            readings.append(
                read.assign(run=name, arch=arch, arm=arm, seed=seed)[
                    ["run", "arch", "arm", "seed", "step", "lower_copy", "lower_copy_chance"]
                ]
            )
    read = (
        pd.concat(readings, ignore_index=True)
        if readings
        else pd.DataFrame(columns=["run", "arch", "arm", "seed", "step", "lower_copy", "lower_copy_chance"])
    )
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True), read


def read_pathway(folder: Path, plan: Plan, first_seed: int) -> pd.DataFrame:
    """Per pathway control (``pathway_runs``: arch, seed, run, short, the FFN's hidden width): its readings at the
    3% evaluation (``tables.PATHWAY_READS``; the first upper layer's write is ``ffn_write_rms/<layers // 2>``); NaN
    where the run or that evaluation is missing (a folder made before the pathway runs were planned)."""
    step, first = pathway_step(plan), f"ffn_write_rms/{plan.layers // 2}"
    rows = []
    for arch, seed, name, short in pathway_runs(plan, first_seed):
        row = {"arch": arch, "seed": seed, "run": name, "short": short, "width": hidden_width(plan, arch), "step": step}
        row.update(dict.fromkeys(PATHWAY_READS, math.nan))
        path = folder / "runs" / name / "eval.csv"
        if path.is_file():
            at = pd.read_csv(path)
            at = at[at.step == step]
            if len(at):
                rename = {first: "first_upper_write_rms"}
                row.update({k: float(v) for k, v in at.rename(columns=rename).iloc[0].items() if k in PATHWAY_READS})
        rows.append(row)
    return pd.DataFrame(rows, columns=["arch", "seed", "run", "short", "width", "step", *PATHWAY_READS])


def pathway(table: pd.DataFrame, plan: Plan, first_seed: int) -> dict:
    """The residual-write finding's tables (the four comparisons' cuts, Table 5 beside the paper's) and finding."""
    seeds = [first_seed + i for i in range(plan.pathway_seeds)]
    others = [first_seed + plan.pathway_seeds + i for i in range(plan.pathway_seeds)]
    # the null: GELU controls of other seeds, each over one of the finding's GELU seeds
    null = [
        float(np.log(a / b)) if a > 0 and b > 0 else math.nan
        for a, b in zip(_writes(table, "gelu", others), _writes(table, "gelu", seeds), strict=True)
    ]
    cuts = write_cuts(table, PATHWAY_COMPARISONS, seeds)
    summary = table5(table, {arch: hidden_width(plan, arch) for arch in plan.pathway}, seeds)
    return {
        "tables": {"write_cuts": cuts, "table5": summary},
        "finding": pathway_finding(cuts, summary, null, pathway_step(plan)),
    }


def _writes(table: pd.DataFrame, arch: str, seeds: list[int]) -> list[float]:
    rms = table.set_index(["arch", "seed"]).upper_ffn_write_rms
    return [float(rms.get((arch, s), math.nan)) for s in seeds]


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
    return {
        "tables": {
            "pairs": paired,
            "gains": gained,
            "shrinkage": shrunk.drop(columns="differences"),
            "early": early(runs, curves),
            "zeroing": zeroed,
            "maturity": matured,
            "delays": delayed,
        },
        "findings": (
            dependence,
            headline_finding(gained, list(gelu.ppl_gain), absent),
            shrinkage_finding(shrunk, gained, absent),
            reliance_finding(zeroed[zeroed.arch == "gelu"], absent),
            routing_finding(delayed, matured, steps),
            early_check(early(runs, curves)),
        ),
    }


def summarize(folder: Path) -> Section:
    runs, curves, readings = read_runs(folder)
    cfg = load_config(folder)
    plan = BUDGETS[cfg.budget]
    decided = findings(runs, curves, readings, plan)
    read = read_pathway(folder, plan, cfg.seed)
    mechanism = pathway(read, plan, cfg.seed)
    cuts = mechanism["tables"]["write_cuts"]
    tables = (
        ("runs", runs),
        ("curves", curves),
        ("readings", readings),
        *decided["tables"].items(),
        ("pathway", read),
        ("write_cuts", cuts.assign(ratios=[" ".join(f"{x:.4f}" for x in r) for r in cuts.ratios])),
        ("table5", mechanism["tables"]["table5"]),
    )
    for name, table in tables:
        io.write_table(folder / name, table)
    first = curves[curves.seed == cfg.seed]
    released = {
        r.arch: int(r.released_at)
        for r in runs[(runs.arm == "intervention") & (runs.seed == cfg.seed) & runs.released_at.notna()].itertuples()
    }
    plot_probe_curves(
        first[first.arm.isin(("control", "intervention"))],
        CURVES,
        released,
        folder / "curves",
        readings=readings[(readings.seed == cfg.seed) & readings.arm.isin(("control", "intervention"))],
    )
    pathway_seeds = read[read.seed < cfg.seed + plan.pathway_seeds].dropna(subset=["upper_ffn_write_rms"])
    if len(pathway_seeds):
        plot_pathway(pathway_seeds, {a: PATHWAY_LABELS[a] for a in plan.pathway}, folder / "pathway")
    intervention = runs[runs.arm == "intervention"]
    seeds = ", ".join(f"{arch} {n}" for arch, n in plan.seeds.items() if arch in plan.archs)
    notes = [
        f"{cfg.budget} budget: {plan.layers} layers x {plan.heads} heads x {plan.d_model} wide, context "
        f"{plan.context}, {plan.steps} steps of {plan.batch} sequences on "
        f"{'the token shards ' + cfg.data if cfg.data else 'bytes of the Python standard library'}, seeds "
        f"from {cfg.seed} ({seeds}); the seed trains 270M-parameter models on 2.5B tokens of FineWeb-Edu.",
        f"Release rule on the {plan.score} lower-copy score (threshold 0.005, patience 3, window 3-12%), read "
        f"every {plan.score_every:.1%} of training on the first evaluation batch: uniform attention alone "
        f"scores {runs.lower_copy_chance.mean():.4f} at this context; the interventions released at "
        + ", ".join(
            f"{r.arch} seed {r.seed}: step {r.released_at} ({r.released_fraction:.1%}, {r.release_reason})"
            for r in intervention.itertuples()
        )
        + "; the paper's Table 8 releases at 4.01%.",
        f"Throughput: {runs.tokens_per_s.min():,.0f}-{runs.tokens_per_s.max():,.0f} tokens/s per run.",
    ]
    if runs.warnings.sum():
        notes.append(f"{int(runs.warnings.sum())} run warnings (in each run's {FINAL} and summary.json).")
    return section(
        "specialization",
        folder,
        question="Does slowing the upper layers' W_Q and W_K early in pretraining lower the final loss, paired "
        "over seeds, and does a gated FFN shrink the gain? Is the failure it targets (early reliance on "
        "upper Q/K) present, and is lower-copy routing left on time?",
        findings=(*decided["findings"], mechanism["finding"]),
        tables=(
            Table(
                "gains",
                "Per architecture and arm: the paired gains control - arm of final validation "
                "loss and perplexity over seeds (mean, sd, Student-t 95% interval, MDE).",
            ),
            Table("shrinkage", "Per gated FFN: GELU's perplexity gain minus its own, paired by seed."),
            Table(
                "zeroing",
                "Per architecture and seed: the perplexity rise from zeroing upper Q/K in control "
                "and intervention at the first evaluation from the control's lower-copy maturity "
                "(and 3%) and at the end, and in the untrained model.",
            ),
            Table(
                "maturity",
                "Every run: the step its lower-copy routing matures on the 0.5% readings, the "
                "release the rule gives on them, and its actual release.",
            ),
            Table(
                "delays",
                "Per architecture and seed: the intervention's delay of lower-copy maturity behind "
                "the control's, and the untrained model's (the null).",
            ),
            Table(
                "pairs",
                "Every seed's pair: final losses, perplexities, gains, release step and tokens to "
                "the control's final loss.",
            ),
            Table(
                "early",
                "At the intervention's last evaluation before release: upper logit and entropy of "
                "control and intervention, per architecture and seed.",
            ),
            Table(
                "runs",
                "Every run: final loss, perplexity, release step and reason, uniform attention's "
                "lower-copy score, tokens/s, seconds, the untrained model's probes.",
            ),
            Table("readings", "Every run's lower-copy readings (every 0.5% of training up to 12%)."),
            Table(
                "table5",
                f"Zhu et al. 2026 Table 5 at 3% of training (step {pathway_step(plan)}): per FFN (GELU at 4 d_model, "
                "GELU at the gated FFNs' hidden width, SwiGLU, GEGLU) the mean over paired seeds of the upper-half "
                "FFN write RMS, upper logit, upper entropy and first-upper write RMS, the paper's beside each.",
            ),
            Table(
                "write_cuts",
                "Per gated FFN and reference: the per-seed log ratios of the upper FFN write RMS at 3%, their mean, "
                "one-sided 95% bound and two-sided 95% interval, and the cut in % of the reference's write.",
            ),
            Table(
                "pathway",
                "Every control the pathway finding reads, at its 3% evaluation (short: trained only up to it).",
            ),
            Table("curves", "Every evaluation of every run: the probes over training."),
        ),
        figures=(
            Figure(
                "curves",
                f"The Zhu et al. 2026 probes over training, seed {cfg.seed} (solid: control, "
                "dashed: intervention). Left of the dotted release line the intervention's upper "
                "logit should sit below and its upper entropy above the control's; dots: the "
                "release rule's lower-copy readings every 0.5% up to 12%.",
            ),
            *(
                (
                    Figure(
                        "pathway",
                        f"Zhu et al. 2026 Table 5 at 3% of training (step {pathway_step(plan)}): every paired seed's "
                        "upper-half FFN write RMS, upper logit and upper entropy per FFN (grey lines join a seed's "
                        "runs; bars: means). The paper's gated FFNs write 39-55% less than both GELUs.",
                    ),
                )
                if len(pathway_seeds)
                else ()
            ),
        ),
        notes=tuple(notes),
    )


STUDY = register(
    Study(
        name="specialization",
        title="Premature upper-layer attention specialization",
        source="Zhu et al. 2026",
        compute=compute,
        summarize=summarize,
        takes_data=True,
        demo=True,
        findings=NAMES,
    )
)
