"""The matched diagnostic reads one final-query row per layer, head and prompt, and its shares, FN counts and head sets equal a hand count on those rows."""

from __future__ import annotations

import pandas as pd
import pytest

from attnlab.analyses import ablate, matched, substitute
from attnlab.analyses.run import RunError

from .test_hf_commands import _run

RECIPES = ("relu_p2_b0", "relu_p4_bauto")


@pytest.fixture(scope="module")
def ablated(checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("ablate") / "out"
    ablate.run(
        ablate.AblateConfig(
            model=str(checkpoint),
            k=(3,),
            random_draws=1,
            rank_prompts=2,
            rank_length=40,
            prompts=2,
            pad=1,
            recipe="relu_p2_b0",
            b="0",
        ),
        out,
        progress=False,
    )
    return out


@pytest.fixture(scope="module")
def result(checkpoint, ablated, tmp_path_factory):
    cfg = matched.MatchedConfig(
        model=str(checkpoint),
        ranking=str(ablated),
        k=3,
        recipes=RECIPES,
        prompts=4,
        pad=2,
        n_boot=200,
        recipe_matched=True,
    )
    return matched.run(cfg, tmp_path_factory.mktemp("matched") / "out", progress=False)


def test_rows_are_the_final_query_of_every_prompt(result):
    rows = pd.read_parquet(result["paths"]["rows_b0"])
    assert len(rows) == 4 * 2 * 4  # prompts x layers x heads: one row each
    assert (rows.groupby("prompt")["query"].nunique() == 1).all()


def test_shares_and_fn_equal_a_hand_count(result, ablated):
    table = result["table"]
    top = pd.read_csv(ablated / "ranking.csv").query("ranked").sort_values("rank").head(3)
    top_heads = set(zip(top["layer"], top["head"]))
    for name, p, b in (("relu_p2_b0", 2, "0"), ("relu_p4_bauto", 4, "auto")):
        rows = pd.read_parquet(result["paths"][f"rows_b{b}"])
        rows = rows[rows["status"] == "active"]
        in_top = [(l, h) in top_heads for l, h in zip(rows["layer"], rows["head"])]
        med = rows.groupby(["layer", "head"])[f"s_p{p}"].median().sort_values(ascending=False, kind="stable")
        in_matched = [lh in set(med.index[:3]) for lh in zip(rows["layer"], rows["head"])]
        for label, sub in (("all", rows), ("top-3", rows[in_top]), ("recipe-matched top-3", rows[in_matched])):
            line = table[(table["recipe"] == name) & (table["rows"] == label)].iloc[0]
            meas, pred = sub[f"safe_p{p}"].astype(bool), sub[f"pred_safe_p{p}"].astype(bool)
            eps = sub[f"safe_eps_p{p}"].astype(bool)
            assert line["n"] == len(sub)
            assert line["meas %"] == pytest.approx(100 * meas.mean())
            assert line["pred %"] == pytest.approx(100 * pred.mean())
            assert line["eps %"] == pytest.approx(100 * eps.mean())
            assert line["FN"] == int((pred & ~meas).sum()) and line["FN eps"] == int((pred & ~eps).sum())
            assert line["meas lo"] <= line["meas %"] <= line["meas hi"]


def test_a_hand_given_head_set_equals_the_ranking_s(checkpoint, ablated, result, tmp_path):
    top = pd.read_csv(ablated / "ranking.csv").query("ranked").sort_values("rank").head(3)
    heads = tuple(f"{l}.{h}" for l, h in zip(top["layer"], top["head"]))
    cfg = matched.MatchedConfig(
        model=str(checkpoint),
        heads=heads,
        recipes=RECIPES,
        prompts=4,
        pad=2,
        n_boot=200,
        recipe_matched=True,
        b_auto=result["b_auto"],
    )
    by_hand = matched.run(cfg, tmp_path / "out", progress=False)["table"]
    pd.testing.assert_frame_equal(by_hand, result["table"])


def test_substitution_accuracy_goes_beside_each_cell(checkpoint, ablated, tmp_path, capsys):
    sub = tmp_path / "sub"
    substitute.run(
        substitute.SubstituteConfig(model=str(checkpoint), recipes=RECIPES, prompts=2, pad=1), sub, progress=False
    )
    code, out, err = _run(
        [
            "matched",
            "--model",
            str(checkpoint),
            "--ranking",
            str(ablated),
            "--k",
            "3",
            "--recipes",
            *RECIPES,
            "--prompts",
            "2",
            "--pad",
            "1",
            "--n-boot",
            "50",
            "--substitution",
            str(sub),
            "--out",
            str(tmp_path / "m"),
        ],
        capsys,
    )
    assert code == 0, err
    table = pd.read_csv(tmp_path / "m" / "matched.csv")
    accuracy = pd.read_csv(sub / "substitute.csv").set_index("recipe")["accuracy %"]
    assert table["accuracy %"].tolist() == [accuracy[r] for r in table["recipe"]]
    assert "FN = predicted safe but S_p >= 1" in out


@pytest.mark.parametrize(
    "kw, message",
    [
        ({}, "give the head set by --ranking ABLATE_DIR or by --heads"),
        ({"ranking": "x", "heads": ("0.1",)}, "one of them"),
        ({"heads": ("0.x",)}, "--heads takes LAYER.HEAD pairs such as 3.7, got '0.x'"),
        ({"heads": ("0.1", "0.1")}, "repeated heads"),
        ({"heads": ("0.1",), "recipes": ("sigmoid_b0",)}, "takes ReLU recipes"),
        ({"heads": ("0.1",), "recipes": ("relu_p2_b0", "relu_p2_b0")}, "distinct ReLU recipes"),
        ({"heads": ("0.1",), "k": 3}, "with --heads the set is the 1 pairs given: drop --k"),
    ],
)
def test_bad_input_is_refused_before_loading(kw, message):
    with pytest.raises(RunError, match=message.replace(".", r"\.")):
        matched.MatchedConfig(model="no/such/model", **kw)


def test_a_ranking_folder_must_hold_enough_ranked_heads(tmp_path):
    with pytest.raises(RunError, match="cannot read its ranking.csv"):
        matched.ranked_heads(tmp_path, 3)
    pd.DataFrame({"layer": [0, 1], "head": [0, 0], "rank": [2, 1], "ranked": [True, False]}).to_csv(
        tmp_path / "ranking.csv", index=False
    )
    assert matched.ranked_heads(tmp_path, 1) == [(0, 0)]
    with pytest.raises(RunError, match="--k 2 exceeds the 1 ranked heads"):
        matched.ranked_heads(tmp_path, 2)


def test_the_answer_target_splits_all_argmax_only_and_top_k_argmax_only(checkpoint, ablated, tmp_path):
    cfg = matched.MatchedConfig(
        model=str(checkpoint),
        ranking=str(ablated),
        k=3,
        recipes=("relu_p2_b0",),
        prompts=4,
        pad=2,
        n_boot=100,
        target="answer",
    )
    result = matched.run(cfg, tmp_path / "out", progress=False)
    rows = pd.read_parquet(result["paths"]["rows_b0"])
    assert rows["answer_key"].all() and len(rows) == 4 * 2 * 4  # the final query of niah has the needle as key
    top = pd.read_csv(ablated / "ranking.csv").query("ranked").sort_values("rank").head(3)
    top_heads = set(zip(top["layer"], top["head"]))
    active = rows[rows["status"] == "active"]
    argmax_only = active[active["target_is_max"].astype(bool)]
    in_top = [(l, h) in top_heads for l, h in zip(argmax_only["layer"], argmax_only["head"])]
    table = result["table"].set_index("rows")
    assert list(table.index) == ["all", "argmax-only", "top-3 argmax-only"]
    for label, sub in (("all", active), ("argmax-only", argmax_only), ("top-3 argmax-only", argmax_only[in_top])):
        assert table.loc[label, "n"] == len(sub)
        if len(sub):
            assert table.loc[label, "meas %"] == pytest.approx(100 * sub["safe_p2"].astype(bool).mean())
    assert table["top-1 %"].iloc[0] == pytest.approx(100 * rows["target_is_max"].astype(bool).mean())
    assert table["ans-dead %"].iloc[0] == pytest.approx(100 * (rows["status"] == "dead").mean())


def test_k_defaults_to_table_5_size_only_with_a_ranking():
    assert matched.MatchedConfig(model="m", ranking="r").k == matched.K
    assert matched.MatchedConfig(model="m", heads=("0.1",)).k is None
