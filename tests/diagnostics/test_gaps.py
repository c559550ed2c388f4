"""gap_stats reads seed 003's gap-counting statistics (Lambda_n, contact point, C_n, Lambda_n^(r), p*_n) exactly: brute force, closed-form rows, Thm. 4.6 scaling, D.1 boundary check, on the kernel and the torch-ops path."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.diagnostics import row_stats
from attnlab.diagnostics.gaps import _from_sorted, counts, p_star_n, resolution
from attnlab.diagnostics.gaps import gap_stats as _gap_stats

pytestmark = pytest.mark.usefixtures("kernel_path")

EPS = 1e-6
FLOAT_KEYS = ("lambda_n", "contact_gap", "contact_count", "alpha_n", "contact_entropy", "lambda_resolved")


def _columns(df) -> dict[str, torch.Tensor]:
    """row_stats' gap columns as tensors (NA ties of unreadable rows read False)."""
    out = {k: torch.tensor(df[k].to_numpy(dtype=float, na_value=math.nan)) for k in FLOAT_KEYS if k in df}
    out["tie"] = torch.tensor(df["tie"].fillna(False).to_numpy(dtype=bool))
    return out


def gap_stats(z, allowed, *, betas=(1.0,), eps=EPS, r=None):
    """The engine's gap statistics of (z, allowed) rows as row_stats computes them, on the path that
    ``kernel_path`` picks, with p*_n(beta) columns; r = None means the default resolution log(1 + log n)."""
    out = _columns(row_stats(z, allowed, eps=eps, r="auto" if r is None else r))
    n_keys = allowed.sum(-1)
    zm = torch.where(allowed, z, -math.inf)
    zm = torch.where((n_keys > 0).unsqueeze(-1), zm, 0.0)  # p_star_n needs a key; row_stats says "empty"
    for b in betas:
        p = p_star_n(zm, (b,))[:, 0]
        out[f"p_star_beta{b:g}"] = torch.where(n_keys > 1, p, math.nan)
    return out


def brute(z, allowed, betas=(1.0,), eps=EPS, r=None):
    """Seed 003 Def. 4.3-4.5, Lemma C.1, Cor. C.2, Cor. D.6, Def. D.3, Prop. D.1 on one row, by enumeration."""
    vals = [float(v) for v, a in zip(z, allowed) if a]
    n = len(vals)
    out = {k: math.nan for k in FLOAT_KEYS} | {f"p_star_beta{b:g}": math.nan for b in betas} | {"tie": False}
    if n < 2:
        return out
    top = max(vals)
    gaps_ = [top - v for v in vals]

    def count(t):
        return sum(1 for g in gaps_ if g <= t)

    positive = [g for g in gaps_ if g > 0]
    tie = count(0.0) >= 2
    lam = math.inf if tie else max(math.log(count(u)) / u for u in positive)
    contact = [u for u in positive if math.log(count(u)) / u >= (1 - eps) * lam]
    res = math.log(1 + math.log(n)) if r is None else r
    if math.log(count(0.0)) > res:
        lam_r = math.inf
    else:
        lam_r = max([(math.log(count(u)) - res) / u for u in positive if math.log(count(u)) > res], default=0.0)
    out.update(lambda_n=lam, tie=tie, lambda_resolved=lam_r)
    if contact:
        d = max(contact)
        out.update(
            contact_gap=d,
            contact_count=count(d),
            alpha_n=math.log(count(d)) / math.log(n),
            contact_entropy=math.log(count(d)),
        )
    for b in betas:
        out[f"p_star_beta{b:g}"] = 1 / sum(math.exp(-b * g) for g in gaps_)
    return out


def _same(a, b):
    if isinstance(b, bool):
        return a == b
    if math.isnan(b):
        return math.isnan(a)
    return a == b or math.isclose(a, b, rel_tol=1e-12)


def _check_against_brute(z, allowed, betas=(1.0,), r=None):
    out = gap_stats(z, allowed, betas=betas, r=r)
    for i in range(z.shape[0]):
        ref = brute(z[i].tolist(), allowed[i].tolist(), betas, r=r)
        assert set(out) == set(ref)
        for k, v in ref.items():
            got = out[k][i].item()
            assert _same(got, v), (i, k, got, v, z[i][allowed[i]].tolist())


def _row(values):
    z = torch.tensor([values], dtype=torch.float64)
    return z, torch.ones_like(z, dtype=torch.bool)


