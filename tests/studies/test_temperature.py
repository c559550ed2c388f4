"""study temperature: the verdicts follow the 95% intervals of xi_hat_Lambda, xi_hat_beta and xi*_PPL against 1 and
each other, and the pretrained model's xi_hat_Lambda band, on known folders; the study's pieces (beta_n fit, contact
rows, back-half sweep, the real-model part on a tiny checkpoint) are right, resumable, end to end runnable and
summarized from files alone."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import io, studies
from attnlab.diagnostics.gaps import gap_stats
from attnlab.report import plot_temperature
from attnlab.studies import temperature as st

from checkpoints import save_checkpoint

TINY = {**st.BUDGETS["smoke"], "context": 32, "layers": 1, "heads": 2, "d_model": 8, "steps": 4, "every": 2,
        "batch": 4, "max_tokens": 20_000, "n_grid": [4, 8, 16, 24, 32], "n_min": 4, "eval_seeds": 2, "windows": 2,
        "n_boot": 20, "sweep_lengths": [32, 64], "sweep_xi": [0, 2], "sweep_windows": 2, "sweep_batch": 2}
GRID = [16, 32, 64, 128, 192, 256]
REAL_TINY = {"n": [16, 32, 64], "docs": 2, "n_boot": 20}


def _hand_folder(folder: Path, *, xi_alpha: float, xi_delta: float, beta: np.ndarray, val_loss: float = 1.0,
                 best_xi: float = 0.5, model: str | None = None) -> Path:
    """A study folder with raw results whose answer is known: alpha_n = a_u (log n)^xi_alpha and
    Delta_n = d_u (log n)^xi_delta per unit u = (seed, layer, head), Lambda_n by the contact formula (4.4)
    (so xi_Lambda = xi_alpha - xi_Delta + 1 exactly); the sweep's loss is smallest at ``best_xi``."""
    folder.mkdir(parents=True)
    cfg = studies.StudyConfig(study="temperature", model=model)
    io.write_json(folder / "config.json", {**asdict(cfg), "command": cfg.command(folder)})
    plan = {**st.BUDGETS["smoke"], "n_grid": GRID, "n_min": 16, "sweep_lengths": [256, 512], "n_boot": 50}
    io.write_json(folder / st.PLAN, plan)
    run = folder / "runs" / st.NAME
    run.mkdir(parents=True)
    pd.DataFrame({"step": [500], "loss": [val_loss]}).to_csv(run / "train.csv", index=False)
    pd.DataFrame({"step": [500], "val_loss": [val_loss], "val_ppl": [math.exp(val_loss)]}).to_csv(
        run / "eval.csv", index=False)
    io.write_json(run / "config.json", {"model": {"vocab": 257}})
    io.write_parquet(folder / st.BETA, pd.DataFrame({"n": np.arange(1, 257), "beta_n": beta}))
    io.write_parquet(folder / st.HEAD_SCALES, pd.DataFrame({"layer": [0, 0], "head": [0, 1], "s": [1.0, 1.0],
                                                           "b": [0.0, 0.0]}))
    rng = np.random.default_rng(0)
    rows, gaps = [], []
    for s in range(2):
        for layer in range(2):
            for head in range(3):
                a_u, d_u = rng.uniform(0.5, 1.5), rng.uniform(0.5, 1.5)
                for n in GRID:
                    alpha, delta = a_u * 0.2 * math.log(n) ** xi_alpha, d_u * math.log(n) ** xi_delta
                    rows.append({"seed": s, "doc": 0, "layer": layer, "head": head, "n_keys": n, "query": n - 1,
                                 "lambda_n": alpha * math.log(n) / delta, "alpha_n": alpha, "contact_gap": delta,
                                 "tie": False})
                gaps.append({"seed": s, "doc": 0, "layer": layer, "head": head,
                             "gaps": np.concatenate(([0.0], np.sort(rng.exponential(1.0, 255))))})
    rows.append({**rows[0], "lambda_n": math.inf, "alpha_n": math.nan, "contact_gap": math.nan, "tie": True})
    io.write_parquet(folder / st.ROWS, pd.DataFrame(rows))
    io.write_parquet(folder / st.GAPS, pd.DataFrame(gaps))
    for n_eval in plan["sweep_lengths"]:
        io.write_parquet(folder / f"sweep_{n_eval}.parquet", pd.DataFrame(
            [{"window": w, "start": 0, "loss_sum": 128 * (1 + (xi - best_xi) ** 2 + 0.01 * w), "tokens": 128,
              "n_eval": n_eval, "xi": float(xi)} for xi in plan["sweep_xi"] for w in range(3)]))
    return folder


