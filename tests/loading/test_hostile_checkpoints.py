"""No hostile checkpoint loads as random or NaN weights: each loads as its file's weights or fails in one line naming it.

The cases are generated, fields × hostile values: every whole-number field of a tiny Llama's config × ("30",
NaN, -1, 0, 10^9, 7), its model_type × other architectures, GGUF header fields × their hostile values, and edits of
the tensors in either format (one removed, a layer removed, one reshaped, one added, one NaN, none at all). A field
added to a list is covered without a new test. Each case, loaded in process with ``load_model``, ends within 60 s
either in a model whose every tensor is finite and the file's or in one attnlab.Error line naming the file, with no
converted model left in the cache; two cases run ``attnlab audit`` to show its stderr is that one line.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlab
from attnlab import cli
from attnlab.loading import load_model

from .gguf_files import write_llama, write_llama_gguf

pytest.importorskip("gguf")

TINY = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)
HOSTILE = ("30", math.nan, -1, 0, 10**9, 7)  # 7 divides none of the tiny sizes


def _tiny_config():
    from transformers import LlamaConfig

    return LlamaConfig(**TINY)


def _int_fields() -> list[str]:
    """Every whole-number field of the tiny config (ids, sizes, defaults alike)."""
    saved = _tiny_config().to_dict()
    return sorted(k for k, v in saved.items() if isinstance(v, int) and not isinstance(v, bool))


@dataclass(frozen=True)
class Case:
    """One hostile checkpoint: how it is made from the clean one, in which format, and what it must end in
    (``loaded`` for the clean ones, ``refused`` where no loadable reading exists, else either outcome)."""

    name: str
    kind: str  # "hf" or "gguf"
    config: Callable[[dict], dict] | None = None
    fields: dict | None = None
    tensors: Callable[[dict], dict] | None = None
    must: str = "either"


def _set(**fields):
    return lambda raw: {**raw, **fields}


def _without(*prefixes: str):
    return lambda tensors: {k: v for k, v in tensors.items() if not k.startswith(prefixes)}


def _edit(name: str, change):
    return lambda tensors: {**tensors, name: change(tensors[name])}


def _bert(raw: dict) -> dict:
    from transformers import BertConfig

    return {
        **BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4).to_dict(),
        "architectures": ["BertModel"],
    }


def _nan(t):
    t = t.clone() if isinstance(t, torch.Tensor) else t.copy()
    t[0, 0] = math.nan
    return t


def _gguf_value(value):
    import gguf

    if isinstance(value, float):
        return value, gguf.GGUFValueType.FLOAT32
    return value, gguf.GGUFValueType.INT32 if value < 0 else gguf.GGUFValueType.UINT32


Q0 = "model.layers.0.self_attn.q_proj.weight"
UP0 = "model.layers.0.mlp.up_proj.weight"
HF_CASES = [
    Case("hf-clean", "hf", must="loaded"),
    *(
        Case(f"hf-{field}={value!r}", "hf", config=_set(**{field: value}))
        for field in _int_fields()
        for value in HOSTILE
    ),
    *(
        Case(f"hf-model_type={t}", "hf", config=_set(model_type=t), must="refused")
        for t in ("gpt2", "qwen2", "gemma3_text", "bert")
    ),
    Case("hf-BertModel-config", "hf", config=_bert, must="refused"),
    Case("hf-tensor-removed", "hf", tensors=_without(Q0), must="refused"),
    Case("hf-layer-removed", "hf", tensors=_without("model.layers.1."), must="refused"),
    Case("hf-tensor-transposed", "hf", tensors=_edit(UP0, lambda t: t.T.contiguous()), must="refused"),
    Case(
        "hf-tensor-extra",
        "hf",
        tensors=lambda t: {**t, "model.layers.2.self_attn.q_proj.weight": t[Q0].clone()},
        must="refused",
    ),
    Case("hf-tensor-nan", "hf", tensors=_edit(Q0, _nan), must="refused"),
    # a quantized checkpoint's tensors are checked after transformers loads them: a config claiming one is no way round
    *(
        Case(
            f"hf-{method}-tensor-removed",
            "hf",
            config=_set(quantization_config=q),
            tensors=_without(Q0),
            must="refused",
        )
        for method, q in {
            "fp8": {"quant_method": "fp8", "weight_block_size": [16, 16]},
            "nonsense": {"quant_method": "x"},
        }.items()
    ),
]
GGUF_FIELDS = {
    "llama.attention.head_count": (0, -1, 2**32 - 1),
    "llama.embedding_length": (66,),  # not a multiple of the 4 heads
    "llama.block_count": (100_000,),
    "llama.rope.freq_base": (math.nan, 0.0, -1.0, math.inf),
}
GUP0 = "blk.0.ffn_up.weight"
GGUF_CASES = [
    Case("gguf-clean", "gguf", must="loaded"),
    *(
        Case(f"gguf-{key}={value!r}", "gguf", fields={key: _gguf_value(value)}, must="refused")
        for key, values in GGUF_FIELDS.items()
        for value in values
    ),
    Case("gguf-no-tensors", "gguf", tensors=lambda t: {}, must="refused"),
    Case("gguf-tensor-removed", "gguf", tensors=_without("blk.1.attn_q.weight"), must="refused"),
    Case("gguf-tensor-reshaped", "gguf", tensors=_edit(GUP0, lambda a: a[:-1]), must="refused"),
    Case("gguf-tensor-transposed", "gguf", tensors=_edit(GUP0, lambda a: np.ascontiguousarray(a.T)), must="refused"),
    Case("gguf-tensor-nan", "gguf", tensors=_edit(GUP0, _nan), must="refused"),
]


@dataclass(frozen=True)
class Clean:
    """The clean checkpoints every case edits: a tiny Llama folder and its tensors, and the tiny Llama (with its
    tokenizer) written as a GGUF."""

    folder: Path
    tensors: dict[str, torch.Tensor]
    gguf_model: object
    gguf_tokenizer: object


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Clean:
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("clean")
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(_tiny_config()).save_pretrained(root / "hf")
    model, tok = write_llama_gguf(root / "gguf" / "tiny.gguf")
    return Clean(root / "hf", load_file(root / "hf" / "model.safetensors"), model, tok)


def _make(case: Case, clean: Clean, where: Path) -> Path:
    """The hostile checkpoint of ``case``, written under ``where``."""
    from safetensors.torch import save_file

    where.mkdir()
    if case.kind == "gguf":
        return write_llama(
            where / "hostile.gguf", clean.gguf_model, clean.gguf_tokenizer, fields=case.fields, tensors=case.tensors
        )
    raw = json.loads((clean.folder / "config.json").read_text())
    (where / "config.json").write_text(json.dumps(case.config(raw) if case.config else raw))
    if case.tensors is None:
        os.link(clean.folder / "model.safetensors", where / "model.safetensors")
    else:
        save_file(case.tensors(dict(clean.tensors)), where / "model.safetensors", metadata={"format": "pt"})
    return where


def _file_tensors(case: Case, path: Path, clean: Clean) -> dict[str, torch.Tensor]:
    """What a correct load of ``path`` holds: the folder's own tensors, or those of the model the GGUF was written
    from."""
    from safetensors.torch import load_file

    if case.kind == "gguf":
        return clean.gguf_model.state_dict()
    return load_file(path / "model.safetensors")


def _cached_models(cache: Path) -> list[Path]:
    """Everything in the cache but the digests of files read (a hash of the user's file, not a model)."""
    if not cache.exists():
        return []
    return [p for p in cache.rglob("*") if p.is_file() and p.parent.name != "digests"] + list(cache.rglob(".convert-*"))


@pytest.mark.parametrize("case", HF_CASES + GGUF_CASES, ids=lambda c: c.name)
def test_a_hostile_checkpoint_loads_as_its_file_or_fails_in_one_line(case, clean, cache, tmp_path):
    path = _make(case, clean, tmp_path / "ckpt")
    start = time.monotonic()
    try:
        model, _ = load_model(path, tokenizer=False)
    except attnlab.Error as exc:
        message = str(exc)
        assert case.must != "loaded", message  # else every case would pass by refusing every file
        assert "\n" not in message and str(path) in message, message
        assert _cached_models(cache) == []
    else:
        assert case.must != "refused", f"{case.name} loaded"
        held = _file_tensors(case, path, clean)
        loaded = model.state_dict()
        assert set(loaded) <= set(held), set(loaded) - set(held)  # a tensor not in the file would be random
        for name, tensor in loaded.items():
            assert bool(torch.isfinite(tensor).all()) and torch.equal(tensor, held[name]), name
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("name", ["hf-layer-removed", "gguf-llama.block_count=100000"])
def test_the_command_line_prints_one_line(name, clean, cache, tmp_path, capsys):
    case = next(c for c in HF_CASES + GGUF_CASES if c.name == name)
    path = _make(case, clean, tmp_path / "ckpt")
    code = cli.main(["audit", "--model", str(path), "--prompts", "2", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and str(path) in err[0], err
    assert not (tmp_path / "out").exists() and _cached_models(cache) == []
