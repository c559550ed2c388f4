"""Sinks study (Attention Sinks Essential): Theorem 1-2's per-input sink fractions equal a loop's, Theorem 3's
construction has zero loss and no BOS weight, verdicts follow the files, every budget's runs (1x1, 2x2, 4x4, every
seed) build, a run resumes without retraining, and the real model's mass equals eager attention's."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import io
from attnlab.model import Decoder
from attnlab.studies import sinks
from attnlab.studies import StudyConfig, StudyError, run
from attnlab.tasks.vectors import TriggerAveraging

L, J = sinks.LENGTH, sinks.TRIGGER
PLAN = sinks.BUDGETS["smoke"]
RUNS = sinks.runs(PLAN)


# ------------------------------------------------------------------------------------- per-input sinks

def _fractions_by_loop(w: torch.Tensor, triggers: torch.Tensor, eps: float):
    layers, rows, heads = w.shape[:3]
    positions = np.zeros((layers, heads))
    inputs_all = np.zeros((layers, heads))
    exists = 0
    count = 0
    for r in range(rows):
        pre = range(1, int(triggers[r]))  # 0-based i with 1 < i + 1 < j + 1
        count += len(pre)
        found = False
        for layer in range(layers):
            for head in range(heads):
                hits = [float(w[layer, r, head, i, 0]) >= 1 - eps for i in pre]
                positions[layer, head] += sum(hits)
                inputs_all[layer, head] += all(hits)
                found = found or any(hits)
        exists += found
    return positions / count, inputs_all / rows, exists / rows


@pytest.mark.parametrize("eps", [0.1, 0.01])
def test_sink_fractions_equal_a_loop_over_inputs_and_positions(eps):
    g = torch.Generator().manual_seed(0)
    layers, rows, heads = 3, 40, 2
    w = torch.rand(layers, rows, heads, L, L, generator=g)
    # most BOS weights near 1, straddling both thresholds
    w[..., 0] = torch.where(torch.rand(layers, rows, heads, L, generator=g) < 0.85,
                            1 - torch.rand(layers, rows, heads, L, generator=g) * 0.012, w[..., 0])
    triggers = torch.randint(2, L, (rows,), generator=g)
    got = sinks.sink_fractions(w, triggers, eps)
    positions, inputs_all, exists = _fractions_by_loop(w, triggers, eps)
    np.testing.assert_allclose(got["positions"].numpy(), positions, rtol=1e-12)
    np.testing.assert_allclose(got["inputs_all"].numpy(), inputs_all, rtol=1e-12)
    assert float(got["inputs_exists"]) == pytest.approx(exists, rel=1e-12)
    assert 0 < inputs_all.min() and positions.max() < 1  # the case is not degenerate


def test_sink_fractions_ignore_bos_query_trigger_and_later_rows():
    w = torch.zeros(1, 2, 1, L, L)
    w[..., 0, 0] = 1.0          # query 1 (BOS itself) always on key 1: left out
    w[0, 0, 0, 1:4, 0] = 1.0    # row 0, trigger j = 5 (0-based 4): queries 2..4 sink, the only ones counted
    w[0, 1, 0, 1:3, 0] = 1.0    # row 1, trigger j = 5: query 4 (0-based 3) does not sink
    w[0, 1, 0, 4:, 0] = 1.0     # ... but the trigger and later rows do: not counted
    got = sinks.sink_fractions(w, torch.tensor([4, 4]), 0.1)
    assert got["positions"].item() == pytest.approx(5 / 6)
    assert got["inputs_all"].item() == pytest.approx(0.5) and got["inputs_exists"].item() == 1.0


@pytest.mark.parametrize("args, match", [
    ((torch.zeros(1, 2, 1, L, L), torch.tensor([4, 4]), 0.0), "eps must be in"),
    ((torch.zeros(2, 1, L, L), torch.tensor([4, 4]), 0.1), "weights must be"),
    ((torch.zeros(1, 2, 1, L, L), torch.tensor([4, 1]), 0.1), "0-based trigger >= 2"),
])
def test_sink_fractions_refuse_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        sinks.sink_fractions(*args)


@torch.no_grad()
def test_layer_writes_sum_to_the_models_output_and_their_cosines_equal_a_loop():
    model = Decoder(sinks.run_config("softmax_4x4_s0", PLAN, 0).model)
    for p in model.parameters():  # O(1) weights, so the writes are far from zero
        torch.nn.init.normal_(p, std=0.4)
    batch = TriggerAveraging(dim=sinks.DIM).generate(30, L, seed=6)
    rows = sinks.layer_writes(model, batch.inputs, batch.mask)
    h, writes = batch.inputs, []
    for block in model.layers:  # the residual loop by hand: each write is h_d - h_(d-1)
        nxt = block(h, None)
        writes.append(nxt - h)
        h = nxt
    torch.testing.assert_close(sum(writes), model(batch.inputs), rtol=1e-5, atol=1e-5)
    off = ~batch.mask
    for d, (row, w) in enumerate(zip(rows, writes)):
        others = sum(x for e, x in enumerate(writes) if e != d)[off]
        cos = [float(a @ b / (a.norm() * b.norm())) for a, b in zip(w[off], others)]
        assert row["layer"] == d + 1 and row["cos_others"] == pytest.approx(np.mean(cos), rel=1e-4)
        assert row["write_elsewhere"] == pytest.approx(float(w[off].norm(dim=-1).mean()), rel=1e-4)
        assert row["write_trigger"] == pytest.approx(float(w[batch.mask].norm(dim=-1).mean()), rel=1e-4)
    one = sinks.layer_writes(Decoder(sinks.run_config("relu_1x1_s0", PLAN, 0).model), batch.inputs, batch.mask)
    assert len(one) == 1 and math.isnan(one[0]["cos_others"])


# ------------------------------------------------------------------------------------------- Theorem 3

def test_theorem3_model_solves_the_task_without_any_bos_weight():
    batch = TriggerAveraging(dim=sinks.DIM).generate(500, L, seed=3)
    model = sinks.theorem3_model()
    w = sinks.attention_weights(model, batch.inputs)[0, :, 0].double()  # (rows, L, L)
    j = batch.mask.int().argmax(-1)
    for r in range(0, 500, 7):                       # App. E's weights, by hand
        want = torch.zeros(L, L, dtype=torch.float64)
        want[j[r], 1:j[r]] = 1 / (int(j[r]) + 1 - 2)
        torch.testing.assert_close(w[r], want, rtol=1e-6, atol=0)
    assert float(w[..., 0].max()) == 0.0
    with torch.no_grad():
        assert float((model(batch.inputs) - batch.targets).norm(dim=-1).max()) < sinks.THM3_TOL
    check = sinks.theorem3_check(batch.inputs, batch.targets, batch.mask)
    assert check["linf"] < sinks.THM3_TOL and check["max_bos_weight"] == check["max_weight_off_trigger"] == 0
    assert check["zero_linf"] > 0.3


def test_theorem3_weights_under_softmax_rows_do_not_solve_it():
    """The same weights with softmax rows: every query must spend its mass, so the check can fail."""
    model = sinks.theorem3_model()
    soft = Decoder(sinks.ModelConfig(**{**model.cfg.to_dict(), "rowmap": "softmax"}))
    soft.load_state_dict(model.state_dict())
    batch = TriggerAveraging(dim=sinks.DIM).generate(200, L, seed=4)
    got = sinks.losses(soft, batch.inputs, batch.targets)
    assert got["linf"] > 0.5
    check = pd.DataFrame([{"samples": 200, **got, "max_bos_weight": 0.4, "max_weight_off_trigger": 0.4}])
    assert sinks.theorem3_finding(check).verdict == "check failed"


# ------------------------------------------------------------------------------------------- verdicts

def _maps(run: str, heads: int, layers: int, bos: float) -> pd.DataFrame:
    """Causal maps whose pre-trigger rows put ``bos`` on key 1 (rest spread evenly), query 1 all on BOS."""
    attention, arch, k = sinks._parts(run)
    rows = []
    for layer in range(1, layers + 1):
        for head in range(1, heads + 1):
            for q in range(1, L + 1):
                for key in range(1, L + 1):
                    if key > q:
                        w = 0.0
                    elif q == 1:
                        w = 1.0
                    elif 1 < q < J:
                        w = bos if key == 1 else (1 - bos) / (q - 1)
                    else:
                        w = 0.5 if key == 1 else 0.5 / (q - 1)
                    rows.append((run, attention, arch, k, layer, head, q, key, w, 0.01))
    return pd.DataFrame(rows, columns=["run", "attention", "arch", "seed", "layer", "head", "query", "key", "mean",
                                       "std"])


def _folder(tmp_path, bos: dict[str, float], thm: dict[str, float], met: dict[str, bool] | None = None,
            every_layer: bool = False):
    """Hand-made raw files: every head of a run has BOS mass ``bos[attention_arch]``, and Theorem 1's
    fractions are ``thm[attention_arch]`` on head 1 of layer 1 (of every layer with ``every_layer``), 0 on the
    other heads; Theorem 2's is ``thm[attention_arch]``."""
    io.write_json(tmp_path / "config.json", {"study": "sinks", "budget": "smoke", "model": None, "seed": 0})
    for name in RUNS:
        attention, arch, k = sinks._parts(name)
        key = f"{attention}_{arch}"
        shape = sinks.ARCHS[arch]
        io.write_parquet(tmp_path / "raw" / f"{name}_attention.parquet",
                         _maps(name, shape["heads"], shape["layers"], bos[key]))
        sink = {(d, 1) for d in range(1, shape["layers"] + 1)} if every_layer else {(1, 1)}
        rows = [{"run": name, "attention": attention, "arch": arch, "seed": k, "layer": layer, "head": head,
                 "eps": eps, "positions": thm[key] if (layer, head) in sink else 0.0,
                 "inputs_all": thm[key] if (layer, head) in sink else 0.0, "inputs_exists": thm[key]}
                for eps in sinks.EPS for layer in range(1, shape["layers"] + 1)
                for head in range(1, shape["heads"] + 1)]
        io.write_table(tmp_path / "raw" / f"{name}_sinks", pd.DataFrame(rows))
        io.write_table(tmp_path / "raw" / f"{name}_writes", pd.DataFrame([
            {"run": name, "attention": attention, "arch": arch, "seed": k, "layer": d, "write_trigger": 1.0,
             "write_elsewhere": 0.2, "cos_others": -0.999 if shape["layers"] > 1 else math.nan}
            for d in range(1, shape["layers"] + 1)]))
        ok = True if met is None else met.get(name, True)
        row = {"run": name, "attention": attention, "arch": arch, "seed": k, "cap": 100, "steps": 60 if ok else 100,
               "met_linf": ok, "batch_linf": 0.009 if ok else 0.2, "lr": 1e-3, "train_loss": 1e-6,
               "uniform_loss": 1e-6, "uniform_linf": 0.02, "uniform_zero_loss": 0.1, "uniform_zero_linf": 2.0,
               "fixed_loss": 1e-6, "fixed_linf": 0.02, "fixed_zero_loss": 0.1, "fixed_zero_linf": 2.0}
        io.write_table(tmp_path / "raw" / f"{name}_loss", pd.DataFrame([row]))
        (tmp_path / "runs" / name).mkdir(parents=True)
        pd.DataFrame({"step": [1, 2], "loss": [0.1, 0.01], "linf": [1.0, 0.009]}).to_csv(
            tmp_path / "runs" / name / "train.csv", index=False)
    io.write_table(tmp_path / "raw" / "theorem3", pd.DataFrame([{
        "samples": 10, "loss": 0.0, "linf": 1e-7, "zero_loss": 0.1, "zero_linf": 2.0, "max_bos_weight": 0.0,
        "max_weight_off_trigger": 0.0}]))
    return tmp_path


