"""The upper-Q/K multiplier reaches exactly the upper half's W_Q and W_K (by name and by update), and the
learning rate follows warmup-then-cosine in closed form."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.model.config import ModelConfig
from attnlab.model.decoder import Decoder, loss
from attnlab.train.optim import cosine_lr, make_optimizer, param_groups, set_lr, upper_qk_names


def _model(layers=4, bias=True):
    torch.manual_seed(0)
    return Decoder(ModelConfig(vocab=13, context=16, layers=layers, heads=2, d_model=16, ffn_width=32, bias=bias))


def test_upper_qk_names_are_the_upper_half_query_and_key_projections():
    assert upper_qk_names(_model(4)) == [
        f"layers.{i}.attn.{p}.{w}" for i in (2, 3) for p in ("q_proj", "k_proj") for w in ("weight", "bias")
    ]
    assert upper_qk_names(_model(3, bias=False)) == [
        f"layers.{i}.attn.{p}.weight" for i in (1, 2) for p in ("q_proj", "k_proj")
    ]


def test_groups_cover_every_parameter_once_with_decay_on_matrices_only():
    model = _model()
    groups = param_groups(model, 0.1)
    seen = [id(p) for g in groups for p in g["params"]]
    assert sorted(seen) == sorted(id(p) for p in model.parameters()) and len(seen) == len(set(seen))
    for g in groups:
        assert g["weight_decay"] == (0.1 if g["name"] in ("decay", "upper_qk") else 0.0)
        assert all((p.dim() >= 2) == (g["weight_decay"] > 0) for p in g["params"])


def _one_step(multiplier):
    model = _model()
    opt = make_optimizer(model, 1e-2, 0.1, (0.9, 0.95))
    set_lr(opt, 1e-2, multiplier)
    ids = torch.randint(0, 13, (2, 16), generator=torch.Generator().manual_seed(1))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    loss(model(ids[:, :-1]), ids[:, 1:]).backward()
    opt.step()
    return {n: p.detach() - before[n] for n, p in model.named_parameters()}


def test_the_multiplier_scales_exactly_the_upper_qk_updates():
    plain, slowed = _one_step(1.0), _one_step(0.25)
    upper = set(upper_qk_names(_model()))
    for name in plain:
        if name in upper:
            torch.testing.assert_close(slowed[name], 0.25 * plain[name], rtol=1e-5, atol=1e-9)
            assert plain[name].abs().max() > 0
        else:
            assert torch.equal(slowed[name], plain[name]), name


def test_cosine_with_warmup_in_closed_form():
    kw = {"steps": 101, "lr": 1.0, "min_lr": 0.1, "warmup": 10}
    assert cosine_lr(0, **kw) == pytest.approx(0.1)
    assert cosine_lr(9, **kw) == pytest.approx(1.0)
    assert cosine_lr(10, **kw) == pytest.approx(1.0)
    assert cosine_lr(100, **kw) == pytest.approx(0.1)
    mid = 10 + 45
    assert cosine_lr(mid, **kw) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.5)))
    values = [cosine_lr(s, **kw) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(values, values[1:]))
