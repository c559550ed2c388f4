"""The ``sinks`` study's plans and file names: a run's raw files (``RAW_KINDS``), the budgets (``BUDGETS``: seeds,
step caps and learning rates per shape, App. A's batch, the held-out inputs), the runs of a budget and each run's
config (Attention Sinks Essential §3.4, §4, App. A)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from attnlab.studies.sinks.measures import ARCHS, ATTENTION, DIM, LENGTH
from attnlab.train.config import RunConfig

# A run's raw files; the loss file is written last. The untrained model's sink fractions, Theorem 2 per position
# and the BOS-masking losses came after the first measured folders: run_piece adds them to such a folder's runs
# from their checkpoints, without training.
RAW_KINDS = (
    "_attention.parquet",
    "_sinks.csv",
    "_writes.csv",
    "_untrained_sinks.csv",
    "_positions.csv",
    "_masking.csv",
    "_loss.csv",
)


@dataclass(frozen=True)
class Plan:
    """One budget of the study: the seeds, step cap and learning rate per shape (``ARCHS``), App. A's batch, and
    the held-out inputs in each of the two sets a run is read on (``samples``)."""

    seeds: Mapping[str, int]
    cap: Mapping[str, int]
    lr: Mapping[str, float]
    batch: int
    samples: int


# Steps a run took to App. A's stop in our timing on one CPU thread (seed 0; 1x1, 2x2, 4x4): at lr 1e-3,
# softmax 4219, 5415, 9583 and ReLU 2208, 2902, 4553 (4x4: 18 ms a step); at 3e-3, softmax 3701, 2992, 5491 and
# ReLU 988, 1419, 2832; at 1e-2, softmax 1986, 2029, 2669 and ReLU 182, 346, 2226. "full" keeps App. A's lr
# 1e-3 with caps about 3x those counts; "smoke" fits a few minutes with lr 1e-2 and one 4x4 seed.
BUDGETS: dict[str, Plan] = {
    "smoke": Plan(
        seeds={"1x1": 2, "2x2": 2, "4x4": 1},
        cap={"1x1": 10000, "2x2": 8000, "4x4": 8000},
        lr={"1x1": 1e-2, "2x2": 1e-2, "4x4": 1e-2},
        batch=128,
        samples=1000,
    ),
    "full": Plan(
        seeds={"1x1": 3, "2x2": 3, "4x4": 3},
        cap={"1x1": 20000, "2x2": 20000, "4x4": 30000},
        lr={"1x1": 1e-3, "2x2": 1e-3, "4x4": 1e-3},
        batch=128,
        samples=1000,
    ),
}


def runs(plan: Plan) -> list[str]:
    """A budget's runs, ``<attention>_<arch>_s<k>`` for the k-th seed (seed = the study's seed + k)."""
    return [f"{att}_{arch}_s{k}" for arch in ARCHS for att in ATTENTION for k in range(plan.seeds[arch])]


def _parts(run: str) -> tuple[str, str, int]:
    attention, arch, k = run.split("_")
    return attention, arch, int(k[1:])


def run_config(run: str, plan: Plan, seed: int) -> RunConfig:
    """The run's config (``seed``: the study's; the run trains from seed + k): the model of the run's shape
    (vectors in and out, no FFN/norm/bias/positions; 1x1 without residual, deeper ones with residual and
    readout writes) and App. A's optimizer (Adam: AdamW without decay, betas (0.9, 0.999), constant lr) for at
    most the budget's cap of steps; the study stops it earlier at App. A's l-inf rule."""
    attention, arch, k = _parts(run)
    shape = ARCHS[arch]
    cap, lr = plan.cap[arch], plan.lr[arch]
    model = {
        "context": LENGTH,
        "inputs": "vectors",
        "layers": shape["layers"],
        "heads": shape["heads"],
        "d_model": DIM,
        "positions": "none",
        "ffn": "none",
        "norm": "none",
        "bias": False,
        "residual": shape["residual"],
        "readout": "writes" if shape["residual"] else "stream",
        "rowmap": ATTENTION[attention],
    }
    train = {
        "steps": cap,
        "batch": plan.batch,
        "lr": lr,
        "min_lr": lr,
        "warmup": 0,
        "weight_decay": 0.0,
        "betas": [0.9, 0.999],
        "clip": 0.0,
        "seed": seed + k,
        "eval_every": max(1, cap // 10),
        "eval_batches": 1,
        "probes": False,
        "checkpoint_every": max(1, cap // 8),
        "tensorboard": False,
    }
    return RunConfig.from_dict({"model": model, "train": train})
