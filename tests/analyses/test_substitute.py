"""substitute decodes greedily as a hand loop does, tables accuracy with Wilson intervals, and refuses bad recipes."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import hooks, rowmaps, tasks
from attnlab.analyses import substitute
from attnlab.analyses.run import RunError
from attnlab.analyses.substitute import SubstituteConfig

from .test_hf_commands import _run

Z = 1.959963984540054  # the two-sided 95% normal quantile


# ------------------------------------------------------------------------------------------ refusals


def test_check_recipes_takes_registered_distinct_names():
    substitute.check_recipes(["relu_p4_bauto", "sigmoid_b0", "entmax_a1.5", "softmax"])


def test_b_auto_is_checked_against_the_bias_range_of_the_maps_that_take_it():
    substitute.check_recipes(["relu_p4_bauto", "sigmoid_bauto"], b_auto=1e4)  # the range's own end
    substitute.check_recipes(["relu_p4_b0", "softmax"], b_auto=1e5)  # no recipe takes b_auto: it is never used
    with pytest.raises(RunError, match="does not fit sigmoid_bauto"):
        substitute.check_recipes(["relu_p4_b0", "sigmoid_bauto"], b_auto=-1e5)


def test_an_unknown_recipe_is_refused_with_the_row_maps_own_message():
    with pytest.raises(ValueError) as expected:
        rowmaps.get("relu_p4_bfast")
    with pytest.raises(RunError) as exc:
        substitute.check_recipes(["sigmoid_b0", "relu_p4_bfast"])
    assert str(exc.value) == str(expected.value)


def test_a_repeated_recipe_is_refused():
    with pytest.raises(RunError) as exc:
        substitute.check_recipes(["sigmoid_b0", "relu_p2_b0", "sigmoid_b0"])
    assert str(exc.value) == "--recipes has repeated names: ['sigmoid_b0', 'relu_p2_b0', 'sigmoid_b0']"


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"recipes": ()}, "--recipes needs at least one row-map name"),
        ({"recipes": ("relu_pX",)}, "unknown"),
        ({"recipes": ("sigmoid_b0", "sigmoid_b0")}, "repeated names"),
        ({"recipes": ("sigmoid_b0",), "prompts": 0}, "--prompts must be an int >= 1"),
        ({"recipes": ("sigmoid_b0",), "b_auto": math.inf}, "--b-auto must be finite"),
        # a b_auto outside the map's own bias range, which only the map built after calibration used to refuse
        (
            {"recipes": ("relu_p4_bauto",), "b_auto": 1e5},
            r"--b-auto 100000 does not fit relu_p4_bauto: .*\[-10000, 10000\]",
        ),
        ({"recipes": ("sigmoid_bauto",), "b_auto": -1e4 - 1}, "--b-auto -10001 does not fit sigmoid_bauto"),
    ],
)
def test_the_config_refuses_before_any_model_is_loaded(tmp_path, kw, message):
    with pytest.raises(RunError, match=message):
        SubstituteConfig(model=str(tmp_path / "no model here"), **kw)


# ------------------------------------------------------------------------------------------ decoding


def _hand_greedy(model, ids, n_new):
    """Greedy decoding the long way: a full forward per new token, the last position's argmax appended."""
    ids = list(ids)
    for _ in range(n_new):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        ids.append(int(logits.argmax()))
    return ids[-n_new:]


@pytest.mark.parametrize("n_new", [1, 5])
def test_greedy_equals_a_hand_loop(checkpoint, n_new):
    model, tok = hooks.load_model(checkpoint)
    for prompt in tasks.build_suite("niah", tok, 2, seed=0, pad=2):
        got = substitute.greedy(model, prompt, n_new, "cpu", tok.pad_token_id or tok.eos_token_id)
        assert got == _hand_greedy(model, prompt.input_ids, n_new)


# ------------------------------------------------------------------------------------------ the table


def _wilson(k, n):
    p = k / n
    centre, half = p + Z * Z / (2 * n), Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return (centre - half) / (1 + Z * Z / n), (centre + half) / (1 + Z * Z / n)


