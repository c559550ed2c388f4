"""``row_stats`` never raises on hostile rows of a valid shape and dtype (+-inf, NaN, huge offsets, constant, fully masked, single-key and empty inputs, float32/float64/bfloat16, random masks), gives one record per row with a documented status and softmax's weights, and refuses bad types with TypeError/ValueError naming what is wrong."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.diagnostics import kernel, row_stats
from attnlab.diagnostics.concentration import STATUS
from attnlab.diagnostics.rows import SPECIAL
from hostile import DTYPES, fast, row, slow

# softmax's weights from the statistics against their float64 value, relative: each is exp(beta (z_i -
# max z)) over a sum of at most 8 such terms, with beta (z_i - max z) >= -746 rounded once (error <= 746
# ulps of 1 in the exponent); below 1e-290 subnormal weights lose relative precision.
WEIGHT_RTOL, WEIGHT_FLOOR = 1e-12, 1e-290


# --- hostile rows ----------------------------------------------------------------------------------


@st.composite
def hostile_blocks(draw):
    """(scores, mask or None): scores of shape (*lead, n), 0-3 leading dims of 0-3 each (so 0 rows
    happen) and 1..8 keys, float32, float64 or bfloat16, each row as in the rowmaps fuzz (mixed, huge
    offset, constant, offset with +-inf and NaN keys); the mask is absent, one row broadcast to all,
    or one per row with a fully masked and a single-key row made common."""
    dtype = draw(st.sampled_from(DTYPES))
    lead = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    n = draw(st.integers(1, 8))
    rows = math.prod(lead)
    values = [draw(row(dtype, n)) for _ in range(rows)]
    z = torch.tensor(values, dtype=torch.float64).reshape(*lead, n).to(dtype)
    kind = draw(st.sampled_from(["none", "broadcast", "rows", "rows"]))
    if kind == "none":
        return z, None
    if kind == "broadcast":
        return z, torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    flat = torch.tensor(draw(st.lists(st.booleans(), min_size=rows * n, max_size=rows * n)), dtype=torch.bool).reshape(
        rows, n
    )
    if rows:
        flat[draw(st.integers(0, rows - 1))] = False
        single = draw(st.integers(0, rows - 1))
        flat[single] = False
        flat[single, draw(st.integers(0, n - 1))] = True
    return z, flat.reshape(*lead, n)


# Options that change which code runs: degrees (squared or pow), the bias and cap, several betas,
# the row map of the dispersion columns, S_sigma, lambda_resolved and the gamma boundary check.
OPTIONS = st.fixed_dictionaries(
    {
        "p": st.sampled_from([(2, 4, 8, 16), (1.5,), (3, 2)]),
        "b": st.one_of(st.sampled_from([0.0, 0.5, -1.0]), st.floats(-1e4, 1e4)),
        "tau": st.one_of(st.none(), st.floats(0.1, 10)),
        "beta": st.one_of(st.sampled_from([1.0, 0.3, (1.0, 2.0), (0.5, 1.7)]), st.floats(0.1, 10)),
        "sink": st.integers(0, 3),
        "rowmap": st.sampled_from(["softmax", "softmax", "entmax_a1.5", "relu_p4_b1", "sigmoid_b0"]),
        "sigmoid": st.booleans(),
        "r": st.sampled_from([None, "auto", 0.5]),
        "gamma": st.sampled_from([(), (1.0,), (0.5, 2.0)]),
    }
)


# --- the properties ---------------------------------------------------------------------------------


def check_records(z, mask, options, df):
    """One record per row in C order; status "empty" (no allowed key), "nan" (NaN at an allowed key),
    "inf" (+inf at an allowed key, no NaN) or one of STATUS; NA statistics on those special rows; on the
    others n_keys counts the allowed keys, argmax is an allowed key holding the maximum, and under softmax
    the largest and the target's weight are softmax(beta z)'s."""
    n = z.shape[-1]
    zz = z.to(torch.float64).reshape(-1, n).numpy()
    by_mask = np.ones(zz.shape, bool) if mask is None else np.broadcast_to(mask.numpy(), z.shape).reshape(-1, n)
    zm = np.where(by_mask, zz, -np.inf)
    assert len(df) == zz.shape[0], f"{len(df)} records for {zz.shape[0]} rows"
    allowed = ~np.isneginf(zm)  # NaN at an allowed key counts: such a row is not empty
    nan_row = np.isnan(zm).any(-1)
    expected = np.where(
        ~allowed.any(-1), "empty", np.where(nan_row, "nan", np.where(np.isposinf(zm).any(-1), "inf", ""))
    )
    status = df["status"].to_numpy()
    assert set(status) <= {*STATUS, *SPECIAL}, f"undocumented status {set(status) - {*STATUS, *SPECIAL}}"
    special = expected != ""
    assert (status[special] == expected[special]).all(), f"status {status} for rows {zm.tolist()}"
    assert np.isin(status[~special], STATUS).all(), f"status {status} for rows {zm.tolist()}"
    for name in ("delta", "u_star", "lambda_n", f"s_p{options['p'][0]:g}"):
        assert df[name][special].isna().all(), f"{name} is not NA on special rows"
    assert df["n_keys"][special].isna().all() and df["argmax"][special].isna().all()

    readable = ~special
    zr, ar = zm[readable], allowed[readable]
    n_keys = df["n_keys"][readable].to_numpy(dtype=np.int64)
    assert (n_keys == ar.sum(-1)).all(), f"n_keys {n_keys} for rows {zr.tolist()}"
    argmax = df["argmax"][readable].to_numpy(dtype=np.int64)
    at = zr[np.arange(len(zr)), argmax]
    assert (at == zr.max(-1, initial=-np.inf)).all(), f"argmax {argmax} for rows {zr.tolist()}"
    if options["rowmap"] != "softmax" or not readable.any():
        return
    betas = (options["beta"],) if isinstance(options["beta"], float) else options["beta"]
    for beta in betas:
        suffix = "" if len(betas) == 1 else f"_beta{beta:g}"
        w = np.exp(beta * (zr - zr.max(-1, keepdims=True)))
        w /= w.sum(-1, keepdims=True)
        rows = np.arange(len(zr))
        target = df["target"][readable].to_numpy(dtype=np.int64)
        for name, want in (("max_weight", w.max(-1)), ("target_mass", w[rows, target])):
            got = df[name + suffix][readable].to_numpy()
            bad = ~(np.abs(got - want) <= WEIGHT_RTOL * want + WEIGHT_FLOOR)
            assert not bad.any(), (
                f"{name}{suffix} {got[bad]} against softmax's {want[bad]} for beta {beta}, rows {zr[bad].tolist()}"
            )


def _targets(draw, z, mask):
    """Per-row target indices at an allowed key where the row has one (0 elsewhere: special rows'
    targets are not read)."""
    n = z.shape[-1]
    flat = torch.ones(z.shape, dtype=torch.bool) if mask is None else mask.expand(z.shape)
    flat = (flat & ~torch.isneginf(z)).reshape(-1, n)
    picks = [draw(st.sampled_from(row.nonzero().flatten().tolist() or [0])) for row in flat]
    return torch.tensor(picks, dtype=torch.int64).reshape(z.shape[:-1])


FAST, SLOW = fast(200), slow(3000)


def _run(path, data, options, with_target):
    z, mask = data.draw(hostile_blocks(), label="scores, mask")
    target = _targets(data.draw, z, mask) if with_target else None
    df = row_stats(z, mask, target=target, **options)
    check_records(z, mask, options, df)


@FAST
@given(data=st.data(), options=OPTIONS, with_target=st.booleans())
def test_hostile_rows_give_one_documented_record_each(kernel_path, data, options, with_target):
    _run(kernel_path, data, options, with_target)


@pytest.mark.slow
@SLOW
@given(data=st.data(), options=OPTIONS, with_target=st.booleans())
def test_hostile_rows_give_one_documented_record_each_long(kernel_path, data, options, with_target):
    _run(kernel_path, data, options, with_target)


def test_kernel_softmax_weights_at_huge_offsets():
    """exp(beta (z_i - max z)), not exp(beta z_i - beta max z): the latter rounds beta z to ulp(beta max z)."""
    if kernel.get() is None:
        pytest.skip(kernel.status())
    for values, dtype, beta in (([1e15, 1e15 - 1], torch.float64, 0.1), ([1e5], torch.float32, 1.6527124343182011)):
        z = torch.tensor(values, dtype=dtype)
        check_records(z, None, {"beta": beta, "rowmap": "softmax", "p": (2,)}, row_stats(z, beta=beta))


# --- bad types ------------------------------------------------------------------------------------


@st.composite
def bad_calls(draw):
    """(scores, mask, target, error type, message pattern): a valid float block of 1-3 dims with one
    fault: scores not floating (a torch or numpy integer, bool or complex dtype), not an array, 0-dim
    or with no keys; a mask not boolean, not broadcasting or enlarging; a target of floats, out of
    range, of the wrong shape or at a masked key."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    z = torch.zeros(shape, dtype=draw(st.sampled_from(DTYPES)))
    n, lead = shape[-1], shape[:-1]
    fault = draw(
        st.sampled_from(
            [
                "dtype",
                "numpy dtype",
                "container",
                "0-dim",
                "no keys",
                "mask dtype",
                "mask shape",
                "mask larger",
                "target dtype",
                "target range",
                "target shape",
                "target masked",
            ]
        )
    )
    if fault == "dtype":
        dtype = draw(st.sampled_from([torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64]))
        return z.to(dtype), None, None, TypeError, r"scores has dtype torch\.\w+; allowed: float16, bfloat16"
    if fault == "numpy dtype":
        dtype = draw(st.sampled_from([np.int32, np.int64, np.uint8, np.bool_, np.complex64]))
        return np.zeros(shape, dtype), None, None, TypeError, r"scores has dtype torch\.\w+; allowed: float16"
    if fault == "container":
        return z.tolist(), None, None, TypeError, r"scores must be a torch\.Tensor, got list"
    if fault == "0-dim":
        return z.reshape(-1)[0], None, None, ValueError, r"scores must have at least one dimension"
    if fault == "no keys":
        return z[..., :0], None, None, ValueError, r"scores has an empty key axis \(shape .*\); rows need >= 1 key"
    if fault == "mask dtype":
        mask = draw(
            st.sampled_from(
                [
                    torch.ones(shape, dtype=torch.int64),
                    torch.ones(shape),
                    np.ones(shape, np.int64),
                    np.ones(shape, np.float32),
                ]
            )
        )
        return z, mask, None, TypeError, r"mask must be a bool tensor \(True = key may be attended\), got torch"
    if fault == "mask shape":
        z = torch.zeros((*lead, max(n, 2)), dtype=z.dtype)
        return (
            z,
            torch.ones(z.shape[-1] + draw(st.integers(1, 3)), dtype=torch.bool),
            None,
            ValueError,
            r"mask shape \(\d+,\) does not broadcast to scores shape",
        )
    if fault == "mask larger":
        return z, torch.ones((2, *shape), dtype=torch.bool), None, ValueError, r"mask shape .* would enlarge"
    if fault == "target dtype":
        target = draw(
            st.sampled_from([torch.zeros(lead), torch.zeros(lead, dtype=torch.bool), np.zeros(lead, np.float64)])
        )
        return z, None, target, TypeError, r"target must hold integer key indices, got dtype"
    if fault == "target range":
        target = torch.zeros(lead, dtype=torch.int64)
        target.view(-1)[draw(st.integers(0, target.numel() - 1))] = draw(st.sampled_from([-1, n, n + 5]))
        return z, None, target, ValueError, rf"target indices must lie in \[0, {n}\)"
    if fault == "target shape":
        return (
            z,
            None,
            torch.zeros(math.prod(lead) + 1, dtype=torch.int64),
            ValueError,
            r"target shape \(\d+,\) does not broadcast to the rows' shape",
        )
    z = torch.zeros((*lead, max(n, 2)), dtype=z.dtype)
    mask = torch.ones(z.shape, dtype=torch.bool)
    mask[..., 0] = False
    return z, mask, torch.zeros(lead, dtype=torch.int64), ValueError, r"a target index points at a masked key"


@fast(60)
@given(call=bad_calls())
def test_bad_types_raise_type_or_value_errors_naming_the_fault(call):
    scores, mask, target, error, message = call
    with pytest.raises(error, match=message):
        row_stats(scores, mask, target=target)


@pytest.mark.slow
@slow(1000)
@given(call=bad_calls())
def test_bad_types_raise_type_or_value_errors_naming_the_fault_long(call):
    scores, mask, target, error, message = call
    with pytest.raises(error, match=message):
        row_stats(scores, mask, target=target)
