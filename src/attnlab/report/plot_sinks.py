"""Figures of the ``sinks`` study (Attention Sinks Essential §4, Fig. 2-6): attention heat maps (query x
key; tiled by layer and head for deep models), the BOS mass before the trigger, the held-out loss with BOS
masked, Theorem 2's sink fraction per position, the loss and l-inf curves; and
a pretrained model's first-token mass per layer and head (the study's real-model part).

Rendering only: callers hand over arrays and labels; nothing here trains or reads a study folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from attnlab.report.figures import plt, save_figure


def plot_heatmaps(
    maps: Mapping[tuple[str, str], np.ndarray],
    rows: Sequence[str],
    cols: Sequence[str],
    trigger: int,
    path: str | Path,
    title: str,
) -> tuple[Path, Path]:
    """A grid of (query x key) heat maps, ``maps[(row, col)]`` an (L, L) array indexed from 0 and drawn
    with 1-based positions as in Attention Sinks Essential's figures. Columns whose label ends in "std" share one colour
    scale and the other columns another (0 up to at least 1), each with its colour bar. The BOS key
    (position 1) and the trigger query (``trigger``, 1-based) are outlined so the sink can be read off."""
    kinds = ["std" if c.endswith("std") else "mean" for c in cols]
    top = {
        k: max(
            [float(np.nanmax(maps[(r, c)])) for r in rows for c, kc in zip(cols, kinds) if kc == k]
            + [1.0 if k == "mean" else 1e-6]
        )
        for k in set(kinds)
    }
    fig, axes = plt.subplots(
        len(rows),
        len(cols),
        figsize=(2.9 * len(cols) + 0.8, 2.7 * len(rows) + 0.6),
        squeeze=False,
        layout="constrained",
    )
    images = {}
    for i, r in enumerate(rows):
        for j, (c, kind) in enumerate(zip(cols, kinds)):
            ax = axes[i, j]
            data = maps[(r, c)]
            length = data.shape[0]
            images[kind] = ax.imshow(
                data,
                cmap="viridis" if kind == "mean" else "magma",
                vmin=0.0,
                vmax=top[kind],
                extent=(0.5, length + 0.5, length + 0.5, 0.5),
                interpolation="nearest",
            )
            ax.add_patch(plt.Rectangle((0.5, 0.5), 1, length, fill=False, ec="tab:cyan", lw=1.2))
            ax.add_patch(plt.Rectangle((0.5, trigger - 0.5), length, 1, fill=False, ec="tab:red", lw=1.2))
            ax.set_title(f"{r}\n{c}", fontsize=8.5)
            ticks = [1, *range(4, length + 1, 4)]
            ax.set_xticks(ticks)
            ax.set_yticks(ticks)
            ax.tick_params(labelsize=7)
            if i == len(rows) - 1:
                ax.set_xlabel("key position", fontsize=8)
            if j == 0:
                ax.set_ylabel("query position", fontsize=8)
    for kind, image in images.items():
        owners = [axes[i, j] for i in range(len(rows)) for j, k in enumerate(kinds) if k == kind]
        fig.colorbar(image, ax=owners, shrink=0.6, label="mean weight" if kind == "mean" else "std of weight")
    fig.suptitle(title, fontsize=11)
    return save_figure(fig, path)


def plot_heat_mosaic(blocks: Mapping[str, np.ndarray], trigger: int, path: str | Path, title: str) -> tuple[Path, Path]:
    """One panel per ``blocks`` entry, a (layers, heads, L, L) array of (query x key) maps drawn as a mosaic:
    layer d's maps along row d, head h's down column h, one blank cell between maps, so a deep model's maps
    cost one image per panel instead of one axes each. Panels whose name ends in "std" share one colour scale
    and the others another (0 up to at least 1); each map's BOS key column and trigger query row
    (``trigger``, 1-based) are outlined, as in ``plot_heatmaps``."""
    names = list(blocks)
    kinds = ["std" if n.endswith("std") else "mean" for n in names]
    top = {
        k: max([float(np.nanmax(blocks[n])) for n, kn in zip(names, kinds) if kn == k] + [1.0 if k == "mean" else 1e-6])
        for k in set(kinds)
    }
    layers, heads, length, _ = np.shape(blocks[names[0]])
    step = length + 1
    fig, axes = plt.subplots(
        1,
        len(names),
        figsize=(len(names) * (1.1 * heads + 0.9) + 1.2, 1.1 * layers + 1.4),
        squeeze=False,
        layout="constrained",
    )
    images = {}
    for ax, name, kind in zip(axes[0], names, kinds):
        data = np.asarray(blocks[name], dtype=float)
        tile = np.full((layers * step - 1, heads * step - 1), np.nan)
        for d in range(layers):
            for h in range(heads):
                tile[d * step : d * step + length, h * step : h * step + length] = data[d, h]
        images[kind] = ax.imshow(
            tile, cmap="viridis" if kind == "mean" else "magma", vmin=0.0, vmax=top[kind], interpolation="nearest"
        )
        for d in range(layers):
            for h in range(heads):
                x, y = h * step - 0.5, d * step - 0.5
                ax.add_patch(plt.Rectangle((x, y), 1, length, fill=False, ec="tab:cyan", lw=0.8))
                ax.add_patch(plt.Rectangle((x, y + trigger - 1), length, 1, fill=False, ec="tab:red", lw=0.8))
        ax.set_xticks(
            [h * step + (length - 1) / 2 for h in range(heads)], [f"head {h + 1}" for h in range(heads)], fontsize=7
        )
        ax.set_yticks(
            [d * step + (length - 1) / 2 for d in range(layers)], [f"layer {d + 1}" for d in range(layers)], fontsize=7
        )
        ax.set_title(name, fontsize=9)
    for kind, image in images.items():
        owners = [ax for ax, k in zip(axes[0], kinds) if k == kind]
        fig.colorbar(image, ax=owners, shrink=0.7, label="mean weight" if kind == "mean" else "std of weight")
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def plot_bos_mass(
    labels: Sequence[str],
    mass: Sequence[float],
    groups: Sequence[str],
    high: float,
    low: float,
    path: str | Path,
    title: str = "BOS mass before the trigger (j = 8, L = 16), per run, layer and head",
) -> tuple[Path, Path]:
    """One bar per label (a run, layer and head, or any grouping the caller chose): its mean weight on BOS
    over the pre-trigger queries, coloured by ``groups`` (the attention kind), on a log axis with the
    ``high`` and ``low`` thresholds drawn."""
    mass = np.asarray(mass, dtype=float)
    colors = {g: f"C{i}" for i, g in enumerate(dict.fromkeys(groups))}
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * len(labels), 4.2), layout="constrained")
    floor = 1e-6
    ax.bar(range(len(labels)), np.maximum(mass, floor), color=[colors[g] for g in groups])
    for x, m in enumerate(mass):
        ax.text(x, max(m, floor) * 1.3, f"{m:.2g}", ha="center", va="bottom", fontsize=7)
    ax.axhline(high, color="black", ls="--", lw=0.9, label=f"{high:g} (softmax sink)")
    ax.axhline(low, color="0.5", ls=":", lw=0.9, label=f"{low:g} (ReLU: no sink)")
    ax.set_yscale("log")
    ax.set_ylim(floor, 10)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("mean weight on BOS, queries 2..j-1")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    lines, names = ax.get_legend_handles_labels()
    ax.legend(handles + lines, list(colors) + names, fontsize=8, loc="upper right")
    ax.set_title(title, fontsize=10)
    return save_figure(fig, path)


def plot_masking(
    labels: Sequence[str],
    loss: Sequence[float],
    masked: Sequence[float],
    zero: Sequence[float],
    tolerance: float,
    path: str | Path,
    title: str,
) -> tuple[Path, Path]:
    """Per label (a run), its held-out loss with BOS and with BOS masked as a pair of bars on a log axis, values
    printed, and per run the all-zeros predictor's loss as a black tick across its pair (``tolerance`` x it as a
    grey one: the bound under which masking counts as costing nothing)."""
    loss, masked, zero = (np.asarray(a, dtype=float) for a in (loss, masked, zero))
    floor = 1e-9
    fig, ax = plt.subplots(figsize=(1.2 + 0.7 * len(labels), 4.4), layout="constrained")
    x = np.arange(len(labels))
    for offset, values, name, color in ((-0.2, loss, "with BOS", "C0"), (0.2, masked, "BOS masked", "C3")):
        ax.bar(x + offset, np.maximum(values, floor), width=0.4, color=color, label=name)
        for xi, v in zip(x + offset, values):
            ax.text(xi, max(v, floor) * 1.3, f"{v:.2g}", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.hlines(zero, x - 0.45, x + 0.45, color="black", lw=1.4, label="all-zeros predictor")
    ax.hlines(tolerance * zero, x - 0.45, x + 0.45, color="0.5", lw=1.0, ls=":", label=f"{tolerance:g} x all-zeros")
    ax.set_yscale("log")
    ax.set_ylim(floor, 100)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("held-out loss (mean squared l2 per position)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title, fontsize=10)
    return save_figure(fig, path)


def plot_positions(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    nulls: Mapping[str, tuple[np.ndarray, np.ndarray]],
    threshold: float,
    path: str | Path,
    title: str,
) -> tuple[Path, Path]:
    """Per run, a line of the fraction of inputs with a sink at each 1-based query position (``curves[run]`` =
    positions, fractions), solid; the same run's null (``nulls``, e.g. its untrained model) dashed in its
    colour; the verdict's ``threshold`` as a dashed black line."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    labelled = False
    for i, (name, (pos, frac)) in enumerate(curves.items()):
        ax.plot(pos, frac, color=f"C{i}", marker="o", ms=3, lw=1.0, label=name)
        if name in nulls:
            ax.plot(*nulls[name], color=f"C{i}", ls="--", lw=0.9, label=None if labelled else "null (dashed)")
            labelled = True
    ax.axhline(threshold, color="black", ls="--", lw=0.9, label=f"{threshold:g}")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("query position i (1-based), before the trigger")
    ax.set_ylabel("inputs with alpha_(i,1) >= 1 - eps somewhere")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(title, fontsize=10)
    return save_figure(fig, path)


