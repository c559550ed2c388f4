"""The ``sinks`` study (Attention Sinks Essential): attention sinks on trigger-conditional averaging,
softmax against ReLU attention. Does softmax attention trained on that task park its mass on BOS at every
position before the trigger (Theorem 1; some position of some layer, Theorem 2), while ReLU attention
solves it without a sink (Theorem 3)? And, given ``--model``, does a pretrained softmax LM park its
attention on its first token?

The task is Attention Sinks Essential §3.2 (``attnlab.tasks.vectors.TriggerAveraging``, n = L = 16, App. A).
The models are input-free attention stacks (``ModelConfig(inputs="vectors")``, no FFN, norm, bias or
positions), with softmax rows or ReLU attention (``reluattn``: ReLU(score) / max(i - 2, 1), §3.4), in three
shapes: 1 layer x 1 head, §3.4's f(x)^(i) = W_O sum_k alpha_ik W_V x^(k) (§4.1, Theorems 1 and 3); and 2
layers x 2 heads and 4 layers x 4 heads with residual connections (§4.2, App. B.1-B.2, Theorem 2), read
as h_0 = x, h_d = h_(d-1) + Attn_d(h_(d-1)) and output h_D - x, the sum of what the layers write to the
residual stream (``ModelConfig(readout="writes")``): §1 and §3.2 state the target as what the model
writes, zero everywhere but the trigger. Every (map, shape) is trained from several seeds with App. A's
Adam (lr 1e-3, batch 128) until a training batch's l-inf loss is below 1e-2 (the trainer's
``stop_linf``) or a step cap.

Each trained model is read on held-out inputs: 1000 with the trigger uniform over 3..L (the training
distribution D of Theorems 1-2) for the losses and the per-input sink fractions, and 1000 with the
trigger fixed at j = 8, as §4's figures are, for the mean and std maps and the BOS mass (the mean weight
on key 1 over the queries 1 < i < j); what is read is defined in ``attnlab.studies.sinks.measures``.
Theorem 3's zero-loss ReLU model (App. E) is built there as weights (``theorem3_model``) and scored on the same
inputs as a check. The budgets, run names and raw file kinds are ``attnlab.studies.sinks.plan``'s; the findings,
their rules and null controls ``attnlab.studies.sinks.findings``'s; the figures and table captions
``attnlab.studies.sinks.section``'s.

``compute`` writes per run ``raw/<run>_attention.parquet`` (layer, head, query, key, mean, std; 1-based
positions), ``raw/<run>_sinks.csv`` (per layer, head and eps: Theorem 1's fractions, and Theorem 2's per
run), ``raw/<run>_writes.csv`` (per layer: what it writes to the residual stream, ``layer_writes``),
``raw/<run>_untrained_sinks.csv`` (``_sinks.csv`` of the untrained model), ``raw/<run>_positions.csv`` (per
eps, model trained/untrained and 1-based position: Theorem 2's fraction and the inputs counted),
``raw/<run>_masking.csv`` (per model trained/untrained: loss and l-inf with BOS and with BOS masked, the
all-zeros predictor's loss) and then ``raw/<run>_loss.csv`` (steps, the stop, final losses and the all-zeros
predictor's); a run whose files all exist is skipped, training resumes from ``runs/<run>``'s checkpoints (a
run that stopped trains no further), and a run lacking only some files gains them without training. It also
writes ``raw/theorem3.csv``.

With ``--model``, ``compute`` first measures the first-token mass of that pretrained softmax LM into
``real/`` and ``summarize`` adds its table, heat map and finding (``attnlab.studies.sinks.real``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from attnlab import io
from attnlab.model.decoder import Decoder
from attnlab.report.sections import Section
from attnlab.studies.runner import Study, StudyConfig, StudyError, load_config, register, section
from attnlab.studies.sinks.findings import (
    MASK_NAME,
    THEOREM3_NAME,
    bos_table,
    finding,
    layer_finding,
    layer_name,
    masking_finding,
    masking_table,
    position_table,
    run_table,
    sink_head_table,
    sink_name,
    theorem3_finding,
)
from attnlab.studies.sinks.measures import (
    ARCHS,
    DELTA,
    DIM,
    EPS,
    EPS_VERDICT,
    LENGTH,
    LINF_TARGET,
    TRIGGER,
    attention_maps,
    attention_weights,
    layer_writes,
    losses,
    masking,
    position_fractions,
    sink_fractions,
    theorem3_check,
    untrained,
)
from attnlab.studies.sinks.plan import BUDGETS, RAW_KINDS, Plan, _parts, run_config, runs
from attnlab.studies.sinks.real import REAL, REAL_NAME, compute_real, summarize_real
from attnlab.studies.sinks.section import draw_figures, toy_tables
from attnlab.tasks import TaskStream
from attnlab.tasks.vectors import TriggerAveraging
from attnlab.train.trainer import Trainer, vector_linf

NAME = "sinks"


def _linf_hook(trainer: Trainer) -> dict[str, float]:
    inputs, targets = trainer.stream.val_batches(trainer.cfg.train.batch, 1)[0]
    with torch.no_grad():
        return {"val_linf": vector_linf(trainer.model(inputs), targets)}


def _sink_rows(model: Decoder, batch, ids: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """Theorem 1 per (layer, head) and Theorem 2 per run (``sink_fractions``), and Theorem 2 per position
    (``position_fractions``), of ``model`` on ``batch``, for every eps in EPS."""
    weights = attention_weights(model, batch.inputs)
    triggers = batch.mask.int().argmax(-1)
    layers, _, heads = weights.shape[:3]
    sinks, positions = [], []
    for eps in EPS:
        got = sink_fractions(weights, triggers, eps)
        for layer in range(layers):
            for head in range(heads):
                sinks.append(
                    {
                        **ids,
                        "layer": layer + 1,
                        "head": head + 1,
                        "eps": eps,
                        "positions": float(got["positions"][layer, head]),
                        "inputs_all": float(got["inputs_all"][layer, head]),
                        "inputs_exists": float(got["inputs_exists"]),
                    }
                )
        frac, count = position_fractions(weights, triggers, eps)
        positions += [
            {**ids, "eps": eps, "position": i + 1, "fraction": float(frac[i]), "inputs": int(count[i])}
            for i in range(len(frac))
            if count[i] > 0
        ]
    return sinks, positions


def run_piece(run: str, plan: Plan, seed: int, folder: Path, progress: bool) -> None:
    """Train (or resume) one run to App. A's stop or the cap, then write whichever of its raw files are
    missing: maps, sink fractions, layer writes, the untrained model's sink fractions, Theorem 2 per
    position and the BOS-masking losses (trained and untrained), and the losses last. A run whose files all
    exist is skipped; one that has trained to its end only measures (a folder made before a file kind existed
    gains it without training)."""
    raw = folder / "raw"
    missing = [kind for kind in RAW_KINDS if not (raw / f"{run}{kind}").is_file()]
    if not missing:
        return
    attention, arch, k = _parts(run)
    cfg = run_config(run, plan, seed)
    stream = TaskStream("trigger_averaging", LENGTH, seed=cfg.train.seed, dim=DIM)
    trainer = Trainer(
        cfg,
        folder / "runs" / run,
        resume=True,
        progress=progress,
        stream=stream,
        eval_hooks=(_linf_hook,),
        stop_linf=LINF_TARGET,
        device="cpu",  # 16 wide, one thread (see compute): a GPU would only add launch latency
    )
    summary = trainer.run()
    model, null = trainer.model, untrained(cfg)
    # Held-out inputs apart from the stream's: the training distribution (j uniform over 3..L) for the
    # losses and Theorems 1-2, and §4's fixed trigger j = 8 for the maps and their own losses.
    uniform = TriggerAveraging(dim=DIM).generate(plan.samples, LENGTH, seed=10_000 + cfg.train.seed)
    fixed = TriggerAveraging(dim=DIM, trigger=TRIGGER).generate(plan.samples, LENGTH, seed=20_000 + cfg.train.seed)
    ids = {"run": run, "attention": attention, "arch": arch, "seed": cfg.train.seed}

    def write(kind: str, frame: pd.DataFrame) -> None:
        if kind in missing:
            io.write_table(raw / f"{run}{kind}".removesuffix(".csv"), frame)

    if "_attention.parquet" in missing:
        mean, std = attention_maps(model, fixed.inputs)
        layers, heads = mean.shape[:2]
        index = np.indices((layers, heads, LENGTH, LENGTH)).reshape(4, -1)
        frame = pd.DataFrame(
            {
                **ids,
                "layer": index[0] + 1,
                "head": index[1] + 1,
                "query": index[2] + 1,
                "key": index[3] + 1,
                "mean": mean.reshape(-1).numpy(),
                "std": std.reshape(-1).numpy(),
            }
        )
        io.write_parquet(
            raw / f"{run}_attention.parquet",
            frame,
            metadata={"samples": plan.samples, "trigger": TRIGGER, "length": LENGTH, "seed": 20_000 + cfg.train.seed},
        )
    trained_sinks, trained_positions = _sink_rows(model, uniform, ids)
    null_sinks, null_positions = _sink_rows(null, uniform, ids)
    write("_sinks.csv", pd.DataFrame(trained_sinks))
    write("_writes.csv", pd.DataFrame([{**ids, **row} for row in layer_writes(model, uniform.inputs, uniform.mask)]))
    write("_untrained_sinks.csv", pd.DataFrame(null_sinks))
    write(
        "_positions.csv",
        pd.DataFrame(
            [{**row, "model": "trained"} for row in trained_positions]
            + [{**row, "model": "untrained"} for row in null_positions]
        ),
    )
    write(
        "_masking.csv",
        pd.DataFrame(
            [
                {**ids, "model": name, **masking(m, uniform.inputs, uniform.targets)}
                for name, m in (("trained", model), ("untrained", null))
            ]
        ),
    )
    train = pd.read_csv(folder / "runs" / run / "train.csv")
    row = {
        **ids,
        "cap": cfg.train.steps,
        "steps": summary["steps"],
        "met_linf": summary["stopped"],
        # the stop's batch is scored on the final model; without a stop, the last logged batch (before its update)
        "batch_linf": summary["stop_batch_linf"] if summary["stopped"] else float(train["linf"].iloc[-1]),
        "lr": cfg.train.lr,
        "train_loss": summary["loss"],
        "train_seconds": summary["seconds"],
        **{f"uniform_{k}": v for k, v in losses(model, uniform.inputs, uniform.targets).items()},
        **{f"fixed_{k}": v for k, v in losses(model, fixed.inputs, fixed.targets).items()},
    }
    write("_loss.csv", pd.DataFrame([row]))


def theorem3_piece(plan: Plan, seed: int, folder: Path) -> None:
    """``theorem3_check`` on held-out inputs of the training distribution, into raw/theorem3.csv."""
    path = folder / "raw" / "theorem3.csv"
    if path.is_file():
        return
    batch = TriggerAveraging(dim=DIM).generate(plan.samples, LENGTH, seed=30_000 + seed)
    io.write_table(
        path.with_suffix(""),
        pd.DataFrame([{"samples": plan.samples, **theorem3_check(batch.inputs, batch.targets, batch.mask)}]),
    )


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    if cfg.model is not None:
        # before the toy runs, so that a --model that does not load fails in seconds, not minutes
        compute_real(cfg, folder, progress)
    plan = BUDGETS[cfg.budget]
    # The models are 16 wide: a second intra-op thread costs more in synchronisation than it saves, and
    # on a shared CPU it made steps up to 50x slower in our timing.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        theorem3_piece(plan, cfg.seed, Path(folder))
        for run in runs(plan):
            run_piece(run, plan, cfg.seed, Path(folder), progress)
    finally:
        torch.set_num_threads(threads)


# ----------------------------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class Raw:
    """A folder's raw files over its runs: maps, sink fractions, losses, layer writes, the Theorem 3 check, the
    untrained models' sink fractions, Theorem 2 per position (trained and untrained) and the BOS-masking
    losses (trained and untrained)."""

    maps: pd.DataFrame
    sinks: pd.DataFrame
    loss: pd.DataFrame
    writes: pd.DataFrame
    theorem3: pd.DataFrame
    untrained: pd.DataFrame
    positions: pd.DataFrame
    masking: pd.DataFrame


def _read(folder: Path, names: list[str]) -> Raw:
    """The raw files of ``names`` (a StudyError naming what is missing, and the command that adds it)."""
    raw = folder / "raw"
    missing = [run for run in names if not all((raw / f"{run}{kind}").is_file() for kind in RAW_KINDS)]
    missing += [] if (raw / "theorem3.csv").is_file() else ["theorem3"]
    if missing:
        raise StudyError(
            f"{folder} lacks the raw results of {', '.join(missing)}; run "
            f"`{load_config(folder).command(folder)}` to finish it"
        )

    def read(kind: str) -> pd.DataFrame:
        reader = pd.read_parquet if kind.endswith(".parquet") else pd.read_csv
        return pd.concat([reader(raw / f"{run}{kind}") for run in names], ignore_index=True)

    return Raw(
        read("_attention.parquet"),
        read("_sinks.csv"),
        read("_loss.csv"),
        read("_writes.csv"),
        pd.read_csv(raw / "theorem3.csv"),
        read("_untrained_sinks.csv"),
        read("_positions.csv"),
        read("_masking.csv"),
    )


def _notes(cfg: StudyConfig) -> list[str]:
    """The budget against App. A's, and where the models here differ from the paper's."""
    plan = BUDGETS[cfg.budget]
    samples = plan.samples
    faster = (
        ""
        if set(plan.lr.values()) == {1e-3}
        else (" Where the lr is above App. A's 1e-3, it is so that the budget fits a few minutes on a CPU.")
    )
    return [
        f"Budget {cfg.budget}: seeds {plan.seeds} (seed {cfg.seed} + k), step caps {plan.cap}, lr {plan.lr}, "
        f"batch {plan.batch} (App. A: Adam, lr 1e-3, batch 128, trained until the l-inf loss of a batch is "
        f"below 1e-2). Each run stops at the first training batch whose l-inf loss is below {LINF_TARGET:g}, "
        "before updating on it, or at its cap; a run is learned when it stopped so, and the verdicts read "
        f"learned runs only.{faster} Held-out sets: {samples} inputs with j uniform over 3..L (losses, Theorems "
        f"1-2) and {samples} with j = {TRIGGER} (maps, BOS mass).",
        "Residual reading: §4.2 and App. B train the 2x2 and 4x4 models with residual connections, and §1/§3.2 "
        "state the target as what the model writes to the residual stream. The deeper models here are h_0 = x, "
        "h_d = h_(d-1) + Attn_d(h_(d-1)), and their output is h_D - x, the sum of the layers' writes "
        "(model.readout writes), trained to the task's target. The 1x1 model is §3.4's single layer, whose output "
        "is its write.",
        f"Sinks per input (Theorems 1-2): alpha_(i,1) >= 1 - eps for eps in {', '.join(f'{e:g}' for e in EPS)}; the "
        f"verdicts read eps = {EPS_VERDICT:g} and delta = {DELTA:g} (the statement must hold on >= {1 - DELTA:g} of "
        "inputs). Theorem 2 is stated for one head per layer; with several heads, some (layer, head) must sink.",
        "BOS masked at evaluation: every layer's rows lose key 1 at every query i > 1 (a softmax row is "
        "renormalized over keys 2..i, a ReLU row drops key 1's term and keeps §3.4's divisor max(i - 2, 1); query 1 "
        "may attend only BOS and keeps it), on the same held-out inputs as the losses; the untrained model of each "
        "seed is masked too, as a null control.",
        "Heads split d_model = 16 into head widths 16 / heads, and scores carry the usual 1/sqrt(head width) "
        "factor (a rescaling of W_Q W_K^T); the seed gives each head full n x n matrices. All models start from "
        "the decoder's N(0, 0.02) init.",
    ]


def summarize(folder: Path) -> Section:
    folder = Path(folder)
    cfg = load_config(folder)
    plan = BUDGETS[cfg.budget]
    raw = _read(folder, runs(plan))
    real = folder / REAL
    if cfg.model is not None and not (real / "config.json").is_file():
        raise StudyError(
            f"{folder} lacks the real-model results on {cfg.model}; run `{cfg.command(folder)}` to finish it"
        )
    samples = plan.samples
    table = run_table(raw.loss, raw.sinks)
    heads = sink_head_table(bos_table(raw.maps), raw.sinks)
    masked = masking_table(raw.masking, table)
    io.write_table(folder / "table_runs", table)
    io.write_table(folder / "table_sinks", heads)
    io.write_table(folder / "table_positions", position_table(raw.positions))
    io.write_table(folder / "table_masking", masked)
    io.write_table(folder / "table_writes", raw.writes)
    io.write_table(folder / "table_theorem3", raw.theorem3)
    figures = draw_figures(raw.maps, heads, table, masked, raw.positions, folder, samples)
    notes = _notes(cfg)
    findings = (
        [finding(arch, table, heads, raw.untrained, raw.positions, samples) for arch in ARCHS]
        + [
            layer_finding(arch, table, heads, raw.writes, raw.untrained, samples)
            for arch, shape in ARCHS.items()
            if shape["layers"] > 1
        ]
        + [masking_finding(masked, samples), theorem3_finding(raw.theorem3)]
    )
    tables = toy_tables()
    if (real / "config.json").is_file():
        real_finding_, real_table, real_figure, real_note = summarize_real(folder)
        findings.append(real_finding_)
        tables.append(real_table)
        figures.append(real_figure)
        notes.append(real_note)
    else:
        notes.append(
            "The real-model part (first-token mass of a pretrained softmax LM) was not run: fetch a "
            "model and pass it, e.g. `attnlab fetch smollm2` then `attnlab study sinks --model smollm2`."
        )
    return section(
        NAME,
        folder,
        question=(
            "Does softmax attention trained on trigger-conditional averaging park its mass on BOS at "
            "every position before the trigger (one layer), or somewhere (deeper models), while ReLU "
            "attention solves the same task without a sink? Do the softmax models need that sink (masking BOS "
            "at evaluation) while the ReLU ones do not? And, given --model, does a pretrained softmax LM park "
            "its attention on its first token?"
        ),
        findings=tuple(findings),
        tables=tuple(tables),
        figures=tuple(figures),
        notes=tuple(notes),
    )


STUDY = register(
    Study(
        name="sinks",
        title="Attention sinks: softmax vs ReLU attention on trigger-conditional averaging",
        source="Attention Sinks Essential",
        compute=compute,
        summarize=summarize,
        takes_model=True,
        findings=(
            *(sink_name(arch) for arch in ARCHS),
            *(layer_name(arch) for arch, shape in ARCHS.items() if shape["layers"] > 1),
            MASK_NAME,
            THEOREM3_NAME,
            REAL_NAME,
        ),
    )
)
