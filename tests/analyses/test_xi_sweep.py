"""attnlab xi-sweep: the back half of a window is the tokens a brute-force prefix loop scores; at xi = 0 the sweep is
the unmodified model's loss bit for bit; at xi > 0 (with plain or dynamic-NTK RoPE) it is the loss of a Llama
forward written out by hand with softmax(m(n; xi) z); the command writes its tables and refuses bad input."""

from __future__ import annotations

import json
import math
import shlex

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from attnlab import hooks
from attnlab.analyses import sections, xi_sweep
from attnlab.analyses.run import RunError
from attnlab.analyses.temperature import token_windows
from attnlab.cli import main
from attnlab.model.positions import dynamic_ntk_base, rope_frequencies

from .test_audit import _rotate_half


@pytest.fixture(scope="module")
def loaded(checkpoint):
    return hooks.load_model(checkpoint)


def _windows(tok, length: int, count: int = 2) -> list[tuple[int, ...]]:
    return token_windows(tok, length, count, seed=0, bos=False, text=None)


def _hand_loss(model, ids, xi: float, n_train: int, inv_freq: torch.Tensor) -> float:
    """The back-half loss sum of one window: the tiny Llama's forward written out, its logits multiplied by
    m(n; xi) with n = i + 1 keys at query i, RoPE from ``inv_freq``."""
    m, cfg = model.model, model.config
    x = torch.tensor([ids[:-1]])
    t, d = x.shape[1], cfg.hidden_size // cfg.num_attention_heads
    angles = torch.arange(t, dtype=torch.float)[:, None] * inv_freq[None]
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    n = torch.arange(1, t + 1, dtype=torch.float)[:, None]
    mult = (torch.log(n) / math.log(n_train)).clamp_min(1) ** xi
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    groups = cfg.num_attention_heads // cfg.num_key_value_heads
    with torch.no_grad():
        h = m.embed_tokens(x)
        for layer in m.layers:
            a, y = layer.self_attn, layer.input_layernorm(h)
            q, k, v = (proj(y).view(1, t, -1, d).transpose(1, 2) for proj in (a.q_proj, a.k_proj, a.v_proj))
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
            k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
            z = (q @ k.transpose(2, 3)) * d**-0.5 * mult
            w = torch.softmax(z.masked_fill(~causal, -math.inf), -1)
            h = h + a.o_proj((w @ v).transpose(1, 2).reshape(1, t, -1))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        logits = model.lm_head(m.norm(h))[0]
    half = len(ids) // 2
    return float(F.cross_entropy(logits[half - 1 :], torch.tensor(ids[half:]), reduction="sum"))


@pytest.mark.parametrize("length", [9, 10])
def test_back_half_is_what_a_prefix_loop_scores(loaded, length):
    model, tok = loaded
    windows = _windows(tok, length)
    got = xi_sweep.back_half_losses(model, windows, "cpu")
    for record, ids in zip(got, windows, strict=True):
        half = length // 2
        assert record["tokens"] == length - half  # tokens j in (n/2, n], 1-based
        brute = 0.0
        for j in range(half, length):  # 0-based token j, predicted from its j >= n/2 predecessors alone
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids[:j]])).logits[0, -1]
            brute += float(F.cross_entropy(logits, torch.tensor(ids[j])))
        assert record["loss_sum"] == pytest.approx(brute, rel=1e-5)


def test_xi_zero_is_the_unmodified_models_loss_bit_for_bit(loaded):
    model, tok = loaded
    windows = _windows(tok, 32)
    got = xi_sweep.sweep(model, {32: windows}, [0.0], ["plain"], n_train=8)
    for ids, loss in zip(windows, got["loss_sum"], strict=True):
        x = torch.tensor([ids])
        with torch.no_grad():
            logits = model(input_ids=x[:, :-1], logits_to_keep=16).logits[0]  # the model without attnlab
        assert loss == float(F.cross_entropy(logits, x[0, 16:], reduction="none").double().sum())


@pytest.mark.parametrize("rope", ["plain", "dynamic"])
def test_xi_positive_is_the_hand_written_forward(loaded, rope):
    model, tok = loaded
    windows = _windows(tok, 32)
    got = xi_sweep.sweep(model, {32: windows}, [0.0, 1.5], [rope], n_train=8)
    theta = model.config.rope_parameters["rope_theta"]
    d = model.config.hidden_size // model.config.num_attention_heads
    inv_freq = (
        model.model.rotary_emb.inv_freq
        if rope == "plain"
        else rope_frequencies(d, base=dynamic_ntk_base(theta, d, 32, 8))
    )
    for record in got.itertuples():
        hand = _hand_loss(model, windows[record.window], record.xi, 8, inv_freq)
        assert record.loss_sum == pytest.approx(hand, rel=1e-5)
    by_xi = got.groupby("xi")["loss_sum"].sum()
    assert by_xi[0.0] != by_xi[1.5]


