"""The specialization study pairs each arm with the same seed's control and labels each claim by its rule, computed
null control and MDE: verdicts flip with the numbers, every null control fails its rule where the claim holds
(sign flips of the pairs, the untrained model), each rule's false-positive rate under its null is at most 5%,
the targeted failure's absence labels the headline not checked, maturity is dated on the 0.5% readings, and
the study resumes without retraining."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attnlab import studies
from attnlab.diagnostics.paired import paired_mde
from attnlab.findings.verdict import FPR_MAX, false_positive_rate
from attnlab.studies import StudyConfig
from attnlab.studies.specialization import findings as sf
from attnlab.studies.specialization import study as spec
from attnlab.train.config import RunConfig


def _runs(gains: dict[str, list[float]], released=20, untrained_copy=0.02):
    """Runs of gelu/swiglu control and intervention over seeds 0.., whose intervention's final perplexity is
    the control's minus the given gain per seed."""
    rows = []
    for arch, per_seed in gains.items():
        for seed, gain in enumerate(per_seed):
            for arm, ppl in (("control", 10.0), ("intervention", 10.0 - gain)):
                rows.append(
                    {
                        "run": spec.run_name(arch, arm, seed),
                        "arch": arch,
                        "arm": arm,
                        "seed": seed,
                        "final_val_loss": math.log(ppl),
                        "final_val_ppl": ppl,
                        "last_eval_val_loss": math.log(ppl),
                        "released_at": released if arm == "intervention" else None,
                        "release_reason": "rule" if arm == "intervention" else None,
                        "untrained_ppl": 250.0,
                        "untrained_dppl_zero_qk": 0.01 * (seed + 1),
                        "untrained_lower_copy": untrained_copy,
                        "untrained_lower_copy_chance": 0.02,
                    }
                )
    return pd.DataFrame(rows)


def _curves(runs, logit_gap=0.2, entropy_gap=0.1, dependence=0.5, reliance=0.3):
    """Evaluations at steps 10, 20, 30 (of 100): zeroing upper Q/K adds ``dependence`` of the perplexity in the
    control (a little more per seed) and ``dependence - reliance`` in the intervention."""
    rows = []
    for r in runs.itertuples():
        arm = r.arm == "intervention"
        for step in (10, 20, 30):
            ppl = 5.0
            rise = (dependence + 0.01 * r.seed - (reliance if arm else 0.0)) * ppl
            rows.append(
                {
                    "run": r.run,
                    "arch": r.arch,
                    "arm": r.arm,
                    "seed": r.seed,
                    "step": step,
                    "tokens": step * 100,
                    "val_loss": 3.0 - step / 10 * (0.4 if arm else 0.33),
                    "upper_entropy": 0.8 + (entropy_gap if arm else 0.0),
                    "upper_logit": 1.0 + step / 10 - (logit_gap if arm else 0.0),
                    "ppl": ppl,
                    "dppl_zero_qk": rise,
                }
            )
    return pd.DataFrame(rows)


def _readings(runs, matures: dict[str, int], steps=100):
    """Readings every step up to 12 (of 100), the excess over uniform attention 0.01 from ``matures[arm]`` on."""
    rows = []
    for r in runs.itertuples():
        for step in range(1, 13):
            rows.append(
                {
                    "run": r.run,
                    "arch": r.arch,
                    "arm": r.arm,
                    "seed": r.seed,
                    "step": step,
                    "lower_copy": 0.02 + (0.01 if step >= matures[r.arm] + r.seed % 2 else 0.0),
                    "lower_copy_chance": 0.02,
                }
            )
    return pd.DataFrame(rows)


PLAN = dataclasses.replace(spec.BUDGETS["smoke"], steps=100, score_every=0.01)


def _decided(gains, **curves):
    runs = _runs(gains)
    return spec.findings(runs, _curves(runs, **curves), _readings(runs, {"control": 3, "intervention": 3}), PLAN)


def _verdicts(gains, **curves):
    decided = _decided(gains, **curves)
    found = decided["findings"]
    return found[1], found[2], decided["tables"]["gains"]


def test_pairs_are_the_same_seed_s_control_minus_the_arm():
    runs = _runs({"gelu": [0.5, 0.3], "swiglu": [0.1, 0.2]})
    paired = spec.pairs(runs, _curves(runs)).set_index(["arch", "seed"])
    assert paired.loc[("gelu", 1), "ppl_gain"] == pytest.approx(0.3)
    assert paired.loc[("swiglu", 0), "loss_gain"] == pytest.approx(math.log(10) - math.log(9.9))
    # the intervention's loss 3 - 0.04 step reaches the control's final log(10) = 2.30 at step 17.5, evaluated at 20
    assert paired.loc[("gelu", 0), "tokens_to_control_final_loss"] == 2000


