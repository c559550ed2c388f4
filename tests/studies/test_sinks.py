"""Sinks study (Attention Sinks Essential): verdicts from the files, BOS mass skips the right queries, resume,
real mass = eager's."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import io
from attnlab.model import Decoder
from attnlab.studies import sinks
from attnlab.studies import StudyConfig, StudyError, run

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
    # no real-model part: the section says how to add one
    assert any("attnlab study sinks --model smollm2" in n for n in section.notes)
    assert not (tmp_path / "table_real_layers.csv").exists()


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


# ------------------------------------------------------------------------------------- real-model part

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random 2-layer Llama (4 query / 2 KV heads) whose word tokenizer adds BOS, loaded eager."""
    from attnlab.commands.runs import load

    from checkpoints import save_checkpoint

    folder = save_checkpoint(tmp_path_factory.mktemp("ckpt"))
    return (folder, *load(str(folder)))


def test_first_token_mass_matches_the_eager_attentions(tiny):
    _, model, tok = tiny
    docs = sinks.documents(tok, 2, 40, seed=0)
    assert all(ids[0] == tok.bos_token_id for ids in docs)
    got = sinks.first_token_mass(model, docs, min_query=8)
    assert len(got) == 2 * 2 * 4 and (got["queries"] == 40 - 8).all()
    with torch.no_grad():
        for d, ids in enumerate(docs):
            attentions = model(torch.tensor([ids]), output_attentions=True).attentions
            for layer, a in enumerate(attentions):
                for head in range(4):
                    row = got[(got["document"] == d) & (got["layer"] == layer) & (got["head"] == head)]
                    assert row["mass"].item() == pytest.approx(a[0, head, 8:, 0].double().mean().item(), abs=1e-6)
                    assert row["uniform"].item() == pytest.approx(np.mean(1 / np.arange(9, 41)), rel=1e-12)


def test_first_token_mass_leaves_out_queries_that_cannot_see_key_0():
    from attnlab.site import ScoreBlock

    # 6 queries (positions 0..5), a window of 3 keys: key 0 is hidden from positions 3..5
    pos = torch.arange(6)
    allowed = ((pos[None, :] <= pos[:, None]) & (pos[None, :] > pos[:, None] - 3))[None, None]
    scores = torch.zeros(1, 2, 6, 6).masked_fill(~allowed, torch.finfo(torch.float32).min)
    mass, uniform, count = sinks.first_key_sums(ScoreBlock(0, scores, allowed, 0, 6), min_query=1)
    assert count.tolist() == [2.0, 2.0]                                       # positions 1 and 2 only
    assert mass.tolist() == pytest.approx([1 / 2 + 1 / 3] * 2) and uniform.tolist() == mass.tolist()


def _real(folder, median_mass: float, layers: int = 6, heads: int = 4, documents: int = 2):
    """Hand-made real-model files: in every layer after the first two, the heads' masses spread around
    ``median_mass``; layers 0 and 1 put 0.01 on key 0."""
    rows = []
    for d in range(documents):
        for layer in range(layers):
            for head in range(heads):
                mass = 0.01 if layer < sinks.SKIP_LAYERS else min(1.0, median_mass * (0.5 + head / (heads - 1)))
                rows.append((d, layer, head, 248, mass, 0.014))
    io.write_parquet(folder / "real" / sinks.REAL_TABLE,
                     pd.DataFrame(rows, columns=["document", "layer", "head", "queries", "mass", "uniform"]))
    io.write_json(folder / "real" / "config.json", {
        "model": "hand-made", "checkpoint": "/nowhere", "model_type": "llama", "layers": layers, "heads": heads,
        "documents": documents, "tokens": 256, "min_query": 8, "seed": 0, "device": "cpu", "dtype": "float32",
        "adds_bos": False, "first_tokens": ["The"], "seconds": 1.0})
    return folder


