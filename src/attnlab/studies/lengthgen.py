"""The ``lengthgen`` study (Vasylenko et al. 2025 §5.1, Table 1): trained at one length, which row maps
still solve a synthetic task at multiples of it, and do their attention rows disperse as the row grows
(§3.2, non-dispersion)? Softmax, SSMax, top-K, alpha-entmax and ASEntmax are trained at one length on
three synthetic tasks and scored at multiples of it, with the entropy and support of the answer rows at
every length.

Each task is one ``commands.lengthgen`` run in ``folder/<task>/`` (its cells are resumable); this
module picks the tasks and maps per budget and reads the runs back into one table, two figures and the
finding of Vasylenko et al. 2025: entmax-family maps keep more accuracy than softmax past the training
length on at least one task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from .. import io
from ..commands import lengthgen
from ..report.plot_lengthgen import plot_task_accuracy, plot_task_dispersion
from ..report.sections import Figure, Finding, Section, Table
from .runner import Study, StudyConfig, load_config, register, section

# Vasylenko et al. 2025 §5 compares these five; top-K keeps K = a quarter of the training length (K = 16 at 64 in
# Tables 9-15), so the smoke budget's 16-token training gives K = 4.
ENTMAX_FAMILY = ("entmax_a1.5", "asentmax")

BUDGETS: dict[str, dict[str, Any]] = {
    # Copy and sparse Flip-Flop learn within 500-1000 steps at 16 tokens on two CPU cores (Reverse and
    # Max Retrieval did not); MQMTAR does not learn at this scale (measured), and its row stays in the
    # table as a measured zero.
    "smoke": {"budget": "smoke", "samples": 100, "eval_mult": (1, 2, 4, 8),
              "maps": ("softmax", "ssmax_learned", "topk_k4", "entmax_a1.5", "asentmax"),
              "tasks": {"copy": {"train_len": 16, "steps": 500}, "flipflop_sparse": {"train_len": 16, "steps": 1000},
                        "mqmtar": {"train_len": 64, "steps": 200}}},
    # Vasylenko et al. 2025 App. G: training lengths 32-64, Table 5's model per task.
    "full": {"budget": "full", "samples": None, "eval_mult": None,
             "maps": ("softmax", "ssmax_learned", "topk_k16", "entmax_a1.5", "asentmax"),
             # MQMTAR's shortest row holds its 4 queries and one key-value pair per query: 51 tokens
             "tasks": {"mqmtar": {"train_len": 64, "min_train_len": 51, "steps": None},
                       "copy": {"train_len": 64, "min_train_len": 32, "steps": None},
                       "flipflop_sparse": {"train_len": 64, "min_train_len": 32, "steps": None}}},
}


def configs(cfg: StudyConfig) -> dict[str, lengthgen.LengthgenConfig]:
    """One lengthgen config per task of the budget."""
    plan = BUDGETS[cfg.budget]
    return {task: lengthgen.LengthgenConfig(task=task, maps=plan["maps"], budget=plan["budget"], seed=cfg.seed,
                                            samples=plan["samples"], eval_mult=plan["eval_mult"], **spec)
            for task, spec in plan["tasks"].items()}


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    for task, run_cfg in configs(cfg).items():
        lengthgen.run(run_cfg, folder / task, progress=progress)


def _read_task(run: Path) -> tuple[lengthgen.LengthgenConfig, pd.DataFrame, pd.DataFrame]:
    """A task's lengthgen config and its two tables, as the engine wrote them (accuracy.csv, dispersion.csv)."""
    saved = json.loads((run / "config.json").read_text())
    saved.pop("plan", None)
    saved["maps"] = tuple(saved["maps"])
    if saved.get("eval_mult") is not None:
        saved["eval_mult"] = tuple(saved["eval_mult"])
    return (lengthgen.LengthgenConfig(**saved), pd.read_csv(run / "accuracy.csv", index_col="variant"),
            pd.read_csv(run / "dispersion.csv"))


def read_runs(folder: Path) -> dict[str, tuple[lengthgen.LengthgenConfig, pd.DataFrame, pd.DataFrame]]:
    """task -> (its lengthgen config, its accuracy table, its dispersion table), from the folder's files."""
    tasks = BUDGETS[load_config(folder).budget]["tasks"]
    return {task: _read_task(folder / task) for task in tasks}


