"""Hypothesis strategies for hostile score rows, shared by the row-map and diagnostics fuzz tests (test utility)."""

from __future__ import annotations

import math

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

DTYPES = (torch.float32, torch.float64, torch.bfloat16)
INF, NAN = math.inf, math.nan
SPECIAL = st.sampled_from([INF, -INF, NAN])
SMALL = st.one_of(st.floats(-10, 10), st.sampled_from([0.0, 1.0, -1.0, 0.5, 3.55, -3.55]))


def offset(dtype):
    """A huge offset of either sign: |offset| = m 10^e (m in [1, 10), e in 0..29, so up to 1e30) for
    float64, in [1e4, 3e5] for float32 and bfloat16, where 1e30 + v would round to a constant row."""
    if dtype == torch.float64:
        magnitude = st.tuples(st.floats(1, 9.99), st.integers(0, 29)).map(lambda t: t[0] * 10.0 ** t[1])
    else:
        magnitude = st.floats(1e4, 3e5)
    return st.tuples(magnitude, st.sampled_from([1.0, -1.0])).map(lambda t: t[0] * t[1])


@st.composite
def row(draw, dtype, n):
    """n values: mixed small and special ones, a huge offset (+- a spread), a constant, or an offset row
    with +-inf and NaN keys."""
    kind = draw(st.sampled_from(["mixed", "offset", "offset", "constant", "specials"]))
    if kind == "mixed":
        return draw(st.lists(st.one_of(SMALL, SPECIAL), min_size=n, max_size=n))
    if kind == "constant":
        return [draw(st.one_of(offset(dtype), SMALL, SPECIAL))] * n
    base = draw(offset(dtype))
    spread = draw(st.sampled_from([1.0, 0.25, 1e-3 * abs(base), 0.0]))
    values = [base + spread * v for v in draw(st.lists(st.floats(-8, 8), min_size=n, max_size=n))]
    if kind == "specials":
        for i in draw(st.lists(st.integers(0, n - 1), max_size=n)):
            values[i] = draw(SPECIAL)
    return values


_UNHURRIED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]


def fast(examples: int) -> settings:
    """The default run's settings: the session's profile (tests/conftest.py) derandomizes them, so CI tries the same
    rows every time."""
    return settings(max_examples=examples, deadline=None, suppress_health_check=_UNHURRIED)


def slow(examples: int) -> settings:
    """`pytest -m slow`'s settings: random, so each run tries new rows; a failure prints the seed that
    replays it."""
    return settings(
        max_examples=examples, deadline=None, derandomize=False, database=None, suppress_health_check=_UNHURRIED
    )
