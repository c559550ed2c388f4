"""Figures of the ``temperature`` study (Hayase & Karakida): the beta_n fit and its MSE curve
(Fig. 1c-d, Fig. 5), the bucket means behind xi_hat (§4.5.1), on the trained decoder and on a pretrained
checkpoint, N_n(t) with envelope and contact point (Fig. 2 / 6) and the inference-time xi sweep (Fig. 1a-b).
Rendering only: the numbers come in computed.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from attnlab.report.figures import save_figure  # noqa: E402

if TYPE_CHECKING:
    from attnlab.diagnostics.stats import ExponentFit


def plot_beta_fit(beta: pd.DataFrame, fit: pd.DataFrame, n_min: int, path: Path) -> tuple[Path, Path]:
    """beta_n over n with the fits at the argmin xi and at xi = 1; the MSE curve over xi."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    n, b = beta["n"].to_numpy(float), beta["beta_n"].to_numpy(float)
    left.plot(n, b, ".", ms=3, color="tab:blue", label="learned beta_n")
    left.axvspan(n.min(), n_min, color="0.85", lw=0, label=f"n < {n_min} (not fitted)")
    best = fit.loc[fit["mse"].idxmin()]
    grid = np.linspace(max(n_min, 2), n.max(), 200)
    for xi, style in ((float(best["xi"]), "-"), (1.0, "--")):
        a1 = float(fit.loc[(fit["xi"] - xi).abs().idxmin(), "a1"])
        left.plot(
            grid,
            a1 * np.log(grid) ** xi,
            style,
            color="tab:red" if style == "-" else "0.3",
            label=f"a1 (log n)^{xi:g}, a1 = {a1:.3f}",
        )
    left.set_xscale("log", base=2)
    left.set_xlabel("position n (keys the query sees)")
    left.set_ylabel("beta_n")
    left.legend(fontsize=8)
    left.set_title("learned inverse-temperature vector")
    right.plot(fit["xi"], fit["mse"], color="tab:blue")
    right.plot([best["xi"]], [best["mse"]], "*", color="tab:red", ms=14, label=f"argmin xi = {best['xi']:.2f}")
    right.axvline(1.0, ls=":", color="0.3", label="xi = 1")
    right.set_yscale("log")
    right.set_xlabel("xi")
    right.set_ylabel(f"MSE of a1 (log n)^xi fit, n >= {n_min}")
    right.legend(fontsize=8)
    right.set_title("bias-free fit (Hayase & Karakida App. B.1, M2)")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_bucket_means(table: pd.DataFrame, fits: dict[str, ExponentFit], path: Path) -> tuple[Path, Path]:
    """Bucket means of log X against log log n, X in (Lambda, alpha, Delta), with the OLS lines."""
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    t = np.log(np.log(table["n"].to_numpy(float)))
    for ax, (name, fit), color in zip(axes, fits.items(), ("tab:blue", "tab:green", "tab:orange")):
        y = table[f"mean log {name}"].to_numpy(float)
        ax.plot(t, y, "o", color=color)
        ok = np.isfinite(y)
        if ok.sum() >= 2 and math.isfinite(fit.xi_hat):
            icpt = y[ok].mean() - fit.xi_hat * t[ok].mean()
            ax.plot(t, icpt + fit.xi_hat * t, "-", color=color)
        ax.set_title(f"xi_hat_{name} = {fit.xi_hat:.3f} +- {fit.half_iqr:.3f}", fontsize=10)
        ax.set_xlabel("log log n")
        ax.set_ylabel(f"bucket mean of log {name}_n")
        _n_axis(ax, table["n"].to_numpy(float))
    fig.tight_layout()
    return save_figure(fig, path)


def _n_axis(ax, n: np.ndarray) -> None:
    """A top axis in n over the log log n axis, ticked at the grid."""
    top = ax.secondary_xaxis(
        "top", functions=(lambda u: np.exp(np.exp(u)), lambda m: np.log(np.log(np.clip(m, 1.0001, None))))
    )
    top.set_xticks(n)
    top.tick_params(labelsize=7, labelrotation=60)


