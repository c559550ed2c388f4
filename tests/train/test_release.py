"""The seed-002 release rule fires at the step a brute-force reading of the rule gives on synthetic
lower-copy traces (threshold, patience, earliest, forced, fixed), then ramps the multiplier linearly."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.train.config import InterventionConfig
from attnlab.train.release import Release

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
    """Seed 002 §2 read literally: the first evaluation at or after the earliest step whose last
    ``patience`` scores all reach the threshold; else the forced step."""
    earliest, forced = math.ceil(cfg.earliest * steps), math.ceil(cfg.forced * steps)
    evals = sorted(trace)
    for i, step in enumerate(evals):
        if step >= forced:
            break
        window = [trace[s] for s in evals[max(0, i - cfg.patience + 1):i + 1]]
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
    cfg = InterventionConfig(upper_qk_lr=0.25, earliest=0.03)
    trace = {s: 0.5 for s in range(5, STEPS, 5)}
    rule = _replay(cfg, trace)
    assert rule.released_at == 30 == _reference(cfg, trace)[0]


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
@given(scores=st.lists(st.sampled_from([0.0, 0.004, 0.005, 0.02, math.nan]), min_size=5, max_size=40),
       every=st.integers(1, 8), patience=st.integers(1, 4), threshold=st.sampled_from([0.005, 0.01]))
def test_rule_matches_the_brute_force_reading_on_random_traces(scores, every, patience, threshold):
    cfg = InterventionConfig(upper_qk_lr=0.25, patience=patience, threshold=threshold)
    steps = 200
    trace = {every * (i + 1): v for i, v in enumerate(scores) if every * (i + 1) < steps}
    rule = _replay(cfg, trace, steps)
    assert (rule.released_at, rule.reason) == _reference(cfg, trace, steps)


def test_nothing_is_released_when_no_intervention_is_on():
    rule = _replay(InterventionConfig(), {s: 1.0 for s in range(10, STEPS, 10)})
    assert rule.released_at is None and rule.upper_qk_multiplier(0) == 1.0 and rule.entropy_floor(0) == 0.0
