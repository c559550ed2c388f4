"""The audit's rows equal the engine on hand-computed scores; its Figs. 1b and 2 count and type what its files hold."""

from __future__ import annotations

import json
import re
import shlex

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import hooks, tasks
from attnlab.analyses import audit, sections
from attnlab.analyses.run import RunError
from attnlab.diagnostics import row_stats
from attnlab.report.plot_concentration import plot_phase


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


def _hand_scores(model, ids):
    """Per layer: (heads, T, T) scores q k^T / sqrt(d) from each layer's own projections and RoPE."""
    captured = {}

    def grab(module, args, kwargs):
        captured[module.layer_idx] = (kwargs["hidden_states"], kwargs["position_embeddings"])

    handles = [layer.self_attn.register_forward_pre_hook(grab, with_kwargs=True) for layer in model.model.layers]
    with torch.no_grad():
        model(input_ids=ids)
    for h in handles:
        h.remove()
    cfg = model.config
    d = cfg.hidden_size // cfg.num_attention_heads
    out = {}
    for layer, (hidden, (cos, sin)) in captured.items():
        attn = model.model.layers[layer].self_attn
        t = hidden.shape[1]
        q = attn.q_proj(hidden).view(1, t, -1, d).transpose(1, 2)
        k = attn.k_proj(hidden).view(1, t, -1, d).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        k = k.repeat_interleave(cfg.num_attention_heads // cfg.num_key_value_heads, 1)
        out[layer] = (q @ k.transpose(2, 3))[0].double() * d**-0.5
    return out


def test_audit_rows_equal_engine_on_hand_computed_scores(checkpoint, tmp_path):
    cfg = audit.AuditConfig(model=str(checkpoint), suite="niah", prompts=2, pad=2, queries="all", b=("0", "auto"))
    result = audit.run(cfg, tmp_path / "out", progress=False)
    b_auto = result["b_auto"]
    model, tok = hooks.load_model(checkpoint)
    prompts = tasks.build_suite("niah", tok, 2, seed=0, pad=2)
    for label, b in (("0", 0.0), ("auto", b_auto)):
        rows = pd.read_parquet(result["paths"][f"rows_b{label}"])
        for i, prompt in enumerate(prompts):
            ids = torch.tensor([prompt.input_ids])
            t = ids.shape[1]
            causal = torch.ones(t, t, dtype=torch.bool).tril()
            for layer, z in _hand_scores(model, ids).items():
                ref = row_stats(z, causal, p=(2, 4, 8, 16), b=b)
                got = rows[(rows.layer == layer) & (rows.prompt == i)].sort_values(["head", "query"])
                assert len(got) == len(ref) == z.shape[0] * t
                for col in ("s_p2", "s_p16", "lambda_n", "rho", "a_act"):
                    pd.testing.assert_series_equal(
                        got[col].reset_index(drop=True).astype(float),
                        ref[col].reset_index(drop=True).astype(float),
                        check_names=False,
                        rtol=1e-5,
                        atol=1e-9,
                    )
    table = result["table"]
    assert list(table["b"]) == ["0"] * 4 + ["auto"] * 4
    assert table["p"].tolist() == [2, 4, 8, 16] * 2


def test_audit_reads_the_queries_that_see_k_2k_keys_and_the_last(checkpoint, tmp_path):
    cfg = audit.AuditConfig(model=str(checkpoint), suite="niah", prompts=1, pad=3, queries="every:8", b=("0",))
    result = audit.run(cfg, tmp_path / "out", progress=False)
    rows = pd.read_parquet(result["paths"]["rows_b0"])
    _, tok = hooks.load_model(checkpoint)
    last = len(tasks.build_suite("niah", tok, 1, seed=0, pad=3)[0].input_ids) - 1
    expected = sorted({*range(7, last + 1, 8), last})  # query 0 (one key, S_p = 0) is not forced in
    assert sorted(set(rows["query"])) == expected
    assert len(rows) == len(expected) * 2 * 4  # layers x heads


@pytest.mark.parametrize("suite, kw", [("niah", {"pad": 2}), ("induction", {"length": 40})])
def test_answer_target_reads_rows_against_the_planted_key(checkpoint, tmp_path, suite, kw):
    cfg = audit.AuditConfig(
        model=str(checkpoint), suite=suite, prompts=2, queries="every:3", b=("0",), target="answer", p=(2, 8), **kw
    )
    result = audit.run(cfg, tmp_path / "out", progress=False)
    rows = pd.read_parquet(result["paths"]["rows_b0"])
    model, tok = hooks.load_model(checkpoint)
    prompts = tasks.build_suite(suite, tok, 2, seed=0, **kw)
    assert rows["answer_key"].all()
    for i, prompt in enumerate(prompts):
        keys = tasks.answer_keys(prompt)
        t = len(prompt.input_ids)
        queries = sorted(q for q in keys if (q + 1) % 3 == 0 or q == t - 1)
        causal = torch.ones(t, t, dtype=torch.bool).tril()[queries]
        target = torch.tensor([keys[q] for q in queries])
        for layer, z in _hand_scores(model, torch.tensor([prompt.input_ids])).items():
            ref = row_stats(z[:, queries], causal, p=(2, 8), b=0.0, target=target)
            got = rows[(rows.layer == layer) & (rows.prompt == i)].sort_values(["head", "query"])
            assert got["query"].tolist() == queries * z.shape[0]
            assert got["target"].tolist() == target.tolist() * z.shape[0]
            for col in ("s_p2", "s_p8", "rho", "target_mass"):
                pd.testing.assert_series_equal(
                    got[col].reset_index(drop=True).astype(float),
                    ref[col].reset_index(drop=True).astype(float),
                    check_names=False,
                    rtol=1e-5,
                    atol=1e-9,
                )
    share = result["table"]["answer is argmax %"].iloc[0]
    readable = rows[~rows["status"].isin(("empty", "nan", "inf"))]
    assert share == pytest.approx(100 * readable["target_is_max"].astype(bool).mean())


def test_b_auto_is_calibrated_on_the_users_text_and_recorded(checkpoint, tmp_path):
    text = tmp_path / "held_out.txt"
    text.write_text("the quick brown fox jumps over the lazy dog and then sleeps in the sun. " * 40)
    cfg = audit.AuditConfig(model=str(checkpoint), suite="niah", prompts=1, pad=1, b=("auto",), calibration=str(text))
    result = audit.run(cfg, tmp_path / "out", progress=False)
    model, tok = hooks.load_model(checkpoint)
    limit = min(1024, model.config.max_position_embeddings)  # the 1024 tokens of App. B, or the whole context
    ids = tok(text.read_text(), add_special_tokens=True)["input_ids"][:limit]
    assert result["b_auto"] == hooks.calibrate_b_auto(model, torch.tensor([ids]))
    config = json.loads(result["paths"]["config"].read_text())
    assert config["calibration text"] == str(text) and config["calibration tokens"] == len(ids)
    generated = audit.run(
        audit.AuditConfig(model=str(checkpoint), suite="niah", prompts=1, pad=1, b=("auto",)),
        tmp_path / "generated",
        progress=False,
    )
    assert generated["b_auto"] != result["b_auto"]
    assert json.loads(generated["paths"]["config"].read_text())["calibration text"].startswith("generated")


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"calibration": "/nonexistent/text.txt"}, "--calibration /nonexistent/text.txt is not a file"),
        ({"calibration": "x.txt", "b_auto": 1.0}, "drop one of them"),
    ],
)
def test_bad_calibration_is_refused_before_loading(kw, message):
    with pytest.raises(RunError, match=re.escape(message)):
        audit.AuditConfig(model="no/such/model", **kw)


