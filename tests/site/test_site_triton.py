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
from attnlab.site import Causal, Plan, Scores, attend  # noqa: E402
from attnlab.site.triton import entmax_kernels as site_triton_entmax_kernels  # noqa: E402
from attnlab.site.triton import relu_sigmoid_kernels as site_triton_kernels  # noqa: E402
from attnlab.site.triton.relu_sigmoid import relu_sigmoid_attention  # noqa: E402

if not site_triton_kernels.INTERPRETED:  # imported earlier, compiled, by a module that uses it
    importlib.reload(site_triton_kernels)
    importlib.reload(site_triton_entmax_kernels)

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


@pytest.mark.parametrize(
    "b, weights", [(0.0, [0.2263, 0.3095, 0.3095, 0.1547]), (1.0, [0.2439, 0.2769, 0.2769, 0.2024])]
)
def test_sigmoid_keys_at_plus_inf_take_sigmas_bounded_limit(b, weights):
    """Scores [1, +inf, +inf, 0] (2^100 * 2^100 overflows float32): each +inf key weighs sigma(+inf) = 1 beside
    sigma(1 + b) and sigma(b), the row map's limit, not softmax's even split; v = I, so the output is the weights."""
    big = 2.0**100
    q = torch.tensor([big, 1 / big, 0.0, 0.0]).view(1, 1, 1, 4)
    k = torch.tensor([[0.0, big, 0, 0], [big, 0, 0, 0], [big, 0, 0, 0], [0, 0, 0, 0]]).view(1, 1, 4, 4)
    out = relu_sigmoid_attention(q, k, torch.eye(4).view(1, 1, 4, 4), family="sigmoid", b=b, scale=1.0)
    want = rowmaps.get(f"sigmoid_b{b:g}")(torch.tensor([[1.0, torch.inf, torch.inf, 0.0]]))
    torch.testing.assert_close(out.view(1, 4), want)
    torch.testing.assert_close(out.view(4), torch.tensor(weights), rtol=0, atol=1e-4)


INF = float("inf")
# Every map the kernels serve (attnlab.site.route): ReLU^p by binary powering and by exp2/log2, the sigmoid, and
# alpha-entmax with k = 1 / (alpha - 1) = 2, 1, 4 and 1/0.7 (the kernels' product and exp2/log2 paths).
KERNEL_MAPS = ["relu_p1_b0", "relu_p2_b0", "relu_p1.5_b0.5", "relu_p4_b-0.5", "sigmoid_b0", "sigmoid_b1"] + [
    "entmax_a1.5",
    "entmax_a2",
    "entmax_a1.25",
    "entmax_a1.7",
]
# Rows of one call, 6 queries after 2 cached keys: query i sees keys 0..i+2; the keys after them are masked
INFINITE_ROWS = {
    "every allowed key +inf, masked ones +inf or finite": [INF, INF, INF, 1.0, INF, 0.0, 0.0, INF],
    "[1, inf, inf, 0]: two +inf keys beside finite ones": [1.0, INF, INF, 0.0, 0.0, INF, 0.0, 0.0],
    "one +inf key beside -inf and finite ones": [0.5, -INF, INF, 2.0, -INF, INF, INF, 0.0],
    "a finite row in the same block, +inf only at masked keys": [0.3, -1.2, 0.8, 2.0, -0.5, 1.1, INF, INF],
    "every allowed key -inf: no key the row map counts": [-INF] * 7 + [INF],
    "three +inf keys among -inf and finite ones": [-INF, INF, 1.0, -INF, INF, INF, 0.2, -2.0],
}


