"""Tiny randomly initialised transformers models, built offline from configs (test utility)."""

from __future__ import annotations

import torch

VOCAB = 97


def _common(**extra):
    return dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        **extra,
    )


def configs():
    """name -> a config of every architecture the bit-identity check covers."""
    from transformers import (
        Gemma2Config,
        Gemma3TextConfig,
        GPTNeoXConfig,
        LlamaConfig,
        MistralConfig,
        Olmo2Config,
        Phi3Config,
        Qwen3Config,
    )

    return {
        "llama": LlamaConfig(**_common(num_key_value_heads=2)),
        "qwen3": Qwen3Config(**_common(num_key_value_heads=2, head_dim=16)),
        "gpt_neox": GPTNeoXConfig(**_common()),
        "gemma3": Gemma3TextConfig(
            **_common(
                num_key_value_heads=2,
                head_dim=16,
                sliding_window=8,
                attn_logit_softcapping=5.0,
                query_pre_attn_scalar=16,
                layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            )
        ),
        "gemma2": Gemma2Config(
            **_common(
                num_key_value_heads=2,
                head_dim=16,
                sliding_window=8,
                attn_logit_softcapping=2.0,
                query_pre_attn_scalar=16,
            )
        ),
        "mistral": MistralConfig(**_common(num_key_value_heads=2, sliding_window=8)),
        "phi3": Phi3Config(**_common(num_key_value_heads=2)),
        "olmo2": Olmo2Config(**_common(num_key_value_heads=2)),
    }


def build(name: str, seed: int = 0, dtype: torch.dtype = torch.float32):
    """The tiny model ``name`` with eager attention, in eval mode."""
    from transformers import AutoModelForCausalLM

    config = configs()[name]
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=dtype)
    return model.eval()


def logits(model, ids, attention_mask=None):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=attention_mask).logits


def assert_observed_bit_identical(model, ids, attention_mask, block: int) -> torch.Tensor:
    """The forward under an observer at every site (queries in blocks of ``block``) equals the eager one bit
    for bit, and the observer saw every layer; returns the eager logits."""
    from attnlab import hooks

    ref = logits(model, ids, attention_mask)
    layers = set()
    with hooks.observed(model, lambda scores: layers.add(scores.layer), block=block):
        out = logits(model, ids, attention_mask)
    assert torch.equal(out, ref), f"max abs diff {(out - ref).abs().max().item()}"
    assert layers == set(range(model.config.num_hidden_layers))
    return ref
