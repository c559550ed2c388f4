"""Deterministic synthetic tasks: the registry, the trainer's stream, scoring and display.

    >>> batch = TASKS["copy"].generate(n=256, length=64, seed=0)       # TaskBatch(ids, targets)
    >>> stream = TaskStream("mqmtar", length=64, seed=0)               # a train.data.Batches
    >>> inputs, targets = stream.train_batch(step, batch=128, rank=rank, world=world)
    >>> exact_match(model(inputs), targets).float().mean()
    >>> print(show("flipflop_dense", length=21))

Tasks and their seeds: ``mqmtar``, ``max_retrieval``, ``copy``, ``reverse``, ``sort``, ``2back``,
``local_count``, ``flipflop_sparse``, ``flipflop_dense`` (Vasylenko et al. 2025 App. G.1, Fig. 10, Table 5, App. H),
``mqar`` (Zoology; Polynomial Concentration App. B), ``trigger_averaging`` (Attention Sinks Essential §3.2, App. A),
``niah_small`` and ``induction_small`` (small-vocabulary versions of Polynomial Concentration's probes). Each task's
docstring gives its row layout, vocabulary and scored positions, and the choices made where its seed is silent;
``TASKS[name].describe()`` gives the same as data.
"""

from __future__ import annotations

import dataclasses

import torch

from attnlab.batches import rank_rows  # one rank rule (and message) for every stream the trainer reads

# The task modules register their tasks into TASKS on import, in the order ``attnlab tasks`` lists them.
from attnlab.tasks import retrieval, sequences, vectors  # noqa: F401
from attnlab.tasks.seqtask import (
    IGNORE,
    TASKS,
    TRAIN,
    VALIDATION,
    Task,
    TaskBatch,
    TaskError,
    VectorBatch,
    register,
    stream_id,
    task_rng,
)
from attnlab.tasks.vectors import trigger_mask

DEFAULT_VAL_BATCHES = 8  # val_batches(n_batches=None): a fixed held-out set needs a size; the trainer passes one
_SHOW_WIDTH = 100


def get_task(name: str, **params) -> Task:
    """Task ``name`` with ``params`` replacing its defaults (each task's docstring lists them)."""
    if name not in TASKS:
        raise TaskError(f"unknown task {name!r}; known tasks: {', '.join(sorted(TASKS))}")
    task = TASKS[name]
    unknown = sorted(set(params) - set(task.params()))
    if unknown:
        raise TaskError(
            f"{name}: unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(task.params()) or 'none'}"
        )
    types = {f.name: f.type for f in dataclasses.fields(task)}
    for key, value in params.items():
        if not _is_a(value, types[key]):
            raise TaskError(f"{name}: parameter {key} must be {types[key]}, got {value!r}")
    return dataclasses.replace(task, **params)


_TYPES = {"int": int, "float": (int, float), "str": str, "None": type(None), "bool": bool}


def _is_a(value, annotation: str) -> bool:
    """Whether ``value`` fits a field annotation written as names joined by ``|`` (bool is no number)."""
    kinds = [_TYPES[part.strip()] for part in annotation.split("|")]
    if isinstance(value, bool):
        return bool in kinds
    return any(isinstance(value, kind) for kind in kinds)


