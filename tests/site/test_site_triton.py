"""The Triton fused ReLU^p and sigmoid attention equals the row maps' attention, forward and backward, under Triton's interpreter."""

from __future__ import annotations

import importlib
import os

# Triton reads this when @triton.jit decorates, so before the kernels' module is first imported
os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

triton = pytest.importorskip("triton")

from attnlab import rowmaps  # noqa: E402
from attnlab.site.triton import relu_sigmoid_kernels as site_triton_kernels  # noqa: E402
from attnlab.site.triton.relu_sigmoid import relu_sigmoid_attention  # noqa: E402

if not site_triton_kernels.INTERPRETED:  # imported earlier, compiled, by a module that uses it
    importlib.reload(site_triton_kernels)

# masked lanes of a tile compute 1/0, -inf - -inf or log2(0) in numpy before tl.where drops them
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# largest error relative to the largest reference entry (measured at most 2.2e-6, 6.7e-3, 4.7e-4)
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}
F32 = TOL[torch.float32]


@pytest.fixture(autouse=True, scope="module")
def _interpreter():
    with site_triton_kernels.interpreter_loop_bounds():
        yield


def _qkv(heads=(4, 2), n_q=19, n_k=37, d=8, dv=8, dtype=torch.float32, batch=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    hq, hkv = heads
    shapes = ((batch, hq, n_q, d), (batch, hkv, n_k, d), (batch, hkv, n_k, dv), (batch, hq, n_q, dv))
    return [torch.randn(*s, generator=g).to(dtype) for s in shapes]


def _name(family: str, p: float, b: float) -> str:
    return f"relu_p{p:g}_b{b:g}" if family == "relu_p" else f"sigmoid_b{b:g}"


def _reference(q, k, v, dout, *, family, p=2.0, b=0.0, scale=None, causal=True, window=None, slopes=None, qs=None):
    """Output, dq, dk, dv and the weights in float64, from the row map applied to explicitly masked scores."""
    q, k, v = (t.double().requires_grad_() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    n_q, n_k = q.shape[2], k.shape[2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    z = scale * q @ k.repeat_interleave(group, 1).transpose(-1, -2)
    pos = torch.arange(n_q)[:, None] + n_k - n_q  # query i sits at key position n_k - n_q + i
    key = torch.arange(n_k)[None, :]
    if slopes is not None:
        z = z - slopes.double()[:, None, None] * (pos - key).clamp(min=0)
    if qs is not None:
        z = z * qs.double()[..., None]
    mask = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        mask &= key <= pos
    if window is not None:
        mask &= key > pos - window
    w = rowmaps.get(_name(family, p, b))(z, mask.expand_as(z))
    out = w @ v.repeat_interleave(group, 1)
    out.backward(dout.double())
    return out.detach(), q.grad, k.grad, v.grad, w.detach()


def _kernel(q, k, v, dout, blocks=(16, 32), **kw):
    # tiles of unequal sides: a query axis taken for a key axis would not broadcast by chance
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    out = relu_sigmoid_attention(q, k, v, block_q=blocks[0], block_k=blocks[1], **kw)
    assert out.dtype == q.dtype
    out.backward(dout)
    return out.detach(), q.grad, k.grad, v.grad


def _errors(q, k, v, dout, blocks=(16, 32), **kw) -> list[float]:
    """Largest error of out, dq, dk, dv, each relative to the largest entry of its reference."""
    qs = kw.pop("query_scale", None)
    ref = _reference(q, k, v, dout, qs=qs, **kw)
    got = _kernel(q, k, v, dout, blocks, query_scale=qs, **kw)
    return [float((g.double() - r).abs().max() / r.abs().max().clamp_min(1e-30)) for g, r in zip(got, ref)]


@pytest.mark.parametrize(
    "family, p, b",
    [("relu_p", 1.0, 0.0), ("relu_p", 2.0, 0.5), ("relu_p", 4.0, 0.0), ("relu_p", 16.0, 0.3), ("relu_p", 1.5, 0.0)]
    + [("sigmoid", 2.0, 0.0), ("sigmoid", 2.0, 1.5)],
)
def test_every_degree_and_the_sigmoid_with_a_key_cache_and_gqa(family, p, b):
    # 19 queries after 18 cached keys, lengths that are no multiple of the 16-wide tiles, 2 query heads per kv head
    assert max(_errors(*_qkv(), family=family, p=p, b=b)) < F32


@pytest.mark.parametrize("family, p", [("relu_p", 2.0), ("relu_p", 16.0), ("sigmoid", 1.0)])
@pytest.mark.parametrize("kv_heads", [2, 1])
def test_window_alibi_and_query_scale_under_gqa(family, p, kv_heads):
    q, k, v, dout = _qkv(heads=(4, kv_heads), n_q=26, n_k=26, d=12, dv=20, batch=2)
    slopes = torch.tensor([0.0, 0.25, 0.5, 1.0])  # NAPE's NoPE head (slope 0) beside ALiBi ones
    qs = 0.5 + torch.rand(2, 4, 26, generator=torch.Generator().manual_seed(1))
    errs = _errors(q, k, v, dout, (32, 16), family=family, p=p, b=0.2, window=7, slopes=slopes, query_scale=qs)
    assert max(errs) < F32


@pytest.mark.parametrize("window", [1, 2])
def test_windows_of_one_or_two_keys_at_tile_edges(window):
    # with 16-wide tiles, the last query a key tile reaches under a window of 2 opens the next query tile
    q, k, v, dout = _qkv(n_q=33, n_k=33)
    assert max(_errors(q, k, v, dout, (16, 16), family="relu_p", p=2.0, b=1.0, window=window)) < F32


def test_dead_rows_attend_to_nothing_and_rows_one_key_holds_have_no_query_gradient():
    # b = -1.5 leaves some rows no key with z + b > 0 and some only one, whose weight is 1 whatever its score
    q, k, v, dout = _qkv(n_q=37)
    got = _kernel(q, k, v, dout, family="relu_p", p=2.0, b=-1.5)
    ref = _reference(q, k, v, dout, family="relu_p", p=2.0, b=-1.5)
    live = (ref[4] > 0).sum(-1)
    dead, single = live == 0, live == 1
    assert dead.any() and single.any() and (live > 1).any()
    assert got[0][dead].eq(0).all() and got[1][dead | single].eq(0).all()
    assert max(float((g.double() - r).abs().max() / r.abs().max()) for g, r in zip(got, ref)) < F32


def test_sigmoid_rows_below_float32s_range_keep_their_weights():
    # every z + b near -100: sigmoid underflows in float32, the row map goes to log space and so must the kernel
    q, k, v, dout = _qkv()
    assert max(_errors(q, k, v, dout, family="sigmoid", b=-100.0)) < F32


@pytest.mark.parametrize("family, p", [("relu_p", 4.0), ("relu_p", 16.0), ("sigmoid", 1.0)])
def test_scores_fifty_times_larger_do_not_overflow(family, p):
    # scores up to ~200: r^16 ~ 1e37 would overflow a plain float32 sum of powers
    q, k, v, dout = _qkv()
    errs = _errors(q, k, v, dout, family=family, p=p, scale=50 / 8**0.5)
    assert max(errs) < F32


def test_without_the_causal_mask_every_key_is_attended():
    q, k, v, dout = _qkv(n_q=23, n_k=17)
    assert max(_errors(q, k, v, dout, family="relu_p", p=2.0, causal=False, slopes=torch.rand(4))) < F32


@pytest.mark.parametrize("n_q, n_k", [(0, 5), (3, 0)])
def test_no_queries_or_no_keys_give_zeros(n_q, n_k):
    # a row with no allowed key attends to nothing, as the row maps' rows do
    q, k, v, dout = _qkv(n_q=n_q, n_k=n_k)
    for t in _kernel(q, k, v, dout, family="sigmoid", causal=False):
        assert not t.any()


@pytest.mark.parametrize("family, p", [("relu_p", 4.0), ("sigmoid", 1.0)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_bfloat16_and_float16_inputs_within_their_rounding(family, p, dtype):
    q, k, v, dout = _qkv(dtype=dtype)
    assert max(_errors(q, k, v, dout, family=family, p=p, window=11)) < TOL[dtype]


@pytest.mark.parametrize(
    "overrides, error, words",
    [
        (dict(q=torch.zeros(1, 4, 19, 8, dtype=torch.float64)), TypeError, "float32, bfloat16 or float16"),
        (dict(k=torch.zeros(1, 2, 37, 8, dtype=torch.float16)), TypeError, "share one dtype"),
        (dict(q=torch.zeros(4, 19, 8)), ValueError, "4-D"),
        (dict(v=torch.zeros(1, 2, 36, 8)), ValueError, "disagree"),
        (dict(q=torch.zeros(1, 4, 19, 0), k=torch.zeros(1, 2, 37, 0)), ValueError, "head_dim of at least 1"),
        (dict(q=torch.zeros(1, 3, 19, 8)), ValueError, "multiple of key/value heads"),
        (dict(q=torch.zeros(1, 4, 40, 8)), ValueError, "at least as many keys"),
        (dict(family="softmax"), ValueError, "family must be one of"),
        (dict(p=0.0), ValueError, "degree p"),
        (dict(b=float("nan")), ValueError, "bias b"),
        (dict(scale=-1.0), ValueError, "scale must be"),
        (dict(window=0), ValueError, "window must be"),
        (dict(window=4, causal=False), ValueError, "needs causal"),
        (dict(block_q=24), ValueError, "power of two"),
        (dict(slopes=torch.zeros(3)), ValueError, "broadcast to (4,)"),
        (dict(slopes=torch.zeros(4, requires_grad=True)), ValueError, "must not require grad"),
        (dict(query_scale=torch.ones(1, 4, 18)), ValueError, "broadcast to (1, 4, 19)"),
        (dict(k=torch.zeros(1, 2, 37, 8, device="meta")), ValueError, "one device"),
    ],
)
def test_bad_arguments_raise_one_line_errors(overrides, error, words):
    q, k, v, _ = _qkv()
    args = {"q": q, "k": k, "v": v, "family": "relu_p", **overrides}
    with pytest.raises(error) as caught:
        relu_sigmoid_attention(args.pop("q"), args.pop("k"), args.pop("v"), **args)
    message = str(caught.value)
    assert words in message and "\n" not in message
