"""The sinks study (seed 004): verdicts come from the raw files, BOS mass skips the right queries, resume skips work."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import io
from attnlab.experiments import study_sinks as sinks
from attnlab.experiments.studies import StudyConfig, StudyError, run
from attnlab.model import Decoder

L, J = sinks.LENGTH, sinks.TRIGGER


def _maps(run: str, heads: int, layers: int, bos: float) -> pd.DataFrame:
    """Causal maps whose pre-trigger rows put ``bos`` on key 1 (rest spread evenly), query 1 all on BOS."""
    attention, arch = run.split("_")
    rows = []
    for layer in range(1, layers + 1):
        for head in range(1, heads + 1):
            for q in range(1, L + 1):
                for k in range(1, L + 1):
                    if k > q:
                        w = 0.0
                    elif q == 1:
                        w = 1.0
                    elif 1 < q < J:
                        w = bos if k == 1 else (1 - bos) / (q - 1)
                    else:
                        w = 0.5 if k == 1 else 0.5 / (q - 1)
                    rows.append((run, attention, arch, layer, head, q, k, w, 0.01))
    return pd.DataFrame(rows, columns=["run", "attention", "arch", "layer", "head", "query", "key", "mean", "std"])


def _folder(tmp_path, bos: dict[str, float], ratio: dict[str, float]):
    io.write_json(tmp_path / "config.json", {"study": "sinks", "budget": "smoke", "model": None, "seed": 0})
    for name in sinks.RUNS:
        shape = sinks.ARCHS[name.split("_")[1]]
        io.write_parquet(tmp_path / "raw" / f"{name}_attention.parquet",
                         _maps(name, shape["heads"], shape["layers"], bos[name]))
        zero = 0.1
        row = {"run": name, "attention": name.split("_")[0], "arch": name.split("_")[1], "steps": 10, "lr": 1e-3,
               "init": "gpt2", "train_loss": ratio[name] * zero, "uniform_loss": ratio[name] * zero,
               "uniform_linf": 0.5, "uniform_zero_loss": zero, "uniform_zero_linf": 2.0,
               "fixed_loss": ratio[name] * zero, "fixed_linf": 0.5, "fixed_zero_loss": zero, "fixed_zero_linf": 2.0}
        io.write_table(tmp_path / "raw" / f"{name}_loss", pd.DataFrame([row]))
        (tmp_path / "runs" / name).mkdir(parents=True)
        pd.DataFrame({"step": [1, 2], "loss": [0.1, 0.01]}).to_csv(tmp_path / "runs" / name / "train.csv", index=False)
    return tmp_path


GOOD_BOS = {"softmax_1x1": 0.97, "relu_1x1": 0.01, "softmax_2x2": 0.95, "relu_2x2": 0.0}
LOW = dict.fromkeys(sinks.RUNS, 1e-4)


def test_bos_mass_skips_the_bos_query_and_the_trigger_row(tmp_path):
    bos = sinks.bos_table(_maps("softmax_1x1", 1, 1, 0.3))
    assert bos["bos_mass"].item() == pytest.approx(0.3)    # query 1 (weight 1) and rows >= J (0.5) left out
    assert bos["bos_at_trigger"].item() == pytest.approx(0.5)
    assert bos["row_total"].item() == pytest.approx(1.0)


def test_summarize_reproduced_when_the_numbers_say_so(tmp_path):
    section = sinks.summarize(_folder(tmp_path, GOOD_BOS, LOW))
    assert [f.verdict for f in section.findings] == ["reproduced", "reproduced"]
    assert "0.97" in section.findings[0].evidence
    for stem in ("table_losses", "table_bos_mass"):
        assert (tmp_path / f"{stem}.csv").is_file() and (tmp_path / f"{stem}.md").is_file()
    for fig in section.figures:
        assert (tmp_path / f"{fig.stem}.png").is_file() and (tmp_path / f"{fig.stem}.svg").is_file()
    assert len(pd.read_csv(tmp_path / "table_bos_mass.csv")) == 1 + 1 + 4 + 4


def _findings(tmp_path, bos, ratio):
    maps, raw = sinks._read(_folder(tmp_path, bos, ratio))
    loss, mass = sinks.loss_table(raw), sinks.bos_table(maps)
    return [sinks.finding(arch, loss, mass) for arch in sinks.ARCHS]


def test_verdict_not_reproduced_when_relu_sinks_or_softmax_does_not(tmp_path):
    findings = _findings(tmp_path / "a", {**GOOD_BOS, "relu_2x2": 0.4}, LOW)
    assert [f.verdict for f in findings] == ["reproduced", "not reproduced"]
    findings = _findings(tmp_path / "b", {**GOOD_BOS, "softmax_1x1": 0.85}, LOW)
    assert [f.verdict for f in findings] == ["not reproduced", "reproduced"]


def test_verdict_not_checked_when_a_run_did_not_learn(tmp_path):
    findings = _findings(tmp_path, GOOD_BOS, {**LOW, "softmax_1x1": 0.5})
    assert findings[0].verdict == "not checked"
    assert "softmax did not reach low loss" in findings[0].evidence
    assert findings[1].verdict == "reproduced"


def test_summarize_names_missing_pieces(tmp_path):
    folder = _folder(tmp_path, GOOD_BOS, LOW)
    (folder / "raw" / "relu_2x2_loss.csv").unlink()
    with pytest.raises(StudyError, match="relu_2x2"):
        sinks.summarize(folder)


def test_attention_maps_are_softmax_rows_and_losses_score_zero():
    plan = {**sinks.BUDGETS["smoke"], "steps": {"1x1": 1, "2x2": 1}}
    model = Decoder(sinks.run_config("softmax_2x2", plan, 0).model)
    batch = sinks.TriggerAveraging(trigger=J).generate(32, L, seed=0)
    mean, std = sinks.attention_maps(model, batch.inputs)
    assert mean.shape == std.shape == (2, 2, L, L)
    assert torch.allclose(mean.sum(-1), torch.ones(2, 2, L))
    assert torch.all(mean.triu(1) == 0)
    scores = sinks.losses(model, batch.inputs, batch.targets)
    # the zero predictor's loss: the target's squared norm at the trigger, averaged over L positions
    expected = float(batch.targets.pow(2).sum(-1).sum(-1).mean() / L)
    assert scores["zero_loss"] == pytest.approx(expected)


def test_run_end_to_end_and_resume_without_retraining(tmp_path, monkeypatch):
    tiny = {"steps": {"1x1": 6, "2x2": 4}, "lr": {"1x1": 1e-3, "2x2": 1e-3}, "batch": 8, "samples": 20}
    monkeypatch.setitem(sinks.BUDGETS, "smoke", tiny)
    section = run(StudyConfig(study="sinks", budget="smoke", seed=0), tmp_path)
    assert section.study == "sinks" and len(section.findings) == 2
    assert all(f.verdict in ("reproduced", "not reproduced", "not checked") for f in section.findings)
    assert json.loads((tmp_path / "section.json").read_text())["study"] == "sinks"

    kept = tmp_path / "raw" / "softmax_1x1_loss.csv"
    before = kept.stat().st_mtime_ns
    (tmp_path / "raw" / "relu_2x2_loss.csv").unlink()
    os.utime(kept, ns=(before, before))
    sinks.compute(StudyConfig(study="sinks", budget="smoke", seed=0), tmp_path, progress=False)
    assert kept.stat().st_mtime_ns == before                                   # finished piece skipped
    assert (tmp_path / "raw" / "relu_2x2_loss.csv").is_file()                   # missing piece rewritten
    records = [json.loads(x) for x in (tmp_path / "runs" / "relu_2x2" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4]  # resumed, not retrained
    assert all(np.isfinite(r["val_linf"]) for r in records if r["kind"] == "eval")