def _one(values, **kw):
    return {k: v.item() for k, v in gap_stats(*_row(values), **kw).items()}


@pytest.mark.parametrize("n", [1, 2, 3, 17, 200])
@pytest.mark.parametrize("r", [None, 0.0, 1.5])
def test_matches_brute_force_on_random_masked_rows(n, r):
    g = torch.Generator().manual_seed(n)
    z = torch.randn(24, n, generator=g, dtype=torch.float64) * torch.rand(24, 1, generator=g, dtype=torch.float64) * 4
    z[::3] = torch.round(z[::3] * 2) / 2  # repeated gaps and, now and then, a tied maximum
    z[1] = 0.0  # every key tied
    allowed = torch.rand(24, n, generator=g) > 0.3
    allowed[2] = False  # a row with no allowed key
    _check_against_brute(z, allowed, betas=(0.5, 1.0, 7.0), r=r)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(-3, 3), min_size=6, max_size=6), min_size=1, max_size=4),
    st.lists(st.booleans(), min_size=6, max_size=6),
    st.sampled_from([0.25, 1.0, 3.0]),
)
def test_matches_brute_force_on_few_level_rows(levels, keep, scale):
    """Few score levels: long runs of equal gaps, ties, near-equal envelope ratios."""
    z = torch.tensor(levels, dtype=torch.float64) * scale
    allowed = torch.tensor([keep] * len(levels))
    _check_against_brute(z, allowed, betas=(2.0,))


def test_result_keys_and_shapes():
    out = gap_stats(*_row([0.0, -1.0, -2.0]), betas=(1.0, 0.5, 2))
    assert set(out) == {*FLOAT_KEYS, "tie", "p_star_beta1", "p_star_beta0.5", "p_star_beta2"}
    assert all(v.shape == (1,) and v.dtype == torch.float64 for k, v in out.items() if k != "tie")
    assert out["tie"].dtype == torch.bool


def test_rows_below_two_keys_are_nan():
    # (an empty key axis never gets here: row_stats rejects it with a clear error)
    for z, a in [
        (torch.tensor([[3.0, 1.0], [3.0, 1.0]], dtype=torch.float64), torch.tensor([[True, False], [False] * 2]))
    ]:
        out = gap_stats(z, a)
        assert not out["tie"].any()
        assert all(v.isnan().all() for k, v in out.items() if k != "tie")
    assert gap_stats(torch.zeros(0, 4, dtype=torch.float64), torch.zeros(0, 4, dtype=torch.bool))["lambda_n"].shape == (
        0,
    )


def _simplex_gram(n, r2, delta, rows):
    """The first ``rows`` rows of §4.4's Sigma^simp = (r^2 - Delta) J + Delta I."""
    return (r2 - delta) * torch.ones(rows, n, dtype=torch.float64) + delta * torch.eye(rows, n, dtype=torch.float64)


