"""benchmarks/card_large.py writes a Qwen2 GGUF that attnlab loads as its shape says: layers, heads, vocabulary and a
tokenizer that round-trips text (a tiny shape here; the benchmark writes Qwen2.5-0.5B's)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "card_large.py"


def test_the_written_gguf_loads_as_a_qwen2_of_its_shape(tmp_path, monkeypatch):
    from attnlab.hooks import load_model
    from attnlab.loading import fetch

    tokenizer_gguf = fetch.fetched("smollm2")
    if tokenizer_gguf is None:
        pytest.skip("the tokenizer comes from SmolLM2's GGUF; run `attnlab fetch smollm2`")
    spec = importlib.util.spec_from_file_location("bench_card_large", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)  # its dataclass looks its module up there
    spec.loader.exec_module(bench)
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))  # the conversion goes to the test's own cache
    shape = bench.Shape(layers=2, d_model=64, ffn=96, heads=4, kv_heads=2, vocab=49_200, context=512)
    path = bench.write_gguf(tmp_path / "tiny.gguf", tokenizer_gguf, shape)
    model, tokenizer = load_model(str(path), device="cpu", dtype="float32")
    cfg = model.config
    assert (cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size) == ("qwen2", 2, 64)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.vocab_size) == (4, 2, 49_200)
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt").input_ids
    assert tokenizer.decode(ids[0]) == "The cat sat on the mat."
    with torch.no_grad():
        assert torch.isfinite(model(ids).logits).all()
