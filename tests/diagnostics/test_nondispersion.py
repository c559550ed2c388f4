"""Vasylenko et al. 2025's Lemma 2, Prop. 1 and Prop. 3 closed forms match the entmax package and hand-derived values, and theory_checks finds every check holding with attnlab's maps but not with wrong predictions."""

from __future__ import annotations

import math

import entmax
import pytest
import torch

from attnlab.diagnostics import nondispersion as nd
from attnlab.diagnostics import nondispersion_theory as theory

ALPHAS = (1.25, 1.5, 2.0, 3.0)


def _oracle(z: torch.Tensor, alpha: float) -> torch.Tensor:
    """The entmax package: exact sort-based maps at 1.5 and 2, bisection elsewhere; softmax at 1."""
    if alpha == 1:
        return torch.softmax(z, -1)
    if alpha == 2:
        return entmax.sparsemax(z, dim=-1)
    if alpha == 1.5:
        return entmax.entmax15(z, dim=-1)
    return entmax.entmax_bisect(z, alpha=alpha, n_iter=100)


def _atol(alpha: float) -> float:
    # Above alpha = 2 a weight is r^(1/(alpha-1)) with exponent < 1, whose slope is unbounded at the threshold:
    # the package's own float64 rounding moves near-threshold weights by ~1e-8 at n = 1000.
    return 1e-11 if alpha <= 2 else 1e-7


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("n,k", [(8, 1), (8, 3), (64, 1), (64, 7), (1000, 3)])
@pytest.mark.parametrize("factor", [0.5, 0.99, 1.0, 1.01, 3.0])
def test_two_level_weights_and_support_match_the_entmax_package(alpha, n, k, factor):
    delta = factor * nd.lemma2_gap(k, alpha)
    w = _oracle(nd.two_level_logits(n, k, delta), alpha)
    p_top, p_low = nd.two_level_weights(n, k, delta, alpha)
    assert torch.allclose(w[:k], torch.full((k,), p_top, dtype=torch.float64), rtol=0, atol=_atol(alpha))
    assert torch.allclose(w[k:], torch.full((n - k,), p_low, dtype=torch.float64), rtol=0, atol=_atol(alpha))
    if factor != 1.0:  # at the gap itself the low tokens sit exactly on the threshold: rounding decides
        assert int((w > 0).sum()) == nd.lemma2_support(n, k, delta, alpha) == (k if factor > 1 else n)
    if factor >= 1:
        assert (p_top, p_low) == (1 / k, 0.0)


@pytest.mark.parametrize("n,k,delta", [(16, 1, 0.3), (16, 4, 2.0), (65536, 4, 1.5)])
def test_softmax_two_level_weights_are_eq_34(n, k, delta):
    w = torch.softmax(nd.two_level_logits(n, k, delta), -1)
    p_top, p_low = nd.two_level_weights(n, k, delta, 1.0)
    assert math.isclose(p_top, float(w[0]), rel_tol=1e-12) and math.isclose(p_low, float(w[-1]), rel_tol=1e-12)


@pytest.mark.parametrize("n,k,delta", [(16, 1, 0.4), (100, 4, 0.1), (4096, 2, 0.05)])
def test_sparsemax_dense_regime_is_the_linear_solution(n, k, delta):
    """At alpha = 2 eq. 77-78 are linear: p_M - p_m = Delta, k p_M + (n-k) p_m = 1, so p_m = (1 - k Delta) / n."""
    p_top, p_low = nd.two_level_weights(n, k, delta, 2.0)
    assert math.isclose(p_low, (1 - k * delta) / n, rel_tol=1e-12)
    assert math.isclose(p_top, p_low + delta, rel_tol=1e-12)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("k", [1, 2, 5])
def test_threshold_solves_the_defining_equation_from_the_gap_on(alpha, k):
    """eq. 23: sum_i [(alpha-1) z_i - tau]_+^(1/(alpha-1)) = 1 at tau = eq. 29 exactly when Delta >= the gap;
    below it the low tokens would add mass, so eq. 29 is no longer the threshold."""
    n, top = 50, 0.7
    tau = nd.two_level_threshold(k, alpha, top)

    def mass(delta):
        z = nd.two_level_logits(n, k, delta, top)
        return float(((alpha - 1) * z - tau).clamp(min=0).pow(1 / (alpha - 1)).sum())

    gap = nd.lemma2_gap(k, alpha)
    assert math.isclose(mass(gap), 1.0, rel_tol=1e-12) and math.isclose(mass(4 * gap), 1.0, rel_tol=1e-12)
    assert mass(0.9 * gap) > 1 + 1e-6


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("factor", [0.3, 2.0])
def test_keys_appended_below_b_max_change_nothing_and_above_it_do(alpha, factor):
    """Lemma 1 / Prop. 1 (i) with the entmax package: b_max = tau / (alpha-1) separates the two cases."""
    n, k, extra = 12, 3, 500
    delta = factor * nd.lemma2_gap(k, alpha)
    z = nd.two_level_logits(n, k, delta)
    b_max = nd.lemma1_bmax(n, k, delta, alpha)
    base = _oracle(z, alpha)
    below = _oracle(torch.cat([z, torch.full((extra,), b_max - 1e-4, dtype=torch.float64)]), alpha)
    assert (below[n:] == 0).all() and float((below[:n] - base).abs().max()) <= _atol(alpha)
    # Just above, the new keys' weights are tiny for small alpha ((2.5e-4)^4 at 1.25) but never zero.
    above = _oracle(torch.cat([z, torch.full((extra,), b_max + 1e-3, dtype=torch.float64)]), alpha)
    assert (above[n:] > 0).all() and (above[:k] < base[:k]).all()


