"""Tiny checkpoints saved to a folder with save_pretrained, as a user would have them (test utility)."""

from __future__ import annotations

from pathlib import Path

import torch

from offline import build_tokenizer


def save_checkpoint(
    folder: Path, *, arch: str = "llama", tokenizer_kind: str = "word", context: int = 512, seed: int = 0
) -> Path:
    """A randomly initialised ``arch`` model sized to the tokenizer, saved with its tokenizer in ``folder``."""
    from transformers import AutoModelForCausalLM, GPTNeoXConfig, LlamaConfig

    tok = build_tokenizer(folder / "_tokenizer", tokenizer_kind)
    common = dict(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=context,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    config = LlamaConfig(num_key_value_heads=2, **common) if arch == "llama" else GPTNeoXConfig(**common)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
