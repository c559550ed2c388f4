"""The compiled fused attention kernel serves float32 causal attention with one row map and equals the unfused site."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attnlab import rowmaps
from attnlab.model import positions as pe
from attnlab.site import Causal, LengthScale, Plan, Scores, Slopes, attend
from attnlab.site import cpu_kernel as site_kernel

pytestmark = pytest.mark.skipif(site_kernel.get() is None, reason="no C compiler: the site's torch path serves")

MAPS = (
    "entmax_a1.5",
    "entmax_a2",
    "entmax_a1.25",
    "sparsemax",
    "relu_p1_b0",
    "relu_p4_b0",
    "relu_p16_b0.5",
    "sigmoid_b0",
    "sigmoid_b-2",
)


@pytest.fixture
def served(monkeypatch):
    """The kernel's answers (True: it wrote the output) during a test."""
    answers = []
    real = site_kernel.forward
    monkeypatch.setattr(site_kernel, "forward", lambda *a, **kw: answers.append(real(*a, **kw)) or answers[-1])
    return answers


def _qkv(b=2, h=4, hkv=2, q=75, k=75, d=32, seed=0, spread=1.5):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g) * spread for shape in ((b, h, q, d), (b, hkv, k, d), (b, hkv, k, d))]


def _both(q, k, v, plan: Plan, window=None, slopes=None, scale=None):
    scores = Scores(0.4, bias=None if slopes is None else Slopes(slopes), scale=scale)
    fused = attend(q, k, v, scores, Causal(window), plan)
    plain = attend(q, k, v, scores, Causal(window), dataclasses.replace(plan, fused=False))
    return fused, plain


def _everywhere(name):
    return Plan(maps={h: rowmaps.get(name) for h in range(4)}, block=32)


@pytest.mark.parametrize("name", MAPS)
@pytest.mark.parametrize("d", [8, 32, 64, 20])
def test_every_map_and_head_width_equals_the_unfused_site(name, d, served):
    q, k, v = _qkv(d=d)
    fused, plain = _both(q, k, v, _everywhere(name), slopes=pe.nape_slopes(4, "inverse"))
    assert served == [True]
    torch.testing.assert_close(fused, plain, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize(
    "shape, window",
    [((75, 75), None), ((75, 75), 7), ((33, 100), None), ((33, 100), 20), ((1, 70), None), ((130, 130), 64)],
)
def test_key_caches_windows_row_scales_and_length_multiplier(shape, window, served):
    q, k, v = _qkv(q=shape[0], k=shape[1])
    scale = torch.rand(1, 4, shape[0], 1, generator=torch.Generator().manual_seed(1)) * 3 - 1  # some negative
    plan = dataclasses.replace(_everywhere("entmax_a1.5"), length_scale=LengthScale(0.7, 8))
    fused, plain = _both(q, k, v, plan, window=window, slopes=pe.alibi_slopes(4), scale=scale)
    assert served == [True]
    torch.testing.assert_close(fused, plain, rtol=1e-4, atol=2e-5)


def test_the_output_is_a_weighted_mean_of_values_by_a_brute_force_loop():
    # independent of the site: one (batch, head) by a loop over queries with the row map itself
    q, k, v = _qkv(b=1, h=2, hkv=2, q=40, k=40, d=32)
    out = attend(
        q, k, v, Scores(0.4), Causal(), Plan(maps={0: rowmaps.get("entmax_a1.5"), 1: rowmaps.get("entmax_a1.5")})
    )
    entmax = rowmaps.get("entmax_a1.5")
    for h in range(2):
        for i in range(40):
            w = entmax((q[0, h, i] @ k[0, h, : i + 1].T * 0.4).double())
            torch.testing.assert_close(out[0, i, h].double(), w @ v[0, h, : i + 1].double(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "name, weights",
    [
        ("sigmoid_b0", [0.2263, 0.3095, 0.3095, 0.1547]),  # bounded: each +inf key weighs sigma(+inf) = 1
        ("sigmoid_b1", [0.2439, 0.2769, 0.2769, 0.2024]),
        ("relu_p4_b0", [0.0, 0.5, 0.5, 0.0]),  # unbounded: the +inf keys share the row
        ("entmax_a1.5", [0.0, 0.5, 0.5, 0.0]),
    ],
)
def test_a_row_with_plus_inf_scores_is_declined_and_gets_the_maps_limit(name, weights, served):
    # scores [1, +inf, +inf, 0] from finite q and k (2^100 * 2^100 overflows float32); v = I: the output is the weights
    big = 2.0**100
    q = torch.tensor([big, 1 / big, 0.0, 0.0]).view(1, 1, 1, 4)
    k = torch.tensor([[0.0, big, 0, 0], [big, 0, 0, 0], [big, 0, 0, 0], [0, 0, 0, 0]]).view(1, 1, 4, 4)
    out = attend(q, k, torch.eye(4).view(1, 1, 4, 4), Scores(1.0), Causal(), Plan(maps={0: rowmaps.get(name)}))
    assert served == [False]
    torch.testing.assert_close(out.view(4), torch.tensor(weights), rtol=0, atol=1e-4)


def test_what_the_kernel_leaves_to_the_torch_path(served):
    q, k, v = _qkv()
    # mixed maps, float64, a softcap, a dead-row rule other than zeros: not offered or declined
    attend(q, k, v, Scores(0.4), Causal(), Plan(maps={0: rowmaps.get("entmax_a1.5")}))
    attend(*(t.double() for t in (q, k, v)), Scores(0.4), Causal(), _everywhere("entmax_a1.5"))
    attend(q, k, v, Scores(0.4, softcap=5.0), Causal(), _everywhere("entmax_a1.5"))
    dead = Plan(maps={h: rowmaps.get("relu_p4_b0", dead="uniform") for h in range(4)})
    attend(q, k, v, Scores(0.4), Causal(), dead)
    assert served == [False, False]  # the first and third never reach the kernel
    # non-finite input and a sigmoid whose sigma underflows: declined, and the torch path gives the answer
    served.clear()
    bad = q.clone()
    bad[0, 1, 5, 3] = float("nan")
    fused, plain = _both(bad, k, v, _everywhere("relu_p4_b0"))
    torch.testing.assert_close(fused, plain, equal_nan=True)
    fused, plain = _both(q, k, v, _everywhere("sigmoid_b-100"))
    torch.testing.assert_close(fused, plain, rtol=1e-4, atol=2e-5)
    assert served == [False, False]
