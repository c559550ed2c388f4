"""Synthetic tasks match their seed specs in sizes, vocabularies, densities, class balance and uniform draws."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.tasks.synthetic import TASKS, get_task

N = 2000  # rows for frequency checks; tolerances below are several standard errors wide


def _freq(values: torch.Tensor, classes: int) -> np.ndarray:
    return np.bincount(values.flatten().numpy(), minlength=classes) / values.numel()


@pytest.mark.parametrize("name", sorted(n for n, t in TASKS.items() if t.kind != "vector"))
def test_tokens_stay_in_the_vocabulary_and_specials_are_distinct(name):
    task = TASKS[name]
    batch = task.generate(200, max(task.min_length, 48), seed=0)
    assert 0 <= int(batch.ids.min()) and int(batch.ids.max()) < task.vocab_size
    scored = batch.targets[batch.targets != -100]
    assert 0 <= int(scored.min()) and int(scored.max()) < task.vocab_size
    assert len(set(task.specials.values())) == len(task.specials)
    assert all(0 <= v < task.vocab_size for v in task.specials.values())
    assert (batch.ids[:, 0] == task.specials["bos"]).all()


@pytest.mark.parametrize("name", ["copy", "reverse", "sort"])
def test_transduction_sizes_symbols_and_repeats(name):
    task = TASKS[name]
    assert task.vocab_size == 35  # 32 data symbols (Table 5) + bos, sep, eos
    for length in (64, 65, 640):
        m = (length - 2) // 2
        batch = task.generate(100, length, seed=1)
        assert task.sizes(length) == {"source_tokens": m}
        assert ((batch.targets != -100).sum(1) == m + 1).all()
        source = batch.ids[:, 1:m + 1]
        assert int(source.max()) < 32
        # An odd length leaves one token spare: <eos> is then the last input, its target unscored.
        assert (batch.ids[:, -1] == task.specials["eos"]).all() == bool(length % 2)
    source = task.generate(N, 64, seed=2).ids[:, 1:32]
    assert np.allclose(_freq(source, 32), 1 / 32, atol=0.004)
    # Repeated tokens are allowed and, with 31 draws from 32, nearly every row has one.
    assert np.mean([len(set(row)) < len(row) for row in source.tolist()]) > 0.99


def test_two_back_classes_are_balanced():
    task = TASKS["2back"]
    assert task.vocab_size == 11 and task.specials == {"bos": 10}
    batch = task.generate(N, 64, seed=3)
    assert (batch.ids[:, 1] == 0).all() and int(batch.ids[:, 2:].min()) >= 1
    assert (batch.targets[:, 1:4] == 0).all()  # nothing two back, then the special 0 itself
    freq = _freq(batch.targets[:, 4:], 10)
    assert freq[0] == 0 and np.allclose(freq[1:], 1 / 9, atol=0.004)


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
    assert np.allclose(_freq(torch.from_numpy(labels[:, 8:]), r), expected, atol=0.01)


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


def test_mqmtar_density_queries_and_vocabulary():
    task = TASKS["mqmtar"]
    assert task.vocab_size == 262 and task.min_length == 51
    sp = task.specials
    for length in (64, 256):
        size = task.sizes(length)
        c, p = size["context"], size["pairs"]
        assert c == length - 26 and p == int(0.8 * c / 5 + 1e-9)
        batch = task.generate(300, length, seed=6)
        context = batch.ids[:, 1:1 + c]
        assert ((context == sp["kv"]).sum(1) == p).all()
        assert ((context == sp["empty"]).sum(1) == c - 5 * p).all()
        assert ((batch.ids == sp["query"]).sum(1) == 2 * 4).all()  # 4 queries, then 4 teacher-forced answers
        assert ((context <= sp["kv"]) | ((context >= 4) & (context < 4 + 256))).all()
        for row in context.tolist():
            keys = [tuple(row[i - 2:i]) for i, x in enumerate(row) if x == sp["kv"]]
            assert len(set(keys)) == len(keys)
    # Pairs stop growing at the key vocabulary: 10K distinct keys, the rest of the context empty.
    assert task.sizes(65536)["pairs"] == 10_000
    # The key vocabulary is a fixed subset: 5 of the 16 two-token strings over a 4-symbol alphabet.
    small = get_task("mqmtar", alphabet=4, kv_vocab=5, queries=2)
    c = small.sizes(60)["context"]
    batch = small.generate(200, 60, seed=7)
    seen = {tuple(row[i - 2:i]) for row in batch.ids.tolist() for i, x in enumerate(row[:1 + c]) if x == 1}
    assert len(seen) == 5


def test_mqar_pairs_scale_with_length_and_every_key_is_queried_once():
    task = TASKS["mqar"]
    k = task.keys
    assert task.vocab_size == 2 * k + 2
    for length, pairs in ((64, 4), (128, 8), (1024, 64)):
        assert task.sizes(length)["pairs"] == pairs
        batch = task.generate(100, length, seed=8)
        keys, values = batch.ids[:, 1:2 * pairs + 1:2], batch.ids[:, 2:2 * pairs + 2:2]
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


def test_max_retrieval_unique_maximum_and_uniform_answer():
    task = TASKS["max_retrieval"]
    sp, p, c = task.specials, task.priorities, task.classes
    batch = task.generate(N, 35, seed=10)
    m = task.sizes(35)["items"]
    assert m == 16  # the ID size of Table 8
    prio, cls = batch.ids[:, 1:2 * m + 1:2], batch.ids[:, 2:2 * m + 1:2]
    assert int(prio.max()) < p and int(cls.min()) >= p and int(cls.max()) < p + c
    assert all(len(set(row)) == m for row in prio.tolist())
    answers = batch.targets[batch.targets != -100].view(N, 2)
    assert np.allclose(_freq(answers[:, 0] - p, c), 1 / c, atol=0.022)
    where = prio.argmax(1).float()
    assert abs(float(where.mean()) - (m - 1) / 2) < 0.3
    assert task.max_length == 2 * p + 4 and (batch.ids[:, 2 * m + 1] == sp["sep"]).all()


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
    assert np.allclose(_freq(answers, task.symbols), 1 / task.symbols, atol=0.022)


def test_trigger_averaging_spec():
    task = TASKS["trigger_averaging"]
    length = 8
    batch = task.generate(6 * N, length, seed=12)
    x = batch.inputs
    assert x.shape == (6 * N, length, 16) and x.dtype == torch.float32
    j = batch.mask.float().argmax(1) + 1  # 1-based trigger
    assert np.allclose(np.bincount(j.numpy(), minlength=length + 1)[3:] / (6 * N), 1 / (length - 2), atol=0.015)
    assert torch.equal(x[:, 0], torch.eye(16)[0].expand(6 * N, 16))
    others = ~batch.mask[:, 1:]
    body = x[:, 1:][others]
    assert (body[:, :2] == 0).all() and (body[:, -1] == 1).all()
    assert float(body[:, 2:-1].abs().max()) < 1 and abs(float(body[:, 2:-1].mean())) < 0.01
    assert abs(float(body[:, 2:-1].var()) - 1 / 3) < 0.01  # U(-1, 1)
    assert torch.equal(x[batch.mask], torch.eye(16)[1].expand(6 * N, 16))
    fixed = get_task("trigger_averaging", trigger=8, dim=5).generate(50, 16, seed=0)
    assert (fixed.mask.float().argmax(1) == 7).all() and fixed.inputs.shape[-1] == 5
