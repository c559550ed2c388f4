"""The own decoder: every row map overfits a tiny batch; its observed scores are q k^T / sqrt(d) plus the
ALiBi bias by hand; query blocking and the fused softmax kernel leave the logits as they are; readout writes
returns h_D - x of a hand-written residual loop."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.model import positions as pe
from attnlab.model.config import ModelConfig
from attnlab.model.decoder import Decoder, loss
from attnlab.rowmaps import FAMILIES

MAPS = [f.example for f in FAMILIES.values()]


def _tiny(**kw):
    return ModelConfig(
        **{"vocab": 16, "context": 64, "layers": 2, "heads": 2, "d_model": 32, "ffn_width": 64, "block": 32, **kw}
    )


@pytest.mark.parametrize("rowmap", MAPS)
def test_every_row_map_overfits_a_tiny_batch(rowmap):
    torch.manual_seed(0)
    model = Decoder(_tiny(rowmap=rowmap, positions="nape", layers=1))
    ids = torch.randint(0, 16, (2, 10), generator=torch.Generator().manual_seed(1))
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    first = None
    for _ in range(60):
        value = loss(model(ids[:, :-1]), ids[:, 1:])
        first = float(value.detach()) if first is None else first
        opt.zero_grad()
        value.backward()
        opt.step()
    assert float(value.detach()) < 0.1 * first, (rowmap, first, float(value.detach()))


@pytest.mark.parametrize("positions", ["alibi", "nape", "rope", "none", "learned"])
def test_observed_scores_are_qk_plus_position_bias_by_hand(positions):
    torch.manual_seed(0)
    cfg = _tiny(positions=positions, heads=4)
    model = Decoder(cfg).eval()
    ids = torch.randint(0, 16, (1, 40), generator=torch.Generator().manual_seed(2))
    seen, inputs = {}, {}
    model.layers[1].attn.register_forward_pre_hook(lambda m, args: inputs.__setitem__("x", args[0]))
    with model.observed(lambda blk: seen.setdefault(blk.layer, []).append(blk.scores.clone())), torch.no_grad():
        model(ids)
    z = torch.cat(seen[1], dim=2)[0]
    attn = model.layers[1].attn
    x = inputs["x"][0]
    q = attn.q_proj(x).view(40, 4, 8).transpose(0, 1)
    k = attn.k_proj(x).view(40, 4, 8).transpose(0, 1)
    if positions == "rope":
        cos, sin = pe.rope_angles(torch.arange(40), pe.rope_frequencies(8))
        q, k = pe.apply_rope(q[None], cos, sin)[0], pe.apply_rope(k[None], cos, sin)[0]
    ref = q @ k.transpose(1, 2) / 8**0.5
    if positions in ("alibi", "nape"):
        slopes = pe.alibi_slopes(4) if positions == "alibi" else pe.nape_slopes(4, "inverse")
        i = torch.arange(40)
        ref = ref + slopes[:, None, None] * (i[None, :] - i[:, None]).clamp(max=0)
    causal = torch.ones(40, 40, dtype=torch.bool).tril()
    torch.testing.assert_close(z[:, causal], ref[:, causal], rtol=1e-5, atol=1e-5)


def test_query_blocks_do_not_change_the_logits():
    torch.manual_seed(0)
    small = Decoder(_tiny(positions="alibi", rowmap="entmax_a1.5", block=32)).eval()
    large = Decoder(_tiny(positions="alibi", rowmap="entmax_a1.5", block=512)).eval()
    large.load_state_dict(small.state_dict())
    ids = torch.randint(0, 16, (2, 64), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(small(ids), large(ids), rtol=1e-5, atol=1e-6)


def test_rowmap_per_layer_and_per_head():
    cfg = _tiny(rowmap=["softmax", ["relu_p4_b0", "entmax_a1.5"]])
    model = Decoder(cfg)
    assert model.layers[0].attn.maps == {}
    assert {h: m.name for h, m in model.layers[1].attn.maps.items()} == {0: "relu_p4_b0", 1: "entmax_a1.5"}
    assert cfg.to_dict()["rowmap"] == ["softmax", ["relu_p4_b0", "entmax_a1.5"]]


@pytest.mark.parametrize("positions", ["rope", "none", "learned"])
def test_unobserved_softmax_takes_the_fused_kernel_with_the_same_logits(positions):
    torch.manual_seed(0)
    model = Decoder(_tiny(positions=positions)).eval()
    ids = torch.randint(0, 16, (2, 50), generator=torch.Generator().manual_seed(4))
    calls = []
    with torch.no_grad():
        fused = model(ids)
        with model.observed(lambda blk: calls.append(blk.layer)):
            routed = model(ids)
    assert calls == [0, 0, 1, 1]  # the observed forward went through the site, in blocks of 32 queries
    torch.testing.assert_close(fused, routed, rtol=1e-5, atol=1e-6)


def test_long_inputs_get_thinner_query_blocks_within_the_score_budget():
    from attnlab.model.decoder import SCORE_BUDGET, block_rows

    assert block_rows(512, 16, 4, 256) == 512
    assert block_rows(512, 1, 4, 65536) == 64 and 64 * 4 * 65536 <= SCORE_BUDGET
    assert block_rows(512, 8, 16, 65536) == 32  # never thinner than the site's minimum


def _attention_by_hand(attn, h: torch.Tensor, heads: int, relu: bool) -> torch.Tensor:
    """One layer's write W_O concat_h(sum_k alpha_ik W_V x_k), per head and per query in plain loops."""
    t, d = h.shape
    hd = d // heads
    q, k, v = (h @ p.weight.T for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    out = torch.zeros(t, d, dtype=h.dtype)
    for head in range(heads):
        cols = slice(head * hd, (head + 1) * hd)
        for i in range(t):
            z = torch.stack([q[i, cols] @ k[j, cols] / math.sqrt(hd) for j in range(i + 1)])
            alpha = torch.relu(z) / max(i + 1 - 2, 1) if relu else torch.softmax(z, 0)
            out[i, cols] = sum(alpha[j] * v[j, cols] for j in range(i + 1))
    return out @ attn.o_proj.weight.T


@pytest.mark.parametrize("rowmap", ["softmax", "reluattn"])
@torch.no_grad()
def test_readout_writes_is_the_sum_of_the_layers_residual_writes(rowmap):
    cfg = ModelConfig(
        context=9,
        inputs="vectors",
        layers=3,
        heads=2,
        d_model=8,
        positions="none",
        ffn="none",
        norm="none",
        bias=False,
        rowmap=rowmap,
        readout="writes",
    )
    torch.manual_seed(3)
    model = Decoder(cfg).eval()
    for p in model.parameters():  # O(1) weights, so the writes are not drowned in h_0 = x
        torch.nn.init.normal_(p, std=0.5)
    x = torch.rand(2, 9, 8, dtype=torch.float64) * 2 - 1
    model.double()
    want = torch.zeros_like(x)
    for b in range(2):
        h = x[b]
        for block in model.layers:
            h = h + _attention_by_hand(block.attn, h, 2, rowmap == "reluattn")
        want[b] = h - x[b]
    torch.testing.assert_close(model(x), want, rtol=1e-10, atol=1e-10)
    stream = Decoder(ModelConfig(**{**cfg.to_dict(), "readout": "stream"})).double().eval()
    stream.load_state_dict(model.state_dict())
    torch.testing.assert_close(stream(x) - x, want, rtol=1e-10, atol=1e-10)
    assert model(x).abs().max() > 0.1  # the writes are not trivially zero
