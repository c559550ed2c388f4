"""study rowmaps: map_table's sum, support, largest weight, entropy and weight on the top allowed score equal a hand
computation on a known row; the finding is 'check passed' exactly when normalized maps sum to 1 and no map weighs
the masked key; summarize rebuilds table and figure from the folder's row.json alone."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import io
from attnlab.readback import ReadBackError
from attnlab.studies import StudyConfig
from attnlab.studies import rowmaps as sr
from hostile_json import hostile, one_line

# Four allowed keys and a masked one whose score beats them all: ignoring the mask would move the argmax there.
ROW = torch.tensor([2.0, 1.5, 0.0, -1.0, 3.0])
MASK = torch.tensor([True, True, True, True, False])


def _softmax():
    e = np.exp(np.array([2.0, 1.5, 0.0, -1.0]))
    return [*(e / e.sum()), 0.0]


# Weights worked out from each map's formula on the four allowed keys.
HAND = {
    "softmax": _softmax(),
    # sparsemax: two keys pass 1 + k z_(k) > sum_(j<=k) z_(j); tau = (2 + 1.5 - 1) / 2 = 1.25.
    "sparsemax": [0.75, 0.25, 0.0, 0.0, 0.0],
    # relu^2 normalized: (4, 2.25) / 6.25.
    "relu_p2_b0": [0.64, 0.36, 0.0, 0.0, 0.0],
    "topk_k1": [1.0, 0.0, 0.0, 0.0, 0.0],
    # ReLU attention divides by max(L - 2, 1) with L = 4 allowed keys, and is not normalized.
    "reluattn": [1.0, 0.75, 0.0, 0.0, 0.0],
}


def _entropy(w):
    return -sum(x * math.log(x) for x in w if x > 0)


def test_map_table_matches_a_hand_computation_on_a_known_row():
    table, weights = sr.map_table(ROW, MASK, tuple(HAND))
    assert list(table.columns) == list(sr.COLUMNS) and table.name.tolist() == list(HAND)
    for record in table.itertuples():
        w = HAND[record.name]
        np.testing.assert_allclose(weights[record.name], w, rtol=1e-6, atol=1e-7)
        assert record.sum == pytest.approx(sum(w), rel=1e-6)
        assert record.support == sum(x > 0 for x in w)
        assert record.max_weight == pytest.approx(max(w), rel=1e-6)
        # The largest allowed score is key 0; the masked key 4 scores higher and must not be picked.
        assert record.argmax_weight == pytest.approx(w[0], rel=1e-6)
        if record.normalized:
            assert record.entropy == pytest.approx(_entropy(w), rel=1e-5, abs=1e-7)
        else:
            assert math.isnan(record.entropy)
    assert table.set_index("name").normalized.to_dict() == {
        "softmax": True,
        "sparsemax": True,
        "relu_p2_b0": True,
        "topk_k1": True,
        "reluattn": False,
    }


def test_entropy_is_over_the_nonzero_weights_in_nats():
    assert sr.entropy(np.array([0.5, 0.5, 0.0])) == pytest.approx(math.log(2))
    assert sr.entropy(np.array([1.0, 0.0])) == 0
    assert sr.entropy(np.full(8, 1 / 8, dtype=np.float32)) == pytest.approx(math.log(8), rel=1e-6)


def test_the_sample_row_is_seeded_with_its_large_scores_at_allowed_keys():
    z, mask = sr.sample_row(3)
    again, _ = sr.sample_row(3)
    assert torch.equal(z, again) and not torch.equal(z, sr.sample_row(4)[0])
    assert z.dtype == torch.float32 and z.shape == mask.shape == (sr.KEYS,)
    assert mask.tolist() == [k != sr.MASKED_KEY for k in range(sr.KEYS)]
    assert z[sr.MASKED_KEY] == pytest.approx(sr.MASKED_SCORE)
    allowed = z[mask].tolist()
    assert all(any(v == pytest.approx(x) for v in allowed) for x in sr.LARGE)


def test_every_map_of_the_sample_row_passes_the_check():
    z, mask = sr.sample_row()
    table, weights = sr.map_table(z, mask)
    assert table.name.tolist() == list(sr.MAPS)
    found = sr.finding(table, weights, mask.numpy())
    assert found.verdict == "check passed" and found.is_check
    assert found.evidence.startswith(f"largest |sum - 1| over the {int(table.normalized.sum())} normalized maps: ")
    assert found.evidence.endswith("largest weight on the masked key over all maps: 0")


@pytest.mark.parametrize("spoil", ["sum", "masked"])
def test_the_check_fails_on_a_sum_off_one_or_weight_on_the_masked_key(spoil):
    table, weights = sr.map_table(ROW, MASK, ("softmax", "sparsemax", "reluattn"))
    if spoil == "sum":
        # Past float32 rounding of a sum of a few weights.
        table.loc[table.name == "softmax", "sum"] = 1 + 2e-5
    else:
        weights["reluattn"] = np.array([1.0, 0.75, 0.0, 0.0, 1e-30], dtype=np.float32)
    found = sr.finding(table, weights, MASK.numpy())
    assert found.verdict == "check failed"
    assert ("2e-05" in found.evidence) == (spoil == "sum") and ("1e-30" in found.evidence) == (spoil == "masked")


def test_a_non_normalized_map_may_sum_to_anything():
    table, weights = sr.map_table(ROW, MASK, ("reluattn", "softmax"))
    assert table.set_index("name")["sum"]["reluattn"] == pytest.approx(1.75)
    assert sr.finding(table, weights, MASK.numpy()).verdict == "check passed"


def test_compute_writes_the_row_once(tmp_path):
    sr.compute(StudyConfig(study="rowmaps", seed=2), tmp_path, progress=False)
    saved = json.loads((tmp_path / "row.json").read_text())
    z, mask = sr.sample_row(2)
    assert saved == {"seed": 2, "maps": list(sr.MAPS), "row": z.tolist(), "mask": mask.tolist()}
    sr.compute(StudyConfig(study="rowmaps", seed=5), tmp_path, progress=False)
    assert json.loads((tmp_path / "row.json").read_text()) == saved


def test_summarize_reads_only_the_folders_row(tmp_path, monkeypatch):
    folder = tmp_path / "rm"
    folder.mkdir()
    # The study's config (the section names its command) and a hand-written row; nothing else.
    io.write_json(folder / "config.json", asdict(StudyConfig(study="rowmaps")))
    maps = ["sparsemax", "reluattn"]
    io.write_json(folder / "row.json", {"seed": 0, "maps": maps, "row": ROW.tolist(), "mask": MASK.tolist()})

    def refuse(*args, **kwargs):
        raise AssertionError("summarize drew a row instead of reading row.json")

    monkeypatch.setattr(sr, "sample_row", refuse)
    section = sr.summarize(folder)
    table = pd.read_csv(folder / "rowmaps.csv")
    assert table.name.tolist() == maps and table.support.tolist() == [2, 2]
    assert table["sum"].tolist() == pytest.approx([1.0, 1.75])
    assert (folder / "rowmaps.png").is_file() and (folder / "rowmaps.svg").is_file()
    assert section.findings[0].verdict == "check passed" and section.command.startswith("attnlab study rowmaps")


SAVED = {"seed": 0, "maps": ["softmax"], "row": [1.0, 2.0], "mask": [True, False]}


@pytest.mark.parametrize(("label", "data"), hostile(SAVED, "row", "mask"))
def test_a_hostile_row_json_is_one_line(tmp_path, label, data):
    (tmp_path / "row.json").write_bytes(data)
    with pytest.raises(ReadBackError) as caught:
        sr.summarize(tmp_path)
    one_line(caught.value, tmp_path / "row.json")


@pytest.mark.parametrize("edit", [{"row": [1.0]}, {"mask": [False, False]}, {"maps": []}], ids=str)
def test_a_row_json_whose_parts_disagree_is_one_line(tmp_path, edit):
    (tmp_path / "row.json").write_text(json.dumps({**SAVED, **edit}))
    with pytest.raises(ReadBackError, match="allowed: one mask entry per score, at least one allowed, at least one"):
        sr.read_row(tmp_path / "row.json")
    (tmp_path / "row.json").write_text(json.dumps(SAVED))
    assert sr.read_row(tmp_path / "row.json") == SAVED