STRONG = [0.5, 0.45, 0.55, 0.52, 0.48, 0.5]


def test_the_headline_and_shrinkage_verdicts_follow_the_intervals_and_their_null():
    headline, shrink, gained = _verdicts({"gelu": STRONG, "swiglu": [0.1, 0.05, 0.12, 0.1, 0.08, 0.11]})
    gelu = gained.set_index(["arch", "arm"]).loc[("gelu", "intervention")]
    assert gelu.ppl_gain_mean == pytest.approx(0.5) and gelu.ppl_gain_lo > 0
    assert gelu.ppl_gain_mde == pytest.approx(paired_mde(np.std(STRONG, ddof=1), 6))
    assert headline.verdict == "reproduced" and shrink.verdict == "reproduced"
    assert headline.null.passes is False and shrink.null.passes is False and "upper bound" in headline.evidence
    # three pairs: one sign pattern in eight holds the rule, more than 5%, so no data set of three pairs can be
    # reproduced: the simulated power is 0 and the finding says underpowered
    few, _, _ = _verdicts({"gelu": [0.5, 0.45, 0.55], "swiglu": [0.1, 0.05, 0.12]})
    assert few.verdict == "underpowered" and few.mde.power == 0 and few.null.passes is True
    assert "12.5%" in few.null.outcome
    # noisy pairs: the MDE (about 3 sd over 3 pairs) is far above the paper's 1.85% of 10 ppl
    noisy, _, _ = _verdicts({"gelu": [0.5, -0.4, 0.3], "swiglu": [0.1, 0.0, 0.1]})
    assert noisy.verdict == "underpowered" and noisy.mde.value > noisy.mde.effect == pytest.approx(0.1853, abs=1e-3)
    # tight pairs around 0: the interval's upper bound excludes 0.185 ppl, but four pairs can never be reproduced (the
    # sign-flip null's smallest share is 1/16), so the label is underpowered, with the exclusion in the evidence
    flat, _, _ = _verdicts({"gelu": [0.01, -0.01, 0.0, 0.005], "swiglu": [0.0, 0.0, 0.01, 0.0]})
    assert flat.verdict == "underpowered" and flat.mde.power == 0 and "excludes the paper's 1.85%" in flat.evidence
    tight, _, _ = _verdicts({"gelu": [0.01, -0.01, 0.0, 0.005, 0.002, -0.004], "swiglu": [0.0] * 6})
    assert tight.verdict == "not reproduced" and tight.mde.power >= 0.8
    _, no_gain, _ = _verdicts({"gelu": [0.5, -0.4, 0.3], "swiglu": [0.1, 0.0, 0.1]})
    assert no_gain.verdict == "not checked" and "no gain for a gated FFN to shrink" in no_gain.reason
    _, same, _ = _verdicts({"gelu": STRONG, "swiglu": STRONG})
    # identical gains: zero spread, so the design could see any shrinkage and saw none
    assert same.verdict == "not reproduced" and same.mde.value == 0 and same.null.passes is not None
    single, _, _ = _verdicts({"gelu": [0.5], "swiglu": [0.1]})
    assert single.verdict == "not checked"


def test_without_the_targeted_failure_the_headline_and_reliance_are_not_checked():
    found = _decided({"gelu": STRONG, "swiglu": STRONG}, dependence=0.02, reliance=0.01)["findings"]
    dependence, headline, shrink, reliance = found[:4]
    assert dependence.verdict == "not reproduced" and "(+2.00%, step 10)" in dependence.evidence
    for finding in (headline, shrink, reliance):
        assert finding.verdict == "not checked" and "failure the intervention targets" in finding.reason
    present = _decided({"gelu": STRONG, "swiglu": STRONG})["findings"]
    assert present[0].verdict == "reproduced" and present[3].verdict == "reproduced"


def test_each_null_control_fails_its_rule_where_the_claim_holds():
    runs = _runs({"gelu": STRONG, "swiglu": STRONG})
    decided = spec.findings(runs, _curves(runs), _readings(runs, {"control": 3, "intervention": 3}), PLAN)
    dependence, headline, shrink, reliance, routing, check = decided["findings"]
    for finding in (dependence, headline, reliance, routing):
        assert finding.verdict == "reproduced" and finding.null.passes is False, finding
    # the untrained model: zeroing its upper Q/K adds 0.4-2.4% of 250 ppl, under the 10% floor
    assert "+0.01%" in dependence.null.outcome or "+0.00%" in dependence.null.outcome
    # its lower-copy score stays at uniform attention's: never mature, dated at the last reading (12 of 100)
    delays = decided["tables"]["delays"]
    assert (delays.null_delay > sf.DELAY_MARGIN).all() and (delays.delay.abs() < 0.02).all()
    assert check.verdict == "check passed" and check.is_check


