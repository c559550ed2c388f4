"""Head features are per-head means of the row records; head types follow Polynomial Concentration App. H's thresholds in order, and labels keep every test that holds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnlab.diagnostics import HeadThresholds, head_types
from attnlab.diagnostics.heads import classify


def _rows(layer, head, queries, argmax, target_mass, entropy, sink_mass, status="active"):
    n = len(queries)
    return pd.DataFrame(
        {
            "layer": [layer] * n,
            "head": [head] * n,
            "query": queries,
            "argmax": argmax,
            "target_mass": target_mass,
            "entropy": entropy,
            "sink_mass": sink_mass,
            "status": [status] * n if isinstance(status, str) else status,
        }
    )


def test_features_are_per_head_means_and_types_follow_thresholds():
    rows = pd.concat(
        [
            _rows(0, 0, [10, 20], [0, 0], [0.0, 0.1], [1.0, 2.0], [0.9, 0.7]),  # sink
            _rows(0, 1, [10, 20], [9, 19], [0.6, 0.8], [0.5, 0.5], [0.1, 0.1]),  # induction
            _rows(1, 0, [10, 20], [8, 15], [0.0, 0.1], [0.5, 0.5], [0.0, 0.2]),  # local: distance 3.5
            _rows(1, 1, [30, 40], [0, 1], [0.2, 0.2], [3.0, 3.0], [0.1, 0.1]),  # diffuse
            _rows(1, 1, [50], [0], [np.nan], [np.nan], [np.nan], status="nan"),  # unreadable: left out
        ],
        ignore_index=True,
    )
    out = head_types(rows)
    assert out[["layer", "head"]].values.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert out["head_type"].tolist() == ["sink", "induction", "local", "diffuse"]
    expected = {
        (1, 0): dict(induction=0.05, entropy=0.5, locality=3.5, sink=0.1),
        (1, 1): dict(induction=0.2, entropy=3.0, locality=34.5, sink=0.1),
    }
    for (layer, head), feats in expected.items():
        got = out[(out["layer"] == layer) & (out["head"] == head)].iloc[0]
        for k, v in feats.items():
            assert got[k] == pytest.approx(v)


def test_order_and_boundaries_of_the_rules():
    feats = pd.DataFrame(
        {
            "sink": [0.3, 0.31, 0.0, 0.0, 0.0],
            "induction": [0.6, 0.9, 0.5, 0.1, 0.05],
            "locality": [1.0, 1.0, 1.0, 1.0, 8.0],
            "entropy": [0.0] * 5,
        }
    )
    # strict inequalities: 0.3 is not a sink, 0.5 not induction, 0.1 not local, 8 not local
    assert classify(feats).tolist() == ["induction", "sink", "diffuse", "diffuse", "diffuse"]
    assert classify(feats, HeadThresholds(sink=0.2, local_distance=9)).tolist() == [
        "sink",
        "sink",
        "diffuse",
        "diffuse",
        "local",
    ]


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="argmax"):
        head_types(pd.DataFrame({"layer": [0], "head": [0]}))


def test_labels_keep_every_test_that_holds():
    from attnlab.diagnostics.heads import labels

    feats = pd.DataFrame(
        {
            "sink": [0.8, 0.8, 0.0, 0.31, 0.0],
            "induction": [0.7, 0.0, 0.6, 0.05, 0.2],
            "locality": [30.0, 2.0, 30.0, 2.0, 30.0],
            "entropy": [0.0] * 5,
        }
    )
    assert labels(feats).tolist() == ["sink+induction", "sink+local", "induction", "sink+local", "diffuse"]
    # the paper's first-match rule keeps only the first label of each
    assert classify(feats).tolist() == [got.split("+")[0] for got in labels(feats)]


def test_an_induction_head_resting_on_the_first_token_keeps_both_labels():
    """Where there is no planted B the head rests on the sink; where there is one it attends B (target mass
    there only: the command sets target_mass to NaN on rows without an answer key)."""
    rows = pd.concat(
        [
            _rows(0, 0, [5, 6, 7], [0, 0, 0], [np.nan] * 3, [0.2] * 3, [0.95] * 3),
            _rows(0, 0, [20, 21], [12, 13], [0.9, 0.8], [0.3] * 2, [0.05] * 2),
        ],
        ignore_index=True,
    )
    out = head_types(rows).iloc[0]
    assert out["induction"] == pytest.approx(0.85) and out["sink"] == pytest.approx(0.59)
    assert out["head_type"] == "sink" and out["labels"] == "sink+induction"
