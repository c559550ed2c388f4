"""rank_rows tiles a global batch into equal rank slices in rank order and refuses a split it cannot make."""

from __future__ import annotations

import pytest

from attnlab.batches import DataError, rank_rows
from attnlab.train import data


@pytest.mark.parametrize("batch,world", [(1, 1), (6, 1), (6, 2), (6, 3), (8, 4), (12, 6)])
def test_rank_slices_tile_the_batch_in_rank_order(batch, world):
    slices = [rank_rows(batch, rank, world) for rank in range(world)]
    assert slices[0][0] == 0 and slices[-1][1] == batch
    assert all(hi - lo == batch // world for lo, hi in slices)
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:]))


@pytest.mark.parametrize(
    "batch,rank,world,message",
    [
        (6, 0, 4, "global batch 6 is not a positive multiple of world size 4"),
        (0, 0, 1, "global batch 0 is not a positive multiple of world size 1"),
        (6, 2, 2, "rank 2 of world 2"),
        (6, -1, 2, "rank -1 of world 2"),
        (6, 0, 0, "rank 0 of world 0"),
    ],
)
def test_impossible_splits_are_refused(batch, rank, world, message):
    with pytest.raises(DataError, match=message):
        rank_rows(batch, rank, world)


def test_the_streams_raise_the_same_error():
    assert data.DataError is DataError and issubclass(DataError, ValueError)
