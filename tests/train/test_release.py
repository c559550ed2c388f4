"""The Zhu et al. 2026 release rule fires at the step a brute-force reading of the rule gives on synthetic
lower-copy traces (threshold, patience, earliest, forced, fixed, raw or excess score, early evaluations
counted or not), then ramps the multiplier linearly; replay re-runs it on logged scores, readings every 0.5%
let it fire at 4% and date maturity, and the cadence warnings name a rule that cannot fire or fires at
initialization."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.train.config import InterventionConfig
from attnlab.train.release import (
    TABLE8_RULES,
    Release,
    cadence_warnings,
    maturity,
    reading_interval,
    reads_score,
    replay,
    table8,
)

STEPS = 1000


def _replay(cfg: InterventionConfig, trace: dict[int, float], steps: int = STEPS):
    """Run the trainer's order of calls: advance before each step, observe after evaluations."""
    rule = Release(cfg, steps)
    for step in range(steps):
        rule.advance(step)
        if step in trace:
            rule.observe(step, trace[step])
    return rule


def _reference(cfg: InterventionConfig, trace: dict[int, float], steps: int = STEPS):
    """Zhu et al. 2026 §2 read literally: the first evaluation at or after the earliest step whose last
    ``patience`` scores (from the earliest step on, unless count_early) all reach the threshold; else the
    forced step."""
    earliest, forced = math.ceil(cfg.earliest * steps), math.ceil(cfg.forced * steps)
    evals = sorted(s for s in trace if cfg.count_early or s >= earliest)
    for i, step in enumerate(evals):
        if step >= forced:
            break
        window = [trace[s] for s in evals[max(0, i - cfg.patience + 1) : i + 1]]
        if step >= earliest and len(window) == cfg.patience and all(v >= cfg.threshold for v in window):
            return step, "rule"
    return forced, "forced"


def test_rule_waits_for_patience_consecutive_evaluations():
    cfg = InterventionConfig(upper_qk_lr=0.25)
    trace = {s: (0.001 if s < 50 else 0.006) for s in range(10, STEPS, 10)}
    trace[60] = 0.004  # breaks the run: 50 ok, 60 not, then 70, 80, 90
    rule = _replay(cfg, trace)
    assert (rule.released_at, rule.reason) == (90, "rule") == _reference(cfg, trace)


def test_rule_never_fires_before_the_earliest_step():
    trace = {s: 0.5 for s in range(5, STEPS, 5)}
    # from step 30 on: the evaluations at 30, 35 and 40 make the patience
    cfg = InterventionConfig(upper_qk_lr=0.25, earliest=0.03)
    assert _replay(cfg, trace).released_at == 40 == _reference(cfg, trace)[0]
    early = InterventionConfig(upper_qk_lr=0.25, earliest=0.03, count_early=True)
    assert _replay(early, trace).released_at == 30 == _reference(early, trace)[0]


def test_release_is_forced_at_twelve_percent():
    cfg = InterventionConfig(upper_qk_lr=0.25)
    trace = {s: 0.001 for s in range(10, STEPS, 10)}
    rule = _replay(cfg, trace)
    assert (rule.released_at, rule.reason) == (120, "forced")


def test_missing_scores_never_count_as_mature():
    cfg = InterventionConfig(upper_qk_lr=0.25)
    trace = {s: (math.nan if s % 20 else 0.01) for s in range(10, STEPS, 10)}
    assert _replay(cfg, trace).reason == "forced"


def test_fixed_release_ignores_the_scores():
    cfg = InterventionConfig(upper_qk_lr=0.25, release="fixed", release_at=0.06)
    rule = _replay(cfg, {s: 1.0 for s in range(10, STEPS, 10)})
    assert (rule.released_at, rule.reason) == (60, "fixed")
    never = _replay(InterventionConfig(upper_qk_lr=0.25, release="never"), {})
    assert never.released_at is None and never.upper_qk_multiplier(STEPS - 1) == 0.25


