"""Process-level settings that decide CPU speed more than the arithmetic does: the heap, and the threads.

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
import os
import statistics
import sys
import time

from attnlab.errors import ArgumentError

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


def _others_running(samples: int = 3, gap: float = 0.005) -> float:
    """Runnable tasks other than this one, the median of a few reads of /proc/loadavg's "running/total" (an
    instant count, where the 1-minute load average lags by a minute); the load average where there is none."""
    try:
        counts = []
        for i in range(samples):
            with open("/proc/loadavg") as f:
                counts.append(int(f.read().split()[3].split("/")[0]) - 1)
            if i + 1 < samples:
                time.sleep(gap)
        return float(statistics.median(counts))
    except (OSError, IndexError, ValueError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def default_threads() -> int:
    """Threads for torch now: the cores this process may use less those other processes keep busy (their
    share of the machine's runnable tasks), at least 1, at most torch's own default.

    Why not torch's default (every core): an OpenMP parallel region waits for its slowest thread, and on a
    core another process holds, that thread runs only when the scheduler gives it a turn. A small model
    issues thousands of short regions per step: measured on a 2-core machine with another job running,
    torch's two threads trained a 4 x 128 decoder at ~200 tokens/s against 12-14k with one thread
    (``benchmarks/threads.py`` measures it). Read once, at start: a load that arrives later is not seen, and
    ``--threads`` (or ``torch.set_num_threads``) overrides."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    busy = _others_running() * cores / (os.cpu_count() or cores)
    return max(1, min(_torch_default(cores), cores - round(busy)))


def _torch_default(cores: int) -> int:
    """torch's own thread count, without importing torch for it: OMP_NUM_THREADS where set, else the cores."""
    if "torch" in sys.modules:
        return sys.modules["torch"].get_num_threads()
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) >= 1 else cores


def set_threads(threads: int | None = None) -> int:
    """Give torch ``threads`` CPU threads (None: ``default_threads()``) and return the count. Before torch is
    imported, through OMP_NUM_THREADS, which torch reads when it is (as do the processes this one starts), so
    that a command that never needs torch does not wait for its import."""
    n = default_threads() if threads is None else threads
    if not (isinstance(n, int) and n >= 1):
        raise ArgumentError(f"threads must be an int >= 1, got {n!r}")
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    else:
        os.environ["OMP_NUM_THREADS"] = str(n)
    return n
