"""Figures of the ``specialization`` study (Zhu et al. 2026 §5): the mechanism probes over training for
control and intervention runs, with the step where each intervention was released and, on the lower-copy panel,
the rule's own readings between evaluations.

Rendering only: callers hand over tables; nothing here trains or reads a study folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from attnlab.report.figures import plt, save_figure

LABELS = {
    "val_loss": "validation loss (nats/byte)",
    "upper_entropy": "upper entropy (normalized)",
    "upper_logit": "upper logit magnitude",
    "upper_qk_sigma_max": "upper W_Q^T W_K top singular value",
    "dppl_zero_qk": "perplexity rise, upper Q/K zeroed",
    "lower_copy": "lower-copy score",
    "lower_copy_excess": "lower-copy score minus uniform attention's",
}
STYLES = {"control": "-", "intervention": "--"}
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def plot_probe_curves(
    curves: pd.DataFrame,
    probes: Sequence[str],
    released: Mapping[str, int],
    path: str | Path,
    readings: pd.DataFrame | None = None,
) -> tuple[Path, Path]:
    """A 2 x 3 grid, one panel per probe (a column of ``curves``, which has a row per run and step and the
    run's ``arch`` and ``arm``, control or intervention): each run's curve over steps, and a dotted line at
    the step where the intervention of architecture ``arch`` was released (``released``: arch -> step).
    ``readings`` (rows of run, arch, arm, step, lower_copy, lower_copy_chance: the release rule's readings) add
    their excess over uniform attention as dots on the ``lower_copy_excess`` panel, where the rule is decided."""
    archs = list(dict.fromkeys(curves.arch))
    color = {arch: COLORS[i % len(COLORS)] for i, arch in enumerate(archs)}
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, key in zip(axes.flat, probes, strict=True):
        for (arch, arm), rows in curves.groupby(["arch", "arm"], sort=False):
            ax.plot(rows.step, rows[key], STYLES[arm], color=color[arch], label=f"{arch} {arm}")
        for arch, step in released.items():
            ax.axvline(step, color=color[arch], ls=":", lw=1)
        if key == "lower_copy_excess" and readings is not None:
            for (arch, arm), rows in readings.groupby(["arch", "arm"], sort=False):
                ax.plot(
                    rows.step,
                    rows.lower_copy - rows.lower_copy_chance,
                    ".",
                    ms=3 if arm == "control" else 5,
                    color=color.get(arch, "black"),
                    ls="none",
                    label="_readings",
                )
        ax.set_title(LABELS[key], fontsize=10)
        ax.set_xlabel("step")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Mechanism probes over training; dotted lines: release of the intervention")
    fig.tight_layout()
    return save_figure(fig, path)


PATHWAY_PANELS = {
    "upper_ffn_write_rms": "upper-half FFN write RMS",
    "upper_logit": "upper logit magnitude",
    "upper_entropy": "upper entropy (normalized)",
}


def plot_pathway(table: pd.DataFrame, labels: Mapping[str, str], path: str | Path) -> tuple[Path, Path]:
    """Zhu et al. 2026 Table 5 as a figure: one panel per reading of ``PATHWAY_PANELS`` (columns of ``table``, which
    has a row per control run with its ``arch`` and ``seed``), each architecture of ``labels`` (arch -> its name) at
    one x position: every seed as a dot, the same seed's dots joined across architectures (the pairs the rule
    reads), and the mean as a bar."""
    archs = [a for a in labels if a in set(table.arch)]
    fig, axes = plt.subplots(1, len(PATHWAY_PANELS), figsize=(13, 4))
    for ax, (key, title) in zip(axes, PATHWAY_PANELS.items(), strict=True):
        wide = table.pivot_table(index="seed", columns="arch", values=key).reindex(columns=archs)
        for _, row in wide.iterrows():
            ax.plot(range(len(archs)), row.values, "-", color="0.8", lw=0.8, zorder=1)
        for i, arch in enumerate(archs):
            ax.plot([i] * len(wide), wide[arch], "o", color=COLORS[i % len(COLORS)], ms=4, zorder=2)
            ax.hlines(wide[arch].mean(), i - 0.3, i + 0.3, color="black", lw=2, zorder=3)
        ax.set_xticks(range(len(archs)), [labels[a] for a in archs], fontsize=8)
        ax.set_title(title, fontsize=10)
    fig.suptitle("At 3% of training, per seed (grey: the same seed), bar: mean")
    fig.tight_layout()
    return save_figure(fig, path)
