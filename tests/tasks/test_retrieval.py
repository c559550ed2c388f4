"""MQAR, MQMTAR, Max Retrieval and the small NIAH and induction streams draw rows of their documented sizes, densities
and vocabularies, ask only for what the row stored, leak no answer before it is asked, and refuse bad parameters."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attnlab.tasks.synthetic import TASKS, TaskError, get_task

from .frequencies import ROWS, N, first_scored, freq


def test_mqmtar_density_queries_and_vocabulary():
    task = TASKS["mqmtar"]
    assert task.vocab_size == 262 and task.min_length == 51
    sp = task.specials
    for length in (64, 256):
        size = task.sizes(length)
        c, p = size["context"], size["pairs"]
        assert c == length - 26 and p == int(0.8 * c / 5 + 1e-9)
        batch = task.generate(300, length, seed=6)
        context = batch.ids[:, 1 : 1 + c]
        assert ((context == sp["kv"]).sum(1) == p).all()
        assert ((context == sp["empty"]).sum(1) == c - 5 * p).all()
        assert ((batch.ids == sp["query"]).sum(1) == 2 * 4).all()  # 4 queries, then 4 teacher-forced answers
        assert ((context <= sp["kv"]) | ((context >= 4) & (context < 4 + 256))).all()
        for row in context.tolist():
            keys = [tuple(row[i - 2 : i]) for i, x in enumerate(row) if x == sp["kv"]]
            assert len(set(keys)) == len(keys)
    # Pairs stop growing at the key vocabulary: 10K distinct keys, the rest of the context empty.
    assert task.sizes(65536)["pairs"] == 10_000
    # The key vocabulary is a fixed subset: 5 of the 16 two-token strings over a 4-symbol alphabet.
    small = get_task("mqmtar", alphabet=4, kv_vocab=5, queries=2)
    c = small.sizes(60)["context"]
    batch = small.generate(200, 60, seed=7)
    seen = {tuple(row[i - 2 : i]) for row in batch.ids.tolist() for i, x in enumerate(row[: 1 + c]) if x == 1}
    assert len(seen) == 5


def _stored_keys(task, length, seed, n=100):
    """The distinct keys the contexts of a batch store (the two tokens before each key-value delimiter)."""
    c = task.sizes(length)["context"]
    ids = task.generate(n, length, seed=seed).ids.tolist()
    return {tuple(row[i - 2 : i]) for row in ids for i, x in enumerate(row[: 1 + c]) if x == task.specials["kv"]}


def test_mqmtar_string_vocabulary_belongs_to_the_task_not_the_seed():
    # A vocabulary redrawn per seed would let validation rows hold keys never seen in training.
    small = get_task("mqmtar", alphabet=4, kv_vocab=5, queries=2)
    assert _stored_keys(small, 60, seed=0) == _stored_keys(small, 60, seed=1)
    every = get_task("mqmtar", alphabet=4, kv_vocab=None, queries=2)
    assert every.sizes(400)["pairs"] == 16  # capped at all 4 ** 2 strings, so keys stay distinct
    assert len(_stored_keys(every, 120, seed=0, n=50)) == 16


def test_mqmtar_min_length_is_the_shortest_row_holding_one_pair_per_query():
    uneven = {"key_len": 1, "value_len": 3, "density": 0.5, "kv_vocab": None}
    for params in ({}, {"queries": 2, "alphabet": 4, "kv_vocab": 5}, uneven):
        task = get_task("mqmtar", **params)
        shortest = task.min_length
        assert task.sizes(shortest)["pairs"] >= task.queries > task.sizes(shortest - 1)["pairs"], params
        with pytest.raises(TaskError, match=f"allowed: {shortest} <= length$"):
            task.generate(2, shortest - 1, seed=0)


def test_mqmtar_queries_ask_only_for_keys_in_the_context():
    task = TASKS["mqmtar"]
    sp, kl = task.specials, task.key_len
    batch = task.generate(ROWS, 64, seed=3)
    for row, t0 in zip(batch.ids.tolist(), first_scored(batch.targets)):
        assert row[t0] == sp["sep"] and row.count(sp["sep"]) == 1
        first_query = row.index(sp["query"])
        context = row[1:first_query]
        keys = {tuple(context[i - kl : i]) for i, x in enumerate(context) if x == sp["kv"]}
        block = row[first_query:t0]
        assert len(block) == task.queries * (1 + kl)
        asked = [tuple(block[i + 1 : i + 1 + kl]) for i in range(0, len(block), 1 + kl)]
        assert all(block[i] == sp["query"] for i in range(0, len(block), 1 + kl))
        assert set(asked) <= keys
        # Nothing of the answer region (values, <eos>) precedes the separator.
        assert sp["eos"] not in row[: t0 + 1] and sp["kv"] not in block


def test_mqmtar_refuses_an_empty_string_vocabulary():
    with pytest.raises(TaskError, match="kv_vocab 0"):
        get_task("mqmtar", kv_vocab=0)


def test_mqar_pairs_scale_with_length_and_every_key_is_queried_once():
    task = TASKS["mqar"]
    k = task.keys
    assert task.vocab_size == 2 * k + 2
    for length, pairs in ((64, 4), (128, 8), (1024, 64)):
        assert task.sizes(length)["pairs"] == pairs
        batch = task.generate(100, length, seed=8)
        keys, values = batch.ids[:, 1 : 2 * pairs + 1 : 2], batch.ids[:, 2 : 2 * pairs + 2 : 2]
        assert int(keys.min()) >= 1 and int(keys.max()) <= k and int(values.min()) > k
        scored = batch.targets != -100
        assert (scored.sum(1) == pairs).all()
        for row, key_row, mask in zip(batch.ids.tolist(), keys.tolist(), scored.tolist()):
            asked = [row[t] for t, on in enumerate(mask) if on]
            assert len(set(key_row)) == pairs and sorted(asked) == sorted(key_row)
    # Query slots are uniform over the region: mean offset near its middle.
    batch = task.generate(N, 256, seed=9)
    t = (batch.targets != -100).nonzero()[:, 1].float()
    start, stop = 1 + 2 * 16, 256
    assert abs(float(t.mean()) - (start + stop) / 2) < 3


def test_mqar_value_is_not_in_the_query_region_before_it_is_asked():
    task = TASKS["mqar"]
    length = 64
    pairs = task.sizes(length)["pairs"]
    batch = task.generate(ROWS, length, seed=4)
    for row, targets in zip(batch.ids.tolist(), batch.targets.tolist()):
        asked = [t for t, y in enumerate(targets) if y != -100]
        assert len(asked) == pairs
        for t in asked:
            assert targets[t] not in row[1 + 2 * pairs : t + 1]
            assert row[1 : 1 + 2 * pairs : 2].count(row[t]) == 1  # the queried key was stored once


def test_mqar_lengths_stop_where_keys_would_repeat():
    # Pairs grow as length // 16 and keys are distinct in a row, so the longest row holds one pair per key.
    task = get_task("mqar", keys=3)
    assert (task.min_length, task.max_length, task.sizes(63)["pairs"]) == (4, 63, 3)
    with pytest.raises(TaskError, match="allowed: 4 <= length <= 63$"):
        task.generate(2, 64, seed=0)
    fixed = get_task("mqar", keys=5, num_pairs=4)
    assert (fixed.min_length, fixed.max_length, fixed.sizes(100)["pairs"]) == (16, None, 4)
    shortest = fixed.generate(20, 16, seed=0)
    # At the shortest length the query region has exactly one slot per pair.
    assert ((shortest.targets != -100).sum(1) == 4).all() and (shortest.ids[:, 9:] != 0).all()


def test_max_retrieval_unique_maximum_and_uniform_answer():
    task = TASKS["max_retrieval"]
    sp, p, c = task.specials, task.priorities, task.classes
    batch = task.generate(N, 35, seed=10)
    m = task.sizes(35)["items"]
    assert m == 16  # the ID size of Table 8
    prio, cls = batch.ids[:, 1 : 2 * m + 1 : 2], batch.ids[:, 2 : 2 * m + 1 : 2]
    assert int(prio.max()) < p and int(cls.min()) >= p and int(cls.max()) < p + c
    assert all(len(set(row)) == m for row in prio.tolist())
    answers = batch.targets[batch.targets != -100].view(N, 2)
    assert np.allclose(freq(answers[:, 0] - p, c), 1 / c, atol=0.022)
    where = prio.argmax(1).float()
    assert abs(float(where.mean()) - (m - 1) / 2) < 0.3
    assert task.max_length == 2 * p + 4 and (batch.ids[:, 2 * m + 1] == sp["sep"]).all()


def test_answer_starts_after_the_single_separator():
    task = TASKS["max_retrieval"]
    batch = task.generate(ROWS, 35, seed=2)
    for row, t0 in zip(batch.ids.tolist(), first_scored(batch.targets)):
        assert row[t0] == task.specials["sep"] and row[: t0 + 1].count(task.specials["sep"]) == 1
        assert task.specials["eos"] not in row[: t0 + 1]


def test_max_retrieval_longest_row_uses_every_priority_once():
    task = get_task("max_retrieval", priorities=4, classes=2)
    assert (task.vocab_size, task.specials, task.max_length) == (9, {"bos": 6, "sep": 7, "eos": 8}, 12)
    batch = task.generate(30, 12, seed=0)
    assert all(sorted(row[1:9:2]) == [0, 1, 2, 3] for row in batch.ids.tolist())
    answers = batch.targets[batch.targets != -100].view(30, 2)
    top = batch.ids[:, 1:9:2].argmax(1)
    assert torch.equal(answers[:, 0], batch.ids[torch.arange(30), 2 + 2 * top]) and (answers[:, 1] == 8).all()


@pytest.mark.parametrize("name", ["niah_small", "induction_small"])
def test_planted_depth_is_uniform_and_the_key_is_unique(name):
    task = TASKS[name]
    length = 24
    hay = task.sizes(length)["haystack"]
    batch = task.generate(N, length, seed=11)
    depths = []
    for row in batch.ids.tolist():
        key = row[length - 2]
        assert row.count(key) == 2 and row[length - 1] != key
        depths.append(row.index(key) - 1)
        if name == "niah_small":
            assert key >= task.symbols and max(x for x in row[1:] if x != key) < task.symbols
    counts = np.bincount(depths, minlength=hay + 1)
    assert counts.min() > 0 and len(counts) == hay + 1
    assert abs(np.mean(depths) - hay / 2) < 0.6
    answers = batch.targets[:, length - 2]
    assert np.allclose(freq(answers, task.symbols), 1 / task.symbols, atol=0.022)


@pytest.mark.parametrize("name", ["niah_small", "induction_small"])
def test_query_appears_once_before_its_answer(name):
    """The final key is at the first scored position; the key occurs only at the plant and there."""
    task = TASKS[name]
    length = 24
    batch = task.generate(ROWS, length, seed=6)
    for row, t0 in zip(batch.ids.tolist(), first_scored(batch.targets)):
        assert t0 == length - 2 and row[: t0 + 1].count(row[t0]) == 2


@pytest.mark.parametrize("name", ["niah_small", "induction_small"])
def test_the_planted_bigram_is_repeated_at_the_end(name):
    task = TASKS[name]
    batch = task.generate(200, 12, seed=5)
    for row, targets in zip(batch.ids.tolist(), batch.targets.tolist()):
        key = row[-2]
        value = row[row.index(key) + 1]
        # The value after the plant is the answer, and it differs from its key (induction's B != A).
        assert row[-1] == value != key and targets[-3:] == [-100, value, task.specials["eos"]]


@pytest.mark.parametrize(
    "name, params, message",
    [
        (
            "mqar",
            {"num_pairs": 0},
            "mqar: keys = 4096, num_pairs = 0; allowed: keys >= 1 and num_pairs None or "
            "1 <= num_pairs <= keys (keys are distinct in a row)",
        ),
        (
            "mqar",
            {"keys": 4, "num_pairs": 5},
            "mqar: keys = 4, num_pairs = 5; allowed: keys >= 1 and num_pairs None or "
            "1 <= num_pairs <= keys (keys are distinct in a row)",
        ),
        (
            "mqmtar",
            {"alphabet": 1},
            "mqmtar: alphabet 1, key_len 2, value_len 2, queries 4; allowed: alphabet >= 2 and "
            "key_len, value_len, queries >= 1",
        ),
        ("mqmtar", {"density": 0}, "mqmtar: density 0; allowed: 0 < density <= 1"),
        (
            "mqmtar",
            {"alphabet": 2**31},
            "mqmtar: alphabet ** max(key_len, value_len) = 4611686018427387904; allowed: below 2 ** 62",
        ),
        (
            "mqmtar",
            {"kv_vocab": 3},
            "mqmtar: kv_vocab 3, queries 4; allowed: queries <= kv_vocab (None: all 65536 "
            "strings) <= alphabet ** min(key_len, value_len) = 65536",
        ),
        (
            "mqmtar",
            {"alphabet": 4, "kv_vocab": 17},
            "mqmtar: kv_vocab 17, queries 4; allowed: queries <= kv_vocab "
            "(None: all 16 strings) <= alphabet ** min(key_len, value_len) = 16",
        ),
        (
            "max_retrieval",
            {"classes": 1},
            "max_retrieval: priorities 4096, classes 1; allowed: priorities >= 1, classes >= 2",
        ),
        ("niah_small", {"keys": 0}, "niah_small: symbols 16, keys 0; allowed: symbols >= 1 and keys >= 1"),
        ("induction_small", {"symbols": 1}, "induction_small: symbols 1; allowed: symbols >= 2 (A and B != A)"),
    ],
)
def test_parameters_outside_their_range_are_refused_with_what_is_allowed(name, params, message):
    with pytest.raises(TaskError, match=f"^{re.escape(message)}$"):
        get_task(name, **params)


def test_mqmtar_row_length_holds_the_papers_context_and_max_retrieval_has_no_paper_units():
    task = TASKS["mqmtar"]
    for n in (32, 64, 4096):
        assert task.sizes(task.row_length(n))["context"] == n
    assert task.row_length(32) - 32 == 2 + 4 * (2 + 2 + 2)  # <bos>, the queries, the separator, answers, <eos>
    with pytest.raises(TaskError, match="max_retrieval: no paper length units"):
        TASKS["max_retrieval"].row_length(16)