def _block_gram(n, m, delta, tau, r2, rows):
    """The first ``rows`` rows of (4.8): Sigma^block = delta I + (tau - delta) B + (r^2 - tau) J, blocks of size m."""
    i, j = torch.arange(rows).unsqueeze(-1), torch.arange(n)
    same_block = (i // m == j // m).double()
    return delta * (i == j).double() + (tau - delta) * same_block + (r2 - tau)


@pytest.mark.parametrize("n", [8, 300, 2**12])
@pytest.mark.parametrize("xi", [0.5, 1.0, 2.0])
def test_equicorrelated_rows(n, xi):
    """§4.4: every competitor at gap Delta_n, so Lambda_n = log n / Delta_n, alpha_n = 1, C_n = log n;
    Delta_n = (log n)^(1 - xi) gives Lambda_n = (log n)^xi."""
    delta = math.log(n) ** (1 - xi)
    sigma = _simplex_gram(n, 2.0, delta, rows=min(n, 16))  # each Gram row is one query's score row
    out = gap_stats(sigma, torch.ones_like(sigma, dtype=torch.bool))
    assert torch.allclose(out["lambda_n"], torch.tensor(math.log(n) / delta, dtype=torch.float64), rtol=1e-12)
    assert torch.allclose(out["lambda_n"], torch.tensor(math.log(n) ** xi, dtype=torch.float64), rtol=1e-12)
    assert torch.allclose(out["contact_gap"], torch.tensor(delta, dtype=torch.float64), rtol=1e-12)
    assert (out["contact_count"] == n).all() and torch.allclose(out["alpha_n"], torch.ones(1, dtype=torch.float64))
    assert torch.allclose(out["contact_entropy"], torch.tensor(math.log(n), dtype=torch.float64))
    assert not out["tie"].any()


@pytest.mark.parametrize("n,m,delta,tau", [(12, 3, 0.3, 2.0), (48, 4, 2.0, 2.2), (48, 6, 1.0, 1.5)])
def test_two_level_block_rows(n, m, delta, tau):
    """(4.8)-(4.9): N_n jumps to m at delta_n and to n at tau_n, Lambda_n = max(log m / delta, log n / tau);
    the contact is (delta_n, m) when the within-block jump dominates, else (tau_n, n)."""
    sigma = _block_gram(n, m, delta, tau, r2=3.0, rows=n)
    out = gap_stats(sigma, torch.ones_like(sigma, dtype=torch.bool))
    within = math.log(m) / delta > math.log(n) / tau
    expect = {
        "lambda_n": max(math.log(m) / delta, math.log(n) / tau),
        "contact_gap": delta if within else tau,
        "contact_count": m if within else n,
        "alpha_n": math.log(m) / math.log(n) if within else 1.0,
    }
    for k, v in expect.items():
        assert torch.allclose(out[k], torch.tensor(float(v), dtype=torch.float64), rtol=1e-12), k


@pytest.mark.parametrize("k", [4, 6, 8])
def test_block_realization_of_a_prescribed_exponent(k):
    """§4.4: delta_n = log m / (log n)^xi, tau_n = C log n / (log n)^xi (C > 1) give Lambda_n = (log n)^xi
    at the contact (delta_n, m): alpha_n = 1/2 for m = n^(1/2), log m / log n for bounded m."""
    n, xi = 2 ** (2 * k), 1.5
    ln = math.log(n)
    for m, alpha in [(2**k, 0.5), (4, math.log(4) / ln)]:
        delta, tau = math.log(m) / ln**xi, 2 * ln / ln**xi
        row = _block_gram(n, m, delta, tau, r2=0.0, rows=1)[0]
        out = _one(row.tolist())
        assert out["lambda_n"] == pytest.approx(ln**xi, rel=1e-12)
        assert out["contact_gap"] == pytest.approx(delta, rel=1e-12)
        assert out["alpha_n"] == pytest.approx(alpha, rel=1e-12)


def test_equal_jumps_take_the_largest_contact_gap():
    """Def. 4.5: Delta_n is the largest contact gap; here log 4 / 1 = log 16 / 2, so Delta_n = 2, alpha_n = 1."""
    out = gap_stats(_block_gram(16, 4, 1.0, 2.0, r2=3.0, rows=16), torch.ones(16, 16, dtype=torch.bool))
    assert (out["contact_gap"] == 2.0).all() and (out["contact_count"] == 16).all()
    assert torch.allclose(out["alpha_n"], torch.ones(1, dtype=torch.float64))


def test_contact_within_eps_of_the_envelope():
    """§4.5.1 / App. G.1: Delta_n is the largest gap with log N / u >= (1 - eps) Lambda_n. Here the far gap
    b misses the envelope by a relative 1e-7: it is the contact at eps = 1e-6 but not at eps = 1e-8, and
    C_n = log N_n(Delta_n) (Cor. D.6), not Lambda_n Delta_n, which differs from it by that 1e-7."""
    b = math.log(5) / (math.log(2) * (1 - 1e-7))
    row = [0.0, -1.0, -b, -b, -b]
    loose, tight = _one(row), _one(row, eps=1e-8)
    assert loose["lambda_n"] == tight["lambda_n"] == pytest.approx(math.log(2), rel=1e-15)
    assert (loose["contact_gap"], loose["contact_count"]) == (b, 5) and (
        tight["contact_gap"],
        tight["contact_count"],
    ) == (1, 2)
    assert loose["contact_entropy"] == pytest.approx(math.log(5), rel=1e-15) and loose["alpha_n"] == pytest.approx(1.0)
    assert loose["lambda_n"] * loose["contact_gap"] == pytest.approx(math.log(5) / (1 - 1e-7), rel=1e-12)


@pytest.mark.parametrize("n", [64, 4096, 2**16])
def test_example_d7_bounded_contact_count(n):
    """App. D Example D.7: Lambda_n = log n at Delta_n = log 2 / log n, so C_n = log 2 stays bounded and
    alpha_n = log 2 / log n; Example D.8: for r > log 2, Lambda_n^(r) = (log n - r) / log n; with
    beta_n = sqrt(log n), p*_n -> 1/2, not 0 (no rank collapse)."""
    ln = math.log(n)
    row = [0.0, -math.log(2) / ln] + [-ln] * (n - 2)
    beta = math.sqrt(ln)
    out = _one(row, betas=(beta,))
    assert out["lambda_n"] == pytest.approx(ln, rel=1e-12)
    assert out["contact_gap"] == pytest.approx(math.log(2) / ln, rel=1e-12)
    assert out["contact_count"] == 2
    assert out["contact_entropy"] == pytest.approx(math.log(2), rel=1e-12)
    assert out["alpha_n"] == pytest.approx(math.log(2) / ln, rel=1e-12)
    r = math.log(1 + ln)  # the default resolution, > log 2 here
    assert out["lambda_resolved"] == pytest.approx((ln - r) / ln, rel=1e-12)
    assert _one(row, r=0.5)["lambda_resolved"] == pytest.approx(
        max((math.log(2) - 0.5) * ln / math.log(2), (ln - 0.5) / ln), rel=1e-12
    )
    p = out[f"p_star_beta{beta:g}"]
    assert p == pytest.approx(1 / (1 + 2 ** (-beta / ln) + (n - 2) * math.exp(-beta * ln)), rel=1e-12)
    assert 0.5 < p < 0.75


def test_ties_at_the_maximum():
    """Cor. C.2: N_n(0) >= 2 gives Lambda_n = inf, no contact gap, and p*_n(beta) <= 1 / N_n(0), with
    equality at beta = inf. A tie with a masked key is no tie."""
    z = torch.tensor(
        [[2.0, 2.0, 2.0, 1.0], [2.0, 1.0, 1.0, 0.0], [5.0, 0.0, 5.0, 0.0], [1.0, 1.0, 0.0, -1.0]], dtype=torch.float64
    )
    allowed = torch.tensor([[True] * 4, [True] * 4, [True, True, False, True], [True] * 4])
    out = gap_stats(z, allowed, betas=(0.1, 3.0, math.inf))
    assert out["tie"].tolist() == [True, False, False, True]
    assert out["lambda_n"][[0, 3]].tolist() == [math.inf, math.inf]
    assert out["lambda_n"][[1, 2]].isfinite().all()
    for k in ("contact_gap", "contact_count", "alpha_n", "contact_entropy"):
        assert out[k][[0, 3]].isnan().all() and not out[k][[1, 2]].isnan().any(), k
    # Def. D.3 at r = log(1 + log 4) ~ 0.87: log 3 > r resolves to inf, log 2 < r does not.
    assert out["lambda_resolved"][0].item() == math.inf and math.isfinite(out["lambda_resolved"][3].item())
    assert out["p_star_betainf"][[0, 3]].tolist() == [1 / 3, 1 / 2]
    for b in ("0.1", "3"):
        assert (out[f"p_star_beta{b}"][[0, 3]] <= torch.tensor([1 / 3, 1 / 2], dtype=torch.float64)).all()


def _entropy(w):
    return float(-torch.special.xlogy(w, w).sum())


def _families():
    """Rows with growing n and known xi_Lambda: equicorrelated Delta_n = (log n)^(1 - xi) (§4.4), and the
    block row with m = n^(1/2), delta_n = log m / (log n)^xi, tau_n = 2 log n / (log n)^xi."""

    def simplex(n, xi):
        return torch.tensor([0.0] + [-(math.log(n) ** (1 - xi))] * (n - 1), dtype=torch.float64)

    def block(n, xi):
        m, ln = math.isqrt(n), math.log(n)
        return torch.tensor(
            [0.0] + [-math.log(m) / ln**xi] * (m - 1) + [-2 * ln / ln**xi] * (n - m), dtype=torch.float64
        )

    return [(simplex, 0.5), (simplex, 1.0), (simplex, 2.0), (block, 1.0), (block, 2.0)]


@pytest.mark.parametrize("family,xi", _families())
def test_lambda_n_is_the_critical_scale(family, xi):
    """Thm. 4.6: along n = 2^8..2^16, beta = 8 Lambda_n collapses the entropy (H_n -> 0) and
    beta = Lambda_n / 8 closes the top-two weight gap (D_n -> 0); at beta = Lambda_n neither happens."""
    hot, cold = [], []
    for n in [2**8, 2**10, 2**12, 2**14, 2**16]:
        z = family(n, xi)
        lam = gap_stats(z.unsqueeze(0), torch.ones(1, n, dtype=torch.bool))["lambda_n"].item()
        assert lam == pytest.approx(math.log(n) ** xi, rel=1e-9)
        hot.append(_entropy(torch.softmax(8 * lam * z, -1)))
        top2 = torch.softmax(lam / 8 * z, -1).topk(2).values
        cold.append(float(top2[0] - top2[1]))
        at = torch.softmax(lam * z, -1)
        critical = at.topk(2).values
        assert _entropy(at) > 0.5 and critical[0] - critical[1] > 0.3
    assert all(a > b for a, b in zip(hot, hot[1:])) and hot[-1] < 1e-3
    assert all(a > b for a, b in zip(cold, cold[1:])) and cold[-1] < 1e-2


@pytest.mark.parametrize("n", [2**8, 2**12])
def test_d1_boundary_check_on_the_equicorrelated_row(n):
    """App. D.1: p*_n(gamma Lambda_n) = 1 / (1 + (n - 1) n^(-gamma)) on the equicorrelated row: below
    1 / log n at gamma = 0.1, above it for gamma >= 1, and rising with gamma."""
    z = torch.tensor([0.0] + [-1.0] * (n - 1), dtype=torch.float64)
    lam = math.log(n)
    gammas = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0)
    out = _one(z.tolist(), betas=[g * lam for g in gammas])
    ps = [out[f"p_star_beta{g * lam:g}"] for g in gammas]
    for g, p in zip(gammas, ps):
        assert p == pytest.approx(1 / (1 + (n - 1) * n**-g), rel=1e-12)
    assert all(a < b for a, b in zip(ps, ps[1:]))
    assert ps[0] <= 1 / lam and all(p > 1 / lam for g, p in zip(gammas, ps) if g >= 1)


