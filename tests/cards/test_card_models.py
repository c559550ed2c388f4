"""A card works unchanged on architectures its other tests never use (a Qwen2 GGUF with QKV biases, Gemma 3 with
sliding-window layers), and on these random models it reproduces nothing."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import pytest
import torch

from attnlab.cards import build as cards
from attnlab.cards.page import PANELS
from attnlab.cli import main
from cards.test_card import TINY
from hooks.models import configs
from loading.gguf_files import write_qwen2_gguf
from offline import build_tokenizer


def _qwen2_gguf(folder):
    pytest.importorskip("gguf")
    model, _ = write_qwen2_gguf(folder / "qwen2.gguf")
    return folder / "qwen2.gguf", model.config


def _gemma3(folder):
    """The bit-identity check's Gemma 3 (window 8 on layers 0 and 2) sized to a tokenizer and saved with it, as
    ``checkpoints.save_checkpoint`` saves a Llama, so the card loads it by path."""
    from transformers import AutoModelForCausalLM

    tok = build_tokenizer(folder / "_tokenizer", "word")
    config = configs()["gemma3"]
    config.vocab_size = len(tok)
    config.bos_token_id, config.eos_token_id, config.pad_token_id = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.save_pretrained(folder / "gemma3")
    tok.save_pretrained(folder / "gemma3")
    return folder / "gemma3", config


MODELS = {"qwen2-gguf": _qwen2_gguf, "gemma3": _gemma3}


@pytest.fixture(scope="module", params=["qwen2-gguf", "gemma3"])
def carded(request, tmp_path_factory):
    """The model's config and the card ``attnlab card`` wrote of it under test_card's tiny plan."""
    folder = tmp_path_factory.mktemp(request.param)
    checkpoint, config = MODELS[request.param](folder)
    if "sliding_attention" in getattr(config, "layer_types", ()):
        # the induction prompts and documents must outrun the window, or sliding layers attend like the full ones
        assert config.sliding_window < min(TINY["length"], TINY["tokens"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTNLAB_CACHE", str(folder / "cache"))  # the GGUF's conversion, kept out of the user's cache
        mp.setitem(cards.PLANS, "quick", dataclasses.replace(cards.PLANS["quick"], **TINY))
        assert main(["card", str(checkpoint), "--out", str(folder / "out"), "--no-progress"]) == 0
    data = json.loads((folder / "out" / "card.json").read_text(), parse_constant=pytest.fail)
    return config, folder / "out", data


def test_every_head_of_the_model_is_one_row(carded):
    config, _, data = carded
    assert data["model_type"] == config.model_type
    heads = sorted((h["layer"], h["head"]) for h in data["heads"])
    assert heads == list(itertools.product(range(config.num_hidden_layers), range(config.num_attention_heads)))


def test_the_unsafe_table_has_every_cell_under_a_finite_b_auto(carded):
    _, _, data = carded
    cells = sorted((r["suite"], r["b"], r["p"]) for r in data["substitution"]["unsafe"])
    assert cells == sorted(itertools.product(cards.SUITES, ("0", "auto"), cards.DEGREES))
    assert isinstance(data["b_auto"], float) and math.isfinite(data["b_auto"])


def test_the_page_names_every_panel(carded):
    _, out, _ = carded
    page = (out / "index.html").read_text(encoding="utf-8")
    assert [panel for panel in PANELS if f">{panel}</h2>" not in page] == []


def _verdicts(value):
    if isinstance(value, dict):
        yield from ([value["verdict"]] if "verdict" in value else [])
        for v in value.values():
            yield from _verdicts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _verdicts(v)


def test_an_untrained_model_reproduces_nothing(carded):
    _, _, data = carded
    verdicts = list(_verdicts(data))
    assert data["trained"]["trained"] is False and len(verdicts) >= 3
    assert "reproduced" not in verdicts and set(verdicts) == {"not checked"}
