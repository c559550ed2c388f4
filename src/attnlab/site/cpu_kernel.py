"""The site's fused attention kernel (``_site.c``): causal attention in which every head has the same row map,
alpha-entmax with alpha in {2, 1.5, 1.25}, normalized ReLU^p with p a power of two up to 16 (dead rows
zero), normalized sigmoid or softmax (the site sends it softmax with a position bias), on CPU float32,
forward only, with an optional ALiBi/NAPE position bias and a multiplier per query row (a learnable
scale, a length multiplier). ``attnlab.native`` builds and loads the library; :func:`forward` returns
False wherever the kernel does not apply and the site then takes its torch-ops path.

Why a kernel: the torch-ops fused path writes every tile of scores to memory and reads it back once per
operation (product, bias, mask, maximum, map, product), and at 65,536 keys a tile does not fit in any
cache. The kernel keeps a block's scores in the cache, runs the map on each row while it is there, and
skips keys that no row weights in the weights-value product (most keys, for alpha-entmax).
"""

from __future__ import annotations

import ctypes
import math

import torch
import torch.nn.functional as F

from attnlab import native
from attnlab.rowmaps import RowMap
from attnlab.rowmaps._rows import denormal_floor
from attnlab.rowmaps.entmax import FAST_K

KEY_TILE = 16  # keys per packed tile; _site.c's KT
ROWS = 32  # query rows per task: 32 rows x 65,536 keys of float32 scores is 8 MiB, within the shared L3
_ENTMAX, _RELU, _SIGMOID, _SOFTMAX = 0, 1, 2, 3


class Kernel:
    """The library's fused attention entry point."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        P, N, I, D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double
        fn = lib.site_f32_forward
        fn.argtypes = [P, P, P, P, N, N, N, N, N, N, P, P, I, I, I, D, D, D, N, I]
        fn.restype = I
        self.fn = fn


get = native.binding(Kernel)


def map_spec(rowmap: object, n_keys: int) -> tuple[int, int, int, float, float, float] | None:
    """(map, k, squarings, a, b, floor) for the kernel, or None for a map it does not compute. ``rowmap`` is a
    :class:`RowMap` or the string "softmax"."""
    if rowmap == "softmax":
        return _SOFTMAX, 0, 0, 0.0, 0.0, 0.0
    if not isinstance(rowmap, RowMap):
        return None
    params = rowmap.params
    if rowmap.family == "entmax":
        alpha = params["alpha"]
        k = 1.0 / (alpha - 1.0) if alpha > 1 else 0.0
        if k not in FAST_K:  # the k whose Newton iteration the row-map kernel compiles
            return None
        return _ENTMAX, int(k), 0, alpha - 1.0, 0.0, denormal_floor(k, n_keys, torch.float32)
    if rowmap.family == "relu_p" and params.get("dead") == "zeros" and params.get("b") is not None:
        p = params["p"]
        if p not in (1.0, 2.0, 4.0, 8.0, 16.0):
            return None
        return _RELU, 0, int(p).bit_length() - 1, 0.0, float(params["b"]), denormal_floor(p, n_keys, torch.float32)
    if rowmap.family == "sigmoid" and params.get("b") is not None:
        return _SIGMOID, 0, 0, 0.0, float(params["b"]), 0.0
    return None


def forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    *,
    scaling: float,
    window: int | None,
    rowmap: object,
    slopes: torch.Tensor | None,
    rowmul: torch.Tensor | None,
) -> bool:
    """Write causal attention into ``out`` (batch, queries, heads, head_dim) and return True, or return False
    (``out`` untouched or partly written) where the kernel does not apply: no library, not CPU float32, a
    map it does not compute, or input it leaves to the torch path (non-finite values, a sigmoid row whose
    sigma underflows). query (batch, heads, queries, head_dim); key and value (batch, heads, keys, head_dim),
    grouped heads already repeated; ``rowmul`` (batch x heads, queries) multiplies each row's scores after
    the position bias."""
    kernel = get()
    tensors = (query, key, value, out) + tuple(t for t in (slopes, rowmul) if t is not None)
    if kernel is None or any(t.dtype != torch.float32 or t.device.type != "cpu" for t in tensors):
        return False
    bsz, heads, n_q, d = query.shape
    n_k = key.shape[2]
    spec = map_spec(rowmap, n_k)
    if spec is None or not out.is_contiguous():
        return False
    q = (query * scaling).contiguous()
    tiles = math.ceil(n_k / KEY_TILE)
    packed = F.pad(key, (0, 0, 0, tiles * KEY_TILE - n_k)).reshape(bsz * heads, tiles, KEY_TILE, d)
    packed = packed.transpose(-1, -2).contiguous()
    v = value.contiguous()
    slopes = None if slopes is None else slopes.contiguous()
    rowmul = None if rowmul is None else rowmul.contiguous()
    if not all(bool(torch.isfinite(t).all()) for t in (q, packed, v, slopes, rowmul) if t is not None):
        return False
    status: int = kernel.fn(
        q.data_ptr(),
        packed.data_ptr(),
        v.data_ptr(),
        out.data_ptr(),
        bsz * heads,
        heads,
        n_q,
        n_k,
        d,
        window or 0,
        None if slopes is None else slopes.data_ptr(),
        None if rowmul is None else rowmul.data_ptr(),
        *spec,
        ROWS,
        torch.get_num_threads(),
    )
    return status == 0
