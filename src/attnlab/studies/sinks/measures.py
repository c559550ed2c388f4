"""The ``sinks`` study's design and what it measures on a model (Attention Sinks Essential §3.2-§4, App. A): the
task's size and the trigger of §4's figures, App. A's stop, the three shapes and two row maps, Theorem 1's eps and
delta, and the readings taken off a trained (or untrained) model on held-out inputs.

Theorem 1's per-input form, per (layer, head) and eps in EPS: the fraction of pre-trigger positions 1 < i < j
with alpha_(i,1) >= 1 - eps, and the fraction of inputs where every such position does (the theorem's "with
probability >= 1 - delta, for all 1 < i < j"); Theorem 2's, per run: the fraction of inputs where some layer,
head and position 1 < i < j does, and per position i the fraction of the inputs with i < j where some layer and
head sinks at i (``position_fractions``: the theorem guarantees one layer and position; the verdict asks every
position, as §4.2's Fig. 3 shows). Beyond Theorem 2, App. B.2 and Fig. 3 show a sink head in every layer; that is
checked too, beside what each layer writes to the residual stream (``layer_writes``). The title's claim is tested
functionally: each model is evaluated with BOS masked in every layer (``forward(mask_bos=True)``), its held-out
loss against the unmasked one and the all-zeros predictor's. Theorem 3's zero-loss ReLU model (App. E) is built
as weights (``theorem3_model``) and scored as a check (``theorem3_check``); ``sink_model`` is its softmax
counterpart, with a sink, built by hand.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from attnlab.errors import ArgumentError
from attnlab.model.config import ModelConfig
from attnlab.model.decoder import Decoder
from attnlab.site import WeightBlock
from attnlab.train.config import RunConfig
from attnlab.train.trainer import vector_linf, vector_loss

DIM = 16  # the seed's n (App. A)
LENGTH = 16  # the seed's L (§4)
TRIGGER = 8  # §4: every figure fixes the trigger at j = 8 (1-based)
LINF_TARGET = 1e-2  # App. A trains until the l-infinity loss of the batch is below this
# Theorem 1's eps, the sink threshold alpha_(i,1) >= 1 - eps: the verdicts read EPS_VERDICT, the tables
# every value here.
EPS = (0.1, 0.01)
EPS_VERDICT = 0.1
# Theorem 1's delta: the verdict asks the per-input statement on at least 1 - DELTA of the held-out inputs.
DELTA = 0.1

ATTENTION = {"softmax": "softmax", "relu": "reluattn"}
# residual: §3.4's single layer is its own write, so 1x1 keeps f = W_O sum alpha W_V x; §4.2 and App. B
# train the multi-layer models with residual connections, read out as the sum of the layers' writes.
ARCHS: dict[str, dict[str, Any]] = {
    "1x1": {"layers": 1, "heads": 1, "residual": False},
    "2x2": {"layers": 2, "heads": 2, "residual": True},
    "4x4": {"layers": 4, "heads": 4, "residual": True},
}


@torch.no_grad()
def attention_weights(model, inputs: torch.Tensor) -> torch.Tensor:
    """Every (layer, head)'s weights alpha_(i,k) on every input: (layers, rows, heads, L, L)."""
    seen: dict[int, list[WeightBlock]] = {}

    def observe(block: WeightBlock) -> None:
        seen.setdefault(block.layer, []).append(block)

    model.eval()
    with model.observed(observe, weights=True):
        model(inputs)
    return torch.stack(
        [
            torch.cat([b.weights.detach() for b in sorted(seen[layer], key=lambda b: b.query_start)], dim=-2)
            for layer in sorted(seen)
        ]
    )


