"""Every row map keeps dtype/shape, stays finite and non-negative, zeroes masked and -inf keys, sums to 1 (or 0), follows the NaN rules and honours ``dim``, on hypothesis-generated rows in all four float dtypes, on the compiled-kernel and torch-ops paths alike."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnlab import rowmaps
from attnlab.rowmaps import FAMILIES
from rowmaps.rowmap_refs import SUM_TOL, np64, ref_reluattn, ref_wortsman

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _resolved(name, **opts):
    rm = rowmaps.get(name, **opts)
    return rm.with_bias(0.5) if rm.needs_bias else rm


# (id, rowmap): every family's example, plus more parameters and options.
MAPS = [(f.example, _resolved(f.example)) for f in FAMILIES.values()] + [
    (f"{name} {opts}" if opts else name, _resolved(name, **opts))
    for name, opts in [
        ("entmax_a1", {}),
        ("entmax_a1.25", {}),
        ("entmax_a3", {}),
        ("entmax_a1.01", {}),
        ("entmax_a1.5", {"method": "sort"}),
        ("sparsemax", {"method": "sort"}),
        ("relu_p16_b0", {}),
        ("relu_p1_b-0.3", {}),
        ("relu_p2_b-1", {"dead": "uniform"}),
        ("relu_p8_b0.5", {"dead": "softmax"}),
        ("relu_p4_bauto", {}),
        ("sigmoid_b1.5", {}),
        ("sigmoid_bauto", {}),
        ("wortsman_p1_L", {}),
        ("wortsman_p2_L", {}),
        ("wortsman_p1_sqrtL", {}),
        ("softmax_t2", {}),
        ("ssmax_s1", {}),
        ("logn_xi2_n8", {}),
        ("topk_k1", {}),
        ("topk_k3", {}),
    ]
]
IDS = [i for i, _ in MAPS]


def _exact_unnormalized(rm, z, allowed_mask):
    """float64 value of an un-normalized map on the (rounded) input, for the overflow restriction."""
    if rm.family == "wortsman":
        return ref_wortsman(z, allowed_mask, rm.params["p"], rm.params["by"])
    assert rm.family == "reluattn", rm.family
    return ref_reluattn(z, allowed_mask)


# --- strategies --------------------------------------------------------------------------------

_ELEMENT = st.one_of(
    st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False),  # large magnitudes
    st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False),
    st.floats(-6, 6, allow_nan=False, allow_infinity=False),
    st.floats(-1e-3, 1e-3, allow_nan=False, allow_infinity=False),  # tiny
    st.sampled_from([0.0, 1.0, -1.0, 2.5, -0.5, 3.55]),  # ties
    st.sampled_from([0.0, 1.0, -1.0, 2.5, -0.5, 3.55]),
    st.sampled_from([-math.inf, math.nan]),  # specials
)


@st.composite
def row_batches(draw, min_rank=2):
    """(scores, mask or None): R rows of n keys (n = 1 gives single-key rows), any float dtype."""
    dtype = draw(st.sampled_from(DTYPES))
    rows = draw(st.integers(1, 4))
    n = draw(st.integers(1, 8))
    vals = draw(st.lists(st.lists(_ELEMENT, min_size=n, max_size=n), min_size=rows, max_size=rows))
    z = torch.tensor(vals, dtype=torch.float64).to(dtype)
    kind = draw(st.sampled_from(["none", "random", "random", "broadcast"]))
    if kind == "none":
        return z, None
    if kind == "broadcast":
        m = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        return z, torch.tensor(m, dtype=torch.bool).reshape(1, n)
    m = draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=rows, max_size=rows))
    mask = torch.tensor(m, dtype=torch.bool).reshape(rows, n)
    # make fully masked and single-key rows common
    special = draw(st.sampled_from(["as_is", "none_allowed", "one_allowed"]))
    if special == "none_allowed":
        mask[0] = False
    elif special == "one_allowed":
        mask[0] = False
        mask[0, draw(st.integers(0, n - 1))] = True
    return z, mask


# --- the properties ------------------------------------------------------------------------------


def check_row_properties(rm, z, mask, out):
    """All properties that hold for one call; see the module docstring."""
    dtype = z.dtype
    assert out.dtype == dtype and out.shape == z.shape

    zz = np64(z)
    by_mask = np.ones(z.shape, bool) if mask is None else np.broadcast_to(mask.numpy(), z.shape)
    allowed = by_mask & ~np.isneginf(zz)
    nan_row = (np.isnan(zz) & by_mask).any(-1)  # NaN at an allowed key (NaN is never -inf)
    o = np64(out)

    # A row with NaN at an allowed key is NaN everywhere (documented rule, as torch.softmax).
    assert np.isnan(o[nan_row]).all(), "NaN at an allowed key must make the whole row NaN"

    clean = ~nan_row  # NaN only at masked keys, or none: ignored
    oc, ac = o[clean], allowed[clean]
    assert not np.isnan(oc).any(), "NaN in a row without NaN at an allowed key"
    assert (oc >= 0).all(), "negative weight"
    # Exactly zero at masked keys and -inf keys.
    assert (oc[~ac] == 0).all(), "masked / -inf key got non-zero weight"

    if rm.normalized:
        assert np.isfinite(oc).all(), "non-finite weight from a normalized map"
        sums = oc.sum(-1)
        has_key = ac.any(-1)
        expected = has_key.astype(np.float64)
        ambiguous = np.zeros_like(has_key)
        if rm.family == "relu_p" and rm.params["dead"] == "zeros":
            # dead rows (every allowed z + b <= 0) attend to nothing; a row whose max z + b is within
            # rounding of 0 may be computed either way (b is rounded to the compute dtype).
            b = rm.params["b"]
            with np.errstate(invalid="ignore"):
                top = np.where(ac, zz[clean], -np.inf).max(-1) + b
            expected = np.where(top > 0, expected, 0.0)
            ambiguous = np.abs(top) <= 1e-5 * (1 + abs(b))
        ok = np.abs(sums - expected) <= SUM_TOL[dtype]
        ok |= ambiguous & ((np.abs(sums) <= SUM_TOL[dtype]) | (np.abs(sums - 1) <= SUM_TOL[dtype]))
        assert ok.all(), f"row sums {sums[~ok]} expected {expected[~ok]}"
    else:
        # Un-normalized maps: the exact value ReLU(z)^p / (L or sqrt L) of a large score can exceed
        # float16's range (65504), where the only faithful fp16 result is +inf. So finiteness is
        # required only where the float64 value of the same input fits the dtype (with 1% margin
        # for the rounding of the float32 computation); beyond that only "not NaN, >= 0" holds.
        exact = _exact_unnormalized(
            rm,
            z[torch.from_numpy(clean)],
            None if mask is None else torch.from_numpy(np.ascontiguousarray(by_mask[clean])),
        )
        fits = exact < 0.99 * torch.finfo(dtype).max
        assert np.isfinite(oc[fits]).all(), "non-finite value that fits the dtype"


# The session's hypothesis profile (tests/conftest.py) derandomizes these: the same examples on every run.
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@pytest.mark.usefixtures("kernel_path")
@pytest.mark.parametrize("rm", [m for _, m in MAPS], ids=IDS)
@SETTINGS
@given(data=row_batches())
def test_row_properties(rm, data):
    z, mask = data
    check_row_properties(rm, z, mask, rm(z, mask))


@pytest.mark.parametrize("rm", [m for _, m in MAPS], ids=IDS)
@settings(max_examples=15, deadline=None)
@given(data=row_batches(), dim=st.sampled_from([0, 1, -2, -3]))
def test_dim_argument(rm, data, dim):
    """rm(z, mask, dim=d) == rm(z moved so d is last, mask likewise) moved back; shape (R, n, 2)."""
    z, mask = data
    z3 = torch.stack([z, z.flip(-1)], dim=-1)  # (R, n, 2)
    m3 = None if mask is None else torch.stack([mask, mask.flip(-1)], dim=-1).expand(z3.shape)
    zt = z3.movedim(dim, -1)
    mt = None if m3 is None else m3.movedim(dim, -1)
    expected = rm(zt, mt).movedim(-1, dim)
    got = rm(z3, m3, dim=dim)
    assert got.shape == z3.shape and got.dtype == z3.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
    check_row_properties(rm, zt, mt, got.movedim(dim, -1))


# --- deterministic edge rows, every map x every dtype ---------------------------------------------

INF, NAN = math.inf, math.nan
EDGE_ROWS = torch.tensor(
    [
        [1e4, -1e4, 3.0, 3.0, 0.0],  # huge spread, a tie
        [2.0, 2.0, 2.0, 2.0, 2.0],  # all tied
        [-INF, 1.0, -INF, 0.5, 2.0],  # -inf keys
        [-INF, -INF, -INF, -INF, -INF],  # no allowed key
        [-INF, -INF, 7.0, -INF, -INF],  # single allowed key
        [1.0, NAN, 0.0, 2.0, -1.0],  # NaN at an allowed key -> all NaN
        [1.0, 0.5, NAN, 2.0, -1.0],  # NaN at a masked key (mask below) -> ignored
        [-1e4, -1e4 + 1, -9999.5, -1e4, -1e4],  # very negative
        [1e-3, -1e-3, 5e-4, 0.0, 2e-4],  # tiny
        [-0.5, -2.0, -3.0, -0.1, -1.0],  # all negative (ReLU-dead for b <= 0.1)
    ],
    dtype=torch.float64,
)
EDGE_MASK = torch.ones(EDGE_ROWS.shape, dtype=torch.bool)
EDGE_MASK[6, 2] = False
EDGE_MASK[9, 0] = False


@pytest.mark.usefixtures("kernel_path")
@pytest.mark.parametrize("rm", [m for _, m in MAPS], ids=IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16", "f32", "f64"])
def test_edge_rows(rm, dtype):
    z = EDGE_ROWS.to(dtype)
    out = rm(z, EDGE_MASK)
    check_row_properties(rm, z, EDGE_MASK, out)
    o = np64(out)
    assert np.isnan(o[5]).all()
    assert (o[3] == 0).all()
    if rm.normalized:
        assert o[4, 2] == 1.0  # a single allowed key gets everything (it is alive: 7 + b > 0)
        assert (o[6] >= 0).all() and not np.isnan(o[6]).any()
    # all-masked via the mask rather than -inf
    none = torch.zeros(EDGE_ROWS.shape, dtype=torch.bool)
    assert (np64(rm(z, none)) == 0).all()


UNBOUNDED = [(i, m) for i, m in MAPS if m.normalized and m.family != "sigmoid"]


@pytest.mark.parametrize("rm", [m for _, m in UNBOUNDED], ids=[i for i, _ in UNBOUNDED])
def test_plus_inf_keys_split_evenly(rm):
    """Documented limit for unbounded normalized maps: +inf keys share the row equally."""
    z = torch.tensor([[INF, 1.0, INF, -2.0], [0.0, INF, 3.0, 1.0]], dtype=torch.float32)
    o = np64(rm(z))
    assert np.array_equal(o, [[0.5, 0, 0.5, 0], [0, 1, 0, 0]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sigmoid_takes_its_bounded_limit_at_plus_inf(dtype):
    """sigma saturates: a +inf key weighs sigma(+inf) = 1 beside the finite keys' sigma, and its gradient is 0."""
    z = torch.tensor([[1.0, INF, INF, 0.0]], dtype=dtype, requires_grad=True)
    o = rowmaps.get("sigmoid_b0")(z)
    sig = [1 / (1 + math.exp(-1.0)), 1.0, 1.0, 0.5]
    torch.testing.assert_close(o.detach()[0], torch.tensor([v / sum(sig) for v in sig], dtype=dtype))
    assert np.allclose(np64(o.detach()), [[0.2263, 0.3095, 0.3095, 0.1547]], atol=1e-4)
    o[0, 0].backward()
    assert torch.isfinite(z.grad).all() and z.grad[0, 1] == 0 == z.grad[0, 2]


def test_maps_cover_every_family():
    assert {m.family for _, m in MAPS} >= {
        "softmax",
        "ssmax",
        "logn",
        "topk",
        "entmax",
        "relu_p",
        "sigmoid",
        "wortsman",
        "reluattn",
    }
    assert all(f.example in IDS for f in FAMILIES.values())


@pytest.mark.slow
@pytest.mark.usefixtures("kernel_path")
@pytest.mark.parametrize("rm", [m for _, m in MAPS], ids=IDS)
@settings(
    max_examples=300,
    deadline=None,
    derandomize=False,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=row_batches())
def test_row_properties_long(rm, data):
    """The same properties on many more (random, not derandomized) examples; `pytest -m slow`."""
    z, mask = data
    check_row_properties(rm, z, mask, rm(z, mask))