def test_real_verdict_follows_the_median_head(tmp_path):
    sinking = sinks.summarize(_real(_folder(tmp_path / "a", GOOD_BOS, LOW), median_mass=0.6))
    assert len(sinking.findings) == 3 and sinking.findings[2].verdict == "reproduced"
    assert "4 of 4 layers after the first 2 reach 0.3" in sinking.findings[2].evidence
    assert "L2 0.60" in sinking.findings[2].evidence and "first text token (The)" in sinking.findings[2].claim
    table = pd.read_csv(tmp_path / "a" / "table_real_layers.csv")
    assert table["median"].tolist() == pytest.approx([0.01, 0.01] + [0.6] * 4)
    assert table["sink_heads"].tolist() == [0, 0, 4, 4, 4, 4]
    for ext in ("png", "svg"):
        assert (tmp_path / "a" / f"real_first_token_mass.{ext}").is_file()
    assert "real_first_token_mass" in [f.stem for f in sinking.figures]

    spread = _real(tmp_path / "b", median_mass=0.02)
    finding, *_ = sinks.summarize_real(spread)
    assert finding.verdict == "not reproduced" and "0 of 4 layers" in finding.evidence
    shallow = _real(tmp_path / "c", median_mass=0.9, layers=2)
    assert sinks.summarize_real(shallow)[0].verdict == "not checked"


def test_summarize_names_a_missing_real_part(tmp_path):
    folder = _folder(tmp_path, GOOD_BOS, LOW)
    io.write_json(folder / "config.json", {"study": "sinks", "budget": "smoke", "model": "smollm2", "seed": 0})
    with pytest.raises(StudyError, match="lacks the real-model results on smollm2"):
        sinks.summarize(folder)


def test_real_compute_writes_config_last_and_resumes(tiny, tmp_path, monkeypatch):
    folder, _, _ = tiny
    monkeypatch.setitem(sinks.REAL_PLANS, "smoke", {"documents": 2, "tokens": 24})
    cfg = StudyConfig(study="sinks", model=str(folder))
    sinks.compute_real(cfg, tmp_path, progress=False)
    raw = pd.read_parquet(tmp_path / "real" / sinks.REAL_TABLE)
    config = json.loads((tmp_path / "real" / "config.json").read_text())
    assert len(raw) == 2 * 2 * 4 and raw["mass"].between(0, 1).all()
    assert config["adds_bos"] and config["first_tokens"] == ["<s>"] and config["tokens"] == 24
    before = (tmp_path / "real" / sinks.REAL_TABLE).stat().st_mtime_ns
    sinks.compute_real(cfg, tmp_path, progress=False)
    assert (tmp_path / "real" / sinks.REAL_TABLE).stat().st_mtime_ns == before


def test_real_compute_bad_model_is_one_line_study_error(tmp_path):
    with pytest.raises(StudyError, match="--model /no/such/model: .*neither a path nor a known model name"):
        sinks.compute_real(StudyConfig(study="sinks", model="/no/such/model"), tmp_path, progress=False)
    assert not (tmp_path / "real").exists()


@pytest.mark.real
def test_smollm2_first_token_mass_invariants(real_models):
    model, tok = real_models("smollm2")
    docs = sinks.documents(tok, 2, 48, seed=0)
    got = sinks.first_token_mass(model, docs)
    assert len(got) == 2 * 30 * 9 and got["mass"].between(0, 1).all()
    assert (got["queries"] == 48 - sinks.MIN_QUERY).all()
    assert (sinks.head_table(got)["mass"] > got["uniform"].max()).any()


@pytest.mark.parametrize("budget", sorted(sinks.BUDGETS))
def test_every_budgets_runs_build_and_take_a_batch_without_training(budget):
    from attnlab.tasks.vectors import TriggerAveraging

    plan = sinks.BUDGETS[budget]
    batch = TriggerAveraging(dim=sinks.DIM).generate(2, sinks.LENGTH, seed=0)
    for run in sinks.RUNS:
        cfg = sinks.run_config(run, plan, 0)
        assert cfg.train.steps == plan["steps"][sinks._parts(run)[1]]
        with torch.no_grad():
            out = Decoder(cfg.model)(batch.inputs)
        assert out.shape[:2] == batch.inputs.shape[:2], (budget, run)
