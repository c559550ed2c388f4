"""The pretrained fit's interval over documents keeps the pooled bucket-mean slope as its centre and covers at least
93% on documents that differ, where the percentile bootstrap over four documents covers near 80%."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attnlab.analyses.temperature import document_buckets, document_interval, real_fit
from attnlab.diagnostics.paired import paired_interval
from attnlab.diagnostics.stats import exponent
from attnlab.studies.temperature import calibration

DRAWS = 300
GRID = np.array([2560.0, 5120.0, 7680.0, 10240.0])  # the smoke budget's rows past SmolLM2's 8192-token window


def _rows(rng: np.random.Generator, docs: int, heads: int = 6) -> pd.DataFrame:
    """Rows of ``docs`` documents whose exponents differ, with one exact tie and one invalid alpha_n."""
    lines = []
    for doc in range(docs):
        xi = 1.5 + 0.5 * rng.standard_normal()
        for n in GRID:
            for head in range(heads):
                lam = math.exp(xi * math.log(math.log(n)) + 0.3 * rng.standard_normal())
                lines.append({"prompt": doc, "layer": 0, "head": head, "query": n - 1, "n_keys": n, "lambda_n": lam})
    rows = pd.DataFrame(lines)
    rows["alpha_n"] = 0.3 * np.exp(0.2 * rng.standard_normal(len(rows)))
    rows["contact_gap"] = rows["alpha_n"] * np.log(rows["n_keys"]) / rows["lambda_n"]  # the contact formula (4.4)
    rows.loc[0, "lambda_n"] = 1e6  # an exact tie: left out of every coordinate
    rows.loc[1, "alpha_n"] = -1.0  # no log: left out of alpha's fit alone
    return rows


def test_the_centre_is_the_pooled_slope_and_the_ends_are_the_fits():
    rows = _rows(np.random.default_rng(0), docs=5)
    fit = real_fit(rows, n_boot=50, seed=0)
    for name, col in (("Lambda", "lambda_n"), ("alpha", "alpha_n"), ("Delta", "contact_gap")):
        xi, lo, hi = document_interval(*document_buckets(rows, col))
        tie = rows["lambda_n"] > 1e5
        assert xi == pytest.approx(exponent(rows["n_keys"], rows[col], exclude=tie).xi_hat, abs=1e-12)
        line = fit.exponents.set_index("exponent").loc[f"xi_{name}"]
        assert (line["xi_hat"], line["lo"], line["hi"]) == pytest.approx((xi, lo, hi), abs=1e-12)
        assert lo < xi < hi


def test_with_equal_counts_it_is_the_t_interval_over_per_document_slopes():
    rng = np.random.default_rng(1)
    t = np.log(np.log(GRID))
    means = rng.normal(0, 0.3, (4, 1)) + rng.normal(1.7, 0.8, (4, 1)) * t + rng.normal(0, 0.1, (4, 4))
    xi, lo, hi = document_interval(GRID, 270 * means, np.full((4, 4), 270))
    tc = t - t.mean()
    own = paired_interval((means - means.mean(1, keepdims=True)) @ tc / (tc @ tc))
    assert (xi, lo, hi) == pytest.approx((own["mean"], own["lo"], own["hi"]), abs=1e-9)


def test_one_document_has_no_interval():
    _, lo, hi = document_interval(GRID, np.ones((1, 4)), np.ones((1, 4), dtype=int))
    assert math.isnan(lo) and math.isnan(hi)


def test_the_jackknife_covers_where_the_percentile_bootstrap_does_not():
    spread = calibration.Documents()
    rng = np.random.default_rng(2)
    jackknife = bootstrap = 0
    for _ in range(DRAWS):
        grid, sums, counts = calibration._documents(rng, GRID, 4, 1.74, spread)
        _, lo, hi = document_interval(grid, sums, counts)
        jackknife += lo <= 1.74 <= hi
        # the percentile bootstrap real_fit reported before: documents drawn with replacement, B = 200
        drawn = rng.integers(0, 4, (200, 4))
        t = np.log(np.log(grid))
        tc = t - t.mean()
        means = sums[drawn].sum(1) / counts[drawn].sum(1)
        slopes = (means - means.mean(1, keepdims=True)) @ tc / (tc @ tc)
        lo, hi = np.percentile(slopes, [2.5, 97.5])
        bootstrap += lo <= 1.74 <= hi
    assert jackknife / DRAWS >= 0.93 and 0.7 <= bootstrap / DRAWS <= 0.88
