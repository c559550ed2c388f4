"""The Python API's numbers have the command line's bounds (``options.UPPER``), and a request that cannot fit the
model's window is refused from its numbers, naming the window, before any prompt is built: in well under a second."""

from __future__ import annotations

import time

import pytest
import torch

from attnlab import options
from attnlab.api import entry as api
from attnlab.errors import ArgumentError
from offline import build_tokenizer


@pytest.fixture(scope="module")
def model_and_tokenizer(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer(tmp_path_factory.mktemp("tok"), "bpe")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=256,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config), tokenizer


CASES = [
    ("audit", {"n_prompts": 10**9}, rf"n_prompts takes an int of at most {options.UPPER['prompts']:,.0f}"),
    ("audit", {"n_prompts": 1, "length": 10**7}, rf"length takes an int of at most {options.TOKENS_MAX:,}"),
    (
        "audit",
        {"n_prompts": 1, "length": 100_000},
        "length = 100000: the prompts would reach 100000 tokens but the model's context is 256",
    ),
    ("audit", {"n_prompts": 1, "pad": 10**9}, rf"pad takes an int of at most {options.UPPER['pad']:,.0f}"),
    ("audit", {"n_prompts": 1, "pad": 1_000_000}, "the model's context is 256"),
    ("substitute", {"n_prompts": 10**9}, "n_prompts takes an int of at most"),
    ("heads", {"n_prompts": 10**9}, "n_prompts takes an int of at most"),
    ("sinks", {"tokens": 10**8}, rf"tokens takes an int of at most {options.TOKENS_MAX:,}"),
    ("sinks", {"n_documents": 10**9}, rf"n_documents takes an int of at most {options.UPPER['docs']:,.0f}"),
]


@pytest.mark.parametrize(("entry", "kwargs", "match"), CASES)
def test_the_api_refuses_what_the_command_refuses_before_any_work(model_and_tokenizer, entry, kwargs, match):
    model, tokenizer = model_and_tokenizer
    args = {"audit": ("niah",), "substitute": (["relu_p2_b0"], "niah"), "heads": (), "sinks": ()}[entry]
    started = time.monotonic()
    with pytest.raises(ArgumentError, match=match):
        getattr(api, entry)(model, tokenizer, *args, **kwargs)
    assert time.monotonic() - started < 5.0  # refused from the numbers (a built prompt set would take minutes)
