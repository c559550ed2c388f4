"""site.attend with kernel="triton" gives the same output and gradients as its torch path, and falls back wherever the kernels do not apply."""

from __future__ import annotations

import importlib
import os

# Triton reads this when @triton.jit decorates, so before the kernels' modules are first imported
os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton")

from attnlab import rowmaps  # noqa: E402
from attnlab.model import positions as pe  # noqa: E402
from attnlab.site import Causal, Plan, Scores, Slopes, attend  # noqa: E402
from attnlab.site.route import triton_call  # noqa: E402
from attnlab.site.triton import entmax_kernels as site_triton_entmax_kernels
from attnlab.site.triton import relu_sigmoid_kernels as site_triton_kernels

if not site_triton_kernels.INTERPRETED:  # imported earlier, compiled, by a module that uses it
    importlib.reload(site_triton_kernels)
    importlib.reload(site_triton_entmax_kernels)

# masked lanes of a tile compute 1/0, -inf - -inf or log2(0) in numpy before tl.where drops them
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

HEADS = 4


@pytest.fixture(autouse=True, scope="module")
def _interpreter():
    with site_triton_kernels.interpreter_loop_bounds():
        yield


def _qkv(hkv=2, n_q=19, n_k=23, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = ((1, HEADS, n_q, d), (1, hkv, n_k, d), (1, hkv, n_k, d))
    return [torch.randn(*s, generator=g).requires_grad_() for s in shapes]


def _plan(name, kernel="triton", **options):
    return Plan(maps={h: rowmaps.get(name) for h in range(HEADS)}, kernel=kernel, **options)


CASES = {
    "relu_p4, causal, fewer queries than keys, GQA 4:2": dict(name="relu_p4_b0", mask=Causal()),
    "sigmoid, sliding window, ALiBi, GQA 4:1": dict(
        name="sigmoid_b0", mask=Causal(window=6), hkv=1, bias=Slopes(pe.alibi_slopes(HEADS))
    ),
    "entmax 1.5, causal window, NAPE slopes, a constant row scale": dict(
        name="entmax_a1.5", mask=Causal(window=9), bias=Slopes(pe.nape_slopes(HEADS, "inverse")), scale=True
    ),
    "relu_p2 with a bias, every key": dict(name="relu_p2_b0.5", mask=None, n_q=11),
}


@pytest.mark.parametrize("case", CASES)
def test_triton_path_equals_torch_path(case):
    options = dict(CASES[case])
    name, mask, bias = options.pop("name"), options.pop("mask"), options.pop("bias", None)
    scale = None
    if options.pop("scale", False):
        scale = 0.5 + torch.rand(1, HEADS, options.get("n_q", 19), 1, generator=torch.Generator().manual_seed(2))
    q, k, v = _qkv(**options)
    scores = Scores(0.4, bias=bias, scale=scale)
    assert triton_call(q, k, scores, mask, _plan(name)) is not None
    results = []
    for kernel in ("triton", "torch"):
        out = attend(q, k, v, scores, mask, _plan(name, kernel))
        g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
        results.append((out, *torch.autograd.grad(out, (q, k, v), g)))
    assert results[0][0].shape == (1, q.shape[2], HEADS, q.shape[3]) and results[0][0].is_contiguous()
    for label, got, want in zip(("out", "dq", "dk", "dv"), *results):
        atol = 1e-5 * max(1.0, want.abs().max().item())
        torch.testing.assert_close(got, want, rtol=1e-5, atol=atol, msg=lambda m, label=label: f"{label}: {m}")


def _observer(block):
    pass


def _mixed():
    return Plan(maps={h: rowmaps.get("relu_p4_b0" if h % 2 else "sigmoid_b0") for h in range(HEADS)}, kernel="triton")


FALLBACKS = {
    "a score observer": dict(plan=_plan("relu_p4_b0", observers=(_observer,))),
    "a weight observer": dict(plan=_plan("relu_p4_b0", weight_observers=(_observer,))),
    "dropout": dict(plan=_plan("entmax_a1.5", dropout=0.1)),
    "softmax everywhere": dict(plan=Plan(kernel="triton")),
    "a softmax map": dict(plan=_plan("softmax")),
    "heads left to softmax": dict(plan=Plan(maps={0: rowmaps.get("relu_p4_b0")}, kernel="triton")),
    "a per-head mix of maps": dict(plan=_mixed()),
    "dead rows made uniform": dict(
        plan=Plan(maps={h: rowmaps.get("relu_p4_b0", dead="uniform") for h in range(HEADS)}, kernel="triton")
    ),
    "a softcap": dict(scores=Scores(0.4, softcap=30.0)),
    "a bias function": dict(scores=Scores(0.4, bias=lambda start, stop: torch.zeros(1, 1, stop - start, 23))),
    "a learnable scale": dict(scores=Scores(0.4, scale=torch.ones(1, HEADS, 19, 1, requires_grad=True))),
    "a mask tensor": dict(mask=torch.ones(1, 1, 19, 23, dtype=torch.bool)),
    "kernel='torch'": dict(plan=_plan("relu_p4_b0", kernel="torch")),
    "kernel='auto' on the CPU": dict(plan=_plan("relu_p4_b0", kernel="auto")),
    "fused=False": dict(plan=_plan("relu_p4_b0", fused=False)),
}


@pytest.mark.parametrize("case", FALLBACKS)
def test_falls_back_where_the_kernels_do_not_apply(case):
    q, k, _ = _qkv()
    call = {"scores": Scores(0.4), "mask": Causal(), "plan": _plan("relu_p4_b0"), **FALLBACKS[case]}
    assert triton_call(q, k, call["scores"], call["mask"], call["plan"]) is None


def test_a_learnable_scale_routes_without_autograd():
    q, k, _ = _qkv()
    scores = Scores(0.4, scale=torch.ones(1, HEADS, 19, 1, requires_grad=True))
    with torch.no_grad():
        assert triton_call(q, k, scores, Causal(), _plan("entmax_a1.5")) is not None


def test_plan_refuses_an_unknown_kernel():
    with pytest.raises(ValueError, match="kernel must be one of"):
        Plan(kernel="cuda")
