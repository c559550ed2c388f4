"""Trigger-conditional averaging rows have the documented layout, the trigger is uniform over 3..L and found from
the inputs alone, and each target is the mean of the non-BOS vectors before the trigger, recomputed row by row."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.tasks.seqtask import TaskError
from attnlab.tasks.vectors import TriggerAveraging, trigger_mask


@pytest.mark.parametrize("dim, length, trigger", [(16, 16, None), (5, 4, None), (7, 12, 8), (6, 9, 3)])
def test_every_row_by_hand(dim, length, trigger):
    batch = TriggerAveraging(dim=dim, trigger=trigger).generate(64, length, seed=2)
    x, y, mask = batch.inputs.double(), batch.targets.double(), batch.mask
    assert x.shape == y.shape == (64, length, dim) and mask.shape == (64, length)
    assert batch.inputs.dtype == batch.targets.dtype == torch.float32 and mask.dtype == torch.bool
    e1, e2 = torch.zeros(dim, dtype=torch.float64), torch.zeros(dim, dtype=torch.float64)
    e1[0], e2[1] = 1.0, 1.0
    for r in range(64):
        (j,) = mask[r].nonzero().flatten().tolist()  # 0-based trigger position
        assert 2 <= j < length and (trigger is None or j == trigger - 1)
        assert torch.equal(x[r, 0], e1) and torch.equal(x[r, j], e2)
        others = [i for i in range(1, length) if i != j]
        assert (x[r, others, :2] == 0).all() and (x[r, others, -1] == 1).all()
        assert (x[r, others, 2:-1].abs() < 1).all()
        want = torch.zeros(length, dim, dtype=torch.float64)
        want[j] = x[r, 1:j].mean(0)
        assert torch.allclose(y[r], want, atol=1e-6), r
        assert y[r, j, -1] == pytest.approx(1.0, abs=1e-6)
    assert torch.equal(trigger_mask(batch.inputs), mask)


def test_trigger_positions_are_uniform_and_content_is_centred():
    batch = TriggerAveraging(dim=8).generate(4000, 10, seed=5)
    positions = batch.mask.nonzero()[:, 1].numpy() + 1  # 1-based, as the paper counts
    counts = np.bincount(positions, minlength=11)[1:]
    assert counts[:2].sum() == 0
    assert np.allclose(counts[2:] / 4000, 1 / 8, atol=0.02)
    content = batch.inputs[:, 1:, 2:-1][~batch.mask[:, 1:]]
    assert abs(float(content.mean())) < 0.01 and float(content.var()) == pytest.approx(1 / 3, abs=0.01)


def test_same_seed_same_rows_other_seed_other_rows():
    task = TriggerAveraging()
    a, b, c = task.generate(8, 16, seed=1), task.generate(8, 16, seed=1), task.generate(8, 16, seed=2)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: TriggerAveraging(dim=4), "dim >= 5"),
        (lambda: TriggerAveraging(trigger=2), "1-based index >= 3"),
        (lambda: TriggerAveraging(trigger=8).generate(2, 7, seed=0), "8 <= length"),
        (lambda: TriggerAveraging().generate(2, 3, seed=0), "4 <= length"),
    ],
)
def test_settings_outside_the_paper_are_refused(make, match):
    with pytest.raises(TaskError, match=match):
        make()
