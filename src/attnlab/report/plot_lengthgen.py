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