def test_command_writes_the_sweep_and_its_argmin(checkpoint, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = [
        "xi-sweep",
        "--model",
        str(checkpoint),
        "--n-train",
        "16",
        "--ratios",
        "1",
        "2",
        "--xi",
        "0",
        "1",
        "2",
        "--rope",
        "plain",
        "dynamic",
        "--windows",
        "2",
        "--out",
        str(out),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    stdout = capsys.readouterr().out
    assert "back-half sliding-window loss" in stdout and "n_eval 32 (plain RoPE): best xi" in stdout
    assert sorted(p.name for p in out.iterdir()) == [
        ".attnlab-run.json",
        "best_xi.csv",
        "best_xi.md",
        "config.json",
        "windows.parquet",
        "xi_sweep.csv",
        "xi_sweep.md",
    ]
    table = pd.read_csv(out / "xi_sweep.csv")
    assert len(table) == 2 * 2 * 3 and (table["windows"] == 2).all()
    assert table[["n_eval", "rope", "xi"]].drop_duplicates().shape[0] == 12
    inside = table[table["n_eval"] == 16]
    assert inside["back-half loss"].nunique() == 1  # m = 1 and rho = 1 up to n_train: every cell is one forward
    per_window = pd.read_parquet(out / "windows.parquet")
    check = (
        per_window.assign(nll=per_window["loss_sum"] / per_window["tokens"])
        .groupby(["n_eval", "rope", "xi"])["nll"]
        .mean()
    )
    for _, r in table.iterrows():
        mean = check[(r["n_eval"], r["rope"], r["xi"])]
        assert r["back-half loss"] == pytest.approx(mean) and r["ppl"] == pytest.approx(math.exp(mean))
    best = pd.read_csv(out / "best_xi.csv").set_index(["n_eval", "rope"])
    assert math.isnan(best.loc[(16, "plain"), "best xi"])  # every xi ties inside the window
    beyond = table[(table["n_eval"] == 32) & (table["rope"] == "plain")]
    assert best.loc[(32, "plain"), "best xi"] == beyond.loc[beyond["back-half loss"].idxmin(), "xi"]
    config = json.loads((out / "config.json").read_text())
    assert config["n_train_used"] == 16 and config["n_eval"] == [16, 32]
    section = sections.section(out)  # what attnlab report shows of the folder
    assert section.study == "xi-sweep" and [t.stem for t in section.tables] == ["best_xi", "xi_sweep"]
    assert shlex.split(section.command)[:2] == ["attnlab", "xi-sweep"] and section.command.endswith(str(out))
    assert "--n-train 16" in section.command and "n_train = 16" in section.notes[0]


def test_parabola_min_and_best_xi():
    xi = [0.0, 0.5, 1.0, 1.5]
    loss = [(x - 0.7) ** 2 + 3 for x in xi]
    assert xi_sweep.parabola_min(pd.Series(xi).to_numpy(), pd.Series(loss).to_numpy()) == pytest.approx(0.7)
    assert math.isnan(xi_sweep.parabola_min(pd.Series(xi).to_numpy(), pd.Series(xi).to_numpy()))  # argmin at edge
    table = pd.DataFrame(
        {"n_eval": 8, "rope": "plain", "xi": xi, "back-half loss": loss, "ppl": [math.exp(v) for v in loss]}
    )
    best = xi_sweep.best_xi(table).iloc[0]
    assert best["best xi"] == 0.5 and best["xi* (parabola)"] == pytest.approx(0.7)
    assert best["ppl at best / at xi=0"] == pytest.approx(math.exp(loss[1] - loss[0]))


def test_bad_input_is_refused_before_any_work(checkpoint, loaded):
    model, _ = loaded
    base = {"model": str(checkpoint)}
    for kw, message in (
        (dict(xi=(-1.0,)), "--xi takes distinct finite exponents >= 0"),
        (dict(xi=(1.0, 1.0)), "--xi takes distinct"),
        (dict(ratios=(0.0,)), "--ratios takes distinct finite multiples > 0"),
        (dict(rope=("ntk",)), "--rope takes distinct values among plain, dynamic"),
        (dict(n_train=1), "--n-train must be an int >= 2"),
        (dict(windows=0), "--windows must be an int >= 1"),
        (dict(text="/no/such/file.txt"), "--text /no/such/file.txt is not a file"),
    ):
        with pytest.raises(RunError, match=message):
            xi_sweep.XiSweepConfig(**base, **kw)
    with pytest.raises(RunError, match="windows shorter than 4 tokens"):
        xi_sweep.eval_lengths((0.1, 1.0), 16)
    with pytest.raises(RunError, match="with repeats"):
        xi_sweep.eval_lengths((1.0, 1.01), 16)
    assert xi_sweep.training_length(model, None) == 512 and xi_sweep.training_length(model, 64) == 64


@pytest.mark.real
@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_real_model_xi_zero_is_its_own_loss_and_dynamic_rope_moves_it(real_models, name):
    model, tok = real_models(name)
    windows = _windows(tok, 96, count=1)
    got = xi_sweep.sweep(model, {96: windows}, [0.0, 1.0], ["plain", "dynamic"], n_train=32).set_index(["rope", "xi"])
    x = torch.tensor([windows[0]])
    with torch.no_grad():
        logits = model(input_ids=x[:, :-1], logits_to_keep=48).logits[0]
    own = float(F.cross_entropy(logits, x[0, 48:], reduction="none").double().sum())
    assert got.loc[("plain", 0.0), "loss_sum"] == own
    assert len(set(got["loss_sum"])) == 4  # the multiplier and the RoPE rescale each change the loss
