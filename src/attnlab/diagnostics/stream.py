"""Streaming ``row_stats`` into a Parquet table while a forward pass produces score blocks.

Memory stays O(block x keys): each block handed to ``RowStatsWriter.add`` is reduced to one record per
row in chunks of at most ``chunk_values`` scores, appended to the file as a row group and dropped; the
(queries x keys) map of a layer is never held. The file appears only when the writer closes cleanly
(it is written under a temporary name and renamed), so a failed run leaves the previous table intact.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from numpy.typing import ArrayLike

from attnlab.diagnostics.rows import RowOptions, blocks, flat_rows, stats_frame
from attnlab.errors import ArgumentError, MissingFileError
from attnlab.io import PARQUET_META_KEY
from attnlab.perf import trim_heap
from attnlab.readback import parse_object

LOCATION = ("layer", "head", "prompt", "query")
ROW_GROUP = 1 << 16  # rows per Parquet row group: large enough to scan fast, small enough to hold
# Scores diagnosed between heap trims. Trimming returns the float64 temporaries' pages so a long stream
# stays flat, but the forward then faults them back in: after every small add this cost an audit forward
# ~0.9 s of 3.5 s (benchmarks/hooks.py). Every 2^26 values, a 1024-token audit of a 30-layer model
# (~18M values) is not trimmed at all: 1.18-1.19x the eager forward against 1.27-1.37x at 2^22, while the
# 8192^2 x 8 stream peaks at 698 MiB against 540 MiB (under the 1 GiB of tests/diagnostics/test_stream.py).
TRIM_VALUES = 1 << 26


def _expand(name: str, t: torch.Tensor | ArrayLike, shape: torch.Size) -> torch.Tensor:
    t = torch.as_tensor(t)
    try:
        return t.expand(shape)
    except RuntimeError:
        raise ArgumentError(f"{name} shape {tuple(t.shape)} does not broadcast to {tuple(shape)}") from None


def query_sample(absolute: torch.Tensor, *, every: int = 1, positions: Sequence[int] | None = None) -> torch.Tensor:
    """Indices (along a block's query axis) of the queries to keep, given their absolute positions:
    every ``every``-th position, or exactly ``positions`` when given."""
    if positions is not None:
        keep = torch.isin(absolute, torch.as_tensor(list(positions), dtype=torch.int64))
    else:
        keep = absolute % every == 0
    return torch.nonzero(keep).flatten()


def _no_rows(options: RowOptions) -> pd.DataFrame:
    """The statistics columns with no rows: the schema of an empty table."""
    return stats_frame(torch.zeros(0, 1, dtype=torch.float64), None, options)


class RowStatsWriter:
    """Append per-row diagnostics of score blocks to a Parquet table (Polynomial Concentration App. B layout: one
    row per layer, head, prompt and query position), with ``config`` and the row options in the file metadata.

    Use as a context manager::

        with RowStatsWriter("rows.parquet", RowOptions.make(b=0.5), config={"model": "..."}) as w:
            for layer, scores in blocks:            # scores: (batch, heads, queries, keys)
                w.add(scores, mask, layer=layer, prompt=0, query_offset=q0)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        options: RowOptions = RowOptions(),
        *,
        config: dict[str, Any] | None = None,
        every: int = 1,
        positions: Sequence[int] | None = None,
        chunk_values: int = 1 << 21,
        flags: Sequence[str] = (),
    ) -> None:
        if not (isinstance(every, int) and every >= 1):
            raise ArgumentError(f"every must be an int >= 1, got {every!r}")
        if chunk_values < 1:
            raise ArgumentError(f"chunk_values must be >= 1, got {chunk_values!r}")
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise MissingFileError(f"the folder for {self.path} does not exist")
        self.options = options
        self.every, self.positions = every, None if positions is None else sorted(set(positions))
        self.chunk_values = chunk_values
        self.flags = tuple(flags)
        if clash := set(self.flags) & {*LOCATION, *_no_rows(options).columns}:
            raise ArgumentError(f"flags {sorted(clash)} would shadow the table's own columns")
        meta = {
            "options": {k: getattr(options, k) for k in options.__dataclass_fields__},
            "config": config or {},
            "every": every,
            "positions": self.positions,
        }
        self._meta = json.dumps(meta, default=str).encode()
        self._tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pd.DataFrame] = []
        self._pending_rows = 0
        self._untrimmed = 0
        self._ended: str | None = None  # "closed" or "aborted" once the file is finished or dropped
        self.rows_written = 0
        self.status_counts: dict[str, int] = {}

    def add(
        self,
        scores: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        layer: int,
        prompt: int | Sequence[int] = 0,
        query_offset: int = 0,
        target: torch.Tensor | None = None,
        heads: Sequence[int] | None = None,
        query_ids: Sequence[int] | None = None,
        flags: dict[str, bool] | None = None,
    ) -> int:
        """Diagnose a block of scores (heads, queries, keys) or (batch, heads, queries, keys).

        ``prompt`` labels the batch entries (an int for a single prompt, or one id per batch entry);
        ``query_offset`` is the absolute position of the block's first query, or ``query_ids`` gives the
        absolute position of each query when the block is not contiguous; ``heads`` labels the head
        axis (default 0..H-1); ``mask`` and ``target`` broadcast as in ``row_stats``. ``flags`` gives the
        block's value of each boolean column declared when the writer was made (e.g. which rows were read
        against an answer key). Returns the number of rows written.
        """
        self._refuse_if_ended("add rows")
        flags = flags or {}
        if set(flags) != set(self.flags):
            raise ArgumentError(f"add needs exactly the flags {list(self.flags)}, got {sorted(flags)}")
        if scores.dim() == 3:
            scores = scores.unsqueeze(0)
        if scores.dim() != 4:
            raise ArgumentError(
                f"scores must be (heads, queries, keys) or (batch, heads, queries, keys), "
                f"got shape {tuple(scores.shape)}"
            )
        bsz, n_heads, n_q, _ = scores.shape
        prompts = [prompt] * bsz if isinstance(prompt, int) else list(prompt)
        head_ids = list(range(n_heads)) if heads is None else list(heads)
        if len(prompts) != bsz or len(head_ids) != n_heads:
            raise ArgumentError(
                f"got {len(prompts)} prompt ids for batch {bsz} and {len(head_ids)} head ids for {n_heads} heads"
            )
        absolute = (
            torch.arange(query_offset, query_offset + n_q)
            if query_ids is None
            else torch.as_tensor(list(query_ids), dtype=torch.int64)
        )
        if absolute.numel() != n_q:
            raise ArgumentError(f"got {absolute.numel()} query ids for {n_q} queries")
        keep = query_sample(absolute, every=self.every, positions=self.positions)
        if keep.numel() == 0:
            return 0
        mask = None if mask is None else _expand("mask", mask, scores.shape).index_select(2, keep)
        target = None if target is None else _expand("target", target, scores.shape[:-1]).index_select(2, keep)
        rows, mask, target = flat_rows(scores.index_select(2, keep), mask, target)
        loc = {  # C order over (batch, heads, kept queries), as scores was flattened
            "layer": np.full(rows.shape[0], layer, dtype=np.int64),
            "head": np.tile(np.repeat(np.asarray(head_ids, dtype=np.int64), keep.numel()), bsz),
            "prompt": np.repeat(np.asarray(prompts, dtype=np.int64), n_heads * keep.numel()),
            "query": np.tile(absolute[keep].numpy(), bsz * n_heads),
            **{k: np.full(rows.shape[0], bool(flags[k])) for k in self.flags},
        }
        for r0, frame in blocks(rows, mask, target, self.options, self.chunk_values):
            where = {k: v[r0 : r0 + len(frame)] for k, v in loc.items()}
            self._buffer(pd.concat([pd.DataFrame(where), frame], axis=1))
        self._untrimmed += rows.numel()
        if self._untrimmed >= TRIM_VALUES:
            trim_heap()
            self._untrimmed = 0
        return rows.shape[0]

    def _refuse_if_ended(self, action: str) -> None:
        if self._ended is not None:
            raise ArgumentError(
                f"cannot {action}: the RowStatsWriter for {self.path} is already {self._ended}; "
                f"rows can be added only before close() or abort()"
            )

    def _buffer(self, frame: pd.DataFrame) -> None:
        self._pending.append(frame)
        self._pending_rows += len(frame)
        if self._pending_rows >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        frame = pd.concat(self._pending, ignore_index=True)
        self._pending, self._pending_rows = [], 0
        self._emit(frame)
        self.rows_written += len(frame)
        for k, v in frame["status"].value_counts().items():
            self.status_counts[k] = self.status_counts.get(k, 0) + int(v)

    def _emit(self, frame: pd.DataFrame) -> None:
        """Append one row group to the temporary file."""
        table = pa.Table.from_pandas(frame, preserve_index=False)
        if self._writer is None:
            schema = table.schema.with_metadata({**(table.schema.metadata or {}), PARQUET_META_KEY: self._meta})
            self._writer = pq.ParquetWriter(self._tmp, schema)
        self._writer.write_table(table.replace_schema_metadata(self._writer.schema.metadata))

    def _empty(self) -> pd.DataFrame:
        """The table's columns with no rows."""
        loc = pd.DataFrame(
            {**{k: np.zeros(0, dtype=np.int64) for k in LOCATION}, **{k: np.zeros(0, dtype=bool) for k in self.flags}}
        )
        return pd.concat([loc, _no_rows(self.options)], axis=1)

    def close(self) -> Path:
        """Finish the file and move it into place; with no rows added, an empty table is written. Closing
        again returns the path; closing after ``abort`` raises ValueError."""
        if self._ended == "closed":
            return self.path
        self._refuse_if_ended("close")
        self._flush()
        if self._writer is None:
            self._buffer(self._empty())
            self._flush()
        assert self._writer is not None  # _flush wrote the rows, or the empty table, through _emit
        self._writer.close()
        os.replace(self._tmp, self.path)
        self._ended = "closed"
        return self.path

    def abort(self) -> None:
        """Drop the partial file; an existing table at ``path`` is left as it was, as is the table of a
        writer already closed."""
        if self._ended is not None:
            return
        self._ended = "aborted"
        self._pending, self._pending_rows = [], 0
        if self._writer is not None:
            self._writer.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> RowStatsWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class RowStatsCollector(RowStatsWriter):
    """``RowStatsWriter``'s records kept in memory instead of a file: ``add`` is the writer's own, so the
    frame ``close`` returns holds, value for value, the rows the writer would write (same columns, dtypes and
    order). For the in-memory API; a long stream at scale belongs in a file.

    ``path`` is only the name in messages; nothing is written.
    """

    def __init__(
        self,
        options: RowOptions = RowOptions(),
        *,
        every: int = 1,
        positions: Sequence[int] | None = None,
        chunk_values: int = 1 << 21,
        flags: Sequence[str] = (),
        path: str = "<memory>",
    ) -> None:
        self._frames: list[pd.DataFrame] = []
        self._result: pd.DataFrame | None = None
        super().__init__(
            Path.cwd() / path, options, every=every, positions=positions, chunk_values=chunk_values, flags=flags
        )

    def _emit(self, frame: pd.DataFrame) -> None:
        self._frames.append(frame)

    def close(self) -> pd.DataFrame:
        """The collected rows (the table's columns with no rows when none were added); closing again
        returns them again, closing after ``abort`` raises ValueError."""
        if self._ended == "closed":
            return self._result
        self._refuse_if_ended("close")
        self._flush()
        frames = self._frames or [self._empty()]
        self._result = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        self._frames = []
        self._ended = "closed"
        return self._result

    def abort(self) -> None:
        """Drop the collected rows."""
        if self._ended is None:
            self._ended = "aborted"
            self._pending, self._pending_rows, self._frames = [], 0, []


def read_rows(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A table written by ``RowStatsWriter`` (or ``io.write_parquet``) and the metadata it was written with ({} where
    it has none); a ReadBackError naming the file where that metadata is not a JSON object (``readback``)."""
    table = pq.read_table(path)
    raw = (table.schema.metadata or {}).get(PARQUET_META_KEY, b"{}")
    meta = parse_object(raw, f"{path} (its {PARQUET_META_KEY.decode()} metadata)", allowed="a JSON object")
    return table.to_pandas(), meta
