"""attnlab ablate: rankings equal a brute-force median, subsets follow the rank, decisive = top below every draw."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnlab.analyses import ablate, substitute
from attnlab.analyses.run import RunError


def _rows(rng):
    rows = []
    for layer in range(3):
        for head in range(2):
            for _ in range(7):
                status = rng.choice(["active", "dead", "saturated", "nan"])
                rows.append(
                    {
                        "layer": layer,
                        "head": head,
                        "status": status,
                        "s_p2": float(rng.gamma(1.0)) if status != "nan" else np.nan,
                    }
                )
    rows.append({"layer": 3, "head": 0, "status": "dead", "s_p2": 0.5})  # no active row: unranked
    return pd.DataFrame(rows)


def test_ranking_is_the_per_head_median_over_active_rows():
    rows = _rows(np.random.default_rng(0))
    ranking = ablate.rank_heads(rows, "s_p2")
    medians = {}
    for (layer, head), g in rows.groupby(["layer", "head"]):
        values = sorted(g[g.status == "active"]["s_p2"])
        if values:
            mid = len(values) // 2
            medians[(layer, head)] = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    order = sorted(medians, key=lambda h: -medians[h])
    got = list(zip(ranking["layer"], ranking["head"]))
    assert got[: len(order)] == order and got[-1] == (3, 0) and not ranking["ranked"].iloc[-1]
    np.testing.assert_allclose(ranking["median s_p2"].iloc[: len(order)], [medians[h] for h in order])
    assert ranking["rank"].tolist() == list(range(1, len(ranking) + 1))


def test_subsets_take_both_ends_of_the_ranking_and_seeded_random_draws():
    ranking = ablate.rank_heads(_rows(np.random.default_rng(1)), "s_p2")
    ranked = [(int(l), int(h)) for l, h, ok in zip(ranking["layer"], ranking["head"], ranking["ranked"]) if ok]
    plan = ablate.subsets(ranking, 2, 3)
    assert plan[0] == ("top", 0, ranked[:2]) and plan[1] == ("bottom", 0, ranked[::-1][:2])
    draws = [heads for kind, _, heads in plan if kind == "random"]
    assert len(draws) == 3 and all(len(set(d)) == 2 for d in draws)
    assert draws == [heads for kind, _, heads in ablate.subsets(ranking, 2, 3) if kind == "random"]
    assert len({tuple(d) for d in draws}) > 1
    with pytest.raises(RunError, match="exceeds"):
        ablate.subsets(ranking, len(ranked) + 1, 1)


@pytest.mark.parametrize(
    "top, randoms, decisive", [(-50, [-10, -20, -49], True), (-50, [-10, -50], False), (0, [0, 0], False)]
)
def test_decisive_means_top_strictly_below_every_random_draw(top, randoms, decisive):
    lines = [
        {"k": 0, "subset": "softmax", "draw": 0, "delta pp": np.nan},
        {"k": 4, "subset": "top", "draw": 0, "delta pp": top},
        {"k": 4, "subset": "bottom", "draw": 0, "delta pp": 0.0},
        *({"k": 4, "subset": "random", "draw": d, "delta pp": v} for d, v in enumerate(randoms)),
    ]
    table = ablate.decisive_table(pd.DataFrame(lines))
    assert table["decisive"].tolist() == [decisive]
    assert table["random worst pp"].iloc[0] == min(randoms) and table["draws"].iloc[0] == len(randoms)
    assert table["draws above top"].iloc[0] == sum(r > top for r in randoms)


def test_ablating_every_head_equals_substituting_everywhere(checkpoint, tmp_path):
    cfg = ablate.AblateConfig(
        model=str(checkpoint),
        k=(2, 8),
        random_draws=2,
        rank_prompts=2,
        rank_length=40,
        prompts=3,
        pad=2,
        queries="every:4",
        recipe="relu_p2_b0",
        b="0",
    )
    result = ablate.run(cfg, tmp_path / "ablate", progress=False)
    answers = pd.read_parquet(result["paths"]["answers"])
    full = substitute.run(
        substitute.SubstituteConfig(model=str(checkpoint), recipes=("relu_p2_b0",), prompts=3, pad=2),
        tmp_path / "sub",
        progress=False,
    )
    everywhere = full["answers"].query("recipe == 'relu_p2_b0'")["generated"].tolist()
    baseline = full["answers"].query("recipe == 'softmax'")["generated"].tolist()
    assert answers.query("subset == 'softmax'")["generated"].tolist() == baseline
    for _, g in answers.query("k == 8").groupby(["subset", "draw"]):
        assert g["generated"].tolist() == everywhere
    top2 = answers.query("k == 2 and subset == 'top'")["heads"].iloc[0]
    ranking = result["ranking"]
    assert top2 == " ".join(f"{l}.{h}" for l, h in zip(ranking["layer"][:2], ranking["head"][:2]))
    table = result["table"]
    assert table["k"].tolist() == [2, 8] and table["draws"].tolist() == [2, 2]
    assert set(result["cells"]["subset"]) == {"softmax", "top", "bottom", "random"}


def test_bad_input_is_refused_before_loading(tmp_path):
    with pytest.raises(RunError, match="--rank-by"):
        ablate.AblateConfig(model=str(tmp_path), rank_by="nope")
    with pytest.raises(RunError, match="--k"):
        ablate.AblateConfig(model=str(tmp_path), k=(0,))
    with pytest.raises(RunError, match="unknown"):
        ablate.AblateConfig(model=str(tmp_path), recipe="relu_pX")
    with pytest.raises(RunError, match="--b"):
        ablate.AblateConfig(model=str(tmp_path), b="often")
    with pytest.raises(RunError, match="--b-auto -20000 does not fit relu_p2_bauto"):
        ablate.AblateConfig(model=str(tmp_path), b_auto=-2e4)


def test_composition_counts_the_types_of_both_ends_of_the_ranking():
    ranking = pd.DataFrame(
        {"layer": [0, 0, 1, 1, 2], "head": [0, 1, 0, 1, 0], "rank": [1, 2, 3, 4, 5], "ranked": [True] * 5}
    )
    types = pd.DataFrame(
        {"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "head_type": ["diffuse", "diffuse", "sink", "local"]}
    )
    table = ablate.composition(ranking, types, (2, 3)).set_index(["k", "subset"])
    assert table.loc[(2, "top")].to_dict() == {"sink": 0, "induction": 0, "local": 0, "diffuse": 2, "untyped": 0}
    assert table.loc[(2, "bottom")].to_dict() == {"sink": 0, "induction": 0, "local": 1, "diffuse": 0, "untyped": 1}
    assert table.loc[(3, "bottom")].to_dict() == {"sink": 1, "induction": 0, "local": 1, "diffuse": 0, "untyped": 1}
    assert (table.sum(axis=1) == [2, 2, 3, 3]).all()


def test_ablate_with_a_heads_folder_writes_the_composition(checkpoint, tmp_path):
    from attnlab.analyses import heads

    heads.run(heads.HeadsConfig(model=str(checkpoint), prompts=2, length=40), tmp_path / "heads", progress=False)
    result = ablate.run(
        ablate.AblateConfig(
            model=str(checkpoint),
            k=(2,),
            random_draws=1,
            rank_prompts=2,
            rank_length=40,
            prompts=2,
            pad=1,
            recipe="relu_p2_b0",
            b="0",
            types=str(tmp_path / "heads"),
        ),
        tmp_path / "ablate",
        progress=False,
    )
    table = pd.read_csv(result["paths"]["composition"])
    assert (
        table["subset"].tolist() == ["top", "bottom"]
        and (table[["sink", "induction", "local", "diffuse"]].sum(axis=1) == 2).all()
    )
    with pytest.raises(RunError, match="cannot read its heads.csv"):
        ablate.run(
            ablate.AblateConfig(model=str(checkpoint), k=(2,), types=str(tmp_path / "nothing")),
            tmp_path / "a2",
            progress=False,
        )


def test_single_heads_correlate_each_heads_delta_with_its_statistic():
    ranking = pd.DataFrame(
        {
            "layer": [0, 0, 1, 1],
            "head": [1, 0, 0, 1],
            "median s_p2": [9.0, 4.0, 2.0, 1.0],
            "rank": [1, 2, 3, 4],
            "ranked": [True] * 4,
        }
    )
    lines = [{"k": 0, "subset": "softmax", "draw": 0, "accuracy %": 80.0, "delta pp": np.nan}]
    deltas = [-30.0, -10.0, 0.0]
    lines += [
        {"k": 1, "subset": "single", "draw": i, "accuracy %": 80 + d, "delta pp": d} for i, d in enumerate(deltas)
    ]
    table, summary = ablate.single_heads(pd.DataFrame(lines), ranking, "s_p2")
    assert table[["layer", "head", "rank"]].values.tolist() == [[0, 1, 1], [0, 0, 2], [1, 0, 3]]
    stat = np.array([9.0, 4.0, 2.0])
    line = summary.iloc[0]
    assert (line["heads tested"], line["nonzero delta"]) == (3, 2)
    assert line["pearson r"] == pytest.approx(np.corrcoef(deltas, stat)[0, 1])
    assert line["spearman rho"] == pytest.approx(-1.0)  # larger S_p, larger loss: ranks exactly reversed
    flat = [{**x, "delta pp": 0.0} if x["subset"] == "single" else x for x in lines]
    assert np.isnan(ablate.single_heads(pd.DataFrame(flat), ranking, "s_p2")[1].iloc[0]["pearson r"])


def test_ablate_single_gives_each_of_the_first_ranked_heads_alone(checkpoint, tmp_path):
    result = ablate.run(
        ablate.AblateConfig(
            model=str(checkpoint),
            k=(2,),
            random_draws=1,
            rank_prompts=2,
            rank_length=40,
            prompts=2,
            pad=1,
            recipe="relu_p2_b0",
            b="0",
            single=3,
        ),
        tmp_path / "ablate",
        progress=False,
    )
    single = pd.read_csv(result["paths"]["single"])
    ranking = result["ranking"].query("ranked")
    assert single[["layer", "head"]].values.tolist() == ranking[["layer", "head"]].head(3).values.tolist()
    assert result["table"]["k"].tolist() == [2]  # single cells stay out of the group table
    assert pd.read_csv(result["paths"]["single_summary"])["heads tested"].tolist() == [3]
