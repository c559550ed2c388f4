"""Fused alpha-entmax attention in Triton: a forward and a recomputing backward that never form (queries x keys).

    >>> out = entmax_attention(q, k, v, alpha=1.5, slopes=alibi_slopes, window=512)

alpha-entmax (Vasylenko et al. 2025 §2.2, App. A) gives each allowed key the weight
p_j = [(alpha - 1) z_j - tau]_+^(1 / (alpha - 1)), tau such that the row sums to 1, for 1 < alpha <= 2 (alpha = 2 is
sparsemax). In the manner of AdaSplash (Gonçalves et al., the Triton alpha-entmax flash attention), each block of
queries finds its thresholds by safeguarded Newton sweeps over its key blocks, then sweeps once more for the output;
the backward recomputes the weights from three saved numbers per row (``attnlab.site.triton.entmax_kernels`` has
the iteration). The weights are those of ``attnlab.rowmaps.get("entmax_a1.5")`` (or ``entmax_a{alpha}``) on the
scores below, to float32 rounding.

The conventions are those of :func:`attnlab.site.blockwise`:

- scores z = query_scale * (scale q.k - m_h (i - j)_+): ``slopes`` m_h (one per query head; ALiBi, NAPE with zero
  slopes on its NoPE heads, Vasylenko et al. 2025 §4.2) enter as :func:`attnlab.site.position_bias`, and
  ``query_scale`` (batch, heads, queries) multiplies the whole row, as ASEntmax's delta + beta (log n)^gamma
  (Vasylenko et al. 2025 §4.1, eq. 8-9) or the site's learnable ``Scores.scale``;
- query i sits at key position K - Q + i (the last Q of the K positions);
- ``causal``: query i attends the keys j <= K - Q + i; with ``window`` only the last ``window`` of them,
  j > K - Q + i - window, as :func:`attnlab.site.causal_mask`; without ``causal`` every key is allowed (and
  ``window`` is refused);
- grouped-query attention: query head h reads kv head h // (Hq // Hkv).

Inputs are float32, bfloat16 or float16; every product, sum and weight is float32 (a product of two bfloat16 or
float16 inputs is exact in it, so q.k and dout.v take tensor cores), and the output and gradients have the input
dtype. Gradients reach q, k and v only: ``slopes`` and ``query_scale`` must not require grad (detach them), and
alpha is a number. Under Triton's interpreter (TRITON_INTERPRET=1 set before this module is imported) the kernels
run on CPU tensors; otherwise the tensors must be on a GPU.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch.autograd.function import once_differentiable

from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.site.triton import entmax_kernels as kernels
from attnlab.site.triton.relu_sigmoid_kernels import mma_dtype

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# A cap on the threshold sweeps: a block of rows is done after 2-7 (measured, the last one confirming), and stops then.
N_ITER = 30
MIN_BLOCK = 16  # tl.dot's smallest tile side on GPUs


@dataclass(frozen=True)
class _Launch:
    """What a call fixes besides its tensors; the backward launches with the forward's."""

    alpha: float
    scale: float
    causal: bool
    window: int | None
    n_iter: int
    block_q: int
    block_k: int


def entmax_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    alpha: float = 1.5,
    scale: float | None = None,
    causal: bool = True,
    window: int | None = None,
    slopes: torch.Tensor | None = None,
    query_scale: torch.Tensor | None = None,
    n_iter: int = N_ITER,
    block_q: int = 64,
    block_k: int = 64,
) -> torch.Tensor:
    """alpha-entmax attention output (B, Hq, Q, Dv) of q (B, Hq, Q, D), k (B, Hkv, K, D), v (B, Hkv, K, Dv).

    ``scale`` defaults to 1 / sqrt(D); ``n_iter`` caps the threshold sweeps; ``block_q`` and ``block_k`` are the
    tile sides (powers of two, at least 16). The module doc gives the mask, bias and alignment conventions.
    """
    _check_tensors(q, k, v)
    b, hq, n_q, d = q.shape
    if causal is not True and causal is not False:
        raise ArgumentTypeError(f"causal must be True or False, got {causal!r}")
    if causal and n_q > k.shape[2]:
        raise ArgumentError(f"causal attention needs at least as many keys as queries, got {k.shape[2]} for {n_q}")
    launch = _Launch(
        _alpha(alpha),
        1.0 / math.sqrt(d) if scale is None else _scale(scale),
        causal,
        _window(window, causal),
        _positive_int("n_iter", n_iter),
        _block("block_q", block_q),
        _block("block_k", block_k),
    )
    slopes = _side_input("slopes", slopes, (hq,), q, "(Hq,), one per query head")
    query_scale = _side_input("query_scale", query_scale, (b, hq, n_q), q, "(B, Hq, Q) or broadcastable to it")
    out = _EntmaxAttention.apply(  # type: ignore[no-untyped-call]  # torch leaves Function.apply unannotated
        q.contiguous(), k.contiguous(), v.contiguous(), slopes, query_scale, launch
    )
    return cast(torch.Tensor, out)