class TaskStream:
    """A synthetic task as the trainer's ``train.data.Batches``: rows of ``length``, seeded by ``seed``.

    Step ``s``'s global batch is ``task.draw(rng, batch, length)`` with ``rng = default_rng([stream id,
    TRAIN, seed, s])``, and rank ``r`` of ``w`` takes its rows ``[r*B/w, (r+1)*B/w)``. With ``min_length``,
    each step first draws its length uniformly from ``min_length..length`` with that rng (Vasylenko et al. 2025 trains
    on lengths 32-64, Table 5), the same for every row of the step so the batch stays rectangular.
    Validation batch ``i`` comes from ``default_rng([stream id, VALIDATION, seed, i])`` at ``length``, a
    stream apart from every training step. Token tasks
    give (ids, targets) torch.long; ``trigger_averaging`` gives float (inputs, targets) of shape
    (rows, length, dim), scored by the trainer's squared l2 loss on all positions, with the trigger position
    recoverable as ``trigger_mask(inputs)`` (see ``describe()["mask"]``); its ``vocab_size`` is 0.
    """

    def __init__(self, task_name: str, length: int, seed: int = 0, min_length: int | None = None, **params):
        if seed < 0:
            raise TaskError(f"seed {seed} is negative; allowed: seed >= 0")
        self.task = get_task(task_name, **params)
        self.task.check_length(length)
        if min_length is not None:
            self.task.check_length(min_length)
            if min_length > length:
                raise TaskError(f"min_length {min_length} is above length {length}; allowed: min_length <= length")
        self.length, self.seed, self.min_length = length, seed, min_length
        self.vocab_size = self.task.vocab_size

    def _draw(self, purpose: int, index: int, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = task_rng(self.task.name, purpose, self.seed, index)
        varied = purpose == TRAIN and self.min_length is not None
        length = int(rng.integers(self.min_length, self.length + 1)) if varied else self.length
        drawn = self.task.draw(rng, batch, length)
        return (drawn.ids, drawn.targets) if isinstance(drawn, TaskBatch) else (drawn.inputs, drawn.targets)

    def train_batch(self, step: int, batch: int, rank: int = 0, world: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Rank ``rank``'s rows of step ``step``'s global batch of ``batch`` rows."""
        if step < 0:
            raise TaskError(f"step {step} is negative; allowed: step >= 0")
        lo, hi = rank_rows(batch, rank, world)
        inputs, targets = self._draw(TRAIN, step, batch)
        return inputs[lo:hi], targets[lo:hi]

    def val_batches(
        self, batch: int, n_batches: int | None = None, rank: int = 0, world: int = 1
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``n_batches`` (``DEFAULT_VAL_BATCHES`` when None) held-out batches, the same on every call."""
        lo, hi = rank_rows(batch, rank, world)
        count = DEFAULT_VAL_BATCHES if n_batches is None else n_batches
        if count < 1:
            raise TaskError(f"n_batches {n_batches}: allowed is None or n_batches >= 1")
        return [(x[lo:hi], y[lo:hi]) for x, y in (self._draw(VALIDATION, i, batch) for i in range(count))]

    def describe(self) -> dict:
        """The task's spec plus this stream's length, sizes and seeds, for a run's config.json."""
        return {
            **self.task.describe(),
            "length": self.length,
            "min_length": self.min_length,
            "sizes": self.task.sizes(self.length),
            "seed": self.seed,
            "stream_id": stream_id(self.task.name),
            "rng": {
                "train": f"default_rng([stream_id, {TRAIN}, seed, step])",
                "val": f"default_rng([stream_id, {VALIDATION}, seed, index])",
            },
        }


def _predictions(logits_or_predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if logits_or_predictions.dim() == targets.dim() + 1:
        return logits_or_predictions.argmax(-1)
    if logits_or_predictions.shape != targets.shape:
        raise TaskError(
            f"predictions of shape {tuple(logits_or_predictions.shape)} do not match targets "
            f"{tuple(targets.shape)}; allowed: logits (n, length, vocab) or ids (n, length)"
        )
    return logits_or_predictions


def exact_match(logits_or_predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(n,) bool: a row is right iff every scored position (targets != -100) is predicted right, the
    argmax of logits (n, length, vocab) or the ids (n, length) given. Vasylenko et al. 2025 App. G.2's exact match."""
    predictions = _predictions(logits_or_predictions, targets)
    return ((predictions == targets) | (targets == IGNORE)).all(dim=-1)


def scored_accuracy(logits_or_predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(n,) float: the fraction of each row's scored positions predicted right; Vasylenko et al. 2025 App. G.2 scores
    2Back and Local Count by accuracy rather than exact match."""
    predictions = _predictions(logits_or_predictions, targets)
    scored = targets != IGNORE
    return ((predictions == targets) & scored).sum(-1) / scored.sum(-1).clamp(min=1)


SHOW_MAX = 4096  # positions one printed example may have


def show(name: str, length: int | None = None, seed: int = 0, **params) -> str:
    """One example of task ``name`` as text: its header, then input tokens over their targets (``·`` where
    unscored), wrapped; vectors are listed position by position. ``length`` defaults to a short row."""
    task = get_task(name, **params)
    if length is None:
        length = max(task.min_length, 8 if task.kind == "vector" else 24)
    if isinstance(length, int) and length > SHOW_MAX:
        raise TaskError(
            f"length {length} is too long to print; allowed: up to {SHOW_MAX} (generate longer "
            "sequences with the task's generate())"
        )
    batch = task.generate(1, length, seed)
    head = [
        f"{name} ({task.source}): {task.kind}, length {length}, seed {seed}, vocab {task.vocab_size}",
        f"layout: {task.layout}",
        f"sizes: {task.sizes(length)}, params: {task.params()}",
    ]
    if task.kind == "vector":
        return "\n".join(head + _show_vectors(batch.inputs[0], batch.targets[0], batch.mask[0]))
    return "\n".join(head + _show_tokens(task, batch.ids[0].tolist(), batch.targets[0].tolist()))


def _show_tokens(task: Task, ids: list[int], targets: list[int]) -> list[str]:
    label = "class" if task.kind == "classification" else "next"
    cols = [
        (str(i), task.token_name(x), "·" if t == IGNORE else task.token_name(t))
        for i, (x, t) in enumerate(zip(ids, targets))
    ]
    lines = [
        f"{sum(t != IGNORE for t in targets)} of {len(ids)} positions scored; row '{label}' is the target (· unscored)"
    ]
    for chunk in _chunks(cols, _SHOW_WIDTH - 7):
        widths = [max(map(len, c)) for c in chunk]
        lines += [
            f"{title:>6} " + " ".join(c[k].rjust(w) for c, w in zip(chunk, widths))
            for k, title in enumerate(("pos", "input", label))
        ] + [""]
    return lines[:-1]


def _chunks(cols: list[tuple[str, ...]], width: int):
    """Consecutive runs of ``cols`` whose aligned text fits in ``width`` characters."""
    chunk, used = [], 0
    for col in cols:
        need = max(map(len, col)) + 1
        if chunk and used + need > width:
            yield chunk
            chunk, used = [], 0
        chunk.append(col)
        used += need
    yield chunk


def _show_vectors(inputs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> list[str]:
    def fmt(v: torch.Tensor) -> str:
        head = " ".join(f"{x:+.2f}" for x in v[:6].tolist())
        return f"{head} ... {float(v[-1]):+.2f}" if len(v) > 7 else " ".join(f"{x:+.2f}" for x in v.tolist())

    lines = [f"trigger at position {int(mask.nonzero()[0, 0]) + 1} (1-based); target zero elsewhere"]
    for i, (x, m) in enumerate(zip(inputs, mask)):
        lines.append(f"{i + 1:>4} {'T' if m else ' '} {fmt(x)}")
    j = int(mask.nonzero()[0, 0])
    lines.append(f"target at the trigger: {fmt(targets[j])}")
    return lines


__all__ = [
    "DEFAULT_VAL_BATCHES",
    "TASKS",
    "Task",
    "TaskBatch",
    "TaskError",
    "TaskStream",
    "VectorBatch",
    "exact_match",
    "get_task",
    "register",
    "scored_accuracy",
    "show",
    "trigger_mask",
]
