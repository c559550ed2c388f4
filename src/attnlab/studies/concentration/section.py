"""The concentration study's tables and notes, read from the folder's files: the audit's active rows, the
prevalence table (Polynomial Concentration Table 1) and its per-prompt counts, the matched diagnostic (§5.5,
Table 5) over all heads and the ablation's fixed causal head set, the i.i.d. rows of the placement, softmax's two
halves of the scored prompts, and the notes a reader needs to weigh the numbers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from attnlab.analyses import audit, substitute
from attnlab.analyses.sections import read_config
from attnlab.report.readback import read_record
from attnlab.studies.concentration.findings import iid_counts
from attnlab.studies.concentration.plan import B, P, Plan
from attnlab.studies.concentration.rules import Counts
from attnlab.studies.runner import StudyConfig

# Table 5's top-K column conditions on the fixed causal head set of the ablation; its K = 40 is 8-14% of its
# models' heads, so the largest ablated K within 15% of the heads plays that part here.
CAUSAL_SHARE = 0.15


@dataclass(frozen=True)
class AuditRecord:
    """What the study reads of an audit's config.json beside the audit's own settings: the calibrated b_auto, the
    model's layers and heads per layer, and its type."""

    b_auto: float | None
    layers: int
    heads: int
    model_type: str


def read_audit_config(audit_folder: Path) -> dict[str, Any]:
    """An audit's config.json, checked against ``AuditRecord`` (``readback.read_record``)."""
    return read_record(audit_folder / "config.json", AuditRecord)


def _rows(audit_folder: Path, b: str, *, answering: bool = False) -> pd.DataFrame:
    """The audit's active rows; ``answering``: only each prompt's last query position (taken over every row,
    so that a head whose last row is dead contributes none rather than an earlier one)."""
    cols = [
        "layer",
        "head",
        "prompt",
        "query",
        "status",
        "rho",
        "a_act",
        "p_star",
        *(f"{k}_p{p}" for p in P for k in ("s", "safe", "pred_safe", "safe_eps")),
    ]
    rows = pd.read_parquet(audit_folder / f"rows_b{b}.parquet", columns=cols)
    if answering:
        rows = rows[rows["query"] == rows.groupby("prompt")["query"].transform("max")]
    return rows[rows["status"] == "active"]


def prevalence_table(folder: Path, suites) -> pd.DataFrame:
    """Each audited suite's prevalence lines (Polynomial Concentration Table 1), one block per suite, recomputed from
    its audit's rows as ``attnlab report`` recomputes an audit's (its audit.csv is not read)."""
    blocks = []
    for s in suites:
        audit_folder = folder / "audit" / s
        config = read_config(audit_folder)
        blocks.append(audit.prevalence_table(audit.read_rows(audit_folder, config), config).assign(suite=s))
    return pd.concat(blocks, ignore_index=True).pipe(lambda t: t[["suite", *t.columns[:-1]]])


def causal_k(ks, n_heads: int) -> int:
    """The K of the fixed causal head set: the largest ablated K within CAUSAL_SHARE of the heads, else the
    smallest ablated K."""
    ks = sorted(int(k) for k in ks)
    within = [k for k in ks if k <= CAUSAL_SHARE * n_heads]
    return within[-1] if within else ks[0]


def matched(rows: dict[str, pd.DataFrame], sub: pd.DataFrame, causal: list[tuple[int, int]]) -> pd.DataFrame:
    """Polynomial Concentration §5.5, Table 5: per ReLU cell (p, b), the measured-safe % of the answering rows
    over every head and over the fixed ``causal`` head set (the ablation's top-K), beside the cell's
    substitution accuracy."""
    by = sub.set_index("recipe")
    base = float(by.loc[substitute.BASELINE, "accuracy %"])
    top = pd.MultiIndex.from_tuples(causal, names=["layer", "head"])
    lines = []
    for p in P:
        for b in B:
            r = rows[b]
            in_top = pd.MultiIndex.from_frame(r[["layer", "head"]]).isin(top)
            cell = by.loc[f"relu_p{p}_b{b}"]
            lines.append(
                {
                    "recipe": f"relu_p{p}_b{b}",
                    "p": p,
                    "b": b,
                    "rows": len(r),
                    "all-head safe %": audit.percent(r[f"safe_p{p}"]),
                    f"top-{len(causal)} safe %": audit.percent(r.loc[in_top, f"safe_p{p}"]),
                    "softmax %": base,
                    "accuracy %": float(cell["accuracy %"]),
                    "lo": float(cell["lo"]),
                    "hi": float(cell["hi"]),
                    "delta pp": float(cell["delta pp"]),
                }
            )
    return pd.DataFrame(lines)


