"""The ``temperature`` study's budgets and files (Hayase & Karakida 2026 App. A.3, §4.5.1, App. F, G.1): ``Plan``,
one budget of the trained decoder, and ``BUDGETS``; the names of the files ``compute`` writes and ``summarize``
reads; and the training run of each training seed. Compute, findings and section all read these, so they live
apart from each of them.

A study folder keeps its budget in ``plan.json`` (``dataclasses.asdict``), written once by ``compute`` and read
back by every later ``compute`` and ``summarize`` (``read_plan``), so a folder is always read with the budget
that made it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnlab.errors import ArgumentError
from attnlab.report.readback import ReadBackError, read_record

NAME = "beta_n"
PLAN = "plan.json"
UNTRAINED = "untrained_"  # prefix of the null control's files: the same decoder at its initialization
EXT_ROWS = "ext_rows.parquet"  # contact rows past the training window, where xi*_PPL is read
BETA = "beta_n.parquet"
HEAD_SCALES = "head_scales.parquet"
GAPS = "gaps.parquet"
ROWS = "contact_rows.parquet"


@dataclass(frozen=True)
class Plan:
    """One budget: the training run (App. A.3: the decoder's shape, AdamW with cosine decay, the byte data's cap,
    None: all of it, and ``every``, the evaluation and checkpoint cadence), the n-grid, the fit's n_min and the
    evaluation seeds x windows that read it (§4.5.1, App. F), the bootstrap's B and the gap tolerance eps, the M2
    grid of App. B.1 (xi_max, xi_step), the xi sweep past the window (App. A.2, G.1), the grid and windows past
    the window where xi_hat_Lambda is read beside it, and the training seeds (the unit of replication)."""

    context: int
    layers: int
    heads: int
    d_model: int
    steps: int
    batch: int
    accum: int
    lr: float
    min_lr: float
    warmup: int
    precision: str
    max_tokens: int | None
    every: int
    n_grid: tuple[int, ...]
    n_min: int
    eval_seeds: int
    windows: int
    n_boot: int
    eps: float
    xi_max: float
    xi_step: float
    sweep_lengths: tuple[int, ...]
    sweep_xi: tuple[float, ...]
    sweep_windows: int
    sweep_batch: int
    train_seeds: int
    ext_grid: tuple[int, ...]
    ext_windows: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        """The plan that ``dataclasses.asdict`` wrote as JSON, its lists back to tuples. Folders written before the
        plan was typed hold the same keys and read the same way."""
        names = {field.name for field in dataclasses.fields(cls)}
        if set(data) != names:
            raise ArgumentError(
                f"{PLAN} does not hold a temperature budget: missing {sorted(names - set(data))}, "
                f"unknown {sorted(set(data) - names)}"
            )
        return cls(**{key: tuple(value) if isinstance(value, list) else value for key, value in data.items()})


# smoke: a byte-level decoder on the standard library, minutes on two CPU cores; 1500 steps, since after 500 beta_n's
# growth and the sweep's optimum are still settling (xi_hat_beta 0.24 -> 0.18, xi*_PPL 1.0 -> 0.45 at 2x); three
# evaluation seeds as App. F, and 32 sweep windows, which narrow xi*_PPL's interval. full: Hayase & Karakida App. A.3,
# Table 3 (GPT-124M shape, AdamW 6e-4 -> 6e-5 cosine, warmup 1000, effective batch 2048 x 1024, bf16,
# 100k iterations), the n-grid of §4.5.1 with three evaluation seeds of 16 windows (App. F), and a
# sweep over the xi grid of App. G.1 at 1.5-4x the training window (the Qwen ratios of App. A.4).
# every: the evaluation and checkpoint cadence (App. A.3 keeps a checkpoint every 5000 iterations).
BUDGETS: dict[str, Plan] = {
    "smoke": Plan(
        context=256,
        layers=2,
        heads=4,
        d_model=64,
        steps=1500,
        batch=16,
        accum=1,
        lr=3e-3,
        min_lr=3e-4,
        warmup=20,
        precision="fp32",
        max_tokens=1_000_000,
        every=375,
        n_grid=(16, 32, 64, 128, 192, 256),
        n_min=16,
        eval_seeds=3,
        windows=16,
        n_boot=200,
        eps=1e-6,
        xi_max=3.0,
        xi_step=0.05,
        sweep_lengths=(256, 512, 1024),
        sweep_xi=(0, 0.5, 1, 1.5, 2, 2.5, 3),
        sweep_windows=32,
        sweep_batch=8,
        train_seeds=3,
        ext_grid=(256, 384, 512, 768, 1024),
        ext_windows=4,
    ),
    "full": Plan(
        context=1024,
        layers=12,
        heads=12,
        d_model=768,
        steps=100_000,
        batch=2048,
        accum=64,
        lr=6e-4,
        min_lr=6e-5,
        warmup=1000,
        precision="bf16",
        max_tokens=None,
        every=5000,
        n_grid=(64, 128, 256, 512, 768, 1024),
        n_min=64,
        eval_seeds=3,
        windows=16,
        n_boot=200,
        eps=1e-6,
        xi_max=3.0,
        xi_step=0.05,
        sweep_lengths=(1024, 1536, 2048, 3072, 4096),
        sweep_xi=(0, 0.5, 1, 1.5, 2, 2.5, 3),
        sweep_windows=20,
        sweep_batch=4,
        train_seeds=3,
        ext_grid=(1024, 1536, 2048, 3072, 4096),
        ext_windows=4,
    ),
}


def read_plan(folder: Path) -> Plan:
    """The budget a study folder was made with (its plan.json), checked against ``Plan`` (``readback.read_record``)."""
    path = Path(folder) / PLAN
    try:
        return Plan.from_json(read_record(path, Plan))
    except ArgumentError as exc:  # a key no budget has
        raise ReadBackError(f"{path}: {exc}") from None


def run_name(k: int) -> str:
    """The trainer folder of training seed index k under runs/ (index 0 keeps the single-seed name)."""
    return NAME if k == 0 else f"{NAME}_t{k}"


def run_config(plan: Plan, seed: int):
    """The training run: RoPE with the dynamic-NTK base of App. A.2 (inert up to the training window,
    so training is plain RoPE, and the sweep past it holds the base fixed per window as the seed does);
    learned absolute positions, the seed's other choice, have no row past the window to extrapolate to."""
    from attnlab.train.config import RunConfig

    return RunConfig.from_dict(
        {
            "model": {
                "context": plan.context,
                "layers": plan.layers,
                "heads": plan.heads,
                "d_model": plan.d_model,
                "positions": "rope",
                "rope_dynamic": True,
                "scaler": NAME,
            },
            "data": {"max_tokens": plan.max_tokens},
            "train": {
                "steps": plan.steps,
                "batch": plan.batch,
                "accum": plan.accum,
                "lr": plan.lr,
                "min_lr": plan.min_lr,
                "warmup": plan.warmup,
                "weight_decay": 0.1,
                "betas": [0.9, 0.95],
                "clip": 1.0,
                "precision": plan.precision,
                "seed": seed,
                "eval_every": plan.every,
                "eval_batches": 4,
                "probes": False,
                "checkpoint_every": plan.every,
                "keep": 1,
                "tensorboard": False,
            },
        }
    )


