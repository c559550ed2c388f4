"""attnlab's compiled C library: the row maps' kernels (``rowmaps/_kernels.c``), the diagnostics bundle
(``diagnostics/_rows.c``) and the site's fused attention (``site/_site.c``), one library built on first use with
the machine's C compiler, cached, and loaded with ctypes. Each owner of a C source has a thin wrapper that
declares its entry points (``rowmaps.kernel``, ``diagnostics.kernel``, ``site.cpu_kernel``); this module knows
only how to build, cache and load the library, so no owner reaches into another's. Every caller falls
back to its torch-ops path wherever the library is missing.

Why ctypes and not ``torch.utils.cpp_extension``: the C files need no PyTorch headers, so they build in
about a second with ``cc`` alone, where an extension needs ninja and a minute of compiling headers.

The build uses ``-march=native`` (without it GCC did not vectorize the passes and the kernels measured
3-10x slower), so the cached library is keyed by the CPU's flags as well as by the sources and compiler.
It lives in ``$ATTNLAB_CACHE`` or ``$XDG_CACHE_HOME/attnlab`` (default ``~/.cache/attnlab``) under
``kernels/``, written under a temporary name and renamed, so concurrent processes (torchrun) never load
half a file. ``ATTNLAB_KERNEL=0`` turns the library off; ``status()`` says whether it loaded, and why not.

Loading a library runs its code in this process, so the cache must be writable by this user alone: the
``kernels/`` folder is made with mode 0700 (one of ours with group or other bits is set back to 0700), and
a folder or cached library owned by another user, or a library writable by group or others, is refused:
the library is then off and ``status()`` names the file and what is wrong with it. The folders above
``kernels/`` are the user's own choice (``$ATTNLAB_CACHE``) and are not checked.

The kernels run OpenMP loops; the library links the same ``libgomp.so.1`` that PyTorch's CPU wheel loads,
so both share one thread pool, and the wrappers pass ``torch.get_num_threads()`` threads.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Container
from pathlib import Path
from typing import TypeVar

import torch

from attnlab.errors import Error

# One library for every owner: one compile, one cache entry and one load per process.
SOURCES = (
    Path(__file__).parent / "rowmaps" / "_kernels.c",
    Path(__file__).parent / "diagnostics" / "_rows.c",
    Path(__file__).parent / "site" / "_site.c",
)
FLAGS = ("-O3", "-march=native", "-fno-trapping-math", "-fopenmp", "-shared", "-fPIC")
T = TypeVar("T")


def fits(tensors: tuple[torch.Tensor, ...], dtypes: Container[torch.dtype]) -> bool:
    """Whether the library can read these tensors in place: on CPU, contiguous, all of one dtype in
    ``dtypes``."""
    first = tensors[0]
    return first.dtype in dtypes and all(
        t.device.type == "cpu" and t.dtype == first.dtype and t.is_contiguous() for t in tensors
    )


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


class UnsafeCache(Error, RuntimeError):
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
    key = hashlib.sha256(
        "\0".join([*texts, version, " ".join(FLAGS), _cpu_flags(), platform.machine()]).encode()
    ).hexdigest()[:16]
    target = folder / f"attnlab-{key}.so"
    if target.is_file():
        if why := _foreign(target, os.stat(target), "cached library"):
            raise UnsafeCache(why)
        return target
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".attnlab-", suffix=".so")
    os.close(fd)
    try:
        done = subprocess.run(
            [compiler, *FLAGS, "-o", tmp, *map(str, SOURCES), "-lm"], capture_output=True, text=True, timeout=300
        )
        if done.returncode:
            raise RuntimeError(f"{compiler} failed: {done.stderr.strip()[-500:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


@functools.lru_cache(maxsize=1)
def _load() -> tuple[ctypes.CDLL | None, str]:
    if os.environ.get("ATTNLAB_KERNEL", "1") == "0":
        return None, "turned off by ATTNLAB_KERNEL=0"
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler found (set CC, or install gcc)"
    if not hasattr(os, "geteuid"):
        return None, "this platform has no user ids to check the cache's owner against"
    try:
        return ctypes.CDLL(str(_build(compiler))), f"built with {compiler}"
    except UnsafeCache as e:
        return None, f"refused: {e}; remove it or set ATTNLAB_CACHE to a folder only you can write"
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        return None, f"could not build or load it: {e}"


def library() -> ctypes.CDLL | None:
    """The loaded library, or None (``status()`` says why); built at most once per process."""
    return _load()[0]


def binding(wrap: Callable[[ctypes.CDLL], T]) -> Callable[[], T | None]:
    """A package's ``get()``: its wrapper of the loaded library, built once per library (a row map asks for
    the kernel on every call, at one number per row), or None where the library is off."""
    wrapped = functools.lru_cache(maxsize=1)(wrap)

    def get() -> T | None:
        lib = library()
        return None if lib is None else wrapped(lib)

    get.__doc__ = "The loaded kernel, or None (``status()`` says why)."
    return get


def status() -> str:
    """One line: whether the row maps, diagnostics and fused attention run on the compiled kernel, and why
    not if they do not."""
    lib, why = _load()
    return f"C kernel (row maps, diagnostics, fused attention): {'on' if lib else 'off'} ({why})"
