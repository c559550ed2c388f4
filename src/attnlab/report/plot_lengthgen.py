"""Figures of length generalization (Vasylenko et al. 2025 §5.1, Table 1; §3.2): score against evaluation
length, for one ``attnlab lengthgen`` run and per task of the ``lengthgen`` study, and the answer rows'
entropy and support against length (non-dispersion), per task and per head.

Rendering only: callers hand over tables and labels; nothing here trains or reads a study folder.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab.errors import ArgumentError
from attnlab.report.figures import plt, save_figure


def plot_run_accuracy(
    acc: pd.DataFrame, lengths: Sequence[int], ylabel: str, title: str, path: str | Path
) -> tuple[Path, Path]:
    """One curve per variant (``acc``: a row per variant, a score column per evaluation length, in the
    order of ``lengths``) against the evaluation length, log2 axis."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, row in acc.iterrows():
        ax.plot(lengths, row.values, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(-2, 102)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, path)


def plot_task_accuracy(acc: pd.DataFrame, path: str | Path) -> tuple[Path, Path]:
    """One panel per task of ``acc`` (a row per task, variant and length: columns task, variant, length,
    multiple, score, trained_at, metric): score against evaluation length, the training length dotted."""
    tasks = list(acc.task.unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        part = acc[acc.task == task]
        for name, rows in part.groupby("variant", sort=False):
            ax.plot(rows.length, rows.score, marker="o", label=name)
        train = part[part.multiple == 1].length.iloc[0]
        ax.axvline(train, color="0.6", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_ylim(-3, 103)
        ax.set_title(f"{task} (trained at {part.trained_at.iloc[0]})")
        ax.set_xlabel("evaluation length (tokens)")
        ax.set_ylabel(f"{part.metric.iloc[0]} (%)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_task_dispersion(acc: pd.DataFrame, path: str | Path) -> tuple[Path, Path]:
    """Per task of ``acc`` (columns task, variant, length, answer_entropy, answer_support): the answer rows'
    entropy (top) and support (bottom, log scale) against evaluation length."""
    tasks = list(acc.task.unique())
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.2 * len(tasks), 6.4), squeeze=False)
    for col, task in enumerate(tasks):
        part = acc[acc.task == task]
        for name, rows in part.groupby("variant", sort=False):
            axes[0][col].plot(rows.length, rows.answer_entropy, marker="o", label=name)
            axes[1][col].plot(rows.length, rows.answer_support, marker="o", label=name)
        axes[0][col].set_title(task)
        axes[0][col].set_ylabel("answer-row entropy (nats)")
        axes[1][col].set_ylabel("answer-row support (keys)")
        axes[1][col].set_yscale("log")
        for ax in axes[:, col]:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("evaluation length (tokens)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


HEAD_COLUMNS = ("variant", "length", "layer", "head", "answer_entropy", "answer_support")
_SEED_STYLES = ("-", "--", "-.", (0, (3, 1, 1, 1, 1, 1)))


def plot_head_dispersion(table: pd.DataFrame, path: str | Path, title: str) -> tuple[Path, Path]:
    """Per variant of ``table`` (the lengthgen dispersion table: a row per variant, length, layer and head, and
    per seed where a ``seed`` column is given), a column of two panels: the answer rows' mean entropy (top) and
    support (bottom, log scale) against evaluation length, one line per head (colour: layer and head; line style:
    seed). Dotted: log L and L, the entropy and support of attention spread over all L keys. A head whose
    support stays flat keeps its attention bounded as length grows, one climbing with the dotted line disperses
    (Vasylenko et al. 2025 §3.2). Panels in a row share their y axis, so variants compare directly."""
    missing = [c for c in HEAD_COLUMNS if c not in table.columns]
    if missing:
        raise ArgumentError(
            f"head dispersion table lacks columns {missing}; it needs {list(HEAD_COLUMNS)} "
            "(and optionally seed), as studies.lengthgen.experiment.dispersion_table writes them"
        )
    if table.empty:
        raise ArgumentError("head dispersion table has no rows: nothing to draw")
    seeds = "seed" in table.columns
    key = ["variant", *(["seed"] if seeds else []), "layer", "head"]
    repeated = table.duplicated([*key, "length"])
    if repeated.any():
        raise ArgumentError(
            f"head dispersion table has more than one row for {key + ['length']} = "
            f"{table.loc[repeated, key + ['length']].iloc[0].tolist()}; it needs one per head and length"
        )
    variants = list(table.variant.unique())
    heads = sorted(set(zip(table["layer"], table["head"])))
    colors = {h: tuple(c) for h, c in zip(heads, plt.get_cmap("viridis")(np.linspace(0, 0.92, len(heads))))}
    styles = {
        s: _SEED_STYLES[i % len(_SEED_STYLES)] for i, s in enumerate(sorted(table.seed.unique()) if seeds else [None])
    }
    lengths = np.array(sorted(table.length.unique()), dtype=float)

    fig, axes = plt.subplots(
        2,
        len(variants),
        figsize=(4.2 * len(variants) + 1.6, 6.4),
        squeeze=False,
        sharex=True,
        sharey="row",
        layout="constrained",
    )
    for col, variant in enumerate(variants):
        top, bottom = axes[0][col], axes[1][col]
        for group, rows in table[table.variant == variant].groupby(key[1:], sort=True):
            seed, layer, head = group if seeds else (None, *group)
            rows = rows.sort_values("length")
            style = {
                "color": colors[(layer, head)],
                "ls": styles[seed],
                "marker": "o",
                "ms": 3,
                "lw": 1.2,
                "label": f"{'' if seed is None else f'seed {seed} '}L{layer} H{head}",
            }
            top.plot(rows.length, rows.answer_entropy, **style)
            bottom.plot(rows.length, rows.answer_support, **style)
        top.plot(lengths, [math.log(n) for n in lengths], color="0.55", ls=":", lw=1, label="log L (all keys)")
        bottom.plot(lengths, lengths, color="0.55", ls=":", lw=1, label="L (all keys)")
        top.set_title(variant)
        bottom.set_yscale("log")
        bottom.set_xlabel("evaluation length L (tokens)")
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
    axes[0][0].set_ylabel("answer-row entropy (nats)")
    axes[1][0].set_ylabel("answer-row support (keys)")
    legend = [plt.Line2D([], [], color=colors[h], marker="o", ms=3, label=f"L{h[0]} H{h[1]}") for h in heads]
    if len(styles) > 1:
        legend += [plt.Line2D([], [], color="0.3", ls=ls, label=f"seed {s}") for s, ls in styles.items()]
    legend.append(plt.Line2D([], [], color="0.55", ls=":", label="all L keys"))
    fig.legend(handles=legend, loc="outside right upper", fontsize=7, ncols=1 + len(legend) // 24)
    fig.suptitle(title, fontsize=11)
    return save_figure(fig, path)


# --- over-squashing (Vasylenko et al. 2025 App. D.3, Fig. 7) ---


def plot_oversquash(table: pd.DataFrame, path: str | Path) -> tuple[Path, Path]:
    """Fig. 7's two panels from a per-arm, seed and layer table (columns arm, seed, layer, grad_norm, support,
    causal): left, the input-gradient norm per layer (geometric mean over seeds, each seed a dot, log scale);
    right, the mean number of keys with non-zero weight per query per layer (mean over seeds, log scale), the causal
    count dotted."""
    need = {"arm", "seed", "layer", "grad_norm", "support", "causal"}
    if missing := sorted(need - set(table.columns)):
        raise ArgumentError(f"plot_oversquash needs the columns {', '.join(missing)}")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    arms = list(table.arm.unique())
    colors = {a: tuple(c) for a, c in zip(arms, plt.get_cmap("tab10")(np.arange(len(arms))))}
    for arm in arms:
        part = table[table.arm == arm]
        grouped = part.groupby("layer")
        layers = np.array(sorted(part.layer.unique()))
        # the null arm (a second softmax arm, its name ending in "_null") dashed: it lies on softmax's support
        style = {"color": colors[arm], "marker": "o", "ms": 4, "lw": 1.4, "label": arm}
        style["ls"] = "--" if str(arm).endswith("_null") else "-"
        left.plot(layers, np.exp(grouped.grad_norm.apply(lambda v: np.log(v).mean())).loc[layers], **style)
        left.scatter(part.layer, part.grad_norm, color=colors[arm], s=6, alpha=0.4)
        right.plot(layers, grouped.support.mean().loc[layers], **style)
    causal = table.groupby("layer").causal.mean()
    right.plot(causal.index, causal.values, color="0.55", ls=":", lw=1, label="every causal key")
    for ax in (left, right):
        ax.set_yscale("log")
        ax.set_xlabel("layer")
    left.set_ylabel("mean ||d loss / d layer input||")
    right.set_ylabel("keys with non-zero weight per query")
    left.set_title("gradient norm per layer")
    right.set_title("active keys per layer")
    right.legend(fontsize=8)
    return save_figure(fig, path)


def plot_collapse(summary: pd.DataFrame, path: str | Path) -> tuple[Path, Path]:
    """Representational collapse (Vasylenko et al. 2025 App. D.2, Fig. 6): one panel per scenario of ``summary``
    (columns scenario, alpha, n, gap and, where intervals exist, lo and hi), the last-token gap
    ||v_n - v*_{n+1}||_1 against n on log axes, one line per alpha (1 = softmax), the 95% interval over draws
    shaded. Gaps of 0 (or below) cannot sit on a log axis and are left out."""
    scenarios = list(summary.scenario.unique())
    if not scenarios:
        raise ArgumentError("plot_collapse needs at least one scenario's gaps")
    fig, axes = plt.subplots(1, len(scenarios), figsize=(4.6 * len(scenarios), 3.8), squeeze=False, sharey=True)
    for ax, scenario in zip(axes[0], scenarios, strict=True):
        part = summary[summary.scenario == scenario]
        for alpha, rows in part.groupby("alpha", sort=True):
            rows = rows.sort_values("n")
            keep = rows[rows.gap > 0]
            label = "softmax (alpha 1)" if alpha == 1 else f"alpha {alpha:g}"
            (line,) = ax.plot(keep.n, keep.gap, marker="o", ms=3, label=label)
            if {"lo", "hi"} <= set(rows) and rows.lo.notna().any():
                ax.fill_between(keep.n, keep.lo.clip(lower=keep.gap * 1e-3), keep.hi, color=line.get_color(), alpha=0.2)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n (tokens of the original sequence)")
        ax.set_title(f"{scenario} prefix")
    axes[0][0].set_ylabel("last-token gap ||v_n - v*_{n+1}||_1")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)
