"""Every public in-memory function accepts exactly the arguments its rules allow: given hostile ones (wrong types,
dtypes and shapes, non-finite, out-of-range and boolean numbers) it raises TypeError or ValueError in one line that
states the rule, and what it accepts gives the number a float64 reference computes (never a silent wrong one)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab import diagnostics, rowmaps
from attnlab.diagnostics import HeadThresholds, RowOptions
from attnlab.site import Causal, Plan, Scores, Slopes, attend
from hostile import fast

RULE = re.compile(r"must|allowed|outside|needs|takes|one of|at least|does not|got")
# Numbers and non-numbers a caller may pass where a number belongs.
SCALARS = (
    math.nan,
    math.inf,
    -math.inf,
    -1.0,
    0.0,
    0.5,
    1.0,
    2.0,
    3.55,
    16,
    1e300,
    -1e300,
    300.0,
    True,
    None,
    "2",
    torch.tensor(2.0),
    [2.0],
)


def _real(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _outcome(call):
    """The call's result, or the exception it raised after checking that it is a clean one."""
    try:
        return call()
    except (TypeError, ValueError) as exc:
        message = str(exc)
        assert message and "\n" not in message and RULE.search(message), f"unclear message: {message!r}"
        return exc


def _check(call, valid: bool):
    got = _outcome(call)
    assert isinstance(got, Exception) != valid, f"{'refused a valid' if valid else 'accepted an invalid'} call: {got!r}"
    return got


# --- the row-map functions ---------------------------------------------------------------------------------------


def _rows_ok(z) -> bool:
    return isinstance(z, torch.Tensor) and z.is_floating_point() and z.dim() >= 1


ROWS = st.sampled_from(
    [
        torch.tensor([0.5, -1.0, 2.0]),
        torch.tensor([[1.0, math.nan], [math.inf, -math.inf]], dtype=torch.float64),
        torch.tensor([1.0, 2.0], dtype=torch.bfloat16),
        torch.zeros(2, 0),
        torch.tensor(1.0),
        torch.tensor([1, 2]),
        torch.tensor([True, False]),
        torch.tensor([1 + 1j, 2.0]),
        [1.0, 2.0],
        np.array([1.0, 2.0]),
        1.0,
    ]
)


def _degree(p) -> bool:
    return _real(p) and 0 < p <= 256


def _bias(b) -> bool:
    return _real(b) and -1e4 <= b <= 1e4


