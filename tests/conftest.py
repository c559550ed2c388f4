"""Fixtures shared across the test packages."""

import pytest


@pytest.fixture(params=["kernel", "torch"])
def kernel_path(request, monkeypatch):
    """Run a test on each path of the code with a compiled kernel (alpha-entmax, ReLU^p, sigmoid's
    backward, the diagnostics bundle): the kernel (skipped where it cannot be built) and the torch-ops
    path every other device and machine uses."""
    from attnlab.rowmaps import kernel

    if request.param == "torch":
        monkeypatch.setattr(kernel, "get", lambda: None)
    elif kernel.get() is None:
        pytest.skip(kernel.status())
    return request.param