@pytest.mark.parametrize("p", [(2, 2), (2, 4, 2.0)])
def test_a_repeated_degree_is_refused_before_loading(p):
    """The rows' own rule (RowOptions), which used to run only after the model had loaded."""
    with pytest.raises(ValueError, match=r"p has repeated degrees: .*; give each degree once"):
        audit.AuditConfig(model="no/such/model", p=p)


def test_tau_and_sigmoid_reach_every_row_and_the_table(checkpoint, tmp_path):
    cfg = audit.AuditConfig(
        model=str(checkpoint),
        suite="niah",
        prompts=2,
        pad=2,
        queries="every:4",
        b=("0",),
        p=(2,),
        tau=0.05,
        sigmoid=True,
    )
    result = audit.run(cfg, tmp_path / "out", progress=False)
    rows = pd.read_parquet(result["paths"]["rows_b0"])
    readable = rows[rows["status"].isin(["active", "dead", "saturated"])]
    assert (rows["status"] == "saturated").any()  # tau = 0.05 caps most live targets
    line = result["table"].iloc[0]
    assert line["saturated %"] == pytest.approx(100 * (readable["status"] == "saturated").mean())
    assert line["sigma safe %"] == pytest.approx(100 * (readable["s_sigmoid"].astype(float) < 1).mean())


