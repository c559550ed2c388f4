"""The concentration functions on their own equal longhand per-row formulas: margins, status, ratios and A_act,
S_p (repeated squaring agrees with pow), p* and its edge cases, and S_sigma where sigma underflows."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.diagnostics import concentration as conc
from diagnostics.row_refs import concentration_row

DEGREES = (1, 2, 3, 4, 8, 16, 2.5)


def _rows(seed, rows=30, n=12):
    """Score rows with -inf at masked keys, a random allowed target per row, and exact ties among them."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, n, generator=g, dtype=torch.float64) * 2
    z[::5, 2] = z[::5, 4]
    z[1] = torch.tensor([0.5] + [-1.0] * (n - 1), dtype=torch.float64)  # one distractor-free key above 0
    allowed = torch.rand(rows, n, generator=g) > 0.3
    allowed[:, 0] = True
    allowed[2] = False
    allowed[2, 5] = True  # a single allowed key
    zm = torch.where(allowed, z, -math.inf)
    target = torch.stack([a.nonzero().flatten()[torch.randint(int(a.sum()), (1,), generator=g)] for a in allowed])
    return zm, target.squeeze(-1), allowed


@pytest.mark.parametrize("b,tau", [(0.0, None), (0.8, None), (-0.6, None), (0.4, 1.5)])
@pytest.mark.parametrize("argmax", [True, False], ids=["argmax", "answer-key"])
def test_each_function_matches_the_longhand_row(b, tau, argmax):
    zm, target, allowed = _rows(7)
    if argmax:
        target = zm.argmax(-1)
    m = conc.margins(zm, target, b)
    ratio, a_act = conc.ratios(zm, target, b, tau)
    s = conc.s_p(ratio, DEGREES)
    p_star = conc.p_star(a_act, m["rho"], m["target_is_max"])
    status = conc.status(m["u_star"], tau)
    for i in range(zm.shape[0]):
        ref = concentration_row(zm[i].tolist(), allowed[i].tolist(), b=b, tau=tau, target=int(target[i]), ps=DEGREES)
        assert conc.STATUS[int(status[i])] == ref["status"], i
        assert int(a_act[i]) == ref["a_act"], i
        assert bool(m["target_is_max"][i]) == ref["target_is_max"], i
        for key in ("delta", "u_star", "rho"):
            assert _same(float(m[key][i]), ref[key]), (i, key)
        for p in DEGREES:
            assert _same(float(s[p][i]), ref[f"s_p{p:g}"], rel=1e-12), (i, p)
        assert _same(float(p_star[i]), ref["p_star"], rel=1e-12), i


def _same(got, want, rel=1e-15):
    if math.isnan(want):
        return math.isnan(got)
    if math.isinf(want):
        return got == want
    return math.isclose(got, want, rel_tol=rel, abs_tol=1e-300)


def test_margins_take_a_given_runner_up_and_ratios_are_zero_off_the_distractors():
    zm, target, allowed = _rows(8)
    rest = torch.tensor(
        [max((zm[i, j] for j in range(zm.shape[1]) if j != target[i]), default=-math.inf) for i in range(zm.shape[0])],
        dtype=torch.float64,
    )
    given, computed = conc.margins(zm, target, 0.3, rest_max=rest), conc.margins(zm, target, 0.3)
    for key in ("delta", "u_star", "rho", "target_is_max"):
        assert torch.equal(given[key].nan_to_num(), computed[key].nan_to_num()), key
    assert computed["delta"][2] == math.inf, "a single allowed key has no distractor"
    ratio, _ = conc.ratios(zm, target, 0.3, None)
    live = ~ratio.isnan().all(-1)
    assert (ratio[live].gather(-1, target[live].unsqueeze(-1)) == 0).all()
    assert (ratio[live][~allowed[live]] == 0).all()


@pytest.mark.parametrize("p", [3, 5, 12, 33, 1000, 2**20 + 1, 0.5, 2.5, 7.25])
def test_s_p_by_squaring_equals_pow(p):
    g = torch.Generator().manual_seed(int(p * 4) % 1000)
    ratio = torch.rand(50, 40, generator=g, dtype=torch.float64) ** 0.01  # near 1: high powers stay visible
    ratio[:, :5] = 0.0
    want = ratio.pow(p).sum(-1)
    got = conc.s_p(ratio, [p])[p]
    # each squaring doubles the relative rounding error of its input: about p ulps after log2(p) of them
    assert torch.allclose(got, want, rtol=max(1e-13, 4 * p * torch.finfo(torch.float64).eps), atol=1e-300)


def test_s_p_is_an_exact_count_on_tied_distractors():
    ratio = torch.tensor([[1.0, 1.0, 0.0, 1.0], [1.0, 0.5, 0.0, 0.0]], dtype=torch.float64)
    s = conc.s_p(ratio, (2, 4, 8, 16, 2**20))
    assert all(s[p].tolist() == [3.0, 1.0 + 0.5**p] for p in (2, 4, 8, 16))
    assert s[2**20].tolist() == [3.0, 1.0]


def test_status_codes_follow_the_cap():
    u = torch.tensor([-1.0, 0.0, 0.5, 2.0, 3.0], dtype=torch.float64)
    assert [conc.STATUS[int(c)] for c in conc.status(u, 2.0)] == ["dead", "dead", "active", "saturated", "saturated"]
    assert [conc.STATUS[int(c)] for c in conc.status(u, None)] == ["dead", "dead", "active", "active", "active"]


@pytest.mark.parametrize(
    "a,rho,is_max,want",
    [
        (0, 0.5, True, 0.0),
        (1, 0.0, True, 0.0),  # nothing can outweigh the target
        (2, 0.0, True, math.inf),  # a tied distractor: no degree suffices
        (2, -0.0, True, math.inf),  # a tie row such as [-0., 0., 0.]: once -inf, which counted S_1 = 2 as covered
        (5, 0.999, True, math.log(5) / math.log(100)),  # rho clipped at 0.99
        (3, -0.2, False, math.inf),  # an answer key below the argmax
        (4, math.nan, True, math.nan),  # a dead row
        (10, 0.5, True, math.log(10) / math.log(2)),
    ],
)
def test_p_star_edge_cases(a, rho, is_max, want):
    got = conc.p_star(torch.tensor([a]), torch.tensor([rho], dtype=torch.float64), torch.tensor([is_max]))
    assert _same(float(got[0]), want, rel=1e-14)


def _log_sigmoid(x):
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


@pytest.mark.parametrize("shift", [0.0, -50.0, -800.0, 900.0])
def test_s_sigmoid_is_the_ratio_of_sigmoids_even_where_they_underflow(shift):
    z = (
        torch.tensor([[1.0, 0.5, -2.0, 3.0, -math.inf], [0.0, 0.0, -1.0, -math.inf, -math.inf]], dtype=torch.float64)
        + shift
    )
    target = torch.tensor([3, 0])
    for b in (0.0, 1.5):
        got = conc.s_sigmoid(z, target, b)
        for i in range(2):
            star = _log_sigmoid(float(z[i, target[i]]) + b)
            want = sum(
                math.exp(_log_sigmoid(float(v) + b) - star)
                for j, v in enumerate(z[i].tolist())
                if j != target[i] and v > -math.inf
            )
            assert math.isfinite(float(got[i]))
            assert float(got[i]) == pytest.approx(want, rel=1e-12)