def test_a_ratio_s_interval_is_printed_in_the_percent_of_its_mean():
    """A mean read as +0.2% beside an interval read as [+0.0013, +0.0021] asks the reader to convert units."""
    runs = _runs({"gelu": STRONG, "swiglu": STRONG})
    dependence, _, _, reliance, routing, _ = spec.findings(
        runs, _curves(runs), _readings(runs, {"control": 3, "intervention": 3}), PLAN
    )["findings"]
    for finding, unit in ((dependence, "mean"), (reliance, "control's perplexity"), (routing, "of training")):
        tail = finding.evidence.split(unit, 1)[1]
        interval = re.search(r"95% interval \[([^\]]+)\]", tail).group(1)
        assert all(bound.strip().endswith("%") for bound in interval.split(",")), (unit, interval)


def test_lower_copy_routing_delayed_by_the_intervention_is_reproduced_as_delayed():
    runs = _runs({"gelu": STRONG, "swiglu": STRONG})
    late = _readings(runs, {"control": 3, "intervention": 7})
    routing = spec.findings(runs, _curves(runs), late, PLAN)["findings"][4]
    assert routing.verdict == "not reproduced" and "+4.00% of training" in routing.evidence
    # an untrained model already at the threshold matures at the first reading: its null passes
    primed = _runs({"gelu": STRONG, "swiglu": STRONG}, untrained_copy=0.03)
    routing = spec.findings(primed, _curves(primed), _readings(primed, {"control": 3, "intervention": 3}), PLAN)[
        "findings"
    ][4]
    assert routing.verdict == "not checked" and routing.null.passes is True
    never = _readings(runs, {"control": 50, "intervention": 3})
    routing = spec.findings(runs, _curves(runs), never, PLAN)["findings"][4]
    assert routing.verdict == "not checked" and "did not mature in the control" in routing.reason


def test_maturity_and_the_rule_s_release_come_from_the_readings():
    runs = _runs({"gelu": [0.5, 0.4], "swiglu": [0.1, 0.2]})
    matured = spec.maturities(runs, _readings(runs, {"control": 2, "intervention": 4}), spec.rule_config(PLAN), 100)
    rows = matured.set_index("run")
    assert rows.loc["gelu_control_seed0", "matured_at"] == 2 and rows.loc["gelu_intervention_seed1", "matured_at"] == 5
    # mature from step 2: the third reading from the earliest step 3 is step 5
    assert rows.loc["gelu_control_seed0", "rule_release"] == 5


@pytest.mark.parametrize("n", [3, 4, 6])
def test_each_rule_s_false_positive_rate_under_its_null_is_at_most_five_percent(n):
    def normal(mean):
        return lambda rng: rng.normal(mean, 1.0, n)

    # gain, shrinkage, reliance: no effect; dependence: a rise of exactly 10%; delay: exactly +1% of training
    for rule, mean in (
        (sf.above(0.0), 0.0),
        (sf.above(sf.DEPENDENCE_MIN), sf.DEPENDENCE_MIN),
        (sf.below(sf.DELAY_MARGIN), sf.DELAY_MARGIN),
    ):
        assert false_positive_rate(rule, normal(mean), trials=2000, seed=n) <= FPR_MAX

    # the label "reproduced" needs the sign-flip null to fail as well: rarer still
    def both(d):
        return sf.above(0.0)(d) and sf.sign_flip_share(d, sf.above(0.0)) <= FPR_MAX

    assert false_positive_rate(both, normal(0.0), trials=500, seed=n) <= FPR_MAX


def test_the_headline_excludes_the_paper_s_gain_by_its_upper_bound():
    """The demo's interval [-0.194, +0.113] lies below the paper's +0.149 ppl: it excludes it (its larger |bound|,
    0.194, is not the one to compare)."""
    assert sf.excludes(0.113, 0.149, 8.04).endswith("excludes the paper's 1.85% (0.1490 ppl here)")
    assert "does not exclude" in sf.excludes(0.2, 0.149, 8.04)


def test_sign_flips_count_every_pattern():
    assert sf.sign_flip_share([1.0, 1.0, 1.0], lambda d: bool(np.all(d > 0))) == 1 / 8
    assert sf.sign_flip_share([0.5] * 6, sf.above(0.0)) == 1 / 64


