"""attnlab temperature: one row per (doc, layer, head, n), contact triples as on hand-computed scores, xi_hat as a
brute-force bucket-mean OLS slope."""

from __future__ import annotations

import dataclasses
import json
import shlex

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import hooks, tasks
from attnlab.analyses import sections, temperature
from attnlab.analyses.run import RunError
from attnlab.diagnostics import row_stats

from .test_audit import _hand_scores

GRID = (12, 20, 33, 48)


@pytest.fixture(scope="module")
def result(checkpoint, tmp_path_factory):
    cfg = temperature.TemperatureConfig(model=str(checkpoint), n=GRID, docs=2, n_boot=50)
    return temperature.run(cfg, tmp_path_factory.mktemp("t") / "out", progress=False)


def test_rows_are_the_queries_that_see_n_keys_with_the_engines_triples(checkpoint, result):
    rows = pd.read_parquet(result["paths"]["rows"])
    assert len(rows) == 2 * 2 * 4 * len(GRID)  # docs x layers x heads x n
    assert (rows["query"] + 1 == rows["n_keys"]).all() and set(rows["n_keys"]) == set(GRID)
    model, tok = hooks.load_model(checkpoint)
    cfg = temperature.TemperatureConfig(model=str(checkpoint), n=GRID, docs=2)
    docs = temperature.documents(model, tok, cfg)
    assert [len(d) for d in docs] == [max(GRID)] * 2
    for i, ids in enumerate(docs):
        for layer, z in _hand_scores(model, torch.tensor([ids])).items():
            for n in GRID:
                ref = row_stats(z[:, n - 1, :n], p=2)
                got = rows[(rows.prompt == i) & (rows.layer == layer) & (rows.n_keys == n)].sort_values("head")
                for col in ("lambda_n", "alpha_n", "contact_gap"):
                    np.testing.assert_allclose(got[col].to_numpy(float), ref[col].to_numpy(float), rtol=1e-5)


def test_report_section_reads_the_folder_back(result):
    folder = result["paths"]["config"].parent
    section = sections.section(folder)
    assert section.study == "temperature" and [t.stem for t in section.tables] == ["exponents", "temperature"]
    assert shlex.split(section.command)[:2] == ["attnlab", "temperature"] and "--n 12 20 33 48" in section.command
    assert f"{result['cor49']['predicted']:.3f}" in section.notes[-1]


def test_exponents_are_ols_slopes_of_bucket_means(result):
    rows = pd.read_parquet(result["paths"]["rows"])
    fits = result["exponents"].set_index("exponent")
    tied = np.log10(rows["lambda_n"].astype(float)) > 5
    for name, col in (("Lambda", "lambda_n"), ("alpha", "alpha_n"), ("Delta", "contact_gap")):
        kept = rows[~tied & (rows[col] > 0) & np.isfinite(rows[col])]
        means = kept.groupby("n_keys")[col].apply(lambda x: np.log(x).mean())
        slope = np.polyfit(np.log(np.log(means.index.to_numpy(float))), means.to_numpy(), 1)[0]
        assert fits.loc[f"xi_{name}", "xi_hat"] == pytest.approx(slope, rel=1e-9, abs=1e-12)
        assert fits.loc[f"xi_{name}", "half_iqr"] >= 0
    table = result["table"]
    assert table["n"].tolist() == list(GRID) and (table["rows"] == 16).all()
    assert "xi_hat_Lambda" in result["summary"]


def test_text_file_documents_and_bad_input(checkpoint, tmp_path):
    model, tok = hooks.load_model(checkpoint)
    words = "the cat sat on the mat and the dog ran to the red house " * 40
    (tmp_path / "doc.txt").write_text(words)
    cfg = temperature.TemperatureConfig(model=str(checkpoint), n=(16, 32), docs=3, text=str(tmp_path / "doc.txt"))
    docs = temperature.documents(model, tok, cfg)
    ids = tok(words, add_special_tokens=True)["input_ids"]
    assert docs == [tuple(ids[i * 32 : (i + 1) * 32]) for i in range(3)]
    (tmp_path / "short.txt").write_text("the cat")
    bad = {
        "short": (dict(text=str(tmp_path / "short.txt")), "fewer than the 32"),
        "missing": (dict(text=str(tmp_path / "nope.txt")), "is not a file"),
        "too long": (dict(n=(16, 4096)), "context is 512"),
    }
    for kw, message in bad.values():
        cfg = temperature.TemperatureConfig(model=str(checkpoint), **{"n": (16, 32), **kw})
        with pytest.raises(RunError, match=message):
            temperature.documents(model, tok, cfg)
    with pytest.raises(RunError, match="at least two"):
        temperature.TemperatureConfig(model=str(checkpoint), n=(16,))


