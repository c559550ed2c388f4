"""What a study hands the report: a section of findings, tables and figures, all pointing at files.

A section holds no number of its own: its tables are CSV files in the study folder and its figures PNG
files beside them, and its findings quote numbers that the study's ``summarize`` read from those files.
``section.json`` in the study folder is the serialized form (``Section.to_dict`` / ``from_dict``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# A paper's claim, which a run may fail to reproduce without any bug.
CLAIM_VERDICTS = ("reproduced", "not reproduced", "not checked")
# An identity the code must satisfy (weights sum to 1, masked keys get none): reporting it as "reproduced"
# would count a test of attnlab among the papers' findings.
CHECK_VERDICTS = ("check passed", "check failed")
VERDICTS = CLAIM_VERDICTS + CHECK_VERDICTS


@dataclass(frozen=True)
class Finding:
    """One qualitative claim of a paper, or one identity attnlab checks, and what this run shows about it.

    verdict, for a paper's claim: "reproduced", "not reproduced", or "not checked" (the run could not test
    it, e.g. the models did not learn); for an identity: "check passed" or "check failed". evidence: the
    numbers, in words, that decide it."""

    claim: str
    verdict: str
    evidence: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, got {self.verdict!r}")

    @property
    def is_check(self) -> bool:
        """Whether this is an identity attnlab checks rather than a paper's claim."""
        return self.verdict in CHECK_VERDICTS


@dataclass(frozen=True)
class Table:
    """A table file, ``stem`` relative to the study folder (``stem.csv`` and ``stem.md`` exist)."""

    stem: str
    caption: str


@dataclass(frozen=True)
class Figure:
    """A figure file, ``stem`` relative to the study folder (``stem.png`` and ``stem.svg`` exist);
    the caption says what the figure shows and how to read it."""

    stem: str
    caption: str


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
        return cls(**{**data,
                      "findings": tuple(Finding(**f) for f in data.get("findings", ())),
                      "tables": tuple(Table(**t) for t in data.get("tables", ())),
                      "figures": tuple(Figure(**f) for f in data.get("figures", ())),
                      "notes": tuple(data.get("notes", ())),
                      "warnings": tuple(data.get("warnings", ()))})
