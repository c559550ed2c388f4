"""Process-level settings that decide CPU speed more than the arithmetic does.

glibc's malloc hands freed blocks above its trim threshold back to the OS, and the next allocation of a
row-sized buffer page-faults them in again: measured here, that made ReLU^16 11-21x softmax instead of
1.7-2.2x, and a diagnostics block 3x slower. PyTorch's CPU performance guide recommends jemalloc or
tcmalloc for the same reason. ``tune_malloc`` raises glibc's trim and mmap thresholds instead; the
``attnlab`` command and the benchmarks call it, library users may call it once at start-up (or set
MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_ in the environment).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
THRESHOLD = 32 << 20  # glibc's ceiling for the mmap threshold on 64-bit


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def tune_malloc() -> bool:
    """Keep freed buffers of up to 32 MiB in the heap (glibc only); True if the settings took."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(_M_TRIM_THRESHOLD, THRESHOLD)) and bool(libc.mallopt(_M_MMAP_THRESHOLD, THRESHOLD))


def trim_heap() -> None:
    """Give free heap pages back to the OS (glibc's malloc_trim; a no-op elsewhere).

    A long streaming run keeps small objects alive (finished records) between the row-sized temporaries
    of each block, and glibc cannot shrink a heap around them: measured here, streaming 8192 x 8192
    scores grew the resident set by ~35 MB per 256-row block without a trim and stayed flat with one.
    """
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def reset_peak_rss() -> tuple[bool, int]:
    """Reset this process's resident-set high-water mark (writing 5 to /proc/self/clear_refs, Linux >= 4.0)
    and return (whether it was reset, the resident set now in KiB), so that a later ``peak_rss`` holds the
    peak of what runs in between. ``ru_maxrss`` cannot serve: the kernel folds the parent's resident set at
    fork/exec into it and clear_refs does not reset that part."""
    import resource

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        reset = True
    except OSError:
        reset = False
    with open("/proc/self/statm") as f:
        return reset, int(f.read().split()[1]) * resource.getpagesize() // 1024


def peak_rss() -> int:
    """The resident-set high-water mark in KiB (VmHWM in /proc/self/status)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
