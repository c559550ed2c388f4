"""The diagnostics bundle of ``row_stats`` (``_rows.c``), compiled: every per-row basic that ``rows.py``
would compute in some 40 torch passes, read while each row is in cache. ``attnlab.native`` builds, caches
and loads the library; this module declares the bundle's entry point and wraps it as a tensor function.
``row_stats`` falls back to its torch-ops path wherever the library is missing.
"""

from __future__ import annotations

import ctypes
import math

import torch

from attnlab import native
from attnlab.native import status

DIAG_FIXED = 13  # the OUT_* columns of _rows.c
DIAG_PER_BETA = 6  # its B_* columns, one set per beta


class Kernel:
    """The library's diagnostics entry point, as a tensor function."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        _P, _N, _I, _D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double
        lib.diag_rows_f64.argtypes = [_P, _N, _N, _P, _D, _D, _P, _N, _P, _N, _N, _D, _I, _D, _P, _I]
        lib.diag_rows_f64.restype = _I
        self.lib = lib

    def diag_rows(
        self,
        zm: torch.Tensor,
        target: torch.Tensor | None,
        b: float,
        tau: float | None,
        degrees: torch.Tensor,
        betas: torch.Tensor,
        sink: int,
        eps: float,
        r_mode: int,
        r: float,
    ) -> torch.Tensor:
        """The diagnostics bundle of contiguous float64 rows zm (see ``_rows.c``): a (columns, rows) table,
        columns OUT_* then S_p per degree then DIAG_PER_BETA per beta."""
        rows, n = zm.shape
        out = torch.empty(DIAG_FIXED + len(degrees) + DIAG_PER_BETA * len(betas), rows, dtype=torch.float64)
        failed = self.lib.diag_rows_f64(
            zm.data_ptr(),
            rows,
            n,
            None if target is None else target.data_ptr(),
            b,
            math.inf if tau is None else tau,
            degrees.data_ptr(),
            len(degrees),
            betas.data_ptr(),
            len(betas),
            sink,
            eps,
            r_mode,
            r,
            out.data_ptr(),
            torch.get_num_threads(),
        )
        if failed:
            raise MemoryError(f"the diagnostics kernel could not allocate its {n}-key scratch rows")
        return out


def for_rows(zm: torch.Tensor) -> Kernel | None:
    """The loaded kernel if it can take these rows (CPU, float64, contiguous: the bundle has no float32
    entry point), else None: the caller then takes its torch-ops path."""
    return get() if native.fits((zm,), (torch.float64,)) else None


get = native.binding(Kernel)


__all__ = ["DIAG_FIXED", "DIAG_PER_BETA", "Kernel", "for_rows", "get", "status"]
