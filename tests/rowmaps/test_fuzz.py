"""Every registered row map keeps the row rules of ``attnlab.rowmaps._rows`` on hostile rows (+-inf, NaN, huge offsets, constant, fully masked, single-key and empty inputs, float32/float64/bfloat16, random masks), and bad types raise TypeError/ValueError naming what is wrong."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from attnlab import rowmaps
from attnlab.rowmaps import FAMILIES
from hostile import DTYPES, fast, row, slow
from rowmaps.rowmap_refs import SUM_TOL, np64


def _resolved(name, **opts):
    rm = rowmaps.get(name, **opts)
    return rm.with_bias(0.5) if rm.needs_bias else rm


# Every family's example, and the parameters and options that take their own code paths: alpha 1
# (softmax), the kernel's alphas and sort, powers of two (kernel) and not (pow), each dead-row rule.
CASES = [(f.example, {}) for f in FAMILIES.values()] + [
    (name, opts)
    for name, opts in [
        ("entmax_a1", {}),
        ("entmax_a1.25", {}),
        ("entmax_a3", {}),
        ("sparsemax", {"method": "sort"}),
        ("relu_p16_b0", {}),
        ("relu_p3_b-0.3", {}),
        ("relu_p2_b-1", {"dead": "uniform"}),
        ("relu_p8_b0.5", {"dead": "softmax"}),
        ("sigmoid_b-2", {}),
        ("topk_k1", {}),
        ("wortsman_p1_L", {}),
        ("softmax_t2", {}),
        ("logn_xi2_n8", {}),
    ]
]
MAPS = [_resolved(name, **opts) for name, opts in CASES]
IDS = [" ".join([name, *(f"{k}={v}" for k, v in opts.items())]) for name, opts in CASES]
# The relative error of one un-normalized output against its float64 value: rounding of the compute
# dtype for the power and the division, then of the output dtype.
UNNORMALIZED_RTOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2 * 2.0**-8}


# --- hostile rows ----------------------------------------------------------------------------------


@st.composite
def hostile_rows(draw):
    """(scores, mask or None): 0..4 rows of 1..8 keys in float32, float64 or bfloat16; each row mixed
    small and special values, a huge offset (+- a spread), a constant, or an offset row with +-inf and
    NaN keys; the mask is absent, one row broadcast, or per row with a fully masked and a single-key
    row made common."""
    dtype = draw(st.sampled_from(DTYPES))
    rows, n = draw(st.integers(0, 4)), draw(st.integers(1, 8))
    values = [draw(row(dtype, n)) for _ in range(rows)]
    z = torch.tensor(values, dtype=torch.float64).reshape(rows, n).to(dtype)
    kind = draw(st.sampled_from(["none", "broadcast", "rows", "rows"]))
    if kind == "none":
        return z, None
    if kind == "broadcast":
        return z, torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n))).reshape(1, n)
    cells = draw(st.lists(st.booleans(), min_size=rows * n, max_size=rows * n))
    mask = torch.tensor(cells, dtype=torch.bool).reshape(rows, n)
    if rows:
        mask[draw(st.integers(0, rows - 1))] = False
        single = draw(st.integers(0, rows - 1))
        mask[single] = False
        mask[single, draw(st.integers(0, n - 1))] = True
    return z, mask


# --- the row rules ----------------------------------------------------------------------------------


def _exact_unnormalized(rm, zz, allowed):
    """float64 value of an un-normalized map on the rounded input (masked keys 0)."""
    n = allowed.sum(-1, keepdims=True).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.where(allowed, np.maximum(zz, 0.0), 0.0)
        if rm.family == "reluattn":
            return r / np.maximum(n - 2, 1)
        scale = np.maximum(n, 1) if rm.params["by"] == "L" else np.sqrt(np.maximum(n, 1))
        return r ** rm.params["p"] / scale


def check_rules(rm, z, mask, out):
    """The rules of ``_rows``: shape and dtype kept; NaN at an allowed key makes the row NaN; otherwise
    no NaN, >= 0, 0 at masked and -inf keys, zeros for a row with no allowed key. Normalized maps are
    finite, split a row with +inf keys evenly over them (sigmoid, bounded: sigma(+inf) = 1 beside the finite keys'
    own) and sum the others to 1 (0 for a dead ReLU^p
    row under dead=zeros); un-normalized maps give +inf at +inf keys and their float64 value elsewhere."""
    dtype = z.dtype
    assert out.shape == z.shape and out.dtype == dtype, f"{tuple(out.shape)} {out.dtype}"
    zz, o = np64(z), np64(out)
    by_mask = np.ones(z.shape, bool) if mask is None else np.broadcast_to(mask.numpy(), z.shape)
    allowed = by_mask & ~np.isneginf(zz)
    nan_row = (np.isnan(zz) & by_mask).any(-1)
    assert np.isnan(o[nan_row]).all(), "a row with NaN at an allowed key must be NaN everywhere"

    clean = ~nan_row
    zz, o, allowed = zz[clean], o[clean], allowed[clean]
    assert not np.isnan(o).any(), "NaN in a row without NaN at an allowed key"
    assert (o >= 0).all(), "negative weight"
    assert (o[~allowed] == 0).all(), "masked or -inf key got weight"
    has_key = allowed.any(-1)
    top_keys = allowed & np.isposinf(zz)
    inf_row = top_keys.any(-1)

    if not rm.normalized:
        assert np.isposinf(o[top_keys]).all(), "an un-normalized map must keep +inf at a +inf key"
        exact = _exact_unnormalized(rm, zz, allowed)
        finite = allowed & ~top_keys
        fits = finite & (exact < 0.99 * torch.finfo(dtype).max)
        err = np.abs(o[fits] - exact[fits])
        assert (err <= UNNORMALIZED_RTOL[dtype] * exact[fits] + torch.finfo(dtype).tiny).all(), (
            f"un-normalized values {o[fits]} against float64 {exact[fits]}"
        )
        return

    assert np.isfinite(o).all(), "non-finite weight from a normalized map"
    if rm.family == "sigmoid":
        # a bounded map's limit: each +inf key takes sigma(+inf) = 1 beside the finite keys' own sigma
        with np.errstate(over="ignore"):
            sig = np.where(allowed[inf_row], 1.0 / (1.0 + np.exp(-(zz[inf_row] + rm.params["b"]))), 0.0)
        split = sig / sig.sum(-1, keepdims=True)
    else:
        split = top_keys[inf_row] / top_keys[inf_row].sum(-1, keepdims=True)
    assert (np.abs(o[inf_row] - split) <= SUM_TOL[dtype]).all(), "+inf keys must take the map's limit"
    expected = has_key.astype(np.float64)
    ambiguous = np.zeros_like(has_key)
    if rm.family == "relu_p" and rm.params["dead"] == "zeros":
        b = rm.params["b"]
        with np.errstate(invalid="ignore"):
            top = np.where(allowed, zz, -np.inf).max(-1, initial=-np.inf) + b
        expected = np.where(inf_row | (top > 0), expected, 0.0)
        # z + b within rounding of 0 may fall either side (b is rounded to the compute dtype)
        ambiguous = ~inf_row & (np.abs(top) <= 1e-5 * (1 + abs(b)))
    sums = o.sum(-1)
    ok = np.abs(sums - expected) <= SUM_TOL[dtype]
    ok |= ambiguous & ((np.abs(sums) <= SUM_TOL[dtype]) | (np.abs(sums - 1) <= SUM_TOL[dtype]))
    assert ok.all(), f"row sums {sums[~ok]}, expected {expected[~ok]}"


FAST, SLOW = fast(40), slow(1000)


@pytest.mark.usefixtures("kernel_path")
@pytest.mark.parametrize("rm", MAPS, ids=IDS)
@FAST
@given(data=hostile_rows())
# +inf keys beside finite ones: sigmoid's bounded limit [0.226, 0.309, 0.309, 0.155], not the even split [0, .5, .5, 0]
@example(data=(torch.tensor([[1.0, torch.inf, torch.inf, 0.0]]), None))
def test_hostile_rows_keep_the_row_rules(rm, data):
    z, mask = data
    check_rules(rm, z, mask, rm(z, mask))


@pytest.mark.slow
@pytest.mark.usefixtures("kernel_path")
@pytest.mark.parametrize("rm", MAPS, ids=IDS)
@SLOW
@given(data=hostile_rows())
def test_hostile_rows_keep_the_row_rules_long(rm, data):
    z, mask = data
    check_rules(rm, z, mask, rm(z, mask))


# --- bad types ------------------------------------------------------------------------------------

_NOT_FLOAT = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64)
_NOT_BOOL = (torch.int64, torch.int32, torch.uint8, torch.float32, torch.float16)


@st.composite
def bad_calls(draw):
    """(scores, mask, dim, error type, message pattern): a valid float call of 1-3 dims with one fault:
    scores not a float tensor (another dtype, a list, an array) or 0-dimensional, a mask that is not a
    bool tensor or does not broadcast to scores, or would enlarge them, or dim out of range or not an
    int."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    z = torch.zeros(shape, dtype=draw(st.sampled_from(DTYPES)))
    mask, dim = None, draw(st.integers(-len(shape), len(shape) - 1))
    fault = draw(
        st.sampled_from(
            [
                "dtype",
                "container",
                "0-dim",
                "mask dtype",
                "mask array",
                "mask shape",
                "mask larger",
                "dim range",
                "dim type",
            ]
        )
    )
    if fault == "dtype":
        return (
            z.to(draw(st.sampled_from(_NOT_FLOAT))),
            None,
            dim,
            TypeError,
            r"scores has dtype torch\.\w+; allowed: float16, bfloat16, float32, float64",
        )
    if fault == "container":
        return (
            draw(st.sampled_from([z.tolist(), z.float().numpy()])),
            None,
            dim,
            TypeError,
            r"scores must be a torch\.Tensor, got (list|ndarray)",
        )
    if fault == "0-dim":
        return z.reshape(-1)[0], None, -1, ValueError, r"scores must have at least one dimension"
    if fault == "mask dtype":
        mask = torch.ones(shape, dtype=draw(st.sampled_from(_NOT_BOOL)))
        return z, mask, dim, TypeError, r"mask must be a bool tensor \(True = key may be attended\), got torch"
    if fault == "mask array":
        return z, np.ones(shape, bool), dim, TypeError, r"mask must be a bool tensor .* got ndarray"
    if fault == "mask shape":
        axis = draw(st.integers(0, len(shape) - 1))
        if shape[axis] == 1:  # a mask axis longer than a scores axis of 1 would enlarge, not clash
            z = z.expand(*shape[:axis], 2, *shape[axis + 1 :]).contiguous()
        wrong = list(z.shape)
        wrong[axis] += draw(st.integers(1, 3))
        return (
            z,
            torch.ones(wrong, dtype=torch.bool),
            dim,
            ValueError,
            rf"mask shape \({', '.join(map(str, wrong))},?\) does not broadcast to scores shape",
        )
    if fault == "mask larger":
        mask = torch.ones((draw(st.integers(1, 3)), *shape), dtype=torch.bool)
        if mask.shape[0] == 1:
            mask = mask.unsqueeze(0).expand(2, *mask.shape)
        return z, mask, dim, ValueError, r"mask shape .* would enlarge scores shape"
    if fault == "dim range":
        dim = draw(st.one_of(st.integers(len(shape), 8), st.integers(-8, -len(shape) - 1)))
        return z, None, dim, ValueError, rf"dim={dim} is out of range for scores with {len(shape)} dimensions"
    dim = draw(st.sampled_from([0.0, -1.0, "x", None, True]))
    return z, None, dim, TypeError, rf"dim must be an int \(the key axis\), got {type(dim).__name__}"


@pytest.mark.parametrize("rm", MAPS, ids=IDS)
@fast(20)
@given(call=bad_calls())
def test_bad_types_raise_type_or_value_errors_naming_the_fault(rm, call):
    scores, mask, dim, error, message = call
    with pytest.raises(error, match=message):
        rm(scores, mask, dim=dim)


@pytest.mark.slow
@pytest.mark.parametrize("rm", MAPS, ids=IDS)
@slow(300)
@given(call=bad_calls())
def test_bad_types_raise_type_or_value_errors_naming_the_fault_long(rm, call):
    scores, mask, dim, error, message = call
    with pytest.raises(error, match=message):
        rm(scores, mask, dim=dim)
