"""Figures, saved as PNG and SVG side by side.

Rendering only: callers hand over arrays; nothing here computes a row map or imports a study or a command.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from attnlab.io import atomic_write  # noqa: E402


def save_figure(fig: plt.Figure, path: str | Path, dpi: int = 120) -> tuple[Path, Path]:
    """Write ``fig`` to ``path`` as .png and beside it as .svg, each atomically, then close it."""
    path = Path(path)
    try:
        png, svg = (
            atomic_write(path.with_suffix(s), lambda tmp, s=s: fig.savefig(tmp, format=s[1:], dpi=dpi))
            for s in (".png", ".svg")
        )
    finally:
        plt.close(fig)
    return png, svg


def _shade(ax, keys, label: str | None = None) -> None:
    for i, k in enumerate(keys):
        ax.axvspan(k - 0.45, k + 0.45, color="tab:red", alpha=0.15, lw=0, label=label if i == 0 else None)


def plot_row_weights(
    row: Sequence[float],
    weights: Mapping[str, Sequence[float]],
    path: str | Path,
    masked: Sequence[bool] | None = None,
    cols: int = 3,
) -> tuple[Path, Path]:
    """One bar panel per row map: the weight each map gives each key of one score row.

    The top panel shows the scores; masked keys are shaded red everywhere (their score is drawn
    hatched). Allowed keys with weight exactly 0 are marked with a small grey tick, so sparse maps can
    be told from maps with tiny weights. Writes ``path`` (.png) and its .svg twin; returns both paths.
    """
    row = np.asarray(row, dtype=float)
    keys = np.arange(row.size)
    masked = np.zeros(row.size, bool) if masked is None else np.asarray(masked, bool)
    names = list(weights)
    grid_rows = 1 + math.ceil(len(names) / cols)
    fig = plt.figure(figsize=(4.4 * cols, 2.4 * grid_rows), layout="constrained")
    grid = fig.add_gridspec(grid_rows, cols)

    ax = fig.add_subplot(grid[0, :])
    colors = np.where(row >= 0, "tab:blue", "tab:gray")
    ax.bar(keys[~masked], row[~masked], color=colors[~masked])
    ax.bar(keys[masked], row[masked], color="none", edgecolor="tab:red", hatch="//", label="masked key")
    ax.axhline(0, color="black", lw=0.6)
    ax.set_title("score row z (pre-map)", fontsize=11)
    ax.set_xlabel("key")
    ax.set_ylabel("score")
    ax.set_xticks(keys[::2])
    if masked.any():
        ax.legend(loc="upper right", fontsize=8)

    allowed = int((~masked).sum())
    for i, name in enumerate(names):
        ax = fig.add_subplot(grid[1 + i // cols, i % cols])
        w = np.asarray(weights[name], dtype=float)
        _shade(ax, keys[masked])
        ax.bar(keys, w, color="tab:orange")
        zero = (w == 0) & ~masked
        ax.plot(keys[zero], np.zeros(zero.sum()), "|", color="0.45", ms=5, mew=1)
        ax.set_title(f"{name}   (nonzero {np.count_nonzero(w)}/{allowed}, sum {w.sum():.3g})", fontsize=9.5)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("weight", fontsize=8)
        ax.set_xticks(keys[::4])
        ax.tick_params(labelsize=7)
        ax.set_xlim(-0.8, row.size - 0.2)
    fig.suptitle("Row maps on one score row: weights per key", fontsize=13)
    return save_figure(fig, path)
