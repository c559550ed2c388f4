"""Test utility: write tiny Llama and Qwen2 checkpoints as GGUF files with the ``gguf`` package, the way llama.cpp's
converter (convert_hf_to_gguf.py) lays each out: its tensor names, Llama's Q/K rows permuted for its RoPE, Qwen2's
QKV biases and tied output, a gpt2-type BPE tokenizer. The GGUF path is tested on files nobody converted by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from offline import build_tokenizer

EPS = float(np.float32(1e-5))  # GGUF stores the RMSNorm epsilon as float32; the model gets the same value
N_HEAD, N_KV = 4, 2
# llama.cpp's names for the per-layer weights Llama and Qwen2 both store as transformers does
SHARED = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's row order for Q/K: the inverse of transformers' reverse permutation on load."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _sizes(tok) -> dict:
    """The config of every writer here: 2 layers, 4 query / 2 KV heads, sized to ``tok``."""
    return dict(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=N_HEAD,
        num_key_value_heads=N_KV,
        max_position_embeddings=512,
        rms_norm_eps=EPS,
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
    )


def _tensors(model, *, permute: bool) -> dict[str, np.ndarray]:
    """The model's tensors under llama.cpp's names. A tied output matrix is not written: transformers' checkpoint
    does not hold it, so llama.cpp's converter never sees it and its loader reuses token_embd."""
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    tensors = {"token_embd.weight": sd["model.embed_tokens.weight"], "output_norm.weight": sd["model.norm.weight"]}
    if not model.config.tie_word_embeddings:
        tensors["output.weight"] = sd["lm_head.weight"]
    heads = {"q": N_HEAD, "k": N_KV}
    for i in range(model.config.num_hidden_layers):
        layer = f"model.layers.{i}"
        for short, long in SHARED.items():
            tensors[f"blk.{i}.{short}.weight"] = sd[f"{layer}.{long}.weight"]
        for x, n in heads.items():
            w = sd[f"{layer}.self_attn.{x}_proj.weight"]
            tensors[f"blk.{i}.attn_{x}.weight"] = _permute(w, n) if permute else w
        for x in "qkv":
            if f"{layer}.self_attn.{x}_proj.bias" in sd:
                tensors[f"blk.{i}.attn_{x}.bias"] = sd[f"{layer}.self_attn.{x}_proj.bias"]
    return tensors


def _writer(path: Path, arch: str, config):
    """A GGUFWriter holding what llama.cpp's TextModel writes for every text model."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"attnlab-test-{arch}")
    w.add_block_count(config.num_hidden_layers)
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_attention_heads)
    w.add_head_count_kv(config.num_key_value_heads)
    w.add_rope_freq_base(config.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(EPS)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    return w


def _finish(w, tok, tensors: dict[str, np.ndarray], *, pre: str) -> None:
    """Add the byte-level BPE tokenizer as llama.cpp's gpt2 vocabulary (``pre``: its pre-tokenizer name) and the
    float32 tensors, and write the file."""
    import gguf

    spec = json.loads(tok.backend_tokenizer.to_str())["model"]
    vocab = sorted(spec["vocab"].items(), key=lambda kv: kv[1])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([gguf.TokenType.CONTROL if t == "<|endoftext|>" else gguf.TokenType.NORMAL for t, _ in vocab])
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in spec["merges"]])
    w.add_bos_token_id(tok.eos_token_id)
    w.add_eos_token_id(tok.eos_token_id)
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    for name, array in tensors.items():
        w.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _tokenizer(path: Path):
    return build_tokenizer(path.parent / f"_{path.stem}_tokenizer", "bpe")


def write_llama_gguf(path: Path, *, seed: int = 0):
    """A random 2-layer Llama with a byte-level BPE tokenizer, written to ``path`` (float32 tensors).
    Returns (model, tokenizer) as built, for comparison with what attnlab loads."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _tokenizer(path)
    config = LlamaConfig(**_sizes(tok), rope_theta=10000.0, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    write_llama(path, model, tok)
    return model, tok


def write_llama(path: Path, model, tok, *, fields: dict | None = None, tensors=None) -> Path:
    """``model`` written to ``path`` as llama.cpp writes a Llama, with the header ``fields`` (key -> (value,
    GGUFValueType)) written over what the converter wrote and its tensors passed through ``tensors`` (a function of
    the name -> array dict) first: one model's hostile variants."""
    config = model.config
    w = _writer(path, "llama", config)
    # llama.cpp's LlamaModel adds these two to what every text model writes
    w.add_vocab_size(config.vocab_size)
    w.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    for key, (value, vtype) in (fields or {}).items():
        w.add_key_value(key, value, vtype)
    arrays = _tensors(model, permute=True)
    _finish(w, tok, tensors(arrays) if tensors is not None else arrays, pre="default")
    return path


def write_qwen2_gguf(path: Path, *, seed: int = 0):
    """A random 2-layer Qwen2 (QKV biases, tied embeddings as the small Qwen2 checkpoints have, RoPE theta 1e6) with
    a byte-level BPE tokenizer that splits text as Qwen2's does, written to ``path`` (float32 tensors) under the
    "qwen2" architecture: Q/K rows stay in transformers' order, as llama.cpp's Qwen2Model does not permute them.
    Returns (model, tokenizer) as built, for comparison with what attnlab loads."""
    import torch
    from tokenizers import Regex, pre_tokenizers
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tok = _tokenizer(path)
    # The file names its pre-tokenizer "qwen2" as llama.cpp's converter does for Qwen2's tokenizer, so the reader
    # splits digits one by one; the tokenizer returned must split the same way to be the one the file describes.
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    config = Qwen2Config(**_sizes(tok), rope_theta=1e6, tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        # transformers initialises biases to zero, where a loader that dropped them would still give equal logits
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(std=0.1)
    _finish(_writer(path, "qwen2", config), tok, _tensors(model, permute=False), pre="qwen2")
    return model, tok
