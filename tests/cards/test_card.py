"""A card's panels are what attnlab.audit / substitute / heads / sinks and its own reproducing commands give."""

from __future__ import annotations

import contextlib
import shlex

import numpy as np
import pandas as pd
import pytest

import attnlab
from attnlab import hooks
from attnlab.cards import build as cards
from attnlab.cards.page import PANELS
from attnlab.cli import main
from attnlab.diagnostics.rows import SPECIAL
from attnlab.findings.stats import clopper_pearson

TINY = {
    "prompts": 2,
    "pad": 2,
    "length": 64,
    "heads_prompts": 2,
    "documents": 2,
    "tokens": 64,
    "lengths": (32, 64, 1024),  # the last lies past the tiny model's window (512): read apart
    "length_prompts": 2,
    "temperature_docs": 2,
    "inside_tokens": 64,
    "past_tokens": 1024,  # 1.25 x the window: read past it
    "n_boot": 50,
    "ks": (2, 4),
    "draws": 2,
}


@pytest.fixture(scope="module")
def made(written):
    """A tiny checkpoint and the card the command wrote of it under a 2-prompt plan."""
    return written.checkpoint, written.out, written.data


@pytest.fixture(scope="module")
def loaded(made):
    return hooks.load_model(made[0])


def _unsafe(rows: pd.DataFrame, p: int) -> float:
    active = rows[rows["status"] == "active"]
    return 100 * float(1 - active[f"safe_p{p}"].astype(bool).mean())


def test_the_unsafe_panel_is_the_audits_share_of_rows_with_s_p_at_least_one(made, loaded):
    _, _, data = made
    model, tok = loaded
    unsafe = pd.DataFrame(data["substitution"]["unsafe"])
    sizes = {"niah": {"pad": 2}, "induction": {"length": 64}}
    for suite, size in sizes.items():
        rows = attnlab.audit(model, tok, suite, n_prompts=2, b=(0.0, "auto"), sigmoid=True, **size)
        assert rows.attrs["b_auto"] == pytest.approx(data["b_auto"], rel=1e-12)
        for label, b in rows.attrs["biases"].items():
            for p in cards.DEGREES:
                cell = unsafe[(unsafe["suite"] == suite) & (unsafe["b"] == label) & (unsafe["p"] == p)]
                assert cell["unsafe %"].item() == pytest.approx(_unsafe(rows[rows["b"] == b], p), abs=1e-9)
                readable = rows[(rows["b"] == b) & ~rows["status"].isin(SPECIAL)]
                sigma = 100 * float((readable["s_sigmoid"] < 1).mean())  # App. T: S_sigma < 1 over readable rows
                assert cell["sigma safe %"].item() == pytest.approx(sigma, abs=1e-9)
    assert len(unsafe) == 2 * 2 * len(cards.DEGREES)


def test_the_recipe_and_head_panels_are_substitute_heads_and_sinks(made, loaded):
    _, _, data = made
    model, tok = loaded
    recipes = list(cards.PLANS["quick"].recipes)
    table = attnlab.substitute(model, tok, recipes, "niah", n_prompts=2, pad=2, b_auto=data["b_auto"])
    shown = pd.DataFrame(data["substitution"]["recipes"])
    assert shown["recipe"].tolist() == ["softmax", *recipes]
    assert shown["correct"].tolist() == table["correct"].tolist()
    np.testing.assert_allclose(shown["accuracy %"], table["accuracy %"])
    best = data["substitution"]["best"]
    assert best["recipe"] in recipes and best["accuracy %"] == table["accuracy %"].iloc[1:].max()
    assert best["lo"] <= best["accuracy %"] <= best["hi"]
    exact = [clopper_pearson(int(k), int(n)) for k, n in zip(shown["correct"], shown["n"], strict=True)]
    np.testing.assert_allclose(shown[["lo", "hi"]].to_numpy(), 100 * np.array(exact))
    # softmax answers no prompt: no recipe is called the best
    assert best["ahead"] is False and best["reading"].startswith("not read: softmax itself scores 0.0%")
    heads = pd.DataFrame(data["heads"])
    types = attnlab.heads(model, tok, n_prompts=2, length=64)
    assert heads["head_type"].tolist() == types["head_type"].tolist()
    mass = attnlab.sinks(model, tok, n_documents=2, tokens=64)
    np.testing.assert_allclose(heads["first-token mass"], mass["mass"], rtol=1e-12)
    assert len(heads) == data["layers"] * data["heads_per_layer"]
    assert {s["recipe"] for s in data["substitution"]["screen"]} == set(recipes)  # every one is a ReLU or sigmoid


