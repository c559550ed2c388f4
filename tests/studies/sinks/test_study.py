"""Sinks study (Attention Sinks Essential): Theorem 1-2's per-input and per-position sink fractions equal a loop's,
the BOS-masked forward equals the model's own unmasked and a direct masked softmax masked, Theorem 3's construction
and its softmax counterpart behave as built, each null control fails its rule and each rule fires <= 5% under its
null, verdicts follow the files, every budget's runs build, a run resumes (and gains new files) without retraining,
and the real model's mass equals eager attention's."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import io
from attnlab.findings.verdict import FPR_MAX, false_positive_rate
from attnlab.model import Decoder, ModelConfig
from attnlab.studies import StudyConfig, StudyError, run
from attnlab.studies.sinks import findings as sinks_findings
from attnlab.studies.sinks import measures as sinks_measures
from attnlab.studies.sinks import real as sinks_real
from attnlab.studies.sinks import study as sinks
from attnlab.tasks.vectors import TriggerAveraging

L, J = sinks_measures.LENGTH, sinks_measures.TRIGGER
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
    w[..., 0] = torch.where(
        torch.rand(layers, rows, heads, L, generator=g) < 0.85,
        1 - torch.rand(layers, rows, heads, L, generator=g) * 0.012,
        w[..., 0],
    )
    triggers = torch.randint(2, L, (rows,), generator=g)
    got = sinks_measures.sink_fractions(w, triggers, eps)
    positions, inputs_all, exists = _fractions_by_loop(w, triggers, eps)
    np.testing.assert_allclose(got["positions"].numpy(), positions, rtol=1e-12)
    np.testing.assert_allclose(got["inputs_all"].numpy(), inputs_all, rtol=1e-12)
    assert float(got["inputs_exists"]) == pytest.approx(exists, rel=1e-12)
    assert 0 < inputs_all.min() and positions.max() < 1  # the case is not degenerate


def test_sink_fractions_ignore_bos_query_trigger_and_later_rows():
    w = torch.zeros(1, 2, 1, L, L)
    w[..., 0, 0] = 1.0  # query 1 (BOS itself) always on key 1: left out
    w[0, 0, 0, 1:4, 0] = 1.0  # row 0, trigger j = 5 (0-based 4): queries 2..4 sink, the only ones counted
    w[0, 1, 0, 1:3, 0] = 1.0  # row 1, trigger j = 5: query 4 (0-based 3) does not sink
    w[0, 1, 0, 4:, 0] = 1.0  # ... but the trigger and later rows do: not counted
    got = sinks_measures.sink_fractions(w, torch.tensor([4, 4]), 0.1)
    assert got["positions"].item() == pytest.approx(5 / 6)
    assert got["inputs_all"].item() == pytest.approx(0.5) and got["inputs_exists"].item() == 1.0


@pytest.mark.parametrize(
    "args, match",
    [
        ((torch.zeros(1, 2, 1, L, L), torch.tensor([4, 4]), 0.0), "eps must be in"),
        ((torch.zeros(2, 1, L, L), torch.tensor([4, 4]), 0.1), "weights must be"),
        ((torch.zeros(1, 2, 1, L, L), torch.tensor([4, 1]), 0.1), "0-based trigger >= 2"),
    ],
)
def test_sink_fractions_refuse_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        sinks_measures.sink_fractions(*args)


@torch.no_grad()
def test_layer_writes_sum_to_the_models_output_and_their_cosines_equal_a_loop():
    model = Decoder(sinks.run_config("softmax_4x4_s0", PLAN, 0).model)
    for p in model.parameters():  # O(1) weights, so the writes are far from zero
        torch.nn.init.normal_(p, std=0.4)
    batch = TriggerAveraging(dim=sinks_measures.DIM).generate(30, L, seed=6)
    rows = sinks_measures.layer_writes(model, batch.inputs, batch.mask)
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
    one = sinks_measures.layer_writes(Decoder(sinks.run_config("relu_1x1_s0", PLAN, 0).model), batch.inputs, batch.mask)
    assert len(one) == 1 and math.isnan(one[0]["cos_others"])


# ------------------------------------------------------------------------------------------- Theorem 3


def test_theorem3_model_solves_the_task_without_any_bos_weight():
    batch = TriggerAveraging(dim=sinks_measures.DIM).generate(500, L, seed=3)
    model = sinks_measures.theorem3_model()
    w = sinks_measures.attention_weights(model, batch.inputs)[0, :, 0].double()  # (rows, L, L)
    j = batch.mask.int().argmax(-1)
    for r in range(0, 500, 7):  # App. E's weights, by hand
        want = torch.zeros(L, L, dtype=torch.float64)
        want[j[r], 1 : j[r]] = 1 / (int(j[r]) + 1 - 2)
        torch.testing.assert_close(w[r], want, rtol=1e-6, atol=0)
    assert float(w[..., 0].max()) == 0.0
    with torch.no_grad():
        assert float((model(batch.inputs) - batch.targets).norm(dim=-1).max()) < sinks_findings.THM3_TOL
    check = sinks.theorem3_check(batch.inputs, batch.targets, batch.mask)
    assert check["linf"] < sinks_findings.THM3_TOL and check["max_bos_weight"] == check["max_weight_off_trigger"] == 0
    assert check["zero_linf"] > 0.3


def test_theorem3_weights_under_softmax_rows_do_not_solve_it():
    """The same weights with softmax rows: every query must spend its mass, so the check can fail."""
    model = sinks_measures.theorem3_model()
    soft = Decoder(ModelConfig(**{**model.cfg.to_dict(), "rowmap": "softmax"}))
    soft.load_state_dict(model.state_dict())
    batch = TriggerAveraging(dim=sinks_measures.DIM).generate(200, L, seed=4)
    got = sinks_measures.losses(soft, batch.inputs, batch.targets)
    assert got["linf"] > 0.5
    check = pd.DataFrame([{"samples": 200, **got, "max_bos_weight": 0.4, "max_weight_off_trigger": 0.4}])
    assert sinks_findings.theorem3_finding(check).verdict == "check failed"


# ------------------------------------------------------------------------------------------- BOS masking


def _scaled(run: str, std: float = 0.2) -> Decoder:
    """The run's model with O(std) weights, so that every layer's rows and writes are far from uniform and zero."""
    model = sinks_measures.untrained(sinks.run_config(run, PLAN, 0))
    g = torch.Generator().manual_seed(len(run))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return model


@pytest.mark.parametrize(
    "run", ["softmax_1x1_s0", "relu_1x1_s0", "softmax_2x2_s0", "relu_2x2_s0", "softmax_4x4_s0", "relu_4x4_s0"]
)
def test_forward_equals_the_models_own_and_masks_bos_as_a_direct_computation(run):
    model = _scaled(run)
    batch = TriggerAveraging(dim=sinks_measures.DIM).generate(40, L, seed=5)
    with torch.no_grad():
        torch.testing.assert_close(
            sinks_measures.forward(model, batch.inputs), model(batch.inputs), rtol=1e-5, atol=1e-5
        )
    # the masked forward by hand: scores with key 1 removed from every query i > 1, per layer and head
    cfg, x = model.cfg, batch.inputs
    hd = cfg.head_dim
    for block in model.layers:
        a, outs = block.attn, []
        for h in range(cfg.heads):
            part = slice(h * hd, (h + 1) * hd)
            q, k, v = (p.weight[part] @ x.transpose(1, 2) for p in (a.q_proj, a.k_proj, a.v_proj))
            s = (q.transpose(1, 2) @ k).double() / math.sqrt(hd)
            w = torch.zeros_like(s)
            for i in range(L):
                keys = [0] if i == 0 else list(range(1, i + 1))
                if cfg.rowmap == "softmax":
                    w[:, i, keys] = torch.softmax(s[:, i, keys], -1)
                else:
                    w[:, i, keys] = torch.relu(s[:, i, keys]) / max(i + 1 - 2, 1)
            outs.append(w.float() @ v.transpose(1, 2))
        out = torch.cat(outs, -1) @ a.o_proj.weight.T
        x = x + out if cfg.residual else out
    want = x - batch.inputs if cfg.readout == "writes" else x
    torch.testing.assert_close(
        sinks_measures.forward(model, batch.inputs, mask_bos=True), want.detach(), rtol=1e-4, atol=1e-5
    )


def test_without_bos_keeps_query_1_and_renormalizes_only_softmax_rows():
    w = torch.rand(3, L, L).tril()
    soft = w / w.sum(-1, keepdim=True)
    got = sinks_measures.without_bos(soft, "softmax")
    assert torch.all(got[:, 1:, 0] == 0) and torch.equal(got[:, 0], soft[:, 0])
    torch.testing.assert_close(got[:, 1:].sum(-1), torch.ones(3, L - 1))
    relu = sinks_measures.without_bos(w, "reluattn")
    assert torch.all(relu[:, 1:, 0] == 0) and torch.equal(relu[:, :, 1:], w[:, :, 1:])
    with pytest.raises(ValueError, match="reluattn rows, got 'sparsemax'"):
        sinks_measures.forward(
            Decoder(ModelConfig(**{**_scaled("relu_1x1_s0").cfg.to_dict(), "rowmap": "sparsemax"})),
            torch.zeros(1, L, sinks_measures.DIM),
        )


def test_the_softmax_sink_model_needs_its_sink_and_theorem3s_relu_model_does_not():
    """The masking rule's positive control and its null (the other arm): two models built by hand."""
    batch = TriggerAveraging(dim=sinks_measures.DIM).generate(300, L, seed=8)
    sink = sinks_measures.masking(sinks_measures.sink_model(), batch.inputs, batch.targets)
    relu = sinks_measures.masking(sinks_measures.theorem3_model(), batch.inputs, batch.targets)
    assert sink["linf"] < 1e-5 and relu["linf"] < 1e-5  # both solve the task
    w = sinks_measures.attention_weights(sinks_measures.sink_model(), batch.inputs)
    fractions = sinks_measures.sink_fractions(w, batch.mask.int().argmax(-1), sinks_measures.EPS_VERDICT)
    assert fractions["inputs_all"].item() == 1.0  # the softmax one sinks, Theorem 1's way
    assert sink["masked_loss"] > 5 * sink["zero_loss"]
    assert sinks_findings.needs_sink([sink["masked_loss"] - sink["loss"]], [sink["zero_loss"]])
    assert not sinks_findings.sink_free([sink["masked_loss"] - sink["loss"]], [sink["zero_loss"]])
    assert relu["masked_loss"] == relu["loss"]  # no weight on BOS: masking changes nothing
    assert not sinks_findings.needs_sink([relu["masked_loss"] - relu["loss"]], [relu["zero_loss"]])
    assert sinks_findings.sink_free([relu["masked_loss"] - relu["loss"]], [relu["zero_loss"]])


