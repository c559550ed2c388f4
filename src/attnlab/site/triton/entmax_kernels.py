"""Triton kernels of :mod:`attnlab.site.triton.entmax`: fused alpha-entmax attention, forward and backward.

alpha-entmax (Vasylenko et al. 2025 §2.2, App. A) gives key j the weight p_j = [(alpha - 1) z_j - tau]_+^k with
k = 1 / (alpha - 1) and tau such that the allowed weights sum to 1. As in AdaSplash (Gonçalves et al., the Triton
alpha-entmax flash attention), one program takes one block of queries of one head, finds its thresholds by sweeping
its key blocks, then sweeps them once more for the output; no (queries x keys) tensor is ever formed. Tensors are
contiguous (batch, heads, tokens, dim).

Each row is solved in x units, x_j = (alpha - 1)(z_j - max z) <= 0: the threshold theta = tau - (alpha - 1) max z
solves f(theta) = sum_j [x_j - theta]_+^k = 1 and lies in [-1, -L^(-1/k)] for L allowed keys (App. A, eq. 16), the
bracket attnlab's row map solves in. The kernels bracket it by [-1, 0] instead: a row of L tied keys has its root
exactly at -L^(-1/k), and that end computed with the GPU's approximate exp2/log2 can fall a rounding below it, which
would turn Newton's exact one-step answer into bisections. A row keeps its maximum, theta and the final sum f (three
float32 numbers), from which the backward recomputes its weights exactly.

A row whose maximum is not finite (a +inf score, or every allowed score -inf) has no x: it takes the row map's value
instead (``attnlab.rowmaps._rows.normalized_rows``), an even split over its +inf keys (none: zeros; NaN if it also
holds a NaN), and passes no gradient to its scores. Every sweep gives such a row r = 0 ([NaN]_+ = [-inf]_+ = 0),
hence no weight and no gradient, and the threshold sweeps do not wait for it. One more sweep, taken only by a block
holding such a row, writes its limit: the output, the number of its +inf keys as its sum of r^k (1 if none), and
theta = NaN if it holds a NaN. A flag per (batch, head) then sends the dk/dv kernel on one more sweep over the
queries of that head for the limit's dv; every other loop runs as without such rows.

attnlab does not require triton: without it this module still imports (the kernels stay plain functions) and
:mod:`attnlab.site.triton.entmax` says what is missing before anything calls them.
"""

from __future__ import annotations

# one import of triton, one interpreter fix and one decorator for every fused kernel of the site
from attnlab.site.triton.relu_sigmoid_kernels import INTERPRETED, _jit, interpreter_loop_bounds, tl, triton  # noqa: F401


@_jit
def _load(base, rows, n_rows, cols, n_cols, DOT: tl.constexpr):
    """The (rows, cols) tile of a row-major (n_rows, n_cols) matrix at ``base``, zero outside it, in ``DOT``: the
    inputs' dtype, except that Triton's interpreter multiplies bfloat16 bit patterns as integers
    (triton-lang/triton#11584), so there bfloat16 tiles go in as float32, whose products of them are exact."""
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    return tl.load(base + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0).to(DOT)


@_jit
def _scores(q, k, rows, cols, qs, slope, n_q, n_k, window, scale, CAUSAL: tl.constexpr):
    """Scores z = qs * (scale q.k - slope (i - j)_+) of a tile and which of them are allowed.

    Query row i sits at key position n_k - n_q + i; the bias and the causal (sliding-window) mask are those of
    :func:`attnlab.site.position_bias` and :func:`attnlab.site.causal_mask`. q and k come in the inputs' dtype: the
    products of two bfloat16 or float16 numbers are exact in float32, where the dot accumulates, and on a GPU such a
    dot runs on tensor cores; float32 q and k take the IEEE dot, since TF32 would round the scores to 10 bits.
    """
    pos = rows + (n_k - n_q)
    distance = tl.maximum(pos[:, None] - cols[None, :], 0).to(tl.float32)
    z = (tl.dot(q, tl.trans(k), input_precision="ieee") * scale - slope * distance) * qs[:, None]
    allowed = (rows[:, None] < n_q) & (cols[None, :] < n_k)
    if CAUSAL:
        allowed = allowed & (cols[None, :] <= pos[:, None]) & (cols[None, :] > pos[:, None] - window)
    return z, allowed


