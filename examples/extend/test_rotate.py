"""rotate's scored targets are its source rotated left by one, then <eos>; batches repeat by seed."""

import torch

import rotate  # noqa: F401  (registers the task)
from attnlab import tasks


def test_rotate_targets_are_the_rotated_source():
    task = tasks.get_task("rotate")
    batch = task.generate(n=8, length=20, seed=0)
    m = (20 - 2) // 2
    source = batch.ids[:, 1 : m + 1]
    scored = batch.targets[batch.targets != -100].view(8, m + 1)
    assert torch.equal(scored[:, :m], source.roll(-1, dims=1))
    assert (scored[:, m] == task.specials["eos"]).all()
    assert torch.equal(task.generate(n=8, length=20, seed=0).ids, batch.ids)