GOOD_BOS = {"softmax_1x1": 0.97, "relu_1x1": 0.01, "softmax_2x2": 0.95, "relu_2x2": 0.0, "softmax_4x4": 0.6,
            "relu_4x4": 0.02}
GOOD_THM = {"softmax_1x1": 0.99, "relu_1x1": 0.0, "softmax_2x2": 0.97, "relu_2x2": 0.0, "softmax_4x4": 0.95,
            "relu_4x4": 0.0}


def _findings(tmp_path, bos=GOOD_BOS, thm=GOOD_THM, met=None):
    maps, raw_sinks, raw, _, _ = sinks._read(_folder(tmp_path, bos, thm, met), RUNS)
    table = sinks.run_table(raw, raw_sinks)
    heads = sinks.sink_head_table(sinks.bos_table(maps), raw_sinks)
    return [sinks.finding(arch, table, heads).verdict for arch in sinks.ARCHS]


def test_summarize_reproduced_when_the_numbers_say_so(tmp_path):
    section = sinks.summarize(_folder(tmp_path, GOOD_BOS, GOOD_THM))
    assert [f.verdict for f in section.findings] == ["reproduced"] * 3 + ["not reproduced"] * 2 + ["check passed"]
    # the hand-made deep runs sink in their first head of layer 1 only: not in every layer (App. B.2)
    assert "s0 0.97/0.00" in section.findings[3].evidence and "every layer" in section.findings[3].claim
    assert "s0 L2: norm 0.2, cosine -0.999" in section.findings[3].evidence
    assert "inputs with a sink at every 1 < i < j 0.99" in section.findings[0].evidence
    assert "inputs with a sink somewhere 0.95" in section.findings[2].evidence
    for stem in ("table_runs", "table_sinks", "table_theorem3"):
        assert (tmp_path / f"{stem}.csv").is_file() and (tmp_path / f"{stem}.md").is_file()
    for fig in section.figures:
        assert (tmp_path / f"{fig.stem}.png").is_file() and (tmp_path / f"{fig.stem}.svg").is_file()
    heads = pd.read_csv(tmp_path / "table_sinks.csv")
    seeds = PLAN["seeds"]
    assert len(pd.read_csv(tmp_path / "table_writes.csv")) == 2 * (seeds["1x1"] + 2 * seeds["2x2"] + 4 * seeds["4x4"])
    assert len(heads) == 2 * (seeds["1x1"] + 4 * seeds["2x2"] + 16 * seeds["4x4"])
    assert set(heads["thm1_inputs_eps0.1"].dropna()) <= set(GOOD_THM.values()) | {0.0}
    table = pd.read_csv(tmp_path / "table_runs.csv")
    assert len(table) == len(RUNS) and table["learned"].all()
    # no real-model part: the section says how to add one
    assert any("attnlab study sinks --model smollm2" in n for n in section.notes)
    assert not (tmp_path / "table_real_layers.csv").exists()