def test_multiplier_and_floor_ramp_linearly_over_one_percent():
    cfg = InterventionConfig(upper_qk_lr=0.25, entropy_floor=0.1, release="fixed", release_at=0.5, ramp=0.01)
    rule = _replay(cfg, {})
    assert rule.released_at == 500
    assert rule.upper_qk_multiplier(499) == 0.25 and rule.entropy_floor(499) == 0.1
    assert rule.upper_qk_multiplier(505) == pytest.approx(0.625) and rule.entropy_floor(505) == pytest.approx(0.05)
    assert rule.upper_qk_multiplier(510) == 1.0 and rule.entropy_floor(510) == 0.0


def test_state_round_trips_so_a_resumed_run_releases_alike():
    cfg = InterventionConfig(upper_qk_lr=0.25)
    trace = {s: (0.001 if s < 200 else 0.01) for s in range(10, STEPS, 10)}
    first = _replay(cfg, {s: v for s, v in trace.items() if s < 100}, steps=STEPS)
    resumed = Release(cfg, STEPS)
    resumed.load_state_dict(first.state_dict())
    for step in range(100, STEPS):
        resumed.advance(step)
        if step in trace:
            resumed.observe(step, trace[step])
    assert resumed.released_at == _replay(cfg, trace).released_at


@settings(max_examples=150, deadline=None)
@given(
    scores=st.lists(st.sampled_from([0.0, 0.004, 0.005, 0.02, math.nan]), min_size=5, max_size=40),
    every=st.integers(1, 8),
    patience=st.integers(1, 4),
    threshold=st.sampled_from([0.005, 0.01]),
    count_early=st.booleans(),
)
def test_rule_matches_the_brute_force_reading_on_random_traces(scores, every, patience, threshold, count_early):
    cfg = InterventionConfig(upper_qk_lr=0.25, patience=patience, threshold=threshold, count_early=count_early)
    steps = 200
    trace = {every * (i + 1): v for i, v in enumerate(scores) if every * (i + 1) < steps}
    rule = _replay(cfg, trace, steps)
    assert (rule.released_at, rule.reason) == _reference(cfg, trace, steps)


def test_nothing_is_released_when_no_intervention_is_on():
    rule = _replay(InterventionConfig(), {s: 1.0 for s in range(10, STEPS, 10)})
    assert rule.released_at is None and rule.upper_qk_multiplier(0) == 1.0 and rule.entropy_floor(0) == 0.0


def test_evaluations_before_the_earliest_step_count_only_when_asked():
    trace = {10: 0.01, 20: 0.01, 30: 0.01, 40: 0.01, 50: 0.01}
    assert (
        _replay(InterventionConfig(upper_qk_lr=0.25), trace).released_at
        == 50
        == _reference(InterventionConfig(upper_qk_lr=0.25), trace)[0]
    )
    early = InterventionConfig(upper_qk_lr=0.25, count_early=True)
    assert _replay(early, trace).released_at == 30 == _reference(early, trace)[0]


def test_the_excess_score_subtracts_uniform_attention_s_score():
    cfg = InterventionConfig(upper_qk_lr=0.25, score="excess")
    rule = Release(cfg, STEPS)
    for step in (30, 40, 50):
        rule.observe(step, 0.030, 0.028)  # raw 0.03 >= 0.005, but only 0.002 above chance
    assert rule.released_at is None
    for step in (60, 70, 80):
        rule.observe(step, 0.034, 0.028)
    assert (rule.released_at, rule.reason) == (80, "rule")
    raw = Release(InterventionConfig(upper_qk_lr=0.25), STEPS)
    for step in (30, 40, 50):
        raw.observe(step, 0.030, 0.028)
    assert raw.released_at == 50