def _positions_by_loop(w, triggers, eps):
    frac, count = np.full(L, np.nan), np.zeros(L, dtype=int)
    for i in range(L):
        rows = [r for r in range(w.shape[1]) if 1 <= i < int(triggers[r])]
        count[i] = len(rows)
        if rows:
            frac[i] = np.mean([bool((w[:, r, :, i, 0] >= 1 - eps).any()) for r in rows])
    return frac, count


def test_position_fractions_equal_a_loop():
    g = torch.Generator().manual_seed(1)
    w = torch.rand(2, 60, 3, L, L, generator=g)
    w[..., 0] = torch.where(torch.rand(2, 60, 3, L, generator=g) < 0.4, 0.95, 0.5)
    triggers = torch.randint(2, L, (60,), generator=g)
    frac, count = sinks_measures.position_fractions(w, triggers, 0.1)
    want, n = _positions_by_loop(w, triggers, 0.1)
    np.testing.assert_array_equal(count, n)
    np.testing.assert_allclose(frac, want, rtol=1e-12)
    assert np.isnan(frac[0]) and np.isnan(frac[-1]) and 0 < np.nanmin(frac) < 1


# ------------------------------------------------------------------------------------------- null controls


def _null_stats(run: str, seed: int, samples: int = 200) -> dict[str, float]:
    """The statistics each rule reads, measured as compute measures them, on the untrained model of ``run`` at
    ``seed`` (the sink findings' null), on held-out inputs drawn from ``seed``."""
    cfg = sinks.run_config(run, PLAN, seed)
    model = sinks_measures.untrained(cfg)
    batch = TriggerAveraging(dim=sinks_measures.DIM).generate(samples, L, seed=seed)
    ids = {"run": run, "attention": "softmax", "arch": sinks._parts(run)[1], "seed": seed}
    rows, positions = sinks._sink_rows(model, batch, ids)
    rows, positions = pd.DataFrame(rows), pd.DataFrame([{**p, "model": "untrained"} for p in positions])
    fixed = TriggerAveraging(dim=sinks_measures.DIM, trigger=J).generate(samples, L, seed=seed + 1)
    bos = sinks_measures.attention_maps(model, fixed.inputs)[0][..., 1 : J - 1, 0].mean(-1).max()
    got = sinks_measures.masking(model, batch.inputs, batch.targets)
    return {
        "best_head": float(sinks_findings.best_head(rows).item()),
        "every_layer": float(sinks_findings.every_layer(rows).item()),
        "every_position": float(sinks_findings.every_position(positions, "untrained").item()),
        "bos_mass": float(bos),
        "rise": got["masked_loss"] - got["loss"],
        "zero_loss": got["zero_loss"],
    }


