"""The fused site path equals the block-materializing one to float rounding for every map, mask, grouping and bias."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attnlab import rowmaps
from attnlab.model import positions as pe
from attnlab.site import Causal, LengthScale, Plan, Scores, Slopes, attend, key_span, position_bias

MAPS = ("entmax_a1.5", "entmax_a2", "entmax_a1.25", "relu_p2_b0", "relu_p4_b0", "relu_p4_b0.5", "sigmoid_b0")
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-6), torch.float64: dict(rtol=1e-10, atol=1e-12)}


def _qkv(b=2, h=4, hkv=2, q=75, k=75, d=8, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(*shape, generator=g, dtype=dtype) * 1.5 for shape in ((b, h, q, d), (b, hkv, k, d), (b, hkv, k, d))
    ]


def _scores(softcap=None, slopes=None, scale=None) -> Scores:
    return Scores(0.5, softcap=softcap, bias=None if slopes is None else Slopes(slopes), scale=scale)


def _both(q, k, v, plan: Plan, window=None, **scores):
    """(fused, unfused) outputs of one causal call."""
    fused = attend(q, k, v, _scores(**scores), Causal(window), plan)
    plain = attend(q, k, v, _scores(**scores), Causal(window), dataclasses.replace(plan, fused=False))
    return fused, plain


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", MAPS)
def test_every_map_equals_the_unfused_site_with_gqa_and_nape(name, dtype):
    q, k, v = _qkv(dtype=dtype)
    slopes = pe.nape_slopes(4, "inverse")
    plan = Plan(maps={h: rowmaps.get(name) for h in range(4)}, block=32)
    fused, plain = _both(q, k, v, plan, slopes=slopes)
    torch.testing.assert_close(fused, plain, **TOL[dtype])


@pytest.mark.parametrize("block", [32, 40, 512])
@pytest.mark.parametrize("shape", [(75, 75), (33, 100), (1, 70)])
def test_blocks_key_caches_windows_and_mixed_heads(block, shape):
    # lengths not divisible by the block, queries that sit after a key cache, one query, a sliding window
    n_q, n_k = shape
    q, k, v = _qkv(q=n_q, k=n_k, dtype=torch.float64)
    maps = {0: rowmaps.get("entmax_a1.5"), 2: rowmaps.get("relu_p4_b0"), 3: rowmaps.get("sigmoid_b0")}
    plan = Plan(maps=maps, block=block)
    for window in (None, 9):
        fused, plain = _both(q, k, v, plan, window=window, softcap=3.0, slopes=pe.alibi_slopes(4))
        torch.testing.assert_close(fused, plain, **TOL[torch.float64])


def test_row_scale_and_length_multiplier_as_in_the_unfused_site():
    q, k, v = _qkv(dtype=torch.float64)
    scale = torch.rand(4, 75, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 3 - 1
    plan = Plan(maps={h: rowmaps.get("entmax_a1.5") for h in range(4)}, length_scale=LengthScale(1.0, 8), block=32)
    fused, plain = _both(q, k, v, plan, scale=scale)
    torch.testing.assert_close(fused, plain, **TOL[torch.float64])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape, window", [((90, 90), None), ((33, 100), None), ((90, 90), 9)])
@pytest.mark.parametrize("kind", ["nape", "alibi", "nope"])
def test_softmax_with_a_position_bias_goes_through_sdpa_and_matches(dtype, shape, window, kind):
    q, k, v = _qkv(q=shape[0], k=shape[1], dtype=dtype)
    slopes = {"nape": pe.nape_slopes(4, "inverse"), "alibi": pe.alibi_slopes(4), "nope": torch.zeros(4)}[kind]
    fused, plain = _both(q, k, v, Plan(block=32), slopes=slopes, window=window)
    torch.testing.assert_close(fused, plain, **TOL[dtype])


def test_position_bias_equals_alibi_bias_on_any_key_span():
    slopes = pe.alibi_slopes(4)
    full = pe.alibi_bias(slopes, torch.arange(20, 30), torch.arange(40))
    assert torch.equal(position_bias(slopes, 40, 40, 20, 30, (0, 40), torch.float32), full)
    assert torch.equal(position_bias(slopes, 40, 40, 20, 30, (5, 30), torch.float32), full[..., 5:30])
    assert key_span(40, 40, 20, 30) == (0, 30) and key_span(40, 50, 20, 30, window=4) == (27, 40)


@pytest.mark.parametrize("name", ["entmax_a1.5", "relu_p4_b0", "sigmoid_b0", "softmax"])
@pytest.mark.parametrize("extras", ["scale", "slopes_scale_window", "softcap_scale"])
def test_gradients_through_the_fused_path_equal_the_unfused_ones(name, extras):
    # training takes the fused path too: every input's gradient, the row scale's included, as the unfused site's
    q, k, v = _qkv(q=70, k=70, dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    scale = (torch.rand(2, 4, 70, 1, generator=g, dtype=torch.float64) + 0.5).requires_grad_()
    kwargs = {"scale": scale}
    if "slopes" in extras:
        kwargs.update(slopes=pe.nape_slopes(4, "inverse").double(), window=20)
    if "softcap" in extras:
        kwargs.update(softcap=2.0)
    maps = {} if name == "softmax" else {h: rowmaps.get(name) for h in range(4)}
    plan = Plan(maps=maps or {0: rowmaps.get("softmax_t1")}, block=32)
    grads = []
    for fused in (True, False):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        scale.grad = None
        window = kwargs.get("window")
        scores = _scores(**{key: value for key, value in kwargs.items() if key != "window"})
        out = attend(*leaves, scores, Causal(window), dataclasses.replace(plan, fused=fused))
        out.backward(torch.cos(torch.arange(out.numel(), dtype=torch.float64)).view_as(out))
        grads.append([t.grad for t in leaves] + [scale.grad.clone()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


def plus_inf_row() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v of one query whose scores at scaling 1 are exactly [1, +inf, +inf, 0] (2^100 * 2^100 overflows
    float32, 2^-100 * 2^100 = 1), and v the identity, so that the output row is the weights themselves."""
    big = 2.0**100
    q = torch.tensor([big, 1 / big, 0.0, 0.0]).view(1, 1, 1, 4)
    k = torch.tensor([[0.0, big, 0, 0], [big, 0, 0, 0], [big, 0, 0, 0], [0, 0, 0, 0]]).view(1, 1, 4, 4)
    return q, k, torch.eye(4).view(1, 1, 4, 4)


