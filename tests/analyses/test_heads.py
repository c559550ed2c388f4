"""attnlab heads: per-head features equal a brute-force loop over the eager model's attention weights."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import hooks, tasks
from attnlab.analyses import heads
from attnlab.analyses.run import RunError
from attnlab.diagnostics.heads import TYPES, HeadThresholds, classify, labels
from hostile_json import hostile, one_line


def _brute_force(model, prompts, every):
    """Per (layer, head) features from output_attentions, one row at a time."""
    acc = {}
    for prompt in prompts:
        ids = prompt.input_ids
        t = len(ids)
        with torch.no_grad():
            attn = model(input_ids=torch.tensor([ids]), output_attentions=True).attentions
        for q in sorted({*range(every - 1, t, every), t - 1}):
            first = ids.index(ids[q])
            for layer, a in enumerate(attn):
                for h in range(a.shape[1]):
                    w = a[0, h, q, : q + 1].double()
                    f = acc.setdefault((layer, h), {"induction": [], "entropy": [], "locality": [], "sink": []})
                    if first < q:
                        f["induction"].append(float(w[first + 1]))
                    nz = w[w > 0]
                    f["entropy"].append(float(-(nz * nz.log()).sum()))
                    f["locality"].append(q - int(w.argmax()))
                    f["sink"].append(float(w[0]))
    return pd.DataFrame(
        [{"layer": k[0], "head": k[1], **{n: np.mean(v) for n, v in f.items()}} for k, f in sorted(acc.items())]
    )


def test_head_features_and_types_match_brute_force(checkpoint, tmp_path):
    cfg = heads.HeadsConfig(model=str(checkpoint), prompts=3, length=48, queries="every:5", rule="paper")
    result = heads.run(cfg, tmp_path / "out", progress=False)
    model, tok = hooks.load_model(checkpoint)
    prompts = tasks.build_suite("induction", tok, 3, seed=0, length=48)
    ref = _brute_force(model, prompts, every=5)
    got = pd.read_csv(result["paths"]["heads"])
    assert len(got) == len(ref) == 2 * 4
    for col in ("induction", "entropy", "sink", "locality"):
        np.testing.assert_allclose(got[col], ref[col], rtol=1e-4, atol=1e-6)
    assert got["head_type"].tolist() == classify(ref, HeadThresholds()).tolist()
    counts = result["table"].set_index("head type")["heads"]
    assert (
        counts.sum() == 8
        and counts.to_dict() == got["head_type"].value_counts().reindex(counts.index, fill_value=0).to_dict()
    )


def test_labels_count_a_head_under_every_type_it_passes(checkpoint, tmp_path):
    cfg = heads.HeadsConfig(model=str(checkpoint), prompts=3, length=48, queries="every:5")
    result = heads.run(cfg, tmp_path / "out", progress=False)
    got = pd.read_csv(result["paths"]["heads"])
    assert got["labels"].tolist() == labels(got[["sink", "induction", "locality", "entropy"]]).tolist()
    counts = result["table"].set_index("head type")["heads"].to_dict()
    assert counts == {k: sum(k in held.split("+") for held in got["labels"]) for k in TYPES}
    with pytest.raises(RunError, match="--rule takes labels or paper"):
        heads.HeadsConfig(model=str(tmp_path), rule="first")


def test_bad_sizes_are_refused_before_loading(tmp_path):
    with pytest.raises(RunError, match="--prompts"):
        heads.HeadsConfig(model=str(tmp_path), prompts=0)
    with pytest.raises(RunError, match="--length"):
        heads.HeadsConfig(model=str(tmp_path), length=0)


@pytest.mark.parametrize(("label", "data"), hostile({"model": "m", "seed": 0}, "model", "model"))
def test_a_hostile_config_json_of_a_types_folder_is_one_line(tmp_path, label, data):
    """--types FOLDER: its config.json read back against HeadsConfig; one that does not fit is one line naming --types
    and the folder."""
    pd.DataFrame({"layer": [0], "head": [0], "head_type": ["sink"], "labels": ["sink"]}).to_csv(tmp_path / "heads.csv")
    (tmp_path / "config.json").write_bytes(data)
    with pytest.raises(RunError) as caught:
        heads.head_type_table(tmp_path, "m")
    one_line(caught.value, "--types", tmp_path / "config.json")