def attention_maps(model, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std (population) over rows of every (layer, head)'s weights: two (layers, heads, L, L)."""
    full = attention_weights(model, inputs)
    return full.mean(1), full.std(1, correction=0)


def sink_fractions(weights: torch.Tensor, triggers: torch.Tensor, eps: float) -> dict[str, torch.Tensor]:
    """Theorems 1-2 per input, from ``weights`` (layers, rows, heads, L, L) and each row's 0-based trigger
    index: ``positions`` (layers, heads), the fraction of pre-trigger (row, i) pairs, 1 < i < j in the
    paper's 1-based count, with alpha_(i,1) >= 1 - eps; ``inputs_all`` (layers, heads), the fraction of rows
    where every such i does (Theorem 1's event); ``inputs_exists`` (a scalar), the fraction of rows where
    some layer, head and such i does (Theorem 2's event, over heads as well where a layer has several)."""
    if not 0 < eps < 1:
        raise ArgumentError(f"eps must be in (0, 1), got {eps!r}")
    if weights.dim() != 5 or triggers.shape != weights.shape[1:2]:
        raise ArgumentError(
            f"weights must be (layers, rows, heads, L, L) and triggers (rows,), got "
            f"{tuple(weights.shape)} and {tuple(triggers.shape)}"
        )
    if int(triggers.min()) < 2:
        raise ArgumentError(
            f"every trigger needs a pre-trigger position (0-based trigger >= 2), got {int(triggers.min())}"
        )
    i = torch.arange(weights.shape[-1])
    pre = ((i >= 1) & (i < triggers[:, None]))[None, :, None, :]  # (1, rows, 1, L)
    hit = weights[..., 0] >= 1 - eps  # (layers, rows, heads, L)
    return {
        "positions": (hit & pre).sum((1, 3)).double() / pre.sum(),
        "inputs_all": (hit | ~pre).all(-1).double().mean(1),
        "inputs_exists": (hit & pre).any(-1).any(-1).any(0).double().mean(),
    }


@torch.no_grad()
def losses(model, inputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """The model's squared-l2 loss (the trainer's) and l-inf loss, and the all-zeros predictor's."""
    model.eval()
    out = model(inputs)
    zero = torch.zeros_like(targets)
    return {
        "loss": float(vector_loss(out, targets)),
        "linf": vector_linf(out, targets),
        "zero_loss": float(vector_loss(zero, targets)),
        "zero_linf": vector_linf(zero, targets),
    }


@torch.no_grad()
def layer_writes(model, inputs: torch.Tensor, mask: torch.Tensor) -> list[dict[str, float]]:
    """Per layer d, what Attn_d writes to the residual stream (its output before the residual add; the
    study's models have no norm, FFN or dropout, so this is the whole write): the mean l2 norm at the
    trigger and off it, and off the trigger the mean cosine between layer d's write and the sum of the other
    layers' writes (-1 where layer d cancels them; NaN for one layer)."""
    writes: list[torch.Tensor] = []
    handles = [
        block.attn.register_forward_hook(lambda module, args, out: writes.append(out.detach()))
        for block in model.layers
    ]
    try:
        model.eval()
        model(inputs)
    finally:
        for handle in handles:
            handle.remove()
    total = torch.stack(writes).sum(0)
    rows = []
    for d, w in enumerate(writes):
        others = (total - w)[~mask]
        cos = torch.nn.functional.cosine_similarity(w[~mask], others, dim=-1).mean() if len(writes) > 1 else math.nan
        rows.append(
            {
                "layer": d + 1,
                "write_trigger": float(w[mask].norm(dim=-1).mean()),
                "write_elsewhere": float(w[~mask].norm(dim=-1).mean()),
                "cos_others": float(cos),
            }
        )
    return rows


def untrained(cfg: RunConfig) -> Decoder:
    """The run's model before its first step: the trainer seeds torch with the run's seed and builds the
    decoder, so this is the very model training starts from (the sink findings' null control)."""
    with torch.random.fork_rng():
        torch.manual_seed(cfg.train.seed)
        return Decoder(cfg.model).eval()


def _rows(scores: torch.Tensor, rowmap: str) -> torch.Tensor:
    """The study's two row maps on causal (..., L, L) scores: softmax, or §3.4's ReLU(s_ik) / max(i - 2, 1)
    with i the 1-based query position (= the keys it may attend)."""
    causal = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
    if rowmap == ATTENTION["softmax"]:
        return torch.softmax(scores.masked_fill(~causal, -math.inf), dim=-1)
    if rowmap == ATTENTION["relu"]:
        keys = torch.arange(1, scores.shape[-1] + 1, device=scores.device, dtype=scores.dtype)
        return torch.relu(scores).masked_fill(~causal, 0.0) / (keys - 2).clamp(min=1)[:, None]
    raise ArgumentError(f"the sinks study's models use {', '.join(ATTENTION.values())} rows, got {rowmap!r}")


def without_bos(weights: torch.Tensor, rowmap: str) -> torch.Tensor:
    """``weights`` (..., L, L) with BOS (key 1) taken from every query i > 1: a softmax row becomes the
    softmax over keys 2..i (the row renormalized without key 1), a ReLU row loses key 1's term and keeps
    §3.4's position divisor. Query 1 may attend only BOS and keeps it (a softmax row needs a key)."""
    out = weights.clone()
    out[..., 1:, 0] = 0.0
    if rowmap == ATTENTION["softmax"]:
        out[..., 1:, :] = out[..., 1:, :] / out[..., 1:, :].sum(-1, keepdim=True)
    return out


@torch.no_grad()
def forward(model: Decoder, inputs: torch.Tensor, *, mask_bos: bool = False) -> torch.Tensor:
    """The study's model (vectors in and out, no norm, FFN, bias or positions) evaluated layer by layer, with
    BOS masked in every layer's rows when ``mask_bos`` (``without_bos``): Attention Sinks Essential's title
    claim made functional, what the model computes when it may not park its mass on the sink. Without the
    mask it equals ``model(inputs)``."""
    cfg = model.cfg
    if (cfg.inputs, cfg.ffn, cfg.norm, cfg.positions, cfg.bias) != ("vectors", "none", "none", "none", False):
        raise ArgumentError("forward takes the sinks study's models: vector inputs, no FFN, norm, bias or positions")
    b, t, _ = inputs.shape
    h, hd = cfg.heads, cfg.head_dim
    x = inputs
    for block in model.layers:
        a = block.attn
        q, k, v = (p(x).view(b, t, h, hd).transpose(1, 2) for p in (a.q_proj, a.k_proj, a.v_proj))
        w = _rows(q @ k.transpose(-1, -2) * hd**-0.5, cfg.rowmap)
        if mask_bos:
            w = without_bos(w, cfg.rowmap)
        out = a.o_proj((w @ v).transpose(1, 2).reshape(b, t, h * hd))
        x = x + out if cfg.residual else out
    return x - inputs if cfg.readout == "writes" else x


def masking(model: Decoder, inputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """The squared-l2 loss (the trainer's) and l-inf loss of the model, with BOS and with BOS masked in every
    layer (``forward``), and the all-zeros predictor's loss."""
    plain, masked = forward(model, inputs), forward(model, inputs, mask_bos=True)
    return {
        "loss": float(vector_loss(plain, targets)),
        "masked_loss": float(vector_loss(masked, targets)),
        "linf": vector_linf(plain, targets),
        "masked_linf": vector_linf(masked, targets),
        "zero_loss": float(vector_loss(torch.zeros_like(targets), targets)),
    }


def position_fractions(weights: torch.Tensor, triggers: torch.Tensor, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Theorem 2 per position, from ``weights`` (layers, rows, heads, L, L) and each row's 0-based trigger:
    for each 0-based query i, the fraction of the rows with i before their trigger (1 < i < j, 1-based) where
    some layer and head has alpha_(i,1) >= 1 - eps, and the count of those rows (NaN and 0 where no row has
    i before its trigger: BOS and the last position)."""
    if not 0 < eps < 1:
        raise ArgumentError(f"eps must be in (0, 1), got {eps!r}")
    i = torch.arange(weights.shape[-1])
    pre = (i >= 1) & (i < triggers[:, None])  # (rows, L)
    hit = (weights[..., 0] >= 1 - eps).any(0).any(1)  # (rows, L): some layer and head
    count = pre.sum(0).numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = (hit & pre).sum(0).numpy() / count
    return np.where(count > 0, frac, np.nan), count


def _one_head(rowmap: str, dim: int, length: int):
    """The bare one-layer one-head model on input vectors that App. E's constructions set by hand (no positions,
    FFN, norm, bias or residual), and its attention module."""
    cfg = ModelConfig(
        context=length,
        inputs="vectors",
        layers=1,
        heads=1,
        d_model=dim,
        positions="none",
        ffn="none",
        norm="none",
        bias=False,
        residual=False,
        rowmap=rowmap,
    )
    model = Decoder(cfg)
    return model, model.layers[0].attn


def theorem3_model(dim: int = DIM, length: int = LENGTH) -> Decoder:
    """Attention Sinks Essential App. E (proof of Theorem 3) as the weights of attnlab's one-layer one-head
    ReLU attention model: W_K = W_V = W_O = I and W_Q = e_2 e_n^T, so s_(i,k) = x_2^(i) x_n^(k). A query
    other than the trigger has x_2 = 0 and scores 0 on every key; the trigger scores 1 exactly on the non-BOS
    tokens before it (the bias channel x_n is 0 on BOS and on the trigger), which ReLU(s) / (j - 2) averages.
    nn.Linear computes W x, the transpose of the paper's row vector x W_Q, and the head's 1/sqrt(n) score
    factor is undone by scaling W_Q by sqrt(n)."""
    model, attn = _one_head(ATTENTION["relu"], dim, length)
    with torch.no_grad():
        for proj in (attn.k_proj, attn.v_proj, attn.o_proj):
            proj.weight.copy_(torch.eye(dim))
        attn.q_proj.weight.zero_()
        attn.q_proj.weight[dim - 1, 1] = math.sqrt(dim)
    return model.eval()


@torch.no_grad()
def theorem3_check(inputs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """``theorem3_model`` scored on a batch: its losses, the largest alpha_(i,1) over every query, and the
    largest weight of any query other than the trigger (the proof: all zero)."""
    model = theorem3_model(inputs.shape[-1], inputs.shape[1])
    weights = attention_weights(model, inputs)[0, :, 0]  # (rows, L, L)
    return {
        **losses(model, inputs, targets),
        "max_bos_weight": float(weights[..., 0].max()),
        "max_weight_off_trigger": float(weights[~mask].max()),
    }


def sink_model(c: float = 20.0, dim: int = DIM, length: int = LENGTH) -> Decoder:
    """A one-layer one-head *softmax* model that solves the task with a sink, built by hand as Theorem 3's
    ReLU one is (the positive control of the BOS-masking rule): keys read BOS's flag x_1 and the bias channel
    x_n, a non-trigger query (x_n = 1) scores c on BOS and 0 elsewhere, the trigger (x_2 = 1) scores c on
    every token with x_n = 1 (the tokens 2..j-1 it averages) and 0 on BOS and itself; W_V = W_O = I but
    BOS's value 0, so the sink writes nothing. Its l-inf loss falls like e^(-c); masking BOS makes every
    non-trigger query average the tokens before it."""
    model, attn = _one_head(ATTENTION["softmax"], dim, length)
    root = math.sqrt(dim)  # undoes the head's 1/sqrt(n) score factor
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj):
            proj.weight.zero_()
        attn.k_proj.weight[0, 0] = 1.0  # k_1 = x_1 (BOS flag)
        attn.k_proj.weight[1, dim - 1] = 1.0  # k_2 = x_n (bias channel)
        attn.q_proj.weight[0, dim - 1] = c * root  # non-trigger query -> BOS
        attn.q_proj.weight[1, 1] = c * root  # trigger query -> the tokens with x_n = 1
        attn.v_proj.weight.copy_(torch.eye(dim))
        attn.v_proj.weight[0, 0] = 0.0  # BOS writes nothing
        attn.o_proj.weight.copy_(torch.eye(dim))
    return model.eval()