@pytest.mark.parametrize("arch", list(sinks_measures.ARCHS))
def test_untrained_null_controls_fail_every_softmax_rule(arch):
    stats = [_null_stats(f"softmax_{arch}_s0", seed) for seed in range(2)]
    for stat in ("best_head", "every_layer", "every_position"):
        assert not sinks_findings.sinks_everywhere([s[stat] for s in stats]), stat
    assert not sinks_findings.needs_sink([s["rise"] for s in stats], [s["zero_loss"] for s in stats])
    # an untrained softmax head spreads its row: BOS mass about the uniform share, far above ReLU's bound
    assert all(s["bos_mass"] > 0.2 for s in stats) and not sinks_findings.no_sink([s["bos_mass"] for s in stats])


def test_uniform_attention_fails_the_real_model_rule():
    from attnlab.site import ScoreBlock

    t = 64
    allowed = torch.ones(t, t, dtype=torch.bool).tril()[None, None]
    scores = torch.zeros(1, 3, t, t)
    mass, uniform, count = sinks_real.first_key_sums(ScoreBlock(0, scores, allowed, 0, t), sinks_real.MIN_QUERY)
    torch.testing.assert_close(mass, uniform)
    assert not sinks_real.real_sinks((mass / count).numpy().repeat(5))


# ------------------------------------------------------------------------------- false-positive rates


def _seeds(budget: str, arch: str) -> int:
    return sinks.BUDGETS[budget].seeds[arch]


@pytest.mark.parametrize("arch, stat", [("1x1", "best_head"), ("2x2", "every_position"), ("4x4", "every_layer")])
def test_sink_rules_fire_at_most_5pc_on_untrained_models(arch, stat):
    """Each sink rule on the smoke budget's seed count, every seed an untrained model at a random seed."""

    def draw(rng):
        return [
            _null_stats(f"softmax_{arch}_s0", int(rng.integers(1 << 30)), samples=100)[stat]
            for _ in range(_seeds("smoke", arch))
        ]

    assert false_positive_rate(sinks_findings.sinks_everywhere, draw, trials=40, seed=1) <= FPR_MAX


def test_relu_rule_fires_at_most_5pc_on_softmax_rows():
    """The ReLU half's rule on untrained softmax models (rows that must sum to 1) at random seeds."""

    def draw(rng):
        return [
            _null_stats("softmax_2x2_s0", int(rng.integers(1 << 30)), samples=50)["bos_mass"]
            for _ in range(_seeds("smoke", "2x2"))
        ]

    assert false_positive_rate(sinks_findings.no_sink, draw, trials=40, seed=2) <= FPR_MAX


def test_masking_rules_fire_at_most_5pc_under_their_nulls():
    """needs_sink on models that solve the task without a sink (Theorem 3's ReLU model, its weights jittered) beside
    an untrained model of a random run and seed; sink_free on the hand-built softmax model with a sink of random
    strength c and jitter."""
    batch = TriggerAveraging(dim=sinks_measures.DIM).generate(200, L, seed=9)

    def jitter(model, rng, sd):
        g = torch.Generator().manual_seed(int(rng.integers(1 << 30)))
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=g) * sd)
        return model

    def rise(model):
        got = sinks_measures.masking(model, batch.inputs, batch.targets)
        return got["masked_loss"] - got["loss"], got["zero_loss"]

    def no_need(rng):
        pairs = [rise(jitter(sinks_measures.theorem3_model(), rng, rng.uniform(0, 0.05))) for _ in range(2)]
        run_ = str(rng.choice(RUNS))
        pairs.append(rise(sinks_measures.untrained(sinks.run_config(run_, PLAN, int(rng.integers(1 << 30))))))
        return pairs

    def need(rng):
        return [
            rise(jitter(sinks_measures.sink_model(rng.uniform(3, 20)), rng, rng.uniform(0, 0.05))) for _ in range(2)
        ]

    assert false_positive_rate(lambda p: sinks_findings.needs_sink(*zip(*p)), no_need, trials=60, seed=3) <= FPR_MAX
    assert false_positive_rate(lambda p: sinks_findings.sink_free(*zip(*p)), need, trials=60, seed=4) <= FPR_MAX


