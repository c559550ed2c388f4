"""The task frame: teacher-forced and classification batches are built as documented, generators are pure functions
of (stream, purpose, words), and every registered task keeps one stream id of its own."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from attnlab.tasks.seqtask import (
    GENERATE,
    IGNORE,
    TASKS,
    TRAIN,
    USER_STREAMS,
    Task,
    TaskError,
    classification,
    distinct,
    generative,
    register,
    stream_id,
    task_rng,
)
from attnlab.tasks.sequences import Copy


def test_generative_targets_are_the_next_token_at_answers_only():
    rng = np.random.default_rng(0)
    seq = rng.integers(0, 50, size=(6, 11))
    answer = rng.random((6, 11)) < 0.4
    batch = generative(seq, answer)
    assert batch.ids.tolist() == seq[:, :-1].tolist()
    for r in range(6):
        for t in range(10):
            assert batch.targets[r, t] == (seq[r, t + 1] if answer[r, t + 1] else IGNORE), (r, t)


def test_classification_leaves_bos_unscored_and_the_labels_untouched():
    ids = np.arange(12).reshape(3, 4)
    labels = ids % 3
    batch = classification(ids, labels)
    assert (batch.targets[:, 0] == IGNORE).all() and batch.targets[:, 1:].tolist() == labels[:, 1:].tolist()
    assert labels[:, 0].tolist() == [0, 1, 2], "the caller's labels must not be overwritten"


def test_distinct_draws_k_different_values_in_random_order():
    rows = distinct(np.random.default_rng(1), 200, 30, 7)
    assert rows.shape == (200, 7) and rows.dtype == np.int64
    assert all(len(set(r)) == 7 and 0 <= min(r) and max(r) < 30 for r in rows.tolist())
    assert any(list(r) != sorted(r) for r in rows.tolist())


def test_generators_depend_on_stream_purpose_and_words_only():
    def draw(*words):
        return task_rng(*words).integers(0, 2**31, size=8).tolist()

    assert draw("copy", GENERATE, 3) == draw("copy", GENERATE, 3)
    assert (
        draw("copy", GENERATE, 3)
        == np.random.default_rng([stream_id("copy"), GENERATE, 3]).integers(0, 2**31, size=8).tolist()
    )
    others = [
        draw("reverse", GENERATE, 3),
        draw("copy", TRAIN, 3),
        draw("copy", GENERATE, 4),
        draw("copy", GENERATE, 3, 0, 1),
    ]
    assert all(o != draw("copy", GENERATE, 3) for o in others)
    assert len({stream_id(name) for name in TASKS}) == len(TASKS), "two tasks share a stream"


@dataclass(frozen=True)
class _Tiny(Task):
    name: str = "tiny_for_test"
    kind: ClassVar[str] = "classification"
    source: ClassVar[str] = "none"
    layout: ClassVar[str] = "<bos> 0 1 0 1"

    @property
    def vocab_size(self) -> int:
        return 3

    @property
    def specials(self) -> dict[str, int]:
        return {"bos": 2, "x": 1}

    @property
    def min_length(self) -> int:
        return 2

    @property
    def max_length(self) -> int:
        return 6

    def sizes(self, length: int) -> dict[str, int]:
        return {"tokens": length - 1}

    def draw(self, rng, n, length):
        ids = np.tile(np.arange(length) % 2, (n, 1))
        ids[:, 0] = 2
        return classification(ids, ids)


def test_a_user_task_gets_the_documented_stream_and_a_clash_is_refused():
    task = register(_Tiny())
    try:
        assert stream_id("tiny_for_test") == USER_STREAMS + zlib.crc32(b"tiny_for_test")
        with pytest.raises(ValueError, match="stream id 4 is task 'copy''s"):
            register(_Tiny(name="tiny_clash"), stream=4)
        with pytest.raises(ValueError, match="already registered"):
            register(_Tiny())
        assert "tiny_clash" not in TASKS
        batch = task.generate(3, 6, seed=0)
        assert batch.ids.tolist() == [[2, 1, 0, 1, 0, 1]] * 3
        assert [task.token_name(t) for t in (0, 1, 2)] == ["0", "x", "<bos>"]
        assert task.describe()["max_length"] == 6 and task.params() == {}
    finally:
        TASKS.unregister("tiny_for_test")


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda t: t.generate(2, 7, seed=0), "length 7 does not fit the task with {}; allowed: 2 <= length <= 6"),
        (lambda t: t.generate(2, 1, seed=0), "allowed: 2 <= length <= 6"),
        (lambda t: t.generate(0, 4, seed=0), "allowed are n >= 1 and seed >= 0"),
        (lambda t: t.generate(1, 4, seed=-2), "seed -2"),
    ],
)
def test_requests_outside_the_task_are_refused_with_what_is_allowed(call, match):
    with pytest.raises(TaskError, match=match.replace("{", r"\{").replace("}", r"\}")):
        call(_Tiny())


@pytest.mark.parametrize("stream, error", [(0, ValueError), (True, ValueError), ("7", ValueError)])
def test_bad_stream_ids_and_non_tasks_are_refused(stream, error):
    with pytest.raises(error, match="stream id must be an int >= 1"):
        register(_Tiny(name="tiny_bad"), stream=stream)
    with pytest.raises(TypeError, match="a task must be a Task instance"):
        register("copy")
    assert "tiny_bad" not in TASKS


def test_an_unregistered_tasks_stream_is_free_again():
    register(Copy(name="copy_for_test"), stream=900_001)
    TASKS.unregister("copy_for_test")
    register(Copy(name="copy_for_test_2"), stream=900_001)
    TASKS.unregister("copy_for_test_2")
