"""A study's cells run the same wherever they are spread: one process per GPU sees only its own GPU, a
machine with several GPUs gets one process each, submitit's local executor gives the cells that this process
gives, bit for bit, and its jobs get a day's time limit (not submitit's 5 minutes) unless told otherwise."""

from __future__ import annotations

import os
import time

import pytest
import torch

from attnlab import workers
from attnlab.studies.lengthgen import experiment as lengthgen
from attnlab.workers import Launch, LaunchError


def _seen(delay: float) -> tuple[int, str | None]:
    """What a worker sees: its process id and the GPUs it may use (spawned workers import this module)."""
    time.sleep(delay)
    return os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES")


def test_each_gpu_worker_sees_only_its_own_gpu():
    seen = workers.run_all(_seen, [(0.3,)] * 6, 1, gpus=[3, 5])
    by_worker = dict(seen)
    assert set(by_worker.values()) <= {"3", "5"} and len(seen) == 6
    assert len(set(by_worker.values())) == len(by_worker)  # no two workers share a GPU


@pytest.fixture
def gpus(monkeypatch):
    def machine(count: int) -> None:
        for name, value in {
            "is_available": lambda: count > 0,
            "device_count": lambda: count,
            "current_device": lambda: 0,
        }.items():
            monkeypatch.setattr(torch.cuda, name, value)

    return machine


def test_cells_go_one_per_gpu_only_where_several_gpus_are_asked_for(gpus):
    local = Launch()
    gpus(4)
    assert workers.gpu_pool("auto") == [0, 1, 2, 3] and workers.gpu_pool("cuda") == [0, 1, 2, 3]
    assert workers.gpu_pool("cuda:2") == [] and workers.gpu_pool("cpu") == []
    assert not workers.in_process(8, jobs=2, device="auto", launch=local)
    assert workers.in_process(8, jobs=2, device="cuda:1", launch=local)  # one GPU: one cell after another
    gpus(1)
    assert workers.gpu_pool("auto") == [] and workers.in_process(8, jobs=2, device="auto", launch=local)
    gpus(0)
    assert workers.in_process(8, jobs=1, device="auto", launch=local)
    assert not workers.in_process(8, jobs=2, device="auto", launch=local)
    assert not workers.in_process(1, jobs=1, device="cpu", launch=Launch(launcher="submitit"))


def test_bad_launch_settings_are_one_line():
    with pytest.raises(LaunchError, match="launcher must be one of local, submitit, got 'slurm'"):
        Launch(launcher="slurm")
    with pytest.raises(LaunchError, match="--submitit sets the submitit executor's parameters; it needs --launcher"):
        Launch(submitit={"timeout_min": 5})
    assert workers.executor_parameters(["timeout_min=720", "slurm_partition=gpu"]) == {
        "timeout_min": 720,
        "slurm_partition": "gpu",
    }


def test_submitit_local_executor_gives_the_cells_this_process_gives(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    # One thread here and in the executor's jobs (they inherit the environment): the same arithmetic.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = lengthgen.LengthgenConfig(
            task="copy", maps=("softmax", "entmax_a1.5"), train_len=16, eval_mult=(1, 2), steps=20, samples=12
        )
        here = lengthgen.run(cfg, tmp_path / "here")
        there = lengthgen.run(cfg, tmp_path / "there", launch=Launch(launcher="submitit"))
    finally:
        torch.set_num_threads(threads)
    assert here["table"].equals(there["table"])
    assert {k: v["lengths"] for k, v in here["cells"].items()} == {k: v["lengths"] for k, v in there["cells"].items()}
    logs = list((tmp_path / "there" / ".submitit").glob("*_log.out"))
    assert len(logs) == 2  # one job per cell, its log kept beside the run


def test_submitit_jobs_get_a_day_unless_told_and_a_gpu_only_where_there_is_one(tmp_path, monkeypatch):
    submitit = pytest.importorskip("submitit")
    given = []
    monkeypatch.setattr(submitit.AutoExecutor, "update_parameters", lambda self, **kw: given.append(kw))
    assert workers.spread(print, [], jobs=1, device="cpu", launch=Launch(launcher="submitit"), folder=tmp_path) == []
    told = Launch(launcher="submitit", submitit={"timeout_min": 30, "slurm_partition": "gpu"})
    workers.spread(print, [], jobs=1, device="auto", launch=told, folder=tmp_path)
    assert given == [{"timeout_min": 24 * 60}, {"timeout_min": 30, "slurm_partition": "gpu"}]
