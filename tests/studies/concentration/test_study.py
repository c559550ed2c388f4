"""The concentration study decides Polynomial Concentration's negative screen only on learned models with low-safe
cells (over all heads or the causal ones, on the answering rows) whose safest cells do not collapse too, and its
prevalence claim on intervals over prompts against i.i.d. Gaussian rows (which pass it: not checked); each rule's
false-positive rate stays under 5%; it validates the p* bound row by row, warns when softmax itself fails, and
resumes without retraining or re-running an engine."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from attnlab import studies
from attnlab.diagnostics.stats import wilson
from attnlab.findings.verdict import FPR_MAX, false_positive_rate
from attnlab.studies import StudyConfig
from attnlab.studies.concentration import findings as cf
from attnlab.studies.concentration import plan as cp
from attnlab.studies.concentration import study as sc
from checkpoints import save_checkpoint


def _cells(base, cells):
    """Cells (recipe, all-head safe %, top-40 safe %, accuracy %) of a matched table."""
    return pd.DataFrame(
        [
            {
                "recipe": r,
                "softmax %": base,
                "all-head safe %": safe,
                "top-40 safe %": top,
                "accuracy %": acc,
                "lo": max(acc - 5, 0.0),
                "hi": acc + 5,
            }
            for r, safe, top, acc in cells
        ]
    )


def test_claim_is_reproduced_only_when_every_low_safe_cell_collapses():
    f = cf.finding(
        prompts=200,
        table=_cells(
            90.0, [("relu_p2_b0", 1.0, 0.0, 9.0), ("relu_p2_bauto", 3.0, 5.0, 0.0), ("relu_p4_b0", 60.0, 30.0, 80.0)]
        ),
    )
    assert f.verdict == "reproduced"
    assert "2 low-safe cell(s) (all heads / top-40), 2 collapsed" in f.evidence
    assert "relu_p2_b0: 1.0% / 0.0% safe, accuracy 9.0% [4.0, 14.0]" in f.evidence
    g = cf.finding(prompts=200, table=_cells(90.0, [("relu_p2_b0", 1.0, 0.0, 9.0), ("relu_p2_bauto", 2.0, 0.0, 9.5)]))
    assert g.verdict == "not reproduced" and "1 collapsed" in g.evidence


def test_a_cell_is_flagged_by_its_causal_heads_when_all_heads_are_not_low():
    """The all-head fraction stays above the threshold, yet the causal heads' fraction flags the cell: a cell
    that keeps its accuracy then contradicts the screen."""
    kept = cf.finding(
        prompts=200,
        table=_cells(
            80.0, [("relu_p2_b0", 27.0, 0.0, 5.0), ("relu_p4_bauto", 30.0, 2.5, 20.0), ("relu_p8_b0", 66.0, 26.0, 5.0)]
        ),
    )
    assert kept.verdict == "not reproduced" and "2 low-safe cell(s)" in kept.evidence
    assert "relu_p8_b0" not in kept.evidence.split("):")[1]
    lost = cf.finding(
        prompts=200, table=_cells(80.0, [("relu_p2_b0", 27.0, 0.0, 5.0), ("relu_p8_b0", 66.0, 26.0, 50.0)])
    )
    assert lost.verdict == "reproduced" and "1 low-safe cell(s)" in lost.evidence


def test_claim_is_not_checked_without_a_learned_model_or_a_low_safe_cell():
    unlearned = cf.finding(prompts=200, table=_cells(40.0, [("relu_p2_b0", 0.0, 0.0, 0.0)]))
    assert unlearned.verdict == "not checked" and "softmax scores only 40.0%" in unlearned.reason
    all_safe = cf.finding(
        prompts=200, table=_cells(100.0, [("relu_p2_b0", 3.5, 4.0, 0.0), ("relu_p4_b0", 99.0, 90.0, 100.0)])
    )
    assert all_safe.verdict == "not checked"
    assert (
        "ranges 3.5%-99.0% over all heads and 4.0%-90.0% over the top-40 heads; the least safe there, "
        "relu_p2_b0, scores 0.0%"
    ) in all_safe.evidence


def test_sufficiency_claim_needs_a_high_safe_cell_that_still_loses_significantly():
    def cells(rows):
        return pd.DataFrame(
            [
                {"recipe": r, "softmax %": 80.0, "all-head safe %": safe, "delta pp": d, "hi": 80 + d + hi}
                for r, safe, d, hi in rows
            ]
        )

    yes = cf.sufficiency_finding(cells([("relu_p16_b0", 90.7, -80.0, 2.0), ("relu_p2_b0", 40.0, -75.0, 5.0)]), 200)
    assert yes.verdict == "reproduced" and "1 high-safe cell(s), 1 losing" in yes.evidence
    assert yes.null.passes is False and yes.mde.adequate
    no = cf.sufficiency_finding(cells([("relu_p16_b0", 90.7, -5.0, 8.0), ("relu_p2_b0", 40.0, -75.0, 5.0)]), 200)
    assert no.verdict == "not reproduced"
    noisy = cf.sufficiency_finding(cells([("relu_p16_b0", 90.7, -20.0, 25.0)]), 200)  # its interval reaches softmax
    assert noisy.verdict == "not reproduced" and "0 losing" in noisy.evidence
    few = cf.sufficiency_finding(cells([("relu_p16_b0", 90.7, -5.0, 30.0)]), 3)  # 3 prompts cannot see 19 pp
    assert few.verdict == "underpowered" and few.mde.value > cf.HIGH_DROP
    assert cf.sufficiency_finding(cells([("relu_p2_b0", 40.0, -75.0, 5.0)]), 200).verdict == "not checked"


def test_the_collapse_rule_is_not_reproduced_when_the_safest_cells_collapse_too():
    """The screen's null: when every cell collapses whatever its safe fraction, the low-safe cells' collapse does
    not tell safety from anything else."""
    everything = cf.finding(
        prompts=200, table=_cells(90.0, [("relu_p2_b0", 1.0, 0.0, 2.0), ("relu_p16_b0", 95.0, 90.0, 3.0)])
    )
    assert everything.verdict == "not checked" and everything.null.passes and "passes the rule too" in everything.reason


def _prevalence(unsafe: dict[str, float], half: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "suite": suite,
                "b": b,
                "p": p,
                "unsafe %": u if (p, b) == (2, "0") else 0.0,
                "unsafe lo": u - half,
                "unsafe hi": u + half,
            }
            for suite, u in unsafe.items()
            for b in ("0", "auto")
            for p in sc.P
        ]
    )


NOISE = {"unsafe %": 40.0, "unsafe lo": 35.0, "unsafe hi": 45.0, "rows": 100}  # a null that fails the rule


def test_prevalence_claim_needs_every_suite_interval_above_70_and_a_null_below():
    yes = cf.prevalence_finding(_prevalence({"niah": 78.0, "induction": 72.0}), NOISE)
    assert yes.verdict == "reproduced" and "niah 78.0% [77.0, 79.0]" in yes.evidence
    no = cf.prevalence_finding(_prevalence({"niah": 78.0, "induction": 47.0}), NOISE)
    assert no.verdict == "not reproduced" and "1 of 2 suites" in no.evidence
    wide = cf.prevalence_finding(_prevalence({"niah": 78.0, "induction": 68.0}, half=5.0), NOISE)
    assert wide.verdict == "not checked" and "induction contains 70%" in wide.reason


def test_iid_gaussian_rows_pass_the_prevalence_rule_so_it_cannot_be_reproduced():
    """The null control run for real: i.i.d. N(0, 1) rows of 64-256 keys are all but 100% unsafe at p = 2, b = 0,
    so a model above 70% is no more polynomial-safe than noise, and the finding says not checked."""
    null = cf.iid_prevalence(np.array([64, 128, 256]), prompts=4)
    assert null["unsafe lo"] >= cf.UNSAFE_MOST
    found = cf.prevalence_finding(_prevalence({"niah": 78.0, "induction": 72.0}), null)
    assert found.verdict == "not checked" and found.null.passes and "passes the rule too" in found.reason
    # noise does fail it at a few keys, where a row's largest value stands out less often
    assert cf.iid_prevalence(np.array([4]), prompts=4)["unsafe hi"] < cf.UNSAFE_MOST


def test_prevalence_rule_fires_at_most_5_percent_when_the_true_share_is_70():
    """Prompts whose unsafe shares scatter around a true 70% (Beta, 20 prompts of 50 rows): the rule (every interval
    over prompts at or above 70%) must rarely fire."""

    def draw(rng):
        shares = rng.beta(14, 6, size=20)  # mean 0.70
        flags = rng.random((20, 50)) < shares[:, None]
        return pd.DataFrame({"prompt": np.repeat(np.arange(20), 50), "status": "active", "safe_p2": ~flags.reshape(-1)})

    def rule(rows):
        from attnlab.analyses.audit_tables import unsafe_interval

        lo, hi = unsafe_interval(rows, "safe_p2")
        return cf._prevalence_outcome(pd.DataFrame({"unsafe lo": [lo], "unsafe hi": [hi]})) is True

    assert false_positive_rate(rule, draw, trials=300) <= FPR_MAX


def test_collapse_and_sufficiency_rules_fire_at_most_5_percent_without_an_effect():
    """No cell differs from softmax (every cell scores n prompts at softmax's true rate): the collapse rule (all
    low-safe cells at <= 10% of softmax) and the sufficiency rule (a >= 19 pp significant loss) must rarely fire."""
    n, rate = 40, 0.8

    def cells(rng):
        acc = 100 * rng.binomial(n, rate, size=4) / n
        base = 100 * rng.binomial(n, rate) / n
        bounds = [wilson(a * n / 100, n) for a in acc]
        return pd.DataFrame(
            {
                "recipe": [f"relu_p{p}_b0" for p in sc.P],
                "softmax %": base,
                "all-head safe %": [1.0, 2.0, 70.0, 90.0],
                "top-1 safe %": [0.0, 1.0, 60.0, 80.0],
                "accuracy %": acc,
                "lo": [100 * b[0] for b in bounds],
                "hi": [100 * b[1] for b in bounds],
                "delta pp": acc - base,
            }
        )

    collapse = false_positive_rate(lambda t: cf.finding(t, n).verdict == "reproduced", cells, trials=400)
    enough = false_positive_rate(lambda t: cf.sufficiency_finding(t, n).verdict == "reproduced", cells, trials=400)
    assert collapse <= FPR_MAX and enough <= FPR_MAX


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
    assert section.findings[0].claim.startswith("a pretrained model's active rows are mostly polynomial-unsafe")
    # a random model cannot do induction: the sweep's deltas are flagged
    assert section.warnings[0].startswith("softmax itself scores")
    assert (out / "head_types.csv").is_file()


def test_report_over_two_given_models_puts_them_side_by_side(tiny, tmp_path):
    folders = []
    for seed in (0, 1):
        checkpoint = save_checkpoint(tmp_path / f"ckpt{seed}", seed=seed)
        folders.append(tmp_path / f"study{seed}")
        studies.run(StudyConfig(study="concentration", model=str(checkpoint)), folders[-1])
    page = studies.report(folders, tmp_path / "page" / "index.html")
    models = pd.read_csv(tmp_path / "page" / "compare_concentration" / "models.csv")
    assert list(models["model"]) == [str(tmp_path / "ckpt0"), str(tmp_path / "ckpt1")]
    for folder, row in zip(folders, models.to_dict("records")):
        prevalence = pd.read_csv(folder / "prevalence.csv")
        cell = prevalence[(prevalence["suite"] == "mqar") & (prevalence["p"] == 2) & (prevalence["b"] == "0")]
        assert row["mqar unsafe % (p2, b0)"] == float(cell["unsafe %"].iloc[0])
        # the rule fails on a suite below 70%; where it holds (or an interval contains 70%), i.i.d. rows pass it too
        cells = prevalence[(prevalence["p"] == 2) & (prevalence["b"].astype(str) == "0")]
        expected = "not reproduced" if cf._prevalence_outcome(cells) is False else "not checked"
        assert row["verdict: a pretrained model's active rows are mostly polynomial-unsafe"] == expected
        finding = json.loads((folder / "section.json").read_text())["findings"][0]
        assert finding["null"]["passes"] is True, "i.i.d. rows pass the prevalence rule"
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
