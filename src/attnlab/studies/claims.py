"""Every numbered result of the five papers, and what attnlab does with it: the claims tables.

A paper reports theorems, propositions, corollaries, lemmas, tables and figures. For each, its study's
``claims`` module registers one ``Claim``: the finding (by ``Finding.name``) that decides it and the budget of the
run that does, or why no run here decides it and the budget that would (model size, data, GPU hours). The docs
site shows one table per paper, with the label each finding got in the last recorded run (``recorded_labels``), so
a reader can tell "not asked" from "not possible here". A test keeps the tables true: every finding a study or the
card declares is cited by some claim, and every finding a claim cites is declared.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from attnlab import papers
from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.registry import Registry

# An H100's dense bf16 peak (989 TFLOP/s) at 40% model-FLOPs utilization: what ``gpu_hours`` assumes of training
# until a GPU check has measured this package's own step times.
H100_FLOPS = 989e12
UTILIZATION = 0.40
UNDECIDED = "not decided here"  # the claims table's "decided by" where no finding decides a result


@dataclass(frozen=True)
class Claim:
    """One numbered result of a paper. paper: its key (``attnlab.papers``); result: its number as the paper gives
    it ("Prop. 2", "Table 5", "Fig. 6"); where: its section ("§3.2, App. D.2"); says: what it claims, in a
    sentence; findings: the names of the findings that decide it (empty where none does); budget: where decided,
    the run that decides it ("demo: attnlab demo, 2 CPU cores"); where not, what would decide it (model size,
    data, GPU hours: ``gpu_hours``); reason: why no run here decides it (empty where one does)."""

    paper: str
    result: str
    where: str
    says: str
    findings: tuple[str, ...] = ()
    budget: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        papers.get(self.paper)
        for field in ("result", "where", "says", "budget"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise ArgumentError(f"claim {self.key!r}: {field} must be a non-empty string")
        if not isinstance(self.findings, tuple) or not all(isinstance(n, str) and n for n in self.findings):
            raise ArgumentError(f"claim {self.key!r}: findings is a tuple of finding names, got {self.findings!r}")
        if bool(self.findings) == bool(self.reason):
            raise ArgumentError(
                f"claim {self.key!r}: give the findings that decide it, or the reason none does here (not both)"
            )

    @property
    def key(self) -> str:
        return f"{self.paper}: {self.result}"


CLAIMS: Registry[Claim] = Registry("claim")


def register(*claims: Claim) -> tuple[Claim, ...]:
    """Add ``claims`` under "paper: result"; a result is registered once."""
    for claim in claims:
        if not isinstance(claim, Claim):
            raise ArgumentTypeError(f"register takes Claims, got {type(claim).__name__}")
        CLAIMS.register(claim.key, claim)
    return claims


def of(paper: str) -> list[Claim]:
    """The claims of ``paper`` (a key of ``attnlab.papers``), in the order they were registered."""
    papers.get(paper)
    return [c for c in CLAIMS.values() if c.paper == paper]


def cited() -> set[str]:
    """Every finding name some claim cites."""
    return {name for c in CLAIMS.values() for name in c.findings}


def gpu_hours(params: float, tokens: float) -> float:
    """Training's H100-hours by the 6 N T rule (forward and backward FLOPs of ``params`` parameters over ``tokens``
    tokens) at ``UTILIZATION`` of ``H100_FLOPS``: an estimate, to be replaced by measured step times."""
    if params <= 0 or tokens <= 0:
        raise ArgumentError(f"gpu_hours needs params > 0 and tokens > 0, got {params!r}, {tokens!r}")
    return 6 * params * tokens / (H100_FLOPS * UTILIZATION) / 3600


def needs(model: str, data: str, params: float, tokens: float, runs: int = 1) -> str:
    """The budget that would decide a claim that needs pretraining: the model, the data and the estimated
    H100-hours of ``runs`` such trainings (``gpu_hours``)."""
    hours = runs * gpu_hours(params, tokens)
    times = f"{runs} runs of " if runs > 1 else ""
    return (
        f"{times}{model} on {data}: about {hours:,.0f} H100-hours (6 N T FLOPs at "
        f"{UTILIZATION:.0%} of an H100's bf16 peak, an estimate)"
    )


def recorded_labels(folders: Iterable[Path]) -> dict[str, str]:
    """finding name -> verdict, from the recorded runs in ``folders``: each one a study folder (its
    ``section.json``) or a card folder (its ``card.json``), read as plain JSON. A name recorded twice keeps every
    verdict it got, joined by " / " in the order of ``folders``."""
    labels: dict[str, list[str]] = {}
    for folder in folders:
        for file in ("section.json", "card.json"):
            path = Path(folder) / file
            if path.is_file():
                for finding in findings_in(json.loads(path.read_text())):
                    if finding.get("name"):
                        labels.setdefault(finding["name"], []).append(finding["verdict"])
    return {name: " / ".join(dict.fromkeys(verdicts)) for name, verdicts in labels.items()}


def findings_in(data: object) -> list[Mapping]:
    """The findings anywhere in a section's or a card's JSON: the objects with a claim and a verdict."""
    if isinstance(data, Mapping):
        if "claim" in data and "verdict" in data:
            return [data]
        return [f for value in data.values() for f in findings_in(value)]
    if isinstance(data, list):
        return [f for value in data for f in findings_in(value)]
    return []


def table(paper: str, labels: Mapping[str, str]) -> pd.DataFrame:
    """The claims table of ``paper``: one row per numbered result, with the findings that decide it and their
    labels in ``labels`` (``recorded_labels``), or why it is not decided here; human column names."""
    rows = []
    for c in of(paper):
        decided = bool(c.findings)
        rows.append(
            {
                "result": c.result,
                "section": c.where,
                "claim": c.says,
                "decided by": "; ".join(c.findings) if decided else UNDECIDED,
                "label (recorded run)": "; ".join(labels.get(n, "not in the record") for n in c.findings)
                if decided
                else "",
                "budget": c.budget,
                "why not here": c.reason,
            }
        )
    return pd.DataFrame(rows)
