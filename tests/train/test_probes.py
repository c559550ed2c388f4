"""The seed-002 probes equal hand computations of each readout and leave the model as they found it."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnlab import rowmaps
from attnlab.model.config import ModelConfig
from attnlab.model.decoder import Decoder, loss
from attnlab.train import probes

IDS = torch.tensor([[1, 3, 5, 3, 7, 1, 3, 9, 2, 5, 5, 0], [4, 4, 8, 2, 10, 8, 6, 4, 2, 1, 0, 3]])
TARGETS = torch.roll(IDS, -1, dims=1)


def _model(std: float = 0.5, **overrides) -> Decoder:
    cfg = dict(vocab=11, context=16, layers=1, heads=2, d_model=8, ffn_width=16, positions="none")
    torch.manual_seed(0)
    model = Decoder(ModelConfig(**{**cfg, **overrides})).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model.eval()


def _hand_layer0(model: Decoder, ids: torch.Tensor):
    """Layer 0 by hand: embeddings -> pre-norm -> per-head q, k, v -> scores, row map -> FFN write -> logits."""
    cfg, block = model.cfg, model.layers[0]
    attn = block.attn
    with torch.no_grad():
        x = model.embed(ids)
        u = block.attn_norm(x)
        b, t, _ = u.shape

        def heads(lin):
            return (u @ lin.weight.T + lin.bias).view(b, t, cfg.heads, cfg.head_dim).transpose(1, 2)

        q, k, v = heads(attn.q_proj), heads(attn.k_proj), heads(attn.v_proj)
        z = q @ k.transpose(-1, -2) / math.sqrt(cfg.head_dim)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        masked = z.masked_fill(~causal, torch.finfo(z.dtype).min)
        name = cfg.head_maps()[0][0]
        w = torch.softmax(masked, -1) if name == "softmax" else rowmaps.get(name)(masked, causal.expand_as(z))
        mixed = (w @ v).transpose(1, 2).reshape(b, t, cfg.d_model)
        x = x + mixed @ attn.o_proj.weight.T + attn.o_proj.bias
        write = block.ffn(block.ffn_norm(x))
        logits = model.head(model.norm(x + write))
    return z, w, write, logits


def _entropy_and_logit(z: torch.Tensor, w: torch.Tensor) -> tuple[float, float]:
    """Mean normalized entropy over rows with >= 2 keys and RMS of the causal logits, one row at a time."""
    entropies, squares = [], []
    b, h, t, _ = z.shape
    for bi in range(b):
        for hi in range(h):
            for i in range(t):
                row = w[bi, hi, i, : i + 1].tolist()
                squares += [s * s for s in z[bi, hi, i, : i + 1].tolist()]
                if i >= 1:
                    entropies.append(-sum(p * math.log(p) for p in row if p > 0) / math.log(i + 1))
    return sum(entropies) / len(entropies), math.sqrt(sum(squares) / len(squares))


def _forms(wq: torch.Tensor, wk: torch.Tensor, heads: int) -> list[np.ndarray]:
    """Each head's W_Q,h^T W_K,h from the (out, in) rows of that head."""
    rows = wq.shape[0] // heads
    return [wq[h * rows : (h + 1) * rows].T.numpy() @ wk[h * rows : (h + 1) * rows].numpy() for h in range(heads)]


def _largest_sigma(matrices: list[np.ndarray]) -> float:
    return max(np.linalg.svd(m, compute_uv=False)[0] for m in matrices)


def test_probe_matches_a_hand_computation_of_a_one_layer_model():
    model = _model()
    attn = model.layers[0].attn
    z, w, write, logits = _hand_layer0(model, IDS)
    entropy, logit = _entropy_and_logit(z, w)
    initial = {name: p.detach() + 0.1 * torch.randn_like(p) for name, p in model.state_dict().items()}
    record = probes.probe(model, IDS, TARGETS, initial=initial)

    assert record["upper_entropy"] == pytest.approx(entropy, rel=1e-9)
    assert record["entropy/0"] == record["upper_entropy"]
    assert record["upper_logit"] == pytest.approx(logit, rel=1e-9)
    wq, wk = attn.q_proj.weight.detach(), attn.k_proj.weight.detach()
    assert record["qk_sigma_max/0"] == pytest.approx(_largest_sigma(_forms(wq, wk, 2)), rel=1e-9)
    start = _forms(initial["layers.0.attn.q_proj.weight"], initial["layers.0.attn.k_proj.weight"], 2)
    shift = _largest_sigma([now - then for now, then in zip(_forms(wq, wk, 2), start)])
    assert record["qk_sigma_shift/0"] == pytest.approx(shift, rel=1e-9)
    assert record["upper_qk_sigma_max"] == record["qk_sigma_max/0"]
    assert record["ffn_write_rms/0"] == pytest.approx(write.square().mean().sqrt().item(), rel=1e-9)
    assert record["upper_ffn_write_rms"] == record["ffn_write_rms/0"]
    ce = F.cross_entropy(logits.reshape(-1, 11), TARGETS.reshape(-1)).item()
    assert record["ppl"] == pytest.approx(math.exp(ce), rel=1e-6)  # attnlab's loss is float32 cross-entropy
    # L = 1: the single layer is the upper half and there is no lower half
    for key in ("lower_entropy", "lower_logit", "upper_lower_logit_ratio", "lower_copy"):
        assert math.isnan(record[key]), key
    assert 0 < record["upper_entropy"] < 1