def accuracy_long(runs) -> pd.DataFrame:
    """One row per task, variant and evaluation length: the score (%), the length multiple, the rows scored
    and the answer rows' entropy and support averaged over layers and heads (every head of a layer sees the
    same rows, so this is the mean over the sampled rows of each layer, averaged over layers)."""
    rows = []
    for task, (run_cfg, acc, disp) in runs.items():
        answer = disp.groupby(["variant", "length"])[["answer_entropy", "answer_support"]].mean()
        for name in run_cfg.maps:
            for mult, length in zip(run_cfg.plan["eval_mult"], run_cfg.lengths, strict=True):
                rows.append({"task": task, "variant": name, "trained_at": run_cfg.trained_at, "multiple": mult,
                             "length": length, "metric": lengthgen.metric(run_cfg.task_def)[0],
                             "score": acc.loc[name, lengthgen.mult_label(mult)], "samples": run_cfg.samples_at(length),
                             **answer.loc[(name, length)].to_dict()})
    return pd.DataFrame(rows)


def beyond_training(acc: pd.DataFrame) -> pd.DataFrame:
    """Per task and variant: the in-distribution score and the mean score over lengths past training."""
    inside = acc[acc.multiple == 1].set_index(["task", "variant"])["score"].rename("in_distribution")
    past = acc[acc.multiple > 1].groupby(["task", "variant"])["score"].mean().rename("mean_past_training")
    return pd.concat([inside, past], axis=1).reset_index()


def finding(summary: pd.DataFrame) -> Finding:
    """Vasylenko et al. 2025's claim, decided on the tasks where softmax and an entmax-family map both learned."""
    claim = ("entmax-family maps (alpha-entmax, ASEntmax) keep more accuracy than softmax past the training "
             "length on at least one task (Vasylenko et al. 2025 Table 1)")
    by = summary.set_index(["task", "variant"])
    checked, wins, lines = 0, [], []
    for task in summary.task.unique():
        soft = by.loc[(task, "softmax")]
        family = [v for v in ENTMAX_FAMILY if (task, v) in by.index]
        learned = [v for v in family if by.loc[(task, v), "in_distribution"] >= 100 * lengthgen.LEARNED]
        if soft.in_distribution < 100 * lengthgen.LEARNED or not learned:
            lines.append(f"{task}: not learned in distribution (softmax {soft.in_distribution:.1f}%, "
                         + ", ".join(f"{v} {by.loc[(task, v), 'in_distribution']:.1f}%" for v in family) + ")")
            continue
        checked += 1
        best = max(learned, key=lambda v: by.loc[(task, v), "mean_past_training"])
        ours, theirs = by.loc[(task, best), "mean_past_training"], soft.mean_past_training
        if ours > theirs:
            wins.append(task)
        lines.append(f"{task}: mean score past training {best} {ours:.1f}% vs softmax {theirs:.1f}%")
    verdict = "not checked" if not checked else ("reproduced" if wins else "not reproduced")
    return Finding(claim, verdict, "; ".join(lines) + ".")


def summarize(folder: Path) -> Section:
    runs = read_runs(folder)
    acc = accuracy_long(runs)
    summary = beyond_training(acc)
    io.write_table(folder / "accuracy", acc)
    io.write_table(folder / "beyond_training", summary)
    plot_task_accuracy(acc, folder / "accuracy")
    plot_task_dispersion(acc, folder / "dispersion")
    cfg = load_config(folder)
    notes = [f"{cfg.budget} budget, NAPE positions (half the heads NoPE, half ALiBi): "
             + ", ".join(f"{t} on {c.plan['layers']} layers x {c.plan['heads']} heads x {c.plan['d_model']} wide, "
                         f"trained at {c.trained_at} tokens for {c.plan['steps']} steps" for t, (c, *_) in runs.items())
             + "; the seed trains Table 5's models on 50M samples."]
    if cfg.budget == "smoke":
        notes.append("Long lengths are scored on fewer rows (as many tokens as 4x the training length would take); "
                     "see the samples column of accuracy.csv.")
    return section(
        "lengthgen", folder,
        question="Trained at one length, which row maps still solve the task at 2x to 8x (smoke) or up to 1024x "
                 "(full) that length, and do their attention rows disperse as the row grows?",
        findings=(finding(summary),),
        tables=(Table("beyond_training", "Per task and variant: in-distribution score and mean score over the "
                                         "lengths past training (%)."),
                Table("accuracy", "Every cell: score (%) per task, variant and evaluation length, with the mean "
                                  "entropy (nats) and support (keys) of the answer rows over layers and heads.")),
        figures=(Figure("accuracy", "Score (%) against evaluation length, one panel per task; the dotted line is "
                                    "the training length. Curves that stay high to the right generalize."),
                 Figure("dispersion", "Answer-row attention entropy (top) and support size (bottom, log scale) "
                                      "against evaluation length, mean over layers and heads. Softmax's support is "
                                      "every allowed key, so it grows with the length; a sparse map whose entropy "
                                      "and support stay flat does not disperse (Vasylenko et al. 2025 §3.2).")),
        notes=tuple(notes))


STUDY = register(Study(
    name="lengthgen", title="Length generalization with sparse attention",
    source="Vasylenko et al. 2025",
    compute=compute, summarize=summarize))