# sigmoid_b0's bounded limit on [1, +inf, +inf, 0]: each +inf key weighs sigma(+inf) = 1 beside sigma(1) and sigma(0)
SIGMOID_AT_INF = [0.2263, 0.3095, 0.3095, 0.1547]


@pytest.mark.parametrize("name", MAPS)
@pytest.mark.parametrize("path", ["fused", "fused with autograd", "unfused"])
def test_plus_inf_scores_get_the_row_maps_limit_on_every_path(name, path):
    """The row map's own limit at +inf (rowmaps._rows.normalized_rows): sigmoid's bounded one, an even split over
    the +inf keys for the unbounded maps. The compiled kernel declines such a row (test_site_kernel)."""
    q, k, v = plus_inf_row()
    assert torch.equal(q @ k.transpose(2, 3), torch.tensor([1.0, torch.inf, torch.inf, 0.0]).view(1, 1, 1, 4))
    plan = Plan(maps={0: rowmaps.get(name)}, fused=path != "unfused", kernel="torch")
    with torch.set_grad_enabled(path == "fused with autograd"):
        out = attend(q.requires_grad_(path == "fused with autograd"), k, v, Scores(1.0), Causal(), plan)
    want = rowmaps.get(name)(torch.tensor([[1.0, torch.inf, torch.inf, 0.0]]))
    torch.testing.assert_close(out.detach().view(1, 4), want)
    if name == "sigmoid_b0":
        torch.testing.assert_close(out.detach().view(4), torch.tensor(SIGMOID_AT_INF), rtol=0, atol=1e-4)


