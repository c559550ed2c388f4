"""A run's records: metrics.jsonl appended line by line as training goes (and mirrored to TensorBoard when asked),
read back with a torn last line dropped, cut back to a checkpoint on resume, turned into train.csv / eval.csv /
copy.csv, and a finished run's final figures."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnlab import io
from attnlab.errors import Error
from attnlab.readback import ReadBackError, check, parse_object


class TrainError(Error, RuntimeError):
    """A run that cannot start or go on as asked (existing output, world size, missing checkpoint)."""


class Metrics:
    """Appends one JSON line per record to metrics.jsonl (flushed, so a killed run keeps what it logged)
    and, when TensorBoard is installed and asked for, mirrors the numbers there."""

    def __init__(self, out: Path, tensorboard: bool) -> None:
        self.path = out / "metrics.jsonl"
        io.check_links(self.path)
        io.record(out, self.path.name)
        self.file = self.path.open("a", encoding="utf-8")
        self.board = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                self.board = None
            else:
                io.check_links(out / "tensorboard")
                io.record(out, "tensorboard")
                self.board = SummaryWriter(str(out / "tensorboard"))

    def log(self, record: dict[str, Any]) -> None:
        self.file.write(json.dumps(record, sort_keys=True) + "\n")
        self.file.flush()
        if self.board is not None:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "step":
                    self.board.add_scalar(f"{record['kind']}/{key}", value, record["step"])

    def close(self) -> None:
        self.file.close()
        if self.board is not None:
            self.board.close()


@dataclass(frozen=True)
class _Record:
    """What every line of metrics.jsonl holds (``Metrics.log``), besides its numbers."""

    kind: str
    step: int


def read_metrics(out: Path) -> list[dict[str, Any]]:
    """metrics.jsonl's records. A last line without its newline is a record torn by a kill mid-write: it
    is dropped, as the resumed run logs that step again. Any other unreadable line is an error."""
    path = Path(out) / "metrics.jsonl"
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    records = []
    lines = text.split("\n")[:-1]  # what follows the last newline is "" or the torn record
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:  # a line of bytes other than UTF-8 reads with U+FFFD in their place, which no JSON holds
            records.append(check(parse_object(line, where, allowed="a metrics record (kind, step)"), _Record, where))
        except ReadBackError as exc:
            raise TrainError(f"{exc}; remove the line or start the run anew (--overwrite)") from None
    return records


def _truncate_metrics(out: Path, step: int) -> None:
    """Drop records a killed run logged past its last checkpoint: the resumed run logs them again."""
    kept = [r for r in read_metrics(out) if r["step"] <= step]
    io.record(out, "metrics.jsonl")
    io.write_text(out / "metrics.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))


def write_tables(out: Path) -> dict[str, Path]:
    """metrics.jsonl as train.csv, eval.csv and (with ``intervention.score_every``) copy.csv, for spreadsheets
    and pandas."""
    import pandas as pd

    records = read_metrics(out)
    written = {}
    for kind in ("train", "eval", "copy"):
        rows = [r for r in records if r["kind"] == kind]
        if rows:
            frame = pd.DataFrame(rows).drop(columns="kind")
            io.record(out, f"{kind}.csv")
            written[kind] = io.atomic_write(out / f"{kind}.csv", lambda tmp, f=frame: f.to_csv(tmp, index=False))
    return written


def outcome(out: str | os.PathLike) -> dict[str, Any]:
    """A finished run's final figures, recomputed from its train.csv and eval.csv: the steps, the last
    training loss, the last evaluation's val_loss and val_ppl (None without validation text) and the step
    at which the upper-Q/K intervention was released (None if it never was)."""
    import pandas as pd

    out = Path(out)
    last = pd.read_csv(out / "train.csv").iloc[-1]
    evaluated = pd.read_csv(out / "eval.csv").iloc[-1]

    def read(key: str) -> float | None:
        value = evaluated.get(key)
        return None if value is None or pd.isna(value) else float(value)

    released = read("released_at")
    return {
        "steps": int(last.step),
        "loss": float(last.loss),
        "val_loss": read("val_loss"),
        "val_ppl": read("val_ppl"),
        "released_at": None if released is None else int(released),
    }
