"""Independent training runs in separate processes: the CPU threads split between them, one GPU each, or one
cluster job each.

A small decoder keeps one CPU thread about as busy as two keep it, so two runs on two cores finish in about
the time of one (measured for lengthgen's cells and the specialization study's runs). ``run_all`` calls a
picklable function once per argument tuple, ``jobs`` at a time; results come back in the order of the
calls. Each run writes its own files, so a failed one leaves the others. ``spread`` chooses how a study's
cells run: submitted through submitit (a SLURM cluster, or its local executor where there is none), one
process per GPU of this machine, or the CPU pool. torch is imported when work starts, so that the command
line's options (``Launch``) cost no torch import.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnlab import devices
from attnlab.errors import Error
from attnlab.options import option

LAUNCHERS = ("local", "submitit")
TIMEOUT_MIN = 24 * 60  # a submitit job's time limit unless --submitit timeout_min=... says otherwise


class LaunchError(Error, ValueError):
    """A launcher or executor parameter that cannot be used; the message says what is allowed."""


def world_size() -> int:
    """The number of processes torchrun started (1 when run directly)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def check_jobs(jobs: int) -> None:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise LaunchError(f"jobs must be an integer >= 1, got {jobs!r}")
    if jobs > 1 and world_size() > 1:
        raise LaunchError(
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
    import torch

    torch.set_num_threads(threads)
    return fn(*args)


def _worker(parent: int, gpus: Any) -> None:
    """A worker's initializer: take one GPU of the queue ``gpus`` (None on CPU) and see only it, before the
    worker's first CUDA call, so that the call's ``auto``/``cuda`` device is that GPU."""
    _exit_with(parent)
    if gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpus.get())


def run_all(fn: Callable[..., Any], calls: Sequence[tuple], jobs: int, gpus: Sequence[int] = ()) -> list[Any]:
    """[fn(*args) for args in calls], ``jobs`` processes at a time (in this process when 1); with ``gpus``, one
    process per GPU index instead, each seeing only its GPU (``CUDA_VISIBLE_DEVICES``)."""
    import torch

    check_jobs(jobs)
    jobs = min(len(gpus) or jobs, len(calls))
    if jobs <= 1 and not gpus:
        return [fn(*args) for args in calls]
    threads = max(1, torch.get_num_threads() // jobs)
    # spawn, not fork: a forked child inherits OpenMP's thread pool in an unusable state (and CUDA's).
    context = multiprocessing.get_context("spawn")
    queue = None
    if gpus:
        queue = context.Manager().Queue()
        for index in gpus[:jobs]:
            queue.put(index)
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker, initargs=(os.getpid(), queue)) as pool:
        futures = [pool.submit(_with_threads, threads, fn, args) for args in calls]
        return [future.result() for future in futures]


def executor_parameters(items: Sequence[str] | None) -> dict[str, Any]:
    """--submitit KEY=VALUE items as a dict, each value read as YAML would (timeout_min=720 is a number)."""
    from attnlab.options import assignment

    return dict(assignment(item, "--submitit", "timeout_min=720") for item in items or ())


@dataclass(frozen=True, kw_only=True)
class Launch:
    """How a study's independent cells (lengthgen's task x variant x seed, the specialization study's runs)
    are carried out: ``local`` on this machine (one process per GPU when the device is auto or cuda and
    several GPUs are visible, else the CPU pool), or ``submitit``, one job per cell through submitit's
    AutoExecutor: SLURM where ``sbatch`` is found, else its local executor."""

    launcher: str = option("local", "how independent cells run: %(choices)s", choices=LAUNCHERS)
    submitit: dict[str, Any] = option(
        help="a submitit executor parameter for --launcher submitit, e.g. --submitit slurm_partition=gpu "
        "--submitit timeout_min=720 (repeatable; timeout_min defaults to 1440, gpus_per_node to 1 where CUDA is "
        "present)",
        metavar="KEY=VALUE",
        action="append",
        convert=executor_parameters,
        default_factory=dict,
    )

    def __post_init__(self) -> None:
        if self.launcher not in LAUNCHERS:
            raise LaunchError(f"launcher must be one of {', '.join(LAUNCHERS)}, got {self.launcher!r}")
        if self.submitit and self.launcher != "submitit":
            raise LaunchError("--submitit sets the submitit executor's parameters; it needs --launcher submitit")


def gpu_pool(device: str) -> list[int]:
    """The GPUs ``spread`` runs cells on, one process each: every visible GPU when ``device`` is auto or cuda
    and there are several, else none (one GPU, or the CPU)."""
    if devices.resolve(device).type != "cuda" or str(device).strip().lower() not in ("auto", "cuda"):
        return []
    import torch

    count = torch.cuda.device_count()
    return list(range(count)) if count > 1 else []


def in_process(calls: int, *, jobs: int, device: str, launch: Launch) -> bool:
    """Whether ``spread`` runs the calls here, one after another (where a progress bar can be drawn)."""
    if launch.launcher != "local" or gpu_pool(device):
        return False
    return devices.resolve(device).type == "cuda" or min(jobs, calls) <= 1


def spread(
    fn: Callable[..., Any], calls: Sequence[tuple], *, jobs: int, device: str, launch: Launch, folder: Path
) -> list[Any]:
    """[fn(*args) for args in calls], each call a cell: through submitit (job files and logs in
    ``folder/.submitit``), one process per visible GPU when ``device`` is auto or cuda and there are several,
    one after another on a single GPU, else ``jobs`` processes on the CPU."""
    if launch.launcher == "submitit":
        return _submitit(fn, calls, device, launch, Path(folder) / ".submitit")
    gpus = gpu_pool(device)
    if gpus:
        return run_all(fn, calls, 1, gpus=gpus)
    return run_all(fn, calls, jobs if devices.resolve(device).type == "cpu" else 1)


def _submitit(fn: Callable[..., Any], calls: Sequence[tuple], device: str, launch: Launch, folder: Path) -> list:
    try:
        import submitit
    except ImportError:
        raise LaunchError(
            "--launcher submitit needs the submitit package: pip install submitit (or attnlab[gpu])"
        ) from None
    executor = submitit.AutoExecutor(folder=folder)
    # A SLURM job gets a GPU unless --device cpu: the node that submits (a login node) may have none.
    if executor.cluster == "slurm":
        gpu = str(device).strip().lower() != "cpu"
    else:
        gpu = devices.resolve(device).type == "cuda"
    # submitit's own default time limit is 5 minutes, shorter than most cells; a cell resumes from its checkpoints
    parameters = {"timeout_min": TIMEOUT_MIN, **({"gpus_per_node": 1} if gpu else {}), **launch.submitit}
    try:
        executor.update_parameters(**parameters)
    except (ValueError, TypeError) as exc:
        raise LaunchError(f"--submitit: {exc}") from None
    jobs = executor.map_array(fn, *zip(*calls)) if calls else []
    return [job.result() for job in jobs]
