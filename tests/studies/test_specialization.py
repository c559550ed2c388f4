"""The specialization study pairs each arm with the same seed's control, decides the headline and the gated-FFN
shrinkage from Student-t intervals over seeds (verdicts that flip with the numbers), compares pairs inside the
early window, and resumes without retraining."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from attnlab import studies
from attnlab.studies import StudyConfig
from attnlab.studies import specialization as spec
from attnlab.train.config import RunConfig


def _runs(gains: dict[str, list[float]], released=20):
    """Runs of gelu/swiglu control and intervention over seeds 0.., whose intervention's final perplexity is
    the control's minus the given gain per seed."""
    rows = []
    for arch, per_seed in gains.items():
        for seed, gain in enumerate(per_seed):
            for arm, ppl in (("control", 10.0), ("intervention", 10.0 - gain)):
                rows.append({"run": spec.run_name(arch, arm, seed), "arch": arch, "arm": arm, "seed": seed,
                             "final_val_loss": math.log(ppl), "final_val_ppl": ppl, "last_eval_val_loss": math.log(ppl),
                             "released_at": released if arm == "intervention" else None})
    return pd.DataFrame(rows)


def _curves(runs, logit_gap=0.2, entropy_gap=0.1):
    rows = []
    for r in runs.itertuples():
        arm = r.arm == "intervention"
        for step in (10, 20, 30):
            rows.append({"run": r.run, "arch": r.arch, "arm": r.arm, "seed": r.seed, "step": step, "tokens": step * 100,
                         "val_loss": 3.0 - step / 10 * (0.4 if arm else 0.33),
                         "upper_entropy": 0.8 + (entropy_gap if arm else 0.0),
                         "upper_logit": 1.0 + step / 10 - (logit_gap if arm else 0.0)})
    return pd.DataFrame(rows)


def _verdicts(gains):
    runs = _runs(gains)
    paired = spec.pairs(runs, _curves(runs))
    gained = spec.gains(paired)
    return spec.headline_finding(gained), spec.shrinkage_finding(spec.shrinkage(paired), gained), gained


def test_pairs_are_the_same_seed_s_control_minus_the_arm():
    runs = _runs({"gelu": [0.5, 0.3], "swiglu": [0.1, 0.2]})
    paired = spec.pairs(runs, _curves(runs)).set_index(["arch", "seed"])
    assert paired.loc[("gelu", 1), "ppl_gain"] == pytest.approx(0.3)
    assert paired.loc[("swiglu", 0), "loss_gain"] == pytest.approx(math.log(10) - math.log(9.9))
    # the intervention's loss 3 - 0.04 step reaches the control's final log(10) = 2.30 at step 17.5, evaluated at 20
    assert paired.loc[("gelu", 0), "tokens_to_control_final_loss"] == 2000


def test_the_headline_and_shrinkage_verdicts_follow_the_intervals():
    headline, shrink, gained = _verdicts({"gelu": [0.5, 0.45, 0.55], "swiglu": [0.1, 0.05, 0.12]})
    gelu = gained.set_index(["arch", "arm"]).loc[("gelu", "intervention")]
    assert gelu.ppl_gain_mean == pytest.approx(0.5) and gelu.ppl_gain_lo > 0
    assert headline.verdict == "reproduced" and shrink.verdict == "reproduced"
    noisy, _, _ = _verdicts({"gelu": [0.5, -0.4, 0.3], "swiglu": [0.1, 0.0, 0.1]})
    assert noisy.verdict == "not reproduced" and "covers 0" in noisy.evidence
    hurt, _, _ = _verdicts({"gelu": [-0.5, -0.45, -0.55], "swiglu": [0.1, 0.0, 0.1]})
    assert hurt.verdict == "not reproduced" and "below 0" in hurt.evidence
    _, no_gain, _ = _verdicts({"gelu": [0.5, -0.4, 0.3], "swiglu": [0.1, 0.0, 0.1]})
    assert no_gain.verdict == "not checked" and "no gain for a gated FFN to shrink" in no_gain.evidence
    _, same, _ = _verdicts({"gelu": [0.5, 0.45, 0.55], "swiglu": [0.5, 0.5, 0.5]})
    assert same.verdict == "not reproduced"
    single, _, _ = _verdicts({"gelu": [0.5], "swiglu": [0.1]})
    assert single.verdict == "not checked"


def test_early_window_is_the_last_evaluation_before_release_and_decides_the_verdict():
    runs = _runs({"gelu": [0.5, 0.4], "swiglu": [0.1, 0.2]})
    table = spec.early(runs, _curves(runs))
    assert list(table.step) == [20] * 4
    assert spec.early_finding(table).verdict == "reproduced"
    assert spec.early_finding(spec.early(runs, _curves(runs, logit_gap=-0.2))).verdict == "not reproduced"
    too_early = spec.early(_runs({"gelu": [0.5], "swiglu": [0.1]}, released=5), _curves(runs))
    found = spec.early_finding(too_early)
    assert found.verdict == "not checked" and "gelu seed 0" in found.evidence


