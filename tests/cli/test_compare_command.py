"""`attnlab compare` builds the comparison page from existing card folders alone, without loading any model.

Besides: each card's page is linked by a relative path; one folder, a folder without card.json, a folder named twice
and --out naming a card folder are each refused in one line before anything is written; a user's folder is refused,
a rerun replaces its own, and a failed write leaves the folder as it was."""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest

from attnlab import hooks
from attnlab.analyses import run as analyses_run
from attnlab.cards import compare as card_compare
from attnlab.cards.compare import compare
from attnlab.cards.types import Card
from attnlab.cli import main
from attnlab.io import write_json

DEGREES = (2, 4, 8, 16)


def card(model: str, shift: float) -> Card:
    """A card as ``attnlab card`` writes one, its numbers made up: the unsafe lines of both suites at b = 0 and
    b_auto, the best recipe and four typed heads (the length, temperature and ablation panels absent, as in an
    older card)."""
    unsafe = [
        {
            "suite": suite,
            "b": b,
            "b value": 0.0 if b == "0" else 0.25,
            "p": p,
            "prompts": 8,
            "active": 400,
            "unsafe %": pct,
            "unsafe lo": pct - 3.0,
            "unsafe hi": pct + 3.0,
        }
        for suite in ("niah", "induction")
        for b in ("0", "auto")
        for p, pct in zip(DEGREES, (70.0 + shift, 45.0 + shift, 25.0 + shift, 12.0 + shift))
    ]
    best = {
        "recipe": "relu_p8_bauto",
        "map": "relu_p8_b0.25",
        "accuracy %": 62.5,
        "lo": 24.5,
        "hi": 91.5,
        "softmax %": 87.5,
        "softmax lo": 47.3,
        "softmax hi": 99.7,
        "delta pp": -25.0,
        "overlap": True,
        "ahead": False,
        "reading": "no recipe is ahead of every other",
        "power": 0.4,
    }
    heads = [
        {"layer": 0, "head": h, "head_type": t, "first-token mass": m}
        for h, (t, m) in enumerate((("sink", 0.9), ("induction", 0.1), ("local", 0.05), ("diffuse", 0.02)))
    ]
    return Card.from_dict(
        {
            "model": model,
            "model_type": "llama",
            "layers": 1,
            "heads_per_layer": 4,
            "budget": {"name": "quick", "about": "minutes"},
            "seed": 0,
            "b_auto": 0.25,
            "substitution": {
                "unsafe": unsafe,
                "screen": [],
                "recipes": [],
                "best": best,
                "source": "Polynomial Concentration §5.5",
            },
            "heads": heads,
        }
    )


@pytest.fixture
def folders(tmp_path):
    """Two card folders: the first with its page (index.html), the second with card.json alone."""
    made = []
    for name, shift in (("first", 0.0), ("second", 20.0)):
        folder = tmp_path / "cards" / name
        folder.mkdir(parents=True)
        write_json(folder / "card.json", card(f"org/{name}-model", shift).to_dict())
        made.append(folder)
    (made[0] / "index.html").write_text("<html>the first card</html>", encoding="utf-8")
    return made


def _state(root) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _refused(argv: list[str], capsys) -> str:
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_the_page_is_built_from_two_card_folders_without_loading_a_model(folders, tmp_path, monkeypatch, capsys):
    def refused(*args, **kwargs):
        raise AssertionError("attnlab compare loaded a model")

    monkeypatch.setattr(analyses_run, "load", refused)
    monkeypatch.setattr(hooks, "load_model", refused)
    before = _state(tmp_path / "cards")
    out = tmp_path / "comparison"
    assert main(["compare", *map(str, folders), "--out", str(out)]) == 0
    assert "compared 2 cards" in capsys.readouterr().out
    assert _state(tmp_path / "cards") == before  # the cards are read, never written
    written = pd.read_csv(out / "compare.csv", keep_default_na=False)
    pd.testing.assert_frame_equal(written, compare(folders), check_dtype=False)
    assert written["model"].tolist() == ["org/first-model", "org/second-model"]
    page = (out / "index.html").read_text(encoding="utf-8")
    link = os.path.relpath(folders[0] / "index.html", out)
    assert link == "../cards/first/index.html" and f'<a href="{link}">' in page
    models = pd.read_csv(out / "compare_models.csv", keep_default_na=False)
    assert models["card"].tolist() == [link, "-"]  # the second folder has no page to link
    assert '<img alt="compare_unsafe_p2"' in page and (out / "compare_unsafe_p2.svg").is_file()
    assert "Polynomial Concentration Table 1" in page and "Qwen3-1.7B" in page
    assert ".staging-" not in page and f"attnlab compare {folders[0]} {folders[1]} --out {out}" in page
    config = json.loads((out / "config.json").read_text())
    assert config == {"cards": [str(f) for f in folders], "models": ["org/first-model", "org/second-model"]}


def test_one_card_folder_is_refused_in_one_line(folders, tmp_path, capsys):
    out = tmp_path / "out"
    err = _refused(["compare", str(folders[0]), "--out", str(out)], capsys)
    assert "two or more card folders, got one" in err and "CARD_DIR" in err
    assert not out.exists()


def test_a_folder_without_card_json_is_named_before_anything_is_written(folders, tmp_path, capsys):
    empty = tmp_path / "cards" / "empty"
    empty.mkdir()
    out = tmp_path / "out"
    err = _refused(["compare", str(folders[0]), str(empty), "--out", str(out)], capsys)
    assert f"{empty / 'card.json'}" in err and "pass a folder attnlab card wrote" in err
    assert not out.exists()


def test_a_folder_named_twice_or_an_out_among_the_cards_is_refused(folders, tmp_path, capsys):
    err = _refused(
        ["compare", str(folders[0]), f"{folders[1]}/", str(folders[1]), "--out", str(tmp_path / "o")], capsys
    )
    assert "given twice" in err
    before = _state(tmp_path / "cards")
    err = _refused(["compare", *map(str, folders), "--out", str(folders[0]), "--overwrite"], capsys)
    assert "is one of the card folders" in err and "--out" in err
    assert _state(tmp_path / "cards") == before and not (tmp_path / "o").exists()


def test_a_users_folder_is_refused_and_a_rerun_replaces_its_own(folders, tmp_path, capsys):
    users = tmp_path / "users"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    err = _refused(["compare", *map(str, folders), "--out", str(users), "--overwrite"], capsys)
    assert "holds files that attnlab compare did not write (notes.txt)" in err
    assert [p.name for p in users.iterdir()] == ["notes.txt"]
    out = tmp_path / "out"
    argv = ["compare", *map(str, folders), "--out", str(out)]
    assert main(argv) == 0
    assert main(argv) == 0  # the same comparison again: its own folder
    err = _refused(["compare", *map(str, reversed(folders)), "--out", str(out)], capsys)
    assert "other settings" in err and "--overwrite" in err
    assert main(["compare", *map(str, reversed(folders)), "--out", str(out), "--overwrite"]) == 0
    models = pd.read_csv(out / "compare.csv", keep_default_na=False)["model"].tolist()
    assert models == ["org/second-model", "org/first-model"]


def test_a_failed_write_leaves_the_folder_as_it_was(folders, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    argv = ["compare", *map(str, folders), "--out", str(out), "--overwrite"]
    assert main(argv) == 0
    before = _state(out)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(card_compare, "write_table", broken)
    _refused(argv, capsys)
    assert _state(out) == before
    shutil.rmtree(out)
    _refused(argv, capsys)
    assert not out.exists()  # a new folder a failed run made is removed