def plot_loss_curves(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]], zero: float, path: str | Path
) -> tuple[Path, Path]:
    """Training loss against step for each run (log axis), with the all-zeros predictor's loss."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    for name, (step, loss) in curves.items():
        ax.plot(step, loss, lw=1.0, label=name)
    ax.axhline(zero, color="black", ls="--", lw=0.9, label="all-zeros predictor")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (mean squared l2 per position)")
    ax.legend(fontsize=8)
    ax.set_title("Training loss, trigger-conditional averaging", fontsize=10)
    return save_figure(fig, path)


def plot_linf_curves(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]], target: float, path: str | Path
) -> tuple[Path, Path]:
    """Training batch l-inf loss against step for each run (log axis), with the stopping ``target``."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    for name, (step, linf) in curves.items():
        ax.plot(step, linf, lw=0.8, label=name)
    ax.axhline(target, color="black", ls="--", lw=0.9, label=f"target {target:g}")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("batch l-inf loss (largest l2 error)")
    ax.legend(fontsize=6, ncol=2)
    ax.set_title("Training batch l-inf loss, trigger-conditional averaging", fontsize=10)
    return save_figure(fig, path)


def plot_first_token_mass(
    mass: np.ndarray,
    lines: Mapping[str, np.ndarray],
    uniform: np.ndarray,
    threshold: float,
    skip: int,
    path: str | Path,
    title: str,
) -> tuple[Path, Path]:
    """A pretrained model's first-token mass: a (layers x heads) heat map on a 0-1 scale, values printed,
    and beside it, per layer, the ``lines`` (e.g. the median and largest head) against the ``threshold``
    and the ``uniform`` share; layers 0..skip-1 are shaded (left out of the verdict)."""
    n_layers, n_heads = mass.shape
    fig, (ax, side) = plt.subplots(
        1,
        2,
        figsize=(3.2 + 0.55 * n_heads + 3.2, 1.4 + 0.3 * n_layers),
        sharey=True,
        gridspec_kw={"width_ratios": [max(n_heads, 2), 5]},
        layout="constrained",
    )
    image = ax.imshow(mass, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    for (layer, head), value in np.ndenumerate(mass):
        ax.text(
            head,
            layer,
            f"{value:.2f}",
            ha="center",
            va="center",
            fontsize=6.5,
            color="black" if value > 0.6 else "white",
        )
    ax.set_xticks(range(n_heads))
    ax.set_yticks(range(n_layers))
    ax.tick_params(labelsize=7)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    fig.colorbar(image, ax=ax, location="left", shrink=0.6, pad=0.02, label="weight on key 0")
    for i, (label, values) in enumerate(lines.items()):
        side.plot(values, range(n_layers), marker="o", ms=3, lw=1.0, color=f"C{i}", label=label)
    side.plot(uniform, range(n_layers), color="0.4", ls=":", lw=1.0, label="uniform share")
    side.axvline(threshold, color="black", ls="--", lw=0.9, label=f"sink threshold {threshold:g}")
    if skip:
        side.axhspan(-0.5, skip - 0.5, color="0.85", lw=0, label="left out of the verdict")
    side.set_xlim(0, 1)
    side.set_xlabel("weight on key 0")
    # below the panels: a legend inside the side panel would cover a model's lines somewhere
    fig.legend(*side.get_legend_handles_labels(), fontsize=7, loc="outside lower right", ncol=3)
    side.grid(axis="x", color="0.9", lw=0.6)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)
