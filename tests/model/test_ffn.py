"""Matched gated FFNs cost what the GELU block costs (Zhu et al. 2026 §4); FFNs and norms equal their formulas."""

from __future__ import annotations

import math
import re

import pytest
import torch

from attnlab.model.ffn import GatedFFN, GeluFFN, make_ffn, make_norm, matched_width


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _x(d: int) -> torch.Tensor:
    return torch.randn(2, 5, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


# (d_model, GELU width, gated width, GELU params, gated params), by hand:
# no bias 2dh vs 3dr; with bias + h + d vs + 2r + d, so gated has 2r - h = h/3 more
@pytest.mark.parametrize(
    "d, h, r, gelu_biased, gated_biased",
    [
        (960, 3840, 2560, 7_372_800 + 3840 + 960, 7_372_800 + 5120 + 960),  # seed 002's 270M block
        (8, 24, 16, 384 + 24 + 8, 384 + 32 + 8),
    ],
)
@pytest.mark.parametrize("kind", ["swiglu", "geglu"])
def test_matched_gated_ffn_has_the_gelu_parameter_count(kind, d, h, r, gelu_biased, gated_biased):
    gated = make_ffn(kind, d, h, bias=False)
    assert (gated.gate.out_features, gated.up.out_features, gated.down.in_features) == (r, r, r)
    assert _count(gated) == _count(make_ffn("gelu", d, h, bias=False)) == 2 * d * h
    gelu_b, gated_b = _count(make_ffn("gelu", d, h, bias=True)), _count(make_ffn(kind, d, h, bias=True))
    assert (gelu_b, gated_b) == (gelu_biased, gated_biased)
    assert gated_b - gelu_b == h // 3


def test_unmatched_width_is_the_hidden_width():
    assert make_ffn("swiglu", 8, 24, bias=False, matched=False).width == 24
    assert make_ffn("gelu", 8, 24, bias=False).width == 24


@pytest.mark.parametrize(
    "h, kind, multiple_of, expected",
    [
        (3840, "swiglu", 1, 2560),
        (24, "geglu", 1, 16),
        (25, "swiglu", 1, 17),  # 16.67
        (26, "swiglu", 1, 17),  # 17.33
        (1, "swiglu", 1, 1),  # 0.67
        (3840, "swiglu", 256, 2560),
        (1000, "geglu", 64, 640),  # 666.7 = 10.42 * 64
        (9, "swiglu", 4, 8),  # 6 = 1.5 * 4: the tie rounds up
        (10, "swiglu", 64, 64),  # 6.67 would round to 0: at least one multiple
        (3841, "gelu", 256, 3841),  # the GELU width is the reference
    ],
)
def test_matched_width_rounds_to_the_nearest_multiple(h, kind, multiple_of, expected):
    assert matched_width(h, kind, multiple_of=multiple_of) == expected


def _gelu(z):
    return 0.5 * z * (1 + torch.erf(z / math.sqrt(2)))  # exact erf GELU, not the tanh approximation


def _linear(layer, z):
    return z @ layer.weight.T + (0 if layer.bias is None else layer.bias)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("kind", ["gelu", "swiglu", "geglu"])
def test_ffn_equals_its_definition(kind, bias):
    torch.manual_seed(0)
    ffn = make_ffn(kind, 6, 12, bias=bias).double()
    layers = ["up", "down"] if kind == "gelu" else ["gate", "up", "down"]
    assert {name for name, _ in ffn.named_parameters()} == {
        f"{layer}.{p}" for layer in layers for p in (["weight", "bias"] if bias else ["weight"])
    }
    x = _x(6)
    if kind == "gelu":
        hidden = _gelu(_linear(ffn.up, x))
    else:
        g = _linear(ffn.gate, x)
        hidden = (g * torch.sigmoid(g) if kind == "swiglu" else _gelu(g)) * _linear(ffn.up, x)
    torch.testing.assert_close(ffn(x), _linear(ffn.down, hidden), rtol=1e-12, atol=1e-12)


def test_rmsnorm_equals_its_definition():
    norm = make_norm("rmsnorm", 6, bias=True, eps=0.1).double()  # RMSNorm has no bias to give
    assert [name for name, _ in norm.named_parameters()] == ["weight"]
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(-2, 3, 6, dtype=torch.float64))
    x = _x(6)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 0.1) * norm.weight
    torch.testing.assert_close(norm(x), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bias", [False, True])
def test_layernorm_bias_follows_the_flag(bias):
    norm = make_norm("layernorm", 6, bias=bias, eps=0.1).double()
    assert [name for name, _ in norm.named_parameters()] == (["weight", "bias"] if bias else ["weight"])
    with torch.no_grad():
        for p in norm.parameters():
            p.copy_(torch.linspace(-2, 3, 6, dtype=torch.float64))
    x = _x(6)
    centred = x - x.mean(-1, keepdim=True)
    expected = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + 0.1) * norm.weight
    if bias:
        expected = expected + norm.bias
    torch.testing.assert_close(norm(x), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: make_ffn("relu", 8, 24, bias=False), "kind must be one of 'gelu', 'swiglu', 'geglu', got 'relu'"),
        (lambda: make_ffn("gelu", 0, 24, bias=False), "d_model must be an int >= 1, got 0"),
        (lambda: make_ffn("swiglu", 8, 2.5, bias=False), "gelu_width must be an int >= 1, got 2.5"),
        (lambda: make_ffn("swiglu", 8, 2.5, bias=False, matched=False), "width must be an int >= 1, got 2.5"),
        (lambda: make_ffn("gelu", 8, True, bias=False), "width must be an int >= 1, got True"),
        (lambda: make_ffn("gelu", 8, 24, bias=1), "bias must be a bool, got 1"),
        (lambda: make_ffn("geglu", 8, 24, bias=False, matched="yes"), "matched must be a bool, got 'yes'"),
        (lambda: GatedFFN("gelu", 8, 16, bias=False), "kind must be one of 'swiglu', 'geglu', got 'gelu'"),
        (lambda: GeluFFN(8, -1, bias=False), "width must be an int >= 1, got -1"),
        (lambda: matched_width(-3, "gelu"), "gelu_width must be an int >= 1, got -3"),
        (lambda: matched_width(24, "swiglu", multiple_of=0), "multiple_of must be an int >= 1, got 0"),
        (
            lambda: make_norm("batchnorm", 8, bias=False, eps=1e-5),
            "kind must be one of 'layernorm', 'rmsnorm', got 'batchnorm'",
        ),
        (lambda: make_norm("rmsnorm", 8, bias=None, eps=1e-5), "bias must be a bool, got None"),
        (lambda: make_norm("rmsnorm", 8, bias=False, eps=0), "eps must be a finite number > 0, got 0"),
        (lambda: make_norm("layernorm", 8, bias=False, eps=float("nan")), "eps must be a finite number > 0, got nan"),
        (lambda: make_norm("layernorm", 8, bias=False, eps=True), "eps must be a finite number > 0, got True"),
    ],
)
def test_bad_arguments_name_themselves(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_user_ffn_registers_and_the_config_accepts_it():
    from attnlab.model.config import ModelConfig
    from attnlab.model.decoder import Decoder
    from attnlab.model.ffn import FFNS

    @FFNS.register("identity_test")
    def _identity(d_model, width, *, bias, matched):
        return torch.nn.Identity()

    try:
        model = Decoder(ModelConfig(vocab=11, context=8, layers=1, heads=2, d_model=8, ffn="identity_test"))
        assert isinstance(model.layers[0].ffn, torch.nn.Identity)
        assert isinstance(make_ffn("identity_test", 8, 32, bias=False), torch.nn.Identity)
    finally:
        FFNS.unregister("identity_test")
    with pytest.raises(ValueError, match="kind must be one of 'gelu', 'swiglu', 'geglu', got 'identity_test'"):
        make_ffn("identity_test", 8, 32, bias=False)


def _gaussian_mean(f, nu: float, points: int = 80) -> float:
    """E f(G) for G ~ N(0, nu), by Gauss-Hermite quadrature (an independent closed form, no sampling)."""
    import numpy as np

    x, w = np.polynomial.hermite_e.hermegauss(points)
    values = f(torch.as_tensor(x * math.sqrt(nu), dtype=torch.float64)).numpy()
    return float((w * values).sum() / w.sum())


@pytest.mark.parametrize("kind, paper", [("geglu", 0.256), ("swiglu", 0.216)])
def test_matched_gated_ffn_writes_theorem_2s_share_of_the_gelu_write_at_initialization(kind, paper):
    # Zhu et al. 2026 App. B, Theorem 2: at initialization E||F_gate(x)||^2 / E||F_single(x)||^2 = rho_0 =
    # (r / m) nu E psi(G_nu)^2 / E phi(G_nu)^2 with equal output variances, nu = sigma^2 ||x||^2; the paper's 270M
    # models (d 960, m 3840, r 2560, sigma 0.02: nu 0.384) give 0.256 (GEGLU) and 0.216 (SwiGLU)
    from attnlab.model.decoder import _init

    d, m = 960, 3840
    r = matched_width(m, kind)
    nu = 0.02**2 * d  # ||x||^2 = d: the input leaves a LayerNorm
    psi = torch.nn.functional.gelu if kind == "geglu" else torch.nn.functional.silu
    rho_0 = (
        (r / m)
        * nu
        * _gaussian_mean(lambda g: psi(g) ** 2, nu)
        / _gaussian_mean(lambda g: torch.nn.functional.gelu(g) ** 2, nu)
    )
    assert rho_0 == pytest.approx(paper, abs=0.0015)
    gen = torch.Generator().manual_seed(0)
    x = torch.nn.functional.layer_norm(torch.randn(64, d, generator=gen, dtype=torch.float64), (d,))
    writes = {}
    for name in ("gelu", kind):
        energy = []
        for seed in range(4):
            torch.manual_seed(seed)
            ffn = make_ffn(name, d, m, bias=False).double()
            ffn.apply(_init)
            with torch.no_grad():
                energy.append(float(ffn(x).square().sum(-1).mean()))
        writes[name] = sum(energy) / len(energy)
    assert writes[kind] / writes["gelu"] == pytest.approx(rho_0, rel=0.03)
