"""b_auto is exactly the smallest bias leaving at most the mass budget below -b (seed 000 App. B, J)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab import hooks

from .models import VOCAB, build


def _pairs(model, ids):
    """Every (score, softmax weight) pair of allowed keys, and the number of rows."""
    zs, ws, rows = [], [], [0]

    def grab(block):
        ok = block.allowed.expand_as(block.scores)
        w = torch.softmax(block.scores, -1, dtype=torch.float32)
        live = ok.any(-1)
        rows[0] += int(live.sum())
        zs.append(block.scores[ok].double().numpy())
        ws.append(w[ok].double().numpy())

    with hooks.observed(model, grab), torch.no_grad():
        model(input_ids=ids)
    return np.concatenate(zs), np.concatenate(ws), rows[0]


def _brute_b(z, w, rows, budget):
    # the largest score v whose strictly-below mass stays within budget, so b = -v is smallest
    best = None
    for v in np.unique(z):
        if w[z < v].sum() / rows <= budget and (best is None or v > best):
            best = v
    return -best


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("budget", [0.05, 0.3])
def test_b_auto_equals_brute_force(dtype, budget):
    model = build("llama", seed=3, dtype=dtype)
    with torch.no_grad():
        model.model.layers[0].self_attn.q_proj.weight.mul_(8)  # spread scores so the quantile is interior
    ids = torch.randint(3, VOCAB, (1, 48), generator=torch.Generator().manual_seed(1))
    b = hooks.calibrate_b_auto(model, ids, budget=budget)
    z, w, rows = _pairs(model, ids)
    assert b == pytest.approx(_brute_b(z, w, rows, budget), abs=0)
    assert w[z < -b].sum() / rows <= budget
    assert w[z <= -b].sum() / rows > budget  # any smaller b would put the value -b itself below it
    assert model.config._attn_implementation == "eager"


def test_b_auto_bad_input():
    model = build("llama")
    with pytest.raises(ValueError, match="budget"):
        hooks.calibrate_b_auto(model, torch.ones(1, 8, dtype=torch.long), budget=1.5)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        hooks.calibrate_b_auto(model, torch.ones(1, 1, dtype=torch.long))
