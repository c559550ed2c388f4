"""The ``lengthgen`` study (Vasylenko et al. 2025 §5.1, Table 1): trained at one range of lengths, which row maps
still solve a synthetic task at multiples of it, and do their attention rows disperse as the row grows
(§3.2, non-dispersion)?

Each task is one ``commands.lengthgen`` run in ``folder/<task>/`` on the paper's protocol (lengths in the
paper's units, App. G.1; several seeds with the checkpoint and the reported seed chosen by the score at 8x,
App. G.2), whose cells are resumable; this module picks the tasks, maps and seeds per budget and reads the
runs back into tables, figures and two findings that the numbers may contradict:

- Copy with NAPE: softmax generalizes, its reported seed keeping >= ``COPY_FLOOR`` exact match at 2x and 4x
  (Table 1: 100.0 / 99.9%);
- an entmax-family map (alpha-entmax, ASEntmax) beats softmax past the training length by more than the
  spread over seeds: every learned seed of the map above every learned seed of softmax at one multiple
  in (1, 4] (Table 1: Reverse at 1.5x-4x, Max Retrieval in Fig. 1).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from .. import io
from ..commands import lengthgen
from ..diagnostics.nondispersion import theory_checks
from ..report.plot_lengthgen import plot_head_dispersion, plot_task_accuracy, plot_task_dispersion
from ..report.sections import Figure, Finding, Section, Table
from .runner import Study, StudyConfig, load_config, register, section

# Vasylenko et al. 2025 §5 compares softmax, SSMax, top-K, alpha-entmax and ASEntmax; the smoke budget keeps the
# three the claims are about, with a seed more than one so that a difference can exceed the seeds' spread.
ENTMAX_FAMILY = ("entmax_a1.5", "asentmax")
COPY_FLOOR = 90.0  # % exact match at 2x and 4x that counts as Copy generalizing (Table 1: >= 99.9)
NEAR = 4.0  # the largest multiple where the entmax-family claim is decided (Table 1's Reverse: 1.5x-4x)

BUDGETS: dict[str, dict[str, Any]] = {
    "smoke": {"budget": "smoke", "samples": 100, "seeds": 2, "maps": ("softmax", "entmax_a1.5", "asentmax"),
              "tasks": {"copy": {"train_len": 32, "min_train_len": 16, "eval_mult": (1, 2, 4), "steps": 3000},
                        # Table 1's separation; the 4-layer model is the smoke run's costliest, so it trains the
                        # headline pair only and is chosen at 2x (App. G.2 falls back to 2x or 4x where 8x fails)
                        "reverse": {"train_len": 32, "min_train_len": 16, "eval_mult": (1, 1.5, 2, 4), "steps": 3000,
                                    "maps": ("softmax", "asentmax"), "select_mult": 2}}},
    # What attnlab demo runs: smoke's Copy alone (Reverse's 4-layer models take most of smoke's time).
    "demo": {"budget": "smoke", "samples": 100, "seeds": 2, "maps": ("softmax", "entmax_a1.5", "asentmax"),
             "tasks": {"copy": {"train_len": 32, "min_train_len": 16, "eval_mult": (1, 2, 4), "steps": 3000}}},
    # Vasylenko et al. 2025 App. G: training lengths 32-64 in the paper's units, Table 5's model and data per
    # task, Table 1's multiples, best of 3 seeds.
    "full": {"budget": "full", "samples": None, "seeds": 3,
             "maps": ("softmax", "ssmax_learned", "topk_k32", "entmax_a1.5", "asentmax"),
             "tasks": {"mqmtar": {"train_len": 64, "min_train_len": 32, "eval_mult": (1, 2, 4, 16, 64, 256, 1024)},
                       "reverse": {"train_len": 64, "min_train_len": 32, "eval_mult": (1, 1.5, 2, 4, 8)},
                       "copy": {"train_len": 64, "min_train_len": 32, "eval_mult": (1, 2, 4, 8, 16, 32, 64)},
                       "sort": {"train_len": 64, "min_train_len": 32, "eval_mult": (1, 2, 4, 8)}}},
}


def configs(cfg: StudyConfig) -> dict[str, lengthgen.LengthgenConfig]:
    """One lengthgen config per task of the budget (lengths in the paper's units unless the task says)."""
    plan = BUDGETS[cfg.budget]
    return {task: lengthgen.LengthgenConfig(**{"task": task, "maps": plan["maps"], "budget": plan["budget"],
                                               "seed": cfg.seed, "seeds": plan["seeds"], "samples": plan["samples"],
                                               "units": "paper", **spec})
            for task, spec in plan["tasks"].items()}


THEORY = "theory_checks"  # the table of Lemma 2 / Prop. 1 / Prop. 3 checks on synthetic rows


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    io.write_table(folder / THEORY, theory_checks())
    # Smoke cells train one per core, the threads split between them (one each on a machine whose torch
    # uses every core).
    jobs = 1 if cfg.budget == "full" else max(1, os.cpu_count() or 1)
    for task, run_cfg in configs(cfg).items():
        lengthgen.run(run_cfg, folder / task, progress=progress, jobs=jobs)


def _read_task(run: Path) -> tuple[lengthgen.LengthgenConfig, pd.DataFrame, pd.DataFrame]:
    """A task's lengthgen config and its two tables, as the engine wrote them (accuracy.csv, dispersion.csv)."""
    saved = json.loads((run / "config.json").read_text())
    saved.pop("plan", None)
    saved["maps"] = tuple(saved["maps"])
    if saved.get("eval_mult") is not None:
        saved["eval_mult"] = tuple(saved["eval_mult"])
    return (lengthgen.LengthgenConfig(**saved), pd.read_csv(run / "accuracy.csv"), pd.read_csv(run / "dispersion.csv"))


def read_runs(folder: Path) -> dict[str, tuple[lengthgen.LengthgenConfig, pd.DataFrame, pd.DataFrame]]:
    """task -> (its lengthgen config, its accuracy table, its dispersion table), from the folder's files."""
    tasks = BUDGETS[load_config(folder).budget]["tasks"]
    return {task: _read_task(folder / task) for task in tasks}


def accuracy_long(runs) -> pd.DataFrame:
    """One row per task, variant, seed and evaluation length: the score (%), whether the seed is the variant's
    reported one (``best``), the length multiple, the row length in tokens and in the paper's units, the rows
    scored and the answer rows' entropy and support averaged over layers and heads (every head of a layer
    sees the same rows, so this is the mean over the sampled rows of each layer, averaged over layers)."""
    rows = []
    for task, (run_cfg, acc, disp) in runs.items():
        answer = disp.groupby(["variant", "seed", "length"])[["answer_entropy", "answer_support"]].mean()
        for _, r in acc.iterrows():
            for mult, length in zip(run_cfg.plan["eval_mult"], run_cfg.lengths, strict=True):
                rows.append({"task": task, "variant": r.variant, "seed": int(r.seed), "best": bool(r.best),
                             "trained_at": run_cfg.trained_at, "multiple": mult,
                             "paper_length": round(run_cfg.train_len * mult), "length": length,
                             "metric": lengthgen.metric(run_cfg.task_def)[0],
                             "score": r[lengthgen.mult_label(mult)],
                             "samples": run_cfg.samples_at(length),
                             **answer.loc[(r.variant, r.seed, length)].to_dict()})
    return pd.DataFrame(rows)


def seed_table(acc: pd.DataFrame) -> pd.DataFrame:
    """Table 1's shape with every seed: one row per task, variant and seed, the score (%) per multiple."""
    wide = acc.pivot_table(index=["task", "variant", "seed", "best"], columns="multiple", values="score",
                           sort=False)
    wide = wide[sorted(wide.columns)]
    wide.columns = [lengthgen.mult_label(m) for m in wide.columns]
    return wide.reset_index()


def _learned(acc: pd.DataFrame) -> pd.DataFrame:
    """The rows of the seeds whose in-distribution score reaches ``lengthgen.LEARNED``."""
    inside = acc[acc.multiple == 1].set_index(["task", "variant", "seed"])["score"]
    ok = inside[inside >= 100 * lengthgen.LEARNED].index
    return acc[acc.set_index(["task", "variant", "seed"]).index.isin(ok)]


def _scores(acc: pd.DataFrame, task: str, variant: str, mult: float) -> list[float]:
    part = acc[(acc.task == task) & (acc.variant == variant) & (acc.multiple == mult)]
    return part.sort_values("seed").score.tolist()


def _listed(values: list[float]) -> str:
    return "/".join(f"{v:.1f}" for v in values) + "%"


def copy_finding(acc: pd.DataFrame) -> Finding:
    """Copy with NAPE generalizes under softmax (Vasylenko et al. 2025 Table 1): the reported softmax seed keeps
    >= COPY_FLOOR at 2x and 4x."""
    claim = (f"Trained on Copy with NAPE, softmax generalizes: the reported seed (best at 8x on held-out rows, "
             f"Vasylenko et al. 2025 App. G.2) keeps >= {COPY_FLOOR:g}% exact match at 2x and 4x the training "
             "length (Table 1: 100.0 / 99.9%)")
    soft = acc[(acc.task == "copy") & (acc.variant == "softmax")]
    if soft.empty or not {1, 2, 4} <= set(soft.multiple):
        return Finding(claim, "not checked", "The budget scores no softmax model on Copy at 1x, 2x and 4x.")
    best = soft[soft.best].set_index("multiple").score
    each = "; ".join(f"{lengthgen.mult_label(m)} {_listed(_scores(acc, 'copy', 'softmax', m))}" for m in (1, 2, 4))
    evidence = (f"Reported seed {int(soft[soft.best].seed.iloc[0])}: {best[1]:.1f}% in distribution, {best[2]:.1f}% "
                f"at 2x, {best[4]:.1f}% at 4x (every seed, in seed order: {each}).")
    if best[1] < 100 * lengthgen.LEARNED:
        return Finding(claim, "not checked", f"Copy was not learned in distribution. {evidence}")
    return Finding(claim, "reproduced" if min(best[2], best[4]) >= COPY_FLOOR else "not reproduced", evidence)


def family_finding(acc: pd.DataFrame) -> Finding:
    """Vasylenko et al. 2025's headline: an entmax-family map beats softmax out of distribution, here by more than
    the spread over seeds (every learned seed of the map above every learned seed of softmax) at a multiple
    in (1, NEAR]."""
    claim = ("An entmax-family map (alpha-entmax, ASEntmax) keeps more accuracy than softmax past the training "
             f"length, by more than the spread over seeds: at some multiple in (1x, {NEAR:g}x], every learned "
             "seed of the map scores above every learned seed of softmax (Vasylenko et al. 2025 Table 1, Fig. 1)")
    learned = _learned(acc)
    checked, wins, lines = 0, [], []
    for task in acc.task.unique():
        family = [v for v in ENTMAX_FAMILY if not learned[(learned.task == task) & (learned.variant == v)].empty]
        if learned[(learned.task == task) & (learned.variant == "softmax")].empty or not family:
            inside = acc[(acc.task == task) & (acc.multiple == 1)]
            lines.append(f"{task}: not learned in distribution (" + ", ".join(
                f"{v} {_listed(_scores(acc, task, v, 1))}" for v in inside.variant.unique()) + ")")
            continue
        checked += 1
        for mult in sorted(m for m in acc[acc.task == task].multiple.unique() if 1 < m <= NEAR):
            soft = _scores(learned, task, "softmax", mult)
            parts = [f"softmax {_listed(soft)}"]
            for v in family:
                ours = _scores(learned, task, v, mult)
                parts.append(f"{v} {_listed(ours)}")
                if min(ours) > max(soft):
                    wins.append(f"{task} {v} at {lengthgen.mult_label(mult)}")
            lines.append(f"{task} at {lengthgen.mult_label(mult)}: " + ", ".join(parts))
    verdict = "not checked" if not checked else ("reproduced" if wins else "not reproduced")
    won = f" Beyond the spread: {', '.join(wins)}." if wins else ""
    return Finding(claim, verdict, "Learned seeds, in seed order: " + "; ".join(lines) + "." + won)


def theory_finding(checks: pd.DataFrame) -> Finding:
    """Lemma 2, Prop. 1 and Prop. 3 of Vasylenko et al. 2025 on attnlab's own row maps: every check holds."""
    claim = ("attnlab's softmax and alpha-entmax rows obey Vasylenko et al. 2025's non-dispersion results on "
             "synthetic rows: Lemma 2's two-level threshold, Prop. 1's dispersion bounds and Prop. 3's "
             "non-vanishing gap")
    failed = checks[~checks.holds.astype(bool)]
    per = checks.groupby(checks.statement.str.split(":").str[0], sort=False).holds.agg(["sum", "size"])
    evidence = (f"{int(checks.holds.sum())} of {len(checks)} checks hold (" + ", ".join(
        f"{name} {int(r['sum'])}/{int(r['size'])}" for name, r in per.iterrows()) + ")"
        + ("" if failed.empty else "; failing: " + "; ".join(f"{r.statement} at {r.setting}: predicted "
                                                             f"{r.predicted:.4g}, measured {r.measured:.4g}"
                                                             for r in failed.head(3).itertuples()))
        + f"; rows of {int(checks.n.min())} to {int(checks.n.max())} keys.")
    return Finding(claim, "check passed" if failed.empty else "check failed", evidence)


def _head_figures(runs, folder: Path) -> list[Figure]:
    """Per task, every head's answer-row entropy and support against length for each reported seed."""
    figures = []
    for task, (run_cfg, acc, disp) in runs.items():
        best = acc[acc.best.astype(bool)][["variant", "seed"]]
        part = disp.merge(best, on=["variant", "seed"])
        stem = f"heads_{task}"
        plot_head_dispersion(part, folder / stem, f"{task}, trained at {run_cfg.trained_at}: answer rows per head")
        figures.append(Figure(stem, (
            f"{task}: answer-row entropy (top) and support (bottom, log) of every head of each variant's reported "
            "seed against evaluation length (tokens); dotted, log L and L (attention spread over every key). A head "
            "whose support stays flat does not disperse (Vasylenko et al. 2025 §3.2); under NAPE the ALiBi heads "
            "(the first half) can stay local under any map, so compare the NoPE half across maps.")))
    return figures


def summarize(folder: Path) -> Section:
    runs = read_runs(folder)
    acc = accuracy_long(runs)
    seeds = seed_table(acc)
    io.write_table(folder / "accuracy", acc)
    io.write_table(folder / "seeds", seeds)
    checks = pd.read_csv(folder / f"{THEORY}.csv")
    reported = acc[acc.best]
    plot_task_accuracy(reported, folder / "accuracy")
    plot_task_dispersion(reported, folder / "dispersion")
    heads = _head_figures(runs, folder)
    cfg = load_config(folder)
    plan = BUDGETS[cfg.budget]
    notes = [f"{cfg.budget} budget, NAPE positions (half the heads NoPE, half ALiBi with slopes 1/h), "
             f"{plan['seeds']} seeds per variant: "
             + "; ".join(f"{t} on {c.plan['layers']} layers x {c.plan['heads']} heads x {c.plan['d_model']} wide, "
                         f"trained at {c.trained_at} for {c.plan['steps']} steps of {c.plan['batch']} rows, "
                         f"checkpoint and reported seed chosen at {c.select_mult:g}x on {c.plan['select_samples']} "
                         "held-out rows" for t, (c, *_) in runs.items())
             + ". The paper trains Table 5's models on 10-50M samples and reports the best of 3 seeds.",
             "A seed below 50% in distribution has not learned the task; the entmax-family finding leaves it out "
             "and seeds.csv still lists it."]
    if cfg.budget == "smoke":
        notes.append("Long lengths are scored on fewer rows (as many tokens as 4x the training length would take); "
                     "see the samples column of accuracy.csv.")
    return section(
        "lengthgen", folder,
        question="Trained at one range of lengths, which row maps still solve the task at multiples of it, by more "
                 "than the spread over seeds, and do their attention rows disperse as the row grows?",
        findings=(copy_finding(acc), family_finding(acc), theory_finding(checks)),
        tables=(Table("seeds", "Every seed's score (%) per task, variant and length multiple; best marks the "
                               "variant's reported seed (the best at the selection multiple on held-out rows)."),
                Table("accuracy", "Every cell: score (%) per task, variant, seed and evaluation length (tokens, and "
                                  "paper_length in the paper's units), with the mean entropy (nats) and support "
                                  "(keys) of the answer rows over layers and heads."),
                Table(THEORY, "Vasylenko et al. 2025's Lemma 2, Prop. 1 and Prop. 3 on synthetic float64 rows "
                              "(attnlab.diagnostics.theory_checks): per check, the setting, the paper's prediction "
                              "or bound, the measured value, the tolerance and whether it holds.")),
        figures=(Figure("accuracy", "Score (%) of each variant's reported seed against evaluation length, one panel "
                                    "per task; the dotted line is the longest training length. Curves that stay "
                                    "high to the right generalize."),
                 Figure("dispersion", "Answer-row attention entropy (top) and support size (bottom, log scale) of "
                                      "each variant's reported seed against evaluation length, mean over layers and "
                                      "heads. Softmax's support is every allowed key, so it grows with the length; a "
                                      "sparse map whose entropy and support stay flat does not disperse (Vasylenko "
                                      "et al. 2025 §3.2)."), *heads),
        notes=tuple(notes))


STUDY = register(Study(
    name="lengthgen", title="Length generalization with sparse attention",
    source="Vasylenko et al. 2025",
    compute=compute, summarize=summarize, demo=True))
