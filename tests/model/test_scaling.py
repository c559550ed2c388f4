"""The decoder's learnable scalers (registry entries, a user's own included) multiply each score row by their closed form
(learned SSMax, ASEntmax/ASSMax, s beta_n + b) before the map, under NAPE on the NoPE heads only with s = 2 by
default, and the vector model is W_O sum_j alpha_ij W_V x_j by hand."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab import rowmaps
from attnlab.model.config import ConfigError, ModelConfig
from attnlab.model.decoder import Decoder, loss
from attnlab.model.scaling import SCALERS

T, H, D = 12, 2, 16


def _model(**kw):
    torch.manual_seed(0)
    cfg = ModelConfig(
        **{
            "vocab": 11,
            "context": T,
            "layers": 1,
            "heads": H,
            "d_model": D,
            "ffn_width": 32,
            "positions": "none",
            "block": 32,
            **kw,
        }
    )
    return Decoder(cfg).eval()


def _layer_output_by_hand(model, ids, multiplier, rowmap="softmax"):
    """The attention sublayer's output with rows z * multiplier(x, n) mapped by ``rowmap``, from weights."""
    attn = model.layers[0].attn
    x = model.layers[0].attn_norm(model.embed(ids))[0]
    q, k, v = (p(x).view(T, H, D // H).transpose(0, 1) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    z = q @ k.transpose(1, 2) / math.sqrt(D // H)
    n = torch.arange(1, T + 1)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    z = (z * multiplier(x, n)).masked_fill(~allowed, float("-inf"))
    w = rowmaps.get(rowmap)(z, allowed)
    return attn.o_proj((w @ v).transpose(0, 1).reshape(T, D))


def _layer_output(model, ids):
    seen = {}
    model.layers[0].attn.register_forward_hook(lambda m, a, out: seen.__setitem__("out", out))
    model(ids)
    return seen["out"][0]


IDS = torch.randint(0, 11, (1, T), generator=torch.Generator().manual_seed(1))


@torch.no_grad()
def test_log_n_multiplies_rows_by_delta_plus_s_log_n():
    model = _model(scaler="log_n", scaler_delta=0.5)
    s = torch.tensor([0.7, -0.2])
    model.layers[0].attn.scaler.s.copy_(s)
    ref = _layer_output_by_hand(
        model, IDS, lambda x, n: 0.5 + s[:, None, None] * torch.log(n.clamp_min(2).float())[None, :, None]
    )
    torch.testing.assert_close(_layer_output(model, IDS), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rowmap", ["entmax_a1.5", "softmax"])
@torch.no_grad()
def test_adaptive_scaler_is_asentmax_and_assmax(rowmap):
    model = _model(scaler="adaptive", rowmap=rowmap, scaler_bound=0.8)
    scale = model.layers[0].attn.scaler.scale
    scale.w_beta.normal_(0, 0.5)
    scale.w_gamma.normal_(0, 0.5)

    def multiplier(x, n):
        beta = torch.nn.functional.softplus(x @ scale.w_beta.T).T[:, :, None]
        gamma = (0.8 * torch.tanh(x @ scale.w_gamma.T)).T[:, :, None]
        return 1.0 + beta * torch.log(n.clamp_min(2).float())[None, :, None] ** gamma

    ref = _layer_output_by_hand(model, IDS, multiplier, rowmap)
    torch.testing.assert_close(_layer_output(model, IDS), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("gamma", [1.0, -0.5])
@torch.no_grad()
def test_a_fixed_gamma_learns_beta_alone_and_raises_log_n_to_that_power(gamma):
    model = _model(scaler="adaptive", rowmap="entmax_a1.5", scaler_gamma=gamma, scaler_delta=0.5)
    scale = model.layers[0].attn.scaler.scale
    assert {n for n, _ in model.layers[0].attn.scaler.named_parameters()} == {"scale.w_beta"}
    scale.w_beta.normal_(0, 0.5)

    def multiplier(x, n):
        beta = torch.nn.functional.softplus(x @ scale.w_beta.T).T[:, :, None]
        return 0.5 + beta * torch.log(n.clamp_min(2).float())[None, :, None] ** gamma

    ref = _layer_output_by_hand(model, IDS, multiplier, "entmax_a1.5")
    torch.testing.assert_close(_layer_output(model, IDS), ref, rtol=1e-5, atol=1e-6)
    direct = _model(scaler="direct", scaler_gamma=gamma).layers[0].attn.scaler
    assert [n for n, _ in direct.named_parameters()] == ["beta"] and "gamma" in direct.state_dict()
    n = torch.arange(1, T + 1)
    torch.testing.assert_close(
        direct(None, n)[0, :, :, 0], (1 + math.log(2) * torch.log(n.clamp_min(2).float()) ** gamma).expand(H, T)
    )


def test_a_fixed_gamma_is_refused_for_scalers_without_one():
    with pytest.raises(
        ConfigError,
        match="model.scaler_gamma fixes the gamma of the scalers adaptive and direct; model.scaler is 'log_n'",
    ):
        _model(scaler="log_n", scaler_gamma=1.0)
    with pytest.raises(ConfigError, match="model.scaler_gamma must be a finite number"):
        _model(scaler="adaptive", scaler_gamma=float("nan"))


@torch.no_grad()
def test_beta_n_is_s_beta_plus_b_per_head_with_one_shared_vector():
    model = _model(scaler="beta_n", layers=2)
    assert model.beta_n.shape == (T,) and torch.equal(model.beta_n, torch.ones(T))
    assert torch.equal(model.layers[1].attn.scaler.s, torch.ones(H))
    model.beta_n.copy_(torch.linspace(0.5, 2.0, T))
    s, b = torch.tensor([1.5, 0.5]), torch.tensor([0.1, -0.3])
    model.layers[0].attn.scaler.s.copy_(s)
    model.layers[0].attn.scaler.b.copy_(b)
    beta = model.beta_n.clone()
    ref = _layer_output_by_hand(model, IDS, lambda x, n: (s[:, None] * beta[n - 1] + b[:, None])[:, :, None])
    torch.testing.assert_close(_layer_output(model, IDS), ref, rtol=1e-5, atol=1e-6)


def test_beta_n_beyond_the_training_context_uses_the_last_entry():
    model = _model(scaler="beta_n")
    scaler = model.layers[0].attn.scaler
    beta = torch.arange(1.0, T + 1)
    got = scaler(None, torch.arange(1, 2 * T + 1), beta)
    assert got.shape == (1, H, 2 * T, 1)
    assert torch.equal(got[0, 0, T:, 0], torch.full((T,), float(T)))


@pytest.mark.parametrize("scaler", ["log_n", "adaptive", "beta_n"])
def test_every_scaler_learns(scaler):
    model = _model(scaler=scaler, rowmap="entmax_a1.5").train()
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    ids = torch.randint(0, 11, (2, T), generator=torch.Generator().manual_seed(2))
    before = [p.detach().clone() for p in model.layers[0].attn.scaler.parameters()]
    for _ in range(3):
        value = loss(model(ids[:, :-1]), ids[:, 1:])
        opt.zero_grad()
        value.backward()
        opt.step()
    after = list(model.layers[0].attn.scaler.parameters())
    assert all(not torch.equal(a, b) for a, b in zip(after, before))


@torch.no_grad()
def test_vector_model_is_one_attention_layer_by_hand():
    torch.manual_seed(0)
    cfg = ModelConfig(
        context=T,
        inputs="vectors",
        layers=1,
        heads=1,
        d_model=8,
        positions="none",
        ffn="none",
        norm="none",
        residual=False,
        bias=False,
        rowmap="reluattn",
    )
    model = Decoder(cfg).eval()
    assert model.embed is None and model.head is None
    assert sum(p.numel() for p in model.parameters()) == 4 * 8 * 8
    x = torch.rand(2, T, 8)
    attn = model.layers[0].attn
    wq, wk, wv, wo = (p.weight for p in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj))
    out = torch.zeros(2, T, 8)
    for b in range(2):
        for i in range(T):
            acc = torch.zeros(8)
            for j in range(i + 1):
                score = (wq @ x[b, i]) @ (wk @ x[b, j]) / math.sqrt(8)
                acc += torch.relu(score) / max(i + 1 - 2, 1) * (wv @ x[b, j])
            out[b, i] = wo @ acc
    torch.testing.assert_close(model(x), out, rtol=1e-5, atol=1e-6)


def test_vector_model_with_residual_stacks_layers():
    cfg = ModelConfig(
        context=T, inputs="vectors", layers=2, heads=2, d_model=8, ffn="none", norm="none", positions="none"
    )
    model = Decoder(cfg)
    x = torch.rand(1, T, 8)
    with torch.no_grad():
        mid = x + model.layers[0].attn(x, None)
        torch.testing.assert_close(model(x), mid + model.layers[1].attn(mid, None))
    with pytest.raises(ValueError, match="d_model=8"):
        model(torch.rand(1, T, 4))


def test_user_scaler_registers_and_is_built_by_the_decoder():
    @SCALERS.register("double_test")
    class Double(torch.nn.Module):
        def __init__(self, heads, dim, *, delta, bound):
            super().__init__()
            self.heads = heads

        def forward(self, x, n, beta=None):
            return torch.full((1, self.heads, n.shape[-1], 1), 2.0)

    try:
        model = _model(scaler="double_test")
        assert isinstance(model.layers[0].attn.scaler, Double)
        with torch.no_grad():
            torch.testing.assert_close(_layer_output(model, IDS), _layer_output_by_hand(model, IDS, lambda x, n: 2.0))
    finally:
        SCALERS.unregister("double_test")
    with pytest.raises(ConfigError, match="model.scaler must be one of none, log_n, adaptive, direct, beta_n"):
        _model(scaler="double_test")


def _weights(model, ids):
    """Every head's attention weights of layer 0 (heads, queries, keys) after the map."""
    seen = []
    with model.observed(lambda block: seen.append(block.weights.detach()[0]), weights=True):
        model(ids)
    return torch.cat(seen, dim=-2)


@pytest.mark.parametrize(
    ("scaler", "rowmap"),
    [("adaptive", "entmax_a1.5"), ("adaptive", "softmax"), ("log_n", "softmax"), ("direct", "entmax_a1.5")],
)
@torch.no_grad()
def test_under_nape_the_length_scalers_multiply_the_nope_heads_only(scaler, rowmap):
    # Vasylenko et al. 2025's scalers, as the authors' code applies them under NAPE: heads 0-1 (ALiBi, slopes 1
    # and 1/2) must weigh exactly as without a scaler; heads 2-3 (NoPE) must be scaled.
    kw = {"positions": "nape", "heads": 4, "rowmap": rowmap}
    plain, scaled = _model(**kw), _model(scaler=scaler, **kw)
    scaled.load_state_dict(plain.state_dict(), strict=False)
    for p in scaled.layers[0].attn.scaler.parameters():
        p.copy_(torch.linspace(0.5, 1.5, p.numel()).view_as(p))  # a multiplier far from 1 on every head
    ids = torch.randint(0, 11, (1, T), generator=torch.Generator().manual_seed(2))
    before, after = _weights(plain, ids), _weights(scaled, ids)
    torch.testing.assert_close(after[:2], before[:2], rtol=0, atol=0)
    assert all((after[h] - before[h]).abs().max() > 1e-3 for h in (2, 3))


@pytest.mark.parametrize("positions", ["rope", "alibi", "none"])
@torch.no_grad()
def test_outside_nape_the_adaptive_scaler_multiplies_every_head(positions):
    kw = {"positions": positions, "heads": 4, "rowmap": "softmax"}
    plain, scaled = _model(**kw), _model(scaler="adaptive", **kw)
    scaled.load_state_dict(plain.state_dict(), strict=False)
    scaled.layers[0].attn.scaler.scale.w_beta.fill_(0.3)
    before, after = _weights(plain, IDS), _weights(scaled, IDS)
    assert all((after[h] - before[h]).abs().max() > 1e-3 for h in range(4))


def test_the_gamma_bound_defaults_to_the_authors_two():
    # deep-spin/asentmax's attn_scale_gamma_range defaults to 2 (Vasylenko et al. 2025 eq. 9's s)
    assert _model(scaler="adaptive").layers[0].attn.scaler.scale.s == 2.0


@pytest.mark.parametrize("rowmap", ["entmax_a1.5", "softmax"])
@torch.no_grad()
def test_the_fused_training_path_scales_the_nope_heads_only_as_the_observed_path_does(rowmap):
    # no observer: the fused kernel serves the call, as in training; an observer forces the blockwise path
    model = _model(positions="nape", heads=4, layers=2, rowmap=rowmap, scaler="adaptive")
    for block in model.layers:
        block.attn.scaler.scale.w_beta.normal_(0, 0.5)
        block.attn.scaler.scale.w_gamma.normal_(0, 0.5)
    ids = torch.randint(0, 11, (3, T), generator=torch.Generator().manual_seed(3))
    fused = model(ids)
    with model.observed(lambda block: None, weights=True):
        observed = model(ids)
    torch.testing.assert_close(fused, observed, rtol=1e-5, atol=1e-5)
    for block in model.layers:
        block.attn.unscaled = None  # every head scaled, as before
    assert (model(ids) - fused).abs().max() > 1e-3
