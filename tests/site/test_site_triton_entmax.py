"""The Triton fused alpha-entmax attention equals the entmax row map's attention, forward and backward, under Triton's interpreter."""

from __future__ import annotations

import os

# Triton reads it when @triton.jit decorates, so before the kernels are imported; a kernel then runs on CPU tensors.
os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton")

from attnlab import rowmaps  # noqa: E402
from attnlab.model import positions as pe  # noqa: E402
from attnlab.rowmaps import ASEntmax  # noqa: E402
from attnlab.site import causal_mask, position_bias  # noqa: E402
from attnlab.site.triton.entmax import entmax_attention  # noqa: E402

FP32 = dict(rtol=1e-5, atol=1e-5)
LOOSE = dict(rtol=2e-2, atol=2e-2)  # bfloat16/float16 outputs and gradients: their rounding, ~4e-3 relative


def _qkv(b=1, hq=2, hkv=2, n_q=20, n_k=20, d=8, dv=8, dtype=torch.float32, seed=0, spread=1.5):
    g = torch.Generator().manual_seed(seed)
    shapes = ((b, hq, n_q, d), (b, hkv, n_k, d), (b, hkv, n_k, dv))
    return [(torch.randn(*s, generator=g) * spread).to(dtype).requires_grad_() for s in shapes]


def _reference(q, k, v, alpha=1.5, scale=None, causal=True, window=None, slopes=None, query_scale=None):
    """float64 attention through the row map, with the site's own position bias and causal mask."""
    n_q, n_k, group = q.shape[2], k.shape[2], q.shape[1] // k.shape[1]
    q, k, v = q.double(), k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
    z = (q.shape[-1] ** -0.5 if scale is None else scale) * q @ k.transpose(-1, -2)
    if slopes is not None:
        z = z + position_bias(slopes.double(), n_q, n_k, 0, n_q, (0, n_k), torch.float64)
    if query_scale is not None:
        z = z * query_scale.double()[..., None]
    mask = causal_mask(n_q, n_k, 0, n_q, window=window) if causal else None
    return rowmaps.get(f"entmax_a{alpha:g}")(z, mask) @ v


def _both(q, k, v, **options):
    """(kernel, reference) outputs and gradients for one upstream gradient."""
    out = entmax_attention(q, k, v, block_q=16, block_k=16, **options)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.dtype)
    grads = torch.autograd.grad(out, (q, k, v), g)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref = _reference(*leaves, **options)
    return (out, *grads), (ref, *torch.autograd.grad(ref, leaves, g.double()))


def _assert_close(got, want, tol):
    """Each of out, dq, dk, dv within rtol, and atol times its largest entry (float32 errors scale with it)."""
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        assert a.dtype == got[0].dtype, name
        atol = tol["atol"] * max(1.0, b.abs().max().item())
        torch.testing.assert_close(a.double(), b, rtol=tol["rtol"], atol=atol, msg=lambda m, name=name: f"{name}: {m}")


CASES = {
    "causal, Q = K, not a multiple of the blocks": dict(shape=dict(n_q=23, n_k=23), alpha=1.5),
    "fewer queries than keys, GQA 4:2": dict(shape=dict(hq=4, hkv=2, n_q=9, n_k=30), alpha=1.5),
    "sliding window, ALiBi, GQA 4:1": dict(
        shape=dict(hq=4, hkv=1, n_q=27, n_k=27), alpha=1.5, window=5, slopes=pe.alibi_slopes(4)
    ),
    "sparsemax with NAPE slopes and a query scale of either sign": dict(
        shape=dict(b=2, n_q=17, n_k=20), alpha=2.0, slopes=pe.nape_slopes(2, "inverse"), query_scale="random"
    ),
    "alpha 1.25, not causal, ALiBi on fewer queries": dict(
        shape=dict(n_q=10, n_k=21), alpha=1.25, causal=False, slopes=pe.alibi_slopes(2)
    ),
    "general alpha 1.7, head dims not powers of two": dict(shape=dict(n_q=18, n_k=18, d=6, dv=10), alpha=1.7),
}