def test_bos_leads_every_document_and_every_suite_prompt(checkpoint, tmp_path):
    from attnlab.analyses.run import load

    model, tok = load(str(checkpoint))
    text = tmp_path / "doc.txt"
    text.write_text("a plain sentence about nothing in particular. " * 60)
    plain = temperature.TemperatureConfig(model=str(checkpoint), n=(8, 12), docs=3, text=str(text))
    led = temperature.TemperatureConfig(model=str(checkpoint), n=(8, 12), docs=3, text=str(text), bos=True)
    body = tok(text.read_text(), add_special_tokens=False)["input_ids"]
    got = temperature.documents(model, tok, led)
    assert all(len(d) == 12 and d[0] == tok.bos_token_id for d in got)
    assert [t for d in got for t in d[1:]] == body[:33]  # windows of the text, in order, each after a BOS
    assert all(d[0] == tok.bos_token_id for d in temperature.documents(model, tok, dataclasses.replace(led, text=None)))
    assert len(temperature.documents(model, tok, plain)) == 3


def test_dynamic_rope_reads_past_the_window_as_a_model_built_with_the_rescaled_base(checkpoint, tmp_path):
    """--rope dynamic: n may pass the context (512 here), and every row is the row of the same weights rebuilt with
    RoPE base theta_0 (n_eval / n_train)^(d / (d - 2)) (Hayase & Karakida 2026 App. A.2), computed by hand here."""
    from transformers import AutoConfig, AutoModelForCausalLM

    grid = (200, 400, 600, 800)
    cfg = temperature.TemperatureConfig(model=str(checkpoint), n=grid, docs=1, n_boot=10, rope="dynamic", suite="novel")
    out = temperature.run(cfg, tmp_path / "out", progress=False)
    rows = pd.read_parquet(out["paths"]["rows"])
    config = json.loads(out["paths"]["config"].read_text())
    assert config["n_train"] == 512 and config["rope"] == "dynamic" and set(rows["n_keys"]) == set(grid)
    # provenance: what --model named, resolved, with its content hash and the dtype the default gave
    assert config["model_path"] == str(checkpoint.resolve()) and config["dtype_used"] == "float32"
    assert config["model_sha256"] == hooks.provenance(checkpoint)["model_sha256"] and len(config["model_sha256"]) == 64
    own = AutoConfig.from_pretrained(checkpoint)
    d = own.hidden_size // own.num_attention_heads
    theta = own.rope_parameters["rope_theta"] * (800 / 512) ** (d / (d - 2))
    own.rope_parameters = {"rope_type": "default", "rope_theta": theta}
    own.max_position_embeddings = 800
    rebuilt = AutoModelForCausalLM.from_pretrained(checkpoint, config=own, attn_implementation="eager").eval()
    model, tok = hooks.load_model(checkpoint)
    (ids,) = temperature.documents(model, tok, cfg)
    with open(tasks.novel_path(), encoding="utf-8") as novel:
        assert list(ids) == tok(novel.read(), add_special_tokens=True)["input_ids"][:800]
    for layer, z in _hand_scores(rebuilt, torch.tensor([ids])).items():
        for n in grid:
            ref = row_stats(z[:, n - 1, :n], p=2)
            got = rows[(rows.layer == layer) & (rows.n_keys == n)].sort_values("head")
            np.testing.assert_allclose(got["lambda_n"].to_numpy(float), ref["lambda_n"].to_numpy(float), rtol=1e-5)
    assert (
        "dynamic-NTK RoPE at n_eval = 800 = 1.56 x the training window 512"
        in sections.section(out["paths"]["config"].parent).notes[0]
    )
    # the plain reading refuses the same grid, naming the way past the context
    with pytest.raises(RunError, match="context is 512.*--rope dynamic"):
        temperature.documents(model, tok, dataclasses.replace(cfg, rope="plain"))
