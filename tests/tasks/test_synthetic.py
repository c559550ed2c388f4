"""Task batches are pure functions of (task, params, n, length, seed); streams tile ranks, hold out validation, refuse bad requests."""

from __future__ import annotations

import json

import pytest
import torch

from attnlab.tasks.synthetic import (
    DEFAULT_VAL_BATCHES,
    TASKS,
    TaskBatch,
    TaskError,
    TaskStream,
    VectorBatch,
    exact_match,
    get_task,
    scored_accuracy,
    show,
)
from attnlab.train.data import Batches, DataError

NAMES = sorted(TASKS)
EXPECTED = {
    "mqmtar",
    "mqar",
    "max_retrieval",
    "copy",
    "reverse",
    "sort",
    "2back",
    "local_count",
    "flipflop_sparse",
    "flipflop_dense",
    "trigger_averaging",
    "niah_small",
    "induction_small",
}


def _length(name):
    return max(TASKS[name].min_length, 40)


def _tensors(batch):
    return (batch.ids, batch.targets) if isinstance(batch, TaskBatch) else (batch.inputs, batch.targets, batch.mask)


def _equal(a, b):
    return all(torch.equal(x, y) for x, y in zip(_tensors(a), _tensors(b)))


def test_registry_holds_the_tasks_with_specs_citing_their_papers():
    from attnlab.papers import PAPERS

    assert set(TASKS) == EXPECTED
    for name, task in TASKS.items():
        spec = task.describe()
        json.dumps(spec)  # goes into a run's config.json
        assert (
            spec["task"] == name
            and spec["source"]
            and spec["layout"]
            and spec["kind"] in ("generative", "classification", "vector")
        )
        assert any(key in task.__doc__ for key in PAPERS), name  # each generator cites its paper and section
    assert TASKS["2back"].kind == TASKS["local_count"].kind == "classification"
    assert (TASKS["flipflop_sparse"].p_write, TASKS["flipflop_dense"].p_write) == (0.1, 0.8)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_batch_other_seed_other_batch(name):
    task, length = TASKS[name], _length(name)
    first = task.generate(16, length, seed=3)
    assert isinstance(first, VectorBatch if task.kind == "vector" else TaskBatch)
    assert _equal(first, task.generate(16, length, seed=3))
    assert not _equal(first, task.generate(16, length, seed=4))


def test_batches_are_pinned_across_machines():
    """Fixed numbers: a changed generator or numpy stream shows up here, not as silently different data."""
    assert TASKS["copy"].generate(1, 10, seed=0).ids.tolist() == [[32, 14, 31, 1, 13, 33, 14, 31, 1, 13]]
    assert TASKS["flipflop_dense"].generate(1, 9, seed=0).ids.tolist() == [[5, 2, 1, 2, 0, 3, 0, 4, 0]]
    assert TASKS["mqar"].generate(1, 16, seed=0).ids.tolist() == [[8193, 1225, 7761, 0, 0, 0, 0, 1225, 7761] + [0] * 7]
    torch.testing.assert_close(
        TASKS["trigger_averaging"].generate(1, 4, seed=0).targets[0, 3, 2:5],
        torch.tensor([-0.7582, -0.0672, 0.8254]),
        atol=1e-4,
        rtol=0,
    )