@pytest.mark.parametrize("n,k,c,theta", [(16, 4, 0.5, 1.0), (4096, 1, 0.9, 0.5), (65536, 8, 0.2, 2.0)])
def test_softmax_required_gap_gives_mass_c(n, k, c, theta):
    delta = nd.softmax_required_gap(n, k, c, theta)
    mass = float(torch.softmax(nd.two_level_logits(n, k, delta) / theta, -1)[:k].sum())
    assert math.isclose(mass, c, rel_tol=1e-12)
    assert nd.softmax_required_gap(4 * n, k, c, theta) > delta  # grows with n (as log n)


def test_bounded_logits_are_one_sequence_in_the_interval():
    long = nd.bounded_logits(5000, 3.0)
    assert torch.equal(nd.bounded_logits(37, 3.0), long[:37])
    assert float(long.min()) >= 0 and float(long.max()) < 3.0
    assert float(long.max() - long.min()) > 2.99  # fills the interval: the bounds' Delta is the real spread


@pytest.mark.parametrize("n", [16, 1024, 65536])
@pytest.mark.parametrize("theta", [0.5, 1.0, 3.0])
def test_softmax_weights_and_entropy_obey_eq_45_46(n, theta):
    w = torch.softmax(nd.bounded_logits(n, 4.0) / theta, -1)
    low, high = nd.softmax_weight_bounds(n, 4.0, theta)
    assert low <= float(w.min()) and float(w.max()) <= high
    entropy = float(-(w * w.log()).sum())
    assert nd.softmax_entropy_floor(n, 4.0, theta) <= entropy <= math.log(n)


def test_prop1_rows_show_softmax_dispersing_and_entmax_not():
    lengths = [16, 256, 4096, 65536]
    table = nd.prop1_rows(lengths, alphas=(1.5, 2.0), k=3)
    soft = table[table.logits == "bounded"].sort_values("n")
    assert (soft.support == soft.n).all()
    assert soft.entropy_norm.is_monotonic_increasing and soft.entropy_norm.iloc[-1] > 0.95
    fixed = table[table.logits == "two-level"]
    assert (fixed.support == 3).all() and fixed.max_weight.sub(1 / 3).abs().max() < 1e-12
    assert fixed.entropy.sub(math.log(3)).abs().max() < 1e-12
    grown = table[table.logits == "sublinear"]
    assert (grown.k == [math.floor(n**0.5) for n in grown.n]).all() and (grown.support == grown.k).all()
    assert (grown.entropy_norm <= 0.5 + 1e-12).all()


def _entmax_outputs(v: torch.Tensor, alpha: float) -> torch.Tensor:
    return _oracle(v @ v[-1], alpha) @ v


@pytest.mark.parametrize(
    "alpha,phi,b,d",
    [(1.0, 0.5, 0.0, 1), (2.0, 0.5, 0.0, 1), (1.5, 1.7, 0.2, 2), (3.0, 0.4, 0.1, 2), (1.25, 4.5, 1.0, 2)],
)
@pytest.mark.parametrize("n", [16, 300])
def test_prop3_gap_matches_the_entmax_package_and_eq_73(alpha, phi, b, d, n):
    v, v_star = nd.prop3_sequences(n, phi, b, d)
    assert v.shape == (n, d) and torch.equal(v_star[:n], v) and torch.equal(v_star[-1], v[-1])
    assert torch.allclose(v[:-1] @ v[-1], torch.full((n - 1,), b, dtype=torch.float64), atol=1e-15)
    assert math.isclose(float(v[-1] @ v[-1]), phi, rel_tol=1e-15)
    want = float((_entmax_outputs(v, alpha) - _entmax_outputs(v_star, alpha)).abs().sum())
    assert math.isclose(nd.prop3_gap(n, alpha, phi, b, d), want, rel_tol=0, abs_tol=_atol(alpha))
    assert math.isclose(nd.prop3_predicted_gap(n, alpha, phi, b, d), want, rel_tol=0, abs_tol=_atol(alpha))