def test_the_commands_on_the_card_reproduce_its_panels(made, tmp_path):
    _, _, data = made
    run = {k: shlex.split(v.replace("runs/", f"{tmp_path}/"))[1:] for k, v in data["commands"].items() if k != "sinks"}
    for argv in run.values():
        assert main([*argv, "--no-progress"]) == 0
    audit = pd.read_csv(tmp_path / "card-audit-niah" / "audit.csv")
    unsafe = pd.DataFrame(data["substitution"]["unsafe"]).query("suite == 'niah'")
    np.testing.assert_allclose(audit["unsafe %"], unsafe["unsafe %"])
    table = pd.read_csv(tmp_path / "card-substitute" / "substitute.csv")
    assert table["correct"].tolist() == [r["correct"] for r in data["substitution"]["recipes"]]
    heads = pd.read_csv(tmp_path / "card-heads" / "heads.csv")
    assert heads["head_type"].tolist() == [h["head_type"] for h in data["heads"]]
    ablation = pd.read_csv(tmp_path / "card-ablate" / "ablate.csv")
    # the tiny model is untrained: no finding about trained attention is decided on it
    assert data["trained"]["trained"] is False and data["trained"]["loss"] > 0.7 * data["trained"]["uniform"]
    for finding in (data["ablation"]["finding"], data["length"]["finding"], data["temperature"]["past"]["finding"]):
        assert finding["verdict"] == "not checked" and "the model looks untrained" in finding["reason"]
    shown = pd.DataFrame(data["ablation"]["rows"])[ablation.columns]
    pd.testing.assert_frame_equal(ablation, shown, check_dtype=False)
    lengths = pd.read_csv(tmp_path / "card-lengths" / "lengths.csv")
    shown = pd.DataFrame(data["length"]["rows"])
    assert lengths["L"].tolist() == shown["L"].tolist() == [32, 64] and data["length"]["cut"] == []
    assert [r["L"] for r in data["length"]["past_rows"]] == [1024]  # past the window of 512, read apart
    np.testing.assert_allclose(lengths["unsafe %"], shown["unsafe %"])
    np.testing.assert_allclose(lengths[["unsafe lo", "unsafe hi"]], shown[["unsafe lo", "unsafe hi"]])
    for part in ("inside", "past"):
        fits = pd.read_csv(tmp_path / f"card-temperature-{part}" / "exponents.csv").set_index("exponent")
        assert fits.loc["xi_Lambda", "xi_hat"] == pytest.approx(data["temperature"][part]["xi_hat"], abs=1e-9)
        per_n = pd.read_csv(tmp_path / f"card-temperature-{part}" / "temperature.csv")
        np.testing.assert_allclose(
            per_n["mean log Lambda"], [r["mean log Lambda"] for r in data["temperature"][part]["per_n"]]
        )


def test_the_page_names_every_panel_and_the_budget(made):
    _, out, data = made
    page = (out / "index.html").read_text(encoding="utf-8")
    assert all(f">{panel}</h2>" in page for panel in PANELS)
    assert "budget quick" in page and "data:image/png;base64," in page
    assert "Polynomial Concentration §5.5" in page and "not a guarantee" in page
    assert ".staging-" not in page and f"<code>{out}</code>" in page  # it names the folder its files are in
    figures = ("head_types", "ablation", "length_unsafe", "length_entropy", "temperature_inside", "temperature_past")
    for name in (*(f + ".png" for f in figures), "unsafe.csv", "recipes.csv", "heads.csv", "config.json"):
        assert (out / name).is_file()
    assert data["budget"]["name"] == "quick" and data["budget"]["prompts"] == 2
    assert "past the window, L = [64, 1024]" in page and "Pythia rose 16.5 pp per doubling" in page
    assert "trained-model check" in page and "untrained" in page
    multiplier = data["temperature"]["multiplier"]  # --target-length reaches the temperature panel
    assert multiplier["target"] == 2048 and f"target n = 2048 ({2048 / 512:.3g} x the window)" in page


@pytest.mark.parametrize(
    "argv, words",
    [
        (["card", "no/such/model"], "no/such/model"),
        (["card", "{ckpt}", "--seed", "1"], "--overwrite"),  # another card's folder, other settings
        (["card", "{ckpt}", "--budget", "huge"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line(made, argv, words, capsys, tmp_path):
    checkpoint, out, _ = made
    argv = [a.replace("{ckpt}", str(checkpoint)) for a in argv]
    with pytest.raises(SystemExit) if "huge" in argv else contextlib.nullcontext():
        code = main([*argv, "--out", str(out if "--seed" in argv else tmp_path / "new")])
        assert code == 1
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and "Traceback" not in err
    with pytest.raises(attnlab.Error, match="budget takes 'quick' or 'standard'"):
        attnlab.card(None, None, budget="huge")


def test_bad_api_arguments_are_named_before_any_forward(loaded):
    model, tok = loaded
    with pytest.raises(ValueError, match="seed takes an int >= 0"):
        attnlab.card(model, tok, seed=-1)
    with pytest.raises(TypeError, match="model"):
        attnlab.card("smollm2", tok)
    with pytest.raises(ValueError, match="target_length takes an int >= 2"):
        attnlab.card(model, tok, target_length=1)