def _notes(cfg: StudyConfig, plan: Plan, folder: Path, audit_cfg: dict[str, Any], ks: list[int]) -> list[str]:
    """What a reader needs to weigh the numbers: b_auto, the model and its training, the sizes of the run."""
    notes = [
        f"b = auto resolves to {audit_cfg['b_auto']:.3f} (Polynomial Concentration App. B calibration on generic text)."
    ]
    if cfg.model is None:
        spec = plan.train
        loss = pd.read_csv(folder / "model" / "train_loss.csv")["loss"]
        notes.append(
            f"{cfg.budget} budget: the model is a {spec.layers}-layer x {spec.heads}-head Llama, "
            f"{spec.hidden} wide, trained here with softmax for {spec.steps} steps on induction prompts "
            f"of {plan.length} tokens (answer-position loss {loss.iloc[0]:.2f} -> "
            f"{loss.iloc[-10:].mean():.3f}, mean of the last 10 steps); the Polynomial Concentration paper "
            "audits pretrained Llama-3 "
            "(1-8B), Qwen3, Gemma-4 and Pythia checkpoints on prompts up to ~4K tokens."
        )
    else:
        notes.append(
            f"Model: {cfg.model} ({audit_cfg['model_type']}, {audit_cfg['layers']} layers x "
            f"{audit_cfg['heads']} heads), pretrained, run as given in float32. A GGUF's weights are "
            "dequantized from its 4-bit blocks: the numbers are those of the quantized model, not of its "
            "bf16 original."
        )
    size = f"pad {plan.pad}" if plan.pad is not None else f"{plan.length} tokens"
    notes.append(
        f"Evaluation: {plan.prompts} {plan.suite} prompts ({size}) per recipe and subset "
        f"(the paper: 200); the other suites at {plan.length} tokens; audit over "
        f"{plan.audit_prompts} prompts per suite "
        f"({', '.join(plan.suites)}), a query every {plan.every} tokens and the last; the matched "
        f"diagnostic over the {plan.prompts} scored prompts' last positions; ablation K in "
        f"{ks} with {plan.random_draws} random draws, ranked on induction; head types "
        f"over {plan.heads_prompts} induction prompts (Polynomial Concentration App. H)."
    )
    return notes


def prevalence_shares(folder: Path, suites) -> pd.DataFrame:
    """Per audited suite and prompt, the active rows at b = 0 and those unsafe at p = 2 (Polynomial Concentration
    Table 1's cell, counted per prompt: the unit of its interval, App. R)."""
    frames = []
    for s in suites:
        rows = pd.read_parquet(folder / "audit" / s / "rows_b0.parquet", columns=["prompt", "status", "safe_p2"])
        # a row whose flag is unknown is neither safe nor unsafe: left out, as the audit's prevalence leaves it out
        active = rows[(rows["status"] == "active") & rows["safe_p2"].notna()]
        counts = active.assign(unsafe=~active["safe_p2"].astype(bool)).groupby("prompt")["unsafe"].agg(["sum", "size"])
        frames.append(
            pd.DataFrame({"suite": s, "prompt": counts.index, "unsafe": counts["sum"], "active": counts["size"]})
        )
    shares = pd.concat(frames, ignore_index=True)
    # categorical, so that a suite without an active row stays one, with no share, rather than dropping out
    return shares.assign(suite=pd.Categorical(shares["suite"], categories=list(suites)))


def prevalence_null(folder: Path, plan: Plan) -> tuple[Counts, Counts]:
    """Two independent draws of ``iid_counts`` (seeds 0 and 1) at the key counts of the active b = 0 rows of every
    audited suite: the placement's noise reference and its null control."""
    keys = pd.concat(
        [pd.read_parquet(folder / "audit" / s / "rows_b0.parquet", columns=["status", "n_keys"]) for s in plan.suites]
    )
    active = keys.loc[keys["status"] == "active", "n_keys"]
    return iid_counts(active, plan.audit_prompts, seed=0), iid_counts(active, plan.audit_prompts, seed=1)


def softmax_halves(folder: Path) -> tuple[tuple[int, int], ...]:
    """Softmax's (correct, n) on the first and on the second half of the scored prompts (by prompt index), read
    from the sweep's answers: two draws of prompts through the same hook and scoring. Empty with fewer than two
    prompts."""
    answers = pd.read_parquet(folder / "substitute" / "answers.parquet", columns=["recipe", "prompt", "correct"])
    soft = answers[answers["recipe"] == substitute.BASELINE].sort_values("prompt")["correct"].astype(bool)
    if len(soft) < 2:
        return ()
    cut = len(soft) // 2
    return tuple((int(h.sum()), len(h)) for h in (soft.iloc[:cut], soft.iloc[cut:]))