@pytest.mark.parametrize("name", NAMES)
def test_stream_is_a_pure_function_of_seed_and_step_and_rank_slices_tile(name):
    stream = TaskStream(name, _length(name), seed=7)
    assert isinstance(stream, Batches) and stream.vocab_size == TASKS[name].vocab_size
    full = stream.train_batch(5, 8)
    assert all(torch.equal(a, b) for a, b in zip(full, TaskStream(name, _length(name), seed=7).train_batch(5, 8)))
    assert not torch.equal(full[0], stream.train_batch(6, 8)[0])
    assert not torch.equal(full[0], TaskStream(name, _length(name), seed=8).train_batch(5, 8)[0])
    for world in (2, 4):
        parts = [stream.train_batch(5, 8, rank=r, world=world) for r in range(world)]
        assert all(p[0].shape[0] == 8 // world for p in parts)
        assert torch.equal(torch.cat([p[0] for p in parts]), full[0])
        assert torch.equal(torch.cat([p[1] for p in parts]), full[1])


def test_validation_is_fixed_held_out_and_rank_sliced():
    stream = TaskStream("copy", 64, seed=1)
    val = stream.val_batches(8)
    assert len(val) == DEFAULT_VAL_BATCHES and len(stream.val_batches(8, 3)) == 3
    assert all(torch.equal(a[0], b[0]) for a, b in zip(val, stream.val_batches(8)))
    halves = [stream.val_batches(8, 2, rank=r, world=2) for r in range(2)]
    assert torch.equal(torch.cat([halves[0][1][0], halves[1][1][0]]), val[1][0])
    train_rows = {tuple(r) for step in range(50) for r in stream.train_batch(step, 8)[0].tolist()}
    val_rows = {tuple(r) for x, _ in val for r in x.tolist()}
    assert not train_rows & val_rows
    # Disjoint from plain generate() of the same seed too.
    assert not val_rows & {tuple(r) for r in TASKS["copy"].generate(64, 64, seed=1).ids.tolist()}
    spec = stream.describe()
    json.dumps(spec)
    assert spec["rng"]["train"] != spec["rng"]["val"] and spec["sizes"] == {"source_tokens": 31}


def test_vector_stream_gives_float_inputs_and_a_recoverable_mask():
    stream = TaskStream("trigger_averaging", 16, seed=0)
    inputs, targets = stream.train_batch(0, 4)
    assert inputs.dtype == targets.dtype == torch.float32 and inputs.shape == targets.shape == (4, 16, 16)
    assert stream.vocab_size == 0 and "mask" in stream.describe()
    mask = inputs[..., 1] == 1
    assert (mask.sum(1) == 1).all() and (targets[~mask] == 0).all()


def test_a_stream_with_min_length_varies_the_length_per_step_and_validates_at_length():
    stream = TaskStream("copy", 24, seed=3, min_length=10)
    lengths = [stream.train_batch(step, 4)[0].shape[1] for step in range(60)]
    assert min(lengths) == 10 and max(lengths) == 24 and len(set(lengths)) > 8
    assert lengths == [TaskStream("copy", 24, seed=3, min_length=10).train_batch(s, 4)[0].shape[1] for s in range(60)]
    first, second = stream.train_batch(5, 4, rank=0, world=2), stream.train_batch(5, 4, rank=1, world=2)
    assert first[0].shape == second[0].shape
    assert all(x.shape[1] == 24 for x, _ in stream.val_batches(4, 3))
    assert stream.describe()["min_length"] == 10
    assert (
        TaskStream("copy", 24, seed=3).train_batch(5, 4)[0].equal(TaskStream("copy", 24, seed=3).train_batch(5, 4)[0])
    )


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: TaskStream("copy", 24, min_length=30), ["min_length 30 is above length 24"]),
        (lambda: TaskStream("copy", 24, min_length=2), ["length 2", "4 <= length"]),
        (lambda: get_task("copyy"), ["unknown task 'copyy'", "copy", "mqmtar", "trigger_averaging"]),
        (lambda: get_task("copy", vocab=3), ["unknown parameter", "symbols"]),
        (lambda: get_task("mqmtar", alphabet="16"), ["alphabet must be int", "'16'"]),
        (lambda: get_task("copy", symbols=True), ["symbols must be int", "True"]),
        (lambda: get_task("mqmtar", kv_vocab=2.5), ["kv_vocab must be int | None"]),
        (lambda: get_task("flipflop_dense", p_write=1.5), ["p_write", "0 < p_write < 1"]),
        (lambda: TASKS["mqmtar"].generate(4, 40, seed=0), ["length 40", "51 <= length"]),
        (lambda: TASKS["copy"].generate(4, 3, seed=0), ["length 3", "4 <= length"]),
        (lambda: get_task("max_retrieval", priorities=8).generate(4, 100, seed=0), ["length <= 20"]),
        (lambda: TASKS["copy"].generate(0, 10, seed=0), ["n >= 1"]),
        (lambda: TASKS["copy"].generate(2, 10, seed=-1), ["seed >= 0"]),
        (lambda: TaskStream("sort", 2), ["4 <= length"]),
        (lambda: TaskStream("sort", 16).train_batch(-1, 4), ["step >= 0"]),
        (lambda: TaskStream("sort", 16).val_batches(4, 0), ["n_batches >= 1"]),
        (lambda: get_task("trigger_averaging", dim=4), ["dim >= 5"]),
    ],
)
def test_bad_requests_name_the_problem_and_what_is_allowed(call, words):
    with pytest.raises(TaskError) as err:
        call()
    assert isinstance(err.value, ValueError) and all(w in str(err.value) for w in words)


