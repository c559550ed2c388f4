"""On real pretrained weights (SmolLM2, Gemma 3), routing through attnlab is bit-identical to the eager
forward, including Gemma 3's sliding-window layers past the window, KV-cache generation and left padding;
substituted generation with a cache equals the cache-free greedy loop; the audit's table keeps its
invariants."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from attnlab import hooks, tasks
from attnlab.analyses import audit

from .models import assert_observed_bit_identical
from .models import logits as _logits

pytestmark = pytest.mark.real

MODELS = ["smollm2", "gemma3"]


def _text_ids(tok, tokens: int) -> torch.Tensor:
    ids = tok(tasks.generic_text(8 * tokens, seed=3), add_special_tokens=True)["input_ids"][:tokens]
    assert len(ids) == tokens
    return torch.tensor([ids])


@pytest.mark.parametrize("name", MODELS)
def test_observed_blocks_and_padding_bit_identical(real_models, name):
    model, tok = real_models(name)
    ids = _text_ids(tok, 96)
    batch = torch.cat([ids, torch.roll(ids, 5, dims=1)])
    am = torch.ones_like(batch)
    am[1, :9] = 0  # left padding
    ref = assert_observed_bit_identical(model, batch, am, block=32)  # 96 queries -> 3 blocks
    with hooks.substituted(model, "softmax", heads=[]):
        assert torch.equal(_logits(model, batch, am), ref)


def test_gemma3_sliding_window_past_the_window(real_models):
    model, tok = real_models("gemma3")
    window = model.config.sliding_window
    kinds = set(model.config.layer_types)
    assert kinds == {"sliding_attention", "full_attention"}, kinds
    ids = _text_ids(tok, window + 100)
    ref = _logits(model, ids)
    masked_keys = {}

    def observer(block):  # the most keys any query row of the layer may attend
        most = int(block.allowed.sum(-1).max())
        masked_keys[block.layer] = max(most, masked_keys.get(block.layer, 0))

    with hooks.observed(model, observer, block=128):
        out = _logits(model, ids)
    assert torch.equal(out, ref), f"max abs diff {(out - ref).abs().max().item()}"
    for layer, kind in enumerate(model.config.layer_types):
        seen = masked_keys[layer]
        assert (seen <= window) if kind == "sliding_attention" else (seen == ids.shape[1]), (layer, kind, seen)


@pytest.mark.parametrize("name", MODELS)
def test_generate_with_cache_bit_identical(real_models, name):
    model, tok = real_models(name)
    ids = _text_ids(tok, 40)
    ref = model.generate(ids, max_new_tokens=6, do_sample=False, output_scores=True, return_dict_in_generate=True)
    with hooks.observed(model, lambda block: None):
        out = model.generate(ids, max_new_tokens=6, do_sample=False, output_scores=True, return_dict_in_generate=True)
    assert torch.equal(out.sequences, ref.sequences)
    assert all(torch.equal(a, b) for a, b in zip(out.scores, ref.scores))


def test_substituted_generate_matches_cache_free_greedy(real_models):
    model, tok = real_models("smollm2")
    ids = _text_ids(tok, 30)
    with hooks.substituted(model, "relu_p4_b1"):
        cached = model.generate(ids, max_new_tokens=5, do_sample=False)
        seq = ids
        for _ in range(5):
            nxt = _logits(model, seq)[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], dim=1)
    assert torch.equal(cached, seq)
    with hooks.substituted(model, "relu_p4_b1"):
        sub = _logits(model, ids)
    assert not torch.equal(sub, _logits(model, ids)), "substitution changed nothing"


def test_audit_invariants(real_models, tmp_path):
    real_models("smollm2")  # skip unless fetched
    cfg = audit.AuditConfig(
        model="smollm2", suite="niah", prompts=2, p=(2, 4, 8, 16), b=("0", "auto"), pad=4, queries="every:16"
    )
    result = audit.run(cfg, tmp_path)
    table = result["table"]
    assert set(table["b"].astype(str)) == {"0", "auto"} and result["b_auto"] is not None
    for _, g in table.groupby("b"):
        g = g.sort_values("p")
        assert g["unsafe %"].is_monotonic_decreasing  # S_p is non-increasing in p row by row
        assert ((g["unsafe lo"] <= g["unsafe %"]) & (g["unsafe %"] <= g["unsafe hi"])).all()
        assert (g["active"] <= g["rows"]).all()
    rows = pd.read_parquet(tmp_path / "rows_b0.parquet")
    assert set(rows["layer"]) == set(range(30)) and set(rows["head"]) == set(range(9))
    active = rows[rows["status"] == "active"]
    assert ((active["s_p2"] >= active["s_p4"] - 1e-12) & (active["s_p4"] >= active["s_p16"] - 1e-12)).all()