@dataclass(frozen=True)
class RealPlan:
    """One budget of the real part: n_eval = ratio x the checkpoint's training window, the rows at n = n_eval x
    each of ``fractions``, the documents read (one forward each), the bootstrap's B over documents, and the
    longest window the budget reads (None: no cap)."""

    ratio: float
    fractions: tuple[float, ...]
    docs: int
    n_boot: int
    max_tokens: int | None


# Read as App. G.1 reads Qwen: one forward of n_eval tokens per document under dynamic-NTK RoPE (App. A.2), rows at
# n = n_eval x {1/4, 1/2, 3/4, 1}, one fit per n_eval, B = 200 (§4.5.1), on windows of the bundled novel
# (public-domain prose, as PG-19 is). Table 2 reads n_eval = 2 and 4 x n_train. smoke: n_eval = 1.25 x n_train, the
# longest the CPU allows here: SmolLM2-135M (n_train 8192) reads one 8192-token document in 107 s and one of 10240 in
# about 160 s on two CPU cores, so four documents take about 11 minutes; a model whose n_eval would pass max_tokens
# (Gemma 3's 32768 window) is read at max_tokens inside its window instead, and says so. full: 2 x n_train and 7
# documents, what the novel holds at SmolLM2's 16384 (125k tokens), near the 4 + 5 per Qwen cell of App. G.1.
REAL_PLANS: dict[str, RealPlan] = {
    "smoke": RealPlan(ratio=1.25, fractions=(0.25, 0.5, 0.75, 1.0), docs=4, n_boot=200, max_tokens=12288),
    "full": RealPlan(ratio=2.0, fractions=(0.25, 0.5, 0.75, 1.0), docs=7, n_boot=200, max_tokens=None),
}


def real_reading(plan: RealPlan, n_train: int | None, rope_ok: bool) -> tuple[str, list[int]]:
    """(rope, n-grid) of the real part: dynamic NTK at n_eval = ratio x n_train where the model has plain RoPE, a
    training window and n_eval within the budget's max_tokens; else the model's own positions at n_eval =
    min(n_train, max_tokens), inside the window, where the finding is not checked."""
    cap = plan.max_tokens or math.inf
    n_eval = round(plan.ratio * n_train) if n_train else None
    if n_eval is not None and rope_ok and n_eval <= cap:
        rope = "dynamic"
    else:
        rope, n_eval = "plain", int(min(n_train or cap, cap))
    return rope, [max(2, round(f * n_eval)) for f in plan.fractions]