def test_every_arm_builds_a_valid_run_and_pairs_share_initialization_and_data():
    for budget, plan in spec.BUDGETS.items():
        runs = spec.plan_runs(plan, 0)
        assert len(runs) == len(set(runs)) == plan["seeds"] * (len(plan["archs"]) * len(plan["arms"])
                                                               + len(plan["controls"]))
        for arch, arm, seed in runs:
            cfg = spec.run_config(plan, arch, arm, seed)
            assert isinstance(cfg, RunConfig) and cfg.train.seed == seed
    full = spec.BUDGETS["full"]
    cfg = spec.run_config(full, "gelu", "intervention", 0)
    # Zhu et al. 2026 §4, App. J: 20 x 960 x 15 heads, context 1024, 2.5B tokens in 524,288-token batches
    assert (cfg.model.layers, cfg.model.d_model, cfg.model.heads, cfg.model.context) == (20, 960, 15, 1024)
    assert cfg.train.steps * cfg.train.batch * cfg.model.context == pytest.approx(2.5e9, rel=1e-3)
    assert (cfg.train.lr, cfg.train.min_lr, cfg.train.betas) == (2.5e-4, 2.5e-5, (0.9, 0.95))
    assert cfg.train.warmup == round(0.02 * cfg.train.steps) and cfg.intervention.upper_qk_lr == 0.25
    half = spec.run_config(full, "gelu", "global_lr_half", 0)
    assert half.train.lr == 1.25e-4 and not half.intervention.active
    fixed = spec.run_config(full, "gelu", "fixed_6", 0).intervention
    assert (fixed.release, fixed.release_at, fixed.upper_qk_lr) == ("fixed", 0.06, 0.25)
    smoke = spec.BUDGETS["smoke"]
    control, arm = (spec.run_config(smoke, "swiglu", a, 1) for a in ("control", "intervention"))
    assert control.model == arm.model and control.train == arm.train and control.data == arm.data


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(spec.BUDGETS, "smoke", {**spec.BUDGETS["smoke"], "layers": 2, "d_model": 32, "context": 32,
                                                "steps": 8, "batch": 4, "eval_every": 2, "eval_batches": 1, "final_batches": 2,
                                                "warmup": 1, "max_tokens": 20_000, "seeds": 2})


def test_tiny_run_writes_every_table_and_resumes_without_retraining(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(spec.os, "cpu_count", lambda: 1)
    section = studies.run(StudyConfig(study="specialization"), tmp_path)
    curves = pd.read_csv(tmp_path / "curves.csv")
    assert len(curves.run.unique()) == 8 and set(curves.step) == {2, 4, 6, 8}
    assert {"lower_copy", "lower_copy_chance", "lower_copy_excess"} <= set(curves.columns)
    gains = pd.read_csv(tmp_path / "gains.csv")
    assert set(gains.arch) == {"gelu", "swiglu"} and (gains.seeds == 2).all()
    assert (tmp_path / "curves.png").is_file() and len(section.findings) == 3
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert (runs.final_tokens == 2 * 4 * 32).all()
    done = tmp_path / "runs" / "gelu_control_seed0" / "summary.json"
    stamp = done.stat().st_mtime_ns
    assert studies.run(StudyConfig(study="specialization"), tmp_path) == section
    assert done.stat().st_mtime_ns == stamp, "a finished run was trained again"
    # the report reads the runs' CSV logs and the study's own final_eval.json, not the trainer's summary.json
    for summary in tmp_path.glob("runs/*/summary.json"):
        summary.unlink()
    assert studies.summarize(tmp_path) == section


def test_the_full_budget_needs_token_shards():
    with pytest.raises(studies.StudyError, match="pass --data SHARDS"):
        spec.compute(StudyConfig(study="specialization", budget="full"), Path("unused"), False)
    with pytest.raises(studies.StudyError, match="takes no --data"):
        StudyConfig(study="sinks", data="shards")
    assert "--data shards" in StudyConfig(study="specialization", data="shards").command(Path("out"))


@pytest.mark.slow
def test_the_full_budget_reads_token_shards_and_runs_a_few_steps(tmp_path):
    from attnlab.train.shards import prepare
    from attnlab.train.trainer import Trainer

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(6):
        (corpus / f"{i}.txt").write_text(f"text number {i} of the corpus. " * 400)
    shards = tmp_path / "shards"
    prepare(shards, folder=corpus, tokenizer="bytes", val_fraction=0.2)
    cfg = spec.run_config(spec.BUDGETS["full"], "gelu", "intervention", 0, str(shards))
    assert cfg.data.shards == str(shards) and cfg.model.vocab == 257
    # the App. J model and optimizer, shortened to two steps of two 32-token rows on one CPU thread
    short = RunConfig.from_dict({**cfg.to_dict(), "model": {**cfg.model.to_dict(), "context": 32},
                                 "train": {**cfg.to_dict()["train"], "steps": 2, "batch": 2, "accum": 1, "warmup": 1,
                                           "eval_every": 2, "eval_batches": 1, "precision": "fp32",
                                           "checkpoint_every": 0}})
    summary = Trainer(short, tmp_path / "run", progress=False).run()
    assert summary["steps"] == 2 and math.isfinite(summary["val_loss"])
