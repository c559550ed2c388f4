"""The concentration findings decide by the paper's own screen: low-safe cells (<= 3% over all heads) by Wilson
intervals against 10% of softmax (underpowered, not "not reproduced", where prompts are too few), sufficiency by
Fisher's test against softmax with softmax-against-itself as null, prevalence as a placement among the paper's
models that i.i.d. rows fail."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnlab.studies.concentration import findings as cf
from attnlab.studies.concentration import rules
from attnlab.studies.concentration.rules import Counts


def _cells(base, cells):
    """A matched table: cells (recipe, all-head safe %, top-40 safe %, accuracy %)."""
    return pd.DataFrame(
        [
            {"recipe": r, "softmax %": base, "all-head safe %": safe, "top-40 safe %": top, "accuracy %": acc}
            for r, safe, top, acc in cells
        ]
    )


# SmolLM2-135M's demo (20 prompts, softmax 80%): no cell <= 3% over all heads; the top-K column flagged three
SMOLLM2 = [
    ("relu_p2_b0", 27.3, 0.0, 5.0),
    ("relu_p2_bauto", 12.1, 0.0, 10.0),
    ("relu_p4_bauto", 27.9, 0.0, 20.0),
    ("relu_p16_b0", 84.6, 59.6, 0.0),
]


def test_the_demo_smollm2_screen_is_not_checked_as_no_cell_is_low_over_all_heads():
    f = cf.finding(_cells(80.0, SMOLLM2), 20)
    assert f.verdict == "not checked"
    assert "no ReLU cell has <= 3% of its answering rows measured safe over all heads" in f.reason
    assert "relu_p2_bauto, 12.1%" in f.reason


def test_four_of_twenty_against_an_eight_percent_line_is_underpowered_not_a_failure():
    f = cf.finding(_cells(80.0, [("relu_p4_bauto", 2.0, 0.0, 20.0), ("relu_p8_b0", 90.0, 60.0, 80.0)]), 20)
    assert f.verdict == "underpowered" and f.mde.power < 0.8
    # its lower bound clears the line by 0.1 pp, yet the screen never calls 0 of 20 collapsed at 20 prompts
    assert "accuracy 20.0% [8.1, 41.6] preserved" in f.evidence and "fires on 0%" in f.reason


def test_collapse_is_decided_by_the_wilson_interval_against_ten_percent_of_softmax():
    table = [("relu_p2_b0", 1.0, 0.0, 0.0), ("relu_p2_bauto", 3.0, 5.0, 1.0), ("relu_p16_b0", 90.0, 60.0, 80.0)]
    yes = cf.finding(_cells(80.0, table), 200)
    assert yes.verdict == "reproduced" and yes.mde.power >= 0.8
    assert "2 collapsed (Wilson upper bound <= 8.0%), 0 preserved, 0 undecided" in yes.evidence
    assert yes.null.passes is False and "relu_p16_b0" in yes.null.outcome
    kept = cf.finding(_cells(80.0, [("relu_p2_b0", 1.0, 0.0, 0.0), ("relu_p2_bauto", 2.0, 0.0, 30.0)]), 200)
    assert kept.verdict == "not reproduced" and "1 preserved" in kept.evidence
    edge = cf.finding(_cells(80.0, [("relu_p2_b0", 1.0, 0.0, 5.0), ("relu_p16_b0", 90.0, 60.0, 80.0)]), 200)
    assert edge.verdict == "not checked" and "contains the collapse line (8.0%)" in edge.reason


def test_the_top_k_column_flags_no_cell_and_the_safest_cells_are_the_null():
    low_top_only = cf.finding(_cells(90.0, [("relu_p2_b0", 27.0, 0.0, 0.0), ("relu_p8_b0", 66.0, 26.0, 90.0)]), 200)
    assert low_top_only.verdict == "not checked" and "0 cell(s)" in low_top_only.evidence
    everything = cf.finding(_cells(90.0, [("relu_p2_b0", 1.0, 0.0, 0.0), ("relu_p16_b0", 95.0, 90.0, 0.5)]), 200)
    assert everything.verdict == "not checked" and everything.null.passes and "passes the rule too" in everything.reason
    unlearned = cf.finding(_cells(40.0, [("relu_p2_b0", 0.0, 0.0, 0.0)]), 200)
    assert unlearned.verdict == "not checked" and "softmax scores only 40.0%" in unlearned.reason


def test_sufficiency_needs_a_high_safe_cell_significantly_below_softmax_by_fisher():
    halves = ((80, 100), (80, 100))
    table = _cells(80.0, [("relu_p16_b0", 90.7, 50.0, 60.0), ("relu_p2_b0", 40.0, 0.0, 5.0)])
    yes = cf.sufficiency_finding(table, 200, halves)
    assert yes.verdict == "reproduced" and "1 significantly below softmax" in yes.evidence
    assert yes.null.passes is False and "80/100 against 80/100" in yes.null.outcome
    no = cf.sufficiency_finding(_cells(80.0, [("relu_p16_b0", 90.7, 50.0, 78.0)]), 200, halves)
    assert no.verdict == "not reproduced"
    few = cf.sufficiency_finding(_cells(80.0, [("relu_p16_b0", 90.7, 50.0, 60.0)]), 5, ((2, 2), (2, 3)))
    assert few.verdict == "underpowered" and few.mde.power < 0.8
    none = cf.sufficiency_finding(_cells(80.0, [("relu_p2_b0", 40.0, 0.0, 5.0)]), 200, halves)
    assert none.verdict == "not checked" and "no ReLU cell has >= 66%" in none.reason
    lost = cf.sufficiency_finding(table, 200, ((60, 100), (90, 100)))  # softmax's halves differ: null passes
    assert lost.verdict == "not checked" and lost.null.passes


def _shares(levels: dict[str, float], prompts: int = 20, rows: int = 1000, spread: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        [
            {
                "suite": s,
                "prompt": i,
                "unsafe": int(rng.binomial(rows, min(max(level + spread * rng.standard_normal(), 0), 1))),
                "active": rows,
            }
            for s, level in levels.items()
            for i in range(prompts)
        ]
    )


def _noise(share: float = 0.977, seed: int = 0) -> Counts:
    rng = np.random.default_rng(seed)
    active = np.full(20, 200)
    return Counts(rng.binomial(active, share), active)


NOISE = (_noise(seed=0), _noise(seed=1))


def test_prevalence_places_the_model_among_the_papers_models():
    gemma = cf.prevalence_finding(_shares({"niah": 0.72, "induction": 0.90}), NOISE)
    assert gemma.verdict == "reproduced" and gemma.null.passes is False
    assert "niah 72." in gemma.evidence and "like Qwen3/Gemma (>= 69%)" in gemma.evidence
    llama = cf.prevalence_finding(_shares({"niah": 0.20, "induction": 0.22}), NOISE)
    assert llama.verdict == "reproduced" and "like Llama (18-30%)" in llama.evidence
    smollm2 = cf.prevalence_finding(_shares({"niah": 0.674, "induction": 0.53, "copying": 0.59}), NOISE)
    assert smollm2.verdict == "not reproduced"
    assert "between Llama (<= 30%) and the unsafe models (>= 62%)" in smollm2.evidence
    assert "like Pythia in distribution (62-66%)" in smollm2.evidence and "induction between" in smollm2.evidence
    mixed = cf.prevalence_finding(_shares({"niah": 0.20, "induction": 0.90}), NOISE)
    assert mixed.verdict == "not reproduced"
    edge = cf.prevalence_finding(_shares({"niah": 0.617, "induction": 0.9}, spread=0.1), NOISE)
    assert edge.verdict == "not checked" and "niah" in edge.reason


def test_iid_rows_are_placed_level_with_noise_so_they_fail_the_placement():
    """The null run for real: two draws of i.i.d. N(0, 1) rows of 16-256 keys, one placed against the other, sit
    level with noise; a model as unsafe as them is not placed with the paper's unsafe models."""
    keys = np.arange(16, 257, 16)  # every 16th query of 256-token prompts, as the pretrained smoke audit reads
    reference, control = cf.iid_counts(keys, 20, seed=0), cf.iid_counts(keys, 20, seed=1)
    assert rules.placement_sides([control], reference) == ["noise"]
    noisy = cf.prevalence_finding(_shares({"niah": 0.977, "induction": 0.975}), (reference, control))
    assert noisy.verdict == "not reproduced" and noisy.null.passes is False
    null = cf.iid_prevalence(keys, 20)
    assert null["unsafe lo"] > 90 and null["rows"] > 3000