@pytest.fixture
def no_plots(monkeypatch):
    for name in ("plot_beta_fit", "plot_bucket_means", "plot_counting", "plot_sweep", "plot_real_lambda"):
        monkeypatch.setattr(plot_temperature, name, lambda *a, **k: None)


def _power(xi: float) -> np.ndarray:
    n = np.arange(1, 257)
    return 0.7 * np.log(np.maximum(n, 2)) ** xi


def test_summarize_reads_known_exponents_and_writes_tables(tmp_path, no_plots):
    folder = _hand_folder(tmp_path / "s", xi_alpha=-0.9, xi_delta=-0.4, beta=_power(0.4))
    section = studies.summarize(folder)
    exps = pd.read_csv(folder / "exponents.csv").set_index("exponent")["value"]
    assert exps["xi_hat_Lambda"] == pytest.approx(0.5, abs=1e-9)
    assert exps["xi_hat_alpha"] == pytest.approx(-0.9, abs=1e-9)
    assert exps["xi_hat_Delta"] == pytest.approx(-0.4, abs=1e-9)
    assert exps["xi*_beta (M2 grid argmin)"] == pytest.approx(0.4)
    assert exps["xi_hat_beta (OLS on the n-grid)"] == pytest.approx(0.4, abs=1e-9)
    assert exps["xi_hat_Lambda, eval seed 0"] == pytest.approx(0.5, abs=1e-9)
    assert exps["xi_hat_Lambda, eval seed 1"] == pytest.approx(0.5, abs=1e-9)
    per_n = pd.read_csv(folder / "contact_per_n.csv")
    assert per_n["ties"].sum() == 1 and list(per_n["n"]) == GRID
    sweep = pd.read_csv(folder / "sweep.csv")
    assert list(sweep["best xi"]) == [0.5, 0.5]
    comparison = pd.read_csv(folder / "comparison.csv").set_index("estimate")
    assert comparison.loc["xi_hat_Lambda", ["value", "lo", "hi"]].tolist() == pytest.approx([0.5] * 3, abs=1e-9)
    assert comparison.loc["xi_hat_beta", ["value", "lo", "hi"]].tolist() == pytest.approx([0.4] * 3, abs=1e-9)
    assert comparison.loc["xi_hat_Lambda - xi_hat_beta", "value"] == pytest.approx(0.1, abs=1e-9)
    assert comparison.loc["xi*_PPL at n_eval = 512", ["value", "lo", "hi"]].tolist() == pytest.approx([0.5] * 3)
    assert "xi*_PPL at n_eval = 256" not in comparison.index  # the training window: m = 1, nothing to optimize
    assert (comparison["side of 1"].dropna() == "below 1").all()
    assert [f.verdict for f in section.findings] == ["reproduced"] * 4
    for table in section.tables:
        assert (folder / f"{table.stem}.csv").is_file() and (folder / f"{table.stem}.md").is_file()
    assert json.loads((folder / "section.json").read_text())["study"] == "temperature"


@pytest.mark.parametrize(("xi_alpha", "xi_delta", "beta_xi", "val_loss", "verdict"), [
    (-0.5, -1.0, 0.4, 1.0, "not reproduced"),  # xi_Lambda = 1.5 above 1, beta below
    (-0.5, -1.0, 2.0, 1.0, "reproduced"),  # both above 1
    (-0.9, -0.4, 2.0, 1.0, "not reproduced"),  # xi_Lambda = 0.5 below 1, beta above
    (-0.9, -0.4, 0.4, 5.0, "not checked"),  # validation loss near the uniform guess: nothing learned
    (-0.9, -0.4, None, 1.0, "not checked"),  # beta_n still at its init 1
    (-0.9, -0.4, "noisy", 1.0, "not reproduced"),  # both points below 1, but xi_hat_beta's interval reaches 1
])
def test_verdict_follows_the_sides_of_one(tmp_path, no_plots, xi_alpha, xi_delta, beta_xi, val_loss, verdict):
    if beta_xi == "noisy":
        beta = _power(0.9) * np.exp(np.random.default_rng(1).normal(0, 0.05, 256))
    else:
        beta = np.ones(256) if beta_xi is None else _power(beta_xi)
    folder = _hand_folder(tmp_path / "s", xi_alpha=xi_alpha, xi_delta=xi_delta, beta=beta, val_loss=val_loss)
    finding = st.summarize(folder).findings[0]
    assert finding.verdict == verdict, finding.evidence


