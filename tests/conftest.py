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


@pytest.fixture(scope="session")
def real_models():
    """name -> (model, tokenizer) for the fetched real models (loaded once per session, float32, eager);
    a test asking for one that is not fetched is skipped with the command that fetches it."""
    from attnlab.hooks import fetch, load_model

    loaded = {}

    def get(name: str):
        if fetch.fetched(name) is None:
            pytest.skip(f"real model {name} is not fetched; run `attnlab fetch {name}`")
        if name not in loaded:
            loaded[name] = load_model(name)
        return loaded[name]

    return get
