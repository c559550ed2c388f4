"""The audit's tables from its rows (Polynomial Concentration §5.2): the prevalence of the polynomial-unsafe
regime per bias and degree (Tables 1/10/11) with its bootstrap interval over prompts, the bound's validation
against the measured S_p (App. M, Table 8) and the per-head medians of the phase plot (Fig. 2).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnlab.analyses.run import Bias
from attnlab.diagnostics.rows import SPECIAL
from attnlab.diagnostics.stats import bootstrap_fraction, wilson

BOOTSTRAP = 1000  # resamples of the prompts behind each prevalence interval


def unsafe_interval(active: pd.DataFrame, column: str) -> tuple[float, float]:
    """The 95% percentile interval (%) of the unsafe share of ``active`` rows (``column``: the safe flag) over
    B = BOOTSTRAP resamples of the prompts, seed 0; NaN without rows."""
    flags = active[["prompt", "status", column]].dropna(subset=[column])
    if flags.empty:
        return np.nan, np.nan
    _, lo, hi = bootstrap_fraction(
        flags.assign(**{column: flags[column].astype(bool)}), column, unit="prompt", n_boot=BOOTSTRAP
    )
    return 100 * (1 - hi), 100 * (1 - lo)


def prevalence(rows: pd.DataFrame, p: tuple[float, ...], b: Bias, *, answer: bool = False) -> list[dict]:
    """Polynomial Concentration Table 1/10/11 lines for one bias: over active-unsaturated rows, the unsafe rate
    (S_p >= 1) with its 95% interval from a bootstrap over prompts (the unit of replication: rows of one prompt
    share its tokens, so an interval over rows is too narrow; Polynomial Concentration App. B, R), the rows'
    Wilson interval as a descriptive column, and the medians of rho, A_act and S_p; the dead and saturated
    shares over readable rows; the gap-counting medians (ties, Lambda_n = inf, left out and counted).
    ``answer``: the rows were read against their answer key; add the share whose argmax is that key (App. S:
    only there does the bound's Delta >= 0 premise hold). Rows with an ``s_sigmoid`` column add the share
    with S_sigma < 1 over readable rows (App. T, Table 15)."""
    readable = rows[~rows["status"].isin(SPECIAL)]
    active = readable[readable["status"] == "active"]
    lam = readable["lambda_n"].astype(float)
    gaps = {
        "med lambda_n": _median(lam[np.isfinite(lam)]),
        "ties": int(np.isinf(lam).sum()),
        "med alpha_n": _median(readable["alpha_n"]),
        "med contact_gap": _median(readable["contact_gap"]),
    }
    if answer:
        gaps["answer is argmax %"] = (
            100 * float(readable["target_is_max"].astype(bool).mean()) if len(readable) else np.nan
        )
    if "s_sigmoid" in rows:
        sigma = readable["s_sigmoid"].dropna().astype(float)
        gaps["sigma safe %"] = 100 * float((sigma < 1).mean()) if len(sigma) else np.nan
    lines = []
    for q in p:
        d = f"{q:g}"
        safe = active[f"safe_p{d}"].dropna().astype(bool)
        unsafe = int((~safe).sum())
        lo, hi = wilson(unsafe, len(safe)) if len(safe) else (np.nan, np.nan)
        boot_lo, boot_hi = unsafe_interval(active, f"safe_p{d}")
        lines.append(
            {
                "b": b.label,
                "b value": b.value,
                "p": q,
                "rows": len(readable),
                "active": len(active),
                "prompts": int(active["prompt"].nunique()),
                "unsafe %": 100 * unsafe / len(safe) if len(safe) else np.nan,
                "unsafe lo": boot_lo,
                "unsafe hi": boot_hi,
                "row wilson lo": 100 * lo,
                "row wilson hi": 100 * hi,
                "med rho": _median(active["rho"]),
                "med a_act": _median(active["a_act"]),
                "med s_p": _median(active[f"s_p{d}"]),
                "dead %": 100 * float((readable["status"] == "dead").mean()) if len(readable) else np.nan,
                "saturated %": 100 * float((readable["status"] == "saturated").mean()) if len(readable) else np.nan,
                **gaps,
            }
        )
    return lines


def head_medians(rows: dict[str, pd.DataFrame], p: tuple[float, ...]) -> pd.DataFrame:
    """Per bias and head, over the given active rows: median rho and A_act (the points of Polynomial
    Concentration Fig. 2's phase plot) and the measured-safe % at each p."""
    lines = []
    for b, r in rows.items():
        for (layer, head), g in r.groupby(["layer", "head"]):
            lines.append(
                {
                    "b": b,
                    "layer": int(layer),
                    "head": int(head),
                    "active rows": len(g),
                    "med rho": float(g["rho"].median()),
                    "med a_act": float(g["a_act"].median()),
                    **{f"safe% p{q:g}": percent(g[f"safe_p{q:g}"]) for q in p},
                }
            )
    return pd.DataFrame(lines)


def bound_validation(rows: dict[str, pd.DataFrame], p: tuple[float, ...]) -> pd.DataFrame:
    """Polynomial Concentration App. M, Table 8: per bias label and degree, over the active rows, the rows the
    bound predicts safe (p >= p*, Cor. 4.3) against those measured safe (S_p < 1), named as the paper names
    them. FN: predicted safe but measured unsafe (the bound silently passing an unsafe row), its rate over the
    measured-unsafe rows, and the count under tolerance eps (S_p < 1 + eps, App. P), where the paper's
    boundary ties vanish; FP: predicted unsafe but measured safe (the bound's conservatism), its rate over the
    measured-safe rows; agreement over all."""
    lines = []
    for b, r in rows.items():
        r = r[r["status"] == "active"]
        for q in p:
            d = f"{q:g}"
            known = r[[f"pred_safe_p{d}", f"safe_p{d}", f"safe_eps_p{d}"]].dropna().astype(bool)
            pred, meas, eps = (known[f"{k}_p{d}"] for k in ("pred_safe", "safe", "safe_eps"))
            fn, fp = int((pred & ~meas).sum()), int((~pred & meas).sum())
            unsafe, safe = int((~meas).sum()), int(meas.sum())
            lines.append(
                {
                    "b": b,
                    "p": q,
                    "rows": len(known),
                    "pred-safe %": percent(pred),
                    "measured-safe %": percent(meas),
                    "agree %": percent(pred == meas),
                    "FN": fn,
                    "FN rate %": 100 * fn / unsafe if unsafe else np.nan,
                    "FN eps": int((pred & ~eps).sum()),
                    "FP": fp,
                    "FP rate %": 100 * fp / safe if safe else np.nan,
                }
            )
    return pd.DataFrame(lines)


def percent(flags: pd.Series) -> float:
    """The share of True among the known values of a flag column, in percent (NaN with none known)."""
    flags = flags.dropna().astype(bool)
    return 100 * float(flags.mean()) if len(flags) else np.nan


def _median(values) -> float:
    values = pd.Series(values, dtype=float).dropna()
    return float(values.median()) if len(values) else np.nan