FUNCTIONS = {
    "relu_power": (rowmaps.relu_power, {"p": _degree, "b": _bias}),
    "sigmoid_normalized": (rowmaps.sigmoid_normalized, {"b": _bias}),
    "wortsman": (lambda z, p: rowmaps.wortsman(z, p, "L"), {"p": _degree}),
    "relu_attention": (rowmaps.relu_attention, {}),
    "entmax": (rowmaps.entmax, {"alpha": lambda a: _real(a) and 1 <= a <= 4}),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@fast(120)
@given(data=st.data())
def test_row_map_functions_accept_exactly_valid_rows_and_parameters(name, data):
    fn, params = FUNCTIONS[name]
    z = data.draw(ROWS, label="z")
    values = {key: data.draw(st.sampled_from(SCALARS), label=key) for key in params}
    valid = _rows_ok(z) and all(rule(values[key]) for key, rule in params.items())
    out = _check(lambda: fn(z, **values), valid)
    if valid:
        assert out.shape == z.shape and out.dtype == z.dtype


@fast(60)
@given(
    n=st.sampled_from([torch.tensor([1.0, 64.0, 4096.0]), [64.0], 64.0]),
    xi=st.sampled_from(SCALARS),
    n_train=st.sampled_from(SCALARS + (64, 1)),
)
def test_length_multiplier_accepts_exactly_key_counts_and_its_range(n, xi, n_train):
    valid = isinstance(n, torch.Tensor) and _real(xi) and -8 <= xi <= 8 and _real(n_train) and 2 <= n_train < math.inf
    out = _check(lambda: rowmaps.length_multiplier(n, xi, n_train), valid)
    if valid:
        expected = [max(1.0, math.log(max(v, 1.0)) / math.log(n_train)) ** xi for v in n.tolist()]
        assert out.tolist() == pytest.approx(expected, rel=1e-6)


# --- the attention site --------------------------------------------------------------------------------------------

LOWEST = torch.finfo(torch.float32).min


def _reference(q, k, v, scaling, mask, causal):
    """Eager attention's definition in float64, a loop over (batch, head): softmax(q k^T scaling + mask) v with masked
    keys at float32's lowest value, as transformers writes them (so a row whose allowed scores are all -inf, from an
    infinite query, spreads over the masked keys there as it does in eager attention)."""
    q, k, v = (t.double() for t in (q, k, v))
    b, h, n, _ = q.shape
    groups = h // k.shape[1]
    out = torch.empty(b, n, h, v.shape[-1], dtype=torch.float64)
    for i in range(b):
        for j in range(h):
            z = q[i, j] @ k[i, j // groups].T * scaling
            if causal:
                z = z.masked_fill(torch.ones_like(z, dtype=torch.bool).triu(1 + k.shape[2] - n), LOWEST)
            if mask is not None:
                m = mask.expand(b, h, n, k.shape[2])[i, j]
                z = z.masked_fill(~m, LOWEST) if m.dtype == torch.bool else z + m.double()
            out[i, :, j] = torch.softmax(z, -1) @ v[i, j // groups]
    return out


def _qkv(draw):
    batch, heads, kv, n, keys = 2, 4, draw(st.sampled_from([4, 2, 3])), 3, draw(st.sampled_from([3, 5]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 99)))
    q, k, v = (torch.randn(batch, h, t, 8, generator=g) for h, t in ((heads, n), (kv, keys), (kv, keys)))
    spoil = draw(st.sampled_from(["none", "nan", "inf", "dtype", "int", "list", "shape", "batch", "head_dim"]))
    target = draw(st.sampled_from(["q", "k", "v"]))
    t = {"q": q, "k": k, "v": v}
    if spoil == "nan":
        t[target][0, 0, 0, 0] = math.nan
    elif spoil == "inf":
        t[target][0, 0, 0, 0] = math.inf
    elif spoil == "dtype":
        t[target] = t[target].double()
    elif spoil == "int":
        t[target] = t[target].long()
    elif spoil == "list":
        t[target] = t[target].tolist()
    elif spoil == "shape":
        t[target] = t[target][0]
    elif spoil == "batch":
        t[target] = torch.cat([t[target]] * 2)
    elif spoil == "head_dim":
        t[target] = t[target][..., :5]
    valid = spoil in ("none", "nan", "inf") and kv != 3  # 4 query heads do not group over 3
    return t["q"], t["k"], t["v"], valid


MASKS = ("none", "causal", "bool", "additive", "int", "3d", "wide", "window0", "list")


@fast(150)
@given(data=st.data())
def test_attend_accepts_exactly_valid_calls_and_equals_the_reference(data):
    q, k, v, valid = _qkv(data.draw)
    n, keys = 3, (k.shape[2] if isinstance(k, torch.Tensor) and k.dim() == 4 else 3)
    kind = data.draw(st.sampled_from(MASKS), label="mask")
    g = torch.Generator().manual_seed(7)
    allowed = torch.rand(2, 1, n, keys, generator=g) > 0.3
    mask = {
        "none": None,
        "causal": Causal(),
        "bool": allowed,
        "additive": torch.zeros(2, 1, n, keys).masked_fill(~allowed, torch.finfo(torch.float32).min),
        "int": allowed.long(),
        "3d": allowed[0],
        "list": allowed.tolist(),
        "wide": torch.ones(2, 1, n, keys + 1, dtype=torch.bool),
    }.get(kind)
    valid &= kind not in ("int", "3d", "wide", "list", "window0")
    scaling = data.draw(st.sampled_from((0.35, 0.35, 0.35, *SCALARS)), label="scaling")
    valid &= _real(scaling) and 0 < scaling <= torch.finfo(torch.float32).max  # the inputs' dtype
    valid &= not (kind == "causal" and keys < n)

    def call():
        return attend(q, k, v, Scores(scaling), Causal(window=0) if kind == "window0" else mask, Plan())

    out = _check(call, valid)
    if valid:
        extra = mask if isinstance(mask, torch.Tensor) else None
        if extra is not None and extra.dtype != torch.bool:
            extra = extra.float()
        ref = _reference(q, k, v, scaling, extra, kind == "causal")
        # float32 scores carry a relative rounding of ~1e-7, so exp() of a score of size |z| is off by ~1e-7 |z|
        finite = [t.nan_to_num(0.0, 0.0, 0.0).abs().amax() for t in (q, k)]  # a spoiled entry aside
        largest = float(finite[0] * finite[1] * q.shape[-1] * scaling)
        torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-6 * max(1.0, largest), equal_nan=True)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Scores(0.5, softcap=0.0), "softcap must be a finite number > 0"),
        (lambda: Scores(0.5, bias=3.0), "bias must be Slopes"),
        (lambda: Scores(0.5, scale=[1.0]), "scale must be a floating tensor"),
        (lambda: Slopes([0.5, 0.25]), "slopes must be a 1-D floating tensor"),
        (lambda: Plan(maps={0: "softmax"}), "plan maps take head index -> RowMap"),
        (lambda: attend(*(torch.zeros(1, 2, 3, 4),) * 3, Scores(0.5, scale=torch.ones(7))), "scale of shape (7,)"),
        (
            lambda: attend(*(torch.zeros(1, 2, 3, 4),) * 3, Scores(0.5, bias=lambda a, b: torch.zeros(7))),
            "bias(0, 3) must give a tensor broadcasting to (1, 2, 3, 3)",
        ),
    ],
)
def test_the_small_objects_of_a_call_refuse_what_would_become_numbers(make, message):
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        make()


