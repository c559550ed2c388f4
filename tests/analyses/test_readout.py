"""read_rows tables the chosen rows of each forward as row_stats does on the captured scores, at any block size."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from attnlab import hooks, tasks
from attnlab.analyses.readout import Reading, _Observer, check_queries, prompt_reading, read_rows, select_queries
from attnlab.diagnostics import RowOptions, row_stats
from attnlab.diagnostics.stream import RowStatsCollector
from attnlab.io import PARQUET_META_KEY
from attnlab.site.spec import ScoreBlock
from checkpoints import save_checkpoint

P = (2, 8)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return hooks.load_model(save_checkpoint(tmp_path_factory.mktemp("ckpt") / "model"), tokenizer=False)[0]


def test_query_selection_matches_a_brute_force_loop():
    for length in range(1, 30):
        assert select_queries("all", length) == tuple(range(length))
        assert select_queries("last", length) == (length - 1,)
        for n in range(1, 8):
            expected = [i for i in range(length) if (i + 1) % n == 0 or i == length - 1]  # i + 1 keys seen
            assert select_queries(f"every:{n}", length) == tuple(expected), (length, n)


@pytest.mark.parametrize(
    "spec", ["every:0", "every", "every:", "every:x", "every:-2", "first", "last:3", "", "All", None, 5]
)
def test_a_bad_query_selection_names_what_is_allowed(spec):
    with pytest.raises(ValueError, match="--queries takes last, all or every:N with N >= 1"):
        check_queries(spec)


def test_a_reading_refuses_answer_keys_for_unread_queries():
    with pytest.raises(ValueError, match=r"answer keys given for unread queries \[4, 9\]"):
        Reading((1, 2, 3), (0, 2), {2: 0, 4: 1, 9: 1})


def _prompt(suite, n, answer_at, **meta):
    return tasks.Prompt(
        input_ids=tuple(range(100, 100 + n)),
        answer_ids=(7,),
        answer_positions=(answer_at,),
        suite=suite,
        index=0,
        meta=meta,
    )


def test_prompt_reading_reads_the_answer_rows_against_their_keys():
    niah = _prompt("niah", 20, 6)
    queries = (3, 7, 11, 15, 19)
    assert prompt_reading(niah, "every:4") == Reading(niah.input_ids, queries)
    assert prompt_reading(niah, "every:4", "answer") == Reading(niah.input_ids, (19,), {19: 6})
    assert prompt_reading(niah, "every:4", "answer", keep_all=True) == Reading(niah.input_ids, queries, {19: 6})
    assert prompt_reading(niah, "last") == Reading(niah.input_ids, (19,))

    # induction: the last 6 positions repeat a 5-token segment, each answered one segment back, plus one
    induction = _prompt("induction", 16, 3, segment=5, repeat=6)
    answer = prompt_reading(induction, "every:3", "answer")
    assert answer.queries == (11, 14, 15)
    assert answer.answer_keys == {11: 7, 14: 10, 15: 11}
    every = prompt_reading(induction, "all", "answer", keep_all=True)
    assert every.queries == tuple(range(16))
    assert every.answer_keys == {q: q - 4 for q in range(10, 16)}


def _captured(model, ids):
    """Per layer, the (heads, T, T) pre-map scores of one forward, in one block."""
    seen = {}

    def grab(block):
        assert block.first_position == 0 and block.scores.shape[2] == len(ids)
        seen[block.layer] = block.scores[0].clone()

    with hooks.observed(model, grab, block=10_000), torch.no_grad():
        model(input_ids=torch.tensor([ids]))
    return seen


# queries on both sides of the 32-query block edges, and every row of a first block (which goes uncopied)
READINGS = [
    Reading(tuple(range(5, 75)), (0, 3, 31, 32, 40, 69)),
    Reading(tuple(range(100, 150)), (2, 5, 33, 49), {5: 1, 33: 33, 49: 9}),
    Reading(tuple(range(3, 40)), tuple(range(37)), {36: 0}),
]


@pytest.mark.parametrize("block", [32, 512])
def test_rows_equal_row_stats_of_the_captured_scores(model, tmp_path, block):
    paths = read_rows(
        model,
        READINGS,
        {"b0": RowOptions.make(p=P), "b1": RowOptions.make(p=P, b=1.0)},
        tmp_path,
        config={"run": "test"},
        device="cpu",
        block=block,
        progress=False,
    )
    assert paths == {"b0": tmp_path / "rows_b0.parquet", "b1": tmp_path / "rows_b1.parquet"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows_b0.parquet", "rows_b1.parquet"]
    for label, b in (("b0", 0.0), ("b1", 1.0)):
        meta = json.loads(pq.read_schema(paths[label]).metadata[PARQUET_META_KEY])
        assert meta["config"] == {"run": "test"} and meta["options"]["b"] == b
        rows = pd.read_parquet(paths[label])
        for i, reading in enumerate(READINGS):
            queries = list(reading.queries)
            t = len(reading.ids)
            causal = torch.ones(t, t, dtype=torch.bool).tril()[queries]
            keyed = torch.tensor([q in reading.answer_keys for q in queries])
            target = torch.tensor([reading.answer_keys.get(q, 0) for q in queries])
            for layer, z in _captured(model, list(reading.ids)).items():
                got = rows[(rows.prompt == i) & (rows.layer == layer)].sort_values(["head", "query"])
                assert got["query"].tolist() == queries * z.shape[0], (label, i, layer)
                assert got["answer_key"].tolist() == keyed.tolist() * z.shape[0]
                by_argmax = row_stats(z[:, queries], causal, p=P, b=b)
                by_key = row_stats(z[:, queries], causal, p=P, b=b, target=target)
                ref = pd.concat(
                    [
                        by_key.iloc[[j]] if keyed[j % len(queries)] else by_argmax.iloc[[j]]
                        for j in range(len(by_argmax))
                    ],
                    ignore_index=True,
                )
                for col in ("target", "s_p2", "s_p8", "rho", "lambda_n", "entropy", "target_mass"):
                    pd.testing.assert_series_equal(
                        got[col].reset_index(drop=True).astype(float),
                        ref[col].astype(float),
                        check_names=False,
                        rtol=1e-5,
                        atol=1e-9,
                    )


def test_a_failed_forward_leaves_no_table(model, tmp_path):
    vocab = model.config.vocab_size
    readings = [Reading((1, 2, 3), (2,)), Reading((1, vocab + 5, 3), (2,))]  # the second id is off the vocabulary
    with pytest.raises(IndexError):
        read_rows(model, readings, {"b0": RowOptions.make(p=P)}, tmp_path, config={}, device="cpu", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_an_answer_key_outside_a_sliding_window_reads_that_row_against_its_argmax():
    n, window = 12, 4
    pos = torch.arange(n)
    allowed = (pos[None, :] <= pos[:, None]) & (pos[None, :] > pos[:, None] - window)  # causal, last 4 keys
    scores = torch.randn(1, 2, n, n, generator=torch.Generator().manual_seed(0)).masked_fill(~allowed, -torch.inf)
    # query 11's key 9 is in its window, query 10's key 2 left it: read plain, not raise "masked key"
    reading = Reading(tuple(range(n)), (5, 10, 11), answer_keys={10: 2, 11: 9})
    sink = RowStatsCollector(RowOptions.make(p=2), flags=("answer_key",))
    observer = _Observer([sink])
    observer.start(0, reading)
    observer(ScoreBlock(layer=0, scores=scores, allowed=allowed[None, None], query_start=0, n_queries=n))
    rows = sink.close().set_index(["head", "query"])
    assert rows["answer_key"].to_dict() == {(h, q): q == 11 for h in (0, 1) for q in (5, 10, 11)}
    expected = row_stats(scores[0, :, 11], allowed[11], p=2, target=torch.tensor([9, 9]))
    assert rows.xs(11, level="query")["target_mass"].tolist() == pytest.approx(expected["target_mass"].tolist())
