"""A save_pretrained folder loads back as the same model (bit-identical logits, eval mode, eager attention) with its
tokenizer, and every folder that cannot load fails before the weights with one line that says what to do."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from attnlab.loading.load import (
    LoadError,
    check_checkpoint,
    check_model,
    load_model,
    load_tokenizer,
    placement,
    quiet_transformers,
)
from offline import build_tokenizer

TEXT = "the old cat sat on the mat"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny Llama and its tokenizer, saved as a user would have them; the model itself for comparison."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    folder = tmp_path_factory.mktemp("ckpt")
    tok = build_tokenizer(folder / "_tok", "word")
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder, model, tok


def test_a_saved_folder_loads_as_the_same_model_and_tokenizer(saved):
    folder, model, tok = saved
    loaded, loaded_tok = load_model(folder)
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    assert torch.equal(loaded_tok(TEXT, return_tensors="pt")["input_ids"], ids)
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
    assert not loaded.training and loaded.config._attn_implementation == "eager"
    assert loaded.dtype == torch.float32 and loaded.device.type == "cpu"
    half, none = load_model(folder, dtype="bfloat16", tokenizer=False)
    assert half.dtype == torch.bfloat16 and none is None


def test_check_model_reads_the_tokenizer_but_never_the_weights(saved, tmp_path, monkeypatch):
    folder = saved[0]
    from attnlab.loading import load

    def no_weights(*_):
        raise AssertionError("weights loaded")

    monkeypatch.setattr(load, "_load", no_weights)
    assert check_model(folder) == folder
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).write_bytes((folder / name).read_bytes())
    with pytest.raises(LoadError, match="has no usable tokenizer .*tokenizer.save_pretrained"):
        check_model(bare)
    with pytest.raises(LoadError, match="has no usable tokenizer"):
        load_tokenizer(bare)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p: p / "missing", "neither a path nor a known model name"),
        (lambda p: _write(p / "weights.bin", b"x"), "is a file but not a .gguf"),
        (lambda p: _folder(p / "f", {}), "has no config.json and no .gguf file"),
        (lambda p: _folder(p / "f", {"config.json": b"{}"}), "has no weights .*save_pretrained"),
        (lambda p: _folder(p / "f", {"config.json": b"{}", "notes.txt": b"x"}), "has no weights"),
    ],
)
def test_unloadable_folders_say_what_to_do(tmp_path, make, match):
    with pytest.raises(LoadError, match=match):
        check_checkpoint(make(tmp_path))


def test_either_weight_format_counts(tmp_path):
    for name in ("model-00001-of-00002.safetensors", "pytorch_model.bin"):
        folder = _folder(tmp_path / name, {"config.json": b"{}", name: b""})
        assert check_checkpoint(folder) == folder


def test_pickled_objects_in_the_weights_are_refused_not_run(saved, tmp_path):
    folder = _folder(tmp_path / "evil", {"config.json": (saved[0] / "config.json").read_bytes()})
    torch.save({"model.embed_tokens.weight": _Payload()}, folder / "pytorch_model.bin")
    with pytest.raises(LoadError, match="hold Python objects beyond tensors, which are never unpickled"):
        load_model(folder, tokenizer=False)
    assert not _Payload.ran


def test_a_config_of_no_causal_lm_is_one_line(tmp_path):
    folder = _folder(
        tmp_path / "odd", {"config.json": json.dumps({"model_type": "no-such-arch"}).encode(), "model.safetensors": b""}
    )
    with pytest.raises(LoadError, match=f"could not load a causal LM from {folder}: ") as info:
        load_model(folder, tokenizer=False)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "dtype, device, match",
    [
        ("float64", "cpu", "unknown dtype 'float64'; use one of auto, float32, bfloat16, float16"),
        ("float32", "mps", "unknown device 'mps'; use auto .*, cpu, cuda or cuda:N"),
        ("float32", "cuda:0", "device 'cuda:0' is not available: this torch sees no CUDA device"),
    ],
)
def test_dtype_and_device_are_checked_first(dtype, device, match):
    with pytest.raises(LoadError, match=match):
        placement(device, dtype)
    with pytest.raises(LoadError, match=match):
        load_model("no-such-folder", dtype=dtype, device=device)


def test_auto_places_the_whole_model_on_the_cpu_here():
    assert placement("auto", "auto") == (torch.device("cpu"), torch.float32, None)
    assert placement("cpu", "bfloat16") == (torch.device("cpu"), torch.bfloat16, None)


def test_the_device_map_path_gives_the_same_model(saved):
    """What ``--device auto`` does on a CUDA machine (accelerate's ``device_map="auto"``), taken here on the CPU,
    where accelerate puts every layer: the same logits as the plain load, bit for bit."""
    from attnlab.loading.load import _load

    folder, model, tok = saved
    spread, _ = _load(folder, torch.device("cpu"), torch.float32, False, False, device_map="auto")
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.equal(spread(ids).logits, model(ids).logits)
    assert not spread.training and spread.device.type == "cpu"


def test_transformers_logging_is_restored_even_after_an_error():
    from transformers.utils import logging

    logging.set_verbosity_warning()
    logging.enable_progress_bar()
    with pytest.raises(RuntimeError):
        with quiet_transformers():
            assert logging.get_verbosity() == logging.ERROR and not logging.is_progress_bar_enabled()
            raise RuntimeError
    assert logging.get_verbosity() == logging.WARNING and logging.is_progress_bar_enabled()


class _Payload:
    ran = False

    def __reduce__(self):
        return (_Payload._run, ())

    @staticmethod
    def _run():
        _Payload.ran = True
        return torch.zeros(1)


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def _folder(path, files: dict[str, bytes]):
    path.mkdir(parents=True)
    for name, data in files.items():
        (path / name).write_bytes(data)
    return path


def test_a_model_that_computes_nan_is_refused_naming_why(saved, tmp_path):
    """A NaN weight is named; a NaN rope base is refused with the config; finite weights and config numbers that
    still make the logits NaN (zero embeddings under an RMSNorm epsilon of 0: 0/0) are refused by a short forward:
    none is audited as rows of NaN."""
    folder, model, tok = saved
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.model.layers[0].self_attn.q_proj.weight[0, 0] = float("nan")
    broken.save_pretrained(tmp_path / "nan")
    tok.save_pretrained(tmp_path / "nan")
    with pytest.raises(LoadError, match=r"weight model\.layers\.0\.self_attn\.q_proj\.weight holds NaN or inf"):
        load_model(tmp_path / "nan")
    model.save_pretrained(tmp_path / "rope")
    tok.save_pretrained(tmp_path / "rope")
    _edit_config(tmp_path / "rope", rope_parameters={"rope_theta": float("nan"), "rope_type": "default"})
    with pytest.raises(LoadError, match=r"rope/config\.json: rope_parameters\.rope_theta is nan; .* must be finite"):
        load_model(tmp_path / "rope")
    zeros = copy.deepcopy(model)
    with torch.no_grad():
        zeros.model.embed_tokens.weight.zero_()
    zeros.save_pretrained(tmp_path / "zeros")
    tok.save_pretrained(tmp_path / "zeros")
    _edit_config(tmp_path / "zeros", rms_norm_eps=0.0)
    with pytest.raises(LoadError, match="computes NaN or inf logits on a 8-token input"):
        load_model(tmp_path / "zeros")


def _edit_config(folder, **fields) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **fields}))