def _check_tensors(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """TypeError/ValueError naming what is wrong with q, k, v, before a kernel reads them."""
    if kernels.triton is None:
        raise ModuleNotFoundError("entmax_attention needs triton: pip install triton")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dtype not in DTYPES:
            got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
            raise ArgumentTypeError(f"{name} must be a float32, bfloat16 or float16 tensor, got {got}")
    if len({q.dtype, k.dtype, v.dtype}) > 1 or len({q.device, k.device, v.device}) > 1:
        raise ArgumentTypeError(
            f"q, k and v must share dtype and device, got {q.dtype}/{q.device}, {k.dtype}/{k.device}, "
            f"{v.dtype}/{v.device}"
        )
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or 0 in (*q.shape, *k.shape, *v.shape):
        raise ArgumentError(
            f"q, k, v must be non-empty (B, H, tokens, head_dim) tensors, got shapes {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if k.shape[:3] != v.shape[:3] or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ArgumentError(
            f"q (B, Hq, Q, D), k (B, Hkv, K, D) and v (B, Hkv, K, Dv) disagree: {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[1] % k.shape[1]:
        raise ArgumentError(f"query heads ({q.shape[1]}) must be a multiple of kv heads ({k.shape[1]})")
    if q.device.type != "cuda" and not kernels.INTERPRETED:
        raise ArgumentError(
            f"entmax_attention runs on CUDA tensors, got {q.device}; set TRITON_INTERPRET=1 before importing "
            "attnlab.site.triton.entmax to run it on the CPU"
        )


def _alpha(alpha: object) -> float:
    # typeshed's numbers.Real declares < and <= only, so mypy refuses 1 < alpha (and scale > 0 below)
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 1 < alpha <= 2:  # type: ignore[operator]
        raise ArgumentError(f"alpha must be a number in (1, 2] (2 is sparsemax), got {alpha!r}")
    return float(alpha)


def _scale(scale: object) -> float:
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not (math.isfinite(scale) and scale > 0):  # type: ignore[operator]
        raise ArgumentError(f"scale must be a finite number > 0 or None (1 / sqrt(head_dim)), got {scale!r}")
    return float(scale)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"{name} must be an int >= 1, got {value!r}")
    return value


def _window(window: object, causal: bool) -> int | None:
    if window is None:
        return None
    if not causal:
        raise ArgumentError("window is a sliding causal window: it needs causal=True")
    return _positive_int("window", window)


def _block(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_BLOCK or value & (value - 1):
        raise ArgumentError(f"{name} must be a power of two >= {MIN_BLOCK}, got {value!r}")
    return value


def _side_input(
    name: str, t: torch.Tensor | None, shape: tuple[int, ...], q: torch.Tensor, wanted: str
) -> torch.Tensor:
    """``slopes`` or ``query_scale`` as a contiguous float32 tensor of ``shape``: zeros (no bias) or ones (no
    scale) when None, so that the kernels have one path."""
    if t is None:
        fill = 0.0 if name == "slopes" else 1.0
        return torch.full(shape, fill, dtype=torch.float32, device=q.device)
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
        raise ArgumentTypeError(f"{name} must be a floating tensor, got {got}")
    if t.device != q.device:
        raise ArgumentTypeError(f"{name} is on {t.device}, q on {q.device}: they must share a device")
    if t.requires_grad and torch.is_grad_enabled():
        raise ArgumentError(
            f"{name} requires grad, but the kernel gives gradients for q, k, v only: pass {name}.detach()"
        )
    try:
        fits = torch.broadcast_shapes(t.shape, shape) == shape and (name != "slopes" or t.shape == shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise ArgumentError(f"{name} must be {wanted}, got shape {tuple(t.shape)}")
    return t.to(torch.float32).expand(shape).contiguous()


def _power(alpha: float) -> int:
    """k = 1 / (alpha - 1) when it is a small integer (the kernels then take products, not exp2/log2), else 0."""
    k = 1.0 / (alpha - 1.0)
    return round(k) if abs(k - round(k)) < 1e-9 and round(k) <= 8 else 0


def _sizes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, launch: _Launch) -> dict[str, Any]:
    """The scalar and compile-time arguments every kernel takes."""
    n_k = k.shape[2]
    return {
        "n_heads": q.shape[1],
        "group": q.shape[1] // k.shape[1],
        "n_q": q.shape[2],
        "n_k": n_k,
        "head_dim": q.shape[3],
        "value_dim": v.shape[3],
        # a window of K keys excludes nothing: one masking path for windowed and plain causal rows
        "window": launch.window or n_k,
        "scale": launch.scale,
        "a": launch.alpha - 1.0,
        "kpow": 1.0 / (launch.alpha - 1.0),
        "CAUSAL": launch.causal,
        "POWER": _power(launch.alpha),
        "BLOCK_Q": launch.block_q,
        "BLOCK_K": launch.block_k,
        "BLOCK_D": _tile_side(q.shape[3]),
        "BLOCK_DV": _tile_side(v.shape[3]),
        "DOT": mma_dtype(q.dtype),
    }


def _tile_side(dim: int) -> int:
    """The power of two >= dim (tl.arange's length) and >= MIN_BLOCK."""
    return max(MIN_BLOCK, 1 << (dim - 1).bit_length())


def _launching() -> contextlib.AbstractContextManager[None]:
    return kernels.interpreter_loop_bounds() if kernels.INTERPRETED else contextlib.nullcontext()


def _forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slopes: torch.Tensor, query_scale: torch.Tensor, launch: _Launch
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Output and what the backward recomputes the weights from: the per-row (maximum, theta, sum of r^k) and a
    flag per (batch, head), 1 where a row's maximum is not finite (``entmax_kernels`` says how such rows go)."""
    b, hq, n_q, _ = q.shape
    out = q.new_empty(b, hq, n_q, v.shape[3])
    rows = [torch.empty(b * hq * n_q, dtype=torch.float32, device=q.device) for _ in range(3)]
    rows.append(torch.zeros(b * hq, dtype=torch.int32, device=q.device))
    grid = (-(-n_q // launch.block_q), b * hq)
    with _launching():
        kernels.entmax_forward[grid](
            q, k, v, out, slopes, query_scale, *rows, n_iter=launch.n_iter, **_sizes(q, k, v, launch)
        )
    return out, rows


def _backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    slopes: torch.Tensor,
    query_scale: torch.Tensor,
    rows: list[torch.Tensor],
    launch: _Launch,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv: the dq kernel first, since it leaves each row's delta for the dk/dv kernel."""
    b, hq, n_q, _ = q.shape
    sizes = _sizes(q, k, v, launch)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    delta = torch.empty(b * hq * n_q, dtype=torch.float32, device=q.device)
    common = (slopes, query_scale, *rows, delta)
    with _launching():
        kernels.entmax_backward_dq[(-(-n_q // launch.block_q), b * hq)](q, k, v, dout, dq, *common, **sizes)
        grid = (-(-k.shape[2] // launch.block_k), b * k.shape[1])
        kernels.entmax_backward_dkdv[grid](q, k, v, dout, dk, dv, *common, **sizes)
    return dq, dk, dv


class _EntmaxAttention(torch.autograd.Function):
    """q, k, v -> output; saves the inputs, three float32 numbers per query row and a flag per (batch, head), no
    (queries x keys) tensor."""

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        slopes: torch.Tensor,
        query_scale: torch.Tensor,
        launch: _Launch,
    ) -> torch.Tensor:
        out, rows = _forward(q, k, v, slopes, query_scale, launch)
        ctx.save_for_backward(q, k, v, slopes, query_scale, *rows)
        ctx.launch = launch
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None, None, None]:
        q, k, v, slopes, query_scale, *rows = ctx.saved_tensors
        dq, dk, dv = _backward(dout.contiguous(), q, k, v, slopes, query_scale, rows, ctx.launch)
        return dq, dk, dv, None, None, None
