"""Figures of length generalization (Vasylenko et al. 2025 §5.1, Table 1; §3.2): score against evaluation
length, for one ``attnlab lengthgen`` run and per task of the ``lengthgen`` study, and the answer rows'
entropy and support against length (non-dispersion).

Rendering only: callers hand over tables and labels; nothing here trains or reads a study folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .figures import plt, save_figure


def plot_run_accuracy(acc: pd.DataFrame, lengths: Sequence[int], ylabel: str, title: str,
                      path: str | Path) -> tuple[Path, Path]:
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
