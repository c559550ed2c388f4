"""The C library builds once into a private cache, refuses one others could write, and serves both wrappers."""

from __future__ import annotations

import pytest

from attnlab import native
from attnlab.diagnostics import kernel as diagnostics_kernel
from attnlab.rowmaps import kernel as rowmaps_kernel


@pytest.fixture
def built():
    if native.library() is None:
        pytest.skip(native.status())
    return native.library()


def test_build_lands_in_the_cache_once(fresh_cache, built):
    libs = list((fresh_cache / "kernels").glob("attnlab-*.so"))
    assert len(libs) == 1 and not list((fresh_cache / "kernels").glob(".attnlab-*"))
    stamp = libs[0].stat().st_mtime_ns
    native._load.cache_clear()
    assert native.library() is not None and libs[0].stat().st_mtime_ns == stamp
    assert native.status().startswith("C kernel (row maps, diagnostics, fused attention): on")


def test_cache_folder_is_private(fresh_cache, built):
    assert (fresh_cache / "kernels").stat().st_mode & 0o777 == 0o700


def test_our_loose_cache_folder_is_narrowed_to_0700(seeded_cache):
    seeded_cache.chmod(0o777)
    assert native.library() is not None
    assert seeded_cache.stat().st_mode & 0o777 == 0o700


def test_cached_library_writable_by_others_is_refused(seeded_cache):
    for lib in seeded_cache.glob("attnlab-*.so"):
        lib.chmod(0o777)
    assert native.library() is None
    assert "is writable by group or others (mode 777)" in native.status()


def test_both_wrappers_read_the_one_library(built):
    assert rowmaps_kernel.get().lib is built and diagnostics_kernel.get().lib is built
    assert rowmaps_kernel.status() == diagnostics_kernel.status() == native.status()


def test_turned_off_leaves_both_wrappers_without_a_kernel(fresh_cache, monkeypatch):
    monkeypatch.setenv("ATTNLAB_KERNEL", "0")
    assert rowmaps_kernel.get() is None and diagnostics_kernel.get() is None
    assert "turned off by ATTNLAB_KERNEL=0" in native.status()