def test_d1_boundary_check_on_random_rows():
    """App. D.1 with per-row beta = gamma Lambda_n through p_star_n: p*_n is softmax's largest weight,
    rises with gamma, is at least 1 / (1 + log n) for gamma >= 1 (Lemma D.5 with S_n(Lambda_n) <= 0) and at
    most exp(-(C_n - gamma Lambda_n Delta_n)) (the tokens within Delta_n, Cor. D.6); tied rows give 1 / N_n(0)."""
    g = torch.Generator().manual_seed(3)
    z = (
        torch.randn(40, 512, generator=g, dtype=torch.float64)
        * torch.linspace(0.1, 5, 40, dtype=torch.float64)[:, None]
    )
    allowed = torch.rand(40, 512, generator=g) > 0.25
    z[0, 1] = z[0, 0] = z[0].max() + 1
    allowed[0, :2] = True
    stats = gap_stats(z, allowed)
    gammas = torch.tensor([0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0], dtype=torch.float64)
    beta = stats["lambda_n"].unsqueeze(-1) * gammas
    p = p_star_n(z.masked_fill(~allowed, -math.inf), beta)
    assert p[0].eq(0.5).all()
    p, beta, z, allowed = p[1:], beta[1:], z[1:], allowed[1:]
    stats = {k: v[1:] for k, v in stats.items()}
    for k in range(len(gammas)):
        direct = torch.softmax((beta[:, k : k + 1] * z).masked_fill(~allowed, -math.inf), -1).amax(-1)
        assert torch.allclose(p[:, k], direct, rtol=1e-12)
    assert (p.diff(dim=-1) > 0).all()
    log_n = allowed.sum(-1, keepdim=True).double().log()
    assert (p[:, gammas >= 1] >= (1 / (1 + log_n)) * (1 - 1e-12)).all()
    below = (
        -(
            stats["contact_entropy"].unsqueeze(-1)
            - gammas * stats["lambda_n"].unsqueeze(-1) * stats["contact_gap"].unsqueeze(-1)
        )
    ).exp()
    assert (p <= below * (1 + 1e-12)).all()