def test_gradcheck_of_the_fused_path_in_float64():
    q, k, v = _qkv(b=1, h=2, hkv=1, q=9, k=9, d=3, dtype=torch.float64)
    scale = torch.rand(1, 2, 9, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) + 0.5
    plan = Plan(maps={0: rowmaps.get("entmax_a1.5"), 1: rowmaps.get("relu_p2_b0.3")}, block=32)
    fn = lambda q, k, v, s: attend(q, k, v, Scores(0.5, scale=s), Causal(), plan)  # noqa: E731
    assert torch.autograd.gradcheck(fn, [t.requires_grad_() for t in (q, k, v, scale)])


def test_observers_and_dropout_keep_the_unfused_path(monkeypatch):
    q, k, v = _qkv(q=40, k=40, dtype=torch.float64)
    plan = Plan(maps={0: rowmaps.get("entmax_a1.5")}, block=32)
    seen = []
    attend(q, k, v, Scores(0.5), Causal(), Plan(maps=plan.maps, observers=(seen.append,), block=32))
    assert [s.scores.shape[-1] for s in seen] == [40, 40]  # whole key rows: the unfused blocks
    weights = []
    attend(q, k, v, Scores(0.5), Causal(), Plan(maps=plan.maps, weight_observers=(weights.append,), block=32))
    assert [w.weights.shape[-1] for w in weights] == [40, 40]
    from attnlab.site import blockwise as site

    monkeypatch.setattr(site, "_attend_fused", None)  # any call would fail
    attend(q, k, v, Scores(0.5), Causal(), dataclasses.replace(plan, dropout=0.5))


def test_slopes_must_be_one_per_head_and_the_plan_and_mask_valid():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="slopes must be one per head"):
        attend(q, k, v, _scores(slopes=torch.zeros(3)), Causal())
    with pytest.raises(ValueError, match="fused must be"):
        Plan(fused=1)
    with pytest.raises(ValueError, match="dropout must be a probability"):
        Plan(dropout=1.0)
    with pytest.raises(ValueError, match="window must be an int >= 1"):
        Causal(0)
    with pytest.raises(TypeError, match="mask must be Causal"):
        attend(q, k, v, Scores(1.0), "causal")


def test_the_fused_path_serves_row_maps_and_biased_softmax_but_not_plain_softmax(monkeypatch):
    from attnlab.site import blockwise as site

    calls = []
    real = site._attend_fused
    monkeypatch.setattr(site, "_attend_fused", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    q, k, v = _qkv(q=40, k=40)
    attend(q, k, v, Scores(0.5), Causal(), Plan(maps={1: rowmaps.get("relu_p4_b0")}))
    attend(q, k, v, _scores(slopes=pe.nape_slopes(4, "inverse")), Causal())
    assert len(calls) == 2
    attend(q, k, v, Scores(0.5), Causal())  # eager's exact arithmetic, kept bit-identical
    attend(q, k, v, Scores(0.5), Causal(), Plan(maps={1: rowmaps.get("relu_p4_b0")}, fused=False))
    attend(q, k, v, Scores(0.5), torch.ones(1, 1, 40, 40, dtype=torch.bool), Plan(maps={1: rowmaps.get("relu_p4_b0")}))
    assert len(calls) == 2


def test_a_bias_callable_keeps_the_unfused_path(monkeypatch):
    from attnlab.site import blockwise as site

    monkeypatch.setattr(site, "_attend_fused", None)  # any call would fail
    q, k, v = _qkv(q=40, k=40)
    attend(
        q,
        k,
        v,
        Scores(0.5, bias=lambda start, stop: torch.zeros(4, stop - start, 40)),
        Causal(),
        Plan(maps={1: rowmaps.get("relu_p4_b0")}),
    )
