"""The compiled kernels: the row maps' (``_kernels.c``: alpha-entmax for alpha in {2, 1.5, 1.25} and
normalized ReLU^p for p a power of two up to 16, forward and backward, and normalized sigmoid's backward,
on CPU float32/float64 rows) and the diagnostics bundle of ``row_stats`` (``diagnostics/_rows.c``), one
library built on first use with the machine's C compiler, cached, and loaded with ctypes; every caller
falls back to its torch-ops path wherever the kernel is missing.

Why a kernel: the torch-ops paths read every row several times in separate passes (alpha-entmax 4-8,
ReLU^16 about 9), each a full trip through memory, and pay PyTorch's per-op cost on one number per row
(measured here: alpha-entmax forward+backward 3.6-7.5x softmax's at 1024-65536 keys). The kernels work
on one row at a time while it is in cache (benchmarks/rowmaps.py has the figures).

Why ctypes and not ``torch.utils.cpp_extension``: the C file needs no PyTorch headers, so it builds in
about a second with ``cc`` alone, where an extension needs ninja and a minute of compiling headers.

The build uses ``-march=native`` (without it GCC did not vectorize the passes and the kernel measured
3-10x slower), so the cached library is keyed by the CPU's flags as well as by the source and compiler.
It lives in ``$ATTNLAB_CACHE`` or ``$XDG_CACHE_HOME/attnlab`` (default ``~/.cache/attnlab``) under
``kernels/``, written under a temporary name and renamed, so concurrent processes (torchrun) never load
half a file. ``ATTNLAB_KERNEL=0`` turns the kernel off; ``status()`` says whether it loaded, and why not.

Loading a library runs its code in this process, so the cache must be writable by this user alone: the
``kernels/`` folder is made with mode 0700 (one of ours with group or other bits is set back to 0700), and
a folder or cached library owned by another user, or a library writable by group or others, is refused:
the kernel is then off and ``status()`` names the file and what is wrong with it. The folders above
``kernels/`` are the user's own choice (``$ATTNLAB_CACHE``) and are not checked.

The kernel runs OpenMP loops; it links the same ``libgomp.so.1`` that PyTorch's CPU wheel loads, so both
share one thread pool, and it uses ``torch.get_num_threads()`` threads.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

SOURCES = (Path(__file__).with_name("_kernels.c"), Path(__file__).parent.parent / "diagnostics" / "_rows.c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
_TYPES = {torch.float32: "f32", torch.float64: "f64"}
_P, _N = ctypes.c_void_p, ctypes.c_int64


class Kernel:
    """The loaded library's entry points, as tensor functions."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        _I, _D = ctypes.c_int, ctypes.c_double
        signatures = {"entmax_{}_forward": ([_P, _P, _P, _P, _N, _N, _I, _D, _D, _I], _I),
                      "entmax_{}_backward": ([_P, _P, _P, _N, _N, _I], None),
                      "relu_power_{}_forward": ([_P, _P, _P, _P, _N, _N, _I, _D, _D, _I], None),
                      "relu_power_{}_backward": ([_P, _P, _P, _P, _P, _N, _N, _D, _D, _I], None),
                      "sigmoid_{}_backward": ([_P, _P, _P, _P, _N, _N, _I], None)}
        for tag in _TYPES.values():
            for name, (args, result) in signatures.items():
                fn = getattr(lib, name.format(tag))
                fn.argtypes, fn.restype = args, result
        lib.diag_rows_f64.argtypes = [_P, _N, _N, _P, _D, _D, _P, _N, _P, _N, _N, _D, _I, _D, _P, _I]
        lib.diag_rows_f64.restype = _I
        self.lib = lib

    def _fn(self, name: str, t: torch.Tensor):
        return getattr(self.lib, name.format(_TYPES[t.dtype]))

    def forward(self, z: torch.Tensor, m: torch.Tensor, k: int, a: float, floor: float,
                need_s: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """alpha-entmax weights p of contiguous CPU rows z with maxima m (a = alpha - 1, k = 1/a in
        {1, 2, 4}) and, when ``need_s``, s = p^(2-alpha) for the backward."""
        n = z.shape[-1]
        p = torch.empty_like(z)
        s = torch.empty_like(z) if need_s else None
        failed = self._fn("entmax_{}_forward", z)(
            z.data_ptr(), m.data_ptr(), p.data_ptr(), None if s is None else s.data_ptr(), z.numel() // n, n, k,
            a, floor, torch.get_num_threads())
        if failed:
            raise MemoryError(f"the entmax kernel could not allocate its {n}-key scratch row")
        return p, s

    def backward(self, s: torch.Tensor, dp: torch.Tensor) -> torch.Tensor:
        """dz = s * (dp - <s, dp> / sum s) for contiguous CPU rows of one dtype."""
        n = s.shape[-1]
        dz = torch.empty_like(s)
        self._fn("entmax_{}_backward", s)(s.data_ptr(), dp.data_ptr(), dz.data_ptr(), s.numel() // n, n,
                                          torch.get_num_threads())
        return dz

    def relu_power_forward(self, z: torch.Tensor, rmax: torch.Tensor, p: int, b: float, floor: float,
                           keep_q: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Normalized ReLU^p of contiguous CPU rows z divided by their r_max (one per row, > 0), p a power of
        two up to 16, and, when ``keep_q``, q = [(z + b) / r_max]_+ for the backward."""
        n = z.shape[-1]
        y = torch.empty_like(z)
        q = torch.empty_like(z) if keep_q else None
        self._fn("relu_power_{}_forward", z)(z.data_ptr(), rmax.data_ptr(), y.data_ptr(),
                                             None if q is None else q.data_ptr(), z.numel() // n, n,
                                             p.bit_length() - 1, b, floor, torch.get_num_threads())
        return y, q

    def relu_power_backward(self, y: torch.Tensor, q: torch.Tensor, rmax: torch.Tensor, dy: torch.Tensor,
                            p: float, floor: float) -> torch.Tensor:
        """dz = (p / r_max) y (dy - <dy, y>) / max(q, floor) for contiguous CPU rows of one dtype."""
        n = y.shape[-1]
        dz = torch.empty_like(y)
        self._fn("relu_power_{}_backward", y)(y.data_ptr(), q.data_ptr(), rmax.data_ptr(), dy.data_ptr(),
                                              dz.data_ptr(), y.numel() // n, n, p, floor, torch.get_num_threads())
        return dz


    def sigmoid_backward(self, y: torch.Tensor, total: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        """du = y (1 - y S) (dy - <dy, y>) for normalized sigmoid rows y with sums of sigma S."""
        n = y.shape[-1]
        du = torch.empty_like(y)
        self._fn("sigmoid_{}_backward", y)(y.data_ptr(), total.data_ptr(), dy.data_ptr(), du.data_ptr(),
                                           y.numel() // n, n, torch.get_num_threads())
        return du


    def diag_rows(self, zm: torch.Tensor, target: torch.Tensor | None, b: float, tau: float | None,
                  degrees: torch.Tensor, betas: torch.Tensor, sink: int, eps: float, r_mode: int,
                  r: float) -> torch.Tensor:
        """The diagnostics bundle of contiguous float64 rows zm (see ``diagnostics/_rows.c``): a
        (columns, rows) table, columns OUT_* then S_p per degree then DIAG_PER_BETA per beta."""
        rows, n = zm.shape
        out = torch.empty(DIAG_FIXED + len(degrees) + DIAG_PER_BETA * len(betas), rows, dtype=torch.float64)
        failed = self.lib.diag_rows_f64(
            zm.data_ptr(), rows, n, None if target is None else target.data_ptr(), b,
            math.inf if tau is None else tau, degrees.data_ptr(), len(degrees), betas.data_ptr(), len(betas),
            sink, eps, r_mode, r, out.data_ptr(), torch.get_num_threads())
        if failed:
            raise MemoryError(f"the diagnostics kernel could not allocate its {n}-key scratch rows")
        return out


DIAG_FIXED = 13  # the OUT_* columns of diagnostics/_rows.c
DIAG_PER_BETA = 6  # its B_* columns, one set per beta


def for_rows(*tensors: torch.Tensor) -> Kernel | None:
    """The loaded kernel if it can take these tensors (CPU, float32 or float64, one dtype, contiguous),
    else None: the caller then takes its torch-ops path."""
    first = tensors[0]
    takes = first.dtype in _TYPES and all(
        t.device.type == "cpu" and t.dtype == first.dtype and t.is_contiguous() for t in tensors)
    return get() if takes else None


def _cache_dir() -> Path:
    if os.environ.get("ATTNLAB_CACHE"):
        return Path(os.environ["ATTNLAB_CACHE"]) / "kernels"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attnlab" / "kernels"


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        return platform.processor()


class UnsafeCache(RuntimeError):
    """A cache folder or cached library that another user could have written."""


def _foreign(path: Path, st: os.stat_result, what: str) -> str | None:
    """Why ``path`` may hold another user's code, or None when only this user can write it."""
    if st.st_uid != os.geteuid():
        return f"the {what} {path} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"the {what} {path} is writable by group or others (mode {st.st_mode & 0o777:o})"
    return None


def _private_folder(folder: Path) -> Path:
    """``folder``, made with mode 0700 if missing and set to 0700 if it is ours with wider bits; raises
    UnsafeCache for a folder of another user or one whose mode cannot be narrowed."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.stat(folder)
    if st.st_uid == os.geteuid() and st.st_mode & 0o077:
        os.chmod(folder, 0o700)
        st = os.stat(folder)
    if why := _foreign(folder, st, "cache folder"):
        raise UnsafeCache(why)
    return folder


def _build(compiler: str) -> Path:
    folder = _private_folder(_cache_dir())
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    texts = [source.read_text() for source in SOURCES]
    key = hashlib.sha256("\0".join([*texts, version, " ".join(FLAGS), _cpu_flags(),
                                    platform.machine()]).encode()).hexdigest()[:16]
    target = folder / f"attnlab-{key}.so"
    if target.is_file():
        if why := _foreign(target, os.stat(target), "cached library"):
            raise UnsafeCache(why)
        return target
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".attnlab-", suffix=".so")
    os.close(fd)
    try:
        done = subprocess.run([compiler, *FLAGS, "-o", tmp, *map(str, SOURCES), "-lm"], capture_output=True, text=True,
                              timeout=300)
        if done.returncode:
            raise RuntimeError(f"{compiler} failed: {done.stderr.strip()[-500:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


@functools.lru_cache(maxsize=1)
def _load() -> tuple[Kernel | None, str]:
    if os.environ.get("ATTNLAB_KERNEL", "1") == "0":
        return None, "turned off by ATTNLAB_KERNEL=0"
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler found (set CC, or install gcc)"
    if not hasattr(os, "geteuid"):
        return None, "this platform has no user ids to check the cache's owner against"
    try:
        return Kernel(ctypes.CDLL(str(_build(compiler)))), f"built with {compiler}"
    except UnsafeCache as e:
        return None, f"refused: {e}; remove it or set ATTNLAB_CACHE to a folder only you can write"
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        return None, f"could not build or load it: {e}"


def get() -> Kernel | None:
    """The loaded kernel, or None (``status()`` says why); built at most once per process."""
    return _load()[0]


def status() -> str:
    """One line: whether the row maps and diagnostics run on the compiled kernel, and why not if they do not."""
    kernel, why = _load()
    return f"C kernel (row maps, diagnostics): {'on' if kernel else 'off'} ({why})"