def test_verdict_not_reproduced_when_relu_sinks_or_softmax_does_not(tmp_path):
    assert _findings(tmp_path / "a", bos={**GOOD_BOS, "relu_2x2": 0.4}) == ["reproduced", "not reproduced",
                                                                           "reproduced"]
    assert _findings(tmp_path / "b", thm={**GOOD_THM, "softmax_1x1": 0.85}) == ["not reproduced", "reproduced",
                                                                               "reproduced"]
    # a multi-layer softmax model without Theorem 2's sink on enough inputs
    assert _findings(tmp_path / "c", thm={**GOOD_THM, "softmax_4x4": 0.5}) == ["reproduced", "reproduced",
                                                                              "not reproduced"]


def test_verdict_not_checked_when_a_run_did_not_meet_the_linf_rule(tmp_path):
    slow = {"softmax_2x2_s1": False}
    assert _findings(tmp_path, met=slow) == ["reproduced", "not checked", "reproduced"]
    maps, raw_sinks, raw, _, _ = sinks._read(tmp_path, RUNS)
    finding = sinks.finding("2x2", sinks.run_table(raw, raw_sinks),
                            sinks.sink_head_table(sinks.bos_table(maps), raw_sinks))
    assert finding.evidence.startswith("softmax_2x2_s1 did not reach App. A's l-inf < 0.01")
    assert "cap 100 hit, batch l-inf 0.2" in finding.evidence


