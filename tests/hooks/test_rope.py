"""Dynamic-NTK RoPE on a Hugging Face model: inside the context every RoPE table holds the frequencies of the base
theta_0 rho^{d/(d-2)} (Hayase & Karakida 2026 App. A.2), per layer type where there are several; on leaving, the
model's own tables and logits come back; a table scaled another way, or no RoPE at all, is refused."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlab import hooks
from attnlab.model.positions import dynamic_ntk_base, rope_frequencies

from .models import _common, build
from .models import logits as _logits


def _paper_inv_freq(theta: float, own: torch.Tensor, n_train: int, n_eval: int) -> torch.Tensor:
    d = 2 * len(own)  # the rotated dimensions (all of head_dim, or its rotary part)
    return rope_frequencies(d, base=dynamic_ntk_base(theta, d, n_eval, n_train))


@pytest.mark.parametrize("name", ["llama", "qwen3", "gpt_neox"])
def test_tables_hold_the_papers_base_and_come_back(name):
    model = build(name)
    ids = torch.randint(3, 97, (1, 40))
    ref = _logits(model, ids)
    [(rotary, buffer, _)] = hooks.rope_tables(model)
    own = getattr(rotary, buffer)
    theta = model.config.rope_parameters["rope_theta"]
    with hooks.dynamic_ntk(model, 16, 64):
        torch.testing.assert_close(getattr(rotary, buffer), _paper_inv_freq(theta, own, 16, 64), rtol=1e-6, atol=0)
        assert not torch.equal(_logits(model, ids), ref)
    assert getattr(rotary, buffer) is own and torch.equal(_logits(model, ids), ref)
    with hooks.dynamic_ntk(model, 64, 64):  # rho = 1: the model's own table
        assert getattr(rotary, buffer) is own


def test_gemma3_rescales_each_layer_types_table_from_its_own_base():
    model = build("gemma3")
    tables = hooks.rope_tables(model)
    assert sorted(layer_type for _, _, layer_type in tables) == ["full_attention", "sliding_attention"]
    own = {name: getattr(module, name) for module, name, _ in tables}
    with hooks.dynamic_ntk(model, 8, 40):
        for module, name, layer_type in tables:
            theta = model.config.rope_parameters[layer_type]["rope_theta"]
            torch.testing.assert_close(
                getattr(module, name), _paper_inv_freq(theta, own[name], 8, 40), rtol=1e-6, atol=0
            )
    assert all(getattr(module, name) is own[name] for module, name, _ in tables)


def test_a_table_scaled_another_way_or_no_rope_is_refused():
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(
        **_common(num_key_value_heads=2, rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0})
    )
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with pytest.raises(hooks.UnsupportedModel, match="rope type 'linear' already; use --rope plain"):
        with hooks.dynamic_ntk(model, 16, 64):
            pass
    with pytest.raises(hooks.UnsupportedModel, match="no rotary position embedding"):
        hooks.rope_tables(nn.Linear(2, 2))
