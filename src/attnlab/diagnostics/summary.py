"""The summary table a person reads after a diagnostics run: one line per group (e.g. per bias b)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from attnlab.diagnostics.rows import SPECIAL
from attnlab.diagnostics.stats import wilson


def _pct(flags: pd.Series) -> str:
    """ "x% [lo, hi]": the fraction of True among known flags with its Wilson 95% interval (Polynomial
    Concentration App. B)."""
    known = flags.dropna()
    if len(known) == 0:
        return "-"
    k = int(known.sum())
    lo, hi = wilson(k, len(known))
    return f"{100 * k / len(known):.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def summarize(rows: pd.DataFrame, p: Sequence[float], by: str | None = None) -> pd.DataFrame:
    """Per group: row counts by status, then over active rows (Polynomial Concentration §3 restricts the
    diagnostic to them) the measured-safe (strict and eps), predicted-safe fractions per degree and the
    medians of rho, A_act and S_p (first degree); over readable rows the median entropy and lambda_n, whose
    median leaves out tied rows (inf, Hayase & Karakida 2026 App. C.2), whose count is shown. Rows with an
    ``s_sigmoid`` column add the share of readable rows with S_sigma < 1 (Polynomial Concentration App. T,
    Table 15). Rows with status empty/nan/inf are counted and nothing else."""
    groups = [((None,), rows)] if by is None else rows.groupby(by, sort=True)
    lines = []
    for key, g in groups:
        status = g["status"].value_counts()
        active = g[g["status"] == "active"]
        line = {} if by is None else {by: key[0] if isinstance(key, tuple) else key}
        line.update(
            {
                "rows": len(g),
                "active": int(status.get("active", 0)),
                "dead": int(status.get("dead", 0)),
                "saturated": int(status.get("saturated", 0)),
                "unreadable": int(sum(status.get(s, 0) for s in SPECIAL)),
            }
        )
        for q in p:
            d = f"{q:g}"
            line[f"safe% p{d}"] = _pct(active[f"safe_p{d}"])
            line[f"eps-safe% p{d}"] = _pct(active[f"safe_eps_p{d}"])
            line[f"pred-safe% p{d}"] = _pct(active[f"pred_safe_p{d}"])
        readable = g[~g["status"].isin(SPECIAL)]
        for col, part in (("rho", active), ("a_act", active), (f"s_p{p[0]:g}", active), ("entropy", readable)):
            values = part[col].astype(float).dropna()
            line[f"med {col}"] = float(values.median()) if len(values) else np.nan
        lam = readable["lambda_n"].astype(float)
        finite = lam[np.isfinite(lam)]
        line["med lambda_n"] = float(finite.median()) if len(finite) else np.nan
        line["ties"] = int(np.isinf(lam).sum())
        if "s_sigmoid" in g:
            line["sigma-safe%"] = _pct(readable["s_sigmoid"].astype(float).dropna() < 1)
        lines.append(line)
    return pd.DataFrame(lines)
