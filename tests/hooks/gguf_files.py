"""Test utility: write a tiny Llama checkpoint as a GGUF file with the ``gguf`` package, the way
llama.cpp's converter lays it out (tensor names, Q/K rows permuted for its RoPE, a gpt2-type BPE
tokenizer), so the GGUF path is tested on a file nobody converted by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from offline import build_tokenizer

EPS = float(np.float32(1e-5))  # GGUF stores the RMSNorm epsilon as float32; the model gets the same value


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's row order for Q/K: the inverse of transformers' reverse permutation on load."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_llama_gguf(path: Path, *, seed: int = 0):
    """A random 2-layer Llama with a byte-level BPE tokenizer, written to ``path`` (float32 tensors).
    Returns (model, tokenizer) as built, for comparison with what attnlab loads."""
    import gguf
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_tokenizer(path.parent / f"_{path.stem}_tokenizer", "bpe")
    n_head, n_kv = 4, 2
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=n_head,
        num_key_value_heads=n_kv,
        max_position_embeddings=512,
        rope_theta=10000.0,
        rms_norm_eps=EPS,
        tie_word_embeddings=False,
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("attnlab-test-llama")
    w.add_block_count(config.num_hidden_layers)
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_dimension_count(config.hidden_size // n_head)
    w.add_vocab_size(len(tok))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    spec = json.loads(tok.backend_tokenizer.to_str())["model"]
    vocab = sorted(spec["vocab"].items(), key=lambda kv: kv[1])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([gguf.TokenType.CONTROL if t == "<|endoftext|>" else gguf.TokenType.NORMAL for t, _ in vocab])
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in spec["merges"]])
    w.add_bos_token_id(tok.eos_token_id)
    w.add_eos_token_id(tok.eos_token_id)
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    tensors = {
        "token_embd.weight": sd["model.embed_tokens.weight"],
        "output_norm.weight": sd["model.norm.weight"],
        "output.weight": sd["lm_head.weight"],
    }
    parts = {
        "attn_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
    }
    for i in range(config.num_hidden_layers):
        for short, long in parts.items():
            tensors[f"blk.{i}.{short}.weight"] = sd[f"model.layers.{i}.{long}.weight"]
        tensors[f"blk.{i}.attn_q.weight"] = _permute(sd[f"model.layers.{i}.self_attn.q_proj.weight"], n_head)
        tensors[f"blk.{i}.attn_k.weight"] = _permute(sd[f"model.layers.{i}.self_attn.k_proj.weight"], n_kv)
    for name, array in tensors.items():
        w.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model, tok