def test_real_rule_fires_at_most_5pc_on_iid_scores():
    """The real-model rule on layers of heads whose score rows are i.i.d. N(0, sigma^2) (no preference for key 0),
    sigma up to 3, documents of 64-256 tokens."""

    def draw(rng):
        t, sigma = int(rng.integers(64, 257)), rng.uniform(0.1, 3.0)
        z = rng.normal(0, sigma, (10, 4, t, t))  # 10 layers after the skipped ones, 4 heads
        z = np.where(np.tril(np.ones((t, t), dtype=bool)), z, -np.inf)
        w = np.exp(z - z.max(-1, keepdims=True))
        w0 = (w[..., 0] / w.sum(-1))[..., sinks_real.MIN_QUERY :].mean(-1)  # (layers, heads)
        return np.median(w0, axis=1)

    assert false_positive_rate(sinks_real.real_sinks, draw, trials=200, seed=5) <= FPR_MAX


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
    return pd.DataFrame(
        rows, columns=["run", "attention", "arch", "seed", "layer", "head", "query", "key", "mean", "std"]
    )


def _folder(
    tmp_path,
    bos: dict[str, float],
    thm: dict[str, float],
    met: dict[str, bool] | None = None,
    every_layer: bool = False,
    masked: dict[str, float] | None = None,
    untrained: dict[str, float] | None = None,
    untrained_masked: float = 0.10001,
):
    """Hand-made raw files: every head of a run has BOS mass ``bos[attention_arch]``, and Theorem 1's
    fractions are ``thm[attention_arch]`` on head 1 of layer 1 (of every layer with ``every_layer``), 0 on the
    other heads; Theorem 2's, per input and at every position, is ``thm[attention_arch]``. The untrained
    models' fractions are ``untrained[attention_arch]`` (0 by default). Loss 1e-6, all-zeros loss 0.1, and
    with BOS masked ``masked[attention_arch]`` (GOOD_MASKED by default); the untrained models' 0.1 ->
    ``untrained_masked``."""
    masked = GOOD_MASKED if masked is None else masked
    untrained = untrained or {}
    io.write_json(tmp_path / "config.json", {"study": "sinks", "budget": "smoke", "model": None, "seed": 0})
    for name in RUNS:
        attention, arch, k = sinks._parts(name)
        key = f"{attention}_{arch}"
        shape = sinks_measures.ARCHS[arch]
        ids = {"run": name, "attention": attention, "arch": arch, "seed": k}
        io.write_parquet(
            tmp_path / "raw" / f"{name}_attention.parquet", _maps(name, shape["heads"], shape["layers"], bos[key])
        )
        sink = {(d, 1) for d in range(1, shape["layers"] + 1)} if every_layer else {(1, 1)}
        for kind, value in (("sinks", thm[key]), ("untrained_sinks", untrained.get(key, 0.0))):
            rows = [
                {
                    **ids,
                    "layer": layer,
                    "head": head,
                    "eps": eps,
                    "positions": value if (layer, head) in sink else 0.0,
                    "inputs_all": value if (layer, head) in sink else 0.0,
                    "inputs_exists": value,
                }
                for eps in sinks_measures.EPS
                for layer in range(1, shape["layers"] + 1)
                for head in range(1, shape["heads"] + 1)
            ]
            io.write_table(tmp_path / "raw" / f"{name}_{kind}", pd.DataFrame(rows))
        io.write_table(
            tmp_path / "raw" / f"{name}_positions",
            pd.DataFrame(
                [
                    {**ids, "eps": eps, "position": i, "fraction": value, "inputs": 100, "model": model}
                    for model, value in (("trained", thm[key]), ("untrained", untrained.get(key, 0.0)))
                    for eps in sinks_measures.EPS
                    for i in range(2, L)
                ]
            ),
        )
        io.write_table(
            tmp_path / "raw" / f"{name}_masking",
            pd.DataFrame(
                [
                    {
                        **ids,
                        "model": "trained",
                        "loss": 1e-6,
                        "masked_loss": masked[key],
                        "linf": 0.02,
                        "masked_linf": 3.0,
                        "zero_loss": 0.1,
                    },
                    {
                        **ids,
                        "model": "untrained",
                        "loss": 0.1,
                        "masked_loss": untrained_masked,
                        "linf": 2.0,
                        "masked_linf": 2.0,
                        "zero_loss": 0.1,
                    },
                ]
            ),
        )
        io.write_table(
            tmp_path / "raw" / f"{name}_writes",
            pd.DataFrame(
                [
                    {
                        **ids,
                        "layer": d,
                        "write_trigger": 1.0,
                        "write_elsewhere": 0.2,
                        "cos_others": -0.999 if shape["layers"] > 1 else math.nan,
                    }
                    for d in range(1, shape["layers"] + 1)
                ]
            ),
        )
        ok = True if met is None else met.get(name, True)
        row = {
            **ids,
            "cap": 100,
            "steps": 60 if ok else 100,
            "met_linf": ok,
            "batch_linf": 0.009 if ok else 0.2,
            "lr": 1e-3,
            "train_loss": 1e-6,
            "uniform_loss": 1e-6,
            "uniform_linf": 0.02,
            "uniform_zero_loss": 0.1,
            "uniform_zero_linf": 2.0,
            "fixed_loss": 1e-6,
            "fixed_linf": 0.02,
            "fixed_zero_loss": 0.1,
            "fixed_zero_linf": 2.0,
        }
        io.write_table(tmp_path / "raw" / f"{name}_loss", pd.DataFrame([row]))
        (tmp_path / "runs" / name).mkdir(parents=True)
        pd.DataFrame({"step": [1, 2], "loss": [0.1, 0.01], "linf": [1.0, 0.009]}).to_csv(
            tmp_path / "runs" / name / "train.csv", index=False
        )
    io.write_table(
        tmp_path / "raw" / "theorem3",
        pd.DataFrame(
            [
                {
                    "samples": 10,
                    "loss": 0.0,
                    "linf": 1e-7,
                    "zero_loss": 0.1,
                    "zero_linf": 2.0,
                    "max_bos_weight": 0.0,
                    "max_weight_off_trigger": 0.0,
                }
            ]
        ),
    )
    return tmp_path