def _sweep(base: int, wortsman: list[int], n: int = 150) -> pd.DataFrame:
    rows = [("softmax", "softmax", base), ("relu_p2_b0", "relu_p2_b0", 3)]
    rows += [(f"wortsman_{v}", f"wortsman_{v}", k) for v, k in zip(("p1_L", "p1_sqrtL", "p2_L", "p2_sqrtL"), wortsman)]
    return pd.DataFrame([{"recipe": r, "map": m, "correct": k, "n": n, "accuracy %": 100 * k / n} for r, m, k in rows])


def test_unnormalized_recipes_are_screened_by_the_collapse_rule_against_softmax_itself():
    halves = ((64, 75), (59, 75))
    # the demo's SmolLM2 sweep: softmax 123/150, every Wortsman recipe 0/150
    yes = cf.unnormalized_finding(_sweep(123, [0, 0, 0, 0]), 150, halves)
    assert yes.verdict == "reproduced" and yes.name == rules.UNNORMALIZED_NAME
    assert "4 of 4 un-normalized recipes collapsed" in yes.evidence and "relu_p2_b0" not in yes.evidence
    assert yes.null.passes is False and yes.mde.power >= 0.8
    kept = cf.unnormalized_finding(_sweep(123, [0, 0, 0, 60]), 150, halves)  # one Wortsman recipe preserved
    assert kept.verdict == "not reproduced" and "wortsman_p2_sqrtL: 60/150 (40.0%) preserved" in kept.evidence
    weak = cf.unnormalized_finding(_sweep(20, [0, 0, 0, 0]), 150, halves)
    assert weak.verdict == "not checked" and "nothing to collapse" in weak.reason


def test_the_bound_check_counts_false_negatives_at_the_audits_tolerance():
    valid = pd.DataFrame(
        {"b": ["0", "auto"], "p": [2, 2], "rows": [100, 100], "FN": [1, 0], "FN eps": [0, 0], "FP": [5, 9]}
    )
    ok = cf.bound_check(valid)
    assert ok.verdict == "check passed" and ok.name == rules.BOUND_NAME and "without tolerance 1" in ok.evidence
    bad = cf.bound_check(valid.assign(**{"FN eps": [0, 2]}))
    assert bad.verdict == "check failed" and "most: 2 at b = auto, p = 2" in bad.evidence
