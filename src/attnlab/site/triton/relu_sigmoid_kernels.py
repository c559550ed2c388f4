"""Triton kernels of :mod:`attnlab.site.triton.relu_sigmoid`: fused attention with the normalized ReLU^p and sigmoid
row maps (Polynomial Concentration §3, App. T), a forward with an online normalizer and a backward that recomputes the
scores tile by tile. Tensors are contiguous (batch, heads, tokens, dim); one program handles one block of queries
(forward, dq) or of keys (dk, dv) of one head.

attnlab does not require triton: without it this module still imports (the kernels stay plain functions) and
:mod:`attnlab.site.triton.relu_sigmoid` says what is missing before anything calls them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

try:
    import triton
    import triton.language as tl
except ModuleNotFoundError:
    triton = tl = None

# Triton reads TRITON_INTERPRET when @triton.jit decorates, so this is what the kernels below were built as.
INTERPRETED = triton is not None and bool(triton.knobs.runtime.interpret)


def _jit(fn: Callable[..., Any]) -> Any:
    return fn if triton is None else triton.jit(fn)


@contextlib.contextmanager
def interpreter_loop_bounds() -> Iterator[None]:
    """Triton 3.6's interpreter turns a run-time loop bound into an int with int() of a one-element array, which
    NumPy 2.4 refuses (triton-lang/triton#9171); inside this context its tensors take the upstream fix, so the
    kernels run on CPU tensors under TRITON_INTERPRET=1. Nothing changes on a GPU."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def patch(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(())))

    interpreter._patch_lang_tensor = patch
    try:
        yield
    finally:
        interpreter._patch_lang_tensor = original


@_jit
def _pow(x, P: tl.constexpr, INT_P: tl.constexpr, NBITS: tl.constexpr):
    """x^P for x in [0, 1]. A whole P goes by binary powering, as exact as repeated multiplication (the row
    map squares for powers of two); otherwise exp2(P log2 x), where log2 0 = -inf gives 0^P = 0."""
    if INT_P > 0:
        y = tl.full(x.shape, 1.0, tl.float32)
        for i in tl.static_range(NBITS):
            if (INT_P >> i) & 1:
                y = y * x
            if i + 1 < NBITS:
                x = x * x
    else:
        y = tl.exp2(P * tl.log2(x))
    return y


@_jit
def _shifted_sigmoid(u, allowed, c):
    """sigma(u) e^-c with c = the row's max of min(u, 0) so far: 1 / (e^c + e^(c - u)), whose largest entry in a
    row is at least 1/2, so a row whose every u lies below float32's sigmoid range keeps its weights."""
    return tl.where(allowed, 1.0 / (tl.exp(c)[:, None] + tl.exp(c[:, None] - u)), 0.0)


@_jit
def _scores(
    q, k, rows, cols, slope, row_scale, scale, n_k, window,
    CAUSAL: tl.constexpr, WINDOWED: tl.constexpr, HAS_SLOPES: tl.constexpr, HAS_QSCALE: tl.constexpr,
    MMA: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Scores z (queries x keys, float32) of a tile and the keys each query may attend. ``rows`` and ``cols`` are
    key positions (a query sits at position n_k - n_q + its index, so only real queries have rows < n_k)."""
    z = tl.dot(q.to(MMA), tl.trans(k.to(MMA)), input_precision=PRECISION) * scale
    if HAS_SLOPES:
        z -= slope * tl.maximum(rows[:, None] - cols[None, :], 0).to(tl.float32)
    if HAS_QSCALE:
        z *= row_scale[:, None]
    allowed = (rows[:, None] < n_k) & (cols[None, :] < n_k)
    if CAUSAL:
        allowed &= cols[None, :] <= rows[:, None]
    if WINDOWED:
        allowed &= cols[None, :] > rows[:, None] - window
    return z, allowed


@_jit
def _online(z, allowed, m, b, SIGMOID: tl.constexpr, P: tl.constexpr, INT_P: tl.constexpr, NBITS: tl.constexpr):
    """One tile of the online normalizer: unnormalized weights w, the running statistic m after the tile and the
    factor alpha that carries the sums before it over (flash attention's running max, with a ratio instead of
    a difference for ReLU^p: (r / m)^p <= 1, so p = 16 and large scores cannot overflow)."""
    if SIGMOID:
        u = z + b
        m_new = tl.maximum(m, tl.max(tl.where(allowed, tl.minimum(u, 0.0), float("-inf")), 1))
        alpha = tl.where(m_new == m, 1.0, tl.exp(m - m_new))
        w = _shifted_sigmoid(u, allowed, m_new)
    else:
        # NaN kept (the row maps' NaN rule): it reaches the row's sums, so l and the output are NaN, at no extra cost
        r = tl.where(allowed, tl.maximum(z + b, 0.0, propagate_nan=tl.PropagateNan.ALL), 0.0)
        m_new = tl.maximum(m, tl.max(r, 1))
        # divided, not multiplied by 1/m: a subnormal m would overflow the reciprocal (as in the row map)
        denom = tl.where(m_new > 0, m_new, 1.0)
        alpha = _pow(m / denom, P, INT_P, NBITS)
        w = _pow(r / denom[:, None], P, INT_P, NBITS)
    return w, m_new, alpha


@_jit
def _weights(
    z, allowed, m, l, b, SIGMOID: tl.constexpr, P: tl.constexpr, INT_P: tl.constexpr, NBITS: tl.constexpr
):  # fmt: skip
    """Weights y of a tile from the row's final statistics (m, l), and f with dL/dz = f (dL/dy - <dL/dy, y>):
    p y / r for ReLU^p, y (1 - sigma) for the sigmoid. A dead ReLU row (l = 0) has y = 0; a row holding a NaN score
    (l = NaN) has y = NaN throughout, as the row map's."""
    inv_l = 1.0 / tl.where((l > 0) | (l != l), l, 1.0)
    if SIGMOID:
        w = _shifted_sigmoid(z + b, allowed, m)
        y = w * inv_l[:, None]
        f = y * (1.0 - tl.exp(m)[:, None] * w)
    else:
        r = tl.where(allowed, tl.maximum(z + b, 0.0, propagate_nan=tl.PropagateNan.ALL), 0.0)
        y = _pow(r / tl.where(m > 0, m, 1.0)[:, None], P, INT_P, NBITS) * inv_l[:, None]
        f = tl.where(r > 0, P * y / tl.where(r > 0, r, 1.0), 0.0)
    # a row holding a NaN score passes no gradient to its scores, as the row maps' backward
    return y, tl.where((l != l)[:, None], 0.0, f)


@_jit
def _limit_weights(z, allowed, m, l, b, y, f):
    """y and f of a ReLU^p tile of a head that holds rows with a +inf score (m = +inf there, where ``_weights``
    gives inf / inf = NaN): in those rows the forward's limit, an even split over the +inf keys (l = their count;
    NaN throughout where the row holds a NaN, l = NaN), and f = 0: the row map passes its limit rows no gradient
    (``normalized_rows`` writes them with torch.where), so neither do these."""
    top = (m == float("inf"))[:, None]
    share = 1.0 / tl.where(m == float("inf"), l, 1.0)
    y = tl.where(top, share[:, None] * tl.where(allowed & (z + b == float("inf")), 1.0, 0.0), y)
    return y, tl.where(top, 0.0, f)


@_jit
def _score_grad(f, dp, delta, scale, row_scale, HAS_QSCALE: tl.constexpr):
    """dL/d(q.k) of a tile: the row map's f (dP - D) carried back through the row scale and the score scale."""
    ds = f * (dp - delta[:, None]) * scale
    if HAS_QSCALE:
        ds *= row_scale[:, None]
    return ds


@_jit
def _key_range(start_q, n_q, n_k, window, BLOCK_Q: tl.constexpr, CAUSAL: tl.constexpr, WINDOWED: tl.constexpr):
    """Keys [lo, hi) that some query of the block starting at start_q may attend."""
    lo = 0
    hi = n_k
    if CAUSAL:
        hi = tl.minimum(n_k, start_q + BLOCK_Q + n_k - n_q)
    if WINDOWED:
        lo = tl.maximum(0, start_q + n_k - n_q - window + 1)
    return lo, hi


@_jit
def _query_range(start_k, n_q, n_k, window, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr, WINDOWED: tl.constexpr):
    """Queries [lo, hi) that may attend some key of the block starting at start_k."""
    lo = 0
    hi = n_q
    if CAUSAL:
        lo = tl.maximum(0, start_k - (n_k - n_q))
    if WINDOWED:
        hi = tl.minimum(n_q, start_k + BLOCK_K + window - 1 - (n_k - n_q))
    return lo, hi


@_jit
def _load(ptr, row0, idx, n_rows, width, BLOCK: tl.constexpr):
    """Rows idx (< n_rows) of a (rows, width) matrix starting at row row0, padded with zeros to BLOCK columns."""
    cols = tl.arange(0, BLOCK)
    mask = (idx[:, None] < n_rows) & (cols[None, :] < width)
    return tl.load(ptr + (row0 + idx[:, None]).to(tl.int64) * width + cols[None, :], mask=mask, other=0.0)


@_jit
def _store(ptr, value, row0, idx, n_rows, width, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = (idx[:, None] < n_rows) & (cols[None, :] < width)
    tl.store(ptr + (row0 + idx[:, None]).to(tl.int64) * width + cols[None, :], value, mask=mask)


@_jit
def _row_terms(SLOPES, QSCALE, bh, n_heads, i, n_q, HAS_SLOPES: tl.constexpr, HAS_QSCALE: tl.constexpr):
    """The query head's ALiBi slope and the queries' row scale (placeholders where absent)."""
    slope = 0.0
    row_scale = 1.0
    if HAS_SLOPES:
        slope = tl.load(SLOPES + bh % n_heads)
    if HAS_QSCALE:
        row_scale = tl.load(QSCALE + bh * n_q + i, mask=i < n_q, other=1.0)
    return slope, row_scale


@_jit
def _forward_kernel(
    Q, K, V, O, M, L, FLAGS, SLOPES, QSCALE, scale, b, n_q, n_k, d, dv, n_heads, window,
    SIGMOID: tl.constexpr, P: tl.constexpr, INT_P: tl.constexpr, NBITS: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOWED: tl.constexpr, HAS_SLOPES: tl.constexpr, HAS_QSCALE: tl.constexpr,
    GROUP: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr, MMA: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    start_q = tl.program_id(0) * BLOCK_Q
    bh = tl.program_id(1)  # batch * n_heads + query head; its kv head is bh // GROUP
    i = start_q + tl.arange(0, BLOCK_Q)
    q = _load(Q, bh * n_q, i, n_q, d, BLOCK_D)
    slope, row_scale = _row_terms(SLOPES, QSCALE, bh, n_heads, i, n_q, HAS_SLOPES, HAS_QSCALE)
    if SIGMOID:
        m = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    else:
        m = tl.zeros([BLOCK_Q], tl.float32)
    l = tl.zeros([BLOCK_Q], tl.float32)
    acc = tl.zeros([BLOCK_Q, BLOCK_DV], tl.float32)
    lo, hi = _key_range(start_q, n_q, n_k, window, BLOCK_Q, CAUSAL, WINDOWED)
    for start_k in range(lo, hi, BLOCK_K):
        j = start_k + tl.arange(0, BLOCK_K)
        k = _load(K, (bh // GROUP) * n_k, j, n_k, d, BLOCK_D)
        v = _load(V, (bh // GROUP) * n_k, j, n_k, dv, BLOCK_DV)
        z, allowed = _scores(
            q, k, i + n_k - n_q, j, slope, row_scale, scale, n_k, window,
            CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE, MMA, PRECISION,
        )  # fmt: skip
        w, m, alpha = _online(z, allowed, m, b, SIGMOID, P, INT_P, NBITS)
        l = l * alpha + tl.sum(w, 1)
        acc = acc * alpha[:, None] + tl.dot(w.to(MMA), v.to(MMA), input_precision=PRECISION)
    if SIGMOID:
        # a row whose every allowed z + b is -inf summed sigma(-inf) e^-c = 1 / (0 + e^(-inf + inf)) = NaN: it has no
        # key the row map counts, so it attends to nothing, and m = 0 gives the backward sigma(-inf) e^0 = 0 there
        empty = m == float("-inf")
        acc = tl.where(empty[:, None], 0.0, acc)
        l = tl.where(empty, 0.0, l)
        m = tl.where(empty, 0.0, m)
    elif tl.max(m, 0) == float("inf"):
        # rare, and outside the loop above: some row holds a +inf score, where (r / m)^p was inf / inf = NaN
        l, acc = _infinite_rows(
            q, K, V, i, m, l, acc, slope, row_scale, scale, b, n_q, n_k, d, dv, window, lo, hi, (bh // GROUP) * n_k,
            CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE, BLOCK_K, BLOCK_D, BLOCK_DV, MMA, PRECISION,
        )  # fmt: skip
        tl.store(FLAGS + bh, 1)  # the backward's cue; every program that writes it writes 1
    # a dead ReLU row (every allowed r = 0) has acc = 0 and l = 0: it attends to nothing, as in the row map
    _store(O, acc / tl.where(l > 0, l, 1.0)[:, None], bh * n_q, i, n_q, dv, BLOCK_DV)
    tl.store(M + bh * n_q + i, m, mask=i < n_q)
    tl.store(L + bh * n_q + i, l, mask=i < n_q)


@_jit
def _infinite_rows(
    q, K, V, i, m, l, acc, slope, row_scale, scale, b, n_q, n_k, d, dv, window, lo, hi, kv_row0,
    CAUSAL: tl.constexpr, WINDOWED: tl.constexpr, HAS_SLOPES: tl.constexpr, HAS_QSCALE: tl.constexpr,
    BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, MMA: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """(l, acc) of a ReLU^p block with the rows whose largest r is +inf (where the online sweep left inf / inf = NaN)
    given the row map's value there, the limit as their +inf scores grow together: an even split of the weight over
    the +inf keys (l = their count, acc = the sum of their values), NaN where the row also holds a NaN score (the
    row maps' NaN rule). One more sweep over the block's keys, which only a block holding such a row takes; it sums
    into l and acc themselves, so it holds no second accumulator."""
    top = m == float("inf")
    l = tl.where(top, 0.0, l)
    acc = tl.where(top[:, None], 0.0, acc)
    nan = tl.zeros_like(l)
    for start_k in range(lo, hi, BLOCK_K):
        j = start_k + tl.arange(0, BLOCK_K)
        k = _load(K, kv_row0, j, n_k, d, BLOCK_D)
        v = _load(V, kv_row0, j, n_k, dv, BLOCK_DV)
        z, allowed = _scores(
            q, k, i + n_k - n_q, j, slope, row_scale, scale, n_k, window,
            CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE, MMA, PRECISION,
        )  # fmt: skip
        counted = top[:, None] & allowed
        hit = tl.where(counted & (z + b == float("inf")), 1.0, 0.0)
        l += tl.sum(hit, 1)
        nan += tl.sum(tl.where(counted & (z != z), 1.0, 0.0), 1)
        acc += tl.dot(hit.to(MMA), v.to(MMA), input_precision=PRECISION)
    # NaN in acc too: the output divides by l only where l > 0
    return tl.where(nan > 0, float("nan"), l), tl.where((nan > 0)[:, None], float("nan"), acc)


@_jit
def _recompute(
    q, do, k, v, i, j, m, l, slope, row_scale, scale, b, n_q, n_k, window,
    SIGMOID: tl.constexpr, P: tl.constexpr, INT_P: tl.constexpr, NBITS: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOWED: tl.constexpr, HAS_SLOPES: tl.constexpr, HAS_QSCALE: tl.constexpr,
    MMA: tl.constexpr, PRECISION: tl.constexpr, LIMIT: tl.constexpr,
):  # fmt: skip
    """A tile of the backward from q, k and the row statistics: the weights y, the row map's factor f and dP; with
    ``LIMIT`` (a head holding a row with a +inf score) those rows' y and f are ``_limit_weights``'."""
    z, allowed = _scores(
        q, k, i + n_k - n_q, j, slope, row_scale, scale, n_k, window,
        CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE, MMA, PRECISION,
    )  # fmt: skip
    y, f = _weights(z, allowed, m, l, b, SIGMOID, P, INT_P, NBITS)
    if LIMIT:
        y, f = _limit_weights(z, allowed, m, l, b, y, f)
    dp = tl.dot(do.to(MMA), tl.trans(v.to(MMA)), input_precision=PRECISION)
    return y, f, dp


@_jit
def _dq_sweeps(
    q, do, K, V, i, m, l, slope, row_scale, scale, b, n_q, n_k, d, dv, window, lo, hi, kv_row0,
    SIGMOID: tl.constexpr, P: tl.constexpr, INT_P: tl.constexpr, NBITS: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOWED: tl.constexpr, HAS_SLOPES: tl.constexpr, HAS_QSCALE: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    MMA: tl.constexpr, PRECISION: tl.constexpr, LIMIT: tl.constexpr,
):  # fmt: skip
    """Each row's D and dq of a block of queries, by two sweeps over its keys."""
    # D = sum_j y_j dP_j from the very dP the gradient uses, not flash attention's dO.O: ReLU^p's f = p y / r grows
    # as r -> 0, and a D rounded apart from dP would leave f (dP - D) far from 0 in a row that one key holds
    delta = tl.zeros([BLOCK_Q], tl.float32)
    for start_k in range(lo, hi, BLOCK_K):
        j = start_k + tl.arange(0, BLOCK_K)
        k = _load(K, kv_row0, j, n_k, d, BLOCK_D)
        v = _load(V, kv_row0, j, n_k, dv, BLOCK_DV)
        y, _, dp = _recompute(
            q, do, k, v, i, j, m, l, slope, row_scale, scale, b, n_q, n_k, window,
            SIGMOID, P, INT_P, NBITS, CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE, MMA, PRECISION, LIMIT,
        )  # fmt: skip
        delta += tl.sum(y * dp, 1)
    # f = 0 in a row holding a NaN score (l = NaN) and, with LIMIT, in a +inf row; D = 0 there keeps f (dP - D) at 0
    # where a NaN score made its y NaN
    delta = tl.where(l != l, 0.0, delta)
    if LIMIT:
        delta = tl.where(m == float("inf"), 0.0, delta)
    dq = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)
    for start_k in range(lo, hi, BLOCK_K):
        j = start_k + tl.arange(0, BLOCK_K)
        k = _load(K, kv_row0, j, n_k, d, BLOCK_D)
        v = _load(V, kv_row0, j, n_k, dv, BLOCK_DV)
        _, f, dp = _recompute(
            q, do, k, v, i, j, m, l, slope, row_scale, scale, b, n_q, n_k, window,
            SIGMOID, P, INT_P, NBITS, CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE, MMA, PRECISION, LIMIT,
        )  # fmt: skip
        ds = _score_grad(f, dp, delta, scale, row_scale, HAS_QSCALE)
        dq += tl.dot(ds.to(MMA), k.to(MMA), input_precision=PRECISION)
    return delta, dq


@_jit
def _dq_kernel(
    Q, K, V, DO, M, L, FLAGS, DELTA, DQ, SLOPES, QSCALE, scale, b, n_q, n_k, d, dv, n_heads, window,
    SIGMOID: tl.constexpr, P: tl.constexpr, INT_P: tl.constexpr, NBITS: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOWED: tl.constexpr, HAS_SLOPES: tl.constexpr, HAS_QSCALE: tl.constexpr,
    GROUP: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr, MMA: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    start_q = tl.program_id(0) * BLOCK_Q
    bh = tl.program_id(1)
    i = start_q + tl.arange(0, BLOCK_Q)
    q = _load(Q, bh * n_q, i, n_q, d, BLOCK_D)
    do = _load(DO, bh * n_q, i, n_q, dv, BLOCK_DV)
    m = tl.load(M + bh * n_q + i, mask=i < n_q, other=0.0)
    l = tl.load(L + bh * n_q + i, mask=i < n_q, other=0.0)
    slope, row_scale = _row_terms(SLOPES, QSCALE, bh, n_heads, i, n_q, HAS_SLOPES, HAS_QSCALE)
    lo, hi = _key_range(start_q, n_q, n_k, window, BLOCK_Q, CAUSAL, WINDOWED)
    if SIGMOID:
        delta, dq = _dq_sweeps(
            q, do, K, V, i, m, l, slope, row_scale, scale, b, n_q, n_k, d, dv, window, lo, hi, (bh // GROUP) * n_k,
            SIGMOID, P, INT_P, NBITS, CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE,
            BLOCK_Q, BLOCK_K, BLOCK_D, BLOCK_DV, MMA, PRECISION, False,
        )  # fmt: skip
    elif tl.load(FLAGS + bh) != 0:
        # rare: a row of this head holds a +inf score; a copy of the sweeps treats such rows apart, so that the
        # sweeps every other head runs are the plain ones
        delta, dq = _dq_sweeps(
            q, do, K, V, i, m, l, slope, row_scale, scale, b, n_q, n_k, d, dv, window, lo, hi, (bh // GROUP) * n_k,
            SIGMOID, P, INT_P, NBITS, CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE,
            BLOCK_Q, BLOCK_K, BLOCK_D, BLOCK_DV, MMA, PRECISION, True,
        )  # fmt: skip
    else:
        delta, dq = _dq_sweeps(
            q, do, K, V, i, m, l, slope, row_scale, scale, b, n_q, n_k, d, dv, window, lo, hi, (bh // GROUP) * n_k,
            SIGMOID, P, INT_P, NBITS, CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE,
            BLOCK_Q, BLOCK_K, BLOCK_D, BLOCK_DV, MMA, PRECISION, False,
        )  # fmt: skip
    tl.store(DELTA + bh * n_q + i, delta, mask=i < n_q)
    _store(DQ, dq, bh * n_q, i, n_q, d, BLOCK_D)


@_jit
def _dkdv_sweep(
    Q, DO, M, L, DELTA, SLOPES, QSCALE, k, v, j, bh, dk, dvacc, lo, hi, scale, b, n_q, n_k, d, dv, n_heads, window,
    SIGMOID: tl.constexpr, P: tl.constexpr, INT_P: tl.constexpr, NBITS: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOWED: tl.constexpr, HAS_SLOPES: tl.constexpr, HAS_QSCALE: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, MMA: tl.constexpr,
    PRECISION: tl.constexpr, LIMIT: tl.constexpr,
):  # fmt: skip
    """dk and dv of a block of keys plus the terms of query head bh, by one sweep over its queries."""
    for start_q in range(lo, hi, BLOCK_Q):
        i = start_q + tl.arange(0, BLOCK_Q)
        q = _load(Q, bh * n_q, i, n_q, d, BLOCK_D)
        do = _load(DO, bh * n_q, i, n_q, dv, BLOCK_DV)
        m = tl.load(M + bh * n_q + i, mask=i < n_q, other=0.0)
        l = tl.load(L + bh * n_q + i, mask=i < n_q, other=0.0)
        delta = tl.load(DELTA + bh * n_q + i, mask=i < n_q, other=0.0)
        slope, row_scale = _row_terms(SLOPES, QSCALE, bh, n_heads, i, n_q, HAS_SLOPES, HAS_QSCALE)
        y, f, dp = _recompute(
            q, do, k, v, i, j, m, l, slope, row_scale, scale, b, n_q, n_k, window,
            SIGMOID, P, INT_P, NBITS, CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE, MMA, PRECISION, LIMIT,
        )  # fmt: skip
        dvacc += tl.dot(tl.trans(y).to(MMA), do.to(MMA), input_precision=PRECISION)
        ds = _score_grad(f, dp, delta, scale, row_scale, HAS_QSCALE)
        dk += tl.dot(tl.trans(ds).to(MMA), q.to(MMA), input_precision=PRECISION)
    return dk, dvacc


@_jit
def _dkdv_kernel(
    Q, K, V, DO, M, L, FLAGS, DELTA, DK, DV, SLOPES, QSCALE, scale, b, n_q, n_k, d, dv, n_heads, window,
    SIGMOID: tl.constexpr, P: tl.constexpr, INT_P: tl.constexpr, NBITS: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOWED: tl.constexpr, HAS_SLOPES: tl.constexpr, HAS_QSCALE: tl.constexpr,
    GROUP: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr, MMA: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    start_k = tl.program_id(0) * BLOCK_K
    kv = tl.program_id(1)  # batch * kv heads + kv head
    j = start_k + tl.arange(0, BLOCK_K)
    k = _load(K, kv * n_k, j, n_k, d, BLOCK_D)
    v = _load(V, kv * n_k, j, n_k, dv, BLOCK_DV)
    dk = tl.zeros([BLOCK_K, BLOCK_D], tl.float32)
    dvacc = tl.zeros([BLOCK_K, BLOCK_DV], tl.float32)
    lo, hi = _query_range(start_k, n_q, n_k, window, BLOCK_K, CAUSAL, WINDOWED)
    # every query head of the group in this one program: dk and dv sum over them without atomics
    for g in range(GROUP):
        bh = kv * GROUP + g
        if SIGMOID:
            dk, dvacc = _dkdv_sweep(
                Q, DO, M, L, DELTA, SLOPES, QSCALE, k, v, j, bh, dk, dvacc, lo, hi, scale, b, n_q, n_k, d, dv,
                n_heads, window, SIGMOID, P, INT_P, NBITS, CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE,
                BLOCK_Q, BLOCK_D, BLOCK_DV, MMA, PRECISION, False,
            )  # fmt: skip
        elif tl.load(FLAGS + bh) != 0:
            # rare: a row of this head holds a +inf score (see _dq_kernel)
            dk, dvacc = _dkdv_sweep(
                Q, DO, M, L, DELTA, SLOPES, QSCALE, k, v, j, bh, dk, dvacc, lo, hi, scale, b, n_q, n_k, d, dv,
                n_heads, window, SIGMOID, P, INT_P, NBITS, CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE,
                BLOCK_Q, BLOCK_D, BLOCK_DV, MMA, PRECISION, True,
            )  # fmt: skip
        else:
            dk, dvacc = _dkdv_sweep(
                Q, DO, M, L, DELTA, SLOPES, QSCALE, k, v, j, bh, dk, dvacc, lo, hi, scale, b, n_q, n_k, d, dv,
                n_heads, window, SIGMOID, P, INT_P, NBITS, CAUSAL, WINDOWED, HAS_SLOPES, HAS_QSCALE,
                BLOCK_Q, BLOCK_D, BLOCK_DV, MMA, PRECISION, False,
            )  # fmt: skip
    _store(DK, dk, kv * n_k, j, n_k, d, BLOCK_D)
    _store(DV, dvacc, kv * n_k, j, n_k, dv, BLOCK_DV)


@dataclass(frozen=True)
class Launch:
    """What a call fixes besides its tensors: the row map (sigmoid, or ReLU^p with degree p), bias b, score
    scale, masks and block sizes."""

    sigmoid: bool
    p: float
    b: float
    scale: float
    causal: bool
    window: int | None
    block_q: int
    block_k: int

    def constants(
        self, q: torch.Tensor, v: torch.Tensor, group: int, slopes: torch.Tensor | None, row_scale: torch.Tensor | None
    ) -> dict[str, Any]:
        """The kernels' compile-time arguments for these inputs."""
        whole = float(self.p).is_integer() and not self.sigmoid
        return dict(
            SIGMOID=self.sigmoid,
            P=float(self.p),
            INT_P=int(self.p) if whole else 0,
            NBITS=int(self.p).bit_length() if whole else 0,
            CAUSAL=self.causal,
            WINDOWED=self.window is not None,
            HAS_SLOPES=slopes is not None,
            HAS_QSCALE=row_scale is not None,
            GROUP=group,
            BLOCK_Q=self.block_q,
            BLOCK_K=self.block_k,
            BLOCK_D=_block(q.shape[-1]),
            BLOCK_DV=_block(v.shape[-1]),
            MMA=mma_dtype(q.dtype),
            # float32 products in full precision: TF32 would round the scores to 10 bits
            PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        )

    def runtime(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[float, float, int, int, int, int, int, int]:
        """scale, b, n_q, n_k, d, dv, n_heads, window: the kernels' shared run-time scalars."""
        return (self.scale, self.b, q.shape[2], k.shape[2], q.shape[3], v.shape[3], q.shape[1], self.window or 0)


def _block(width: int) -> int:
    # tl.dot needs every dimension a power of two and at least 16
    return max(16, int(triton.next_power_of_2(width)))


def mma_dtype(dtype: torch.dtype) -> Any:
    """The dtype the matrix products take their operands in: the input's own, except that Triton's
    interpreter multiplies bfloat16 bit patterns as integers (triton-lang/triton#11584), so there bfloat16
    operands go in as float32, whose products of bfloat16 values are exact."""
    if dtype == torch.float32 or (INTERPRETED and dtype == torch.bfloat16):
        return tl.float32
    return tl.bfloat16 if dtype == torch.bfloat16 else tl.float16


def _optional(t: torch.Tensor | None, placeholder: torch.Tensor) -> torch.Tensor:
    # an absent slope or row-scale tensor is never read (its HAS_ flag is off), but the kernel needs a pointer
    return placeholder if t is None else t


def forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    slopes: torch.Tensor | None,
    row_scale: torch.Tensor | None,
    launch: Launch,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Output (B, Hq, Q, Dv) in q's dtype, the per-row statistics (m, l), float32 (B, Hq, Q), and a flag per
    (batch, head), int32 (B * Hq,): 1 where a row holds a +inf score (its m is +inf and its l counts the +inf
    keys), which the backward alone then treats apart."""
    bsz, heads, n_q, _ = q.shape
    out = q.new_empty(bsz, heads, n_q, v.shape[-1])
    m = torch.empty(bsz, heads, n_q, dtype=torch.float32, device=q.device)
    l = torch.empty_like(m)
    flags = torch.zeros(bsz * heads, dtype=torch.int32, device=q.device)
    grid = (math.ceil(n_q / launch.block_q), bsz * heads)
    _forward_kernel[grid](
        q, k, v, out, m, l, flags, _optional(slopes, m), _optional(row_scale, m), *launch.runtime(q, k, v),
        **launch.constants(q, v, heads // k.shape[1], slopes, row_scale),
    )  # fmt: skip
    return out, m, l, flags


def backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dout: torch.Tensor,
    m: torch.Tensor,
    l: torch.Tensor,
    flags: torch.Tensor,
    slopes: torch.Tensor | None,
    row_scale: torch.Tensor | None,
    launch: Launch,
) -> tuple[torch.Tensor, ...]:
    """dq, dk, dv in the inputs' dtype, recomputing each tile of scores from q, k and the forward's row statistics
    (m, l) and flags."""
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    delta = torch.empty_like(m)
    common = (_optional(slopes, m), _optional(row_scale, m), *launch.runtime(q, k, v))
    constants = launch.constants(q, v, q.shape[1] // k.shape[1], slopes, row_scale)
    bsz, kv_heads, n_k, _ = k.shape
    # the dq kernel writes each row's D, which every dk, dv tile of that row reads
    grid = (math.ceil(q.shape[2] / launch.block_q), bsz * q.shape[1])
    _dq_kernel[grid](q, k, v, dout, m, l, flags, delta, dq, *common, **constants)
    grid = (math.ceil(n_k / launch.block_k), bsz * kv_heads)
    _dkdv_kernel[grid](q, k, v, dout, m, l, flags, delta, dk, dv, *common, **constants)
    return dq, dk, dv
