"""Copy, Reverse, Sort, 2Back, Local Count and Flip-Flop draw rows of their documented layout, sizes, specials and
class or write frequencies, leak no answer before it is asked, and refuse parameters outside their stated range."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attnlab.tasks.synthetic import TASKS, TaskError, get_task

from .frequencies import ROWS, N, first_scored, freq


@pytest.mark.parametrize("name", ["copy", "reverse", "sort"])
def test_transduction_sizes_symbols_and_repeats(name):
    task = TASKS[name]
    assert task.vocab_size == 35  # 32 data symbols (Table 5) + bos, sep, eos
    for length in (64, 65, 640):
        m = (length - 2) // 2
        batch = task.generate(100, length, seed=1)
        assert task.sizes(length) == {"source_tokens": m}
        assert ((batch.targets != -100).sum(1) == m + 1).all()
        source = batch.ids[:, 1 : m + 1]
        assert int(source.max()) < 32
        # An odd length leaves one token spare: <eos> is then the last input, its target unscored.
        assert (batch.ids[:, -1] == task.specials["eos"]).all() == bool(length % 2)
    source = task.generate(N, 64, seed=2).ids[:, 1:32]
    assert np.allclose(freq(source, 32), 1 / 32, atol=0.004)
    # Repeated tokens are allowed and, with 31 draws from 32, nearly every row has one.
    assert np.mean([len(set(row)) < len(row) for row in source.tolist()]) > 0.99


@pytest.mark.parametrize("name", ["copy", "reverse", "sort"])
def test_answer_starts_after_the_single_separator(name):
    task = TASKS[name]
    batch = task.generate(ROWS, 24, seed=2)
    for row, t0 in zip(batch.ids.tolist(), first_scored(batch.targets)):
        assert row[t0] == task.specials["sep"] and row[: t0 + 1].count(task.specials["sep"]) == 1
        assert task.specials["eos"] not in row[: t0 + 1]


@pytest.mark.parametrize("name, order", [("copy", list), ("reverse", lambda x: x[::-1]), ("sort", sorted)])
def test_a_transduction_row_is_the_source_then_its_answer_then_eos(name, order):
    task = get_task(name, symbols=5)
    sp = task.specials
    assert (task.vocab_size, sp) == (8, {"bos": 5, "sep": 6, "eos": 7})
    for row in task.generate(20, 12, seed=3).ids.tolist():
        source = row[1:6]
        # Row of 12 inputs: <bos>, 5 sources, <sep>, the first 5 answer tokens; the 6th scored token is <eos>.
        assert row == [sp["bos"], *source, sp["sep"], *order(source)]


def test_two_back_classes_are_balanced():
    task = TASKS["2back"]
    assert task.vocab_size == 11 and task.specials == {"bos": 10}
    batch = task.generate(N, 64, seed=3)
    assert (batch.ids[:, 1] == 0).all() and int(batch.ids[:, 2:].min()) >= 1
    assert (batch.targets[:, 1:4] == 0).all()  # nothing two back, then the special 0 itself
    shares = freq(batch.targets[:, 4:], 10)
    assert shares[0] == 0 and np.allclose(shares[1:], 1 / 9, atol=0.004)


def test_local_count_clusters_and_class_balance():
    task = TASKS["local_count"]
    r = task.max_repeat
    assert (task.symbols, r, task.vocab_size) == (8, 4, 9)
    batch = task.generate(N, 128, seed=4)
    ids, labels = batch.ids[:, 1:].numpy(), batch.targets[:, 1:].numpy()
    assert ids.max() < 8 and labels.max() == r - 1
    # Cluster lengths, counted where a class-0 position opens a cluster, are uniform over 1..r.
    lengths = [len(run) for row in labels.tolist() for run in "".join(map(str, row)).split("0")[1:-1]]
    lengths = np.bincount(np.array(lengths) + 1, minlength=r + 1)[1:] / len(lengths)
    assert np.allclose(lengths, 1 / r, atol=0.01)
    # A new cluster always changes symbol, so the count restarts exactly where the symbol changes.
    assert np.array_equal(labels[:, 1:] == 0, ids[:, 1:] != ids[:, :-1])
    # Class c needs a cluster longer than c: frequency proportional to r - c.
    expected = (r - np.arange(r)) / (r * (r + 1) / 2)
    assert np.allclose(freq(torch.from_numpy(labels[:, 8:]), r), expected, atol=0.01)


def test_local_count_bos_is_neither_a_symbol_nor_a_class():
    # With more repeats than symbols the classes outnumber the symbols, so <bos> must sit above both.
    task = get_task("local_count", symbols=3, max_repeat=6)
    assert task.specials == {"bos": 6} and task.vocab_size == 7
    one = get_task("local_count", max_repeat=1).generate(50, 20, seed=0)
    assert (one.targets[:, 1:] == 0).all() and (one.ids[:, 2:] != one.ids[:, 1:-1]).all()


@pytest.mark.parametrize("name", ["2back", "local_count"])
def test_classes_depend_on_the_prefix_not_the_next_token(name):
    batch = TASKS[name].generate(ROWS, 40, seed=7)
    ids, targets = batch.ids, batch.targets
    assert (targets[:, 0] == -100).all() and (targets[:, 1:] != -100).all()
    # A next-token leak would make targets[t] track ids[t+1]; here they agree only at chance level.
    agree = (targets[:, 3:-1] == ids[:, 4:]).float().mean()
    assert agree < 0.5


@pytest.mark.parametrize("name, p", [("flipflop_sparse", 0.1), ("flipflop_dense", 0.8)])
def test_flipflop_write_probability(name, p):
    task = TASKS[name]
    assert task.p_write == p and task.vocab_size == 7
    sp = task.specials
    batch = task.generate(N, 65, seed=5)
    cmd = batch.ids[:, 1:64:2]
    assert (cmd[:, 0] == sp["w"]).all() and (cmd[:, -1] == sp["r"]).all()
    middle = cmd[:, 1:-1]
    assert set(middle.unique().tolist()) == {sp["w"], sp["i"]}
    assert abs(float((middle == sp["w"]).float().mean()) - p) < 0.008
    bits = batch.ids[:, 2:63:2]
    assert set(bits.unique().tolist()) == {0, 1}
    answers = batch.targets[batch.targets != -100].view(N, 2)
    assert (answers[:, 1] == sp["eos"]).all() and abs(float(answers[:, 0].float().mean()) - 0.5) < 0.04


@pytest.mark.parametrize("name", ["flipflop_sparse", "flipflop_dense"])
def test_query_appears_once_before_its_answer(name):
    """The final read is at the first scored position and occurs nowhere else."""
    task = TASKS[name]
    length = 33
    batch = task.generate(ROWS, length, seed=6)
    for row, t0 in zip(batch.ids.tolist(), first_scored(batch.targets)):
        assert row[t0] == task.specials["r"] and row.count(task.specials["r"]) == 1


def test_the_shortest_flipflop_row_writes_once_then_reads():
    batch = TASKS["flipflop_dense"].generate(40, 5, seed=1)
    for row, targets in zip(batch.ids.tolist(), batch.targets.tolist()):
        bos, w, bit, r, answer = row
        assert (bos, w, r) == (5, 2, 4) and answer == bit and targets == [-100, -100, -100, bit, 6]


# The whole message: a user must learn the task, the value given and the allowed range.
@pytest.mark.parametrize(
    "name, params, message",
    [
        ("copy", {"symbols": 1}, "copy: symbols = 1; allowed: symbols >= 2"),
        ("sort", {"symbols": 0}, "sort: symbols = 0; allowed: symbols >= 2"),
        ("2back", {"symbols": 1}, "2back: symbols = 1; allowed: symbols >= 2 (the special 0 and more)"),
        (
            "local_count",
            {"symbols": 1},
            "local_count: symbols = 1, max_repeat = 4; allowed: symbols >= 2 "
            "(neighbouring clusters differ) and max_repeat >= 1",
        ),
        (
            "local_count",
            {"max_repeat": 0},
            "local_count: symbols = 8, max_repeat = 0; allowed: symbols >= 2 "
            "(neighbouring clusters differ) and max_repeat >= 1",
        ),
        ("flipflop_dense", {"p_write": 0}, "flipflop_dense: p_write = 0; allowed: 0 < p_write < 1"),
        ("flipflop_sparse", {"p_write": 1.0}, "flipflop_sparse: p_write = 1.0; allowed: 0 < p_write < 1"),
    ],
)
def test_parameters_outside_their_range_are_refused_with_what_is_allowed(name, params, message):
    with pytest.raises(TaskError, match=f"^{re.escape(message)}$"):
        get_task(name, **params)


@pytest.mark.parametrize("name, shortest", [("copy", 4), ("2back", 3), ("local_count", 2), ("flipflop_sparse", 5)])
def test_the_shortest_row_is_drawn_and_one_shorter_is_refused(name, shortest):
    task = TASKS[name]
    assert task.min_length == shortest and task.max_length is None
    assert task.generate(3, shortest, seed=0).ids.shape == (3, shortest)
    with pytest.raises(TaskError, match=f"allowed: {shortest} <= length$"):
        task.generate(3, shortest - 1, seed=0)


@pytest.mark.parametrize(
    "name, size, per_n",
    [
        ("copy", "source_tokens", 1),
        ("reverse", "source_tokens", 1),
        ("sort", "source_tokens", 1),
        ("2back", "random_tokens", 1),
        ("local_count", "counted_tokens", 1),
        ("flipflop_sparse", "instructions", 0.5),
    ],
)
def test_row_length_holds_the_papers_length_in_its_units(name, size, per_n):
    task = TASKS[name]
    for n in (4, 7, 32, 64, 1000):
        length = task.row_length(n)
        assert task.sizes(length)[size] == int(n * per_n)
        assert task.generate(2, length, 0).ids.shape == (2, length)
        assert task.describe()["paper_units"] == task.paper_units
