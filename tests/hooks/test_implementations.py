"""A registered attnlab implementation is eager bit for bit as softmax, the context's substitution as any other map."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from attnlab import hooks, rowmaps
from attnlab.hooks import implementations

from .models import VOCAB, build

COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)


def _config(arch: str, **extra):
    from transformers import LlamaConfig, Qwen2Config

    if arch == "llama":
        return LlamaConfig(**COMMON, **extra)
    if arch == "qwen2":
        return Qwen2Config(**COMMON, **extra)
    if arch == "qwen2_sliding":  # layer 1 attends a window of 8 keys
        return Qwen2Config(**COMMON, use_sliding_window=True, sliding_window=8, max_window_layers=1, **extra)
    raise ValueError(arch)


def _model(arch: str, implementation: str = "eager", seed: int = 0, **extra):
    from transformers import AutoModelForCausalLM

    if arch == "gemma2":  # softcap and query_pre_attn_scalar, sliding window 8 on every other layer
        model = build("gemma2", seed=seed)
        model.set_attn_implementation(implementation)
        return model
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(_config(arch, **extra), attn_implementation=implementation).eval()


def _ids(batch: int = 2, tokens: int = 40, padded: bool = True):
    ids = torch.randint(3, VOCAB, (batch, tokens), generator=torch.Generator().manual_seed(0))
    attention_mask = torch.ones_like(ids)
    if padded:
        attention_mask[0, :7] = 0  # left padding
    return ids, attention_mask


def _logits(model, ids, attention_mask):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=attention_mask).logits


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen2_sliding", "gemma2"])
def test_softmax_is_bit_identical_to_eager(arch):
    model = _model(arch)
    name = hooks.register_attention("softmax")
    assert name == "attnlab_softmax"
    for padded in (False, True):
        ids, am = _ids(padded=padded)
        ref = _logits(model, ids, am if padded else None)
        model.set_attn_implementation(name)
        assert model.config._attn_implementation == name
        out = _logits(model, ids, am if padded else None)
        model.set_attn_implementation("eager")
        assert torch.equal(out, ref), f"max abs diff {(out - ref).abs().max().item()}"
    # built with the name from the start: the same weights, the same logits
    fresh = _model(arch, name)
    ids, am = _ids()
    assert torch.equal(_logits(fresh, ids, am), _logits(model, ids, am))


@pytest.mark.parametrize("arch", ["llama", "qwen2_sliding", "gemma2"])
@pytest.mark.parametrize("recipe", ["entmax_a1.5", "relu_p2_b0"])
def test_map_equals_the_context_substitution(arch, recipe):
    model = _model(arch)
    ids, am = _ids()
    eager = _logits(model, ids, am)
    with hooks.substituted(model, recipe):
        sub = _logits(model, ids, am)
    model.set_attn_implementation(hooks.register_attention(recipe))
    out = _logits(model, ids, am)
    torch.testing.assert_close(out, sub, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(out, eager, atol=1e-3)
    model.set_attn_implementation("eager")  # switching back restores eager
    assert torch.equal(_logits(model, ids, am), eager)


def test_names_are_stable_and_accepted_by_transformers(tmp_path):
    from transformers import AutoModelForCausalLM
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    assert hooks.register_attention("entmax_a1.5") == hooks.register_attention("entmax_a1.5") == "attnlab_entmax_a1.5"
    name = hooks.register_attention("relu_p4_bauto", b_auto=-0.5)  # '-' and '.' in a name
    assert name == "attnlab_relu_p4_b-0.5"
    assert hooks.register_attention("relu_p4_bauto", b_auto=-0.5) == name
    assert hooks.register_attention("sigmoid_b0", b_auto=1.0) == "attnlab_sigmoid_b0"  # ignored, as in resolve
    assert name in ALL_ATTENTION_FUNCTIONS.valid_keys() and name in ALL_MASK_ATTENTION_FUNCTIONS
    model = _model("llama")
    model.save_pretrained(tmp_path)
    ids, am = _ids()
    with hooks.substituted(model, "relu_p4_bauto", b_auto=-0.5):
        ref = _logits(model, ids, am)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation=name).eval()
    assert loaded.config._attn_implementation == name
    torch.testing.assert_close(_logits(loaded, ids, am), ref, rtol=1e-5, atol=1e-6)


def test_contexts_work_on_a_registered_model_and_give_its_name_back():
    name = hooks.register_attention("entmax_a1.5")
    model = _model("llama", name)
    ids, am = _ids()
    own = _logits(model, ids, am)
    layers = set()
    with hooks.observed(model, lambda block: layers.add(block.layer)):  # observes the entmax model as it is
        assert torch.equal(_logits(model, ids, am), own)
    assert layers == {0, 1} and model.config._attn_implementation == name
    with hooks.substituted(model, "relu_p2_b0"):  # every head replaced: the relu model
        sub = _logits(model, ids, am)
    assert model.config._attn_implementation == name and torch.equal(_logits(model, ids, am), own)
    relu = _model("llama", hooks.register_attention("relu_p2_b0"))
    torch.testing.assert_close(sub, _logits(relu, ids, am), rtol=1e-5, atol=1e-6)
    with hooks.substituted(model, "relu_p2_b0", heads=[(1, 2)]):  # one head replaced, the others keep entmax
        one = _logits(model, ids, am)
    assert not torch.equal(one, own) and not torch.allclose(one, sub, atol=1e-4)
    assert not any(hasattr(m, "_attnlab_route") for m in model.modules())


def test_dropout_applies_in_training_only():
    model = _model("llama", hooks.register_attention("entmax_a1.5"), attention_dropout=0.5)
    ids, am = _ids()
    assert torch.equal(_logits(model, ids, am), _logits(model, ids, am))
    model.train()
    torch.manual_seed(1)
    first = _logits(model, ids, am)
    assert not torch.equal(first, _logits(model, ids, am))


class _Rows(torch.utils.data.Dataset):
    def __init__(self, n: int = 16, tokens: int = 24) -> None:
        g = torch.Generator().manual_seed(3)
        base = torch.randint(3, VOCAB, (4, tokens), generator=g)
        self.rows = [base[i % 4] for i in range(n)]  # four sequences, repeated: loss falls within a few steps

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self.rows[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


@pytest.mark.parametrize(("arch", "recipe"), [("llama", "entmax_a1.5"), ("qwen2", "relu_p2_b0")])
def test_trainer_trains_and_generate_works(arch, recipe, tmp_path):
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    name = hooks.register_attention(recipe)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_config(arch, attention_dropout=0.1), attn_implementation=name)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=4,
        per_device_train_batch_size=4,
        learning_rate=3e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = Trainer(model=model, args=args, train_dataset=_Rows())
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses), losses
    assert losses[-1] < losses[0], losses
    assert model.config._attn_implementation == name
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    model.eval()
    ids, am = _ids(tokens=12)
    with torch.no_grad():
        cached = model.generate(input_ids=ids, attention_mask=am, max_new_tokens=4, do_sample=False)
        plain = model.generate(input_ids=ids, attention_mask=am, max_new_tokens=4, do_sample=False, use_cache=False)
    assert cached.shape == (2, 16) and torch.equal(cached, plain)


def test_bad_input_names_what_is_allowed(monkeypatch):
    with pytest.raises(ValueError, match=r"unknown row map 'nope'.*entmax_a1\.5"):
        hooks.register_attention("nope")
    with pytest.raises(ValueError, match="needs b_auto"):
        hooks.register_attention("relu_p4_bauto")
    with pytest.raises(TypeError, match="row-map name such as 'softmax'"):
        hooks.register_attention(3)
    with pytest.raises(TypeError, match="b_auto must be a number"):
        hooks.register_attention("relu_p4_bauto", b_auto="1.5")
    with pytest.raises(ValueError, match="must be finite"):
        hooks.register_attention("relu_p4_bauto", b_auto=math.inf)
    softmax = rowmaps.get("softmax")
    for bad in ("my/map", "sdpa_like", "a|b"):  # names transformers would read as a Hub kernel or a backend
        monkeypatch.setattr(rowmaps, "get", lambda name, bad=bad: dataclasses.replace(softmax, name=bad))
        with pytest.raises(ValueError, match="cannot name a transformers attention implementation"):
            implementations.register_attention("anything")