def test_batch_not_divisible_by_world_is_refused():
    with pytest.raises(DataError, match="not a positive multiple of world size 3"):
        TaskStream("copy", 16).train_batch(0, 8, rank=0, world=3)


def test_exact_match_needs_every_scored_position():
    targets = torch.tensor([[-100, 3, 4, -100], [-100, 1, 2, -100], [5, -100, -100, -100]])
    predictions = torch.tensor([[9, 3, 4, 9], [0, 1, 0, 2], [5, 0, 0, 0]])
    assert exact_match(predictions, targets).tolist() == [True, False, True]
    logits = torch.nn.functional.one_hot(predictions, 10).float()
    assert exact_match(logits, targets).tolist() == [True, False, True]
    assert scored_accuracy(logits, targets).tolist() == [1.0, 0.5, 1.0]
    with pytest.raises(TaskError, match="do not match targets"):
        exact_match(predictions[:, :3], targets)


@pytest.mark.parametrize("name", NAMES)
def test_show_renders_inputs_over_marked_targets(name):
    text = show(name)
    assert text.startswith(name) and TASKS[name].source in text
    if TASKS[name].kind == "vector":
        assert "trigger at position" in text and " T " in text
    else:
        assert "positions scored" in text and "·" in text and "<bos>" in text
    assert max(map(len, text.splitlines()[3:])) <= 100


def test_stream_ids_never_change():
    """A task's stream id is the first word of every seed it draws: changing one changes every batch."""
    from attnlab.tasks.seqtask import stream_id

    assert {name: stream_id(name) for name in TASKS} == {
        "mqmtar": 1,
        "mqar": 2,
        "max_retrieval": 3,
        "copy": 4,
        "reverse": 5,
        "sort": 6,
        "2back": 7,
        "local_count": 8,
        "flipflop_sparse": 9,
        "flipflop_dense": 10,
        "trigger_averaging": 11,
        "niah_small": 12,
        "induction_small": 13,
    }


def test_user_task_registers_with_its_own_stream():
    import dataclasses
    import zlib

    from attnlab import tasks
    from attnlab.tasks.seqtask import USER_STREAMS, stream_id
    from attnlab.tasks.sequences import Copy

    @dataclasses.dataclass(frozen=True)
    class Echo(Copy):
        name: str = "echo_test"

    try:
        tasks.register(Echo())
        assert stream_id("echo_test") == USER_STREAMS + zlib.crc32(b"echo_test")
        echo, copy = get_task("echo_test").generate(4, 32, 0), get_task("copy").generate(4, 32, 0)
        assert not torch.equal(echo.ids, copy.ids)  # same generator, another stream
        assert torch.equal(echo.ids, TaskStream("echo_test", length=32, seed=0).task.generate(4, 32, 0).ids)
        with pytest.raises(ValueError, match="already registered"):
            tasks.register(Echo())
        with pytest.raises(ValueError, match="stream id 4 is task 'copy'"):
            tasks.register(Echo(name="echo2_test"), stream=4)
        with pytest.raises(TypeError, match="must be a Task instance"):
            tasks.register(Echo)
    finally:
        TASKS.unregister("echo_test")
    with pytest.raises(TaskError, match="unknown task 'echo_test'"):
        get_task("echo_test")