def test_prop3_papers_example_tends_to_0354():
    """alpha = 2, phi = 0.5, b = 0, d = 1 (eq. 62-67): sparsemax gives p_n = 1/2 + 1/(2n) and the repeated
    sequence [1/2, 1/2], so the gap is (1/2 - 1/(2n)) sqrt(1/2) -> sqrt(1/2)/2 = 0.3536."""
    limit = nd.prop3_limit(2.0, 0.5, 0.0, 1)
    assert math.isclose(limit, math.sqrt(0.5) / 2, rel_tol=1e-15) and abs(limit - 0.354) < 5e-4
    for n in (16, 1024, 65536):
        assert math.isclose(nd.prop3_gap(n, 2.0, 0.5, 0.0, 1), (0.5 - 0.5 / n) * math.sqrt(0.5), rel_tol=1e-12)


def test_prop3_softmax_collapses_as_one_over_n():
    gaps = [nd.prop3_gap(n, 1.0, 0.5, 0.0, 1) for n in (16, 256, 4096, 65536)]
    assert all(a > b for a, b in zip(gaps, gaps[1:])) and gaps[-1] < 2e-5
    assert nd.prop3_limit(1.0, 0.5, 0.0, 1) == 0.0


@pytest.mark.parametrize("alpha", ALPHAS)
def test_prop3_limit_is_approached_from_below(alpha):
    low, high = nd.prop3_range(alpha)
    phi = (low + high) / 2
    limit = nd.prop3_limit(alpha, phi, 0.0, 2)
    gaps = [nd.prop3_predicted_gap(n, alpha, phi, 0.0, 2) for n in (16, 1024, 65536)]
    assert all(a < b for a, b in zip(gaps, gaps[1:])) and gaps[-1] < limit
    assert limit - gaps[-1] < limit - gaps[0]


def test_theory_checks_all_hold(kernel_path):
    table = nd.theory_checks()
    assert list(table.columns) == [
        "statement",
        "setting",
        "n",
        "alpha",
        "relation",
        "predicted",
        "measured",
        "error",
        "tolerance",
        "holds",
    ]
    assert table.holds.all(), table[~table.holds].to_string()
    statements = " ".join(table.statement.unique())
    for claim in ("Lemma 2 (i)", "Lemma 2 (ii)", "Prop. 1 (i)", "Prop. 1 (ii)", "Prop. 1 (iii)", "Prop. 3"):
        assert claim in statements
    example = table[table.statement.str.contains("0.354") & (table.setting.str.contains("d=1"))]
    assert len(example) == 1 and abs(example.measured.iloc[0] - 0.354) < 1e-3
    assert sorted(table.n.unique()) == [16, 256, 4096, 65536]


def test_theory_checks_fail_when_the_prediction_is_wrong(monkeypatch):
    """The checks measure: a gap 10% too small, or softmax passed off as entmax, makes rows fail."""
    true_gap = nd.lemma2_gap
    for module in (nd, theory):  # the checks' own use of the gap, and the predictions built on it
        monkeypatch.setattr(module, "lemma2_gap", lambda k, alpha: 0.9 * true_gap(k, alpha))
    failed = nd.theory_checks(lengths=[16, 64], alphas=[1.5]).query("not holds")
    assert failed.statement.str.startswith("Lemma 2 (i)").any()
    monkeypatch.undo()
    softmax = nd.rowmap_for(1.0)
    monkeypatch.setattr(nd, "rowmap_for", lambda alpha: softmax)
    failed = nd.theory_checks(lengths=[16, 64], alphas=[2.0]).query("not holds")
    assert failed.statement.str.startswith("Prop. 1 (iii)").any() and failed.statement.str.startswith("Prop. 3").any()


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: nd.two_level_logits(4, 4, 1.0), "k .top tokens. must be below n"),
        (lambda: nd.two_level_logits(8, 0, 1.0), "k must be an integer >= 1"),
        (lambda: nd.two_level_weights(8, 2, -1.0, 1.5), r"delta \(M - m\) must be a finite number > 0"),
        (lambda: nd.two_level_weights(8, 2, 1.0, 0.5), "alpha must be a finite number with alpha >= 1"),
        (lambda: nd.lemma2_gap(2, 1.0), "alpha > 1"),
        (lambda: nd.softmax_required_gap(8, 2, 1.0), r"c \(the mass on the top tokens\) must be in \(0, 1\)"),
        (lambda: nd.bounded_logits(8, 0.0), "spread must be a finite number > 0"),
        (lambda: nd.prop3_sequences(8, 0.5, 0.5), "b .* must be a finite number below phi"),
        (lambda: nd.prop3_sequences(8, 0.5, 0.0, d=3), "d must be 1 or 2"),
        (lambda: nd.prop3_limit(2.0, 1.5, 0.0), r"phi - b must lie in \[0.5, 1\)"),
        (lambda: nd.prop1_rows([16], k=16), "k must be below every length"),
        (lambda: nd.prop1_rows([16], beta=1.0), r"beta .* must be in \(0, 1\)"),
        (lambda: nd.theory_checks(lengths=[8]), "length must be an integer >= 16"),
        (lambda: nd.theory_checks(alphas=[]), "alphas must name at least one"),
        (lambda: nd.theory_checks(alphas=[1.0]), "alpha > 1"),
    ],
)
def test_bad_input_is_refused_with_what_is_allowed(call, match):
    with pytest.raises(ValueError, match=match):
        call()