def test_accuracy_table_against_hand_counts():
    correct = {"softmax": [1, 1, 1, 0], "relu_p4_b1": [0, 1, 0, 0], "sigmoid_b0": [1, 1, 1, 1]}
    records = pd.DataFrame(
        [{"recipe": r, "prompt": i, "correct": bool(c)} for r, cs in correct.items() for i, c in enumerate(cs)]
    )
    resolved = {"softmax": "softmax", "relu_p4_b1": "relu_p4_b1", "sigmoid_b0": "sigmoid_b0"}
    table = substitute.accuracy_table(records, list(correct), resolved)
    assert table["recipe"].tolist() == list(correct) and table["map"].tolist() == list(correct)
    for line, (recipe, cs) in zip(table.to_dict("records"), correct.items()):
        k, n = sum(cs), len(cs)
        lo, hi = _wilson(k, n)
        assert (line["correct"], line["n"]) == (k, n), recipe
        assert line["accuracy %"] == pytest.approx(100 * k / n)
        assert (line["lo"], line["hi"]) == pytest.approx((100 * lo, 100 * hi), rel=1e-12)
    assert np.isnan(table["delta pp"].iloc[0])
    assert table["delta pp"].iloc[1:].tolist() == pytest.approx([25.0 - 75.0, 100.0 - 75.0])


