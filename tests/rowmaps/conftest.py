"""Shared setup for the rowmaps tests: makes the reference module ``rowmap_refs`` importable, and runs
alpha-entmax tests on both of its paths (``entmax_path``)."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The suite is sized for 2 CPU cores; more threads only add contention on tiny tensors.
torch.set_num_threads(min(torch.get_num_threads(), 2))


@pytest.fixture(params=["kernel", "torch"])
def entmax_path(request, monkeypatch):
    """Run a test on each alpha-entmax path: the compiled kernel (skipped where it cannot be built) and the
    torch-ops path every other device and machine uses."""
    from attnlab.rowmaps import kernel

    if request.param == "torch":
        monkeypatch.setattr(kernel, "get", lambda: None)
    elif kernel.get() is None:
        pytest.skip(kernel.status())
    return request.param
