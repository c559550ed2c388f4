"""The row maps' compiled kernels (``_kernels.c``): alpha-entmax for alpha in {2, 1.5, 1.25} and
normalized ReLU^p for p a power of two up to 16, forward and backward, and normalized sigmoid's backward,
on CPU float32/float64 rows. ``attnlab.native`` builds, caches and loads the library; this module declares
these entry points and wraps them as tensor functions. Every caller falls back to its torch-ops path
wherever the library is missing.

Why a kernel: the torch-ops paths read every row several times in separate passes (alpha-entmax 4-8,
ReLU^16 about 9), each a full trip through memory, and pay PyTorch's per-op cost on one number per row
(measured here: alpha-entmax forward+backward 3.6-7.5x softmax's at 1024-65536 keys). The kernels work
on one row at a time while it is in cache (benchmarks/rowmaps.py has the figures).
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch

from attnlab import native
from attnlab.native import status

_TYPES = {torch.float32: "f32", torch.float64: "f64"}
_P, _N = ctypes.c_void_p, ctypes.c_int64


class Kernel:
    """The library's row-map entry points, as tensor functions."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        _I, _D = ctypes.c_int, ctypes.c_double
        signatures = {
            "entmax_{}_forward": ([_P, _P, _P, _P, _N, _N, _I, _D, _D, _I], _I),
            "entmax_{}_backward": ([_P, _P, _P, _N, _N, _I], None),
            "relu_power_{}_forward": ([_P, _P, _P, _P, _N, _N, _I, _D, _D, _I], None),
            "relu_power_{}_backward": ([_P, _P, _P, _P, _P, _N, _N, _D, _D, _I], None),
            "sigmoid_{}_backward": ([_P, _P, _P, _P, _N, _N, _I], None),
        }
        for tag in _TYPES.values():
            for name, (args, result) in signatures.items():
                fn = getattr(lib, name.format(tag))
                fn.argtypes, fn.restype = args, result
        self.lib = lib

    def _fn(self, name: str, t: torch.Tensor) -> Any:
        return getattr(self.lib, name.format(_TYPES[t.dtype]))

    def forward(
        self, z: torch.Tensor, m: torch.Tensor, k: int, a: float, floor: float, need_s: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """alpha-entmax weights p of contiguous CPU rows z with maxima m (a = alpha - 1, k = 1/a in
        {1, 2, 4}) and, when ``need_s``, s = p^(2-alpha) for the backward."""
        n = z.shape[-1]
        p = torch.empty_like(z)
        s = torch.empty_like(z) if need_s else None
        failed = self._fn("entmax_{}_forward", z)(
            z.data_ptr(),
            m.data_ptr(),
            p.data_ptr(),
            None if s is None else s.data_ptr(),
            z.numel() // n,
            n,
            k,
            a,
            floor,
            torch.get_num_threads(),
        )
        if failed:
            raise MemoryError(f"the entmax kernel could not allocate its {n}-key scratch row")
        return p, s

    def backward(self, s: torch.Tensor, dp: torch.Tensor) -> torch.Tensor:
        """dz = s * (dp - <s, dp> / sum s) for contiguous CPU rows of one dtype."""
        n = s.shape[-1]
        dz = torch.empty_like(s)
        self._fn("entmax_{}_backward", s)(
            s.data_ptr(), dp.data_ptr(), dz.data_ptr(), s.numel() // n, n, torch.get_num_threads()
        )
        return dz

    def relu_power_forward(
        self, z: torch.Tensor, rmax: torch.Tensor, p: int, b: float, floor: float, keep_q: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Normalized ReLU^p of contiguous CPU rows z divided by their r_max (one per row, > 0), p a power of
        two up to 16, and, when ``keep_q``, q = [(z + b) / r_max]_+ for the backward."""
        n = z.shape[-1]
        y = torch.empty_like(z)
        q = torch.empty_like(z) if keep_q else None
        self._fn("relu_power_{}_forward", z)(
            z.data_ptr(),
            rmax.data_ptr(),
            y.data_ptr(),
            None if q is None else q.data_ptr(),
            z.numel() // n,
            n,
            p.bit_length() - 1,
            b,
            floor,
            torch.get_num_threads(),
        )
        return y, q

    def relu_power_backward(
        self, y: torch.Tensor, q: torch.Tensor, rmax: torch.Tensor, dy: torch.Tensor, p: float, floor: float
    ) -> torch.Tensor:
        """dz = (p / r_max) y (dy - <dy, y>) / max(q, floor) for contiguous CPU rows of one dtype."""
        n = y.shape[-1]
        dz = torch.empty_like(y)
        self._fn("relu_power_{}_backward", y)(
            y.data_ptr(),
            q.data_ptr(),
            rmax.data_ptr(),
            dy.data_ptr(),
            dz.data_ptr(),
            y.numel() // n,
            n,
            p,
            floor,
            torch.get_num_threads(),
        )
        return dz

    def sigmoid_backward(self, y: torch.Tensor, total: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        """du = y (1 - y S) (dy - <dy, y>) for normalized sigmoid rows y with sums of sigma S."""
        n = y.shape[-1]
        du = torch.empty_like(y)
        self._fn("sigmoid_{}_backward", y)(
            y.data_ptr(), total.data_ptr(), dy.data_ptr(), du.data_ptr(), y.numel() // n, n, torch.get_num_threads()
        )
        return du


def for_rows(*tensors: torch.Tensor) -> Kernel | None:
    """The loaded kernel if it can take these tensors (CPU, float32 or float64, one dtype, contiguous),
    else None: the caller then takes its torch-ops path."""
    return get() if native.fits(tensors, _TYPES) else None


get = native.binding(Kernel)


__all__ = ["Kernel", "for_rows", "get", "status"]