@pytest.mark.parametrize(("xi_alpha", "xi_delta", "beta_xi", "best_xi", "verdicts"), [
    (-0.9, -0.4, 0.4, 0.5, ["reproduced", "reproduced"]),
    (-0.9, -0.4, 0.4, 1.5, ["reproduced", "not reproduced"]),  # xi*_PPL above 1, xi_hat_Lambda = 0.5 below
    (-0.9, -0.4, 0.4, 1.0, ["reproduced", "not reproduced"]),  # xi*_PPL at 1: its side is not decided
    (-0.5, -0.4, 0.2, 0.5, ["not reproduced", "reproduced"]),  # xi_hat_Lambda = 0.9 is 0.7 from xi_hat_beta
    (-0.5, -1.0, 1.8, 2.0, ["reproduced", "reproduced"]),  # xi_hat_Lambda = 1.5: all above 1
])
def test_agreement_and_perplexity_verdicts(tmp_path, no_plots, xi_alpha, xi_delta, beta_xi, best_xi, verdicts):
    folder = _hand_folder(tmp_path / "s", xi_alpha=xi_alpha, xi_delta=xi_delta, beta=_power(beta_xi),
                          best_xi=best_xi)
    agreement, ppl = st.summarize(folder).findings[1:3]
    assert [agreement.verdict, ppl.verdict] == verdicts, (agreement.evidence, ppl.evidence)


def test_beta_slope_t_interval_covers_the_true_exponent_95_percent_of_the_time():
    n = np.arange(1, 257)
    hits = 0
    for r in range(400):
        noise = np.exp(np.random.default_rng(r).normal(0, 0.03, 256))
        fit = st.beta_slope(pd.DataFrame({"n": n, "beta_n": 0.8 * np.log(np.maximum(n, 2)) ** 0.6 * noise}), GRID)
        assert fit["lo"] < fit["xi_hat"] < fit["hi"]
        hits += fit["lo"] <= 0.6 <= fit["hi"]
    assert 0.91 <= hits / 400 <= 0.98
    assert math.isnan(st.beta_slope(pd.DataFrame({"n": n, "beta_n": -np.ones(256)}), GRID)["lo"])


def test_sweep_optimum_finds_the_vertex_between_grid_points_with_a_window_interval():
    xi = np.arange(0, 3.01, 0.5)
    rng = np.random.default_rng(0)
    lines = [{"n_eval": n_eval, "window": w, "xi": x, "tokens": 100,
              "loss_sum": 100 * (2 + (x - best) ** 2 + rng.normal(0, 0.05) + 0.3 * w)}
             for n_eval, best in ((512, 1.3), (1024, 3.4)) for w in range(12) for x in xi]
    lines += [{"n_eval": 256, "window": w, "xi": x, "tokens": 100, "loss_sum": 200.0} for w in range(3) for x in xi]
    opt = st.sweep_optimum(pd.DataFrame(lines), 256, 200, 0).set_index("n_eval")
    assert list(opt.index) == [512, 1024] and (opt["windows"] == 12).all()
    assert opt.loc[512, "lo"] < 1.3 < opt.loc[512, "hi"] and opt.loc[512, "hi"] - opt.loc[512, "lo"] < 0.3
    assert opt.loc[512, "xi*_PPL"] == pytest.approx(1.3, abs=0.1)
    assert opt.loc[1024].tolist()[1:] == [3.0, 3.0, 3.0]  # the argmin at the grid's edge is the edge


def test_side_of_one():
    assert [st.side_of_one(*b) for b in ((0.2, 0.9), (1.1, 2), (0.8, 1.2), (math.nan, 1))] == [
        "below 1", "above 1", "contains 1", "undefined"]


