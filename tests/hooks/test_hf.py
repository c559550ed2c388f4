"""Routing through attnlab is invisible (bit-identical logits, model restored) until a head is substituted."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlab import hooks

from .models import VOCAB, assert_observed_bit_identical, build, configs
from .models import logits as _logits

ARCHS = sorted(configs())


def _ids(batch: int = 2, tokens: int = 150, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (batch, tokens), generator=g)
    attention_mask = torch.ones_like(ids)
    attention_mask[0, :7] = 0  # left padding exercises the padding part of the mask
    return ids, attention_mask


@pytest.mark.parametrize("arch", ARCHS)
def test_observed_forward_is_bit_identical_to_eager(arch):
    model = build(arch)
    ids, am = _ids()
    ref = assert_observed_bit_identical(model, ids, am, block=64)  # 150 queries -> 3 blocks
    assert torch.equal(_logits(model, ids, am), ref)


def test_bfloat16_forward_is_bit_identical():
    model = build("llama", dtype=torch.bfloat16)
    ids, am = _ids()
    ref = _logits(model, ids, am)
    with hooks.observed(model, lambda block: None, block=64):
        assert torch.equal(_logits(model, ids, am), ref)


@pytest.mark.parametrize("arch", ["llama", "gemma3", "gpt_neox"])
def test_empty_selection_is_identical_one_head_changes_distinct_heads_differ(arch):
    model = build(arch)
    ids, am = _ids(tokens=40)
    ref = _logits(model, ids, am)
    with hooks.substituted(model, "relu_p4_b1", heads=[]):
        assert torch.equal(_logits(model, ids, am), ref)
    outs = []
    for head in [(0, 0), (0, 1), (1, 3), (2, 0)]:
        with hooks.substituted(model, "relu_p4_b1", heads=[head]):
            outs.append(_logits(model, ids, am))
        assert not torch.equal(outs[-1], ref), f"substituting {head} changed nothing"
    for i in range(len(outs)):
        for j in range(i):
            assert not torch.equal(outs[i], outs[j])
    assert torch.equal(_logits(model, ids, am), ref)


def test_leaving_restores_model_even_after_an_error():
    model = build("qwen3")
    ids, am = _ids(tokens=30)
    ref = _logits(model, ids, am)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(RuntimeError, match="boom"):
        with hooks.substituted(model, "sigmoid_b0"):
            raise RuntimeError("boom")
    assert model.config._attn_implementation == "eager"
    assert not any(hasattr(m, "_attnlab_route") for m in model.modules())
    assert not hasattr(model, "_attnlab_state")
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert torch.equal(_logits(model, ids, am), ref)


def test_contexts_nest_observer_sees_substituted_model():
    model = build("llama")
    ids, am = _ids(tokens=30)
    with hooks.substituted(model, "sigmoid_b0"):
        sub = _logits(model, ids, am)
        layers = []
        with hooks.observed(model, lambda block: layers.append(block.layer)):
            assert torch.equal(_logits(model, ids, am), sub)
        assert layers == [0, 1, 2]
        assert torch.equal(_logits(model, ids, am), sub)
    assert model.config._attn_implementation == "eager"


def test_every_head_softmax_by_rowmap_matches_eager_closely():
    # the registry's softmax goes through the row-map path, not the eager arithmetic: equal to rounding.
    # Padded query rows have no allowed key: eager spreads them uniformly, row maps return zeros, so
    # only real tokens are compared.
    model = build("mistral")
    ids, am = _ids(tokens=50)
    with hooks.substituted(model, "softmax"):
        out = _logits(model, ids, am)
    real = am.bool()
    torch.testing.assert_close(out[real], _logits(model, ids, am)[real], rtol=1e-5, atol=1e-5)


def test_observer_reads_post_softcap_scores():
    model = build("gemma2")
    cap = model.config.attn_logit_softcapping
    biggest = []
    with hooks.observed(model, lambda b: biggest.append(b.scores.masked_fill(~b.allowed, 0).abs().max())):
        _logits(model, *_ids(tokens=30))
    assert 0 < max(biggest) <= cap


def test_length_scale_noop_below_training_length_and_active_beyond():
    model = build("llama")
    ids, am = _ids(tokens=40)
    ref = _logits(model, ids, am)
    with hooks.substituted(model, None, length_scale=hooks.LengthScale(2.0, 64)):
        assert torch.equal(_logits(model, ids, am), ref)  # n <= 40 < n_train: m = 1 exactly
    with hooks.substituted(model, None, length_scale=hooks.LengthScale(2.0, 8)):
        assert not torch.equal(_logits(model, ids, am), ref)


def test_generation_with_cache_matches_eager():
    model = build("llama")
    ids, _ = _ids(batch=1, tokens=12)
    ref = model.generate(ids, max_new_tokens=5, do_sample=False)
    with hooks.observed(model, lambda block: None):
        out = model.generate(ids, max_new_tokens=5, do_sample=False)
    assert torch.equal(out, ref)


def test_recipe_dict_and_validation_errors():
    model = build("llama")
    n_layers, n_heads = hooks.num_heads(model)
    assert (n_layers, n_heads) == (3, 4)
    maps = hooks.head_maps(model, {(0, 1): "relu_p2_b0", (2, 3): "sigmoid_bauto"}, b_auto=1.5)
    assert maps[0][1].name == "relu_p2_b0" and maps[2][3].name == "sigmoid_b1.5"
    with pytest.raises(ValueError, match="needs b_auto"):
        hooks.head_maps(model, "relu_p4_bauto")
    with pytest.raises(ValueError, match="out of range"):
        hooks.head_maps(model, "relu_p4_b0", heads=[(3, 0)])
    with pytest.raises(ValueError, match="unknown row map"):
        hooks.head_maps(model, "relu_p4_bfast")
    with pytest.raises(ValueError, match="not both"):
        hooks.head_maps(model, {(0, 0): "sigmoid_b0"}, heads=[(0, 0)])
    assert model.config._attn_implementation == "eager"


def test_unsupported_models_get_a_clear_error():
    from transformers import AutoModelForCausalLM, FalconConfig

    with pytest.raises(hooks.UnsupportedModel, match="not a transformers PreTrainedModel"):
        with hooks.observed(nn.Linear(2, 2), print):
            pass
    falcon = AutoModelForCausalLM.from_config(
        FalconConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4)
    )
    with pytest.raises(hooks.UnsupportedModel, match="attention-function interface; supported: .*llama"):
        with hooks.observed(falcon, print):
            pass