# --- the diagnostics -------------------------------------------------------------------------------------------------


@fast(80)
@given(sink=st.sampled_from(SCALARS), induction=st.sampled_from(SCALARS), distance=st.sampled_from(SCALARS))
def test_head_thresholds_accept_exactly_shares_and_a_distance(sink, induction, distance):
    valid = all(_real(x) and 0 <= x <= 1 for x in (sink, induction))
    valid = valid and _real(distance) and 0 < distance < math.inf
    _check(lambda: HeadThresholds(sink=sink, induction=induction, local_distance=distance), valid)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([1, 2], "head_features takes a pandas DataFrame"),
        (np.zeros((2, 2)), "head_features takes a pandas DataFrame"),
        (pd.DataFrame({"layer": [0]}), "head_features needs columns"),
    ],
)
def test_head_types_refuse_what_is_not_a_row_table(rows, message):
    with pytest.raises((TypeError, ValueError), match=message):
        diagnostics.head_types(rows)


@fast(80)
@given(p=st.sampled_from(SCALARS), b=st.sampled_from(SCALARS), eps=st.sampled_from(SCALARS))
def test_row_options_accept_exactly_finite_degrees_biases_and_tolerances(p, b, eps):
    degrees = p if isinstance(p, list) else [p]  # p is one degree or a list of them
    valid = all(_real(d) and 0 < d < math.inf for d in degrees) and _real(b) and math.isfinite(b)
    valid = valid and _real(eps) and 0 <= eps < math.inf
    _check(lambda: RowOptions.make(p=p, b=b, eps=eps), valid)


@fast(40)
@given(
    length=st.sampled_from((16, 32, 15, 16.5, "16", True, math.nan)),
    alpha=st.sampled_from((1.5, 2.0, 4.0, 1.0, 0.5, 5.0, math.nan, "1.5", True)),
)
def test_theory_checks_accept_exactly_lengths_from_16_and_entmax_alphas(length, alpha):
    valid = (
        isinstance(length, int) and not isinstance(length, bool) and length >= 16 and _real(alpha) and 1 < alpha <= 4
    )
    out = _check(lambda: diagnostics.theory_checks([length], [alpha]), valid)
    if valid:
        assert bool(out["holds"].all())
