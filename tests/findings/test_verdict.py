"""decide() labels a claim from its rule's outcome, its null control and its power (underpowered whatever the rule
says when the power is below 80%), and never says reproduced when the null passes; false_positive_rate measures a rule under its null; paired_mde matches a simulated t-test's power."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.diagnostics.paired import paired_interval, paired_mde
from attnlab.findings.finding import MDE, Null
from attnlab.findings.verdict import decide, false_positive_rate

FAILS, PASSES, NOT_RUN = Null("untrained", False, "0.7"), Null("untrained", True, "0.7"), Null("untrained", None, "")
SEES, BLIND, NONE = MDE(0.1, 0.5, "ppl", "t"), MDE(0.5, 0.1, "ppl", "t"), MDE(None, None, "", "qualitative")
# a simulated power below 80% makes a design underpowered even where its closed-form MDE is small
POWERED, WEAK = MDE(0.1, 0.5, "ppl", "sim", power=0.9), MDE(0.1, 0.5, "ppl", "sim", power=0.5)


@pytest.mark.parametrize(
    ("holds", "null", "mde", "precondition", "label"),
    [
        (True, FAILS, SEES, None, "reproduced"),
        (True, FAILS, BLIND, None, "underpowered"),
        (True, FAILS, WEAK, None, "underpowered"),
        (False, FAILS, WEAK, None, "underpowered"),
        (True, FAILS, POWERED, None, "reproduced"),
        (True, FAILS, MDE(0.5, 0.1, "ppl", "sim", power=0.9), None, "underpowered"),
        (False, FAILS, POWERED, None, "not reproduced"),
        (True, PASSES, WEAK, None, "underpowered"),
        (True, PASSES, SEES, None, "not checked"),
        (True, NOT_RUN, SEES, None, "not checked"),
        (False, FAILS, SEES, None, "not reproduced"),
        (False, FAILS, NONE, None, "not reproduced"),
        (False, FAILS, BLIND, None, "underpowered"),
        (False, PASSES, BLIND, None, "underpowered"),
        (False, NOT_RUN, SEES, None, "not reproduced"),
        (None, FAILS, SEES, None, "not checked"),
        (True, FAILS, SEES, "the positive control failed", "not checked"),
    ],
)
def test_the_label_follows_rule_null_and_power(holds, null, mde, precondition, label):
    found = decide("c", rule="r", holds=holds, null=null, mde=mde, evidence="e", precondition=precondition)
    assert found.verdict == label and found.rule == "r" and found.null is null and found.mde is mde
    assert bool(found.reason) == (label in ("not checked", "underpowered"))
    if precondition:
        assert found.reason == precondition
    if null is PASSES and holds and label == "not checked":
        assert "passes the rule too" in found.reason


def test_false_positive_rate_counts_the_rule_firing_under_its_null():
    # "the mean of 10 N(0, 1) draws exceeds 1.96 / sqrt(10)" fires 2.5% of the time
    rate = false_positive_rate(
        lambda x: x.mean() > 1.96 / math.sqrt(10), lambda rng: rng.standard_normal(10), trials=4000
    )
    assert 0.018 < rate < 0.033
    with pytest.raises(ValueError, match="trials"):
        false_positive_rate(bool, lambda rng: 0, trials=0)


def test_paired_mde_is_the_effect_a_paired_t_test_sees_80_percent_of_the_time():
    n, sd = 5, 1.0
    mde = paired_mde(sd, n)
    rng = np.random.default_rng(0)
    seen = np.mean([paired_interval(rng.normal(mde, sd, n))["lo"] > 0 for _ in range(4000)])
    # two-sided 5%: P(lo > 0) is the power on the effect's side; the non-central t gives about 0.79-0.80
    assert 0.76 < seen < 0.84
    assert math.isnan(paired_mde(sd, 1)) and math.isnan(paired_mde(math.nan, 4))
    with pytest.raises(ValueError, match="alpha"):
        paired_mde(1.0, 3, alpha=1.5)


@pytest.mark.parametrize("holds", [True, False])
@pytest.mark.parametrize("read", [[0.99, math.nan], [], np.array([[1.0], [math.nan]])])
def test_a_rule_that_read_a_missing_value_or_none_is_not_checked_never_not_reproduced(holds, read):
    found = decide("c", rule="r", holds=holds, null=FAILS, mde=SEES, evidence="e", reads={"the seeds' share": read})
    assert found.verdict == "not checked" and found.reason.startswith("the seeds' share: a missing value")


def test_a_null_that_read_a_missing_value_is_not_run_so_a_holding_rule_is_not_checked():
    found = decide("c", rule="r", holds=True, null=FAILS, mde=SEES, evidence="e", null_reads={"untrained": [math.nan]})
    assert found.verdict == "not checked" and found.null.passes is None and "not run: untrained" in found.null.outcome
    known = decide("c", rule="r", holds=True, null=FAILS, mde=SEES, evidence="e", reads={"x": [1.0]}, null_reads={})
    assert known.verdict == "reproduced"


def test_a_nan_in_one_seed_s_masked_loss_leaves_the_masking_finding_not_checked():
    """The user's case: NaN in one raw CSV flipped the sinks study's masking finding from reproduced to not
    reproduced (NaN >= x is False)."""
    import pandas as pd

    from attnlab.studies.sinks import findings as sinks

    runs = [(f"{a}_1x1_s{k}", a) for a in ("softmax", "relu") for k in (0, 1)]
    table = pd.DataFrame(
        {
            "run": [r for r, _ in runs],
            "attention": [a for _, a in runs],
            "arch": "1x1",
            "seed": 0,
            "learned": True,
            "loss": 1e-6,
            "masked_loss": [1.2 if a == "softmax" else 1e-6 for _, a in runs],
            "masked_linf": 3.0,
            "zero_loss": 0.1,
            "untrained_loss": 0.1,
            "untrained_masked_loss": 0.10001,
        }
    )

    def verdict(masked: pd.DataFrame) -> str:
        rises = masked.assign(
            rise_over_zero=(masked["masked_loss"] - masked["loss"]) / masked["zero_loss"],
            untrained_rise_over_zero=(masked["untrained_masked_loss"] - masked["untrained_loss"]) / masked["zero_loss"],
        )
        return sinks.masking_finding(rises, 1000)

    assert verdict(table).verdict == "reproduced"
    for column in ("loss", "masked_loss", "zero_loss"):
        torn = table.astype({column: float})
        torn.loc[2, column] = math.nan  # relu_1x1_s0
        found = verdict(torn)
        assert found.verdict == "not checked" and "a missing value" in found.reason, column
