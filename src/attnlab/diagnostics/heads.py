"""Per-head features and the sink / induction / local / diffuse head types (Polynomial Concentration App. H,
Attention Sinks Essential)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from attnlab.errors import ArgumentError, ArgumentTypeError

HEAD_KEYS = ("layer", "head")
TYPES = ("sink", "induction", "local", "diffuse")


@dataclass(frozen=True)
class HeadThresholds:
    """Polynomial Concentration App. H: sink if sink > 0.3; induction if induction > 0.5; local if locality < 8 and
    induction < 0.1; otherwise diffuse (checked in that order)."""

    sink: float = 0.3
    induction: float = 0.5
    local_distance: float = 8.0
    local_induction: float = 0.1

    def __post_init__(self) -> None:
        for name in ("sink", "induction", "local_induction"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ArgumentError(f"threshold {name} is a share of weight in [0, 1], got {value!r}")
        if (
            isinstance(self.local_distance, bool)
            or not isinstance(self.local_distance, (int, float))
            or not 0 < self.local_distance < float("inf")
        ):
            raise ArgumentError(
                f"threshold local_distance is a finite distance > 0 in keys, got {self.local_distance!r}"
            )


def head_features(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (layer, head): induction = mean target mass, entropy = mean row entropy, locality = mean
    distance from the query to its argmax key, sink = mean sink mass (Polynomial Concentration App. H).

    ``rows`` is a per-row table with columns layer, head, query, argmax, target_mass, entropy and
    sink_mass; rows whose status is "nan", "inf" or "empty" are left out (they carry no weights).
    """
    need = [*HEAD_KEYS, "query", "argmax", "target_mass", "entropy", "sink_mass", "status"]
    if not isinstance(rows, pd.DataFrame):
        raise ArgumentTypeError(
            f"head_features takes a pandas DataFrame of rows (row_stats' table), got {type(rows).__name__}"
        )
    missing = [c for c in need if c not in rows.columns]
    if missing:
        raise ArgumentError(f"head_features needs columns {missing}; the table has {list(rows.columns)}")
    ok = rows[~rows["status"].isin(("nan", "inf", "empty"))]
    frame = pd.DataFrame(
        {
            "layer": ok["layer"],
            "head": ok["head"],
            "induction": ok["target_mass"],
            "entropy": ok["entropy"],
            "locality": (ok["query"] - ok["argmax"]).astype(np.float64),
            "sink": ok["sink_mass"],
        }
    )
    return frame.groupby(list(HEAD_KEYS), sort=True).mean().reset_index()


def _tests(features: pd.DataFrame, t: HeadThresholds) -> list[pd.Series]:
    """Whether each head passes the sink, induction and local tests of Polynomial Concentration App. H. Each
    feature is a mean over the rows where it is defined (induction: the rows with a planted B)."""
    return [
        features["sink"] > t.sink,
        features["induction"] > t.induction,
        (features["locality"] < t.local_distance) & (features["induction"] < t.local_induction),
    ]


def classify(features: pd.DataFrame, thresholds: HeadThresholds = HeadThresholds()) -> pd.Series:
    """The head type of each feature row by Polynomial Concentration App. H's rule: the first test that holds,
    in the order sink, induction, local, else "diffuse"."""
    kinds = np.select(_tests(features, thresholds), list(TYPES[:3]), default="diffuse")
    return pd.Series(kinds, index=features.index, name="head_type")


def labels(features: pd.DataFrame, thresholds: HeadThresholds = HeadThresholds()) -> pd.Series:
    """Every type whose test holds, joined by "+" ("sink+induction"), else "diffuse". App. H's first-match
    rule hides an induction head behind its sink label: a head that puts most of its weight on the planted
    token where there is one may rest on the first token where there is none."""
    held = pd.concat(_tests(features, thresholds), axis=1).to_numpy(dtype=bool)
    joined = ["+".join(k for k, on in zip(TYPES, row) if on) or "diffuse" for row in held]
    return pd.Series(joined, index=features.index, name="labels", dtype=object)


def head_types(rows: pd.DataFrame, thresholds: HeadThresholds = HeadThresholds()) -> pd.DataFrame:
    """head_features with ``head_type`` (App. H's first-match rule) and ``labels`` (every test that holds)."""
    features = head_features(rows)
    return features.assign(head_type=classify(features, thresholds), labels=labels(features, thresholds))