def test_beta_fit_mse_is_zero_at_the_true_exponent_and_grows_away():
    beta = pd.DataFrame({"n": np.arange(1, 1025), "beta_n": 1.3 * np.log(np.maximum(np.arange(1, 1025), 2)) ** 0.55})
    fit = st.beta_fit(beta, 64, 3.0, 0.05)
    best = fit.loc[fit["mse"].idxmin()]
    assert best["xi"] == pytest.approx(0.55) and best["a1"] == pytest.approx(1.3) and best["mse"] < 1e-20
    assert fit["mse"].iloc[0] > 0 and fit["mse"].iloc[-1] > 0 and len(fit) == 61


def test_representative_row_is_nearest_the_bucket_mean_at_the_largest_n():
    rows = pd.DataFrame({"n_keys": [8, 8, 8, 4], "lambda_n": [1.0, 2.0, np.inf, 1.0],
                         "alpha_n": [0.5, 0.2, np.nan, 0.3], "contact_gap": [1.0, 0.4, np.nan, 1.0]})
    table = pd.DataFrame({"n": [4, 8], "mean log alpha": [0.0, math.log(0.21)],
                          "mean log Delta": [0.0, math.log(0.41)]})
    assert st.representative(rows, table).name == 1


def test_sweep_model_scales_the_logits_only_past_the_training_window():
    from attnlab.model.config import ModelConfig
    from attnlab.model.decoder import Decoder

    torch.manual_seed(0)
    model = Decoder(ModelConfig(context=32, vocab=257, layers=1, heads=2, d_model=8, positions="rope",
                                rope_dynamic=True, scaler="beta_n")).eval()
    with torch.no_grad():
        model.layers[0].attn.q_proj.weight.mul_(100)  # scores far from 0, so a multiplier shows
        x = torch.randint(0, 257, (1, 64))
        plain, scaled = model(x), st.sweep_model(model, 2.0)(x)
        assert torch.equal(st.sweep_model(model, 0.0).beta_n, model.beta_n)
    diff = (plain - scaled).abs().amax(-1)[0]
    assert diff[:32].max() < 1e-5 and (diff[32:] > 1e-6).all()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The study with --model on a tiny save_pretrained checkpoint, n-grid and budget."""
    checkpoint = save_checkpoint(tmp_path_factory.mktemp("ckpt"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(st.BUDGETS, "smoke", TINY)
        mp.setitem(st.REAL_PLANS, "smoke", REAL_TINY)
        folder = tmp_path_factory.mktemp("temperature") / "run"
        section = studies.run(studies.StudyConfig(study="temperature", budget="smoke", model=str(checkpoint), seed=0),
                              folder)
    return folder, section


def test_tiny_end_to_end_run_writes_a_section_and_the_raw_pieces(tiny_run):
    folder, section = tiny_run
    assert section.study == "temperature" and len(section.findings) == 5
    for fig in section.figures:
        assert (folder / f"{fig.stem}.png").stat().st_size > 0 and (folder / f"{fig.stem}.svg").is_file()
    rows = pd.read_parquet(folder / st.ROWS)
    assert len(rows) == TINY["eval_seeds"] * TINY["windows"] * TINY["layers"] * TINY["heads"] * len(TINY["n_grid"])
    assert (rows["query"] + 1 == rows["n_keys"]).all() and sorted(set(rows["n_keys"])) == TINY["n_grid"]
    beta = pd.read_parquet(folder / st.BETA)
    assert len(beta) == TINY["context"] and (beta["beta_n"] != 1).any()  # trained, so moved from init
    sweep = pd.concat(pd.read_parquet(folder / f"sweep_{n}.parquet") for n in TINY["sweep_lengths"])
    assert len(sweep) == len(TINY["sweep_lengths"]) * len(TINY["sweep_xi"]) * TINY["sweep_windows"]
    assert (sweep["tokens"] == sweep["n_eval"] // 2).all()
    # within the training window m(n; xi) = 1, so every xi scores the same
    inside = sweep[sweep["n_eval"] == TINY["context"]].pivot(index="window", columns="xi", values="loss_sum")
    np.testing.assert_allclose(inside[0.0], inside[2.0], rtol=1e-6)


def test_contact_rows_are_the_engines_triples_of_the_stored_gaps(tiny_run):
    folder, _ = tiny_run
    rows = pd.read_parquet(folder / st.ROWS)
    gaps = pd.read_parquet(folder / st.GAPS)
    n = max(TINY["n_grid"])
    top = rows[rows["n_keys"] == n].merge(gaps, on=["seed", "doc", "layer", "head"])
    assert len(top) == len(gaps) > 0
    g = torch.tensor(np.stack(top["gaps"].to_numpy()))
    assert (g[:, 0] == 0).all() and (g.diff(dim=-1) >= 0).all()
    stats = gap_stats(-g, torch.full((len(top),), n))
    np.testing.assert_allclose(stats["lambda_n"].numpy(), top["lambda_n"], rtol=1e-12)
    np.testing.assert_allclose(stats["contact_gap"].numpy(), top["contact_gap"], rtol=1e-12)


def test_rerun_resumes_without_retraining_and_redoes_only_missing_pieces(tiny_run):
    folder, _ = tiny_run
    raw = [st.PLAN, st.BETA, st.HEAD_SCALES, st.GAPS, st.ROWS, *(f"sweep_{n}.parquet" for n in TINY["sweep_lengths"]),
           f"{st.REAL}/config.json", f"{st.REAL}/{st.REAL_ROWS}"]
    run = folder / "runs" / st.NAME
    # the trainer rewrites metrics.jsonl on resume (dropping records past the checkpoint); the weights
    # and the summary of a finished run must stay as they are
    ckpts = sorted(p for p in (run / "checkpoints").rglob("*") if p.is_file()) + [run / "summary.json"]
    before = {p: p.stat().st_mtime_ns for p in [*(folder / f for f in raw), *ckpts]}
    missing = folder / f"sweep_{TINY['sweep_lengths'][-1]}.parquet"
    kept_sweep = pd.read_parquet(missing)
    missing.unlink()
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(st.BUDGETS, "smoke", TINY)
        st.compute(studies.load_config(folder), folder, progress=False)
    for path, mtime in before.items():
        if path != missing:
            assert path.stat().st_mtime_ns == mtime, f"{path.name} was rewritten"
    assert json.loads((run / "summary.json").read_text())["steps"] == TINY["steps"]
    pd.testing.assert_frame_equal(pd.read_parquet(missing), kept_sweep)


def test_real_part_end_to_end_matches_the_temperature_command_and_resummarizes_identically(tiny_run):
    folder, section = tiny_run
    real = folder / st.REAL
    rows = pd.read_parquet(real / st.REAL_ROWS)
    assert sorted(set(rows["n_keys"])) == REAL_TINY["n"] and (rows["query"] + 1 == rows["n_keys"]).all()
    assert len(rows) == REAL_TINY["docs"] * 2 * 4 * len(REAL_TINY["n"])  # docs x layers x heads x n
    assert {"real_per_n", "real_exponents"} <= {t.stem for t in section.tables}
    assert (folder / "real_lambda.png").stat().st_size > 0 and (folder / "real_lambda.svg").is_file()
    finding = section.findings[-1]
    assert "pretrained" in finding.claim and finding.verdict in ("reproduced", "not reproduced")
    # the study's numbers, recomputed from the row table, are the temperature command's own
    pd.testing.assert_frame_equal(pd.read_csv(folder / "real_per_n.csv"), pd.read_csv(real / "temperature.csv"))
    ours = pd.read_csv(folder / "real_exponents.csv").set_index("exponent")
    theirs = pd.read_csv(real / "exponents.csv").set_index("exponent")
    np.testing.assert_allclose(ours.loc[theirs.index, ["xi_hat", "half_iqr"]], theirs[["xi_hat", "half_iqr"]])
    xi, h = theirs.loc["xi_Lambda", ["xi_hat", "half_iqr"]]
    assert f"xi_hat_Lambda = {xi:.3f} (half-IQR {h:.3f}" in finding.evidence
    # summarize reads files only: a second pass gives the same section and the same tables
    tables = {t.stem: (folder / f"{t.stem}.csv").read_text() for t in section.tables}
    again = studies.summarize(folder)
    assert again.to_dict() == section.to_dict()
    assert {t.stem: (folder / f"{t.stem}.csv").read_text() for t in again.tables} == tables


def _hand_real(folder: Path, *, xi_lambda: float, spread: float = 0.05, window: int | None = None) -> None:
    """folder/real as the temperature command writes it, with Lambda_n = c_u (log n)^(xi_lambda + o_u) per unit
    u = (layer, head), the offsets o_u in (spread, 0, -spread) over each layer's heads (so xi_hat_Lambda =
    xi_lambda, over all layers or one); with ``window``, layer 0 sees at most ``window`` keys, as a
    sliding-window layer does."""
    real = folder / st.REAL
    real.mkdir()
    grid = [128, 256, 512, 1024, 2048]
    io.write_json(real / "config.json", {"model": "hand", "model_type": "llama", "layers": 2, "heads": 3,
                                         "documents": 2, "n": grid, "n_boot": 50, "seed": 0, "device": "cpu",
                                         "dtype": "float32"})
    rows = []
    for layer in range(2):
        for head in range(3):
            xi_u = xi_lambda + spread * (1 - head)
            for doc in range(2):
                for n in grid:
                    keys = min(n, window) if window and layer == 0 else n
                    lam = (1 + 0.1 * head + 0.05 * doc) * math.log(keys) ** xi_u
                    delta = 0.3 * math.log(keys) / lam  # the contact formula (4.4) with alpha_n = 0.3
                    rows.append({"layer": layer, "head": head, "prompt": doc, "query": n - 1, "n_keys": keys,
                                 "status": "active", "lambda_n": lam, "alpha_n": 0.3, "contact_gap": delta})
    rows.append({**rows[0], "status": "empty", "lambda_n": math.nan})  # unreadable rows never count
    io.write_parquet(real / st.REAL_ROWS, pd.DataFrame(rows))


@pytest.mark.parametrize(("xi_lambda", "spread", "verdict", "words"), [
    (1.8, 0.05, "reproduced", "lies above 1"),
    (0.4, 0.05, "not reproduced", "lies below 1"),
    (1.02, 0.3, "not reproduced", "contains 1"),
])
def test_real_verdict_follows_the_band_around_one(tmp_path, no_plots, xi_lambda, spread, verdict, words):
    folder = _hand_folder(tmp_path / "s", xi_alpha=-0.9, xi_delta=-0.4, beta=_power(0.4), model="hand")
    _hand_real(folder, xi_lambda=xi_lambda, spread=spread)
    finding = st.summarize(folder).findings[-1]
    assert finding.verdict == verdict and words in finding.evidence, finding.evidence
    assert f"xi_hat_Lambda = {xi_lambda:.3f}" in finding.evidence
    exps = pd.read_csv(folder / "real_exponents.csv").set_index("exponent")
    assert exps.loc["xi_Lambda", "xi_hat"] == pytest.approx(xi_lambda, abs=1e-9)
    assert exps.loc["xi_Lambda", "half_iqr"] > 0
    assert st.real_verdict(math.nan, 0.1)[0] == "not checked"


def test_sliding_window_rows_are_named_in_a_note_with_the_full_attention_fit(tmp_path, no_plots):
    folder = _hand_folder(tmp_path / "s", xi_alpha=-0.9, xi_delta=-0.4, beta=_power(0.4), model="hand")
    _hand_real(folder, xi_lambda=1.5, window=512)
    section = st.summarize(folder)
    assert "see the notes" in section.findings[-1].evidence
    windowed = [n for n in section.notes if "sliding window" in n]
    assert len(windowed) == 1 and "in layers [0]" in windowed[0] and "[512] keys" in windowed[0]
    assert "xi_hat_Lambda = 1.500" in windowed[0]  # layer 1 alone sees n keys at every n
    per_n = pd.read_csv(folder / "real_per_n.csv").set_index("n")["rows"]
    # 3 heads x 2 documents per layer and n: layer 0's rows at n = 1024, 2048 join layer 0's and 1's at 512
    assert per_n[512] == 6 * 4 and per_n[1024] == per_n[2048] == 6


@pytest.mark.parametrize(("model", "words"), [(None, "attnlab fetch smollm2"), ("smollm2", "has not finished")])
def test_without_the_real_part_a_note_says_how_to_run_it(tmp_path, no_plots, model, words):
    folder = _hand_folder(tmp_path / "s", xi_alpha=-0.9, xi_delta=-0.4, beta=_power(0.4), model=model)
    section = st.summarize(folder)
    assert len(section.findings) == 4 and not any(t.stem.startswith("real") for t in section.tables)
    assert any(words in n for n in section.notes), section.notes