def test_bound_validation_names_fn_and_fp_as_table_8_and_counts_them_by_hand():
    # (pred_safe, safe, safe_eps): a TP-safe, an FP, a TN-unsafe, an FN at the boundary (S_p = 1: eps-safe),
    # an FN beyond it, and a dead row left out
    flags = [
        (True, True, True),
        (False, True, True),
        (False, False, False),
        (True, False, True),
        (True, False, False),
        (True, False, False),
    ]
    rows = pd.DataFrame(
        {
            "status": ["active"] * 5 + ["dead"],
            **{f"{k}_p2": [f[i] for f in flags] for i, k in enumerate(("pred_safe", "safe", "safe_eps"))},
        }
    )
    line = audit.bound_validation({"0": rows}, (2,)).iloc[0]
    assert line["rows"] == 5 and line["pred-safe %"] == 60.0 and line["measured-safe %"] == 40.0
    assert line["agree %"] == 40.0  # rows 1 and 3 agree
    assert (line["FN"], line["FN eps"], line["FP"]) == (2, 1, 1)
    assert line["FN rate %"] == pytest.approx(100 * 2 / 3) and line["FP rate %"] == 50.0


def _quadrants(rows, p):
    """Polynomial Concentration App. M's four cells at degree p, counted by hand over the active rows."""
    active = rows[rows["status"] == "active"]
    x, y = active["p_star"].to_numpy(float), active[f"s_p{p:g}"].to_numpy(float)
    known = ~np.isnan(x) & ~np.isnan(y)
    pred, meas = p >= x[known], y[known] < 1
    return {
        "certified safe": int((pred & meas).sum()),
        "FN": int((pred & ~meas).sum()),
        "FP": int((~pred & meas).sum()),
        "agree unsafe": int((~pred & ~meas).sum()),
    }


@pytest.mark.parametrize("p, degree", [((8, 2), 2), ((16, 4), 4)])
def test_fig_1b_caption_counts_each_quadrant_of_the_rows(checkpoint, tmp_path, p, degree):
    cfg = audit.AuditConfig(model=str(checkpoint), suite="induction", prompts=2, length=48, p=p, queries="every:3")
    audit.run(cfg, tmp_path / "out", progress=False)
    section = sections.section(tmp_path / "out")
    assert [f.stem for f in section.figures] == ["p_star", "predicted_vs_measured", "phase"]
    caption = {f.stem: f.caption for f in section.figures}["predicted_vs_measured"]
    assert f"measured S_{degree} (y)" in caption and f"x = {degree} and y = 1" in caption
    for b in ("0", "auto"):
        counts = _quadrants(pd.read_parquet(tmp_path / "out" / f"rows_b{b}.parquet"), degree)
        assert sum(counts.values()) > 0 and counts["agree unsafe"] > 0
        text = ", ".join(f"{n} {name}" for name, n in counts.items())
        assert f"b = {b}: {text}" in caption, (text, caption)
        table = pd.read_csv(tmp_path / "out" / "bound_validation.csv", dtype={"b": str}).set_index(["b", "p"])
        assert (table.loc[(b, degree), "FN"], table.loc[(b, degree), "FP"]) == (counts["FN"], counts["FP"])
    for stem in ("p_star", "predicted_vs_measured", "phase"):
        assert (tmp_path / "out" / f"{stem}.png").is_file() and (tmp_path / "out" / f"{stem}.svg").is_file()


@pytest.fixture(scope="module")
def heads_folder(checkpoint, tmp_path_factory):
    from attnlab.analyses import heads

    out = tmp_path_factory.mktemp("heads") / "heads"
    heads.run(heads.HeadsConfig(model=str(checkpoint), prompts=2, length=40), out, progress=False)
    return out


