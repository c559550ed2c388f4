"""The compiled row-map kernels carry CPU rows of alpha-entmax and ReLU^p, match the float64 references on
long, flat and tied rows at any thread count, and the row maps fall back to torch ops, with the reason,
wherever the library is off or its cache is refused."""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest
import torch

from attnlab.rowmaps import entmax, kernel, relu_power
from rowmaps.rowmap_refs import assert_close_np, entmax_jacobian, np64, ref_entmax, ref_relu_power

ENTMAX = importlib.import_module("attnlab.rowmaps.entmax")
POINTWISE = importlib.import_module("attnlab.rowmaps.pointwise")
FAST_ALPHAS = (2.0, 1.5, 1.25)


@pytest.fixture
def built():
    if kernel.get() is None:
        pytest.skip(kernel.status())
    return kernel.get()


def _rows(n, scale, dtype, seed, rows=3):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, n, generator=g, dtype=torch.float64) * scale).to(dtype)


@pytest.mark.parametrize("alpha", FAST_ALPHAS)
def test_cpu_rows_take_the_kernel_forward_and_backward(built, monkeypatch, alpha):
    def torch_path(*args):
        raise AssertionError("the torch-ops forward ran")

    monkeypatch.setattr(ENTMAX, "_fast_forward", torch_path)
    z = _rows(40, 1.0, torch.float64, seed=1).requires_grad_()
    g = _rows(40, 1.0, torch.float64, seed=2)
    p = entmax(z, alpha)
    p.backward(g)
    for row in range(z.shape[0]):
        want = entmax_jacobian(np64(p[row]), alpha) @ np64(g[row])
        assert np.abs(np64(z.grad[row]) - want).max() < 1e-12


@pytest.mark.parametrize("p", [1, 2, 4, 8, 16])
def test_cpu_rows_take_the_kernel_for_relu_powers(built, monkeypatch, p):
    def torch_path(*args):
        raise AssertionError("the torch-ops forward ran")

    monkeypatch.setattr(POINTWISE, "_power", torch_path)
    z = _rows(40, 1.0, torch.float64, seed=3).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: relu_power(t, p, 0.5), (z,))
    assert_close_np(relu_power(z, p, 0.5), ref_relu_power(z, None, p, 0.5), 1e-12, msg=f"p={p}:")


@pytest.mark.parametrize("alpha", FAST_ALPHAS)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)], ids=["f32", "f64"])
def test_long_rows_match_the_reference(built, alpha, dtype, tol):
    for scale in (0.1, 1.0, 10.0):
        z = _rows(65536, scale, dtype, seed=int(10 * scale))
        p = entmax(z, alpha)
        assert_close_np(p, ref_entmax(z, None, alpha), tol, msg=f"alpha={alpha} scale={scale}:")
        assert np.abs(np64(p).sum(-1) - 1).max() <= tol


@pytest.mark.parametrize("alpha", FAST_ALPHAS)
def test_flat_and_tied_rows(built, alpha):
    """Every key tied (the whole row is the support), half the keys tied at the top, one key far above."""
    n = 5000
    flat = torch.full((n,), 3.0)
    tied = torch.where(torch.arange(n) % 2 == 0, 1.0, -5.0)
    spike = torch.zeros(n).index_fill_(0, torch.tensor([17]), 100.0)
    z = torch.stack([flat, tied, spike])
    p = entmax(z, alpha)
    assert_close_np(p, ref_entmax(z, None, alpha), 1e-6, msg=f"alpha={alpha}:")
    assert torch.equal(p[0], torch.full((n,), 1.0 / n)) or np.abs(np64(p[0]) - 1 / n).max() < 1e-9
    assert (p[1][1::2] == 0).all() and p[2][17] == 1.0


def test_thread_count_does_not_change_a_bit(built):
    z = _rows(8192, 1.0, torch.float32, seed=5, rows=64)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = entmax(z, 1.25), relu_power(z, 16, 0.0)
        torch.set_num_threads(2)
        two = entmax(z, 1.25), relu_power(z, 16, 0.0)
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(one, two, strict=True))


@pytest.mark.parametrize(
    "env,why",
    [
        ({"ATTNLAB_KERNEL": "0"}, "turned off by ATTNLAB_KERNEL=0"),
        ({"CC": "/nonexistent/cc"}, "could not build or load it"),
    ],
)
def test_without_the_kernel_entmax_falls_back_with_a_reason(fresh_cache, monkeypatch, env, why):
    z = _rows(300, 1.0, torch.float32, seed=9)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert kernel.get() is None and why in kernel.status()
    assert_close_np(entmax(z, 1.5), ref_entmax(z, None, 1.5), 1e-5, msg="fallback:")


def _owned_by_another_user(monkeypatch, suffix):
    """os.stat reports uid euid + 1 for paths ending in ``suffix``: tests run as root, whose chown of a
    file to another user would not stop root from writing it anyway."""
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        st = real_stat(path, *args, **kwargs)
        if not str(path).endswith(suffix):
            return st
        fields = list(st[:10])
        fields[4] = os.geteuid() + 1
        return os.stat_result(fields)

    monkeypatch.setattr(os, "stat", stat)


@pytest.mark.parametrize("suffix,what", [("kernels", "cache folder"), (".so", "cached library")])
def test_cache_owned_by_another_user_is_refused(seeded_cache, monkeypatch, suffix, what):
    _owned_by_another_user(monkeypatch, suffix)
    assert kernel.get() is None
    assert f"refused: the {what} {seeded_cache}" in kernel.status()
    assert f"is owned by uid {os.geteuid() + 1}, not by this user" in kernel.status()
    z = _rows(300, 1.0, torch.float32, seed=9)
    assert_close_np(entmax(z, 1.5), ref_entmax(z, None, 1.5), 1e-5, msg="fallback:")
