"""Figures of the ``concentration`` study (Polynomial Concentration §4-5): the phase plot of
per-head median (rho, A_act) against A (1 - rho)^p = 1, the p* histogram, the matched diagnostic and the
substitution sweep.

Rendering only: callers hand over tables and arrays; nothing here reads a study folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .figures import plt, save_figure


def plot_phase(heads: pd.DataFrame, degrees: Sequence[float], path: str | Path) -> tuple[Path, Path]:
    """One panel per bias b: a point per head at its median (rho, A_act), labelled layer.head, and the
    curves A = (1 - rho)^-p (Thm. 4.1's boundary: above the curve S_p may reach 1)."""
    biases = list(dict.fromkeys(heads["b"]))
    fig, axes = plt.subplots(1, len(biases), figsize=(4.6 * len(biases), 4.2), squeeze=False)
    rho = np.linspace(0.0, 0.99, 400)
    for ax, b in zip(axes[0], biases, strict=True):
        part = heads[heads["b"] == b]
        top = max(float(part["med a_act"].max()) * 2, 10.0)
        for p in degrees:
            ax.plot(rho, (1 - rho) ** -float(p), lw=1, label=f"A(1-rho)^{p:g} = 1")
        ax.scatter(part["med rho"], part["med a_act"], color="k", s=18, zorder=3, label="head median")
        for _, h in part.iterrows():
            ax.annotate(f"{h['layer']:.0f}.{h['head']:.0f}", (h["med rho"], h["med a_act"]), fontsize=6,
                        xytext=(2, 2), textcoords="offset points")
        ax.set_yscale("log")
        ax.set_ylim(0.8, top)
        ax.set_xlim(0, 1)
        ax.set_xlabel("median rho (relative gap)")
        ax.set_ylabel("median A_act (active keys)")
        ax.set_title(f"b = {b}")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=len(degrees) + 1, fontsize=7)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save_figure(fig, path)


def plot_p_star(p_star: Mapping[str, np.ndarray], degrees: Sequence[float], path: str | Path) -> tuple[Path, Path]:
    """Per bias, the histogram of finite p* > 0 on a log2 axis, with the audited degrees marked; the title
    counts the rows at p* = 0 and p* = inf, which a log axis cannot show."""
    fig, axes = plt.subplots(1, len(p_star), figsize=(4.4 * len(p_star), 3.4), squeeze=False)
    for ax, (b, values) in zip(axes[0], p_star.items(), strict=True):
        values = values[~np.isnan(values)]
        finite = values[np.isfinite(values) & (values > 0)]
        zero, inf = int((values == 0).sum()), int(np.isinf(values).sum())
        if len(finite):
            ax.hist(np.log2(finite), bins=30, color="tab:blue", alpha=0.8)
        for p in degrees:
            ax.axvline(np.log2(p), color="tab:red", ls="--", lw=1)
            ax.text(np.log2(p), 0.97, f"p={p:g} ", transform=ax.get_xaxis_transform(), fontsize=7, va="top",
                    ha="right", rotation=90, color="tab:red")
        ax.set_xlabel("log2 p*")
        ax.set_ylabel("active rows")
        ax.set_title(f"b = {b}: {len(finite)} rows shown; {zero} at p* = 0, {inf} at p* = inf", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_matched(table: pd.DataFrame, k: int, path: str | Path) -> tuple[Path, Path]:
    """Accuracy under each ReLU cell (Wilson interval) against its measured-safe % over all heads (circle)
    and over the top-K heads (cross), joined by a thin line; one colour per degree p (both biases)."""
    fig, ax = plt.subplots(figsize=(5.8, 4.2))
    colours = {p: f"C{i}" for i, p in enumerate(dict.fromkeys(table["p"]))}
    for _, r in table.iterrows():
        c = colours[r["p"]]
        ax.plot([r["all-head safe %"], r[f"top-{k} safe %"]], [r["accuracy %"]] * 2, color=c, lw=0.6, alpha=0.6)
        err = [[r["accuracy %"] - r["lo"]], [r["hi"] - r["accuracy %"]]]
        ax.errorbar(r["all-head safe %"], r["accuracy %"], yerr=err, fmt="o", color=c, capsize=2, ms=5)
        ax.scatter(r[f"top-{k} safe %"], r["accuracy %"], marker="x", color=c)
    for p, c in colours.items():
        ax.plot([], [], "s", color=c, label=f"p = {p:g}")
    ax.plot([], [], "o", color="0.3", ls="none", label="all heads")
    ax.plot([], [], "x", color="0.3", ls="none", label=f"top-{k} heads")
    ax.axhline(table["softmax %"].iloc[0], color="0.4", ls="--", lw=1, label="softmax")
    ax.set_xlim(-3, 103)
    ax.set_ylim(-3, 103)
    ax.set_xlabel("measured-safe % of active rows (S_p < 1)")
    ax.set_ylabel("accuracy under substitution (%)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_substitution(table: pd.DataFrame, path: str | Path) -> tuple[Path, Path]:
    """Horizontal bars: each recipe's accuracy with its Wilson interval; softmax dashed."""
    fig, ax = plt.subplots(figsize=(5.6, 0.28 * len(table) + 1.2))
    y = np.arange(len(table))[::-1]
    err = [table["accuracy %"] - table["lo"], table["hi"] - table["accuracy %"]]
    ax.barh(y, table["accuracy %"], xerr=err, color="tab:blue", alpha=0.8, capsize=2)
    ax.axvline(float(table["accuracy %"].iloc[0]), color="0.3", ls="--", lw=1)
    ax.set_yticks(y, table["recipe"], fontsize=7)
    ax.set_xlim(0, 102)
    ax.set_xlabel("exact-match accuracy (%)")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_ablation(table: pd.DataFrame, path: str | Path) -> tuple[Path, Path]:
    """Polynomial Concentration Figs. 3-4: the change in accuracy (pp from softmax) against K for the top-K,
    bottom-K and random-K heads (mean with a +- sd band, worst draw dotted); ``table`` is ablate.csv."""
    table = table.sort_values("k")
    k = table["k"].to_numpy()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    ax.plot(k, table["top pp"], "o-", color="tab:red", label="top-K")
    ax.plot(k, table["bottom pp"], "s-", color="tab:green", label="bottom-K")
    mean, sd = table["random mean pp"].to_numpy(), table["random sd pp"].to_numpy()
    ax.plot(k, mean, "^-", color="tab:blue", label="random-K mean")
    ax.fill_between(k, mean - sd, mean + sd, color="tab:blue", alpha=0.15, lw=0)
    ax.plot(k, table["random worst pp"], ":", color="tab:blue", label="random-K worst")
    ax.axhline(0, color="0.4", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(k, [str(int(v)) for v in k])
    ax.set_xlabel("K (heads given the recipe)")
    ax.set_ylabel("accuracy change (pp from softmax)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)
