"""Figures of Polynomial Concentration (§4-5) for the ``concentration`` study and the audit, lengths and ablate
folders: the phase plot of per-head median (rho, A_act) against A (1 - rho)^p = 1 (Fig. 2), the p* histogram and
predicted-vs-measured scatter (Fig. 1), the unsafe rate against length (Fig. 5), the matched diagnostic, the
substitution sweep and the ablation curves (Figs. 3-4); and measured models' unsafe share beside Table 1's published
one (the card comparison).

Rendering only: callers hand over tables and arrays; nothing here reads a study folder.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab.report.figures import plt, save_figure

# (colour, marker) of Polynomial Concentration App. H's head types, a head the types table lacks being "untyped";
# the colours are not among the first four of the cycle, which the boundary curves take
TYPE_STYLES = {
    "sink": ("tab:purple", "s"),
    "induction": ("tab:brown", "^"),
    "local": ("tab:olive", "D"),
    "diffuse": ("tab:cyan", "o"),
    "untyped": ("0.5", "x"),
}
LABELLED_HEADS = 64  # beyond this many heads in a panel their layer.head labels hide the points
LABEL_WIDTH = 32  # characters per line of a legend label
MAX_POINTS = 20_000  # rows drawn per panel of the predicted-vs-measured scatter; the counts cover every row
QUADRANTS = {"certified safe": "tab:green", "FN": "tab:red", "FP": "tab:orange", "agree unsafe": "0.45"}


def plot_phase(
    heads: pd.DataFrame, degrees: Sequence[float], path: str | Path, types: Mapping[tuple[int, int], str] | None = None
) -> tuple[Path, Path]:
    """One panel per bias b: a point per head at its median (rho, A_act), labelled layer.head while a panel has
    at most LABELLED_HEADS heads, and the curves A = (1 - rho)^-p (Thm. 4.1's boundary: above the curve S_p may
    reach 1). ``types`` gives each (layer, head) its App. H type, and the points take the type's colour
    (Polynomial Concentration Fig. 2); heads it lacks are "untyped". Without it every point is black."""
    biases = list(dict.fromkeys(heads["b"]))
    fig, axes = plt.subplots(1, len(biases), figsize=(4.6 * len(biases), 4.2), squeeze=False)
    rho = np.linspace(0.0, 0.99, 400)
    for ax, b in zip(axes[0], biases, strict=True):
        part = heads[heads["b"] == b]
        top = max(float(part["med a_act"].max()) * 2, 10.0)
        for p in degrees:
            ax.plot(rho, (1 - rho) ** -float(p), lw=1, label=f"A(1-rho)^{p:g} = 1")
        if types is None:
            ax.scatter(part["med rho"], part["med a_act"], color="k", s=18, zorder=3, label="head median")
        else:
            kind = np.array(
                [
                    types.get((int(layer), int(head)), "untyped")
                    for layer, head in zip(part["layer"], part["head"], strict=True)
                ]
            )
            for name in dict.fromkeys([*TYPE_STYLES, *kind]):
                chosen = part[kind == name]
                if len(chosen):
                    colour, marker = TYPE_STYLES.get(name, ("k", "o"))
                    ax.scatter(
                        chosen["med rho"],
                        chosen["med a_act"],
                        color=colour,
                        marker=marker,
                        s=18,
                        zorder=3,
                        label=f"{name} head",
                    )
        if len(part) <= LABELLED_HEADS:
            for _, h in part.iterrows():
                ax.annotate(
                    f"{h['layer']:.0f}.{h['head']:.0f}",
                    (h["med rho"], h["med a_act"]),
                    fontsize=6,
                    xytext=(2, 2),
                    textcoords="offset points",
                )
        ax.set_yscale("log")
        ax.set_ylim(0.8, top)
        ax.set_xlim(0, 1)
        ax.set_xlabel("median rho (relative gap)")
        ax.set_ylabel("median A_act (active keys)")
        ax.set_title(f"b = {b}")
    # a head type may appear in one panel only: the legend takes every panel's entries once
    entries = {label: handle for ax in axes[0] for handle, label in zip(*ax.get_legend_handles_labels())}
    ncol = min(len(entries), len(degrees) + 1)
    fig.legend(entries.values(), entries.keys(), loc="lower center", ncol=ncol, fontsize=7)
    fig.tight_layout(rect=(0, 0.07 * math.ceil(len(entries) / ncol), 1, 1))
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
            ax.text(
                np.log2(p),
                0.97,
                f"p={p:g} ",
                transform=ax.get_xaxis_transform(),
                fontsize=7,
                va="top",
                ha="right",
                rotation=90,
                color="tab:red",
            )
        ax.set_xlabel("log2 p*")
        ax.set_ylabel("active rows")
        ax.set_title(f"b = {b}: {len(finite)} rows shown; {zero} at p* = 0, {inf} at p* = inf", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def bound_quadrants(p_star: np.ndarray, s_p: np.ndarray, p: float) -> dict[str, int]:
    """Polynomial Concentration App. M's four cells at degree p over the rows whose p* and S_p are known:
    certified safe (p >= p*, Cor. 4.3, and S_p < 1), FN (predicted safe but S_p >= 1), FP (predicted unsafe
    but S_p < 1) and agree unsafe (p < p* and S_p >= 1)."""
    p_star, s_p = np.asarray(p_star, dtype=float), np.asarray(s_p, dtype=float)
    known = ~np.isnan(p_star) & ~np.isnan(s_p)
    pred, meas = p >= p_star[known], s_p[known] < 1
    return {
        "certified safe": int((pred & meas).sum()),
        "FN": int((pred & ~meas).sum()),
        "FP": int((~pred & meas).sum()),
        "agree unsafe": int((~pred & ~meas).sum()),
    }


def plot_bound(
    p_star: Mapping[str, np.ndarray],
    s_p: Mapping[str, np.ndarray],
    p: float,
    path: str | Path,
    max_points: int = MAX_POINTS,
    seed: int = 0,
) -> tuple[Path, Path]:
    """Polynomial Concentration Fig. 1b (App. M, Fig. 6b): per bias, each row's p* (x) against its measured S_p
    (y) on log axes, split by the lines x = p and y = 1 into the four cells of ``bound_quadrants``, each corner
    labelled with its count over every row. At most ``max_points`` rows per panel are drawn, a uniform sample
    under numpy seed ``seed``, so that an audit of millions of rows stays drawable; the title counts the rows
    at p* = 0, p* = inf and S_p = 0 or inf, which log axes cannot show."""
    fig, axes = plt.subplots(1, len(p_star), figsize=(4.6 * len(p_star), 4.4), squeeze=False)
    corners = {
        "certified safe": (0.02, 0.02, "left", "bottom"),
        "FN": (0.02, 0.98, "left", "top"),
        "FP": (0.98, 0.02, "right", "bottom"),
        "agree unsafe": (0.98, 0.98, "right", "top"),
    }
    for ax, b in zip(axes[0], p_star, strict=True):
        x, y = np.asarray(p_star[b], dtype=float), np.asarray(s_p[b], dtype=float)
        known = ~np.isnan(x) & ~np.isnan(y)
        x, y = x[known], y[known]
        drawable = np.isfinite(x) & (x > 0) & np.isfinite(y) & (y > 0)
        shown = np.flatnonzero(drawable)
        if len(shown) > max_points:
            shown = np.sort(np.random.default_rng(seed).choice(shown, size=max_points, replace=False))
        pred, meas = p >= x[shown], y[shown] < 1
        cell = np.select([pred & meas, pred & ~meas, ~pred & meas], ["certified safe", "FN", "FP"], "agree unsafe")
        ax.scatter(x[shown], y[shown], c=[QUADRANTS[c] for c in cell], s=4, alpha=0.5, lw=0, rasterized=True)
        ax.axvline(p, color="k", ls="--", lw=1)
        ax.axhline(1, color="k", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(min(x[shown].min(initial=p), p) / 2, max(x[shown].max(initial=p), p) * 2)
        ax.set_ylim(min(y[shown].min(initial=1.0), 1.0) / 2, max(y[shown].max(initial=1.0), 1.0) * 2)
        for name, count in bound_quadrants(x, y, p).items():
            cx, cy, ha, va = corners[name]
            ax.text(cx, cy, f"{name}\n{count}", transform=ax.transAxes, ha=ha, va=va, fontsize=7, color=QUADRANTS[name])
        zero, inf = int((x == 0).sum()), int(np.isinf(x).sum())
        sample = f" (a random {len(shown)} of {int(drawable.sum())})" if drawable.sum() > len(shown) else ""
        ax.set_title(
            f"b = {b}: {len(shown)} rows drawn{sample}\noff the log axes: {zero} at p* = 0, {inf} at "
            f"p* = inf, {len(x) - int(drawable.sum()) - zero - inf} at S_p = 0 or inf",
            fontsize=8,
        )
        ax.set_xlabel("p* (predicted minimum safe degree)")
        ax.set_ylabel(f"measured S_{p:g}")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_unsafe_by_length(table: pd.DataFrame, path: str | Path) -> tuple[Path, Path]:
    """Polynomial Concentration Fig. 5 (App. C): the unsafe % of active rows against the prompt length L on a
    log2 axis, one line per degree p and bias b (and per model when ``table`` has a model column), with its
    95% band over prompts; ``table`` holds lengths.csv's columns L, p, b, unsafe %, unsafe lo and unsafe hi."""
    keys = [k for k in ("model", "p", "b") if k in table]
    fig, ax = plt.subplots(figsize=(5.8, 4.0))
    for i, (key, line) in enumerate(table.groupby(keys, sort=False)):
        line = line.sort_values("L")
        label = ", ".join(f"{k} = {v:g}" if k == "p" else f"{k} = {v}" for k, v in zip(keys, key, strict=True))
        ax.plot(line["L"], line["unsafe %"], "o-", color=f"C{i}", label=label)
        ax.fill_between(line["L"], line["unsafe lo"], line["unsafe hi"], color=f"C{i}", alpha=0.15, lw=0)
    lengths = sorted(set(table["L"]))
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(int(v)) for v in lengths])
    ax.set_ylim(-3, 103)
    ax.set_xlabel("prompt length L (tokens)")
    ax.set_ylabel("unsafe % of active rows (S_p >= 1)")
    ax.legend(fontsize=7)
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


