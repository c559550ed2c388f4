"""attnlab's in-memory API on models built in Python returns, as DataFrames, exactly what the commands write."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

import attnlab
from attnlab.api import entry as api
from attnlab.cards import build as cards
from attnlab.cli import main
from attnlab.diagnostics import row_stats as plain_row_stats
from attnlab.diagnostics.stats import aggregate
from offline import build_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp("tok"), "bpe")


def _model(arch: str, tokenizer, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**common)) if arch == "llama" else Qwen2ForCausalLM(Qwen2Config(**common))


@pytest.fixture(scope="module")
def llama(tokenizer):
    return _model("llama", tokenizer)


@pytest.fixture(scope="module")
def qwen(tokenizer):
    return _model("qwen2", tokenizer, seed=1)


def _saved(model, tokenizer, folder):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_audit_rows_equal_the_rows_the_command_writes(arch, request, tokenizer, tmp_path):
    model = request.getfixturevalue("llama" if arch == "llama" else "qwen")
    target = "argmax" if arch == "llama" else "answer"
    rows = attnlab.audit(
        model, tokenizer, "niah", n_prompts=2, pad=2, b=(0.0, "auto"), queries="every:4", target=target, sigmoid=True
    )
    assert model.training  # the user's mode comes back
    assert list(rows.columns[:5]) == ["layer", "head", "prompt", "query", "b"]
    assert set(rows["layer"]) == {0, 1} and set(rows["head"]) == {0, 1, 2, 3} and set(rows["prompt"]) == {0, 1}
    main(
        [
            "audit",
            "--model",
            _saved(model, tokenizer, tmp_path / "ckpt"),
            "--suite",
            "niah",
            "--prompts",
            "2",
            "--pad",
            "2",
            "--b",
            "0",
            "auto",
            "--queries",
            "every:4",
            "--target",
            target,
            "--sigmoid",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    b_auto = rows.attrs["b_auto"]
    assert rows.attrs["biases"] == {"0": 0.0, "auto": b_auto}
    for label, value in (("0", 0.0), ("auto", b_auto)):
        written = pd.read_parquet(tmp_path / "out" / f"rows_b{label}.parquet")
        mine = rows[rows["b"] == value].drop(columns="b").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, written)
    table = aggregate(rows[rows["b"] == 0], fractions=["safe_p4"], medians=["s_p4", "lambda_n"])
    assert len(table) == 8 and table["n_rows"].sum() == (rows["b"] == 0).sum()


def test_audit_reads_texts_and_token_ids(llama, tokenizer):
    ids = tokenizer("the cat sat on the mat and the dog ran far away")["input_ids"]
    rows = attnlab.audit(llama, tokenizer, ["a short text to read", ids], queries="all", p=4)
    assert sorted(rows["prompt"].unique()) == [0, 1]
    assert rows.groupby("prompt")["query"].max().tolist() == [
        len(tokenizer("a short text to read")["input_ids"]) - 1,
        len(ids) - 1,
    ]
    assert {"s_p4", "p_star", "entropy", "lambda_n", "sink_mass"} <= set(rows.columns)
    assert (rows["b"] == 0).all() and len(rows) == 2 * 4 * (rows.groupby("prompt")["query"].nunique().sum())


def test_substitute_and_heads_equal_the_commands_tables(llama, tokenizer, tmp_path):
    folder = _saved(llama, tokenizer, tmp_path / "ckpt")
    table, answers = attnlab.substitute(
        llama, tokenizer, ["relu_p4_b0", "sigmoid_bauto"], n_prompts=2, pad=2, answers=True
    )
    main(
        [
            "substitute",
            "--model",
            folder,
            "--prompts",
            "2",
            "--pad",
            "2",
            "--recipes",
            "relu_p4_b0",
            "sigmoid_bauto",
            "--out",
            str(tmp_path / "sub"),
        ]
    )
    pd.testing.assert_frame_equal(answers, pd.read_parquet(tmp_path / "sub" / "answers.parquet"))
    assert table["recipe"].tolist() == ["softmax", "relu_p4_b0", "sigmoid_bauto"]
    assert table["n"].tolist() == [2, 2, 2] and math.isfinite(table.attrs["b_auto"])

    types, counts = attnlab.heads(llama, tokenizer, n_prompts=2, length=40, queries="every:5", counts=True)
    main(
        [
            "heads",
            "--model",
            folder,
            "--prompts",
            "2",
            "--length",
            "40",
            "--queries",
            "every:5",
            "--out",
            str(tmp_path / "heads"),
        ]
    )
    pd.testing.assert_frame_equal(types, pd.read_csv(tmp_path / "heads" / "heads.csv"), check_dtype=False)
    assert counts["heads"].sum() >= 8 and set(types["head_type"]) <= {"sink", "induction", "local", "diffuse"}


def test_sinks_give_first_token_mass_per_layer_and_head(qwen, tokenizer):
    texts = ["one two three four five six seven eight nine ten eleven twelve thirteen fourteen"] * 2
    table = attnlab.sinks(qwen, tokenizer, texts)
    assert list(table.columns) == ["layer", "head", "mass", "uniform", "queries", "ratio"]
    assert len(table) == 8 and table["mass"].between(0, 1).all()
    raw = attnlab.sinks(qwen, tokenizer, texts, per_document=True)
    assert sorted(raw["document"].unique()) == [0, 1]
    assert np.allclose(raw.groupby(["layer", "head"])["mass"].mean().to_numpy(), table["mass"].to_numpy())
    generic = attnlab.sinks(qwen, tokenizer, n_documents=1, tokens=32)
    assert (generic["queries"] == 32 - 8).all()


def test_row_stats_carries_location_columns():
    torch.manual_seed(0)
    scores = torch.randn(2, 3, 4, 5)
    rows = attnlab.row_stats(scores, layer=7, p=(2, 4))
    assert list(rows.columns[:4]) == ["layer", "batch", "head", "query"]
    assert (rows["layer"] == 7).all()
    flat = scores.reshape(-1, 5)
    for i in (0, 5, 17, 23):
        r = rows.iloc[i]
        assert flat[i].argmax() == scores[r["batch"], r["head"], r["query"]].argmax() == r["argmax"]
    pd.testing.assert_frame_equal(
        rows.drop(columns=["layer", "batch", "head", "query"]), plain_row_stats(scores, p=(2, 4))
    )
    three = attnlab.row_stats(scores[0], head=[4, 5, 6], query_offset=10)
    assert list(three.columns[:2]) == ["head", "query"]
    assert three["head"].tolist()[:5] == [4, 4, 4, 4, 5] and three["query"].tolist()[:5] == [10, 11, 12, 13, 10]
    assert "head" not in attnlab.row_stats(scores[0]).columns  # unlabelled (..., keys): rows only
    assert attnlab.row_stats(scores[0, 0], head=2)["head"].eq(2).all()


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda m, t: attnlab.audit(m, t, "nope"), ValueError, "prompts names no suite"),
        (lambda m, t: attnlab.audit(m, t, p=(2, -1)), ValueError, "p takes"),
        (lambda m, t: attnlab.audit(m, t, b=("sometimes",)), ValueError, "b takes"),
        (lambda m, t: attnlab.audit(m, t, queries="every:0"), ValueError, "queries takes"),
        (lambda m, t: attnlab.audit(m, t, target="key"), ValueError, "target takes"),
        (lambda m, t: attnlab.audit(m, t, n_prompts=0), ValueError, "n_prompts takes an int >= 1"),
        (lambda m, t: attnlab.audit(m, t, n_prompts=2.5), TypeError, "n_prompts takes an int"),
        (lambda m, t: attnlab.audit(m, t, n_prompts=1, pad=5000), ValueError, "model's context is 512"),
        (lambda m, t: attnlab.audit(m, t, [[0, 10**6]]), ValueError, "prompts[0] holds token ids outside"),
        (lambda m, t: attnlab.audit(m, t, ["text"], target="answer"), ValueError, "target='answer'"),
        (lambda m, t: attnlab.audit(torch.nn.Linear(2, 2), t), TypeError, "not a transformers PreTrainedModel"),
        (lambda m, t: attnlab.audit("llama", t), TypeError, "model takes"),
        (lambda m, t: attnlab.audit(m, None), TypeError, "tokenizer takes"),
        (lambda m, t: attnlab.substitute(m, t, "relu_q9"), ValueError, "relu_q9"),
        (lambda m, t: attnlab.substitute(m, t, []), TypeError, "recipes takes"),
        (lambda m, t: attnlab.substitute(m, t, ["sigmoid_b0", "sigmoid_b0"]), ValueError, "recipes has repeated"),
        (lambda m, t: attnlab.substitute(m, t, "sigmoid_b0", ["text"]), TypeError, "prompts takes a suite name"),
        (lambda m, t: attnlab.heads(m, t, rule="first"), ValueError, "rule takes"),
        (lambda m, t: attnlab.heads(m, t), ValueError, "length = 1024: the prompts would reach 1024 tokens"),
        (lambda m, t: attnlab.sinks(m, t, ["short"]), ValueError, "min_query"),
        (lambda m, t: attnlab.sinks(m, t, "one text"), TypeError, "texts takes"),
        (lambda m, t: attnlab.row_stats(torch.randn(2, 3, 4, 5), head=[0, 1]), ValueError, "head takes 3 head labels"),
        (lambda m, t: attnlab.row_stats(torch.randn(2, 3, 4, 5), layer=-1), ValueError, "layer takes"),
        (lambda m, t: attnlab.row_stats([[1.0, 2.0]]), TypeError, "scores takes"),
    ],
)
def test_bad_arguments_name_the_argument_not_a_flag(llama, tokenizer, call, error, words):
    with pytest.raises(error) as info:
        call(llama, tokenizer)
    assert words in str(info.value)
    assert "--" not in str(info.value)


def test_the_api_is_at_the_package_top_and_documented():
    for name in attnlab.API:
        fn = getattr(attnlab, name)
        owner = cards if name == "card" else api
        assert fn is getattr(owner, name) and name in dir(attnlab)
        assert "Args:" in fn.__doc__ and "Returns:" in fn.__doc__
        assert any(key in fn.__doc__ for key in ("Polynomial Concentration", "Attention Sinks Essential"))
    with pytest.raises(AttributeError):
        attnlab.no_such_function  # noqa: B018


def test_the_in_memory_collector_holds_the_rows_the_file_writer_writes(tmp_path):
    from attnlab.diagnostics import RowOptions
    from attnlab.diagnostics.stream import RowStatsCollector, RowStatsWriter, read_rows

    torch.manual_seed(1)
    opt = RowOptions.make(p=(2, 8), b=0.3)
    sinks = (
        RowStatsWriter(tmp_path / "rows.parquet", opt, every=2, flags=("answer_key",), chunk_values=7),
        RowStatsCollector(opt, every=2, flags=("answer_key",), chunk_values=7),
    )
    for layer in range(3):
        scores, mask = torch.randn(1, 2, 6, 9), torch.rand(1, 1, 6, 9) > 0.2
        for sink in sinks:
            sink.add(scores, mask, layer=layer, prompt=4, query_offset=3, flags={"answer_key": layer == 1})
    path, frame = (sink.close() for sink in sinks)
    pd.testing.assert_frame_equal(frame, read_rows(path)[0])
    empty = RowStatsCollector(opt).close()
    assert len(empty) == 0 and list(empty.columns[:4]) == ["layer", "head", "prompt", "query"]