GOOD_BOS = {
    "softmax_1x1": 0.97,
    "relu_1x1": 0.01,
    "softmax_2x2": 0.95,
    "relu_2x2": 0.0,
    "softmax_4x4": 0.6,
    "relu_4x4": 0.02,
}
GOOD_THM = {
    "softmax_1x1": 0.99,
    "relu_1x1": 0.0,
    "softmax_2x2": 0.97,
    "relu_2x2": 0.0,
    "softmax_4x4": 0.95,
    "relu_4x4": 0.0,
}
GOOD_MASKED = {
    "softmax_1x1": 1.2,
    "relu_1x1": 1e-6,
    "softmax_2x2": 1.5,
    "relu_2x2": 2e-6,
    "softmax_4x4": 1.4,
    "relu_4x4": 1e-6,
}


def _tables(folder):
    raw = sinks._read(folder, RUNS)
    table = sinks_findings.run_table(raw.loss, raw.sinks)
    return raw, table, sinks_findings.sink_head_table(sinks_findings.bos_table(raw.maps), raw.sinks)


def _findings(tmp_path, bos=GOOD_BOS, thm=GOOD_THM, met=None, **kw):
    raw, table, heads = _tables(_folder(tmp_path, bos, thm, met, **kw))
    return [
        sinks_findings.finding(arch, table, heads, raw.untrained, raw.positions, 1000).verdict
        for arch in sinks_measures.ARCHS
    ]


def test_summarize_reproduced_when_the_numbers_say_so(tmp_path):
    section = sinks.summarize(_folder(tmp_path, GOOD_BOS, GOOD_THM))
    assert [f.verdict for f in section.findings] == (
        ["reproduced"] * 3 + ["not reproduced"] * 2 + ["reproduced", "check passed"]
    )
    assert all(f.null.passes is False for f in section.findings if not f.is_check)
    # the hand-made deep runs sink in their first head of layer 1 only: not in every layer (App. B.2)
    assert "s0 0.97/0.00" in section.findings[3].evidence and "every layer" in section.findings[3].claim
    assert "s0 L2: norm 0.2, cosine -0.999" in section.findings[3].evidence
    assert "inputs with a sink at every 1 < i < j 0.99" in section.findings[0].evidence
    assert "lowest position's fraction of inputs with a sink there 0.95" in section.findings[2].evidence
    assert "Per position i" in section.findings[2].evidence and "15 0.95." in section.findings[2].evidence
    assert "Theorem 2 as stated (some layer, head and position, per input): 0.95" in section.findings[2].evidence
    assert section.findings[0].rule == sinks_findings.RULE_THM1 and section.findings[2].rule == sinks_findings.RULE_THM2
    masking = section.findings[5]
    assert masking.rule == sinks_findings.RULE_MASK and "softmax loss 1e-06/1e-06 -> masked 1.2/1.2" in masking.evidence
    assert "ReLU rise" in masking.null.outcome and "(fails)" in masking.null.outcome
    for stem in ("table_runs", "table_sinks", "table_theorem3", "table_positions", "table_masking"):
        assert (tmp_path / f"{stem}.csv").is_file() and (tmp_path / f"{stem}.md").is_file()
    for fig in section.figures:
        assert (tmp_path / f"{fig.stem}.png").is_file() and (tmp_path / f"{fig.stem}.svg").is_file()
    heads = pd.read_csv(tmp_path / "table_sinks.csv")
    seeds = PLAN.seeds
    assert len(pd.read_csv(tmp_path / "table_writes.csv")) == 2 * (seeds["1x1"] + 2 * seeds["2x2"] + 4 * seeds["4x4"])
    assert len(heads) == 2 * (seeds["1x1"] + 4 * seeds["2x2"] + 16 * seeds["4x4"])
    assert set(heads["thm1_inputs_eps0.1"].dropna()) <= set(GOOD_THM.values()) | {0.0}
    table = pd.read_csv(tmp_path / "table_runs.csv")
    assert len(table) == len(RUNS) and table["learned"].all()
    masked = pd.read_csv(tmp_path / "table_masking.csv").set_index("run")
    assert masked.loc["softmax_1x1_s0", "rise_over_zero"] == pytest.approx((1.2 - 1e-6) / 0.1)
    assert masked.loc["relu_1x1_s0", "rise_over_zero"] == 0.0
    assert masked["untrained_rise_over_zero"].to_numpy() == pytest.approx(1e-4, rel=1e-6)
    positions = pd.read_csv(tmp_path / "table_positions.csv")
    assert len(positions) == len(RUNS) * len(sinks_measures.EPS) * (L - 2) and (positions["untrained"] == 0).all()
    # no real-model part: the section says how to add one
    assert any("attnlab study sinks --model smollm2" in n for n in section.notes)
    assert not (tmp_path / "table_real_layers.csv").exists()


def test_verdict_not_reproduced_when_relu_sinks_or_softmax_does_not(tmp_path):
    assert _findings(tmp_path / "a", bos={**GOOD_BOS, "relu_2x2": 0.4}) == [
        "reproduced",
        "not reproduced",
        "reproduced",
    ]
    assert _findings(tmp_path / "b", thm={**GOOD_THM, "softmax_1x1": 0.85}) == [
        "not reproduced",
        "reproduced",
        "reproduced",
    ]
    # a multi-layer softmax model without Theorem 2's sink on enough inputs
    assert _findings(tmp_path / "c", thm={**GOOD_THM, "softmax_4x4": 0.5}) == [
        "reproduced",
        "reproduced",
        "not reproduced",
    ]


def test_sink_verdicts_not_checked_when_their_null_control_passes(tmp_path):
    """An untrained model that already sinks, or a softmax arm under the ReLU bound, makes the rule uninformative."""
    found = _findings(tmp_path / "a", untrained={"softmax_1x1": 0.95, "softmax_4x4": 0.99})
    assert found == ["not checked", "reproduced", "not checked"]
    raw, table, heads = _tables(tmp_path / "a")
    first = sinks_findings.finding("1x1", table, heads, raw.untrained, raw.positions, 1000)
    assert first.null.passes and "passes the rule too" in first.reason and "0.95/0.95" in first.null.outcome
    assert _findings(tmp_path / "b", bos={**GOOD_BOS, "softmax_2x2": 0.05}) == [
        "reproduced",
        "not checked",
        "reproduced",
    ]