def plot_unsafe_beside_published(
    measured: pd.DataFrame, published: pd.DataFrame, path: str | Path
) -> tuple[Path, Path]:
    """Polynomial Concentration Table 1 beside measured models: per suite (x), each measured model's unsafe % of
    active rows at p = 2, b = 0 with its 95% interval (filled, a colour per model) and each published model's value
    (hollow grey, a marker per model, labelled published: Table 1 gives no interval). ``measured``: model, suite,
    unsafe %, unsafe lo, unsafe hi (NaN bounds drawn without a bar); ``published``: model, suite, unsafe %."""
    suites = list(dict.fromkeys([*measured["suite"], *published["suite"]]))
    x = {suite: i for i, suite in enumerate(suites)}
    ours, theirs = list(dict.fromkeys(measured["model"])), list(dict.fromkeys(published["model"]))
    step = 0.8 / max(len(ours) + len(theirs), 1)  # each model its own offset within a suite's slot

    def shift(i: int) -> float:
        return (i - (len(ours) + len(theirs) - 1) / 2) * step

    fig, ax = plt.subplots(figsize=(7.6, 4.0))
    handles, labels = [], []  # given to the legend as they are: it would drop a label starting with "_"
    for i, model in enumerate(ours):
        rows = measured[measured["model"] == model]
        y = rows["unsafe %"].to_numpy(float)
        # matplotlib refuses a negative or NaN bar: a missing bound draws none
        down = np.nan_to_num(np.clip(y - rows["unsafe lo"].to_numpy(float), 0, None))
        up = np.nan_to_num(np.clip(rows["unsafe hi"].to_numpy(float) - y, 0, None))
        xs = [x[s] + shift(i) for s in rows["suite"]]
        handles.append(ax.errorbar(xs, y, yerr=[down, up], fmt="o", color=f"C{i}", capsize=3, ms=6))
        labels.append(textwrap.fill(str(model), LABEL_WIDTH))  # a long path on lines, not past the figure's edge
    markers = "s^Dv<>ph*"
    for j, model in enumerate(theirs):
        rows = published[published["model"] == model]
        xs = [x[s] + shift(len(ours) + j) for s in rows["suite"]]
        (line,) = ax.plot(xs, rows["unsafe %"].to_numpy(float), markers[j % len(markers)], mfc="none", mec="0.35", ms=7)
        handles.append(line)
        labels.append(f"{model} (published)")
    ax.set_xticks(range(len(suites)), suites)
    ax.set_xlim(-0.5, len(suites) - 0.5)
    ax.set_ylim(-3, 103)
    ax.set_xlabel("suite")
    ax.set_ylabel("unsafe % of active rows (S_2 >= 1, b = 0)")
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return save_figure(fig, path)