@_jit
def _weights(z, allowed, row_max, theta, a, kpow, POWER: tl.constexpr):
    """(r^(k-1), r^k) for r = [x - theta]_+, x = a (z - max z), k = kpow; r^(k-1) is 0 off the support and at masked
    keys. POWER = k when k is an integer (products only, exact to rounding), else 0 (exp2 and log2)."""
    r = tl.where(allowed, tl.maximum(a * (z - row_max[:, None]) - theta[:, None], 0.0), 0.0)
    if POWER == 0:
        lower = tl.where(r > 0, tl.exp2((kpow - 1.0) * tl.log2(tl.where(r > 0, r, 1.0))), 0.0)
    else:
        lower = tl.where(r > 0, 1.0, 0.0)
        for _ in tl.static_range(POWER - 1):
            lower = lower * r
    return lower, lower * r


@_jit
def _newton(theta, lo, hi, f, d, kpow):
    """One safeguarded step of the threshold from f = sum r^k and d = sum r^(k-1) at theta.

    Far from the root (f > 9/8), Newton's step on g = ||r||_k - 1, which is convex and decreasing for k >= 1
    (alpha <= 2) and exactly linear when the support's entries are equal, so from theta = -1 its iterates rise to the
    root without overshoot in few sweeps (the row map's own iteration); near it, Newton's step on f, as safe (f is
    convex too) and free of powers of f, which the GPU's approximate exp2/log2 would blur once f - 1 nears eps.
    Halley's step would need sum r^(k-2), unbounded near the threshold for k < 2. A step leaving the bracket
    [lo, hi], as rounding may make it, becomes a bisection. A row is done once f is 1 to float32 precision (2^-21)
    or its step falls below theta's resolution (2^-22 |theta|); it then keeps the theta whose f was checked.
    """
    d = tl.where(d > 0, d, 1.0)  # rows past the last query have no keys
    above = f >= 1.0
    lo = tl.where(above, theta, lo)
    hi = tl.where(above, hi, theta)
    norm = tl.exp2(tl.log2(tl.maximum(f, 1.0)) / kpow)
    step = tl.where(f > 1.125, (norm - 1.0) * (f / norm) / d, (f - 1.0) / (kpow * d))
    new = theta + step
    new = tl.where((new >= lo) & (new <= hi), new, 0.5 * (lo + hi))
    done = (tl.abs(f - 1.0) <= 2.0**-21) | (tl.abs(step) <= 2.0**-22 * tl.abs(theta))
    return tl.where(done, theta, new), lo, hi, done


@_jit
def _key_range(q0, n_q, n_k, window, CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr):
    """Keys [lo, hi) that some query of the block starting at row q0 may attend."""
    if CAUSAL:
        first = q0 + n_k - n_q
        return tl.maximum(first - window + 1, 0), tl.minimum(first + BLOCK_Q, n_k)
    return 0, n_k