def test_layer_verdict_asks_a_sink_head_in_every_layer_of_every_softmax_seed(tmp_path):
    def verdicts(folder, **kw):
        maps, raw_sinks, raw, writes, _ = sinks._read(_folder(folder, GOOD_BOS, GOOD_THM, **kw), RUNS)
        table = sinks.run_table(raw, raw_sinks)
        heads = sinks.sink_head_table(sinks.bos_table(maps), raw_sinks)
        return [sinks.layer_finding(arch, table, heads, writes) for arch in ("2x2", "4x4")]

    found = verdicts(tmp_path / "a", every_layer=True)
    assert [f.verdict for f in found] == ["reproduced"] * 2
    assert found[1].evidence.startswith("Largest head's fraction") and "s0 0.95/0.95/0.95/0.95" in found[1].evidence
    assert [f.verdict for f in verdicts(tmp_path / "b", every_layer=True, met={"softmax_4x4_s0": False})] == [
        "reproduced", "not checked"]
    # a ReLU run that did not learn does not bear on the softmax claim
    assert [f.verdict for f in verdicts(tmp_path / "c", every_layer=True, met={"relu_2x2_s0": False})] == [
        "reproduced"] * 2


def test_theorem3_check_fails_on_any_bos_weight():
    check = {"samples": 10, "loss": 0.0, "linf": 1e-7, "zero_loss": 0.1, "zero_linf": 2.0, "max_bos_weight": 0.0,
             "max_weight_off_trigger": 0.0}
    assert sinks.theorem3_finding(pd.DataFrame([check])).verdict == "check passed"
    assert sinks.theorem3_finding(pd.DataFrame([{**check, "max_bos_weight": 1e-3}])).verdict == "check failed"
    assert sinks.theorem3_finding(pd.DataFrame([{**check, "linf": 1e-3}])).verdict == "check failed"


