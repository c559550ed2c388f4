"""The concentration study reads the matched diagnostic on the answering rows and the causal heads, places a given
model among the paper's models against i.i.d. rows, warns when softmax itself fails, and resumes without retraining
or re-running an engine."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from attnlab import studies
from attnlab.studies import StudyConfig
from attnlab.studies.concentration import plan as cp
from attnlab.studies.concentration import study as sc
from checkpoints import save_checkpoint


def _rows(flags):
    """Active rows of heads (0, 0) and (0, 1) with (pred_safe, safe, s_p) per row at every degree."""
    data = []
    for head, pred, safe, s in flags:
        data.append(
            {
                "layer": 0,
                "head": head,
                "status": "active",
                "rho": 0.5,
                "a_act": 2.0,
                "p_star": 1.0,
                **{f"{k}_p{p}": v for p in sc.P for k, v in (("pred_safe", pred), ("safe", safe), ("s", s))},
            }
        )
    return pd.DataFrame(data)


def test_matched_conditions_on_the_given_causal_heads():
    rows = _rows([(0, True, True, 0.1), (0, True, True, 0.2), (1, False, False, 3.0), (1, False, True, 0.9)])
    sub = pd.DataFrame(
        [{"recipe": r, "accuracy %": 50.0, "lo": 40.0, "hi": 60.0, "delta pp": -50.0} for r in sc.RECIPES]
        + [{"recipe": "softmax", "accuracy %": 100.0, "lo": 96.0, "hi": 100.0, "delta pp": float("nan")}]
    )
    line = sc.matched({"0": rows, "auto": rows}, sub, [(0, 1)]).iloc[0]
    assert (line["all-head safe %"], line["top-1 safe %"], line["rows"]) == (75.0, 50.0, 4)
    assert (line["softmax %"], line["accuracy %"]) == (100.0, 50.0)
    assert sc.matched({"0": rows, "auto": rows}, sub, [(0, 0)]).iloc[0]["top-1 safe %"] == 100.0


@pytest.mark.parametrize(
    "ks, n_heads, k", [((10, 40), 270, 40), ((10,), 72, 10), ((2, 4), 8, 2), ((5, 10, 20), 100, 10)]
)
def test_causal_k_is_the_largest_ablated_k_within_15_percent_of_the_heads(ks, n_heads, k):
    assert sc.causal_k(ks, n_heads) == k


def test_answering_rows_are_each_prompts_last_position_even_where_a_head_is_dead(tmp_path):
    rows = pd.DataFrame(
        [
            {
                "layer": 0,
                "head": h,
                "prompt": pr,
                "query": q,
                "status": st,
                "rho": 0.5,
                "a_act": 1.0,
                "p_star": 1.0,
                **{f"{k}_p{p}": 1.0 for p in sc.P for k in ("s", "safe", "pred_safe", "safe_eps")},
            }
            for pr, last in ((0, 9), (1, 12))
            for h in (0, 1)
            for q in (0, last)
            for st in (("dead" if (h, q) == (1, last) else "active"),)
        ]
    )
    rows.to_parquet(tmp_path / "rows_b0.parquet")
    got = sc._rows(tmp_path, "0", answering=True)
    assert sorted(zip(got["prompt"], got["head"], got["query"])) == [(0, 0, 9), (1, 0, 12)]
    assert len(sc._rows(tmp_path, "0")) == 6


@pytest.fixture
def tiny(monkeypatch):
    engines = {
        "length": 32,
        "audit_prompts": 2,
        "every": 8,
        "prompts": 3,
        "k": (1,),
        "random_draws": 1,
        "rank_prompts": 2,
        "heads_prompts": 2,
    }
    monkeypatch.setitem(
        sc.BUDGETS,
        "smoke",
        dataclasses.replace(
            sc.BUDGETS["smoke"],
            train=cp.TrainPlan(layers=2, heads=2, hidden=32, ffn=64, context=64, steps=3, batch=4, lr=3e-3),
            **engines,
            suites=("induction",),
            suite="induction",
        ),
    )
    monkeypatch.setitem(
        sc.REAL,
        "smoke",
        dataclasses.replace(sc.REAL["smoke"], **engines, pad=None, suites=("induction", "mqar"), suite="induction"),
    )


def test_tiny_run_writes_tables_figures_and_resumes_without_rerunning(tiny, tmp_path):
    section = studies.run(StudyConfig(study="concentration"), tmp_path)
    sub = pd.read_csv(tmp_path / "substitution.csv")
    assert list(sub["recipe"]) == ["softmax", *sc.RECIPES] and (sub["n"] == 3).all()
    assert len(pd.read_csv(tmp_path / "matched.csv")) == 8
    assert len(pd.read_csv(tmp_path / "model" / "train_loss.csv")) == 3
    for stem in ("phase", "p_star", "matched", "substitution"):
        assert (tmp_path / f"{stem}.png").is_file() and (tmp_path / f"{stem}.svg").is_file()
    pieces = [
        tmp_path / "model" / "model.safetensors",
        *(tmp_path / d / "config.json" for d in ("audit/induction", "substitute", "ablate", "heads")),
    ]
    stamps = [p.stat().st_mtime_ns for p in pieces]
    again = studies.run(StudyConfig(study="concentration"), tmp_path)
    assert [p.stat().st_mtime_ns for p in pieces] == stamps, "a finished piece was computed again"
    assert again == section


def test_a_given_model_is_audited_as_is_without_training(tiny, tmp_path):
    checkpoint = save_checkpoint(tmp_path / "ckpt")
    out = tmp_path / "study"
    section = studies.run(StudyConfig(study="concentration", model=str(checkpoint)), out)
    assert not (out / "model").exists()
    assert len(pd.read_csv(out / "head_medians.csv")) <= 2 * 2 * 4  # 2 biases x 2 layers x 4 heads
    assert any(n.startswith(f"Model: {checkpoint} (llama, 2 layers x 4 heads), pretrained") for n in section.notes)
    assert "--model" in section.command
    prevalence = pd.read_csv(out / "prevalence.csv")
    assert set(prevalence["suite"]) == {"induction", "mqar"} and len(prevalence) == 2 * 2 * len(sc.P)
    assert section.findings[0].claim.startswith("a pretrained model sits where one group of Polynomial Concentration")
    # a random model cannot do induction: the sweep's deltas are flagged
    assert section.warnings[0].startswith("softmax itself scores")
    assert (out / "head_types.csv").is_file()


def test_report_over_two_given_models_puts_them_side_by_side(tiny, tmp_path):
    folders = []
    for seed in (0, 1):
        checkpoint = save_checkpoint(tmp_path / f"ckpt{seed}", seed=seed)
        folders.append(tmp_path / f"study{seed}")
        studies.run(StudyConfig(study="concentration", model=str(checkpoint)), folders[-1])
    page = studies.report(folders, tmp_path / "page")
    models = pd.read_csv(tmp_path / "page" / "compare_concentration" / "models.csv")
    assert list(models["model"]) == [str(tmp_path / "ckpt0"), str(tmp_path / "ckpt1")]
    for folder, row in zip(folders, models.to_dict("records")):
        prevalence = pd.read_csv(folder / "prevalence.csv")
        cell = prevalence[(prevalence["suite"] == "mqar") & (prevalence["p"] == 2) & (prevalence["b"] == "0")]
        assert row["mqar unsafe % (p2, b0)"] == float(cell["unsafe %"].iloc[0])
        finding = json.loads((folder / "section.json").read_text())["findings"][0]
        assert row[f"verdict: {finding['claim'].split(':')[0]}"] == finding["verdict"]
        assert finding["null"]["passes"] is not True, "i.i.d. rows are placed level with noise, failing the rule"
        assert "95% t-interval over prompts" in finding["evidence"]
    assert "Across models" in page.read_text()
    # one folder alone, or the toy study, has no cross-model section
    assert studies.comparisons(folders[:1], tmp_path / "x") == []


def test_demo_plan_runs_concentration_once_per_model(tmp_path):
    plan = studies.demo_plan(["rowmaps", "concentration", "sinks"], ["smollm2", "gemma3"], tmp_path)
    assert plan == [
        ("rowmaps", None, tmp_path / "rowmaps"),
        ("concentration", "smollm2", tmp_path / "concentration"),
        ("concentration", "gemma3", tmp_path / "concentration-gemma3"),
        ("sinks", "smollm2", tmp_path / "sinks"),
    ]
    assert studies.demo_plan(["concentration"], [], tmp_path) == [("concentration", None, tmp_path / "concentration")]
