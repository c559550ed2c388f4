"""The audit's per-row S_p and Lambda_n equal the diagnostics engine on scores computed by hand from Q, K."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import torch

from attnlab import hooks, tasks
from attnlab.commands import audit
from attnlab.commands.runs import RunError
from attnlab.diagnostics import row_stats



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
        out[layer] = (q @ k.transpose(2, 3))[0].double() * d ** -0.5
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
                    pd.testing.assert_series_equal(got[col].reset_index(drop=True).astype(float),
                                                   ref[col].reset_index(drop=True).astype(float),
                                                   check_names=False, rtol=1e-5, atol=1e-9)
    table = result["table"]
    assert list(table["b"]) == ["0"] * 4 + ["auto"] * 4
    assert (table["p"].tolist() == [2, 4, 8, 16] * 2)


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
    cfg = audit.AuditConfig(model=str(checkpoint), suite=suite, prompts=2, queries="every:3", b=("0",), target="answer",
                            p=(2, 8), **kw)
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
                pd.testing.assert_series_equal(got[col].reset_index(drop=True).astype(float),
                                               ref[col].reset_index(drop=True).astype(float),
                                               check_names=False, rtol=1e-5, atol=1e-9)
    share = result["table"]["answer is argmax %"].iloc[0]
    readable = rows[~rows["status"].isin(("empty", "nan", "inf"))]
    assert share == pytest.approx(100 * readable["target_is_max"].astype(bool).mean())


def test_b_auto_is_calibrated_on_the_users_text_and_recorded(checkpoint, tmp_path):
    text = tmp_path / "held_out.txt"
    text.write_text("the quick brown fox jumps over the lazy dog and then sleeps in the sun. " * 40)
    cfg = audit.AuditConfig(model=str(checkpoint), suite="niah", prompts=1, pad=1, b=("auto",),
                            calibration=str(text))
    result = audit.run(cfg, tmp_path / "out", progress=False)
    model, tok = hooks.load_model(checkpoint)
    limit = min(1024, model.config.max_position_embeddings)  # the 1024 tokens of App. B, or the whole context
    ids = tok(text.read_text(), add_special_tokens=True)["input_ids"][:limit]
    assert result["b_auto"] == hooks.calibrate_b_auto(model, torch.tensor([ids]))
    config = json.loads(result["paths"]["config"].read_text())
    assert config["calibration text"] == str(text) and config["calibration tokens"] == len(ids)
    generated = audit.run(audit.AuditConfig(model=str(checkpoint), suite="niah", prompts=1, pad=1, b=("auto",)),
                          tmp_path / "generated", progress=False)
    assert generated["b_auto"] != result["b_auto"]
    assert json.loads(generated["paths"]["config"].read_text())["calibration text"].startswith("generated")


@pytest.mark.parametrize("kw, message", [
    ({"calibration": "/nonexistent/text.txt"}, "--calibration /nonexistent/text.txt is not a file"),
    ({"calibration": "x.txt", "b_auto": 1.0}, "drop one of them"),
])
def test_bad_calibration_is_refused_before_loading(kw, message):
    with pytest.raises(RunError, match=re.escape(message)):
        audit.AuditConfig(model="no/such/model", **kw)


def test_tau_and_sigmoid_reach_every_row_and_the_table(checkpoint, tmp_path):
    cfg = audit.AuditConfig(model=str(checkpoint), suite="niah", prompts=2, pad=2, queries="every:4", b=("0",), p=(2,),
                            tau=0.05, sigmoid=True)
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
    flags = [(True, True, True), (False, True, True), (False, False, False), (True, False, True),
             (True, False, False), (True, False, False)]
    rows = pd.DataFrame({"status": ["active"] * 5 + ["dead"], **{f"{k}_p2": [f[i] for f in flags]
                         for i, k in enumerate(("pred_safe", "safe", "safe_eps"))}})
    line = audit.bound_validation({"0": rows}, (2,)).iloc[0]
    assert line["rows"] == 5 and line["pred-safe %"] == 60.0 and line["measured-safe %"] == 40.0
    assert line["agree %"] == 40.0  # rows 1 and 3 agree
    assert (line["FN"], line["FN eps"], line["FP"]) == (2, 1, 1)
    assert line["FN rate %"] == pytest.approx(100 * 2 / 3) and line["FP rate %"] == 50.0
