"""The attention site equals a per-row brute-force loop for every option, and blocks never change results."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab import rowmaps
from attnlab.site import Causal, LengthScale, Plan, Scores, attend, query_blocks


def _qkv(b=2, h=4, hkv=2, q=70, k=70, d=8, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g, dtype=dtype) for shape in ((b, h, q, d), (b, hkv, k, d), (b, hkv, k, d))]


def _reference(query, key, value, *, scaling, allowed, softcap=None, maps=None, length=None, bias=None, scale=None):
    """One row at a time, straight from the definitions."""
    b, h, q, _ = query.shape
    groups = h // key.shape[1]
    out = torch.zeros(b, q, h, value.shape[-1], dtype=query.dtype)
    for bi in range(b):
        for hi in range(h):
            for qi in range(q):
                z = (key[bi, hi // groups] @ query[bi, hi, qi]) * scaling
                if softcap is not None:
                    z = softcap * torch.tanh(z / softcap)
                if bias is not None:
                    z = z + bias[hi, qi]
                ok = allowed[bi, hi, qi]
                if scale is not None:
                    z = z * scale[hi, qi]
                if length is not None:
                    n = int(ok.sum())
                    z = z * max(1.0, math.log(n) / math.log(length[1])) ** length[0]
                rowmap = (maps or {}).get(hi)
                if rowmap is None:
                    w = torch.zeros_like(z)
                    w[ok] = torch.softmax(z[ok], 0)
                else:
                    w = rowmap(z, ok)
                out[bi, qi, hi] = w @ value[bi, hi // groups]
    return out


def _causal(q, k, window=None):
    pos = torch.arange(q)[:, None] + (k - q)
    keys = torch.arange(k)[None]
    ok = keys <= pos
    if window:
        ok &= keys > pos - window
    return ok


@pytest.mark.parametrize("block", [32, 50, 512])
def test_matches_reference_with_gqa_softcap_maps_and_length_scale(block):
    q, k, v = _qkv()
    maps = {1: rowmaps.get("relu_p4_b0.5"), 3: rowmaps.get("entmax_a1.5")}
    ok = _causal(70, 70).expand(2, 4, 70, 70)
    plan = Plan(maps=maps, length_scale=LengthScale(1.5, 8), block=block)
    out = attend(q, k, v, Scores(0.3, softcap=2.0), Causal(), plan)
    ref = _reference(q, k, v, scaling=0.3, allowed=ok, softcap=2.0, maps=maps, length=(1.5, 8))
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


def test_additive_and_boolean_masks_agree_with_reference_and_window():
    q, k, v = _qkv(q=40, k=60)
    ok = _causal(40, 60, window=9).expand(2, 4, 40, 60)
    additive = torch.zeros(2, 1, 40, 60, dtype=torch.float64).masked_fill(~ok[:, :1], torch.finfo(torch.float64).min)
    ref = _reference(q, k, v, scaling=0.5, allowed=ok)
    for mask in (additive, ok[:, :1], Causal(window=9)):
        out = attend(q, k, v, Scores(0.5), mask, Plan(block=32))
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


def test_blockwise_bias_and_row_scale_of_either_sign_match_the_reference():
    q, k, v = _qkv(q=70, k=70)
    g = torch.Generator().manual_seed(1)
    bias = torch.randn(4, 70, 70, generator=g, dtype=torch.float64)
    scale = torch.rand(4, 70, 1, generator=g, dtype=torch.float64) * 3 - 1  # negative rows too
    calls = []

    def block_bias(start, stop):
        calls.append((start, stop))
        return bias[:, start:stop]

    maps = {2: rowmaps.get("relu_p2_b0")}
    out = attend(q, k, v, Scores(0.4, bias=block_bias, scale=scale), Causal(), Plan(maps=maps, block=32))
    ref = _reference(
        q, k, v, scaling=0.4, allowed=_causal(70, 70).expand(2, 4, 70, 70), maps=maps, bias=bias, scale=scale[..., 0]
    )
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    assert calls == query_blocks(70, 32)


@pytest.mark.parametrize("names", [("entmax_a1.5",) * 4, ("softmax", "entmax_a1.5", "sparsemax", "relu_p2_b0")])
def test_a_learnable_row_scale_gets_finite_gradients_under_every_map_and_the_reference_s(names):
    # masked keys held -inf before the scale multiplied them, and d(z * scale)/d scale = z made the
    # scale's gradient NaN (ASEntmax trained to NaN in two steps)
    q, k, v = _qkv(q=40, k=40)
    maps = {h: rowmaps.get(name) for h, name in enumerate(names)}
    scale = (torch.rand(4, 40, 1, dtype=torch.float64) + 0.5).requires_grad_()
    out = attend(q, k, v, Scores(0.4, scale=scale), Causal(), Plan(maps=maps))
    out.square().sum().backward()
    assert torch.isfinite(scale.grad).all()
    reference = scale.detach().clone().requires_grad_()
    _reference(
        q, k, v, scaling=0.4, allowed=_causal(40, 40).expand(2, 4, 40, 40), maps=maps, scale=reference[..., 0]
    ).square().sum().backward()
    torch.testing.assert_close(scale.grad, reference.grad, rtol=1e-7, atol=1e-9)


def test_observers_see_every_row_once_with_positions():
    q, k, v = _qkv(q=100, k=130)
    seen = []
    plan = Plan(observers=(seen.append,), block=32, layer=5)
    attend(q, k, v, Scores(1.0), Causal(), plan)
    assert [(s.query_start, s.scores.shape[2]) for s in seen] == [(0, 25), (25, 25), (50, 25), (75, 25)]
    assert all(s.layer == 5 and s.n_keys == 130 for s in seen)
    assert seen[1].first_position == 130 - 100 + 25
    z = torch.cat([s.scores for s in seen], 2)
    hand = torch.matmul(q, k.repeat_interleave(2, 1).transpose(2, 3))
    ok = _causal(100, 130)
    torch.testing.assert_close(z[..., ok], hand[..., ok])
    assert torch.equal(torch.cat([s.allowed.expand_as(s.scores) for s in seen], 2)[0, 0], ok)


def test_query_blocks_cover_evenly():
    for n in [1, 31, 32, 33, 512, 513, 1000, 4097]:
        for block in [32, 100, 512]:
            bounds = query_blocks(n, block)
            sizes = [b - a for a, b in bounds]
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            assert all(bounds[i][1] == bounds[i + 1][0] for i in range(len(bounds) - 1))
            assert max(sizes) <= block and max(sizes) - min(sizes) <= 1


def test_gradients_flow_through_substituted_heads():
    q, k, v = (t.requires_grad_() for t in _qkv(q=20, k=20))
    plan = Plan(maps={0: rowmaps.get("sigmoid_b0")}, block=32)
    attend(q, k, v, Scores(1.0), Causal(), plan).sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_bad_input_errors():
    q, k, v = _qkv(h=3, hkv=2)
    with pytest.raises(ValueError, match="must be a multiple of key/value heads"):
        attend(q, k, v, Scores(1.0))
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="heads \\[7\\] out of range"):
        attend(q, k, v, Scores(1.0), plan=Plan(maps={7: rowmaps.get("sigmoid_b0")}))
    with pytest.raises(ValueError, match="query block must be"):
        Plan(block=4)
    with pytest.raises(ValueError, match="b=auto"):
        Plan(maps={0: rowmaps.get("relu_p2_bauto")})
    with pytest.raises(ValueError, match="n_train"):
        LengthScale(1.0, 1)


def test_the_site_takes_its_options_as_three_small_objects():
    """Masks and biases are objects (Causal, a mask tensor; Slopes, a block function inside Scores), not a long
    parameter list: attend takes the three tensors, Scores, the mask and the Plan."""
    import inspect

    assert list(inspect.signature(attend).parameters) == ["query", "key", "value", "scores", "mask", "plan"]
