"""The Python API's numbers have the command line's bounds (``options.UPPER``), and a request that cannot fit the
model's window is refused from its numbers, naming the window, before any prompt or document is built."""

from __future__ import annotations

import pytest

from attnlab import hooks, options, tasks
from attnlab.analyses import sinks as api_sinks
from attnlab.api import entry as api
from attnlab.errors import ArgumentError
from checkpoints import save_checkpoint


@pytest.fixture(scope="module")
def model_and_tokenizer(tmp_path_factory):
    folder = save_checkpoint(tmp_path_factory.mktemp("ckpt"), tokenizer_kind="bpe", context=256)
    return hooks.load_model(str(folder))


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
def test_the_api_refuses_what_the_command_refuses_before_any_work(
    model_and_tokenizer, entry, kwargs, match, monkeypatch
):
    def never(*args, **kwargs):
        raise AssertionError("prompts or documents were built before the numbers were checked")

    # refused from the numbers: building a prompt set of that size would take minutes and gigabytes
    monkeypatch.setattr(tasks, "build_suite", never)
    monkeypatch.setattr(api_sinks, "documents", never)
    model, tokenizer = model_and_tokenizer
    args = {"audit": ("niah",), "substitute": (["relu_p2_b0"], "niah"), "heads": (), "sinks": ()}[entry]
    with pytest.raises(ArgumentError, match=match):
        getattr(api, entry)(model, tokenizer, *args, **kwargs)