@_jit
def _row_max(
    q, K, k_base, rows, qs, slope, lo, hi, n_q, n_k, head_dim, window, scale,
    CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """max z over each row's allowed keys; NaN for a row holding a NaN score, which makes it a row without a finite
    maximum, NaN throughout as the row map's; 0 for rows past the last query (no keys), so no NaN reaches them."""
    dims = tl.arange(0, BLOCK_D)
    row_max = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    nan = tl.zeros([BLOCK_Q], tl.float32)
    for start in range(lo, hi, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        k = _load(K + k_base, cols, n_k, dims, head_dim, DOT)
        z, allowed = _scores(q, k, rows, cols, qs, slope, n_q, n_k, window, scale, CAUSAL)
        row_max = tl.maximum(row_max, tl.max(tl.where(allowed, z, float("-inf")), 1))
        nan = tl.maximum(nan, tl.max(tl.where(allowed & (z != z), 1.0, 0.0), 1))
    return tl.where(rows < n_q, tl.where(nan > 0, float("nan"), row_max), 0.0)


@_jit
def _threshold(
    q, K, k_base, rows, live, qs, slope, row_max, lo, hi, n_q, n_k, head_dim, window, scale, a, kpow, n_iter,
    CAUSAL: tl.constexpr, POWER: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    DOT: tl.constexpr,
):  # fmt: skip
    """theta of each row, by sweeps of ``_newton`` from theta = -1 until every ``live`` row of the block is done or
    ``n_iter`` sweeps have run."""
    dims = tl.arange(0, BLOCK_D)
    theta = tl.full([BLOCK_Q], -1.0, tl.float32)
    lo_t = theta
    hi_t = tl.zeros([BLOCK_Q], tl.float32)
    pending = tl.sum(live.to(tl.int32), 0)
    sweeps = 0
    while (sweeps < n_iter) & (pending > 0):
        f = tl.zeros([BLOCK_Q], tl.float32)
        d = tl.zeros([BLOCK_Q], tl.float32)
        for start in range(lo, hi, BLOCK_K):
            cols = start + tl.arange(0, BLOCK_K)
            k = _load(K + k_base, cols, n_k, dims, head_dim, DOT)
            z, allowed = _scores(q, k, rows, cols, qs, slope, n_q, n_k, window, scale, CAUSAL)
            lower, power = _weights(z, allowed, row_max, theta, a, kpow, POWER)
            f += tl.sum(power, 1)
            d += tl.sum(lower, 1)
        theta, lo_t, hi_t, done = _newton(theta, lo_t, hi_t, f, d, kpow)
        pending = tl.sum((live & ~done).to(tl.int32), 0)
        sweeps += 1
    return theta


@_jit
def _limit_rows(
    q, K, V, rows, qs, slope, limit, acc, norm, lo, hi, n_q, n_k, head_dim, value_dim, window, scale,
    CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """(acc, norm, nan) with the ``limit`` rows (maximum not finite) given the row map's value there: acc the sum of
    the values of their +inf keys, norm their count (1 where there is none: the row attends to nothing), and nan
    for the rows that hold a NaN score. It sums into acc itself, holding no second accumulator."""
    dims, dims_v = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV)
    acc = tl.where(limit[:, None], 0.0, acc)
    count = tl.zeros([BLOCK_Q], tl.float32)
    nan = tl.zeros([BLOCK_Q], tl.float32)
    for start in range(lo, hi, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        k = _load(K, cols, n_k, dims, head_dim, DOT)
        z, allowed = _scores(q, k, rows, cols, qs, slope, n_q, n_k, window, scale, CAUSAL)
        counted = limit[:, None] & allowed
        top = tl.where(counted & (z == float("inf")), 1.0, 0.0)
        v = _load(V, cols, n_k, dims_v, value_dim, DOT).to(tl.float32)
        acc += tl.dot(top, v, input_precision="ieee")
        count += tl.sum(top, 1)
        nan += tl.sum(tl.where(counted & (z != z), 1.0, 0.0), 1)
    return acc, tl.where(limit, tl.where(count > 0, count, 1.0), norm), nan > 0


@_jit
def _limit_dv(
    Q, DO, ROW_MAX, THETA, NORM, QSCALE, k, cols, bh, slope, dv, lo, hi, n_q, n_k, head_dim, value_dim, window,
    scale, CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    DOT: tl.constexpr,
):  # fmt: skip
    """dv plus the terms of query head bh's limit rows (maximum not finite), to which the plain sweep gave no weight:
    1 / norm at each of their +inf keys, NaN throughout a row whose theta is NaN (it holds a NaN score)."""
    dims, dims_v = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV)
    for start in range(lo, hi, BLOCK_Q):
        rows = start + tl.arange(0, BLOCK_Q)
        q = _load(Q + bh * n_q * head_dim, rows, n_q, dims, head_dim, DOT)
        do = _load(DO + bh * n_q * value_dim, rows, n_q, dims_v, value_dim, DOT)
        row_max, theta, norm, qs = _row_stats(ROW_MAX, THETA, NORM, QSCALE, bh * n_q + rows, rows < n_q)
        z, allowed = _scores(q, k, rows, cols, qs, slope, n_q, n_k, window, scale, CAUSAL)
        limit = ~(tl.abs(row_max) < float("inf"))
        top = tl.where(limit[:, None] & allowed & (z == float("inf")), 1.0, 0.0)
        share = tl.where(theta == theta, 1.0, float("nan")) / norm
        p = tl.where(limit[:, None], share[:, None] * top, 0.0)
        dv += tl.dot(tl.trans(p), do.to(tl.float32), input_precision="ieee")
    return dv


@_jit
def entmax_forward(
    Q, K, V, O, SLOPES, QSCALE, ROW_MAX, THETA, NORM, FLAGS,
    n_heads, group, n_q, n_k, head_dim, value_dim, window, scale, a, kpow, n_iter,
    CAUSAL: tl.constexpr, POWER: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """One block of queries of one (batch, head): row maxima, thresholds, then the output and each row's sum of r^k,
    by which the output is divided so that the weights sum to 1 to rounding whatever the threshold's residual."""
    bh = tl.program_id(1).to(tl.int64)
    kv = (bh // n_heads) * (n_heads // group) + (bh % n_heads) // group
    q0 = tl.program_id(0) * BLOCK_Q
    rows = q0 + tl.arange(0, BLOCK_Q)
    k_base, v_base = kv * n_k * head_dim, kv * n_k * value_dim
    dims, dims_v = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV)
    q = _load(Q + bh * n_q * head_dim, rows, n_q, dims, head_dim, DOT)
    qs = tl.load(QSCALE + bh * n_q + rows, mask=rows < n_q, other=0.0)
    slope = tl.load(SLOPES + bh % n_heads)
    lo, hi = _key_range(q0, n_q, n_k, window, CAUSAL, BLOCK_Q)
    row_max = _row_max(
        q, K, k_base, rows, qs, slope, lo, hi, n_q, n_k, head_dim, window, scale, CAUSAL, BLOCK_Q, BLOCK_K, BLOCK_D, DOT
    )
    limit = (rows < n_q) & ~(tl.abs(row_max) < float("inf"))  # a +inf score, or every allowed one -inf
    live = (rows < n_q) & ~limit
    theta = _threshold(
        q, K, k_base, rows, live, qs, slope, row_max, lo, hi, n_q, n_k, head_dim, window, scale, a, kpow, n_iter,
        CAUSAL, POWER, BLOCK_Q, BLOCK_K, BLOCK_D, DOT,
    )  # fmt: skip
    acc = tl.zeros([BLOCK_Q, BLOCK_DV], tl.float32)
    norm = tl.zeros([BLOCK_Q], tl.float32)
    for start in range(lo, hi, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        k = _load(K + k_base, cols, n_k, dims, head_dim, DOT)
        z, allowed = _scores(q, k, rows, cols, qs, slope, n_q, n_k, window, scale, CAUSAL)
        _, power = _weights(z, allowed, row_max, theta, a, kpow, POWER)
        v = _load(V + v_base, cols, n_k, dims_v, value_dim, DOT).to(tl.float32)
        acc += tl.dot(power, v, input_precision="ieee")
        norm += tl.sum(power, 1)
    norm = tl.where(rows < n_q, norm, 1.0)
    if tl.max(limit.to(tl.int32), 0) > 0:
        # rare, and outside the sweeps above: the row map's value at rows whose maximum is not finite
        acc, norm, nan = _limit_rows(
            q, K + k_base, V + v_base, rows, qs, slope, limit, acc, norm, lo, hi, n_q, n_k, head_dim, value_dim,
            window, scale, CAUSAL, BLOCK_Q, BLOCK_K, BLOCK_D, BLOCK_DV, DOT,
        )  # fmt: skip
        # a NaN row's output is NaN; its theta (which no sweep reads there: r = 0) tells the backward
        acc = tl.where(nan[:, None], float("nan"), acc)
        theta = tl.where(nan, float("nan"), theta)
        tl.store(FLAGS + bh, 1)  # the backward's cue; every program that writes it writes 1
    out = acc / norm[:, None]
    mask = (rows[:, None] < n_q) & (dims_v[None, :] < value_dim)
    tl.store(O + bh * n_q * value_dim + rows[:, None] * value_dim + dims_v[None, :], out.to(O.dtype.element_ty), mask)
    stats = bh * n_q + rows
    tl.store(ROW_MAX + stats, row_max, mask=rows < n_q)
    tl.store(THETA + stats, theta, mask=rows < n_q)
    tl.store(NORM + stats, norm, mask=rows < n_q)


@_jit
def _row_stats(ROW_MAX, THETA, NORM, QSCALE, stats, valid):
    """A row's maximum, theta, sum of r^k and query scale; neutral values past the last query."""
    row_max = tl.load(ROW_MAX + stats, mask=valid, other=0.0)
    theta = tl.load(THETA + stats, mask=valid, other=-1.0)
    norm = tl.load(NORM + stats, mask=valid, other=1.0)
    qs = tl.load(QSCALE + stats, mask=valid, other=0.0)
    return row_max, theta, norm, qs


@_jit
def _dq_tile(
    q, do, K, V, cols, rows, dims, dims_v, qs, slope, row_max, theta, a, kpow,
    n_q, n_k, head_dim, value_dim, window, scale,
    CAUSAL: tl.constexpr, POWER: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """What both sweeps of ``entmax_backward_dq`` read of one block of keys: s (see there), dp = dout . v, the keys."""
    k = _load(K, cols, n_k, dims, head_dim, DOT)
    z, allowed = _scores(q, k, rows, cols, qs, slope, n_q, n_k, window, scale, CAUSAL)
    s, _ = _weights(z, allowed, row_max, theta, a, kpow, POWER)
    dp = tl.dot(do, tl.trans(_load(V, cols, n_k, dims_v, value_dim, DOT)), input_precision="ieee")
    return s, dp, k


@_jit
def entmax_backward_dq(
    Q, K, V, DO, DQ, SLOPES, QSCALE, ROW_MAX, THETA, NORM, FLAGS, DELTA,
    n_heads, group, n_q, n_k, head_dim, value_dim, window, scale, a, kpow,
    CAUSAL: tl.constexpr, POWER: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """dq of one block of queries, and each row's delta = sum_j s_j dp_j / sum_j s_j, which dk needs too.

    The Jacobian of alpha-entmax is diag(s) - s s^T / sum s with s = p^(2 - alpha) on the support (Peters et al.
    2019, cited in Vasylenko et al. 2025 App. A), so dz = s (dp - delta) with dp_j = dout . v_j. With p = r^k / f,
    s = r^(k-1) f^(alpha - 2); delta does not depend on the common factor, so the first sweep sums r^(k-1) alone.
    Two sweeps rather than one accumulating sum s dp k and sum s k: dq would be their difference, which cancels.
    """
    bh = tl.program_id(1).to(tl.int64)
    kv = (bh // n_heads) * (n_heads // group) + (bh % n_heads) // group
    q0 = tl.program_id(0) * BLOCK_Q
    rows = q0 + tl.arange(0, BLOCK_Q)
    dims, dims_v = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV)
    k_base, v_base = kv * n_k * head_dim, kv * n_k * value_dim
    q = _load(Q + bh * n_q * head_dim, rows, n_q, dims, head_dim, DOT)
    do = _load(DO + bh * n_q * value_dim, rows, n_q, dims_v, value_dim, DOT)
    row_max, theta, norm, qs = _row_stats(ROW_MAX, THETA, NORM, QSCALE, bh * n_q + rows, rows < n_q)
    slope = tl.load(SLOPES + bh % n_heads)
    lo, hi = _key_range(q0, n_q, n_k, window, CAUSAL, BLOCK_Q)
    s_sum = tl.zeros([BLOCK_Q], tl.float32)
    s_dp = tl.zeros([BLOCK_Q], tl.float32)
    for start in range(lo, hi, BLOCK_K):
        s, dp, k = _dq_tile(
            q, do, K + k_base, V + v_base, start + tl.arange(0, BLOCK_K), rows, dims, dims_v, qs, slope, row_max,
            theta, a, kpow, n_q, n_k, head_dim, value_dim, window, scale, CAUSAL, POWER, DOT,
        )  # fmt: skip
        s_sum += tl.sum(s, 1)
        s_dp += tl.sum(s * dp, 1)
    delta = s_dp / tl.where(s_sum > 0, s_sum, 1.0)
    tl.store(DELTA + bh * n_q + rows, delta, mask=rows < n_q)
    dq = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)
    for start in range(lo, hi, BLOCK_K):
        s, dp, k = _dq_tile(
            q, do, K + k_base, V + v_base, start + tl.arange(0, BLOCK_K), rows, dims, dims_v, qs, slope, row_max,
            theta, a, kpow, n_q, n_k, head_dim, value_dim, window, scale, CAUSAL, POWER, DOT,
        )  # fmt: skip
        dq += tl.dot(s * (dp - delta[:, None]), k.to(tl.float32), input_precision="ieee")
    dq = dq * (qs * scale * tl.exp2((a - 1.0) * tl.log2(norm)))[:, None]
    mask = (rows[:, None] < n_q) & (dims[None, :] < head_dim)
    tl.store(DQ + bh * n_q * head_dim + rows[:, None] * head_dim + dims[None, :], dq.to(DQ.dtype.element_ty), mask)


@_jit
def _query_range(k0, n_q, n_k, window, CAUSAL: tl.constexpr, BLOCK_K: tl.constexpr):
    """Queries [lo, hi) that may attend some key of the block starting at key k0."""
    if CAUSAL:
        offset = n_k - n_q
        return tl.maximum(k0 - offset, 0), tl.minimum(k0 + BLOCK_K - 1 + window - offset, n_q)
    return 0, n_q


@_jit
def entmax_backward_dkdv(
    Q, K, V, DO, DK, DV, SLOPES, QSCALE, ROW_MAX, THETA, NORM, FLAGS, DELTA,
    n_heads, group, n_q, n_k, head_dim, value_dim, window, scale, a, kpow,
    CAUSAL: tl.constexpr, POWER: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """dk and dv of one block of keys of one kv head, summed over the query heads that share it (grouped-query
    attention) inside the program: no atomics, and the sums come out the same on every run."""
    kv = tl.program_id(1).to(tl.int64)
    n_kv = n_heads // group
    k0 = tl.program_id(0) * BLOCK_K
    cols = k0 + tl.arange(0, BLOCK_K)
    dims, dims_v = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV)
    k = _load(K + kv * n_k * head_dim, cols, n_k, dims, head_dim, DOT)
    v = _load(V + kv * n_k * value_dim, cols, n_k, dims_v, value_dim, DOT)
    dk = tl.zeros([BLOCK_K, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_K, BLOCK_DV], tl.float32)
    lo, hi = _query_range(k0, n_q, n_k, window, CAUSAL, BLOCK_K)
    for g in range(group):
        bh = (kv // n_kv) * n_heads + (kv % n_kv) * group + g
        slope = tl.load(SLOPES + bh % n_heads)
        for start in range(lo, hi, BLOCK_Q):
            rows = start + tl.arange(0, BLOCK_Q)
            q = _load(Q + bh * n_q * head_dim, rows, n_q, dims, head_dim, DOT)
            do = _load(DO + bh * n_q * value_dim, rows, n_q, dims_v, value_dim, DOT)
            row_max, theta, norm, qs = _row_stats(ROW_MAX, THETA, NORM, QSCALE, bh * n_q + rows, rows < n_q)
            delta = tl.load(DELTA + bh * n_q + rows, mask=rows < n_q, other=0.0)
            z, allowed = _scores(q, k, rows, cols, qs, slope, n_q, n_k, window, scale, CAUSAL)
            s, power = _weights(z, allowed, row_max, theta, a, kpow, POWER)
            dv += tl.dot(tl.trans(power / norm[:, None]), do.to(tl.float32), input_precision="ieee")
            dp = tl.dot(do, tl.trans(v), input_precision="ieee")
            dz = s * (dp - delta[:, None]) * (qs * scale * tl.exp2((a - 1.0) * tl.log2(norm)))[:, None]
            dk += tl.dot(tl.trans(dz), q.to(tl.float32), input_precision="ieee")
    mask = (cols[:, None] < n_k) & (dims[None, :] < head_dim)
    tl.store(DK + kv * n_k * head_dim + cols[:, None] * head_dim + dims[None, :], dk.to(DK.dtype.element_ty), mask)
    for g in range(group):
        bh = (kv // n_kv) * n_heads + (kv % n_kv) * group + g
        if tl.load(FLAGS + bh) != 0:
            # rare: a row of this head has no finite maximum, to which the sweep above gave no weight (s = r^k = 0);
            # apart from it, and after dk is stored, so that the sweep every other head runs is the plain one
            dv = _limit_dv(
                Q, DO, ROW_MAX, THETA, NORM, QSCALE, k, cols, bh, tl.load(SLOPES + bh % n_heads), dv, lo, hi, n_q, n_k,
                head_dim, value_dim, window, scale, CAUSAL, BLOCK_Q, BLOCK_D, BLOCK_DV, DOT,
            )  # fmt: skip
    mask_v = (cols[:, None] < n_k) & (dims_v[None, :] < value_dim)
    tl.store(
        DV + kv * n_k * value_dim + cols[:, None] * value_dim + dims_v[None, :], dv.to(DV.dtype.element_ty), mask_v
    )
