"""The row plumbing every map shares: check_rows refuses bad scores, masks and dims by name; apply_rows moves dim,
upcasts and masks; normalized_rows and pointwise_rows keep the masked, empty, NaN and +-inf rules of a per-row loop."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from attnlab.rowmaps._rows import (
    allowed_count,
    apply_rows,
    check_rows,
    compute_dtype,
    denormal_floor,
    normalized_rows,
    pointwise_rows,
    row_max,
)

INF, NAN = float("inf"), float("nan")
Z = torch.zeros(2, 3)


def _softmax(z, m):
    return torch.exp(z - m) / torch.exp(z - m).sum(-1, keepdim=True)


@pytest.mark.parametrize(
    "scores, mask, dim, error, message",
    [
        ([1.0], None, -1, TypeError, "scores must be a torch.Tensor, got list"),
        (
            torch.zeros(3, dtype=torch.int64),
            None,
            -1,
            TypeError,
            "scores has dtype torch.int64; allowed: float16, bfloat16, float32, float64",
        ),
        (
            torch.zeros(3, dtype=torch.complex64),
            None,
            -1,
            TypeError,
            "scores has dtype torch.complex64; allowed: float16, bfloat16, float32, float64",
        ),
        (torch.tensor(1.0), None, -1, ValueError, "scores must have at least one dimension (the key axis)"),
        (Z, None, True, TypeError, "dim must be an int (the key axis), got bool"),
        (Z, None, 1.0, TypeError, "dim must be an int (the key axis), got float"),
        (Z, None, 2, ValueError, "dim=2 is out of range for scores with 2 dimensions"),
        (Z, None, -3, ValueError, "dim=-3 is out of range for scores with 2 dimensions"),
        (
            Z,
            torch.ones(2, 3),
            -1,
            TypeError,
            "mask must be a bool tensor (True = key may be attended), got torch.float32",
        ),
        (Z, [True], -1, TypeError, "mask must be a bool tensor (True = key may be attended), got list"),
        (
            Z,
            torch.ones(4, dtype=torch.bool),
            -1,
            ValueError,
            "mask shape (4,) does not broadcast to scores shape (2, 3)",
        ),
        (
            Z,
            torch.ones(5, 2, 3, dtype=torch.bool),
            -1,
            ValueError,
            "mask shape (5, 2, 3) would enlarge scores shape (2, 3)",
        ),
        (
            Z,
            torch.ones(1, 2, 3, dtype=torch.bool),
            -1,
            ValueError,
            "mask shape (1, 2, 3) would enlarge scores shape (2, 3)",
        ),
    ],
)
def test_check_rows_names_what_is_wrong_and_what_is_allowed(scores, mask, dim, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        check_rows(scores, mask, dim)


@pytest.mark.parametrize(
    "dim, mask, expected",
    [
        (-1, None, 1),
        (-2, None, 0),
        (1, None, 1),
        (np.int64(0), None, 0),
        (-1, torch.ones(3, dtype=torch.bool), 1),
        (-1, torch.ones(2, 1, dtype=torch.bool), 1),
        (0, torch.ones(2, 3, dtype=torch.bool), 0),
    ],
)
def test_check_rows_takes_any_integral_dim_and_broadcasting_masks(dim, mask, expected):
    # The returned dim is non-negative so that movedim and shape lookups need no second normalization.
    assert check_rows(Z, mask, dim) == expected


def test_compute_dtype_upcasts_halves_and_keeps_float64():
    assert [compute_dtype(d) for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)] == [
        torch.float32,
        torch.float32,
        torch.float32,
        torch.float64,
    ]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_apply_rows_computes_upcast_and_returns_the_input_dtype(dtype):
    seen = []
    out = apply_rows(torch.zeros(2, 3, dtype=dtype), None, -1, lambda r: seen.append(r.dtype) or r + 1)
    assert seen == [compute_dtype(dtype)] and out.dtype == dtype and (out == 1).all()


def test_apply_rows_runs_fn_on_contiguous_rows_along_dim_and_moves_them_back():
    z = torch.arange(24.0).view(2, 3, 4)
    seen = []

    def fn(rows):
        seen.append((tuple(rows.shape), rows.is_contiguous()))
        return rows.cumsum(-1)

    out = apply_rows(z, None, 1, fn)
    assert seen == [((2, 4, 3), True)]
    torch.testing.assert_close(out, z.cumsum(1), rtol=0, atol=0)


def test_apply_rows_fills_masked_keys_with_minus_inf_in_the_original_layout():
    z = torch.tensor([[1.0, NAN, 3.0], [4.0, 5.0, 6.0]])
    # The mask is read against scores as given (dim 0 here), then broadcast; a masked NaN never reaches fn.
    mask = torch.tensor([True, False, True])
    got = apply_rows(z, mask, 0, lambda rows: rows.clone())
    assert got.tolist() == [[1.0, -INF, 3.0], [4.0, -INF, 6.0]]
    full = apply_rows(z, mask.expand(2, 3), 0, lambda rows: rows.clone())
    assert torch.equal(got, full)


@pytest.mark.parametrize("shape, dim", [((3, 0), -1), ((0,), 0), ((2, 0, 4), 1)])
def test_apply_rows_gives_inputs_without_keys_back_without_calling_fn(shape, dim):
    z = torch.zeros(shape, dtype=torch.bfloat16)

    def fn(rows):
        raise AssertionError("a map was run on rows with no keys")

    out = apply_rows(z, None, dim, fn)
    assert out.shape == z.shape and out.dtype == z.dtype


def test_row_max_and_allowed_count_read_minus_inf_as_masked():
    z = torch.tensor([[1.0, 2.0, NAN], [-INF, -INF, -INF], [1.0, INF, -INF], [0.0, 1.0, 2.0]], requires_grad=True)
    m = row_max(z)
    assert not m.requires_grad  # the max only shifts rows; no gradient may flow through it
    assert [x[0] for x in m.tolist()][1:] == [-INF, INF, 2.0] and math.isnan(m[0, 0])
    assert allowed_count(z).tolist() == [[3.0], [0.0], [2.0], [3.0]] and allowed_count(z).dtype == z.dtype


@pytest.mark.parametrize(
    "k, n, dtype",
    [(2.0, 10, torch.float32), (4.0, 65536, torch.float32), (0.5, 7, torch.float64), (1.0, 1, torch.float64)],
)
def test_denormal_floor_is_the_smallest_base_whose_share_stays_normal(k, n, dtype):
    tiny = torch.finfo(dtype).tiny
    floor = denormal_floor(k, n, dtype)
    assert floor == pytest.approx((4 * n * tiny) ** (1 / max(k, 1.0)), rel=1e-12)
    # k < 1 uses k = 1: r^k >= r for r < 1, so the exponent-1 floor is already safe.
    assert floor ** max(k, 1.0) / n >= tiny


def _rule_loop(z: torch.Tensor, row_map) -> torch.Tensor:
    """The row rules one row at a time, in Python: NaN anywhere -> NaN; no key above -inf -> zeros; +inf keys ->
    an even split over them; otherwise ``row_map`` on the row."""
    out = torch.empty_like(z)
    for index in np.ndindex(*z.shape[:-1]):
        row = z[index]
        values = row.tolist()
        if any(math.isnan(v) for v in values):
            out[index] = NAN
        elif all(v == -INF for v in values):
            out[index] = 0.0
        elif any(v == INF for v in values):
            top = [float(v == INF) for v in values]
            out[index] = torch.tensor([t / sum(top) for t in top], dtype=z.dtype)
        else:
            out[index] = row_map(row)
    return out


def _hostile(seed: int, shape=(6, 5, 7)) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(shape, generator=g, dtype=torch.float64) * 3
    special = torch.rand(shape, generator=g)
    z[special < 0.06] = NAN
    z[(special >= 0.06) & (special < 0.12)] = INF
    z[(special >= 0.12) & (special < 0.4)] = -INF
    z[0, 0] = -INF  # at least one row with no allowed key
    return z


@pytest.mark.parametrize("seed", range(4))
def test_normalized_rows_equals_the_per_row_rule_loop(seed):
    z = _hostile(seed)
    got = normalized_rows(z, _softmax)
    ref = _rule_loop(z, lambda row: torch.softmax(row, -1))
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-15, equal_nan=True)


def test_normalized_rows_never_hands_the_map_a_non_finite_maximum_or_nan():
    # A map's arithmetic (and its backward) on a NaN or +inf row would poison the rows around it.
    seen = []

    def watched(z, m):
        seen.append(bool(torch.isfinite(m).all()) and not bool(torch.isnan(z).any() or torch.isposinf(z).any()))
        return _softmax(z, m)

    normalized_rows(_hostile(7), watched)
    assert seen == [True]


def test_normalized_rows_gives_finite_gradients_around_special_rows():
    z = _hostile(3)
    special = torch.isnan(z) | torch.isinf(z)
    finite = torch.randn(z.shape, generator=torch.Generator().manual_seed(0), dtype=z.dtype).requires_grad_()
    out = normalized_rows(torch.where(special, z, finite), _softmax)
    # NaN rows stay NaN by the rules; every other row, +inf and fully masked ones included, must backpropagate.
    out[~torch.isnan(z).any(-1)].pow(2).sum().backward()
    assert torch.isfinite(finite.grad).all() and finite.grad.abs().sum() > 0


def test_normalized_rows_of_empty_inputs_are_empty_without_calling_the_map():
    def never(z, m):
        raise AssertionError("a map was run on an empty input")

    for shape in [(0, 4), (3, 0), (0,)]:
        assert normalized_rows(torch.zeros(shape), never).shape == shape


@pytest.mark.parametrize("seed", range(3))
def test_pointwise_rows_keeps_the_maps_own_values_and_makes_nan_rows_nan(seed):
    z = _hostile(seed)
    got = pointwise_rows(z, torch.relu)
    ref = torch.empty_like(z)
    for index in np.ndindex(*z.shape[:-1]):
        row = z[index]
        # An un-normalized map keeps +inf at +inf keys and 0 at -inf ones; only NaN is a row rule.
        ref[index] = NAN if torch.isnan(row).any() else torch.relu(row)
    torch.testing.assert_close(got, ref, rtol=0, atol=0, equal_nan=True)


def test_apply_then_normalize_ignores_nan_at_a_masked_key_and_zeroes_a_fully_masked_row():
    z = torch.tensor([[NAN, 1.0, 2.0], [5.0, NAN, 1.0], [1.0, 2.0, 3.0]])
    mask = torch.tensor([[False, True, True], [True, True, True], [False, False, False]])
    out = apply_rows(z, mask, -1, lambda rows: normalized_rows(rows, _softmax))
    torch.testing.assert_close(out[0], torch.softmax(torch.tensor([-INF, 1.0, 2.0]), -1))
    assert torch.isnan(out[1]).all() and out[2].tolist() == [0.0, 0.0, 0.0]