def plot_real_lambda(table: pd.DataFrame, xi_hat: float, half_iqr: float, model: str, path: Path) -> tuple[Path, Path]:
    """Bucket means of log Lambda_n against log log n with the OLS line of slope xi_hat and the slope-1
    line through the same centroid (Hayase & Karakida Table 2 puts pretrained models above it)."""
    # constrained layout makes room for the top n axis, which tight_layout let overlap the title
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    n = table["n"].to_numpy(float)
    t, y = np.log(np.log(n)), table["mean log Lambda"].to_numpy(float)
    ax.plot(t, y, "o", color="tab:blue", label="bucket mean of log Lambda_n")
    ok = np.isfinite(y)
    if ok.sum() >= 2:
        t0, y0 = t[ok].mean(), y[ok].mean()
        if math.isfinite(xi_hat):
            ax.plot(
                t,
                y0 + xi_hat * (t - t0),
                "-",
                color="tab:blue",
                label=f"OLS, slope xi_hat_Lambda = {xi_hat:.3f} +- {half_iqr:.3f}",
            )
        ax.plot(t, y0 + (t - t0), ":", color="0.3", label="slope 1 (the finding's threshold)")
    ax.set_xlabel("log log n")
    ax.set_ylabel("bucket mean of log Lambda_n")
    # a long model name (a path) wraps rather than running past the figure's edge
    ax.set_title(textwrap.fill(f"{model}: upper-tail accumulation scale against n", 80), fontsize=10)
    ax.legend(fontsize=8)
    _n_axis(ax, n)
    return save_figure(fig, path)


def plot_counting(gaps: np.ndarray, lam: float, delta: float, n: int, label: str, path: Path) -> tuple[Path, Path]:
    """N_n(t) = #{j: gap_j <= t} as a right-continuous step curve on a log y axis, the envelope
    e^{Lambda t} and the contact point (Delta, N(Delta)); the right axis is alpha = log N / log n."""
    g = np.sort(np.asarray(gaps, dtype=float))
    count = np.arange(1, g.size + 1)
    t = np.concatenate(([0.0], g))
    N = np.concatenate(([count[g <= 0].max(initial=1)], count))
    n_delta = int((g <= delta).sum())
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.step(t, N, where="post", color="tab:blue", label="N_n(t)")
    span = np.linspace(0, g.max(), 400)
    env = np.exp(lam * span)
    keep = env <= 2 * n
    ax.plot(span[keep], env[keep], "--", color="0.3", label=f"envelope e^(Lambda t), Lambda = {lam:.3f}")
    ax.plot(
        [delta], [n_delta], "*", color="tab:red", ms=15, zorder=5, label=f"contact (Delta = {delta:.3f}, N = {n_delta})"
    )
    ax.set_yscale("log")
    low, high = 0.8, 2 * n
    ax.set_ylim(low, high)
    ax.set_xlabel("gap t = z* - z")
    ax.set_ylabel("N_n(t)")
    # log N / log n is linear in log N, so a linear twin axis with the mapped limits lines up exactly
    right = ax.twinx()
    right.set_ylim(math.log(low) / math.log(n), math.log(high) / math.log(n))
    right.set_ylabel("alpha = log N / log n")
    ax.set_title(f"N_n(t) at n = {n}: {label}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_sweep(ppl: pd.DataFrame, n_train: int, path: Path) -> tuple[Path, Path]:
    """Back-half perplexity against xi, one curve per n_eval, stars at the minima."""
    cols = [c for c in ppl.columns if c.startswith("xi=")]
    xis = np.array([float(c[3:]) for c in cols])
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for _, row in ppl.iterrows():
        y = row[cols].to_numpy(float)
        ref = int(row["n_eval"]) <= n_train
        (line,) = ax.plot(
            xis,
            y,
            marker="o",
            ms=4,
            ls=":" if ref else "-",
            label=f"n_eval = {int(row['n_eval'])}" + (" (training window)" if ref else ""),
        )
        if not ref:  # in the training window m = 1 for every xi: a flat line has no minimum to mark
            i = int(np.nanargmin(y))
            ax.plot([xis[i]], [y[i]], "*", ms=14, color=line.get_color())
    ax.axvline(1.0, ls=":", color="0.4")
    ax.set_xlabel("multiplier exponent xi in m(n; xi) = max(1, log n / log n_train)^xi")
    ax.set_ylabel("back-half sliding-window perplexity")
    ax.set_title(f"inference-time xi sweep, n_train = {n_train}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)