def test_the_early_check_compares_pairs_before_release():
    runs = _runs({"gelu": [0.5, 0.4], "swiglu": [0.1, 0.2]})
    table = spec.early(runs, _curves(runs))
    assert list(table.step) == [20] * 4
    assert spec.early_check(table).verdict == "check passed"
    assert spec.early_check(spec.early(runs, _curves(runs, logit_gap=-0.2))).verdict == "check failed"
    too_early = spec.early(_runs({"gelu": [0.5], "swiglu": [0.1]}, released=5), _curves(runs))
    found = spec.early_check(too_early)
    assert found.verdict == "check failed" and "gelu seed 0" in found.evidence


def test_every_arm_builds_a_valid_run_and_pairs_share_initialization_and_data():
    for plan in spec.BUDGETS.values():
        runs = spec.plan_runs(plan, 0)
        first = plan.archs[0]
        assert (
            len(runs)
            == len(set(runs))
            == (sum(plan.seeds[a] for a in plan.archs) * len(plan.arms) + plan.seeds[first] * len(plan.controls))
        )
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
    # both arms read the lower-copy score every 0.5%; only the intervention is released by it
    assert control.intervention.score_every == arm.intervention.score_every == 0.005 and not control.intervention.active
    demo = spec.BUDGETS["demo"]
    assert demo.steps == 600 and demo.eval_every == 18 == round(0.03 * demo.steps)
    # the GELU pairs are enough for the sign-flip null to fall to 5%: the smallest share of 2^k patterns is 1/2^k
    assert 0.5 ** demo.seeds["gelu"] <= sf.FPR_MAX < 0.5 ** (demo.seeds["gelu"] - 1)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(
        spec.BUDGETS,
        "smoke",
        dataclasses.replace(
            spec.BUDGETS["smoke"],
            layers=2,
            d_model=32,
            context=32,
            steps=8,
            batch=4,
            eval_every=2,
            eval_batches=1,
            final_batches=2,
            warmup=1,
            max_tokens=20_000,
            seeds={"gelu": 2, "swiglu": 2},
            score_every=0.125,
            pathway_seeds=2,
        ),
    )


def test_tiny_run_writes_every_table_and_resumes_without_retraining(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(spec.os, "cpu_count", lambda: 1)
    section = studies.run(StudyConfig(study="specialization"), tmp_path)
    curves = pd.read_csv(tmp_path / "curves.csv")
    assert len(curves.run.unique()) == 8 and set(curves.step) == {2, 4, 6, 8}
    assert {"lower_copy", "lower_copy_chance", "lower_copy_excess"} <= set(curves.columns)
    gains = pd.read_csv(tmp_path / "gains.csv")
    assert set(gains.arch) == {"gelu", "swiglu"} and (gains.seeds == 2).all()
    assert (tmp_path / "curves.png").is_file() and len(section.findings) == 7
    # the pathway's controls at 3% (step 2 of 8): GELU and SwiGLU seeds 0-1 read from the full runs, the others short
    pathway = pd.read_csv(tmp_path / "pathway.csv")
    assert len(pathway) == 10 and (pathway.step == 2).all() and pathway.upper_ffn_write_rms.notna().all()
    assert set(pathway[pathway.short].run) == {
        "gelu_matched_control_seed0_to2",
        "gelu_matched_control_seed1_to2",
        "geglu_control_seed0_to2",
        "geglu_control_seed1_to2",
        "gelu_control_seed2_to2",
        "gelu_control_seed3_to2",
    }
    assert section.findings[-1].name == "specialization: gated FFNs cut the upper residual write"
    assert (tmp_path / "table5.md").is_file() and (tmp_path / "pathway.png").is_file()
    readings = pd.read_csv(tmp_path / "readings.csv")
    assert len(readings.run.unique()) == 8 and set(readings.step) == {
        1
    }  # every step up to the forced 12% (step 1 of 8)
    assert {"untrained_dppl_zero_qk", "untrained_lower_copy"} <= set(pd.read_csv(tmp_path / "runs.csv").columns)
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
    short = RunConfig.from_dict(
        {
            **cfg.to_dict(),
            "model": {**cfg.model.to_dict(), "context": 32},
            "train": {
                **cfg.to_dict()["train"],
                "steps": 2,
                "batch": 2,
                "accum": 1,
                "warmup": 1,
                "eval_every": 2,
                "eval_batches": 1,
                "precision": "fp32",
                "checkpoint_every": 0,
            },
        }
    )
    summary = Trainer(short, tmp_path / "run", progress=False).run()
    assert summary["steps"] == 2 and math.isfinite(summary["val_loss"])
