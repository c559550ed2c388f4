"""Independent training runs in separate processes, the CPU threads split between them.

A small decoder keeps one CPU thread about as busy as two keep it, so two runs on two cores finish in about
the time of one (measured for lengthgen's cells and the specialization study's runs). ``run_all`` calls a
picklable function once per argument tuple, ``jobs`` at a time; results come back in the order of the
calls. Each run writes its own files, so a failed one leaves the others.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch


def world_size() -> int:
    """The number of processes torchrun started (1 when run directly)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def check_jobs(jobs: int) -> None:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    if jobs > 1 and world_size() > 1:
        raise ValueError(
            "jobs > 1 trains runs in separate processes, which torchrun does not manage; under torchrun use jobs 1"
        )


def _exit_with(parent: int) -> None:
    """A worker's initializer: end the worker once ``parent`` is gone. A killed parent leaves its pool's
    workers running, training on into the folders a rerun would resume; a run's checkpoints stay for it."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _with_threads(threads: int, fn: Callable[..., Any], args: tuple) -> Any:
    torch.set_num_threads(threads)
    return fn(*args)


def run_all(fn: Callable[..., Any], calls: Sequence[tuple], jobs: int) -> list[Any]:
    """[fn(*args) for args in calls], ``jobs`` processes at a time (in this process when 1)."""
    check_jobs(jobs)
    jobs = min(jobs, len(calls))
    if jobs <= 1:
        return [fn(*args) for args in calls]
    threads = max(1, torch.get_num_threads() // jobs)
    # spawn, not fork: a forked child inherits OpenMP's thread pool in an unusable state.
    with ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_exit_with, initargs=(os.getpid(),)
    ) as pool:
        futures = [pool.submit(_with_threads, threads, fn, args) for args in calls]
        return [future.result() for future in futures]
