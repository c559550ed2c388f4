"""Shared setup for the rowmaps tests: makes the reference module ``rowmap_refs`` importable, and runs the
tests of maps with a compiled kernel on both of their paths (``kernel_path``)."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The suite is sized for 2 CPU cores; more threads only add contention on tiny tensors.
torch.set_num_threads(min(torch.get_num_threads(), 2))


@pytest.fixture(params=["kernel", "torch"])
def kernel_path(request, monkeypatch):
    """Run a test on each path of alpha-entmax and ReLU^p: the compiled kernel (skipped where it cannot be
    built) and the torch-ops path every other device and machine uses."""
    from attnlab.rowmaps import kernel

    if request.param == "torch":
        monkeypatch.setattr(kernel, "get", lambda: None)
    elif kernel.get() is None:
        pytest.skip(kernel.status())
    return request.param