def test_summarize_names_missing_pieces(tmp_path):
    folder = _folder(tmp_path, GOOD_BOS, GOOD_THM)
    (folder / "raw" / "relu_4x4_s0_loss.csv").unlink()
    (folder / "raw" / "theorem3.csv").unlink()
    with pytest.raises(StudyError, match="relu_4x4_s0, theorem3"):
        sinks.summarize(folder)


# ------------------------------------------------------------------------------------------- runs

def test_attention_maps_are_softmax_rows_and_losses_score_zero():
    model = Decoder(sinks.run_config("softmax_2x2_s0", PLAN, 0).model)
    batch = TriggerAveraging(trigger=J).generate(32, L, seed=0)
    mean, std = sinks.attention_maps(model, batch.inputs)
    assert mean.shape == std.shape == (2, 2, L, L)
    assert torch.allclose(mean.sum(-1), torch.ones(2, 2, L))
    assert torch.all(mean.triu(1) == 0)
    scores = sinks.losses(model, batch.inputs, batch.targets)
    # the zero predictor's loss: the target's squared norm at the trigger, averaged over L positions
    expected = float(batch.targets.pow(2).sum(-1).sum(-1).mean() / L)
    assert scores["zero_loss"] == pytest.approx(expected)


@pytest.mark.parametrize("budget", sorted(sinks.BUDGETS))
def test_every_budgets_runs_build_and_take_a_batch_without_training(budget):
    plan = sinks.BUDGETS[budget]
    names = sinks.runs(plan)
    assert len(names) == 2 * sum(plan["seeds"].values()) and {sinks._parts(r)[1] for r in names} == set(sinks.ARCHS)
    batch = TriggerAveraging(dim=sinks.DIM).generate(2, sinks.LENGTH, seed=0)
    seeds = {}
    for name in names:
        attention, arch, k = sinks._parts(name)
        cfg = sinks.run_config(name, plan, 7)
        shape = sinks.ARCHS[arch]
        assert cfg.train.steps == plan["cap"][arch] and cfg.train.seed == 7 + k and cfg.train.lr == plan["lr"][arch]
        assert (cfg.model.layers, cfg.model.heads) == (shape["layers"], shape["heads"])
        assert cfg.model.readout == ("writes" if arch != "1x1" else "stream")
        seeds.setdefault((attention, arch), set()).add(cfg.train.seed)
        with torch.no_grad():
            out = Decoder(cfg.model)(batch.inputs)
        assert out.shape == batch.inputs.shape, (budget, name)
    assert all(len(s) == plan["seeds"][arch] for (_, arch), s in seeds.items())