def test_verdict_not_checked_when_a_run_did_not_meet_the_linf_rule(tmp_path):
    slow = {"softmax_2x2_s1": False}
    assert _findings(tmp_path, met=slow) == ["reproduced", "not checked", "reproduced"]
    raw, table, heads = _tables(tmp_path)
    finding = sinks_findings.finding("2x2", table, heads, raw.untrained, raw.positions, 1000)
    assert finding.reason.startswith("softmax_2x2_s1 did not reach App. A's l-inf < 0.01")
    assert "cap 100 hit, batch l-inf 0.2" in finding.evidence


def test_layer_verdict_asks_a_sink_head_in_every_layer_of_every_softmax_seed(tmp_path):
    def verdicts(folder, **kw):
        raw, table, heads = _tables(_folder(folder, GOOD_BOS, GOOD_THM, **kw))
        return [
            sinks_findings.layer_finding(arch, table, heads, raw.writes, raw.untrained, 1000) for arch in ("2x2", "4x4")
        ]

    found = verdicts(tmp_path / "a", every_layer=True)
    assert [f.verdict for f in found] == ["reproduced"] * 2
    assert found[1].evidence.startswith("Largest head's fraction") and "s0 0.95/0.95/0.95/0.95" in found[1].evidence
    assert [f.verdict for f in verdicts(tmp_path / "b", every_layer=True, met={"softmax_4x4_s0": False})] == [
        "reproduced",
        "not checked",
    ]
    # a ReLU run that did not learn does not bear on the softmax claim
    assert [f.verdict for f in verdicts(tmp_path / "c", every_layer=True, met={"relu_2x2_s0": False})] == [
        "reproduced"
    ] * 2
    # an untrained model with a sink head in every layer: the rule cannot tell training from none
    assert [f.verdict for f in verdicts(tmp_path / "d", every_layer=True, untrained={"softmax_4x4": 0.97})] == [
        "reproduced",
        "not checked",
    ]


def _masking_verdict(folder, **kw):
    raw, table, _ = _tables(_folder(folder, GOOD_BOS, GOOD_THM, **kw))
    return sinks_findings.masking_finding(sinks_findings.masking_table(raw.masking, table), 1000)


def test_masking_verdict_follows_each_arm(tmp_path):
    assert _masking_verdict(tmp_path / "a").verdict == "reproduced"
    # one softmax seed whose masked loss rises by less than the all-zeros loss: it does not need its sink
    found = _masking_verdict(tmp_path / "b", masked={**GOOD_MASKED, "softmax_2x2": 0.05})
    assert found.verdict == "not reproduced" and found.mde.value is None and "none applies" in found.mde.how
    # a ReLU seed that loses 2% of the all-zeros loss: over MASK_TOL, but not needing the sink either
    assert _masking_verdict(tmp_path / "c", masked={**GOOD_MASKED, "relu_4x4": 0.002}).verdict == "not reproduced"
    # every ReLU seed failing as badly as softmax: the other arm passes the softmax half (and the claim fails)
    bad = {key: (1.3 if key.startswith("relu") else v) for key, v in GOOD_MASKED.items()}
    found = _masking_verdict(tmp_path / "d", masked=bad)
    assert found.verdict == "not reproduced" and found.null.passes and "ReLU rise 13/13" in found.null.outcome
    # untrained models that lose as much as the trained ones: masking, not the sink, would explain the loss
    found = _masking_verdict(tmp_path / "f", untrained_masked=0.25)
    assert found.verdict == "not checked" and "passes the rule too" in found.reason
    assert "untrained softmax rise 1.5/1.5" in found.null.outcome and "(passes)" in found.null.outcome
    assert _masking_verdict(tmp_path / "e", met={"relu_1x1_s1": False}).verdict == "not checked"


def test_theorem3_check_fails_on_any_bos_weight():
    check = {
        "samples": 10,
        "loss": 0.0,
        "linf": 1e-7,
        "zero_loss": 0.1,
        "zero_linf": 2.0,
        "max_bos_weight": 0.0,
        "max_weight_off_trigger": 0.0,
    }
    assert sinks_findings.theorem3_finding(pd.DataFrame([check])).verdict == "check passed"
    assert sinks_findings.theorem3_finding(pd.DataFrame([{**check, "max_bos_weight": 1e-3}])).verdict == "check failed"
    assert sinks_findings.theorem3_finding(pd.DataFrame([{**check, "linf": 1e-3}])).verdict == "check failed"


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
    mean, std = sinks_measures.attention_maps(model, batch.inputs)
    assert mean.shape == std.shape == (2, 2, L, L)
    assert torch.allclose(mean.sum(-1), torch.ones(2, 2, L))
    assert torch.all(mean.triu(1) == 0)
    scores = sinks_measures.losses(model, batch.inputs, batch.targets)
    # the zero predictor's loss: the target's squared norm at the trigger, averaged over L positions
    expected = float(batch.targets.pow(2).sum(-1).sum(-1).mean() / L)
    assert scores["zero_loss"] == pytest.approx(expected)


