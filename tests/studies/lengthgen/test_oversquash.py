"""The over-squashing findings (Vasylenko et al. 2025 App. D.3, Fig. 7) measure what they say: the per-layer
input-gradient norms equal an independent autograd computation, the support counts equal brute force, the two rules
keep their false-positive rate at or below 5% and reach 80% power at the paper's effect, the findings label
constructed tables as the rules say, and a tiny compute runs end to end and resumes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab import rowmaps
from attnlab.findings import calibrate
from attnlab.findings.calibrate import CALIBRATIONS
from attnlab.model.config import ModelConfig
from attnlab.model.decoder import Decoder
from attnlab.studies.lengthgen import oversquash as o
from attnlab.tasks import get_task
from attnlab.tasks.seqtask import IGNORE


def _model(rowmap: str, positions: str = "rope", layers: int = 2) -> Decoder:
    torch.manual_seed(0)
    cfg = ModelConfig(context=32, vocab=35, layers=layers, heads=2, d_model=16, positions=positions, rowmap=rowmap)
    model = Decoder(cfg)
    with torch.no_grad():  # scores away from 0, so that entmax is sparse
        for block in model.layers:
            block.attn.q_proj.weight.mul_(40.0)
            block.attn.k_proj.weight.mul_(40.0)
    return model


def _rows(n: int = 3, length: int = 32):
    batch = get_task("copy").generate(n, length, 7)
    return batch.ids, batch.targets


def _row_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(logits.float(), -1)
    scored = targets != IGNORE
    picked = logp.gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    return -(picked * scored).sum(-1) / scored.sum(-1)


@pytest.mark.parametrize("rowmap", ["softmax", "entmax_a1.5"])
def test_gradient_norms_match_autograd_from_each_layer_input(rowmap):
    model = _model(rowmap)
    ids, targets = _rows()
    got = o.measure(model, ids, targets, chunk=2)
    # independent: the forward restarted at each layer from a leaf copy of that layer's input
    rope = model.rope(ids.shape[1], ids.device)
    with torch.no_grad():
        xs = [model.embed(ids)]
        for block in model.layers:
            xs.append(block(xs[-1], rope))
    source = torch.zeros_like(ids, dtype=torch.bool)
    source[:, 1 : (ids.shape[1] - 2) // 2 + 1] = True
    for layer in range(len(model.layers)):
        leaf = xs[layer].clone().requires_grad_(True)
        x = leaf
        for block in model.layers[layer:]:
            x = block(x, rope)
        logits = model.head(model.norm(x))
        (grad,) = torch.autograd.grad(_row_loss(logits, targets).sum(), leaf)
        norms = grad.norm(dim=-1)
        assert got[layer]["grad_norm"] == pytest.approx(float(norms.mean()), rel=1e-4)
        assert got[layer]["grad_source"] == pytest.approx(float(norms[source].mean()), rel=1e-4)


@pytest.mark.parametrize("rowmap", ["softmax", "entmax_a1.5", "entmax_a2"])
def test_support_counts_match_brute_force(rowmap):
    model = _model(rowmap, positions="none", layers=1)
    ids, targets = _rows()
    got = o.measure(model, ids, targets)[0]
    attn, t = model.layers[0].attn, ids.shape[1]
    with torch.no_grad():
        h = model.layers[0].attn_norm(model.embed(ids))
        q = attn.q_proj(h).view(3, t, 2, 8).transpose(1, 2)
        k = attn.k_proj(h).view(3, t, 2, 8).transpose(1, 2)
        z = (q @ k.transpose(-1, -2)) * 8**-0.5
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        z = z.masked_fill(~causal, -math.inf)
        w = torch.softmax(z, -1) if rowmap == "softmax" else rowmaps.get(rowmap)(z)
    count = sum(int(w[b, hh, i, j] > 0) for b in range(3) for hh in range(2) for i in range(t) for j in range(i + 1))
    assert got["support"] == pytest.approx(count / (3 * 2 * t), abs=1e-9)
    assert got["causal"] == pytest.approx((t + 1) / 2)
    if rowmap == "softmax":
        assert got["support"] == pytest.approx(got["causal"])
    else:
        assert got["support"] < 0.9 * got["causal"]


def test_measure_does_not_depend_on_the_chunk():
    model = _model("entmax_a1.5")
    ids, targets = _rows(4)
    a, b = o.measure(model, ids, targets, chunk=1), o.measure(model, ids, targets, chunk=4)
    for x, y in zip(a, b, strict=True):
        assert x == pytest.approx(y, rel=1e-5)


@pytest.mark.parametrize("budget", list(o.BUDGETS))
def test_rules_false_positive_rate_and_power(budget):
    # every budget keeps the false-positive rate; the gradient rule has the power at every budget, the active-paths
    # rule at full's 12 seeds (smoke's 3 and demo's 5 seeds, at the demo's seed spread, cannot place a typical seed's
    # support under 5 keys: those findings are labelled underpowered there)
    powered = {(o.GRADIENT_NAME, b) for b in o.BUDGETS} | {(o.PATHS_NAME, "full")}
    for name in o.NAMES:
        cal = CALIBRATIONS.find(f"{name} @ {budget}")
        for world in cal.worlds:
            rate = calibrate.fire_rate(cal.rule, world, 300, seed=1) / 300
            if not world.effect:
                assert rate <= 0.05, (name, budget, world.name, rate)
            elif (name, budget) in powered:
                assert rate >= 0.80, (name, budget, world.name, rate)


def _table(ratio: float, support: float, seeds: int = 5, sd: float = 0.1, null_ratio: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for seed in range(seeds):
        soft = math.exp(rng.normal(0, 0.2))
        arms = {
            "softmax": (soft, 128.5),
            "entmax_a1.5": (soft * math.exp(math.log(ratio) + rng.normal(0, sd)), support + rng.normal(0, 0.3)),
            "entmax_a2": (soft * math.exp(math.log(ratio) + rng.normal(0, sd)), support + rng.normal(0, 0.3)),
            o.NULL_ARM: (soft * math.exp(null_ratio + rng.normal(0, sd)), 128.5),
        }
        for arm, (grad, supp) in arms.items():
            for layer in range(2):
                rows.append(
                    {
                        "arm": arm,
                        "map": o.arm_map(arm),
                        "alpha": o.alpha_of(arm),
                        "seed": seed,
                        "layer": layer,
                        "grad_norm": grad / (1 + layer),
                        "grad_source": grad,
                        "support": supp,
                        "causal": 128.5,
                        "token_accuracy": 0.5,
                        "train_loss": 1.0,
                    }
                )
    return pd.DataFrame(rows)


def test_findings_label_constructed_tables():
    grad, paths = o.findings(_table(6.0, 3.0))
    assert (grad.verdict, paths.verdict) == ("reproduced", "reproduced")
    assert (grad.name, paths.name) == (o.GRADIENT_NAME, o.PATHS_NAME)
    assert grad.null.passes is False and paths.null.passes is False
    grad, paths = o.findings(_table(1.0 / 6.0, 20.0))
    assert (grad.verdict, paths.verdict) == ("not reproduced", "not reproduced")
    # a null arm with the effect passes the rule: the label cannot be "reproduced"
    grad = o.gradient_finding(_table(6.0, 3.0, null_ratio=math.log(6.0)))
    assert grad.verdict == "not checked" and grad.null.passes is True
    grad, paths = o.findings(_table(6.0, 3.0, seeds=1))
    assert (grad.verdict, paths.verdict) == ("not checked", "not checked")
    # models that did not learn the copy cannot test Fig. 7's claims about trained ones
    untrained = _table(6.0, 3.0).assign(token_accuracy=0.1)
    grad, paths = o.findings(untrained)
    assert (grad.verdict, paths.verdict) == ("not checked", "not checked") and "learned" in grad.reason


def test_rules_read_the_paper_thresholds():
    assert o.gradient_rule({"a": [1.8, 1.7, 1.9, 1.8, 1.75], "b": [1.8, 1.6, 2.0, 1.7, 1.9]})
    assert not o.gradient_rule({"a": [1.8, 1.7, 1.9, 1.8, 1.75], "b": [-0.1, 0.1, 0.0, 0.05, -0.05]})
    full = [1.0] * 5
    assert o.paths_rule({"entmax": {"a": [3.0, 3.2, 2.9, 3.1, 3.0]}, "softmax_share": full})
    assert not o.paths_rule({"entmax": {"a": [4.8, 5.3, 4.9, 5.1, 5.0]}, "softmax_share": full})
    assert not o.paths_rule({"entmax": {"a": [3.0, 3.2, 2.9, 3.1, 3.0]}, "softmax_share": [0.9] * 5})


# two seeds of two maps at a tiny size: the study's tests run it too
TINY = o.Budget(
    maps=("softmax", "entmax_a1.5"),
    seeds=2,
    layers=2,
    heads=2,
    d_model=16,
    ffn_width=None,
    length=32,
    steps=2,
    batch=4,
    lr=3e-3,
    rows=3,
)


def test_tiny_compute_end_to_end_and_resume(tmp_path: Path, monkeypatch):
    monkeypatch.setitem(o.BUDGETS, "smoke", TINY)
    torch.set_num_threads(1)
    table = o.compute("smoke", 0, tmp_path / "run", jobs=1, device="cpu")
    assert len(table) == 3 * 2 * 2 and set(table.arm) == {"softmax", "entmax_a1.5", o.NULL_ARM}
    assert (table[table.arm == "softmax"].support == table[table.arm == "softmax"].causal).all()
    pd.testing.assert_frame_equal(o.read(tmp_path / "run"), table, check_dtype=False)
    cells = sorted((tmp_path / "run" / "cells").glob("*.json"))
    stamps = [p.stat().st_mtime_ns for p in cells]
    again = o.compute("smoke", 0, tmp_path / "run", jobs=1, device="cpu")
    pd.testing.assert_frame_equal(again, table)
    assert [p.stat().st_mtime_ns for p in cells] == stamps
    parts = o.report(tmp_path / "run", tmp_path / "out")
    assert [f.name for f in parts.findings] == list(o.NAMES)
    for stem in ("oversquash_layers", "oversquash_seeds"):
        assert (tmp_path / "out" / f"{stem}.csv").is_file()
    assert (tmp_path / "out" / "oversquash.png").is_file()
