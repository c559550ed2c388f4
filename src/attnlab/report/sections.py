"""What a study hands the report: a section of findings, tables and figures, all pointing at files.

A section holds no number of its own: its tables are CSV files in the study folder and its figures PNG
files beside them, and its findings quote numbers that the study's ``summarize`` read from those files.
``section.json`` in the study folder is the serialized form (``Section.to_dict`` / ``from_dict``).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from attnlab.errors import Error
from attnlab.findings.finding import CHECK_VERDICTS, CLAIM_VERDICTS, MDE, VERDICTS, Finding, Null
from attnlab.report.readback import ReadBackError, read_record

# A section's findings are attnlab.findings' own; these names keep importing from here, as a user's study may.
__all__ = [
    "CHECK_VERDICTS",
    "CLAIM_VERDICTS",
    "MDE",
    "VERDICTS",
    "Figure",
    "Finding",
    "Null",
    "Section",
    "Table",
    "read_section",
]


@dataclass(frozen=True)
class Table:
    """A table file, ``stem`` relative to the study folder (``stem.csv`` and ``stem.md`` exist); ``found``: the file
    is shown as its command wrote it, not recomputed by ``attnlab report`` (the page says so beside it)."""

    stem: str
    caption: str
    found: bool = False


@dataclass(frozen=True)
class Figure:
    """A figure file, ``stem`` relative to the study folder (``stem.png`` and ``stem.svg`` exist);
    the caption says what the figure shows and how to read it."""

    stem: str
    caption: str


@dataclass(frozen=True)
class Parts:
    """Findings, tables, figures and notes that one part of a study (a real-model reading, a probe of its own) adds
    to the study's ``Section``."""

    findings: tuple[Finding, ...] = ()
    tables: tuple[Table, ...] = ()
    figures: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Section:
    """One study's part of the report.

    study: the registry name; title; source: the keys of the papers it re-asks; question: what the study asks, one
    or two sentences; command: the command that made the folder; notes: anything a reader needs to weigh the numbers
    (budget, what was scaled down); warnings: what makes some of its numbers not interpretable (e.g. a baseline that
    cannot do the task), shown above the findings."""

    study: str
    title: str
    source: str
    question: str
    command: str
    findings: tuple[Finding, ...] = ()
    tables: tuple[Table, ...] = ()
    figures: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Section:
        return cls(
            **{
                **data,
                "findings": tuple(Finding.from_dict(f) for f in data.get("findings", ())),
                "tables": tuple(Table(**t) for t in data.get("tables", ())),
                "figures": tuple(Figure(**f) for f in data.get("figures", ())),
                "notes": tuple(data.get("notes", ())),
                "warnings": tuple(data.get("warnings", ())),
            }
        )


def read_section(path: str | os.PathLike) -> Section:
    """The section a ``section.json`` holds, checked against ``Section`` and its findings' rules; a ReadBackError
    naming the file, the key and what is allowed where it is not one attnlab wrote."""
    data = read_record(path, Section)
    try:
        return Section.from_dict(data)
    except (Error, TypeError) as exc:  # a finding whose label disagrees with its parts, a key no field takes
        raise ReadBackError(f"{path}: {exc}") from None