def test_substitute_command_scores_recipes_against_softmax(checkpoint, tmp_path, capsys):
    out = tmp_path / "sub"
    code, stdout, err = _run(
        [
            "substitute",
            "--model",
            str(checkpoint),
            "--prompts",
            "3",
            "--pad",
            "1",
            "--recipes",
            "relu_p4_bauto",
            "sigmoid_b0",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    table = pd.read_csv(out / "substitute.csv")
    assert list(table["recipe"]) == ["softmax", "relu_p4_bauto", "sigmoid_b0"]
    assert table["map"].iloc[1].startswith("relu_p4_b") and table["map"].iloc[1] != "relu_p4_bauto"
    assert (table["n"] == 3).all()
    config = json.loads((out / "config.json").read_text())
    assert (config["pad"], config["pad_used"], config["length_used"]) == (1, 1, None)
    answers = pd.read_parquet(out / "answers.parquet")
    for recipe, group in answers.groupby("recipe"):
        line = table[table["recipe"] == recipe].iloc[0]
        assert line["correct"] == group["correct"].sum()
    base = table["accuracy %"].iloc[0]
    assert table["delta pp"].iloc[1:].tolist() == pytest.approx((table["accuracy %"].iloc[1:] - base).tolist())


def test_softmax_among_the_recipes_is_scored_once(checkpoint, tmp_path, capsys):
    out = tmp_path / "sub_softmax"
    code, _, err = _run(
        [
            "substitute",
            "--model",
            str(checkpoint),
            "--prompts",
            "2",
            "--pad",
            "1",
            "--recipes",
            "softmax",
            "sigmoid_b0",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    table = pd.read_csv(out / "substitute.csv")
    assert list(table["recipe"]) == ["softmax", "sigmoid_b0"] and (table["n"] == 2).all()
    assert len(pd.read_parquet(out / "answers.parquet")) == 4


def test_paper_names_the_papers_fourteen_recipes_in_place():
    from attnlab.cli import build_parser
    from attnlab.cli.base import build

    recipes = substitute.expand_recipes(("softmax", "paper", "relu_p3_b1"))
    assert recipes[0] == "softmax" and recipes[-1] == "relu_p3_b1" and len(recipes) == 16
    assert len(substitute.PAPER_RECIPES) == 14 and len(set(substitute.PAPER_RECIPES)) == 14
    assert sum(r.startswith("relu_p") for r in substitute.PAPER_RECIPES) == 8  # p = 2, 4, 8, 16 at b = 0, b_auto
    args = build_parser(["substitute"]).parse_args(["substitute", "--model", "m", "--recipes", "paper"])
    assert build(SubstituteConfig, args).recipes == substitute.PAPER_RECIPES


def test_baseline_below_80_percent_is_flagged_and_above_is_not():
    assert substitute.baseline_warning(80.0, "niah") is None
    warning = substitute.baseline_warning(79.5, "mqar")
    assert warning.startswith("softmax itself scores 79.5% (< 80%) on mqar") and "App. X" in warning


def test_accuracy_table_counts_decoy_tricked_and_neither_by_hand():
    flags = {
        "softmax": [(True, False), (False, True), (False, False)],
        "relu_p2_b0": [(False, True), (False, True), (True, False)],
    }
    records = pd.DataFrame(
        [{"recipe": r, "prompt": i, "correct": c, "decoy": d} for r, fs in flags.items() for i, (c, d) in enumerate(fs)]
    )
    table = substitute.accuracy_table(records, list(flags), {r: r for r in flags})
    assert table[["correct", "decoy", "neither"]].values.tolist() == [[1, 1, 1], [1, 2, 0]]
    plain = records.assign(decoy=None)
    assert "decoy" not in substitute.accuracy_table(plain, list(flags), {r: r for r in flags})


def _names_a_decoy(tok, prompt, generated: str) -> bool:
    """By hand: the first generated word is a decoy word, or a decoy value is in the generation (spaces
    aside, as a word-level decoder spaces out a UUID's dashes)."""
    if prompt.suite == "ruler_multikey":
        return any(d in generated.replace(" ", "") for d in prompt.meta["decoys"])
    first = generated.split()[:1]
    return bool(first) and first[0] in prompt.meta["decoys"]


@pytest.mark.parametrize("suite", ["niah_decoy", "niah_multi", "ruler_multikey"])
def test_decoy_suites_count_wrong_answers_that_name_a_decoy(checkpoint, tmp_path, capsys, suite):
    out = tmp_path / "sub_decoy"
    code, _, err = _run(
        [
            "substitute",
            "--model",
            str(checkpoint),
            "--suite",
            suite,
            "--prompts",
            "6",
            "--pad",
            "1",
            "--recipes",
            "sigmoid_b0",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    table = pd.read_csv(out / "substitute.csv")
    answers = pd.read_parquet(out / "answers.parquet")
    model, tok = hooks.load_model(checkpoint)
    prompts = tasks.build_suite(suite, tok, 6, pad=1)
    for recipe, group in answers.groupby("recipe"):
        line = table[table["recipe"] == recipe].iloc[0]
        tricked = sum(
            (not correct) and _names_a_decoy(tok, prompt, generated)
            for prompt, generated, correct in zip(prompts, group["generated"], group["correct"])
        )
        assert line["decoy"] == tricked
        assert line["correct"] + line["decoy"] + line["neither"] == line["n"] == 6
    plain = _run(
        [
            "substitute",
            "--model",
            str(checkpoint),
            "--prompts",
            "2",
            "--pad",
            "1",
            "--recipes",
            "sigmoid_b0",
            "--out",
            str(tmp_path / "plain"),
        ],
        capsys,
    )
    assert plain[0] == 0 and "decoy" not in pd.read_csv(tmp_path / "plain" / "substitute.csv")


def test_literary_reads_the_users_passages(checkpoint, tmp_path, capsys):
    text = tmp_path / "mine.txt"
    text.write_text(
        "## Mine\n"
        + "The dog ran to the old red barn and sat in the sun all day long. " * 3
        + "\n\n"
        + "A cat saw a big new sky and ran to the sun, and the sun was red and old and big. " * 2
    )
    out = tmp_path / "sub_literary"
    code, _, err = _run(
        [
            "substitute",
            "--model",
            str(checkpoint),
            "--suite",
            "literary",
            "--passages",
            str(text),
            "--prompts",
            "4",
            "--pad",
            "3",
            "--recipes",
            "relu_p2_b0",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["passages"] == str(text) and config["suite"] == "literary"
    assert (pd.read_csv(out / "substitute.csv")["n"] == 4).all()
    code, _, err = _run(
        [
            "substitute",
            "--model",
            str(checkpoint),
            "--suite",
            "literary",
            "--passages",
            str(tmp_path / "missing.txt"),
            "--recipes",
            "relu_p2_b0",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code != 0 and "--passages" in err and "is not a file" in err