@pytest.mark.parametrize("budget", sorted(sinks.BUDGETS))
def test_every_budgets_runs_build_and_take_a_batch_without_training(budget):
    plan = sinks.BUDGETS[budget]
    names = sinks.runs(plan)
    assert len(names) == 2 * sum(plan.seeds.values())
    assert {sinks._parts(r)[1] for r in names} == set(sinks_measures.ARCHS)
    batch = TriggerAveraging(dim=sinks_measures.DIM).generate(2, sinks_measures.LENGTH, seed=0)
    seeds = {}
    for name in names:
        attention, arch, k = sinks._parts(name)
        cfg = sinks.run_config(name, plan, 7)
        shape = sinks_measures.ARCHS[arch]
        assert cfg.train.steps == plan.cap[arch] and cfg.train.seed == 7 + k and cfg.train.lr == plan.lr[arch]
        assert (cfg.model.layers, cfg.model.heads) == (shape["layers"], shape["heads"])
        assert cfg.model.readout == ("writes" if arch != "1x1" else "stream")
        seeds.setdefault((attention, arch), set()).add(cfg.train.seed)
        with torch.no_grad():
            out = Decoder(cfg.model)(batch.inputs)
        assert out.shape == batch.inputs.shape, (budget, name)
    assert all(len(s) == plan.seeds[arch] for (_, arch), s in seeds.items())


