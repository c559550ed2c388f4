"""Gap counting (Lambda_n, contact point, resolved scale, p*_n) matches a per-row brute force and seed 003's closed forms, and Lambda_n is the critical scale of Thm. 4.6."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest
import torch

from attnlab.diagnostics import row_stats
from attnlab.diagnostics.gaps import gap_stats, p_star_n

EPS = 1e-6


def brute(z, allowed, eps=EPS, r="auto"):
    """Seed 003 Def. 4.3-4.5, Lemma C.1, Cor. C.2, Def. D.3 on one row, by enumeration."""
    vals = [z[j] for j in range(len(z)) if allowed[j]]
    n = len(vals)
    top = max(vals)
    gaps = [top - v for v in vals]

    def count(t):
        return sum(1 for g in gaps if g <= t)

    r = math.log1p(math.log(n)) if r == "auto" else r
    positive = sorted({g for g in gaps if g > 0})
    if count(0) >= 2:
        lam = math.inf
    else:
        lam = max([math.log(count(u)) / u for u in positive], default=0.0)
    out = {"lambda_n": lam, "tie": count(0) >= 2}
    contact = [u for u in positive if lam < math.inf and math.log(count(u)) / u >= (1 - eps) * lam]
    if contact:
        d = max(contact)
        out.update(contact_gap=d, contact_count=count(d),
                   alpha_n=math.log(count(d)) / math.log(n) if n > 1 else math.nan,
                   contact_entropy=math.log(count(d)))
    else:
        out.update(contact_gap=math.nan, contact_count=math.nan, alpha_n=math.nan, contact_entropy=math.nan)
    if math.log(count(0)) > r:
        out["lambda_resolved"] = math.inf
    else:
        cands = [(math.log(count(u)) - r) / u for u in positive if math.log(count(u)) > r]
        out["lambda_resolved"] = max(cands) if cands else math.nan
    return out


def _stats(z, mask=None, r="auto", **kw):
    z = torch.as_tensor(z, dtype=torch.float64)
    z = z if z.dim() == 2 else z.unsqueeze(0)
    zm = z if mask is None else torch.where(torch.as_tensor(mask), z, -math.inf)
    return gap_stats(zm, (zm > -math.inf).sum(-1), r=r, **kw)


def _same(a, b):
    if isinstance(b, float) and math.isnan(b):
        return math.isnan(a)
    return a == b or math.isclose(a, b, rel_tol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_matches_brute_force_on_random_rows(n):
    g = torch.Generator().manual_seed(n)
    z = torch.randn(30, n, generator=g, dtype=torch.float64)
    z[::5] = torch.round(z[::5] * 2) / 2  # repeated gaps, sometimes tied maxima
    mask = torch.rand(30, n, generator=g) > 0.25
    mask[:, 0] = True
    out = _stats(z, mask)
    for i in range(30):
        ref = brute(z[i].tolist(), mask[i].tolist())
        for k, v in ref.items():
            got = out[k][i].item()
            assert _same(float(got), float(v)), (n, i, k, got, v)


def test_equicorrelated_row():
    """§4.4: every competitor at gap Delta, so Lambda_n = log n / Delta and alpha_n = 1."""
    for n, d in [(8, 0.5), (1000, 2.0), (4096, 0.1)]:
        out = _stats([1.0] + [1.0 - d] * (n - 1))
        assert out["lambda_n"].item() == pytest.approx(math.log(n) / d, rel=1e-12)
        assert out["alpha_n"].item() == pytest.approx(1.0)
        assert out["contact_gap"].item() == pytest.approx(d)


@pytest.mark.parametrize("m,delta,tau", [(4, 0.3, 5.0), (4, 2.0, 2.2)])
def test_two_level_block_row(m, delta, tau):
    """Eq. 4.8-4.9: N jumps to m at delta and to n at tau; Lambda_n = max(log m / delta, log n / tau)."""
    n = 48
    row = [0.0] + [-delta] * (m - 1) + [-tau] * (n - m)
    out = _stats(row)
    lam = max(math.log(m) / delta, math.log(n) / tau)
    assert out["lambda_n"].item() == pytest.approx(lam, rel=1e-12)
    within = math.log(m) / delta > math.log(n) / tau
    assert out["contact_gap"].item() == pytest.approx(delta if within else tau)
    assert out["alpha_n"].item() == pytest.approx(math.log(m) / math.log(n) if within else 1.0)


def test_example_d7_bounded_contact_count():
    """App. D, Example D.7: Lambda_n = log n at Delta_n = log 2 / log n, C_n = log 2."""
    for n in (64, 4096):
        ln = math.log(n)
        row = [0.0, -math.log(2) / ln] + [-ln] * (n - 2)
        out = _stats(row)
        assert out["lambda_n"].item() == pytest.approx(ln)
        assert out["contact_gap"].item() == pytest.approx(math.log(2) / ln)
        assert out["contact_entropy"].item() == pytest.approx(math.log(2))
        # Example D.8: once r > log 2 only t = log n remains: Lambda^(r) = (log n - r) / log n
        r = 1.0
        assert _stats(row, r=r)["lambda_resolved"].item() == pytest.approx((ln - r) / ln)


def test_ties_at_the_maximum():
    out = _stats([[2.0, 2.0, 1.0], [2.0, 1.0, 1.0], [5.0, 0.0, 0.0]])
    assert out["tie"].tolist() == [True, False, False]
    assert out["lambda_n"][0].item() == math.inf and math.isnan(out["contact_gap"][0].item())
    single = _stats([[3.0]])
    assert single["lambda_n"].item() == 0.0 and math.isnan(single["alpha_n"].item())


def test_p_star_n_is_the_largest_softmax_weight():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(6, 50, generator=g, dtype=torch.float64)
    for beta in (0.3, 2.0):
        assert torch.allclose(p_star_n(z, (beta,))[:, 0], torch.softmax(beta * z, -1).amax(-1), rtol=1e-12)
    tied = torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64)
    assert p_star_n(tied, torch.tensor([[math.inf]])).item() == 0.5  # Cor. C.2: 1 / n_max


def test_boundary_check_columns_follow_gamma():
    """App. D.1: p*_n(gamma Lambda_n) rises with gamma; on the equicorrelated row it is 1 / (1 + (n-1) n^-gamma)."""
    n, d = 256, 0.5
    row = torch.tensor([[1.0] + [1.0 - d] * (n - 1)], dtype=torch.float64)
    df = row_stats(row, gamma=(0.5, 1.0, 1.5))
    for gamma in (0.5, 1.0, 1.5):
        assert df[f"p_star_n_gamma{gamma:g}"].iloc[0] == pytest.approx(1 / (1 + (n - 1) * n ** -gamma))


@pytest.mark.parametrize("family", ["equicorrelated", "example_d7"])
def test_lambda_n_is_the_critical_scale(family):
    """Thm. 4.6: softmax(beta z) collapses onto the maximum (entropy -> 0) for beta >> Lambda_n and
    the top-two gap closes for beta << Lambda_n, along families with growing n."""
    hot, cold = [], []
    for n in (2**8, 2**11, 2**14):
        ln = math.log(n)
        if family == "equicorrelated":
            row = [0.0] + [-1.0] * (n - 1)
        else:
            row = [0.0, -math.log(2) / ln] + [-ln] * (n - 2)
        lam = row_stats(torch.tensor([row], dtype=torch.float64))["lambda_n"].iloc[0]
        z = torch.tensor(row, dtype=torch.float64)
        w_hot = torch.softmax(lam * ln * z, -1)            # beta / Lambda_n = log n -> inf
        hot.append(float(-torch.special.xlogy(w_hot, w_hot).sum()))
        w_cold = torch.softmax(lam / ln * z, -1).sort(descending=True).values   # beta / Lambda_n -> 0
        cold.append(float(w_cold[0] - w_cold[1]))
    assert hot[2] < hot[1] < hot[0] and hot[-1] < 0.02
    assert cold[2] < cold[1] < cold[0] and cold[-1] < 0.05


def test_row_stats_carries_gap_columns():
    z = torch.randn(3, 4, 20)
    df = row_stats(z)
    for k in ("lambda_n", "tie", "contact_gap", "contact_count", "alpha_n", "contact_entropy", "p_star_n"):
        assert k in df.columns
    assert "lambda_resolved" not in df.columns and "lambda_resolved" in row_stats(z, r="auto").columns
    ref = _stats(z.reshape(12, 20).double())
    assert np.allclose(df["lambda_n"].to_numpy(), ref["lambda_n"].numpy())


def _numpy_reference(row, r):
    """The same definitions with a full numpy sort of one row (no pruning), for rows too long to enumerate."""
    gaps = np.sort(row.max() - row)
    count = np.searchsorted(gaps, gaps, side="right")
    pos = gaps > 0
    lam = np.inf if count[0] >= 2 else max(np.max(np.log(count[pos]) / gaps[pos], initial=0.0), 0.0)
    res = np.log1p(np.log(row.size)) if r == "auto" else r
    above = pos & (np.log(count) > res)
    lam_r = np.max((np.log(count[above]) - res) / gaps[above]) if above.any() else np.nan
    lam_r = np.inf if np.log(count[0]) > res else lam_r
    contact = pos & (np.log(count) / np.where(pos, gaps, 1) >= (1 - EPS) * lam) if np.isfinite(lam) else pos & False
    delta = gaps[contact].max() if contact.any() else np.nan
    return lam, delta, lam_r


@pytest.mark.parametrize("n,scale,r", [(1024, 1.0, "auto"), (2048, 5.0, None), (4096, 0.2, 1.0),
                                       (1000, 1.0, "auto")])
def test_pruned_long_rows_match_full_sort(n, scale, r):
    """Rows of >= 512 keys take the pruned path (group-maxima bounds); it must agree with a full sort."""
    g = torch.Generator().manual_seed(n)
    z = torch.randn(12, n, generator=g, dtype=torch.float64) * scale
    z[0] = torch.round(z[0] * 4) / 4             # many equal gaps
    z[1, 7] = z[1].max()                          # tied maximum
    z[2] = 0.0
    z[2, :40] = 1.0
    z[2, 0] = 1.5                                 # a plateau: Lambda_n comes from a large count
    mask = torch.rand(12, n, generator=g) > 0.3
    mask[:, 0] = mask[1, 7] = True
    mask[2, :40] = True
    out = _stats(z, mask, r=r)
    for i in range(12):
        row = z[i][mask[i]].numpy()
        lam, delta, lam_r = _numpy_reference(row, r if r is not None else "auto")
        assert _same(out["lambda_n"][i].item(), float(lam)), i
        assert _same(out["contact_gap"][i].item(), float(delta)), i
        if r is not None:
            assert _same(out["lambda_resolved"][i].item(), float(lam_r)), i


@settings(max_examples=40, deadline=None)
@given(st.integers(512, 700), st.integers(0, 2**31 - 1), st.sampled_from([2, 5, 50, 10**6]),
       st.sampled_from([None, "auto", 0.5]))
def test_binned_path_equals_full_sort_on_coarse_rows(n, seed, levels, r):
    """Few distinct score levels make long runs of equal gaps and bin-edge coincidences."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randint(0, levels, (4, n), generator=g).double() / levels * 3
    zm = torch.where(torch.rand(4, n, generator=g) > 0.2, z, -math.inf)
    nk = (zm > -math.inf).sum(-1)
    got = gap_stats(zm, nk, r=r)
    gs = (zm.amax(-1, keepdim=True) - zm).sort(-1).values
    from attnlab.diagnostics.gaps import _from_sorted, counts, resolution
    ref = _from_sorted(gs, counts(gs), nk, EPS, None if r is None else resolution(nk, r))
    for k, v in ref.items():
        assert torch.equal(got[k].isnan(), v.isnan()), k
        assert torch.equal(got[k].nan_to_num(), v.nan_to_num()), k
