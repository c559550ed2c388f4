"""Per-head features and the sink / induction / local / diffuse head types (Polynomial Concentration App. H,
Attention Sinks Essential)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

HEAD_KEYS = ("layer", "head")


@dataclass(frozen=True)
class HeadThresholds:
    """Polynomial Concentration App. H: sink if sink > 0.3; induction if induction > 0.5; local if locality < 8 and
    induction < 0.1; otherwise diffuse (checked in that order)."""

    sink: float = 0.3
    induction: float = 0.5
    local_distance: float = 8.0
    local_induction: float = 0.1


def head_features(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (layer, head): induction = mean target mass, entropy = mean row entropy, locality = mean
    distance from the query to its argmax key, sink = mean sink mass (Polynomial Concentration App. H).

    ``rows`` is a per-row table with columns layer, head, query, argmax, target_mass, entropy and
    sink_mass; rows whose status is "nan", "inf" or "empty" are left out (they carry no weights).
    """
    need = [*HEAD_KEYS, "query", "argmax", "target_mass", "entropy", "sink_mass", "status"]
    missing = [c for c in need if c not in rows.columns]
    if missing:
        raise ValueError(f"head_features needs columns {missing}; the table has {list(rows.columns)}")
    ok = rows[~rows["status"].isin(("nan", "inf", "empty"))]
    frame = pd.DataFrame({
        "layer": ok["layer"], "head": ok["head"],
        "induction": ok["target_mass"], "entropy": ok["entropy"],
        "locality": (ok["query"] - ok["argmax"]).astype(np.float64), "sink": ok["sink_mass"],
    })
    return frame.groupby(list(HEAD_KEYS), sort=True).mean().reset_index()


def classify(features: pd.DataFrame, thresholds: HeadThresholds = HeadThresholds()) -> pd.Series:
    """The head type of each feature row: "sink", "induction", "local" or "diffuse" (Polynomial Concentration App.
    H)."""
    t = thresholds
    kinds = np.select(
        [features["sink"] > t.sink,
         features["induction"] > t.induction,
         (features["locality"] < t.local_distance) & (features["induction"] < t.local_induction)],
        ["sink", "induction", "local"], default="diffuse")
    return pd.Series(kinds, index=features.index, name="head_type")


def head_types(rows: pd.DataFrame, thresholds: HeadThresholds = HeadThresholds()) -> pd.DataFrame:
    """head_features with a ``head_type`` column."""
    features = head_features(rows)
    return features.assign(head_type=classify(features, thresholds))