def _scored(scores: torch.Tensor, heads: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """q (1, heads, Q, D) and k (1, 1, K, D) whose head-0 products q.k are exactly ``scores`` (Q x K: finite, +inf or
    -inf) in float32: query i has 2^100 and 1 in its own two dims, so 2^100 * +-2^100 overflows to +-inf and 1 * s is
    s. A NaN in k's last dim (0 in every q) makes that key's scores NaN. Heads past the first get finite scores
    (their 2^100 dims are 0), so they share the kv head with rows of every kind."""
    n_q, n_k = scores.shape
    big = 2.0**100
    q = torch.zeros(1, heads, n_q, 2 * n_q + 1)
    k = torch.zeros(1, 1, n_k, 2 * n_q + 1)
    rand = torch.randn(heads, n_q, generator=torch.Generator().manual_seed(3))
    for i, row in enumerate(scores):
        infinite = torch.isinf(row)
        q[0, 0, i, 2 * i : 2 * i + 2] = torch.tensor([big, 1.0])
        q[0, 1:, i, 2 * i + 1] = rand[1:, i]
        k[0, 0, :, 2 * i] = torch.where(infinite, row.sign() * big, 0.0)
        k[0, 0, :, 2 * i + 1] = torch.where(infinite, 0.0, row)
    return q, k


def _site(name: str, kernel: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad: bool = True):
    """attend's output (B, H, Q, D) with ``name`` on every head, and its gradients for q, k, v under one upstream
    gradient."""
    q, k, v = (t.clone().requires_grad_(grad) for t in (q, k, v))
    plan = Plan(maps={h: rowmaps.get(name) for h in range(q.shape[1])}, kernel=kernel)
    out = attend(q, k, v, Scores(1.0), Causal(), plan).transpose(1, 2)
    if not grad:
        return out, None
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    return out.detach(), torch.autograd.grad(out, (q, k, v), dout)


def _assert_finite_and_close(got, want):
    """Each of out, dq, dk, dv finite and within F32 of the largest entry of its reference."""
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        assert torch.isfinite(a).all(), name
        assert float((a - b).abs().max() / b.abs().max().clamp_min(1e-30)) < F32, name


@pytest.mark.parametrize("name", KERNEL_MAPS)
def test_rows_holding_infinite_scores_take_the_row_maps_limit_with_its_gradients(name):
    """Rows with +inf or only -inf scores get the row map's weights and the torch path's finite gradients.

    +inf at one, several or every allowed key, beside -inf, finite and masked keys: ReLU^p and entmax split the
    weight evenly over the +inf keys, the sigmoid gives each sigma(+inf) = 1 beside the finite keys' own; a row of
    -inf attends to nothing. Beside them sit a finite row and a second query head of finite rows sharing the kv
    head. v = I on the first 8 dims, so those of the output are the weights."""
    scores = torch.tensor(list(INFINITE_ROWS.values()))
    q, k = _scored(scores, heads=2)
    v = torch.eye(8, k.shape[-1]).view(1, 1, 8, -1)
    out, grads = _site(name, "triton", q, k, v)
    want_out, want_grads = _site(name, "torch", q, k, v)
    weights = rowmaps.get(name)(scores, torch.ones(6, 8, dtype=torch.bool).tril(2))
    for case, got, want in zip(INFINITE_ROWS, out[0, 0, :, :8], weights):
        torch.testing.assert_close(got, want, rtol=0, atol=F32, msg=lambda m, case=case: f"{case}: {m}")
    _assert_finite_and_close((out, *grads), (want_out, *want_grads))


@pytest.mark.parametrize("name", ["relu_p2_b0", "relu_p1.5_b0.5", "sigmoid_b1", "entmax_a1.5", "entmax_a1.7"])
def test_plus_inf_keys_in_any_key_tile_give_the_limit(name):
    """+inf keys in any key tile give the row map's weights and the torch path's gradients.

    With attend's 64-key tiles a row's +inf keys lie in a later tile than finite ones (its online maximum turns
    +inf), in an earlier one (the tiles after it divide by +inf) or in both; the last row is finite."""
    scores = torch.randn(4, 80, generator=torch.Generator().manual_seed(4))
    scores[0, 70] = scores[1, 5] = scores[1, 66] = scores[2, 10] = INF
    q, k = _scored(scores)
    v = torch.randn(k.shape, generator=torch.Generator().manual_seed(5))
    out, grads = _site(name, "triton", q, k, v)
    want_out, want_grads = _site(name, "torch", q, k, v)
    mask = torch.ones(4, 80, dtype=torch.bool).tril(76)
    torch.testing.assert_close(out[0, 0], rowmaps.get(name)(scores, mask) @ v[0, 0], rtol=0, atol=F32)
    _assert_finite_and_close((out, *grads), (want_out, *want_grads))


@pytest.mark.parametrize("name", KERNEL_MAPS)
def test_a_row_holding_nan_beside_plus_inf_keys_is_nan_as_the_row_maps(name):
    """A row holding NaN beside +inf scores is NaN, as the row map's; the row before it keeps its limit.

    The NaN key is the last, which only the second query sees; v = I on the first 4 dims, so those of the output
    are the weights."""
    scores = torch.tensor([[1.0, INF, 0.5, 0.0], [1.0, INF, INF, 0.0]])
    q, k = _scored(scores)
    k[0, 0, 3, -1] = float("nan")
    v = torch.eye(4, k.shape[-1]).view(1, 1, 4, -1)
    out, _ = _site(name, "triton", q, k, v, grad=False)
    scores[1, 3] = float("nan")
    want = rowmaps.get(name)(scores, torch.ones(2, 4, dtype=torch.bool).tril(2))
    assert out[0, 0, 1].isnan().all() and want[1].isnan().all()
    torch.testing.assert_close(out[0, 0, :, :4], want, rtol=0, atol=F32, equal_nan=True)


@pytest.mark.parametrize("name", KERNEL_MAPS)
def test_a_row_holding_nan_among_finite_scores_is_nan_as_the_row_maps_with_their_gradients(name):
    """A row whose largest score is finite but which holds a NaN is NaN throughout, with the torch path's gradients
    (none to its scores); the rows before it, which never see the NaN key, keep their weights.

    The fused kernels' max and ReLU dropped a NaN score, so such a row was a finite row without its NaN key."""
    scores = torch.tensor([[1.0, 2.0, 0.5, 0.0], [1.0, 2.0, 0.3, 0.0], [0.2, -1.0, 0.1, 0.4]])
    q, k = _scored(scores)
    k[0, 0, 3, -1] = float("nan")  # the last key, which only the last query sees
    v = torch.randn(k.shape, generator=torch.Generator().manual_seed(5))
    out, grads = _site(name, "triton", q, k, v)
    want_out, want_grads = _site(name, "torch", q, k, v)
    assert out[0, 0, 2].isnan().all() and not out[0, 0, :2].isnan().any()
    for what, got, want in zip(("out", "dq", "dk", "dv"), (out, *grads), (want_out, *want_grads)):
        top = float(want.nan_to_num().abs().max().clamp_min(1.0))  # dv: the NaN row reaches every key through 0 * NaN
        torch.testing.assert_close(got, want, rtol=0, atol=F32 * top, equal_nan=True, msg=lambda m, w=what: f"{w}: {m}")


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