def test_run_end_to_end_and_resume_without_retraining(tmp_path, monkeypatch):
    tiny = dataclasses.replace(
        sinks.BUDGETS["smoke"],
        seeds={"1x1": 2, "2x2": 1, "4x4": 1},
        cap={"1x1": 6, "2x2": 4, "4x4": 3},
        lr=dict.fromkeys(sinks_measures.ARCHS, 1e-3),
        batch=8,
        samples=20,
    )
    monkeypatch.setitem(sinks.BUDGETS, "smoke", tiny)
    section = run(StudyConfig(study="sinks", budget="smoke", seed=0), tmp_path)
    assert section.study == "sinks" and len(section.findings) == 7
    # six steps cannot reach l-inf < 1e-2: no verdict on a run that did not learn
    assert [f.verdict for f in section.findings] == ["not checked"] * 6 + ["check passed"]
    assert json.loads((tmp_path / "section.json").read_text())["study"] == "sinks"
    table = pd.read_csv(tmp_path / "table_runs.csv")
    assert table["seed"].tolist() == [0, 1, 0, 1, 0, 0, 0, 0] and not table["met_linf"].any()
    assert (table["steps"] == table["cap"]).all()

    kept = tmp_path / "raw" / "softmax_1x1_s0_loss.csv"
    before = kept.stat().st_mtime_ns
    (tmp_path / "raw" / "relu_2x2_s0_loss.csv").unlink()
    os.utime(kept, ns=(before, before))
    sinks.compute(StudyConfig(study="sinks", budget="smoke", seed=0), tmp_path, progress=False)
    assert kept.stat().st_mtime_ns == before  # finished piece skipped
    assert (tmp_path / "raw" / "relu_2x2_s0_loss.csv").is_file()  # missing piece rewritten
    records = [json.loads(x) for x in (tmp_path / "runs" / "relu_2x2_s0" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4]  # resumed, not retrained
    assert all(np.isfinite(r["val_linf"]) for r in records if r["kind"] == "eval")

    # a folder made before the masking, per-position and untrained files existed gains them, training nothing
    loss = tmp_path / "raw" / "softmax_2x2_s0_loss.csv"
    stamp = loss.stat().st_mtime_ns
    for kind in ("_masking.csv", "_positions.csv", "_untrained_sinks.csv"):
        (tmp_path / "raw" / f"softmax_2x2_s0{kind}").unlink()
    train = (tmp_path / "runs" / "softmax_2x2_s0" / "train.csv").read_text()
    sinks.compute(StudyConfig(study="sinks", budget="smoke", seed=0), tmp_path, progress=False)
    assert loss.stat().st_mtime_ns == stamp
    assert (tmp_path / "runs" / "softmax_2x2_s0" / "train.csv").read_text() == train
    masking = pd.read_csv(tmp_path / "raw" / "softmax_2x2_s0_masking.csv").set_index("model")
    assert masking.loc["trained", "loss"] == pytest.approx(pd.read_csv(loss)["uniform_loss"].item(), rel=1e-5)
    assert (tmp_path / "raw" / "softmax_2x2_s0_positions.csv").is_file()


def test_a_run_stops_at_the_linf_rule_and_its_resume_trains_no_further(tmp_path, monkeypatch):
    """ReLU 1x1 at a loose target stops early; rerunning its piece after losing the outputs retrains nothing."""
    monkeypatch.setattr(sinks, "LINF_TARGET", 1.0)
    plan = sinks.Plan(seeds={"1x1": 1}, cap={"1x1": 3000}, lr={"1x1": 1e-2}, batch=32, samples=50)
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
    """The smoke budget's 1x1 runs at seed 0, trained for real (about 15 s on one thread): Theorem 1 and the
    masking rule's softmax half hold, the ReLU run passes neither the sink rule nor the masking rule's softmax half."""
    names = ("softmax_1x1_s0", "relu_1x1_s0")
    for name in names:
        sinks.run_piece(name, PLAN, 0, tmp_path, progress=False)

    def read(kind, reader=pd.read_csv):
        return pd.concat([reader(tmp_path / "raw" / f"{n}{kind}") for n in names], ignore_index=True)

    loss, raw_sinks = read("_loss.csv"), read("_sinks.csv")
    assert loss["met_linf"].all()
    table = sinks_findings.run_table(loss, raw_sinks)
    heads = sinks_findings.sink_head_table(
        sinks_findings.bos_table(read("_attention.parquet", pd.read_parquet)), raw_sinks
    )
    found = sinks_findings.finding(
        "1x1", table, heads, read("_untrained_sinks.csv"), read("_positions.csv"), PLAN.samples
    )
    assert found.verdict == "reproduced" and found.null.passes is False
    masked = sinks_findings.masking_table(read("_masking.csv"), table).set_index("attention")
    rise = masked["masked_loss"] - masked["loss"]
    assert sinks_findings.needs_sink([rise["softmax"]], [masked.loc["softmax", "zero_loss"]])
    assert not sinks_findings.needs_sink([rise["relu"]], [masked.loc["relu", "zero_loss"]])
    assert sinks_findings.sink_free([rise["relu"]], [masked.loc["relu", "zero_loss"]])


# ------------------------------------------------------------------------------------- real-model part


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random 2-layer Llama (4 query / 2 KV heads) whose word tokenizer adds BOS, loaded eager."""
    from attnlab.analyses.run import load
    from checkpoints import save_checkpoint

    folder = save_checkpoint(tmp_path_factory.mktemp("ckpt"))
    return (folder, *load(str(folder)))


def test_first_token_mass_matches_the_eager_attentions(tiny):
    _, model, tok = tiny
    docs = sinks_real.documents(tok, 2, 40, seed=0)
    assert all(ids[0] == tok.bos_token_id for ids in docs)
    got = sinks_real.first_token_mass(model, docs, min_query=8)
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
    mass, uniform, count = sinks_real.first_key_sums(ScoreBlock(0, scores, allowed, 0, 6), min_query=1)
    assert count.tolist() == [2.0, 2.0]  # positions 1 and 2 only
    assert mass.tolist() == pytest.approx([1 / 2 + 1 / 3] * 2) and uniform.tolist() == mass.tolist()


def _real(folder, median_mass: float, layers: int = 6, heads: int = 4, documents: int = 2):
    """Hand-made real-model files: in every layer after the first two, the heads' masses spread around
    ``median_mass``; layers 0 and 1 put 0.01 on key 0."""
    rows = []
    for d in range(documents):
        for layer in range(layers):
            for head in range(heads):
                mass = 0.01 if layer < sinks_real.SKIP_LAYERS else min(1.0, median_mass * (0.5 + head / (heads - 1)))
                rows.append((d, layer, head, 248, mass, 0.014))
    io.write_parquet(
        folder / "real" / sinks_real.REAL_TABLE,
        pd.DataFrame(rows, columns=["document", "layer", "head", "queries", "mass", "uniform"]),
    )
    io.write_json(
        folder / "real" / "config.json",
        {
            "model": "hand-made",
            "checkpoint": "/nowhere",
            "model_type": "llama",
            "layers": layers,
            "heads": heads,
            "documents": documents,
            "tokens": 256,
            "min_query": 8,
            "seed": 0,
            "device": "cpu",
            "dtype": "float32",
            "adds_bos": False,
            "first_tokens": ["The"],
            "seconds": 1.0,
        },
    )
    return folder


def test_real_verdict_follows_the_median_head(tmp_path):
    sinking = sinks.summarize(_real(_folder(tmp_path / "a", GOOD_BOS, GOOD_THM), median_mass=0.6))
    real = sinking.findings[7]
    assert len(sinking.findings) == 8 and real.verdict == "reproduced" and real.rule == sinks_real.RULE_REAL
    assert "4 of 4 layers after the first 2 reach 0.3" in real.evidence
    assert "L2 0.60" in real.evidence and "first text token (The)" in real.claim
    assert real.null.passes is False and "0 of 4 layers' uniform share reach 0.3" in real.null.outcome
    table = pd.read_csv(tmp_path / "a" / "table_real_layers.csv")
    assert table["median"].tolist() == pytest.approx([0.01, 0.01] + [0.6] * 4)
    assert table["sink_heads"].tolist() == [0, 0, 4, 4, 4, 4]
    for ext in ("png", "svg"):
        assert (tmp_path / "a" / f"real_first_token_mass.{ext}").is_file()
    assert "real_first_token_mass" in [f.stem for f in sinking.figures]

    spread = _real(tmp_path / "b", median_mass=0.02)
    finding, *_ = sinks_real.summarize_real(spread)
    assert finding.verdict == "not reproduced" and "0 of 4 layers" in finding.evidence
    shallow = _real(tmp_path / "c", median_mass=0.9, layers=2)
    assert sinks_real.summarize_real(shallow)[0].verdict == "not checked"


def test_summarize_names_a_missing_real_part(tmp_path):
    folder = _folder(tmp_path, GOOD_BOS, GOOD_THM)
    io.write_json(folder / "config.json", {"study": "sinks", "budget": "smoke", "model": "smollm2", "seed": 0})
    with pytest.raises(StudyError, match="lacks the real-model results on smollm2"):
        sinks.summarize(folder)


def test_real_compute_writes_config_last_and_resumes(tiny, tmp_path, monkeypatch):
    folder, _, _ = tiny
    monkeypatch.setitem(
        sinks_real.REAL_PLANS, "smoke", dataclasses.replace(sinks_real.REAL_PLANS["smoke"], documents=2, tokens=24)
    )
    cfg = StudyConfig(study="sinks", model=str(folder))
    sinks_real.compute_real(cfg, tmp_path, progress=False)
    raw = pd.read_parquet(tmp_path / "real" / sinks_real.REAL_TABLE)
    config = json.loads((tmp_path / "real" / "config.json").read_text())
    assert len(raw) == 2 * 2 * 4 and raw["mass"].between(0, 1).all()
    assert config["adds_bos"] and config["first_tokens"] == ["<s>"] and config["tokens"] == 24
    before = (tmp_path / "real" / sinks_real.REAL_TABLE).stat().st_mtime_ns
    sinks_real.compute_real(cfg, tmp_path, progress=False)
    assert (tmp_path / "real" / sinks_real.REAL_TABLE).stat().st_mtime_ns == before


def test_real_compute_bad_model_is_one_line_study_error(tmp_path):
    with pytest.raises(StudyError, match="--model /no/such/model: .*neither a path nor a known model name"):
        sinks_real.compute_real(StudyConfig(study="sinks", model="/no/such/model"), tmp_path, progress=False)
    assert not (tmp_path / "real").exists()


@pytest.mark.real
def test_smollm2_first_token_mass_invariants(real_models):
    model, tok = real_models("smollm2")
    docs = sinks_real.documents(tok, 2, 48, seed=0)
    got = sinks_real.first_token_mass(model, docs)
    assert len(got) == 2 * 30 * 9 and got["mass"].between(0, 1).all()
    assert (got["queries"] == 48 - sinks_real.MIN_QUERY).all()
    assert (sinks_real.head_table(got)["mass"] > got["uniform"].max()).any()