def test_a_sparse_row_map_gives_entropies_of_its_weights_with_zeros_contributing_nothing():
    model = _model(std=1.5, rowmap="entmax_a1.5")
    z, w, _, _ = _hand_layer0(model, IDS)
    causal = torch.ones(12, 12, dtype=torch.bool).tril()
    assert (w[..., causal] == 0).any()  # the check is vacuous unless entmax zeroed some allowed keys
    entropy, logit = _entropy_and_logit(z, w)
    record = probes.probe(model, IDS, TARGETS)
    assert record["upper_entropy"] == pytest.approx(entropy, rel=1e-9)
    assert record["upper_logit"] == pytest.approx(logit, rel=1e-9)


def _brute_lower_copy(model: Decoder, ids: torch.Tensor) -> float:
    blocks = {}
    with (
        torch.no_grad(),
        model.observed(lambda blk: blocks.setdefault(blk.layer, []).append(blk.weights), weights=True),
    ):
        model(ids)
    weights = {layer: torch.cat(parts, 2) for layer, parts in blocks.items()}
    masses = []
    for layer in range(len(model.layers) // 2):
        for b in range(ids.shape[0]):
            for i in range(ids.shape[1]):
                earlier = [j for j in range(i) if ids[b, j] == ids[b, i]]
                if earlier:
                    masses += [weights[layer][b, h, i, max(earlier)].item() for h in range(model.cfg.heads)]
    return sum(masses) / len(masses) if masses else math.nan


def test_the_chance_baseline_is_the_lower_copy_score_of_uniform_causal_attention():
    model = _model(layers=4)
    with torch.no_grad():
        for layer in model.layers:
            layer.attn.q_proj.weight.zero_()  # all scores 0: softmax rows are uniform over allowed keys
            if layer.attn.q_proj.bias is not None:
                layer.attn.q_proj.bias.zero_()
    uniform = _brute_lower_copy(model, IDS)
    assert probes.lower_copy_chance(IDS) == pytest.approx(uniform, rel=1e-6)
    record = probes.probe(_model(layers=4), IDS, TARGETS)
    assert record["lower_copy_chance"] == pytest.approx(uniform, rel=1e-6)
    assert record["lower_copy_excess"] == pytest.approx(record["lower_copy"] - uniform, rel=1e-6)
    assert math.isnan(probes.lower_copy_chance(torch.arange(10)[None]))


def test_lower_copy_is_the_mass_on_the_nearest_previous_occurrence_over_lower_layers_heads_and_repeats():
    model = _model(layers=4)
    expected = _brute_lower_copy(model, IDS)
    assert probes.lower_copy_score(model, IDS) == pytest.approx(expected, rel=1e-9)
    assert probes.probe(model, IDS, TARGETS)["lower_copy"] == pytest.approx(expected, rel=1e-9)
    assert math.isnan(probes.lower_copy_score(model, torch.arange(10)[None]))
    previous = probes.previous_occurrence(IDS)
    for b in range(2):
        for i in range(12):
            earlier = [j for j in range(i) if IDS[b, j] == IDS[b, i]]
            assert previous[b, i] == (max(earlier) if earlier else -1)


@pytest.mark.parametrize("which", ["q", "k", "qk"])
def test_zeroed_upper_q_k_give_uniform_upper_rows_and_the_perplexity_of_a_zeroed_model(which):
    model = _model(layers=2)
    projections = probes.PROJECTIONS[which]
    upper = []
    with (
        torch.no_grad(),
        probes.zeroed(model, [1], projections),
        model.observed(lambda blk: upper.append(blk.weights) if blk.layer == 1 else None, weights=True),
    ):
        model(IDS)
    causal = torch.ones(12, 12, dtype=torch.bool).tril()
    uniform = causal / causal.sum(-1, keepdim=True)
    assert torch.allclose(torch.cat(upper, 2), uniform.expand(2, 2, 12, 12).double(), atol=1e-12)

    reference = copy.deepcopy(model)
    with torch.no_grad():
        for name in projections:
            getattr(reference.layers[1].attn, name).weight.zero_()
            getattr(reference.layers[1].attn, name).bias.zero_()
        expected = math.exp(loss(reference(IDS), TARGETS).item())
    record = probes.probe(model, IDS, TARGETS)
    assert record[f"ppl_zero_{which}"] == pytest.approx(expected, rel=1e-9)
    assert record[f"dppl_zero_{which}"] == pytest.approx(expected - record["ppl"], rel=1e-9)
    assert record["ppl"] == pytest.approx(math.exp(loss(model(IDS), TARGETS).item()), rel=1e-9)


def test_initial_weights_equal_to_the_current_ones_give_zero_shift_for_every_upper_layer():
    model = _model(layers=4)
    record = probes.probe(model, IDS, TARGETS, initial=model.state_dict())
    assert [k for k in record if k.startswith("qk_sigma_shift/")] == ["qk_sigma_shift/2", "qk_sigma_shift/3"]
    assert record["qk_sigma_shift/2"] == record["qk_sigma_shift/3"] == record["upper_qk_sigma_shift"] == 0.0
    assert record["upper_qk_sigma_max"] > 0
    upper_names = {f"layers.{i}.attn.{p}.weight" for i in (2, 3) for p in ("q_proj", "k_proj")}
    assert math.isfinite(
        probes.probe(model, IDS, TARGETS, initial={k: v for k, v in model.state_dict().items() if k in upper_names})[
            "upper_qk_sigma_shift"
        ]
    )
    with pytest.raises(ValueError, match="layers.3.attn.k_proj.weight"):
        probes.probe(
            model,
            IDS,
            TARGETS,
            initial={k: v for k, v in model.state_dict().items() if k != "layers.3.attn.k_proj.weight"},
        )


@pytest.mark.parametrize("rowmap", ["softmax", "entmax_a1.5"])
def test_the_entropy_tracker_equals_the_probe_and_backpropagates_to_upper_q(rowmap):
    model = _model(layers=2, rowmap=rowmap)
    expected = probes.probe(model, IDS, TARGETS)["upper_entropy"]
    with probes.upper_entropy_tracker(model) as tracker:
        model(IDS)
    h_upper = tracker.value()
    assert h_upper.item() == pytest.approx(expected, rel=1e-9)
    assert h_upper.grad_fn is not None
    torch.relu(0.99 - h_upper).backward()
    grad = model.layers[1].attn.q_proj.weight.grad
    assert grad is not None and grad.abs().sum() > 0 and torch.isfinite(grad).all()
    assert model.layers[1].attn.weight_observers == ()


def test_probe_restores_train_and_eval_modes_and_leaves_no_hooks_or_observers():
    model = _model(layers=2, dropout=0.1)
    for mode in (True, False):
        model.train(mode)
        model.layers[0].ffn.train(not mode)  # mixed modes come back exactly
        probes.probe(model, IDS, TARGETS)
        probes.lower_copy_score(model, IDS)
        assert model.training is mode and model.layers[1].attn.training is mode
        assert model.layers[0].ffn.training is not mode
    for block in model.layers:
        assert block.attn.observers == () and block.attn.weight_observers == ()
        assert not block.attn.q_proj._forward_hooks and not block.attn.k_proj._forward_hooks
        assert not block.ffn._forward_hooks


def test_models_without_an_ffn_skip_the_write_and_vector_models_are_refused():
    record = probes.probe(_model(layers=2, ffn="none"), IDS, TARGETS)
    assert not any(k.startswith(("ffn_write_rms", "upper_ffn")) for k in record)
    assert math.isfinite(record["upper_lower_logit_ratio"]) and record["upper_lower_logit_ratio"] > 0
    vectors = Decoder(ModelConfig(inputs="vectors", context=8, layers=2, heads=2, d_model=8))
    for call in (
        lambda: probes.probe(vectors, torch.zeros(1, 4, 8), None),
        lambda: probes.lower_copy_score(vectors, IDS),
        lambda: probes.upper_entropy_tracker(vectors).__enter__(),
    ):
        with pytest.raises(ValueError, match="token-mode"):
            call()


def test_query_blocks_are_accumulated_into_the_same_probes_as_one_block():
    torch.manual_seed(1)
    ids = torch.randint(0, 11, (2, 70))
    whole = _model(layers=2, context=80)
    blocked = _model(layers=2, context=80, block=32)  # three query blocks of 24 and 23 rows
    one, many = probes.probe(whole, ids, ids.roll(-1, 1)), probes.probe(blocked, ids, ids.roll(-1, 1))
    assert one.keys() == many.keys()
    for key in one:
        assert many[key] == pytest.approx(one[key], rel=1e-9, abs=1e-12), key
    assert one["lower_copy"] == pytest.approx(_brute_lower_copy(blocked, ids), rel=1e-9)