def test_types_of_another_model_or_without_heads_csv_is_one_line_before_loading(
    checkpoint, heads_folder, tmp_path, capsys
):
    from attnlab.analyses import ablate
    from attnlab.cli import main
    from checkpoints import save_checkpoint

    other = save_checkpoint(tmp_path / "other", seed=1)
    (tmp_path / "empty").mkdir()
    capsys.readouterr()
    cases = [
        (str(other), str(heads_folder), f"holds the head types of {checkpoint}, not of {other}"),
        (str(checkpoint), str(tmp_path / "empty"), "cannot read its heads.csv"),
        (str(checkpoint), str(checkpoint), "cannot read its heads.csv"),
    ]
    for model, types, message in cases:
        for config in (audit.AuditConfig, ablate.AblateConfig):
            with pytest.raises(RunError, match=re.escape(message)):
                config(model=model, types=types)
        assert main(["audit", "--model", model, "--types", types, "--out", str(tmp_path / "a")]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not (tmp_path / "a").exists()
    # one model spelled two ways is the same model
    audit.AuditConfig(model=str(checkpoint / ".." / checkpoint.name), types=str(heads_folder))


def test_report_of_an_audit_with_types_colours_the_phase_plot_by_head_type(
    checkpoint, heads_folder, tmp_path, monkeypatch
):
    cfg = audit.AuditConfig(
        model=str(checkpoint), prompts=2, pad=1, p=(2, 4), queries="every:4", types=str(heads_folder)
    )
    result = audit.run(cfg, tmp_path / "out", progress=False)
    assert json.loads(result["paths"]["config"].read_text())["types"] == str(heads_folder)
    drawn = []
    monkeypatch.setattr(audit, "plot_phase", lambda *a, **kw: drawn.append((a, kw)) or plot_phase(*a, **kw))
    section = sections.section(tmp_path / "out")
    (heads, degrees, path), kw = drawn[0]
    typed = pd.read_csv(heads_folder / "heads.csv")
    assert kw["types"] == {
        (int(layer), int(head)): kind for layer, head, kind in zip(typed["layer"], typed["head"], typed["head_type"])
    }
    assert degrees == (2, 4) and path == tmp_path / "out" / "phase" and (tmp_path / "out" / "phase.png").is_file()
    rows = pd.read_parquet(tmp_path / "out" / "rows_bauto.parquet")
    active = rows[rows["status"] == "active"]
    medians = active[["layer", "head"]].assign(rho=active["rho"].astype(float), a_act=active["a_act"].astype(float))
    medians = medians.groupby(["layer", "head"]).median()
    mine = heads[heads["b"] == "auto"].set_index(["layer", "head"])
    np.testing.assert_allclose(mine[["med rho", "med a_act"]].to_numpy(), medians.to_numpy())
    assert "phase" in [f.stem for f in section.figures] and "head_types" in [t.stem for t in section.tables]
    assert "App. H type" in {f.stem: f.caption for f in section.figures}["phase"]
    argv = shlex.split(section.command)
    assert argv[argv.index("--types") + 1] == str(heads_folder)


def test_the_prevalence_interval_resamples_prompts_not_rows():
    """Four prompts of 200 rows each, all unsafe in two and all safe in two: the rows' Wilson interval is about
    +-3.5 pp around 50%, but four prompts cannot place the share that tightly; the bootstrap over prompts sees it."""
    from attnlab.analyses.run import Bias

    prompt = np.repeat(np.arange(4), 200)
    rows = pd.DataFrame(
        {
            "prompt": prompt,
            "status": "active",
            "rho": 0.5,
            "a_act": 3.0,
            "target_is_max": True,
            **{c: np.nan for c in audit.GAP_COLUMNS},
            "s_p2": 1.0,
            "safe_p2": prompt % 2 == 0,
        }
    )
    (line,) = audit.prevalence(rows, (2,), Bias("0", 0.0))
    assert line["unsafe %"] == 50 and line["prompts"] == 4
    assert line["row wilson hi"] - line["row wilson lo"] < 8
    assert line["unsafe lo"] <= 25 and line["unsafe hi"] >= 75
    uniform = rows.assign(safe_p2=np.arange(800) % 2 == 0)  # every prompt half safe: nothing varies between prompts
    (even,) = audit.prevalence(uniform, (2,), Bias("0", 0.0))
    assert even["unsafe lo"] == even["unsafe hi"] == 50
