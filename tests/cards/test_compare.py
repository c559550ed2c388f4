"""The cross-model card page shows each model's own card.json numbers, '-' where a card lacks one.

Besides: two or more models get a folder each and a page linking them, written staged; one model's card keeps its
layout; a repeated model is refused in one line; the page's tables are narrow, and Table 1's published lines and the
cross-model figure are on it; ``attnlab compare`` rebuilds the page in the folder ``attnlab card`` wrote."""

from __future__ import annotations

import base64
import dataclasses
import json
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest

from attnlab.cards import build as cards
from attnlab.cards import compare as card_compare
from attnlab.cards.compare import TABLES, CompareError, compare, slugs, table_1, write_compare_page
from attnlab.cards.types import Card
from attnlab.cli import card as card_cli
from attnlab.cli import main
from attnlab.studies.concentration import rules
from attnlab.studies.concentration.rules import TABLE_1
from cards.test_card import TINY
from checkpoints import save_checkpoint
from hostile_json import hostile, one_line

PANELS = ("length", "temperature", "ablation")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Two tiny checkpoints of different seeds, both in one folder name (ckpt), carded together and the first
    alone, under the 2-prompt plan of test_card."""
    root = tmp_path_factory.mktemp("compare")
    models = []
    for seed, where in enumerate(("one", "two")):
        (root / where).mkdir()
        models.append(save_checkpoint(root / where / "ckpt", seed=seed))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(cards.PLANS, "quick", dataclasses.replace(cards.PLANS["quick"], **TINY))
        assert main(["card", *map(str, models), "--out", str(root / "both"), "--no-progress"]) == 0
        assert main(["card", str(models[0]), "--out", str(root / "single"), "--no-progress"]) == 0
    return SimpleNamespace(models=models, both=root / "both", single=root / "single")


def _card(folder) -> dict:
    return json.loads((folder / "card.json").read_text(encoding="utf-8"), parse_constant=pytest.fail)


def _shown(value):
    return "-" if value is None else value


def test_the_table_holds_each_models_own_card_values(made):
    data = [_card(made.both / slug) for slug in ("ckpt", "ckpt-2")]
    assert [d["model"] for d in data] == list(map(str, made.models))
    table = compare([made.both / "ckpt", made.both / "ckpt-2"])
    pd.testing.assert_frame_equal(table, compare(data))
    written = pd.read_csv(made.both / "compare.csv", keep_default_na=False)
    assert written.columns.tolist() == table.columns.tolist() and len(written) == 2
    for (_, row), card in zip(table.iterrows(), data):
        assert row["b_auto"] == card["b_auto"]
        assert row["layers x heads"] == f"{card['layers']} x {card['heads_per_layer']}"
        for u in card["substitution"]["unsafe"]:
            key = f"{u['suite']}, b = {u['b']}, p = {u['p']:g}: unsafe"
            assert [row[f"{key} {c}"] for c in ("%", "95% lo", "95% hi")] == [
                _shown(u[c]) for c in ("unsafe %", "unsafe lo", "unsafe hi")
            ]
        best = card["substitution"]["best"]
        assert row["best recipe"] == (best["recipe"] if best["ahead"] else "none ahead")
        assert row["recipe reading"] == best["reading"]
        best_row = [row[f"highest recipe NIAH {c}"] for c in ("%", "95% lo", "95% hi")]
        assert [*best_row, row["softmax NIAH %"]] == [best["accuracy %"], best["lo"], best["hi"], best["softmax %"]]
        heads = pd.DataFrame(card["heads"])
        assert sum(row[f"{t} heads"] for t in ("sink", "induction", "local", "diffuse")) == len(heads)
        assert row["sink heads"] == (heads["head_type"] == "sink").sum()
        sinks = heads.loc[heads["head_type"] == "sink", "first-token mass"]
        assert row["first-token mass of sink heads"] == (pytest.approx(sinks.mean(), rel=1e-12) if len(sinks) else "-")
        lengths = card["length"]["rows"]
        assert [row["shortest L"], row["longest L"]] == [lengths[0]["L"], lengths[-1]["L"]] == [32, 64]
        assert row["unsafe % at the longest L"] == _shown(lengths[-1]["unsafe %"])
        assert row["length verdict"] == card["length"]["finding"]["verdict"]
        heat = card["temperature"]
        for part in ("inside", "past"):
            stem = f"xi_hat_Lambda {part} the window"
            assert [row[stem], row[f"{stem} 95% lo"], row[f"{stem} 95% hi"]] == [
                _shown(heat[part][k]) for k in ("xi_hat", "lo", "hi")
            ]
        assert [row["multiplier target n"], row["multiplier m"]] == [
            _shown(heat["multiplier"][k]) for k in ("target", "m")
        ]
        last = card["ablation"]["rows"][-1]
        ablation = [row[c] for c in ("largest ablation K", "top-K delta pp", "top-K decisive")]
        assert ablation == [last["k"], last["top pp"], last["decisive"]]
        assert row["ablation verdict"] == card["ablation"]["finding"]["verdict"]
        assert [row["budget"], row["seed"]] == [card["budget"]["name"], card["seed"]]
    assert table.loc[0, "b_auto"] != table.loc[1, "b_auto"]  # two seeds, two models: the rows are not one card twice


def test_a_card_without_the_newer_panels_or_with_nulls_reads_dash(made, tmp_path):
    old = _card(made.both / "ckpt")
    for key in PANELS:
        del old[key]
    nulls = _card(made.both / "ckpt-2")
    nulls["substitution"]["best"]["lo"] = None
    nulls["temperature"] = {"window": None, "inside": None, "past": None, "multiplier": None}
    nulls["length"]["rows"][0]["unsafe %"] = None
    nulls["ablation"]["rows"] = []
    table = compare([old, nulls])
    columns = [
        "shortest L",
        "length verdict",
        "xi_hat_Lambda inside the window",
        "xi_hat_Lambda past the window 95% hi",
        "multiplier m",
        "largest ablation K",
        "top-K decisive",
    ]
    assert (table.loc[0, columns] == "-").all()
    assert table.loc[1, "highest recipe NIAH 95% lo"] == "-" and table.loc[1, "unsafe % at the shortest L"] == "-"
    shown = ["xi_hat_Lambda inside the window", "multiplier target n", "top-K delta pp"]
    assert table.loc[1, shown].tolist() == ["-"] * 3
    assert table.loc[1, "length verdict"] == nulls["length"]["finding"]["verdict"]
    page = write_compare_page([old, nulls], tmp_path, tmp_path / "index.html")
    length = pd.read_csv(tmp_path / "compare_length.csv", keep_default_na=False)
    ablation = pd.read_csv(tmp_path / "compare_ablation.csv", keep_default_na=False)
    recipes = pd.read_csv(tmp_path / "compare_recipes.csv", keep_default_na=False)
    assert length.loc[0, "xi_hat_Lambda inside [95%]"] == "-" and ablation.loc[0, "decisive"] == "-"
    assert recipes.loc[1, "highest recipe NIAH % [95%]"].endswith(f"[-, {nulls['substitution']['best']['hi']:.1f}]")
    text = page.read_text(encoding="utf-8")
    assert "Polynomial Concentration Table 1" in text and "Hayase &amp; Karakida 2026 §4.5, App. A.2" in text
    assert "None" not in "".join((tmp_path / f"{stem}.md").read_text() for stem in TABLES)


def test_two_models_get_a_folder_each_and_a_page_linking_both(made):
    for slug, model in zip(("ckpt", "ckpt-2"), made.models):
        config = json.loads((made.both / slug / "config.json").read_text())
        assert config["model"] == str(model) and (made.both / slug / "index.html").is_file()
    page = (made.both / "index.html").read_text(encoding="utf-8")
    assert '<a href="ckpt/index.html">' in page and '<a href="ckpt-2/index.html">' in page
    assert ".staging-" not in page and f"<code>{made.both}</code>" in page
    config = json.loads((made.both / "config.json").read_text())
    assert config["models"] == list(map(str, made.models)) and config["folders"] == {
        "ckpt": str(made.models[0]),
        "ckpt-2": str(made.models[1]),
    }
    assert not (made.both / "card.json").exists()


def test_one_model_keeps_its_layout_and_its_card_is_the_comparisons(made):
    config = json.loads((made.single / "config.json").read_text())
    assert set(config) == {"model", "budget", "seed", "format", "target_length", "device", "dtype", "b_auto"}
    assert config["model"] == str(made.models[0])
    assert not [p for p in made.single.iterdir() if p.is_dir()]
    assert {"card.json", "index.html", "unsafe.csv", "heads.csv"} <= {p.name for p in made.single.iterdir()}
    assert _card(made.single) == _card(made.both / "ckpt")


def test_repeated_models_are_refused_in_one_line(made, capsys, tmp_path):
    model = str(made.models[0])
    assert main(["card", model, str(made.models[1]), f"{model}/", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert "given twice" in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_rerun_replaces_the_folders_and_a_failed_one_leaves_them(made, tmp_path, monkeypatch):
    out = tmp_path / "both"
    shutil.copytree(made.both, out)
    by_name = {str(m): Card.from_dict(_card(made.both / slug)) for m, slug in zip(made.models, ("ckpt", "ckpt-2"))}
    monkeypatch.setattr(card_cli, "_card", lambda cfg, name, progress: by_name[name])  # the cards, not recomputed
    (out / "ckpt" / "stale.txt").write_text("from an earlier run")
    argv = ["card", *map(str, made.models), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    assert not (out / "ckpt" / "stale.txt").exists() and _card(out / "ckpt") == _card(made.both / "ckpt")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(card_compare, "write_table", broken)
    assert main(argv) == 1
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_slugs_are_safe_and_unique():
    models = ["a/ckpt", "b/ckpt/", "m.gguf", "org/Qwen2.5-0.5B@main", "CKPT", "index.html", ".hidden", "x/.."]
    assert slugs(models) == ["ckpt", "ckpt-2", "m", "Qwen2.5-0.5B-main", "CKPT-3", "index.html-2", "hidden", "model"]


def test_bad_cards_are_one_line(tmp_path):
    with pytest.raises(CompareError, match="not a readable card.json"):
        compare([tmp_path])
    with pytest.raises(CompareError, match="one or more cards"):
        compare([])
    with pytest.raises(CompareError, match="lacks heads"):
        compare([{k: v for k, v in CARD.items() if k != "heads"}])


CARD = {
    "model": "m",
    "model_type": "llama",
    "layers": 1,
    "heads_per_layer": 1,
    "b_auto": 0.1,
    "substitution": {},
    "heads": [],
}


@pytest.mark.parametrize(("label", "data"), hostile(CARD, "layers", "heads"))
def test_a_hostile_card_json_is_one_line(tmp_path, label, data):
    """card.json read back for a comparison: not UTF-8 JSON of an object (a depth bomb included), a key of the wrong
    type or a key missing is one line naming the card."""
    (tmp_path / "card.json").write_bytes(data)
    with pytest.raises(CompareError) as caught:
        compare([tmp_path])
    one_line(caught.value, tmp_path)


def _cell(line: dict) -> str:
    """A card's unsafe line as the page's tables show it: ``value [lo, hi]`` in one cell."""
    return f"{line['unsafe %']:.1f} [{line['unsafe lo']:.1f}, {line['unsafe hi']:.1f}]"


def test_the_page_tables_are_narrow_with_each_interval_in_one_cell(made):
    data = [_card(made.both / slug) for slug in ("ckpt", "ckpt-2")]
    for stem in TABLES[1:]:
        shown = pd.read_csv(made.both / f"{stem}.csv", keep_default_na=False)
        assert len(shown.columns) <= 8, (stem, shown.columns.tolist())
    table1 = pd.read_csv(made.both / "compare_table1.csv", keep_default_na=False, dtype=str)
    auto = pd.read_csv(made.both / "compare_unsafe.csv", keep_default_na=False, dtype=str)
    for card in data:
        for u in card["substitution"]["unsafe"]:
            shown = table1 if u["b"] == "0" else auto
            line = shown[(shown["model"] == card["model"]) & (shown["suite"] == u["suite"])]
            assert line[f"p = {u['p']:g}"].tolist() == [_cell(u)], (u["suite"], u["b"], u["p"])
    every = pd.read_csv(made.both / "compare.csv", keep_default_na=False)
    assert len(every.columns) > 40 and every.columns.tolist() == compare(data).columns.tolist()


def test_table_1s_published_lines_follow_the_cards_and_are_cited(made):
    table = table_1([made.both / "ckpt", made.both / "ckpt-2"])
    measured = table[table["source"].str.startswith("measured")]
    published = table[table["source"].str.startswith("published")]
    assert measured.index.tolist() == list(range(4)) and len(published) == len(TABLE_1) == 15
    assert set(published["model"]) == {"Llama-3.2-1B", "Qwen3-1.7B", "Gemma-4-E2B", "Pythia-1.4b"}
    assert (published["source"].str.contains("Polynomial Concentration Table 1")).all()
    qwen = published[(published["model"] == "Qwen3-1.7B") & (published["suite"] == "copying")]
    assert qwen[["p = 2", "p = 4", "p = 8", "p = 16", "median A_act (p = 2)"]].values.tolist() == [
        ["96.7", "75.5", "36.5", "-", 540]
    ]
    # the placement rule's edges, read off the table: Llama's highest (copying) and Pythia's lowest in distribution
    assert (rules.LLAMA_TOP, rules.UNSAFE_FLOOR) == (30.2, 61.7)
    markdown = (made.both / "compare_table1.md").read_text(encoding="utf-8")
    page = (made.both / "index.html").read_text(encoding="utf-8")
    assert (
        "| Gemma-4-E2B | mqar | 90.6 | 71.6 | 41.5 | - | 53 | published: Polynomial Concentration Table 1" in markdown
    )
    assert '<td class="text">Gemma-4-E2B</td>' in page and "Table 1&#x27;s note, L = 1024 (in distribution)" in page
    for text in (markdown, page):
        assert "published: Polynomial Concentration Table 1, L = 4096" in text
        assert "seeds" not in text and ".txt" not in text  # cited by title and table, never by a file


def test_the_cross_model_figure_is_written_and_on_the_page(made):
    png = made.both / "compare_unsafe_p2.png"
    assert png.stat().st_size > 0 and (made.both / "compare_unsafe_p2.svg").stat().st_size > 0
    page = (made.both / "index.html").read_text(encoding="utf-8")
    assert (
        f'<img alt="compare_unsafe_p2" src="data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()}"'
        in page
    )
    assert "labelled published" in page


def test_a_card_without_b0_lines_has_none_in_table_1_and_still_gets_its_figure(made, tmp_path):
    bare = _card(made.both / "ckpt") | {"substitution": {**_card(made.both / "ckpt")["substitution"], "unsafe": []}}
    write_compare_page([bare, _card(made.both / "ckpt-2")], tmp_path, tmp_path / "index.html")
    table = pd.read_csv(tmp_path / "compare_table1.csv", keep_default_na=False)
    measured = table[table["source"].str.startswith("measured")]
    assert measured["model"].tolist() == [str(made.models[1])] * 2
    assert (tmp_path / "compare_unsafe_p2.png").is_file()


def test_attnlab_compare_rebuilds_the_page_in_the_folder_attnlab_card_wrote(made, tmp_path):
    out = tmp_path / "both"
    shutil.copytree(made.both, out)
    cards = {p: p.read_bytes() for p in (out / "ckpt").rglob("*") if p.is_file()}
    argv = ["compare", str(out / "ckpt"), str(out / "ckpt-2"), "--out", str(out)]
    assert main(argv) == 1  # attnlab card's comparison, of other settings: replaced only on --overwrite
    assert main([*argv, "--overwrite"]) == 0
    assert {p: p.read_bytes() for p in (out / "ckpt").rglob("*") if p.is_file()} == cards
    page = (out / "index.html").read_text(encoding="utf-8")
    assert '<a href="ckpt/index.html">' in page and '<a href="ckpt-2/index.html">' in page
    pd.testing.assert_frame_equal(
        pd.read_csv(out / "compare.csv", keep_default_na=False),
        pd.read_csv(made.both / "compare.csv", keep_default_na=False),
    )