@pytest.mark.parametrize("case", CASES)
def test_equals_the_row_map_forward_and_backward(case):
    options = dict(CASES[case])
    q, k, v = _qkv(**options.pop("shape"))
    if options.get("query_scale") == "random":
        # a negative scale puts masked keys' scores on top unless the mask is applied after it, as the site does
        options["query_scale"] = torch.rand(q.shape[:3], generator=torch.Generator().manual_seed(2)) * 3 - 1
    _assert_close(*_both(q, k, v, **options), FP32)


def test_asentmax_query_scale_equals_the_scaled_row_map():
    # ASEntmax (Vasylenko et al. 2025 §4.1, eq. 8-9): the multiplier delta + beta (log n)^gamma, n counting each
    # query's allowed keys, scales the whole row before alpha-entmax.
    q, k, v = _qkv(n_q=12, n_k=20)
    layer = ASEntmax(2, 5).double()
    torch.nn.init.normal_(layer.w_beta, generator=torch.Generator().manual_seed(3))
    torch.nn.init.normal_(layer.w_gamma, generator=torch.Generator().manual_seed(4))
    x = torch.randn(1, 12, 5, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    mask = causal_mask(12, 20, 0, 12)
    with torch.no_grad():
        scale = layer.multiplier(x, mask.sum(-1, keepdim=True), per_head=False)[..., 0]
        z = q.double() @ k.double().transpose(-1, -2) * 8**-0.5
        want = layer.attend(z, x, mask) @ v.double()
        got = entmax_attention(q, k, v, query_scale=scale.float(), block_q=16, block_k=16)
    assert scale.std() > 0.1
    torch.testing.assert_close(got.double(), want, **FP32)


def test_a_row_with_one_allowed_key_copies_its_value_and_passes_no_gradient_to_q_or_k():
    q, k, v = _qkv(hq=4, hkv=2, n_q=11, n_k=19)
    (out, dq, dk, dv), want = _both(q, k, v, window=1)
    assert torch.equal(out, v.detach().repeat_interleave(2, 1)[:, :, -11:])
    assert not dq.any() and not dk.any() and not dv[:, :, :8].any()
    _assert_close((out, dq, dk, dv), want, FP32)


@pytest.mark.parametrize("alpha", [1.5, 2.0])
def test_large_scores_are_exact_after_the_shift_by_the_row_maximum(alpha):
    # Scores 512 + multiples of 1/16 are exact in float32, so any error would be the kernel's own.
    q, k, v = _qkv(n_q=16, n_k=21)
    with torch.no_grad():
        for t, lead in ((q, 512.0), (k, 1.0)):
            t.copy_((t * 4).round().clamp(-8, 8) / 4)
            t[..., 0] = lead
    (out, dq, dk, dv), want = _both(q, k, v, alpha=alpha, scale=1.0)
    assert want[0].abs().max() > 0 and torch.isfinite(torch.stack([dk.abs().max(), dq.abs().max()])).all()
    _assert_close((out, dq, dk, dv), want, FP32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_compute_in_float32_and_return_their_dtype(dtype):
    q, k, v = _qkv(hq=4, hkv=1, n_q=14, n_k=20, dtype=dtype)
    got, want = _both(q, k, v, alpha=1.5, slopes=pe.alibi_slopes(4))
    assert got[0].dtype == dtype
    _assert_close(got, want, LOOSE)


@pytest.mark.parametrize("alpha", [1.5, 2.0])
def test_agrees_with_the_entmax_package(alpha):
    entmax = pytest.importorskip("entmax")
    q, k, v = _qkv(n_q=12, n_k=18)
    out = entmax_attention(q, k, v, alpha=alpha, block_q=16, block_k=16)
    z = q.detach().double() @ k.detach().double().transpose(-1, -2) * 8**-0.5
    # the package has no mask argument: a finite, hugely negative score is a masked key to it
    z = z.masked_fill(~causal_mask(12, 18, 0, 12), -1e9)
    p = entmax.entmax15(z, dim=-1) if alpha == 1.5 else entmax.sparsemax(z, dim=-1)
    torch.testing.assert_close(out.detach().double(), p @ v.detach().double(), **FP32)


def _call(**changes):
    q, k, v = _qkv()
    args = {"q": q, "k": k, "v": v, **changes}
    return entmax_attention(args.pop("q"), args.pop("k"), args.pop("v"), **args)


@pytest.mark.parametrize(
    "changes, error, match",
    [
        (dict(q=torch.zeros(1, 2, 20, 8, dtype=torch.float64)), TypeError, "float32, bfloat16 or float16"),
        (dict(k=torch.zeros(1, 2, 20, 8, dtype=torch.bfloat16)), TypeError, "share dtype and device"),
        (dict(q=torch.zeros(1, 3, 20, 8)), ValueError, r"query heads \(3\) must be a multiple of kv heads \(2\)"),
        (dict(v=torch.zeros(1, 2, 19, 8)), ValueError, "disagree"),
        (dict(q=torch.zeros(2, 20, 8)), ValueError, "non-empty"),
        (dict(q=torch.zeros(1, 2, 21, 8)), ValueError, "at least as many keys as queries"),
        (dict(alpha=1.0), ValueError, r"alpha must be a number in \(1, 2\]"),
        (dict(alpha=2.5), ValueError, r"alpha must be a number in \(1, 2\]"),
        (dict(scale=-1.0), ValueError, "scale must be a finite number > 0"),
        (dict(causal=False, window=4), ValueError, "needs causal=True"),
        (dict(window=0), ValueError, "window must be an int >= 1"),
        (dict(block_q=24), ValueError, "block_q must be a power of two >= 16"),
        (dict(slopes=torch.zeros(3)), ValueError, r"slopes must be \(Hq,\)"),
        (dict(slopes=torch.zeros(2, requires_grad=True)), ValueError, "slopes requires grad"),
        (dict(query_scale=torch.ones(1, 2, 7)), ValueError, "query_scale must be"),
        (dict(query_scale=torch.ones(1, 2, 20, dtype=torch.int64)), TypeError, "query_scale must be a floating"),
    ],
)
def test_bad_arguments_raise_one_line_errors(changes, error, match):
    with pytest.raises(error, match=match) as info:
        _call(**changes)
    assert "\n" not in str(info.value)


def test_detached_or_no_grad_side_inputs_are_accepted():
    q, k, v = _qkv(n_q=8, n_k=8)
    slopes = pe.alibi_slopes(2).requires_grad_()
    with torch.no_grad():
        out = entmax_attention(q, k, v, slopes=slopes, block_q=16, block_k=16)
    torch.testing.assert_close(out.double(), _reference(q, k, v, slopes=slopes.detach()).detach(), **FP32)


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [1.1, 1.5, 1.25, 2.0])
@pytest.mark.parametrize(
    "spread, atol",
    # near-uniform rows (most keys in the support), typical ones, and near one-hot ones with scores up to ~200, whose
    # float32 rounding (~1e-5) alone moves the outputs by up to ~1.5e-4: the kernel equals the row map on the
    # float32-rounded scores to 2e-6 there
    [(0.1, 1e-5), (1.5, 1e-5), (6.0, 5e-4)],
)
def test_longer_rows_and_larger_blocks(alpha, spread, atol):
    q, k, v = _qkv(b=2, hq=4, hkv=2, n_q=70, n_k=100, d=16, dv=16, spread=spread)
    options = dict(alpha=alpha, window=50, slopes=pe.alibi_slopes(4))
    out = entmax_attention(q, k, v, block_q=32, block_k=32, **options)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    got = (out, *torch.autograd.grad(out, (q, k, v), g))
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref = _reference(*leaves, **options)
    _assert_close(got, (ref, *torch.autograd.grad(ref, leaves, g.double())), dict(rtol=1e-5, atol=atol))
