"""Every token task keeps its ids, scored targets and distinct specials inside its vocabulary with <bos> first;
trigger averaging places one trigger uniformly among U(-1, 1) bodies (the other tasks' draws: test_sequences.py,
test_retrieval.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.tasks.synthetic import TASKS, get_task

from .frequencies import N


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