def test_replay_of_logged_scores_releases_where_the_trainer_s_order_of_calls_does():
    trace = {s: (0.001 if s < 70 else 0.01) for s in range(10, STEPS, 10)}
    for cfg in (
        InterventionConfig(upper_qk_lr=0.25),
        InterventionConfig(upper_qk_lr=0.25, threshold=0.5),
        InterventionConfig(upper_qk_lr=0.25, release="fixed", release_at=0.055),
    ):
        logged = [(s, v, 0.0) for s, v in trace.items()]
        expected = _replay(cfg, trace)
        # the trainer observes the evaluation after step s before it trains step s
        got = replay(cfg, STEPS, logged)
        assert (got.released_at, got.reason) == (expected.released_at, expected.reason)
    rows = {r["rule"]: r for r in table8(InterventionConfig(upper_qk_lr=0.25), STEPS, logged)}
    assert list(rows) == list(TABLE8_RULES)
    assert rows["main rule"]["released_at"] == 90 and rows["no patience"]["released_at"] == 70
    assert rows["stricter patience"]["released_at"] == 110 and rows["higher threshold"]["fraction"] == 0.09


def test_old_checkpoints_without_the_chance_baseline_load():
    rule = Release(InterventionConfig(upper_qk_lr=0.25), STEPS)
    rule.load_state_dict({"scores": [[10, 0.01], [20, 0.02]], "released_at": None, "reason": None})
    assert rule.scores[1][:2] == (20, 0.02) and math.isnan(rule.scores[1][2])


def test_warnings_name_a_rule_that_cannot_fire_or_fires_at_initialization():
    cfg = InterventionConfig(upper_qk_lr=0.25)
    assert cadence_warnings(cfg, 1000, 10, chance=0.004) == []
    sparse = cadence_warnings(cfg, 1000, 40, chance=0.004)  # evaluations at 40, 80: two in steps 30-119
    assert len(sparse) == 1 and "cannot fire: 2 evaluations" in sparse[0] and "every 30 steps" in sparse[0]
    assert "train for more steps" in cadence_warnings(cfg, 20, 1, chance=0.004)[0]
    at_init = cadence_warnings(cfg, 1000, 10, chance=0.02)
    assert len(at_init) == 1 and "fires at initialization" in at_init[0]
    assert cadence_warnings(InterventionConfig(upper_qk_lr=0.25, score="excess"), 1000, 10, chance=0.02) == []
    assert cadence_warnings(InterventionConfig(), 1000, 500, chance=0.5) == []


def test_readings_every_half_percent_up_to_the_forced_step_let_the_rule_fire_at_four_percent():
    cfg = InterventionConfig(upper_qk_lr=0.25, score="excess", score_every=0.005)
    grid = [s for s in range(601) if reads_score(cfg, 600, s)]
    assert reading_interval(cfg, 600) == 3 and grid == list(range(3, 73, 3))
    assert reading_interval(InterventionConfig(), 600) == 0 and not reads_score(InterventionConfig(), 600, 12)
    # a score mature from the start: the rule's first chance is the third reading from 3% (steps 18, 21, 24),
    # the seed's Table 8 release at 4.01%
    rule = replay(cfg, 600, [(s, 0.05, 0.02) for s in grid])
    assert (rule.released_at, rule.reason) == (24, "rule")
    assert cadence_warnings(cfg, 600, eval_every=300, chance=0.02) == []


def test_maturity_is_the_first_of_patience_consecutive_readings_at_the_threshold():
    cfg = InterventionConfig(upper_qk_lr=0.25, score="excess")
    excess = {3: 0.0, 6: 0.006, 9: 0.001, 12: 0.006, 15: 0.007, 18: 0.009, 21: 0.002}
    readings = [(s, 0.02 + e, 0.02) for s, e in excess.items()]
    assert maturity(cfg, readings) == 12  # 6 is broken by 9; 12, 15, 18 make the patience
    assert maturity(cfg, readings[:-2]) is None
    assert maturity(InterventionConfig(score="raw"), readings) == 3  # raw scores sit above 0.005 by chance
