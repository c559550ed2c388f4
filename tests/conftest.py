"""Fixtures shared across the test packages."""

import os
import shutil

import pytest
from hypothesis import settings

# Hypothesis draws the same examples on every run unless asked otherwise, so CI passes or fails on the code, not on
# the draw: the "ci" profile (the default) derandomizes and keeps no example database. ATTNLAB_HYPOTHESIS=explore
# draws new examples each run (a failure prints the seed that replays it; pin it with @example beside its test).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, database=None, print_blob=True)
settings.load_profile(os.environ.get("ATTNLAB_HYPOTHESIS", "ci"))

# Triton fixes its interpreter mode when it is first imported, and transformers may import it while the test modules
# are collected: the suite runs Triton kernels only on CPU tensors, under the interpreter, so it is chosen first.
os.environ.setdefault("TRITON_INTERPRET", "1")

# The README's test command spreads the tests over the cores (pytest-xdist, one worker per core): a worker that also
# ran torch on every core would share each core with the other workers' threads, which costs tiny models far more
# than it gains (a loaded 2-core machine ran a small model 60x slower on two threads than on one). Set before torch
# is imported, so the worker and the processes it starts read it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"


@pytest.fixture(autouse=True)
def _threads_kept():
    """Every test leaves torch's thread count and OMP_NUM_THREADS as it found them: the attnlab command sets
    both (``perf.set_threads``), and a count that changes mid-session changes the rounding of parallel sums."""
    import torch

    threads, env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    yield
    torch.set_num_threads(threads)
    if env is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = env


@pytest.fixture(params=["kernel", "torch"])
def kernel_path(request, monkeypatch):
    """Run a test on each path of the code with a compiled kernel (alpha-entmax, ReLU^p, sigmoid's
    backward, the diagnostics bundle): the kernel (skipped where it cannot be built) and the torch-ops
    path every other device and machine uses."""
    from attnlab import native

    if request.param == "torch":
        monkeypatch.setattr(native, "library", lambda: None)
    elif native.library() is None:
        pytest.skip(native.status())
    return request.param


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    """The compiled library's cached load forgotten, its build cache in tmp_path; the real load is restored
    afterwards."""
    from attnlab import native

    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path))
    native._load.cache_clear()
    yield tmp_path
    native._load.cache_clear()


@pytest.fixture
def seeded_cache(monkeypatch, tmp_path):
    """Like ``fresh_cache``, but the cache folder (mode 0700) already holds copies of the libraries built in
    the real cache, this machine's among them, so a test of the cache checks does not compile again."""
    from attnlab import native

    if native.library() is None:
        pytest.skip(native.status())
    folder = tmp_path / "kernels"
    folder.mkdir(mode=0o700)
    for lib in native._cache_dir().glob("attnlab-*.so"):
        shutil.copy2(lib, folder / lib.name)
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path))
    native._load.cache_clear()
    yield folder
    native._load.cache_clear()


@pytest.fixture(scope="session")
def real_models():
    """name -> (model, tokenizer) for the fetched real models (loaded once per session, float32, eager);
    a test asking for one that is not fetched is skipped with the command that fetches it."""
    from attnlab.hooks import load_model
    from attnlab.loading import fetch

    loaded = {}

    def get(name: str):
        if fetch.fetched(name) is None:
            pytest.skip(f"real model {name} is not fetched; run `attnlab fetch {name}`")
        if name not in loaded:
            loaded[name] = load_model(name)
        return loaded[name]

    return get


@pytest.fixture
def drawn(monkeypatch):
    """The figures any plotting module (the report's, each study's plot, the card page) saves, kept for inspection;
    each is still saved and closed, and its PNG and SVG files are read back before the plot function returns."""
    import importlib
    import pkgutil
    import xml.etree.ElementTree as ET

    from PIL import Image

    import attnlab.cards
    import attnlab.report
    import attnlab.studies
    from attnlab.report import figures

    kept = []
    save = figures.save_figure

    def keep(fig, path, dpi=120):
        kept.append(fig)
        png, svg = save(fig, path, dpi=dpi)
        with Image.open(png) as image:
            image.verify()
        ET.parse(svg)
        return png, svg

    for package in (attnlab.report, attnlab.studies, attnlab.cards):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            if getattr(module, "save_figure", None) is save:
                monkeypatch.setattr(module, "save_figure", keep)
    return kept
