"""summarize's counts, Wilson-bounded percentages and medians equal a brute-force recount of the row table, per
group, with unreadable, dead and saturated rows counted and kept out of every statistic."""

from __future__ import annotations

import math
import statistics

import pandas as pd
import torch

from attnlab.diagnostics import row_stats
from attnlab.diagnostics.summary import summarize

PS = (2, 8)
Z = 1.959963984540054


def _wilson(k, n):
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(centre - half, 0.0) if k else 0.0, min(centre + half, 1.0) if k < n else 1.0


def _pct(flags):
    known = [bool(f) for f in flags if f is not pd.NA]
    if not known:
        return "-"
    k, n = sum(known), len(known)
    lo, hi = _wilson(k, n)
    return f"{100 * k / n:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def _table():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(40, 9, generator=g, dtype=torch.float64) * 2
    z[3, 2] = math.nan
    z[4, 0] = math.inf
    z[5] = z[5].amax()  # a tie at the maximum: lambda_n = inf
    z[7] = -2 - z[7].abs()  # dead at every bias below 2
    mask = torch.ones_like(z, dtype=torch.bool)
    mask[6] = False
    frames = [row_stats(z, mask, p=PS, b=b, tau=3.0).assign(b=b) for b in (-0.5, 0.0, 1.0)]
    return pd.concat(frames, ignore_index=True)


def _median(values):
    values = [float(v) for v in values if not math.isnan(float(v))]
    return statistics.median(values) if values else math.nan


def test_each_group_line_is_the_brute_force_recount():
    rows = _table()
    assert set(rows["status"]) >= {"active", "dead", "saturated", "nan", "inf", "empty"}
    out = summarize(rows, PS, by="b")
    assert out["b"].tolist() == [-0.5, 0.0, 1.0]
    for _, line in out.iterrows():
        group = [r for _, r in rows[rows["b"] == line["b"]].iterrows()]
        active = [r for r in group if r["status"] == "active"]
        readable = [r for r in group if r["status"] not in ("empty", "nan", "inf")]
        assert line["rows"] == len(group)
        for status in ("active", "dead", "saturated"):
            assert line[status] == sum(r["status"] == status for r in group)
        assert line["unreadable"] == len(group) - len(readable)
        for p in PS:
            assert line[f"safe% p{p}"] == _pct([r[f"safe_p{p}"] for r in active])
            assert line[f"eps-safe% p{p}"] == _pct([r[f"safe_eps_p{p}"] for r in active])
            assert line[f"pred-safe% p{p}"] == _pct([r[f"pred_safe_p{p}"] for r in active])
        for col, part in (("rho", active), ("a_act", active), ("s_p2", active), ("entropy", readable)):
            want = _median([r[col] for r in part if r[col] is not pd.NA])
            assert math.isclose(line[f"med {col}"], want) or (math.isnan(want) and math.isnan(line[f"med {col}"]))
        lam = [float(r["lambda_n"]) for r in readable]
        assert line["ties"] == sum(math.isinf(v) for v in lam)
        assert math.isclose(line["med lambda_n"], _median([v for v in lam if math.isfinite(v)]))


def test_without_groups_one_line_covers_every_row():
    rows = _table()
    out = summarize(rows, PS)
    assert len(out) == 1 and "b" not in out.columns
    assert out["rows"].iloc[0] == len(rows)
    assert out["safe% p8"].iloc[0] == _pct(list(rows.loc[rows["status"] == "active", "safe_p8"]))


def test_a_group_with_no_active_row_shows_dashes_and_nan_medians():
    rows = row_stats(torch.tensor([[-3.0, -4.0], [-1.0, -2.0]], dtype=torch.float64), p=PS)
    out = summarize(rows, PS)
    assert out["dead"].iloc[0] == 2 and out["active"].iloc[0] == 0
    assert out["safe% p2"].iloc[0] == "-" and math.isnan(out["med rho"].iloc[0])
    assert not math.isnan(out["med entropy"].iloc[0])


def test_the_wilson_bounds_of_the_boundary_cases():
    """App. B of Polynomial Concentration quotes 200/200 as 98.2%: the lower bound, not a Wald 100%."""
    rows = pd.DataFrame(
        {
            "status": ["active"] * 200,
            "safe_p2": [True] * 200,
            "safe_eps_p2": [True] * 200,
            "pred_safe_p2": [False] * 200,
            "rho": 0.5,
            "a_act": 1,
            "s_p2": 0.1,
            "entropy": 0.2,
            "lambda_n": 3.0,
        }
    )
    out = summarize(rows, (2,))
    assert out["safe% p2"].iloc[0] == "100.0 [98.1, 100.0]"
    assert out["pred-safe% p2"].iloc[0] == "0.0 [0.0, 1.9]"
