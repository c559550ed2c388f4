"""The checks refuse no checkpoint transformers itself saved: every architecture's names, ties and layouts pass.

Before a load, a folder's tensors are compared with its architecture built on the meta device; these are the ways a
real checkpoint's tensors differ from that model's state_dict without anything missing: a tied output matrix saved
once (Qwen2, Gemma 3), GPT-2's Conv1D and a base-model checkpoint without the ``transformer.`` prefix (the Hub's
gpt2), per-expert tensors transformers fuses on load (Mixtral), shards named by an index, a pickled
pytorch_model.bin. The hostile side is tests/loading/test_hostile_checkpoints.py.
"""

from __future__ import annotations

import pytest
import torch

from attnlab.loading import validate
from attnlab.loading.common import LoadError
from hostile_json import hostile, one_line

SMALL = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4)
CONFIGS = {
    "llama": dict(num_key_value_heads=2),
    "qwen2": dict(num_key_value_heads=2, tie_word_embeddings=True),
    "gemma3_text": dict(num_key_value_heads=2, head_dim=8),
    "gpt_neox": {},
    "mixtral": dict(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
    "gpt2": dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, vocab_size=64),
}


def _model(model_type: str, auto=None):
    from transformers import AutoConfig, AutoModelForCausalLM

    extra = CONFIGS[model_type]
    config = AutoConfig.for_model(model_type, **(extra if model_type == "gpt2" else {**SMALL, **extra}))
    torch.manual_seed(0)
    return (auto or AutoModelForCausalLM).from_config(config)


@pytest.mark.parametrize("model_type", list(CONFIGS))
def test_a_checkpoint_saved_by_transformers_passes(model_type, tmp_path):
    _model(model_type).save_pretrained(tmp_path)
    validate.check_folder(tmp_path)


def test_gpt2_saved_as_its_base_model_passes(tmp_path):
    """The Hub's gpt2 holds ``h.0.attn.c_attn.weight``, where GPT2LMHeadModel has ``transformer.h.0...``."""
    from transformers import AutoModel

    _model("gpt2", AutoModel).save_pretrained(tmp_path)
    validate.check_folder(tmp_path)


def test_shards_and_pickled_weights_pass_and_a_missing_shard_is_named(tmp_path):
    model = _model("llama")
    model.save_pretrained(tmp_path / "shards", max_shard_size="20KB")
    validate.check_folder(tmp_path / "shards")
    (tmp_path / "bin").mkdir()
    model.config.save_pretrained(tmp_path / "bin")
    torch.save(model.state_dict(), tmp_path / "bin" / "pytorch_model.bin")
    validate.check_folder(tmp_path / "bin")
    last = sorted((tmp_path / "shards").glob("model-*.safetensors"))[-1]
    last.unlink()
    with pytest.raises(LoadError, match=f"index.json names shards that are not files beside it: {last.name}"):
        validate.check_folder(tmp_path / "shards")


def test_what_transformers_reports_after_a_load_is_refused_in_one_line():
    """The check after the load, for the tensors the one before it could not see (a quantized checkpoint's)."""
    clean = dict(missing_keys=set(), unexpected_keys=set(), mismatched_keys=set(), error_msgs=[])
    validate.check_loading_info(clean, "ckpt", "LlamaForCausalLM")
    wrong = {**clean, "mismatched_keys": {("lm_head.weight", (64, 32), (7, 32))}}
    with pytest.raises(LoadError, match=r"^ckpt: tensor lm_head.weight has shape \[64, 32\] where .* needs \[7, 32\]$"):
        validate.check_loading_info(wrong, "ckpt", "LlamaForCausalLM")
    missing = {**clean, "missing_keys": {f"model.layers.{i}.mlp.up_proj.weight" for i in range(5)}}
    with pytest.raises(LoadError, match=r"5 tensors \(model.layers.0.mlp.up_proj.weight, .* and 2 more\) .* random"):
        validate.check_loading_info(missing, "ckpt", "LlamaForCausalLM")


@pytest.mark.parametrize(
    ("label", "data"), hostile({"model_type": "llama", "hidden_size": 8}, "hidden_size", "model_type")
)
def test_a_hostile_config_json_is_one_line(tmp_path, label, data):
    """A checkpoint folder's config.json: not UTF-8 JSON of an object (a depth bomb included) or a number of the wrong
    type is one line naming it; one without a model_type reads back (transformers refuses it, as test_load shows)."""
    (tmp_path / "config.json").write_bytes(data)
    if label == "model_type missing":
        assert validate.read_config(tmp_path) == {"hidden_size": 8}
        return
    with pytest.raises(LoadError) as caught:
        validate.read_config(tmp_path)
    one_line(caught.value, tmp_path / "config.json")


@pytest.mark.parametrize(
    ("label", "data"), hostile({"weight_map": {"w": "model-1.safetensors"}}, "weight_map", "weight_map")
)
def test_a_hostile_shard_index_is_one_line(tmp_path, label, data):
    (tmp_path / "model.safetensors.index.json").write_bytes(data)
    with pytest.raises(LoadError) as caught:
        validate.weight_files(tmp_path)
    one_line(caught.value, tmp_path / "model.safetensors.index.json")