def test_run_end_to_end_and_resume_without_retraining(tmp_path, monkeypatch):
    tiny = {"seeds": {"1x1": 2, "2x2": 1, "4x4": 1}, "cap": {"1x1": 6, "2x2": 4, "4x4": 3},
            "lr": dict.fromkeys(sinks.ARCHS, 1e-3), "batch": 8,
            "samples": 20}
    monkeypatch.setitem(sinks.BUDGETS, "smoke", tiny)
    section = run(StudyConfig(study="sinks", budget="smoke", seed=0), tmp_path)
    assert section.study == "sinks" and len(section.findings) == 6
    # six steps cannot reach l-inf < 1e-2: no verdict on a run that did not learn
    assert [f.verdict for f in section.findings] == ["not checked"] * 5 + ["check passed"]
    assert json.loads((tmp_path / "section.json").read_text())["study"] == "sinks"
    table = pd.read_csv(tmp_path / "table_runs.csv")
    assert table["seed"].tolist() == [0, 1, 0, 1, 0, 0, 0, 0] and not table["met_linf"].any()
    assert (table["steps"] == table["cap"]).all()

    kept = tmp_path / "raw" / "softmax_1x1_s0_loss.csv"
    before = kept.stat().st_mtime_ns
    (tmp_path / "raw" / "relu_2x2_s0_loss.csv").unlink()
    os.utime(kept, ns=(before, before))
    sinks.compute(StudyConfig(study="sinks", budget="smoke", seed=0), tmp_path, progress=False)
    assert kept.stat().st_mtime_ns == before                                   # finished piece skipped
    assert (tmp_path / "raw" / "relu_2x2_s0_loss.csv").is_file()                # missing piece rewritten
    records = [json.loads(x) for x in (tmp_path / "runs" / "relu_2x2_s0" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4]  # resumed, not retrained
    assert all(np.isfinite(r["val_linf"]) for r in records if r["kind"] == "eval")


def test_a_run_stops_at_the_linf_rule_and_its_resume_trains_no_further(tmp_path, monkeypatch):
    """ReLU 1x1 at a loose target stops early; rerunning its piece after losing the outputs retrains nothing."""
    monkeypatch.setattr(sinks, "LINF_TARGET", 1.0)
    plan = {"seeds": {"1x1": 1}, "cap": {"1x1": 3000}, "lr": {"1x1": 1e-2}, "batch": 32, "samples": 50}
    sinks.run_piece("relu_1x1_s0", plan, 0, tmp_path, progress=False)
    row = pd.read_csv(tmp_path / "raw" / "relu_1x1_s0_loss.csv").iloc[0]
    assert row["met_linf"] and row["steps"] < 3000 and row["batch_linf"] < 1.0
    train = pd.read_csv(tmp_path / "runs" / "relu_1x1_s0" / "train.csv")
    assert len(train) == row["steps"] and (train["linf"] >= 1.0).all()  # every earlier batch was above it
    (tmp_path / "raw" / "relu_1x1_s0_loss.csv").unlink()
    sinks.run_piece("relu_1x1_s0", plan, 0, tmp_path, progress=False)
    assert len(pd.read_csv(tmp_path / "runs" / "relu_1x1_s0" / "train.csv")) == row["steps"]


@pytest.mark.slow
def test_smoke_1x1_runs_reach_the_linf_rule_and_reproduce_theorem_1(tmp_path):
    """The smoke budget's 1x1 runs at seed 0, trained for real (about 15 s on one thread)."""
    for name in ("softmax_1x1_s0", "relu_1x1_s0"):
        sinks.run_piece(name, PLAN, 0, tmp_path, progress=False)
    loss = pd.concat([pd.read_csv(tmp_path / "raw" / f"{n}_loss.csv") for n in ("softmax_1x1_s0", "relu_1x1_s0")])
    assert loss["met_linf"].all()
    raw_sinks = pd.concat([pd.read_csv(tmp_path / "raw" / f"{n}_sinks.csv") for n in ("softmax_1x1_s0",
                                                                                       "relu_1x1_s0")])
    maps = pd.concat([pd.read_parquet(tmp_path / "raw" / f"{n}_attention.parquet") for n in ("softmax_1x1_s0",
                                                                                              "relu_1x1_s0")])
    table = sinks.run_table(loss, raw_sinks)
    assert sinks.finding("1x1", table, sinks.sink_head_table(sinks.bos_table(maps), raw_sinks)).verdict == "reproduced"


# ------------------------------------------------------------------------------------- real-model part

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random 2-layer Llama (4 query / 2 KV heads) whose word tokenizer adds BOS, loaded eager."""
    from attnlab.commands.runs import load

    from checkpoints import save_checkpoint

    folder = save_checkpoint(tmp_path_factory.mktemp("ckpt"))
    return (folder, *load(str(folder)))


def test_first_token_mass_matches_the_eager_attentions(tiny):
    _, model, tok = tiny
    docs = sinks.documents(tok, 2, 40, seed=0)
    assert all(ids[0] == tok.bos_token_id for ids in docs)
    got = sinks.first_token_mass(model, docs, min_query=8)
    assert len(got) == 2 * 2 * 4 and (got["queries"] == 40 - 8).all()
    with torch.no_grad():
        for d, ids in enumerate(docs):
            attentions = model(torch.tensor([ids]), output_attentions=True).attentions
            for layer, a in enumerate(attentions):
                for head in range(4):
                    row = got[(got["document"] == d) & (got["layer"] == layer) & (got["head"] == head)]
                    assert row["mass"].item() == pytest.approx(a[0, head, 8:, 0].double().mean().item(), abs=1e-6)
                    assert row["uniform"].item() == pytest.approx(np.mean(1 / np.arange(9, 41)), rel=1e-12)


def test_first_token_mass_leaves_out_queries_that_cannot_see_key_0():
    from attnlab.site import ScoreBlock

    # 6 queries (positions 0..5), a window of 3 keys: key 0 is hidden from positions 3..5
    pos = torch.arange(6)
    allowed = ((pos[None, :] <= pos[:, None]) & (pos[None, :] > pos[:, None] - 3))[None, None]
    scores = torch.zeros(1, 2, 6, 6).masked_fill(~allowed, torch.finfo(torch.float32).min)
    mass, uniform, count = sinks.first_key_sums(ScoreBlock(0, scores, allowed, 0, 6), min_query=1)
    assert count.tolist() == [2.0, 2.0]                                       # positions 1 and 2 only
    assert mass.tolist() == pytest.approx([1 / 2 + 1 / 3] * 2) and uniform.tolist() == mass.tolist()


def _real(folder, median_mass: float, layers: int = 6, heads: int = 4, documents: int = 2):
    """Hand-made real-model files: in every layer after the first two, the heads' masses spread around
    ``median_mass``; layers 0 and 1 put 0.01 on key 0."""
    rows = []
    for d in range(documents):
        for layer in range(layers):
            for head in range(heads):
                mass = 0.01 if layer < sinks.SKIP_LAYERS else min(1.0, median_mass * (0.5 + head / (heads - 1)))
                rows.append((d, layer, head, 248, mass, 0.014))
    io.write_parquet(folder / "real" / sinks.REAL_TABLE,
                     pd.DataFrame(rows, columns=["document", "layer", "head", "queries", "mass", "uniform"]))
    io.write_json(folder / "real" / "config.json", {
        "model": "hand-made", "checkpoint": "/nowhere", "model_type": "llama", "layers": layers, "heads": heads,
        "documents": documents, "tokens": 256, "min_query": 8, "seed": 0, "device": "cpu", "dtype": "float32",
        "adds_bos": False, "first_tokens": ["The"], "seconds": 1.0})
    return folder


def test_real_verdict_follows_the_median_head(tmp_path):
    sinking = sinks.summarize(_real(_folder(tmp_path / "a", GOOD_BOS, GOOD_THM), median_mass=0.6))
    assert len(sinking.findings) == 7 and sinking.findings[6].verdict == "reproduced"
    assert "4 of 4 layers after the first 2 reach 0.3" in sinking.findings[6].evidence
    assert "L2 0.60" in sinking.findings[6].evidence and "first text token (The)" in sinking.findings[6].claim
    table = pd.read_csv(tmp_path / "a" / "table_real_layers.csv")
    assert table["median"].tolist() == pytest.approx([0.01, 0.01] + [0.6] * 4)
    assert table["sink_heads"].tolist() == [0, 0, 4, 4, 4, 4]
    for ext in ("png", "svg"):
        assert (tmp_path / "a" / f"real_first_token_mass.{ext}").is_file()
    assert "real_first_token_mass" in [f.stem for f in sinking.figures]

    spread = _real(tmp_path / "b", median_mass=0.02)
    finding, *_ = sinks.summarize_real(spread)
    assert finding.verdict == "not reproduced" and "0 of 4 layers" in finding.evidence
    shallow = _real(tmp_path / "c", median_mass=0.9, layers=2)
    assert sinks.summarize_real(shallow)[0].verdict == "not checked"


def test_summarize_names_a_missing_real_part(tmp_path):
    folder = _folder(tmp_path, GOOD_BOS, GOOD_THM)
    io.write_json(folder / "config.json", {"study": "sinks", "budget": "smoke", "model": "smollm2", "seed": 0})
    with pytest.raises(StudyError, match="lacks the real-model results on smollm2"):
        sinks.summarize(folder)


def test_real_compute_writes_config_last_and_resumes(tiny, tmp_path, monkeypatch):
    folder, _, _ = tiny
    monkeypatch.setitem(sinks.REAL_PLANS, "smoke", {"documents": 2, "tokens": 24})
    cfg = StudyConfig(study="sinks", model=str(folder))
    sinks.compute_real(cfg, tmp_path, progress=False)
    raw = pd.read_parquet(tmp_path / "real" / sinks.REAL_TABLE)
    config = json.loads((tmp_path / "real" / "config.json").read_text())
    assert len(raw) == 2 * 2 * 4 and raw["mass"].between(0, 1).all()
    assert config["adds_bos"] and config["first_tokens"] == ["<s>"] and config["tokens"] == 24
    before = (tmp_path / "real" / sinks.REAL_TABLE).stat().st_mtime_ns
    sinks.compute_real(cfg, tmp_path, progress=False)
    assert (tmp_path / "real" / sinks.REAL_TABLE).stat().st_mtime_ns == before


def test_real_compute_bad_model_is_one_line_study_error(tmp_path):
    with pytest.raises(StudyError, match="--model /no/such/model: .*neither a path nor a known model name"):
        sinks.compute_real(StudyConfig(study="sinks", model="/no/such/model"), tmp_path, progress=False)
    assert not (tmp_path / "real").exists()


@pytest.mark.real
def test_smollm2_first_token_mass_invariants(real_models):
    model, tok = real_models("smollm2")
    docs = sinks.documents(tok, 2, 48, seed=0)
    got = sinks.first_token_mass(model, docs)
    assert len(got) == 2 * 30 * 9 and got["mass"].between(0, 1).all()
    assert (got["queries"] == 48 - sinks.MIN_QUERY).all()
    assert (sinks.head_table(got)["mass"] > got["uniform"].max()).any()


