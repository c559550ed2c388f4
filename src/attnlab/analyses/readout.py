"""Reading chosen score rows of a checkpoint's forward passes into per-row diagnostics tables.

One forward per input, with an observer at every layer's attention site that reduces the chosen rows of
each block of pre-map scores to per-row diagnostics (``attnlab.diagnostics``) streamed to Parquet: the
attention maps are never stored. A row read against its answer key (Polynomial Concentration App. S) takes that key as
the diagnostic target instead of the row argmax; the tables flag those rows in ``answer_key``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from attnlab import hooks, tasks
from attnlab.analyses.run import RunError
from attnlab.devices import model_device
from attnlab.diagnostics import RowOptions
from attnlab.diagnostics.stream import RowStatsWriter
from attnlab.errors import ArgumentError
from attnlab.progress import progress as progress_of
from attnlab.site import DEFAULT_BLOCK, ScoreBlock

FLAGS = ("answer_key",)


@dataclass(frozen=True)
class Reading:
    """One input and the rows read from it: ``queries`` (absolute positions), of which those in
    ``answer_keys`` are read against that key position."""

    ids: tuple[int, ...]
    queries: tuple[int, ...]
    answer_keys: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if stray := sorted(set(self.answer_keys) - set(self.queries)):
            raise ArgumentError(f"answer keys given for unread queries {stray[:5]}")


QUERIES_HELP = (
    "which query rows to read: last (the one that answers), every:N (the queries that see N, 2N, ... "
    "keys, and the last) or all"
)


def check_queries(spec: str) -> str:
    """``spec`` if it is a query selection (``QUERIES_HELP``); ValueError naming what is allowed otherwise."""
    kind, _, n = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if (kind in ("last", "all") and not n) or (kind == "every" and n.isdigit() and int(n) >= 1):
        return spec
    raise RunError(f"--queries takes last, all or every:N with N >= 1, got {spec!r}")


def select_queries(spec: str, length: int) -> tuple[int, ...]:
    """The positions ``spec`` reads in an input of ``length`` tokens. every:N takes the queries that see N,
    2N, ... keys and the last; it never adds query 0, whose one-key row (S_p = 0) would count as safe by
    construction, unless N = 1."""
    kind, _, n = check_queries(spec).partition(":")
    if kind == "last":
        return (length - 1,)
    step = 1 if kind == "all" else int(n)
    return tuple(sorted({*range(step - 1, length, step), length - 1}))


def prompt_reading(prompt: tasks.Prompt, queries: str, target: str = "argmax", *, keep_all: bool = False) -> Reading:
    """The rows of a suite prompt that ``queries`` selects (``select_queries``). target "argmax" reads them
    all against their argmax; "answer" reads those with an answer key (``tasks.answer_keys``) against it,
    and the others only with ``keep_all`` (against their argmax)."""
    queries = select_queries(queries, len(prompt.input_ids))
    if target == "argmax":
        return Reading(prompt.input_ids, queries)
    keys = tasks.answer_keys(prompt)
    chosen = queries if keep_all else tuple(q for q in queries if q in keys)
    return Reading(prompt.input_ids, chosen, {q: keys[q] for q in chosen if q in keys})


class _Observer:
    """Feeds the chosen rows of each score block to every writer."""

    def __init__(self, writers: Iterable[RowStatsWriter]) -> None:
        self.writers = list(writers)
        self.prompt = 0
        self.queries = torch.zeros(0, dtype=torch.int64)
        self.key_of = torch.zeros(0, dtype=torch.int64)

    def start(self, prompt: int, reading: Reading) -> None:
        self.prompt = prompt
        self.queries = torch.tensor(reading.queries, dtype=torch.int64)
        self.key_of = torch.full((len(reading.ids),), -1, dtype=torch.int64)  # -1: no answer key
        for q, k in reading.answer_keys.items():
            self.key_of[q] = k

    def __call__(self, block: ScoreBlock) -> None:
        first, n_q = block.first_position, block.scores.shape[2]
        pos = self.queries[(self.queries >= first) & (self.queries < first + n_q)]
        if pos.numel() == 0:
            return
        answer = self.key_of[pos] >= 0
        if answer.any():
            # a sliding-window layer masks an answer key that has left its window: that row reads as a plain one
            device = block.allowed.device
            on = block.allowed[..., (pos[answer] - first).to(device), self.key_of[pos[answer]].to(device)]
            answer[answer.clone()] = on.reshape(-1, int(answer.sum())).all(0).cpu()
        allowed = block.allowed.expand_as(block.scores)
        for is_answer in (False, True):
            part = pos[answer == is_answer]
            if part.numel() == 0:
                continue
            scores, mask = block.scores, allowed
            if part.numel() < n_q:  # a full block goes as it is, without a copy
                index = (part - first).to(scores.device)
                scores, mask = scores.index_select(2, index), mask.index_select(2, index)
            target = self.key_of[part].view(1, 1, -1) if is_answer else None
            for writer in self.writers:
                writer.add(
                    scores,
                    mask,
                    layer=block.layer,
                    prompt=self.prompt,
                    query_ids=part.tolist(),
                    target=target,
                    flags={"answer_key": is_answer},
                )


def read_tables(
    model,
    readings: Sequence[Reading],
    sinks: Mapping[str, RowStatsWriter],
    *,
    device: str | torch.device | None = None,
    block: int = DEFAULT_BLOCK,
    desc: str = "rows",
    progress: bool = True,
) -> dict:
    """Read rows into any row sinks: one forward per reading (on ``device``, default the model's),
    the chosen rows of every layer's score blocks added to each sink (label -> a ``RowStatsWriter`` writing a
    file, or a ``RowStatsCollector`` keeping the rows in memory). Returns label -> what each sink's close
    returns (its path, or its DataFrame); a failure aborts every sink. The one reading loop of every command
    that reads rows, on the command line and in ``attnlab.api.entry`` alike."""
    device = model_device(model) if device is None else device
    observer = _Observer(sinks.values())
    try:
        for i, reading in enumerate(progress_of(readings, desc=desc, unit="input", enabled=progress)):
            observer.start(i, reading)
            ids = torch.tensor([reading.ids], device=device)
            with hooks.observed(model, observer, block=block), torch.no_grad():
                hooks.last_forward(model, ids)
        return {label: sink.close() for label, sink in sinks.items()}
    except BaseException:
        for sink in sinks.values():
            sink.abort()
        raise


def read_rows(
    model,
    readings: Sequence[Reading],
    options: Mapping[str, RowOptions],
    stage: str | os.PathLike,
    *,
    config: dict,
    device: str,
    block: int = DEFAULT_BLOCK,
    desc: str = "rows",
    progress: bool = True,
) -> dict[str, Path]:
    """One forward per reading; the rows go to ``stage``/rows_<label>.parquet, one table per entry of
    ``options`` (label -> row options), each with ``config`` in its metadata. Returns label -> path.
    A failure drops every partial table."""
    writers = {
        label: RowStatsWriter(Path(stage) / f"rows_{label}.parquet", opt, config=config, flags=FLAGS)
        for label, opt in options.items()
    }
    return read_tables(model, readings, writers, device=device, block=block, desc=desc, progress=progress)