def _stats(z, mask=None, r="auto"):
    """The engine's gap statistics (through row_stats) of rows given as nested lists or a tensor."""
    z = torch.as_tensor(z, dtype=torch.float64)
    z = z if z.dim() == 2 else z.unsqueeze(0)
    return _columns(row_stats(z, None if mask is None else torch.as_tensor(mask), r=r))


def test_boundary_check_columns_follow_gamma():
    """App. D.1: p*_n(gamma Lambda_n) rises with gamma; on the equicorrelated row it is 1 / (1 + (n-1) n^-gamma)."""
    n, d = 256, 0.5
    row = torch.tensor([[1.0] + [1.0 - d] * (n - 1)], dtype=torch.float64)
    df = row_stats(row, gamma=(0.5, 1.0, 1.5))
    for gamma in (0.5, 1.0, 1.5):
        assert df[f"p_star_n_gamma{gamma:g}"].iloc[0] == pytest.approx(1 / (1 + (n - 1) * n**-gamma))


def _numpy_reference(row, r):
    """The same definitions with a full numpy sort of one row (no pruning), for rows too long to enumerate."""
    gaps = np.sort(row.max() - row)
    count = np.searchsorted(gaps, gaps, side="right")
    pos = gaps > 0
    lam = np.inf if count[0] >= 2 else max(np.max(np.log(count[pos]) / gaps[pos], initial=0.0), 0.0)
    res = np.log1p(np.log(row.size)) if r == "auto" else r
    above = pos & (np.log(count) > res)
    lam_r = np.max((np.log(count[above]) - res) / gaps[above]) if above.any() else 0.0
    lam_r = np.inf if np.log(count[0]) > res else lam_r
    contact = pos & (np.log(count) / np.where(pos, gaps, 1) >= (1 - EPS) * lam) if np.isfinite(lam) else pos & False
    delta = gaps[contact].max() if contact.any() else np.nan
    return lam, delta, lam_r


@pytest.mark.parametrize("n,scale,r", [(1024, 1.0, "auto"), (2048, 5.0, None), (4096, 0.2, 1.0), (1000, 1.0, "auto")])
def test_pruned_long_rows_match_full_sort(n, scale, r):
    """Rows of >= 512 keys take the pruned path (group-maxima bounds); it must agree with a full sort."""
    g = torch.Generator().manual_seed(n)
    z = torch.randn(12, n, generator=g, dtype=torch.float64) * scale
    z[0] = torch.round(z[0] * 4) / 4  # many equal gaps
    z[1, 7] = z[1].max()  # tied maximum
    z[2] = 0.0
    z[2, :40] = 1.0
    z[2, 0] = 1.5  # a plateau: Lambda_n comes from a large count
    z[3, 1] = -1e9  # an additive mask's outlier: every other gap in bin 0
    mask = torch.rand(12, n, generator=g) > 0.3
    mask[:, 0] = mask[1, 7] = mask[3, 1] = True
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
@given(
    st.integers(512, 700),
    st.integers(0, 2**31 - 1),
    st.sampled_from([2, 5, 50, 10**6]),
    st.sampled_from([None, "auto", 0.5]),
)
def test_binned_path_equals_full_sort_on_coarse_rows(n, seed, levels, r):
    """Few distinct score levels make long runs of equal gaps and bin-edge coincidences."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randint(0, levels, (4, n), generator=g).double() / levels * 3
    zm = torch.where(torch.rand(4, n, generator=g) > 0.2, z, -math.inf)
    nk = (zm > -math.inf).sum(-1)
    got = _gap_stats(zm, nk, r=r)
    gs = (zm.amax(-1, keepdim=True) - zm).sort(-1).values
    ref = _from_sorted(gs, counts(gs), nk, EPS, None if r is None else resolution(nk, r))
    for k, v in ref.items():
        assert torch.equal(got[k].isnan(), v.isnan()), k
        assert torch.equal(got[k].nan_to_num(), v.nan_to_num()), k


def test_row_stats_carries_gap_columns():
    z = torch.randn(3, 4, 20)
    df = row_stats(z)
    for k in ("lambda_n", "tie", "contact_gap", "contact_count", "alpha_n", "contact_entropy", "p_star_n"):
        assert k in df.columns
    assert "lambda_resolved" not in df.columns and "lambda_resolved" in row_stats(z, r="auto").columns
    ref = _stats(z.reshape(12, 20).double())
    assert np.allclose(df["lambda_n"].to_numpy(), ref["lambda_n"].numpy())


@pytest.mark.parametrize("n", [511, 512, 4096])
@pytest.mark.parametrize("fill,status", [(-math.inf, "empty"), (math.nan, "nan"), (math.inf, "inf")])
def test_a_block_of_only_unreadable_rows_gets_its_status_at_every_width(n, fill, status):
    """Padded query rows: a batch whose rows are all empty, NaN or +inf has nothing to bin, on either side of the
    dense/binned switch at 512 keys."""
    stats = row_stats(torch.full((3, n), fill), p=2)
    assert stats["status"].tolist() == [status] * 3 and stats["lambda_n"].isna().all()
