"""The ``sinks`` study (Attention Sinks Essential): attention sinks on trigger-conditional averaging,
softmax against ReLU attention. Does softmax attention trained on that task park its mass on BOS at every
position before the trigger (Theorem 1; some position of some layer, Theorem 2), while ReLU attention
solves it without a sink (Theorem 3)? And, given ``--model``, does a pretrained softmax LM park its
attention on its first token?

The task is Attention Sinks Essential §3.2 (``attnlab.tasks.vectors.TriggerAveraging``, n = L = 16, App. A).
The models are input-free attention stacks (``ModelConfig(inputs="vectors")``, no FFN, norm, bias or
positions), with softmax rows or ReLU attention (``reluattn``: ReLU(score) / max(i - 2, 1), §3.4), in three
shapes: 1 layer x 1 head, §3.4's f(x)^(i) = W_O sum_k alpha_ik W_V x^(k) (§4.1, Theorems 1 and 3); and 2
layers x 2 heads and 4 layers x 4 heads with residual connections (§4.2, App. B.1-B.2, Theorem 2), read
as h_0 = x, h_d = h_(d-1) + Attn_d(h_(d-1)) and output h_D - x, the sum of what the layers write to the
residual stream (``ModelConfig(readout="writes")``): §1 and §3.2 state the target as what the model
writes, zero everywhere but the trigger. Every (map, shape) is trained from several seeds with App. A's
Adam (lr 1e-3, batch 128) until a training batch's l-inf loss is below 1e-2 (the trainer's
``stop_linf``) or a step cap.

Each trained model is read on held-out inputs: 1000 with the trigger uniform over 3..L (the training
distribution D of Theorems 1-2) for the losses and the per-input sink fractions, and 1000 with the
trigger fixed at j = 8, as §4's figures are, for the mean and std maps and the BOS mass (the mean weight
on key 1 over the queries 1 < i < j). Theorem 1's per-input form, per (layer, head) and eps in EPS: the
fraction of pre-trigger positions 1 < i < j with alpha_(i,1) >= 1 - eps, and the fraction of inputs where
every such position does (the theorem's "with probability >= 1 - delta, for all 1 < i < j"); Theorem 2's,
per run: the fraction of inputs where some layer, head and position 1 < i < j does, and per position i the
fraction of the inputs with i < j where some layer and head sinks at i (``position_fractions``: the theorem
guarantees one layer and position; the verdict asks every position, as §4.2's Fig. 3 shows). Beyond Theorem
2, App. B.2 and Fig. 3 show a sink head in every layer; that is checked too, beside what each layer writes to
the residual stream (``layer_writes``). The title's claim is tested functionally: each model is evaluated with
BOS masked in every layer (``forward(mask_bos=True)``), its held-out loss against the unmasked one and the
all-zeros predictor's. Theorem 3's zero-loss ReLU model (App. E) is built as weights (``theorem3_model``) and
scored on the same inputs as a check; ``sink_model`` is its softmax counterpart with a sink, built by hand.

Every claim is decided by ``verdict.decide`` from a rule fixed in this module (``RULE_*``, with the rule
functions ``sinks_everywhere``, ``no_sink``, ``needs_sink``, ``sink_free``, ``real_sinks``) and a computed null
control: the untrained model each softmax run started from (``untrained``), the other arm (the trained
softmax runs under the ReLU half; the ReLU runs under the masking rule's softmax half), or uniform attention
for the real model. No claim has a paper effect size to power against (each rule asks every seed to cross a
fixed threshold), so each MDE says why none applies.

``compute`` writes per run ``raw/<run>_attention.parquet`` (layer, head, query, key, mean, std; 1-based
positions), ``raw/<run>_sinks.csv`` (per layer, head and eps: Theorem 1's fractions, and Theorem 2's per
run), ``raw/<run>_writes.csv`` (per layer: what it writes to the residual stream, ``layer_writes``),
``raw/<run>_untrained_sinks.csv`` (``_sinks.csv`` of the untrained model), ``raw/<run>_positions.csv`` (per
eps, model trained/untrained and 1-based position: Theorem 2's fraction and the inputs counted),
``raw/<run>_masking.csv`` (per model trained/untrained: loss and l-inf with BOS and with BOS masked, the
all-zeros predictor's loss) and then ``raw/<run>_loss.csv`` (steps, the stop, final losses and the all-zeros
predictor's); a run whose files all exist is skipped, training resumes from ``runs/<run>``'s checkpoints (a
run that stopped trains no further), and a run lacking only some files gains them without training. It also
writes ``raw/theorem3.csv``.

With ``--model``, ``compute`` first measures the first-token mass of that pretrained softmax LM into
``real/`` (``compute_real``), and ``summarize`` adds its table, heat map and finding: does a pretrained LM
park attention on its first token, as Attention Sinks Essential argues softmax attention must (§1, §2: real
heads attend to BOS as a default no-op; §3.5, Theorems 1-2: a softmax model that writes nothing by default
needs a sink)? One forward per document of generic text (``tasks.generic_text``, tokenized with the
tokenizer's special tokens, so key 0 is BOS where the tokenizer adds one and the first text token where it
adds none); per head, the softmax weight on key 0 averaged over the queries i >= MIN_QUERY that may attend
key 0, beside the uniform share 1 / (keys the query may attend) averaged over the same queries.
``real/first_token_mass.parquet`` (document, layer, head, queries, mass, uniform; layers and heads 0-based
as the hooks number them) is written, then ``real/config.json``; a folder holding the latter is finished.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import hooks, io, tasks
from ..commands.runs import RunError, context_length
from ..commands.runs import load as load_checkpoint
from ..hooks.load import resolve_checkpoint
from ..model.config import ModelConfig
from ..model.decoder import Decoder
from ..report.plot_sinks import (plot_bos_mass, plot_first_token_mass, plot_heat_mosaic, plot_heatmaps,
                                  plot_linf_curves, plot_loss_curves, plot_masking, plot_positions)
from ..diagnostics.stats import wilson
from ..report.sections import MDE, Figure, Finding, Null, Section, Table
from ..site import ScoreBlock, WeightBlock
from ..tasks import TaskStream
from ..tasks.vectors import TriggerAveraging
from ..train.config import RunConfig
from ..train.trainer import Trainer, vector_linf, vector_loss
from .runner import Study, StudyConfig, StudyError, load_config, register, section
from .verdict import decide

NAME = "sinks"
DIM = 16      # the seed's n (App. A)
LENGTH = 16   # the seed's L (§4)
TRIGGER = 8   # §4: every figure fixes the trigger at j = 8 (1-based)
LINF_TARGET = 1e-2  # App. A trains until the l-infinity loss of the batch is below this
# Theorem 1's eps, the sink threshold alpha_(i,1) >= 1 - eps: the verdicts read EPS_VERDICT, the tables
# every value here.
EPS = (0.1, 0.01)
EPS_VERDICT = 0.1
# Theorem 1's delta: the verdict asks the per-input statement on at least 1 - DELTA of the held-out inputs.
DELTA = 0.1
SINK = 1 - EPS_VERDICT  # drawn on the BOS-mass figure beside ...
NO_SINK = 0.1  # ... the bound under which a ReLU head's BOS mass counts as no sink (§4.1, Fig. 2 c-d)

ATTENTION = {"softmax": "softmax", "relu": "reluattn"}
# A run's raw files; the loss file is written last. The untrained model's sink fractions, Theorem 2 per position
# and the BOS-masking losses came after the first measured folders: run_piece adds them to such a folder's runs
# from their checkpoints, without training.
RAW_KINDS = ("_attention.parquet", "_sinks.csv", "_writes.csv", "_untrained_sinks.csv", "_positions.csv",
             "_masking.csv", "_loss.csv")
# residual: §3.4's single layer is its own write, so 1x1 keeps f = W_O sum alpha W_V x; §4.2 and App. B
# train the multi-layer models with residual connections, read out as the sum of the layers' writes.
ARCHS: dict[str, dict[str, Any]] = {
    "1x1": {"layers": 1, "heads": 1, "residual": False},
    "2x2": {"layers": 2, "heads": 2, "residual": True},
    "4x4": {"layers": 4, "heads": 4, "residual": True},
}
# Steps a run took to App. A's stop in our timing on one CPU thread (seed 0; 1x1, 2x2, 4x4): at lr 1e-3,
# softmax 4219, 5415, 9583 and ReLU 2208, 2902, 4553 (4x4: 18 ms a step); at 3e-3, softmax 3701, 2992, 5491 and
# ReLU 988, 1419, 2832; at 1e-2, softmax 1986, 2029, 2669 and ReLU 182, 346, 2226. "full" keeps App. A's lr
# 1e-3 with caps about 3x those counts; "smoke" fits a few minutes with lr 1e-2 and one 4x4 seed.
BUDGETS: dict[str, dict[str, Any]] = {
    "smoke": {"seeds": {"1x1": 2, "2x2": 2, "4x4": 1}, "cap": {"1x1": 10000, "2x2": 8000, "4x4": 8000},
              "lr": {"1x1": 1e-2, "2x2": 1e-2, "4x4": 1e-2}, "batch": 128, "samples": 1000},
    "full": {"seeds": {"1x1": 3, "2x2": 3, "4x4": 3}, "cap": {"1x1": 20000, "2x2": 20000, "4x4": 30000},
             "lr": {"1x1": 1e-3, "2x2": 1e-3, "4x4": 1e-3}, "batch": 128, "samples": 1000},
}

# The real-model part: the first-token mass of a pretrained softmax LM, in folder/real.
REAL = "real"
REAL_TABLE = "first_token_mass.parquet"
# Queries before this 0-based position are left out: there the uniform share 1/(i+1) is itself large,
# so a high weight on key 0 says nothing about a sink.
MIN_QUERY = 8
# The sink threshold on a head's first-token mass; Gu et al. 2024 ("When attention sink emerges in
# language models", cited by Attention Sinks Essential §1) call a head a sink head at the same 0.3.
SINK_MASS = 0.3
# Layers 0 and 1 are left out of the verdict: in pretrained LMs sinks are reported from the third layer
# on (Xiao et al. 2024, "Efficient streaming language models with attention sinks", cited by Attention Sinks
# Essential §1).
SKIP_LAYERS = 2
HALF = 0.5  # the table also counts heads with more than half their weight on key 0
REAL_PLANS = {"smoke": {"documents": 4, "tokens": 256}, "full": {"documents": 32, "tokens": 1024}}
DOC_SEED = 4_004_000  # any fixed seed; generic_text's stream is apart from every suite's and b_auto's


def runs(plan: dict[str, Any]) -> list[str]:
    """A budget's runs, ``<attention>_<arch>_s<k>`` for the k-th seed (seed = the study's seed + k)."""
    return [f"{att}_{arch}_s{k}" for arch in ARCHS for att in ATTENTION for k in range(plan["seeds"][arch])]


def _parts(run: str) -> tuple[str, str, int]:
    attention, arch, k = run.split("_")
    return attention, arch, int(k[1:])


def run_config(run: str, plan: dict[str, Any], seed: int) -> RunConfig:
    """The run's config (``seed``: the study's; the run trains from seed + k): the model of the run's shape
    (vectors in and out, no FFN/norm/bias/positions; 1x1 without residual, deeper ones with residual and
    readout writes) and App. A's optimizer (Adam: AdamW without decay, betas (0.9, 0.999), constant lr) for at
    most the budget's cap of steps; the study stops it earlier at App. A's l-inf rule."""
    attention, arch, k = _parts(run)
    shape = ARCHS[arch]
    cap, lr = plan["cap"][arch], plan["lr"][arch]
    model = {"context": LENGTH, "inputs": "vectors", "layers": shape["layers"], "heads": shape["heads"],
             "d_model": DIM, "positions": "none", "ffn": "none", "norm": "none", "bias": False,
             "residual": shape["residual"], "readout": "writes" if shape["residual"] else "stream",
             "rowmap": ATTENTION[attention]}
    train = {"steps": cap, "batch": plan["batch"], "lr": lr, "min_lr": lr, "warmup": 0, "weight_decay": 0.0,
             "betas": [0.9, 0.999], "clip": 0.0, "seed": seed + k, "eval_every": max(1, cap // 10),
             "eval_batches": 1, "probes": False, "checkpoint_every": max(1, cap // 8), "tensorboard": False}
    return RunConfig.from_dict({"model": model, "train": train})


def _linf_hook(trainer: Trainer) -> dict[str, float]:
    inputs, targets = trainer.stream.val_batches(trainer.cfg.train.batch, 1)[0]
    with torch.no_grad():
        return {"val_linf": vector_linf(trainer.model(inputs), targets)}


@torch.no_grad()
def attention_weights(model, inputs: torch.Tensor) -> torch.Tensor:
    """Every (layer, head)'s weights alpha_(i,k) on every input: (layers, rows, heads, L, L)."""
    seen: dict[int, list[WeightBlock]] = {}

    def observe(block: WeightBlock) -> None:
        seen.setdefault(block.layer, []).append(block)

    model.eval()
    with model.observed(observe, weights=True):
        model(inputs)
    return torch.stack([torch.cat([b.weights.detach() for b in sorted(seen[layer], key=lambda b: b.query_start)],
                                  dim=-2) for layer in sorted(seen)])


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
        raise ValueError(f"eps must be in (0, 1), got {eps!r}")
    if weights.dim() != 5 or triggers.shape != weights.shape[1:2]:
        raise ValueError(f"weights must be (layers, rows, heads, L, L) and triggers (rows,), got "
                         f"{tuple(weights.shape)} and {tuple(triggers.shape)}")
    if int(triggers.min()) < 2:
        raise ValueError(f"every trigger needs a pre-trigger position (0-based trigger >= 2), got "
                         f"{int(triggers.min())}")
    i = torch.arange(weights.shape[-1])
    pre = ((i >= 1) & (i < triggers[:, None]))[None, :, None, :]  # (1, rows, 1, L)
    hit = weights[..., 0] >= 1 - eps                              # (layers, rows, heads, L)
    return {"positions": (hit & pre).sum((1, 3)).double() / pre.sum(),
            "inputs_all": (hit | ~pre).all(-1).double().mean(1),
            "inputs_exists": (hit & pre).any(-1).any(-1).any(0).double().mean()}


@torch.no_grad()
def losses(model, inputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """The model's squared-l2 loss (the trainer's) and l-inf loss, and the all-zeros predictor's."""
    model.eval()
    out = model(inputs)
    zero = torch.zeros_like(targets)
    return {"loss": float(vector_loss(out, targets)), "linf": vector_linf(out, targets),
            "zero_loss": float(vector_loss(zero, targets)), "zero_linf": vector_linf(zero, targets)}


@torch.no_grad()
def layer_writes(model, inputs: torch.Tensor, mask: torch.Tensor) -> list[dict[str, float]]:
    """Per layer d, what Attn_d writes to the residual stream (its output before the residual add; the
    study's models have no norm, FFN or dropout, so this is the whole write): the mean l2 norm at the
    trigger and off it, and off the trigger the mean cosine between layer d's write and the sum of the other
    layers' writes (-1 where layer d cancels them; NaN for one layer)."""
    writes: list[torch.Tensor] = []
    handles = [block.attn.register_forward_hook(lambda module, args, out: writes.append(out.detach()))
               for block in model.layers]
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
        rows.append({"layer": d + 1, "write_trigger": float(w[mask].norm(dim=-1).mean()),
                     "write_elsewhere": float(w[~mask].norm(dim=-1).mean()), "cos_others": float(cos)})
    return rows


def theorem3_model(dim: int = DIM, length: int = LENGTH) -> Decoder:
    """Attention Sinks Essential App. E (proof of Theorem 3) as the weights of attnlab's one-layer one-head
    ReLU attention model: W_K = W_V = W_O = I and W_Q = e_2 e_n^T, so s_(i,k) = x_2^(i) x_n^(k). A query
    other than the trigger has x_2 = 0 and scores 0 on every key; the trigger scores 1 exactly on the non-BOS
    tokens before it (the bias channel x_n is 0 on BOS and on the trigger), which ReLU(s) / (j - 2) averages.
    nn.Linear computes W x, the transpose of the paper's row vector x W_Q, and the head's 1/sqrt(n) score
    factor is undone by scaling W_Q by sqrt(n)."""
    cfg = ModelConfig(context=length, inputs="vectors", layers=1, heads=1, d_model=dim, positions="none",
                      ffn="none", norm="none", bias=False, residual=False, rowmap=ATTENTION["relu"])
    model = Decoder(cfg)
    attn = model.layers[0].attn
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
    return {**losses(model, inputs, targets), "max_bos_weight": float(weights[..., 0].max()),
            "max_weight_off_trigger": float(weights[~mask].max())}


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
    raise ValueError(f"the sinks study's models use {', '.join(ATTENTION.values())} rows, got {rowmap!r}")


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
        raise ValueError("forward takes the sinks study's models: vector inputs, no FFN, norm, bias or positions")
    b, t, _ = inputs.shape
    h, hd = cfg.heads, cfg.head_dim
    x = inputs
    for block in model.layers:
        a = block.attn
        q, k, v = (p(x).view(b, t, h, hd).transpose(1, 2) for p in (a.q_proj, a.k_proj, a.v_proj))
        w = _rows(q @ k.transpose(-1, -2) * hd ** -0.5, cfg.rowmap)
        if mask_bos:
            w = without_bos(w, cfg.rowmap)
        out = a.o_proj((w @ v).transpose(1, 2).reshape(b, t, h * hd))
        x = x + out if cfg.residual else out
    return x - inputs if cfg.readout == "writes" else x


def masking(model: Decoder, inputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """The squared-l2 loss (the trainer's) and l-inf loss of the model, with BOS and with BOS masked in every
    layer (``forward``), and the all-zeros predictor's loss."""
    plain, masked = forward(model, inputs), forward(model, inputs, mask_bos=True)
    return {"loss": float(vector_loss(plain, targets)), "masked_loss": float(vector_loss(masked, targets)),
            "linf": vector_linf(plain, targets), "masked_linf": vector_linf(masked, targets),
            "zero_loss": float(vector_loss(torch.zeros_like(targets), targets))}


def position_fractions(weights: torch.Tensor, triggers: torch.Tensor, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Theorem 2 per position, from ``weights`` (layers, rows, heads, L, L) and each row's 0-based trigger:
    for each 0-based query i, the fraction of the rows with i before their trigger (1 < i < j, 1-based) where
    some layer and head has alpha_(i,1) >= 1 - eps, and the count of those rows (NaN and 0 where no row has
    i before its trigger: BOS and the last position)."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps!r}")
    i = torch.arange(weights.shape[-1])
    pre = (i >= 1) & (i < triggers[:, None])                    # (rows, L)
    hit = (weights[..., 0] >= 1 - eps).any(0).any(1)            # (rows, L): some layer and head
    count = pre.sum(0).numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = (hit & pre).sum(0).numpy() / count
    return np.where(count > 0, frac, np.nan), count


def sink_model(c: float = 20.0, dim: int = DIM, length: int = LENGTH) -> Decoder:
    """A one-layer one-head *softmax* model that solves the task with a sink, built by hand as Theorem 3's
    ReLU one is (the positive control of the BOS-masking rule): keys read BOS's flag x_1 and the bias channel
    x_n, a non-trigger query (x_n = 1) scores c on BOS and 0 elsewhere, the trigger (x_2 = 1) scores c on
    every token with x_n = 1 (the tokens 2..j-1 it averages) and 0 on BOS and itself; W_V = W_O = I but
    BOS's value 0, so the sink writes nothing. Its l-inf loss falls like e^(-c); masking BOS makes every
    non-trigger query average the tokens before it."""
    cfg = ModelConfig(context=length, inputs="vectors", layers=1, heads=1, d_model=dim, positions="none",
                      ffn="none", norm="none", bias=False, residual=False, rowmap=ATTENTION["softmax"])
    model = Decoder(cfg)
    attn = model.layers[0].attn
    root = math.sqrt(dim)  # undoes the head's 1/sqrt(n) score factor
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj):
            proj.weight.zero_()
        attn.k_proj.weight[0, 0] = 1.0             # k_1 = x_1 (BOS flag)
        attn.k_proj.weight[1, dim - 1] = 1.0       # k_2 = x_n (bias channel)
        attn.q_proj.weight[0, dim - 1] = c * root  # non-trigger query -> BOS
        attn.q_proj.weight[1, 1] = c * root        # trigger query -> the tokens with x_n = 1
        attn.v_proj.weight.copy_(torch.eye(dim))
        attn.v_proj.weight[0, 0] = 0.0             # BOS writes nothing
        attn.o_proj.weight.copy_(torch.eye(dim))
    return model.eval()


def _sink_rows(model: Decoder, batch, ids: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """Theorem 1 per (layer, head) and Theorem 2 per run (``sink_fractions``), and Theorem 2 per position
    (``position_fractions``), of ``model`` on ``batch``, for every eps in EPS."""
    weights = attention_weights(model, batch.inputs)
    triggers = batch.mask.int().argmax(-1)
    layers, _, heads = weights.shape[:3]
    sinks, positions = [], []
    for eps in EPS:
        got = sink_fractions(weights, triggers, eps)
        for layer in range(layers):
            for head in range(heads):
                sinks.append({**ids, "layer": layer + 1, "head": head + 1, "eps": eps,
                              "positions": float(got["positions"][layer, head]),
                              "inputs_all": float(got["inputs_all"][layer, head]),
                              "inputs_exists": float(got["inputs_exists"])})
        frac, count = position_fractions(weights, triggers, eps)
        positions += [{**ids, "eps": eps, "position": i + 1, "fraction": float(frac[i]), "inputs": int(count[i])}
                      for i in range(len(frac)) if count[i] > 0]
    return sinks, positions


def run_piece(run: str, plan: dict[str, Any], seed: int, folder: Path, progress: bool) -> None:
    """Train (or resume) one run to App. A's stop or the cap, then write whichever of its raw files are
    missing: maps, sink fractions, layer writes, the untrained model's sink fractions, Theorem 2 per
    position and the BOS-masking losses (trained and untrained), and the losses last. A run whose files all
    exist is skipped; one that has trained to its end only measures (a folder made before a file kind existed
    gains it without training)."""
    raw = folder / "raw"
    missing = [kind for kind in RAW_KINDS if not (raw / f"{run}{kind}").is_file()]
    if not missing:
        return
    attention, arch, k = _parts(run)
    cfg = run_config(run, plan, seed)
    stream = TaskStream("trigger_averaging", LENGTH, seed=cfg.train.seed, dim=DIM)
    trainer = Trainer(cfg, folder / "runs" / run, resume=True, progress=progress, stream=stream,
                      eval_hooks=(_linf_hook,), stop_linf=LINF_TARGET)
    summary = trainer.run()
    model, null = trainer.model, untrained(cfg)
    # Held-out inputs apart from the stream's: the training distribution (j uniform over 3..L) for the
    # losses and Theorems 1-2, and §4's fixed trigger j = 8 for the maps and their own losses.
    uniform = TriggerAveraging(dim=DIM).generate(plan["samples"], LENGTH, seed=10_000 + cfg.train.seed)
    fixed = TriggerAveraging(dim=DIM, trigger=TRIGGER).generate(plan["samples"], LENGTH, seed=20_000 + cfg.train.seed)
    ids = {"run": run, "attention": attention, "arch": arch, "seed": cfg.train.seed}

    def write(kind: str, frame: pd.DataFrame) -> None:
        if kind in missing:
            io.write_table(raw / f"{run}{kind}".removesuffix(".csv"), frame)

    if "_attention.parquet" in missing:
        mean, std = attention_maps(model, fixed.inputs)
        layers, heads = mean.shape[:2]
        index = np.indices((layers, heads, LENGTH, LENGTH)).reshape(4, -1)
        frame = pd.DataFrame({**ids, "layer": index[0] + 1, "head": index[1] + 1, "query": index[2] + 1,
                              "key": index[3] + 1, "mean": mean.reshape(-1).numpy(), "std": std.reshape(-1).numpy()})
        io.write_parquet(raw / f"{run}_attention.parquet", frame,
                         metadata={"samples": plan["samples"], "trigger": TRIGGER, "length": LENGTH,
                                   "seed": 20_000 + cfg.train.seed})
    trained_sinks, trained_positions = _sink_rows(model, uniform, ids)
    null_sinks, null_positions = _sink_rows(null, uniform, ids)
    write("_sinks.csv", pd.DataFrame(trained_sinks))
    write("_writes.csv", pd.DataFrame([{**ids, **row} for row in layer_writes(model, uniform.inputs, uniform.mask)]))
    write("_untrained_sinks.csv", pd.DataFrame(null_sinks))
    write("_positions.csv", pd.DataFrame([{**row, "model": "trained"} for row in trained_positions]
                                         + [{**row, "model": "untrained"} for row in null_positions]))
    write("_masking.csv", pd.DataFrame([{**ids, "model": name, **masking(m, uniform.inputs, uniform.targets)}
                                        for name, m in (("trained", model), ("untrained", null))]))
    train = pd.read_csv(folder / "runs" / run / "train.csv")
    row = {**ids, "cap": cfg.train.steps, "steps": summary["steps"], "met_linf": summary["stopped"],
           # the stop's batch is scored on the final model; without a stop, the last logged batch (before its update)
           "batch_linf": summary["stop_batch_linf"] if summary["stopped"] else float(train["linf"].iloc[-1]),
           "lr": cfg.train.lr, "train_loss": summary["loss"], "train_seconds": summary["seconds"],
           **{f"uniform_{k}": v for k, v in losses(model, uniform.inputs, uniform.targets).items()},
           **{f"fixed_{k}": v for k, v in losses(model, fixed.inputs, fixed.targets).items()}}
    write("_loss.csv", pd.DataFrame([row]))


def theorem3_piece(plan: dict[str, Any], seed: int, folder: Path) -> None:
    """``theorem3_check`` on held-out inputs of the training distribution, into raw/theorem3.csv."""
    path = folder / "raw" / "theorem3.csv"
    if path.is_file():
        return
    batch = TriggerAveraging(dim=DIM).generate(plan["samples"], LENGTH, seed=30_000 + seed)
    io.write_table(path.with_suffix(""), pd.DataFrame([{"samples": plan["samples"],
                                                        **theorem3_check(batch.inputs, batch.targets, batch.mask)}]))


def first_key_sums(block: ScoreBlock, min_query: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per head of one score block, over its queries at positions >= ``min_query`` whose row may attend
    key 0: the summed softmax weight on key 0, the summed uniform share 1 / (allowed keys) and the count
    (three float64 (heads,) tensors, summed over the batch too). Attention Sinks Essential §4 measures a sink as the
    weight on the first position; the softmax is redone in float64 over the allowed keys only, from the
    very scores the model's own softmax sees."""
    z = block.scores.double()
    allowed = block.allowed.expand_as(z)
    w0 = torch.exp(z[..., 0] - torch.logsumexp(z.masked_fill(~allowed, -math.inf), dim=-1))
    positions = torch.arange(block.scores.shape[-2], device=z.device) + block.first_position
    counted = allowed[..., 0] & (positions >= min_query)
    uniform = 1.0 / allowed.sum(-1).clamp(min=1).double()
    return ((w0 * counted).sum((0, 2)), (uniform * counted).sum((0, 2)), counted.sum((0, 2)).double())


@torch.no_grad()
def first_token_mass(model, documents: list[list[int]], min_query: int = MIN_QUERY) -> pd.DataFrame:
    """One row per (document, layer, head): the first-token mass (mean softmax weight on key 0 over the
    queries i >= ``min_query`` that may attend it; Attention Sinks Essential §4's sink measure on a pretrained
    model), the
    uniform share 1 / (allowed keys) averaged over the same queries, and their count."""
    short = [d for d, ids in enumerate(documents) if len(ids) <= min_query]
    if short:
        raise RunError(f"documents {short} have no query at position >= {min_query}")
    device = next(model.parameters()).device
    rows = []
    for d, ids in enumerate(documents):
        sums: dict[int, list[torch.Tensor]] = {}

        def observe(block: ScoreBlock) -> None:
            parts = first_key_sums(block, min_query)
            seen = sums.get(block.layer)
            sums[block.layer] = list(parts) if seen is None else [a + b for a, b in zip(seen, parts, strict=True)]

        with hooks.observed(model, observe):
            model(torch.tensor([ids], device=device))
        for layer in sorted(sums):
            mass, uniform, count = (t.cpu().numpy() for t in sums[layer])
            for head in range(len(mass)):
                rows.append((d, layer, head, int(count[head]), mass[head] / count[head], uniform[head] / count[head]))
    return pd.DataFrame(rows, columns=["document", "layer", "head", "queries", "mass", "uniform"])


def documents(tokenizer, n: int, tokens: int, seed: int) -> list[list[int]]:
    """``n`` documents of generic text, tokenized with the tokenizer's special tokens, cut to ``tokens``."""
    docs = []
    for d in range(n):
        # every word is at least one token, so ``tokens`` words always fill the document
        text = tasks.generic_text(tokens, seed=DOC_SEED + 1000 * seed + d)
        ids = tokenizer(text, add_special_tokens=True)["input_ids"]
        if len(ids) < tokens:
            raise RunError(f"the tokenizer turned {tokens} words into only {len(ids)} tokens")
        docs.append(ids[:tokens])
    return docs


def compute_real(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    """Measure the first-token mass of ``cfg.model`` into folder/real (skipped when its config.json
    exists). Errors loading the model come back as one-line StudyErrors."""
    folder = Path(folder) / REAL
    if (folder / "config.json").is_file():
        return
    plan = REAL_PLANS[cfg.budget]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        checkpoint = resolve_checkpoint(cfg.model, log=print)
        model, tokenizer = load_checkpoint(str(checkpoint), device)
        tokens = min(plan["tokens"], context_length(model) or plan["tokens"])
        docs = documents(tokenizer, plan["documents"], tokens, cfg.seed)
        started = time.monotonic()
        frame = first_token_mass(model, docs)
    except (hooks.LoadError, hooks.UnsupportedModel, RunError) as exc:
        raise StudyError(f"--model {cfg.model}: {exc}") from None
    seconds = time.monotonic() - started
    n_layers, n_heads = hooks.num_heads(model)
    bos = tokenizer.bos_token_id
    config = {"model": cfg.model, "checkpoint": str(checkpoint), "model_type": model.config.model_type,
              "layers": n_layers, "heads": n_heads, "documents": len(docs), "tokens": tokens,
              "min_query": MIN_QUERY, "seed": cfg.seed, "device": device,
              "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
              "adds_bos": bos is not None and all(ids[0] == bos for ids in docs),
              "first_tokens": sorted({tokenizer.convert_ids_to_tokens(ids[0]) for ids in docs}),
              "seconds": round(seconds, 1)}
    io.write_parquet(folder / REAL_TABLE, frame, metadata=config)
    io.write_json(folder / "config.json", config)  # last: a folder holding it is finished
    if progress:
        print(f"sinks real: {len(docs)} documents x {tokens} tokens on {cfg.model} in {seconds:.1f} s", flush=True)


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    if cfg.model is not None:
        # before the toy runs, so that a --model that does not load fails in seconds, not minutes
        compute_real(cfg, folder, progress)
    plan = BUDGETS[cfg.budget]
    # The models are 16 wide: a second intra-op thread costs more in synchronisation than it saves, and
    # on a shared CPU it made steps up to 50x slower in our timing.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        theorem3_piece(plan, cfg.seed, Path(folder))
        for run in runs(plan):
            run_piece(run, plan, cfg.seed, Path(folder), progress)
    finally:
        torch.set_num_threads(threads)


# ----------------------------------------------------------------------------------------------- summary

@dataclass(frozen=True)
class Raw:
    """A folder's raw files over its runs: maps, sink fractions, losses, layer writes, the Theorem 3 check, the
    untrained models' sink fractions, Theorem 2 per position (trained and untrained) and the BOS-masking
    losses (trained and untrained)."""

    maps: pd.DataFrame
    sinks: pd.DataFrame
    loss: pd.DataFrame
    writes: pd.DataFrame
    theorem3: pd.DataFrame
    untrained: pd.DataFrame
    positions: pd.DataFrame
    masking: pd.DataFrame


def _read(folder: Path, names: list[str]) -> Raw:
    """The raw files of ``names`` (a StudyError naming what is missing, and the command that adds it)."""
    raw = folder / "raw"
    missing = [run for run in names if not all((raw / f"{run}{kind}").is_file() for kind in RAW_KINDS)]
    missing += [] if (raw / "theorem3.csv").is_file() else ["theorem3"]
    if missing:
        raise StudyError(f"{folder} lacks the raw results of {', '.join(missing)}; run "
                         f"`{load_config(folder).command(folder)}` to finish it")

    def read(kind: str) -> pd.DataFrame:
        reader = pd.read_parquet if kind.endswith(".parquet") else pd.read_csv
        return pd.concat([reader(raw / f"{run}{kind}") for run in names], ignore_index=True)

    return Raw(read("_attention.parquet"), read("_sinks.csv"), read("_loss.csv"), read("_writes.csv"),
               pd.read_csv(raw / "theorem3.csv"), read("_untrained_sinks.csv"), read("_positions.csv"),
               read("_masking.csv"))


def _eps(eps: float) -> str:
    return f"eps{eps:g}"


def run_table(loss: pd.DataFrame, sinks: pd.DataFrame) -> pd.DataFrame:
    """Per run: steps to App. A's stop (or the cap), whether it was met (``learned``: the verdicts read only
    runs that met it), the final batch and held-out l-inf losses, the held-out loss against the all-zeros
    predictor's, and Theorem 2's fraction of inputs with a sink somewhere per eps."""
    out = loss[["run", "attention", "arch", "seed", "cap", "steps", "met_linf", "batch_linf", "uniform_linf",
                "uniform_loss", "uniform_zero_loss", "fixed_linf", "fixed_loss"]].copy()
    out["loss_ratio"] = out["uniform_loss"] / out["uniform_zero_loss"]
    out["learned"] = out["met_linf"].astype(bool)
    exists = sinks.groupby(["run", "eps"])["inputs_exists"].first().unstack("eps")
    for eps in EPS:
        out[f"thm2_inputs_{_eps(eps)}"] = out["run"].map(exists[eps])
    return out


def bos_table(maps: pd.DataFrame) -> pd.DataFrame:
    """Per (run, layer, head): the BOS mass before the trigger (mean over queries 1 < i < j of the mean
    weight on key 1), its smallest and largest query, the mean row total over those queries (1 for
    softmax; ReLU rows need not sum to 1) and the weight on BOS at the trigger query."""
    pre = maps[(maps["query"] > 1) & (maps["query"] < TRIGGER)]
    keys = ["run", "attention", "arch", "layer", "head"]
    bos = pre[pre["key"] == 1].groupby(keys, sort=False)["mean"]
    rows = pre.groupby(keys + ["query"], sort=False)["mean"].sum().groupby(keys, sort=False).mean()
    at_trigger = maps[(maps["query"] == TRIGGER) & (maps["key"] == 1)].set_index(keys)["mean"]
    table = pd.DataFrame({"bos_mass": bos.mean(), "bos_min_query": bos.min(), "bos_max_query": bos.max(),
                          "row_total": rows, "bos_at_trigger": at_trigger}).reset_index()
    return table


def sink_head_table(bos: pd.DataFrame, sinks: pd.DataFrame) -> pd.DataFrame:
    """``bos_table`` beside Theorem 1's per-input fractions of every (run, layer, head), per eps:
    thm1_positions (pre-trigger positions with alpha_(i,1) >= 1 - eps) and thm1_inputs (inputs where all
    of them do)."""
    wide = sinks.pivot_table(index=["run", "layer", "head"], columns="eps", values=["positions", "inputs_all"])
    flat = pd.DataFrame({f"thm1_{'positions' if stat == 'positions' else 'inputs'}_{_eps(eps)}": wide[(stat, eps)]
                         for eps in EPS for stat in ("positions", "inputs_all")}).reset_index()
    return bos.merge(flat, on=["run", "layer", "head"], how="left")


def _seed_label(run: str) -> str:
    return run.rsplit("_", 1)[1]


# ---------------------------------------------------------------------------------- decision rules
# Fixed before any number was read. Every sink rule asks something of *every* learned seed: the paper states
# its theorems for any model that reaches low loss, so one seed without a sink is a counterexample.

def sinks_everywhere(per_seed) -> bool:
    """The sink rules' form: each seed's statistic (a fraction of held-out inputs) is at least 1 - DELTA."""
    values = np.asarray(per_seed, dtype=float)
    return bool(values.size and (values >= 1 - DELTA).all())


def no_sink(bos_mass) -> bool:
    """The ReLU half: each seed's largest BOS mass before the trigger is under NO_SINK."""
    values = np.asarray(bos_mass, dtype=float)
    return bool(values.size and (values < NO_SINK).all())


# Masking BOS must cost a softmax seed at least NEED x the all-zeros predictor's loss: with BOS masked it does no
# better than predicting nothing, so the sink carries what it learned. A ReLU seed may lose at most MASK_TOL x
# that loss: masking BOS costs it under 1% of what the task is worth.
NEED = 1.0
MASK_TOL = 0.01


def needs_sink(rise, zero_loss) -> bool:
    """Each seed's loss rise from masking BOS (masked - unmasked) is at least NEED x its all-zeros loss."""
    rise, zero = np.asarray(rise, dtype=float), np.asarray(zero_loss, dtype=float)
    return bool(rise.size and (rise >= NEED * zero).all())


def sink_free(rise, zero_loss) -> bool:
    """Each seed's loss rise from masking BOS is at most MASK_TOL x its all-zeros loss."""
    rise, zero = np.asarray(rise, dtype=float), np.asarray(zero_loss, dtype=float)
    return bool(rise.size and (rise <= MASK_TOL * zero).all())


def real_sinks(median_mass) -> bool:
    """The real-model rule: in a majority of the layers read, the median head's first-token mass >= SINK_MASS."""
    values = np.asarray(median_mass, dtype=float)
    return bool(values.size and (values >= SINK_MASS).sum() > values.size / 2)


RULE_RELU = f"every learned ReLU seed's largest BOS mass before the trigger (j = {TRIGGER}) is < {NO_SINK:g}"
RULE_THM1 = (f"every learned softmax seed has a head with alpha_(i,1) >= {1 - EPS_VERDICT:g} at every 1 < i < j on "
             f">= {1 - DELTA:g} of its held-out inputs (j uniform over 3..L), and {RULE_RELU}")
RULE_THM2 = (f"for every pre-trigger position i = 2..{LENGTH - 1}, every learned softmax seed has some layer and head "
             f"with alpha_(i,1) >= {1 - EPS_VERDICT:g} on >= {1 - DELTA:g} of its held-out inputs with i < j, and "
             f"{RULE_RELU}")
RULE_LAYERS = (f"in every learned softmax seed, every layer has a head with alpha_(i,1) >= {1 - EPS_VERDICT:g} at "
               f"every 1 < i < j on >= {1 - DELTA:g} of its held-out inputs")
RULE_MASK = (f"masking BOS in every layer raises every learned softmax seed's held-out loss by at least {NEED:g} x the "
             f"all-zeros predictor's loss, and every learned ReLU seed's by at most {MASK_TOL:g} x it (every shape)")
RULE_REAL = (f"in a majority of the layers after the first {SKIP_LAYERS}, the median head's first-token mass is "
             f">= {SINK_MASS:g}")
NULL_SINK = ("the untrained softmax model of each seed (the weights its training started from) under the softmax "
             "half, and the trained softmax arm under the ReLU half")
NULL_MASK = ("the trained ReLU arm under the softmax half (masking BOS costs >= the all-zeros loss in every seed), "
             "and the untrained softmax model of each seed under it too")
NULL_REAL = ("uniform attention over the same queries (the uniform share 1 / (keys attended), per layer) under the "
             "same rule")


def _no_mde(unit: str, samples: int, what: str) -> MDE:
    lo, hi = wilson(round((1 - DELTA) * samples), samples)
    return MDE(None, None, unit, f"none applies: {what}; the paper gives no effect size to detect, and the rule "
                                 f"asks every seed to cross a fixed threshold (a fraction {1 - DELTA:g} of "
                                 f"{samples} held-out inputs is known to [{lo:.3f}, {hi:.3f}], 95% Wilson)")


def _fmt(values: pd.Series, digits: str = ".3g") -> str:
    return "/".join(f"{v:{digits}}" for v in values)


def _learned(runs_: pd.DataFrame) -> str | None:
    """The precondition: None when every run met App. A's stop, else the reason."""
    if runs_["learned"].all():
        return None
    slow = ", ".join(runs_.index[~runs_["learned"]])
    return (f"{slow} did not reach App. A's l-inf < {LINF_TARGET:g} within the step cap, so the claim is not tested "
            "on them")


def best_head(sinks: pd.DataFrame) -> pd.Series:
    """Per run: the largest fraction of inputs with Theorem 1's sink at every 1 < i < j, over (layer, head)."""
    return sinks[np.isclose(sinks["eps"], EPS_VERDICT)].groupby("run")["inputs_all"].max()


def every_layer(sinks: pd.DataFrame) -> pd.Series:
    """Per run: the smallest, over layers, of the layer's best head's fraction with Theorem 1's sink."""
    part = sinks[np.isclose(sinks["eps"], EPS_VERDICT)]
    return part.groupby(["run", "layer"])["inputs_all"].max().groupby("run").min()


def every_position(positions: pd.DataFrame, model: str) -> pd.Series:
    """Per run: the smallest, over pre-trigger positions, of the fraction of inputs where some layer and head
    sinks at that position (Theorem 2 per position) for ``model`` (trained or untrained)."""
    part = positions[(positions["model"] == model) & np.isclose(positions["eps"], EPS_VERDICT)]
    return part.groupby("run")["fraction"].min()


def position_table(positions: pd.DataFrame) -> pd.DataFrame:
    """Per run, eps and 1-based pre-trigger position: Theorem 2's fraction for the trained and the untrained model,
    and the held-out inputs with that position before their trigger."""
    keys = ["run", "attention", "arch", "seed", "eps", "position"]
    wide = positions.pivot_table(index=keys, columns="model", values="fraction").reset_index()
    count = positions[positions["model"] == "trained"].set_index(keys)["inputs"]
    return wide.merge(count.reset_index(), on=keys).rename_axis(columns=None)


def finding(arch: str, table: pd.DataFrame, heads: pd.DataFrame, untrained: pd.DataFrame,
            positions: pd.DataFrame, samples: int) -> Finding:
    """Attention Sinks Essential's claim for one shape, decided by ``decide`` over the runs that met App. A's
    l-inf rule (a shape with any run that did not is "not checked"). 1x1 (Theorem 1, rule RULE_THM1): every
    softmax seed has the all-positions sink on at least 1 - DELTA of held-out inputs. Deeper (Theorem 2 read
    per position, rule RULE_THM2): at every pre-trigger position some layer and head of every softmax seed
    sinks on at least 1 - DELTA of the inputs with that position before their trigger; Theorem 2 guarantees
    one layer and position, §4.2's Fig. 3 shows every head sinking at every one. Both: every ReLU seed's BOS
    mass stays under NO_SINK. Null (NULL_SINK): the untrained softmax models, and the softmax arm under the
    ReLU half."""
    shape = ARCHS[arch]
    eps, need = EPS_VERDICT, 1 - DELTA
    runs_ = table[table["arch"] == arch].set_index("run")
    part = heads[heads["arch"] == arch]
    soft_runs = list(runs_.index[runs_["attention"] == "softmax"])
    here = positions[positions["arch"] == arch]
    if shape["layers"] == 1:
        claim = (f"(1 layer x 1 head, Theorems 1 and 3) trained to App. A's l-inf < {LINF_TARGET:g}, softmax "
                 f"attention puts alpha_(i,1) >= {1 - eps:g} at every position 1 < i < j on at least {need:g} of "
                 f"held-out inputs (Theorem 1), while ReLU attention's BOS mass before the trigger stays under "
                 f"{NO_SINK:g}")
        rule, what = RULE_THM1, "inputs with a sink at every 1 < i < j"
        soft = part[part["attention"] == "softmax"].groupby("run")[f"thm1_inputs_{_eps(eps)}"].max()
        null_soft = best_head(untrained[untrained["arch"] == arch])
    else:
        claim = (f"({shape['layers']} layers x {shape['heads']} heads with residual connections, Theorem 2 read per "
                 f"position) trained to App. A's l-inf < {LINF_TARGET:g}, softmax attention has, at every "
                 f"pre-trigger position 1 < i < j, some layer and head with alpha_(i,1) >= {1 - eps:g} on at least "
                 f"{need:g} of held-out inputs (Theorem 2 guarantees one layer and position; §4.2 and Fig. 3 show "
                 f"sinks at every one), while no ReLU head's BOS mass before the trigger reaches {NO_SINK:g}")
        rule, what = RULE_THM2, "lowest position's fraction of inputs with a sink there"
        soft = every_position(here, "trained")
        null_soft = every_position(here, "untrained")
    soft = soft.reindex(soft_runs)
    null_soft = null_soft.reindex(soft_runs)
    relu = part[part["attention"] == "relu"].groupby("run")["bos_mass"].max()
    soft_bos = part[part["attention"] == "softmax"].groupby("run")["bos_mass"].max()

    def layers(run: str) -> str:
        rows = part[part["run"] == run].groupby("layer")["bos_mass"].max()
        return "/".join(f"{m:.2f}" for m in rows) if len(rows) > 1 else ""

    def seeds(att: str) -> str:
        items = []
        for run, r in runs_[runs_["attention"] == att].iterrows():
            stop = f"{r.steps} steps, met" if r.met_linf else f"cap {r.cap} hit, batch l-inf {r.batch_linf:.3g}"
            value = (f"{what} {soft[run]:.3g}" if att == "softmax" else f"largest BOS mass {relu[run]:.3g}")
            per_layer = layers(run)
            items.append(f"{_seed_label(run)} ({stop}; held-out l-inf {r.uniform_linf:.3g}, loss ratio "
                         f"{r.loss_ratio:.2g}; {value}" + (f"; largest BOS mass per layer {per_layer}" if per_layer
                                                            else "") + ")")
        return "; ".join(items)

    evidence = (f"eps = {eps:g}, {len(runs_)} runs. Softmax: {seeds('softmax')}. ReLU: {seeds('relu')}. BOS mass = "
                f"mean weight on key 1 over queries 2..{TRIGGER - 1} at j = {TRIGGER}; the per-input fractions are "
                "over held-out inputs with j uniform over 3..L.")
    trained = here[(here["model"] == "trained") & (here["attention"] == "softmax") & np.isclose(here["eps"], eps)]
    if not trained.empty:
        lowest = trained.groupby("position")["fraction"].min()
        evidence += (" Per position i (the lowest softmax seed's fraction of inputs with some layer and head sinking "
                     "at i): " + ", ".join(f"{i} {v:.2f}" for i, v in lowest.items()) + ".")
    if shape["layers"] > 1:
        evidence += (" Theorem 2 as stated (some layer, head and position, per input): "
                     + _fmt(runs_.loc[soft_runs, f"thm2_inputs_{_eps(eps)}"]) + ".")
    null_passes = sinks_everywhere(null_soft) or no_sink(soft_bos.reindex(soft_runs))
    null = Null(NULL_SINK, null_passes,
                f"untrained softmax, {what}: {_fmt(null_soft)}; trained softmax's largest BOS mass: "
                f"{_fmt(soft_bos.reindex(soft_runs))}")
    holds = sinks_everywhere(soft) and no_sink(relu)
    return decide(claim, rule=rule, holds=holds, null=null, evidence=evidence, precondition=_learned(runs_),
                  mde=_no_mde("fraction of held-out inputs", samples, "a per-seed sink fraction against a threshold"))


def layer_finding(arch: str, table: pd.DataFrame, heads: pd.DataFrame, writes: pd.DataFrame,
                  untrained: pd.DataFrame, samples: int) -> Finding:
    """Attention Sinks Essential App. B.2 (and Fig. 3 for 2x2, which shows every head sinking), beyond
    Theorem 2's existence, rule RULE_LAYERS: every layer of every learned softmax seed has a head with
    Theorem 1's all-positions sink on at least 1 - DELTA of held-out inputs; null: the untrained softmax
    models. The evidence adds, for each layer without one, what it writes off the trigger and its cosine with
    the other layers' writes (``layer_writes``)."""
    shape = ARCHS[arch]
    eps, need = EPS_VERDICT, 1 - DELTA
    column = f"thm1_inputs_{_eps(eps)}"
    source = "§4.2, Fig. 3, which shows every head sinking" if shape["layers"] == 2 else "App. B.2"
    claim = (f"({shape['layers']} layers x {shape['heads']} heads, {source}) every layer of the softmax model has a "
             f"sink head: alpha_(i,1) >= {1 - eps:g} at every 1 < i < j on at least {need:g} of held-out inputs")
    runs_ = table[(table["arch"] == arch) & (table["attention"] == "softmax")].set_index("run")
    part = heads[(heads["arch"] == arch) & (heads["attention"] == "softmax")]
    per_layer = {run: part[part["run"] == run].groupby("layer")[column].max() for run in runs_.index}
    evidence = ("Largest head's fraction of inputs with a sink at every 1 < i < j, per layer (eps = "
                f"{eps:g}): " + "; ".join(f"{_seed_label(run)} " + "/".join(f"{v:.2f}" for v in layers)
                                          for run, layers in per_layer.items()) + ".")
    written = writes.set_index(["run", "layer"])
    bare = [f"{_seed_label(run)} L{d}: norm {written.loc[(run, d), 'write_elsewhere']:.2g}, cosine "
            f"{written.loc[(run, d), 'cos_others']:.3f}" for run, layers in per_layer.items()
            for d, v in layers.items() if v < need]
    if bare:
        evidence += (" Off the trigger, each layer without a sink head writes (mean l2 norm of its write, mean "
                     "cosine with the sum of the other layers' writes; -1 = it cancels them): " + "; ".join(bare) + ".")
    null_soft = every_layer(untrained[untrained["run"].isin(runs_.index)]).reindex(runs_.index)
    null = Null("the untrained softmax model of each seed (the weights its training started from)",
                sinks_everywhere(null_soft), f"its lowest layer's best head: {_fmt(null_soft)}")
    return decide(claim, rule=RULE_LAYERS, holds=all(sinks_everywhere(v.min()) for v in per_layer.values()),
                  null=null, evidence=evidence, precondition=_learned(runs_),
                  mde=_no_mde("fraction of held-out inputs", samples, "a per-seed, per-layer sink fraction against a "
                              "threshold"))


def masking_table(masking: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Per run: its held-out loss with BOS and with BOS masked in every layer, the all-zeros predictor's, the rise
    (masked - unmasked) over the all-zeros loss, the masked l-inf, and the same for its untrained model."""
    cols = ["run", "loss", "masked_loss", "masked_linf", "zero_loss"]
    trained = masking[masking["model"] == "trained"][cols]
    null = masking[masking["model"] == "untrained"][cols[:3]].rename(
        columns={"loss": "untrained_loss", "masked_loss": "untrained_masked_loss"})
    out = table[["run", "attention", "arch", "seed", "learned"]].merge(trained, on="run").merge(null, on="run")
    out["rise_over_zero"] = (out["masked_loss"] - out["loss"]) / out["zero_loss"]
    out["untrained_rise_over_zero"] = (out["untrained_masked_loss"] - out["untrained_loss"]) / out["zero_loss"]
    return out


def masking_finding(masked: pd.DataFrame, samples: int) -> Finding:
    """The title's claim made functional (Attention Sinks Essential §1, §3.5: the sink is what lets softmax
    attention write nothing by default), rule RULE_MASK on ``masking_table``: masking BOS costs every
    learned softmax seed at least the all-zeros predictor's loss and every ReLU seed at most MASK_TOL of it.
    Null (NULL_MASK): the ReLU arm under the softmax half, and the untrained softmax models."""
    claim = ("(every shape, Attention Sinks Essential's title and §3.5) softmax models need the sink, ReLU models do "
             "not: with BOS masked in every layer at evaluation, a trained softmax model does no better than the "
             "all-zeros predictor, while a trained ReLU model's loss barely moves")
    runs_ = masked.set_index("run")
    soft, relu = runs_[runs_["attention"] == "softmax"], runs_[runs_["attention"] == "relu"]

    def rise(part: pd.DataFrame, prefix: str = "") -> pd.Series:
        return part[f"{prefix}masked_loss"] - part[f"{prefix}loss"]

    def arm(part: pd.DataFrame) -> str:
        return (f"loss {_fmt(part['loss'], '.2g')} -> masked {_fmt(part['masked_loss'], '.3g')} (rise "
                f"{_fmt(part['rise_over_zero'], '.3g')} x the all-zeros loss)")

    evidence = (f"Held-out loss (squared l2, {samples} inputs, j uniform) per seed, with BOS -> with BOS masked in "
                f"every layer; all-zeros predictor {runs_['zero_loss'].min():.3g}-{runs_['zero_loss'].max():.3g}. "
                + "; ".join(f"{arch}: softmax {arm(soft[soft['arch'] == arch])}, ReLU {arm(relu[relu['arch'] == arch])}"
                            for arch in ARCHS) + ".")
    relu_passes, null_passes = needs_sink(rise(relu), relu["zero_loss"]), needs_sink(rise(soft, "untrained_"),
                                                                                     soft["zero_loss"])
    null = Null(NULL_MASK, relu_passes or null_passes,
                f"ReLU rise {_fmt(relu['rise_over_zero'])} x the all-zeros loss ({'passes' if relu_passes else 'fails'}"
                f"); untrained softmax rise {_fmt(soft['untrained_rise_over_zero'])} x it "
                f"({'passes' if null_passes else 'fails'})")
    holds = needs_sink(rise(soft), soft["zero_loss"]) and sink_free(rise(relu), relu["zero_loss"])
    return decide(claim, rule=RULE_MASK, holds=holds, null=null, evidence=evidence, precondition=_learned(runs_),
                  mde=MDE(None, None, "x the all-zeros predictor's loss",
                          "none applies: the paper proves necessity and reports no masking effect to detect; the rule "
                          f"asks every seed to cross a fixed multiple of the all-zeros loss on {samples} held-out "
                          "inputs"))


THM3_TOL = 1e-5  # float32 rounding of a mean of 16-wide vectors stays far below this


def theorem3_finding(check: pd.DataFrame) -> Finding:
    """Theorem 3's construction (App. E) as an identity: ~zero loss and no weight on BOS anywhere."""
    r = check.iloc[0]
    claim = ("Theorem 3's explicit one-layer ReLU attention model (App. E: W_K = W_V = W_O = I, W_Q = e_2 e_n^T) "
             f"solves the task: l-inf loss <= {THM3_TOL:g} and alpha_(i,1) = 0 at every position, every other "
             "query's weights all 0")
    evidence = (f"On {int(r.samples)} held-out inputs (j uniform over 3..L): l-inf {r.linf:.3g} (all-zeros predictor "
                f"{r.zero_linf:.3g}), squared-l2 loss {r.loss:.3g}; largest alpha_(i,1) {r.max_bos_weight:g}; largest "
                f"weight of a non-trigger query {r.max_weight_off_trigger:g}.")
    passed = r.linf <= THM3_TOL and r.max_bos_weight == 0 and r.max_weight_off_trigger == 0
    return Finding(claim, "check passed" if passed else "check failed", evidence)


def _heat_figure(maps: pd.DataFrame, arch: str, folder: Path) -> str:
    stem = f"heatmaps_{arch}"
    part = maps[maps["arch"] == arch]
    part = part[part["seed"] == part["seed"].min()]
    shape = ARCHS[arch]
    title = (f"Attention weights, {shape['layers']} layer(s) x {shape['heads']} head(s), first seed: mean and std "
             f"over inputs, trigger at j = {TRIGGER}")
    if shape["layers"] == 1 and shape["heads"] == 1:
        grid = {(att, stat): block.pivot(index="query", columns="key", values=stat).to_numpy()
                for att, block in part.groupby("attention") for stat in ("mean", "std")}
        # softmax first, as Attention Sinks Essential's Fig. 2 (a-b) before (c-d)
        plot_heatmaps(grid, sorted(ATTENTION, key=lambda a: a != "softmax"), ["mean", "std"], TRIGGER, folder / stem,
                      title)
        return stem
    blocks = {}
    for att in sorted(ATTENTION, key=lambda a: a != "softmax"):
        block = part[part["attention"] == att].sort_values(["layer", "head", "query", "key"])
        for stat in ("mean", "std"):
            blocks[f"{att} {stat}"] = block[stat].to_numpy().reshape(shape["layers"], shape["heads"], LENGTH, LENGTH)
    plot_heat_mosaic(blocks, TRIGGER, folder / stem, title)
    return stem


def head_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Per (layer, head): the first-token mass and the uniform share pooled over documents (weighted by
    their query counts), and mass / uniform."""
    weighted = raw.assign(mass=raw["mass"] * raw["queries"], uniform=raw["uniform"] * raw["queries"])
    table = weighted.groupby(["layer", "head"], sort=True)[["mass", "uniform", "queries"]].sum().reset_index()
    table["mass"] /= table["queries"]
    table["uniform"] /= table["queries"]
    table["ratio"] = table["mass"] / table["uniform"]
    return table


def layer_table(heads: pd.DataFrame) -> pd.DataFrame:
    """Per layer, over its heads: mean, median and max first-token mass, the heads above HALF and at or
    above SINK_MASS, and the uniform share (Attention Sinks Essential App. B.2's "a sink in at least one head every
    layer"
    reads off the max column)."""
    grouped = heads.groupby("layer", sort=True)
    return pd.DataFrame({
        "mean": grouped["mass"].mean(), "median": grouped["mass"].median(), "max": grouped["mass"].max(),
        "heads": grouped["mass"].size(),
        "heads_over_half": grouped["mass"].apply(lambda m: int((m > HALF).sum())),
        "sink_heads": grouped["mass"].apply(lambda m: int((m >= SINK_MASS).sum())),
        "uniform": grouped["uniform"].mean(),
    }).reset_index()


def real_finding(layers: pd.DataFrame, config: dict) -> Finding:
    """Attention Sinks Essential's claim carried to a pretrained LM, rule RULE_REAL: in a majority of the layers
    after the first SKIP_LAYERS, the median head puts at least SINK_MASS of its weight on key 0. Null (NULL_REAL):
    a head that spreads its weight evenly, whose first-token mass is the uniform share, under the same rule."""
    key0 = "BOS" if config["adds_bos"] else f"the first text token ({', '.join(config['first_tokens'])})"
    claim = (f"A pretrained softmax LM ({config['model']}) puts an attention sink on its first token, key 0 = "
             f"{key0} (Attention Sinks Essential §1-2, §3.5: softmax attention needs a sink to write nothing by "
             f"default): in a "
             f"majority of the layers after the first {SKIP_LAYERS}, the median head puts at least {SINK_MASS:g} "
             f"of its weight on key 0, averaged over queries i >= {config['min_query']}")
    later = layers[layers["layer"] >= SKIP_LAYERS]
    per_layer = ", ".join(f"L{r.layer} {r.median:.2f}" for r in layers.itertuples())
    evidence = (f"Median head's first-token mass per layer ({config['documents']} documents x {config['tokens']} "
                f"tokens): {per_layer}. ")
    mde = MDE(None, None, "first-token mass", f"none applies: the claim has no effect size; the rule reads each "
                                              f"layer's median head pooled over {config['documents']} documents "
                                              "against a fixed threshold")
    if later.empty:
        return decide(claim, rule=RULE_REAL, holds=None, evidence=evidence, mde=mde,
                      null=Null(NULL_REAL, None, "no layer to read"),
                      precondition=f"the model has only {len(layers)} layers, none after the first {SKIP_LAYERS}")
    sinking = int((later["median"] >= SINK_MASS).sum())
    uniform = float(later["uniform"].mean())
    total = int(later["heads"].sum())
    evidence += (f"{sinking} of {len(later)} layers after the first {SKIP_LAYERS} reach {SINK_MASS:g}; there "
                 f"{int(later['sink_heads'].sum())} of {total} heads put >= {SINK_MASS:g} and "
                 f"{int(later['heads_over_half'].sum())} put > {HALF:g} on key 0, and the largest head reaches "
                 f"{SINK_MASS:g} in {int((later['max'] >= SINK_MASS).sum())} of those layers. The "
                 f"uniform share over the same queries is {uniform:.3g}, so {SINK_MASS:g} is "
                 f"{SINK_MASS / uniform:.0f}x it.")
    null = Null(NULL_REAL, real_sinks(later["uniform"]),
                f"{int((later['uniform'] >= SINK_MASS).sum())} of {len(later)} layers' uniform share reach "
                f"{SINK_MASS:g} (largest {later['uniform'].max():.3g})")
    return decide(claim, rule=RULE_REAL, holds=real_sinks(later["median"]), null=null, evidence=evidence, mde=mde)


def summarize_real(folder: Path) -> tuple[Finding, Table, Figure, str]:
    """The real-model finding, its table (``table_real_layers``), heat map (``real_first_token_mass``)
    and note, written into ``folder`` from the two files of folder/real only."""
    out, folder = folder, folder / REAL
    config = json.loads((folder / "config.json").read_text())
    heads = head_table(pd.read_parquet(folder / REAL_TABLE))
    layers = layer_table(heads)
    io.write_table(out / "table_real_layers", layers)
    grid = heads.pivot(index="layer", columns="head", values="mass").sort_index().to_numpy()
    key0 = "BOS" if config["adds_bos"] else "first text token"
    plot_first_token_mass(grid, {"median head": layers["median"].to_numpy(), "largest head": layers["max"].to_numpy()},
                          layers["uniform"].to_numpy(), SINK_MASS, SKIP_LAYERS, out / "real_first_token_mass",
                          f"{config['model']}: softmax weight on key 0 ({key0}), mean over queries "
                          f"i >= {config['min_query']}")
    table = Table("table_real_layers", (
        f"{config['model']}, per layer (0-based) over its {config['heads']} heads: mean, median and max first-token "
        f"mass (softmax weight on key 0 averaged over queries i >= {config['min_query']} of "
        f"{config['documents']} documents x {config['tokens']} tokens), the heads above {HALF:g} and at or above "
        f"{SINK_MASS:g}, and the uniform share 1 / (keys attended) averaged over the same queries."))
    figure = Figure("real_first_token_mass", (
        f"Left: first-token mass of every head of {config['model']} (rows: layers from 0 at the top; columns: "
        f"heads, 0-based), on a 0-1 colour scale with the value printed in each cell. Right: the median and "
        f"largest head per layer; the dashed line is the sink threshold {SINK_MASS:g}, the dotted one the "
        f"uniform share (the mass of a head that spreads evenly). The shaded layers 0-{SKIP_LAYERS - 1} are "
        "left out of the verdict."))
    note = (f"Real-model part: {config['model']} ({config['model_type']}, checkpoint {config['checkpoint']}, "
            f"{config['layers']} layers x {config['heads']} query heads, {config['dtype']} on {config['device']}); "
            f"{config['documents']} documents of generic text (attnlab.tasks.generic_text) x {config['tokens']} "
            f"tokens, one forward each ({config['seconds']:g} s in all). The tokenizer "
            f"{'adds BOS, so key 0 is BOS' if config['adds_bos'] else 'adds no BOS, so key 0 is the first text token'}"
            f" ({', '.join(config['first_tokens'])}). The softmax is redone in float64 from the scores the "
            f"model's own softmax sees (post-softcap, masked keys left out); queries that may not attend key 0 "
            f"(past a sliding window) are left out.")
    return real_finding(layers, config), table, figure, note

def _figures(maps: pd.DataFrame, heads: pd.DataFrame, table: pd.DataFrame, masked: pd.DataFrame,
             positions: pd.DataFrame, folder: Path, samples: int) -> list[Figure]:
    """Draw the heat maps per architecture, the BOS mass bars, the masking bars, Theorem 2 per position and the
    training curves into ``folder``."""
    figures = []
    for arch, shape in ARCHS.items():
        stem = _heat_figure(maps, arch, folder)
        figures.append(Figure(stem, (
            f"{shape['layers']} layer(s) x {shape['heads']} head(s) (Attention Sinks Essential Fig. 2-6), the first "
            f"seed: attention weight of each query position (rows) on each key position (columns), 1-based, mean "
            f"and std over {samples} inputs with the trigger at j = {TRIGGER}; "
            + ("one row of panels per attention kind. " if shape["layers"] == 1 else
               "one panel per attention kind and statistic, holding one map per layer (rows) and head (columns). ")
            + "The cyan box outlines the BOS key column, the red box the trigger query row; a sink is a bright BOS "
              "column above the red row. The upper triangle is 0 (causal mask).")))
    largest = heads.groupby(["run", "attention", "arch", "layer"], sort=False)["bos_mass"].max().reset_index()
    labels = [f"{r.attention} {r.arch} {_seed_label(r.run)} L{r.layer}" for r in largest.itertuples()]
    plot_bos_mass(labels, largest["bos_mass"].tolist(), largest["attention"].tolist(), SINK, NO_SINK,
                  folder / "bos_mass", title=f"BOS mass before the trigger (j = {TRIGGER}, L = {LENGTH}), largest head "
                                             "per run and layer")
    figures.append(Figure("bos_mass", (
        f"The largest head's mean attention weight on BOS over the pre-trigger queries 2..{TRIGGER - 1} (j = "
        f"{TRIGGER}; log axis, values printed on the bars, floored at 1e-6 for drawing), one bar per run (s0, s1, "
        f"...: seeds) and layer; the dashed line is {SINK:g} (1 - eps, Theorem 1's sink), the dotted one "
        f"{NO_SINK:g} (ReLU's bound).")))
    plot_masking([f"{r.attention} {r.arch} {_seed_label(r.run)}" for r in masked.itertuples()], masked["loss"],
                 masked["masked_loss"], masked["zero_loss"], MASK_TOL, folder / "masking",
                 f"Held-out loss with BOS and with BOS masked in every layer ({samples} inputs, j uniform)")
    figures.append(Figure("masking", (
        f"Per run, the held-out squared-l2 loss ({samples} inputs, j uniform over 3..L) with BOS (blue) and with "
        "BOS masked in every layer (red; key 1 taken from every query i > 1), log axis, values printed, floored at "
        f"1e-9 for drawing; the black tick is the run's all-zeros predictor's loss, the grey dotted one {MASK_TOL:g} "
        "x it. Softmax models need the sink when red passes black; ReLU models do not when red stays under grey.")))
    soft = positions[(positions["attention"] == "softmax") & np.isclose(positions["eps"], EPS_VERDICT)]

    def lines(model: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        part = soft[soft["model"] == model].sort_values("position")
        return {f"{arch} {_seed_label(run)}": (g["position"].to_numpy(), g["fraction"].to_numpy())
                for (arch, run), g in part.groupby(["arch", "run"], sort=False)}

    plot_positions(lines("trained"), lines("untrained"), 1 - DELTA, folder / "positions",
                   f"Theorem 2 per position, softmax runs (eps = {EPS_VERDICT:g})")
    figures.append(Figure("positions", (
        f"Per softmax run (shape and seed), the fraction of held-out inputs ({samples}, j uniform) with query i "
        f"before the trigger where some layer and head has alpha_(i,1) >= {1 - EPS_VERDICT:g}, against i (1-based; "
        "few inputs reach the last positions: table_positions counts them); dashed in the same colour, the "
        f"untrained model the run started from (the null control); the dashed black line is {1 - DELTA:g}, the "
        "verdict's threshold.")))
    curves, linf = {}, {}
    for run in table["run"]:
        train = pd.read_csv(folder / "runs" / run / "train.csv")
        curves[run] = (train["step"].to_numpy(), train["loss"].to_numpy())
        linf[run] = (train["step"].to_numpy(), train["linf"].to_numpy())
    plot_loss_curves(curves, float(table["uniform_zero_loss"].mean()), folder / "loss_curves")
    figures.append(Figure("loss_curves", (
        "Training loss (squared l2 error averaged over positions, batch of 128) against step for each run, "
        "log axis; the dashed line is the all-zeros predictor's loss on held-out inputs. A run ends at App. A's "
        f"stop (batch l-inf < {LINF_TARGET:g}) or its step cap.")))
    plot_linf_curves(linf, LINF_TARGET, folder / "linf_curves")
    figures.append(Figure("linf_curves", (
        "Training batch l-inf loss (largest l2 error over the batch's rows and positions, before the step's "
        f"update) against step for each run, log axis; the dashed line is App. A's target {LINF_TARGET:g}.")))
    return figures


def _notes(cfg: StudyConfig) -> list[str]:
    """The budget against App. A's, and where the models here differ from the paper's."""
    plan = BUDGETS[cfg.budget]
    samples = plan["samples"]
    faster = "" if set(plan["lr"].values()) == {1e-3} else (
        " Where the lr is above App. A's 1e-3, it is so that the budget fits a few minutes on a CPU.")
    return [
        f"Budget {cfg.budget}: seeds {plan['seeds']} (seed {cfg.seed} + k), step caps {plan['cap']}, lr {plan['lr']}, "
        f"batch {plan['batch']} (App. A: Adam, lr 1e-3, batch 128, trained until the l-inf loss of a batch is "
        f"below 1e-2). Each run stops at the first training batch whose l-inf loss is below {LINF_TARGET:g}, "
        "before updating on it, or at its cap; a run is learned when it stopped so, and the verdicts read "
        f"learned runs only.{faster} Held-out sets: {samples} inputs with j uniform over 3..L (losses, Theorems "
        f"1-2) and {samples} with j = {TRIGGER} (maps, BOS mass).",
        "Residual reading: §4.2 and App. B train the 2x2 and 4x4 models with residual connections, and §1/§3.2 "
        "state the target as what the model writes to the residual stream. The deeper models here are h_0 = x, "
        "h_d = h_(d-1) + Attn_d(h_(d-1)), and their output is h_D - x, the sum of the layers' writes "
        "(model.readout writes), trained to the task's target. The 1x1 model is §3.4's single layer, whose output "
        "is its write.",
        f"Sinks per input (Theorems 1-2): alpha_(i,1) >= 1 - eps for eps in {', '.join(f'{e:g}' for e in EPS)}; the "
        f"verdicts read eps = {EPS_VERDICT:g} and delta = {DELTA:g} (the statement must hold on >= {1 - DELTA:g} of "
        "inputs). Theorem 2 is stated for one head per layer; with several heads, some (layer, head) must sink.",
        "BOS masked at evaluation: every layer's rows lose key 1 at every query i > 1 (a softmax row is "
        "renormalized over keys 2..i, a ReLU row drops key 1's term and keeps §3.4's divisor max(i - 2, 1); query 1 "
        "may attend only BOS and keeps it), on the same held-out inputs as the losses; the untrained model of each "
        "seed is masked too, as a null control.",
        "Heads split d_model = 16 into head widths 16 / heads, and scores carry the usual 1/sqrt(head width) "
        "factor (a rescaling of W_Q W_K^T); the seed gives each head full n x n matrices. All models start from "
        "the decoder's N(0, 0.02) init.",
    ]


def summarize(folder: Path) -> Section:
    folder = Path(folder)
    cfg = load_config(folder)
    plan = BUDGETS[cfg.budget]
    raw = _read(folder, runs(plan))
    real = folder / REAL
    if cfg.model is not None and not (real / "config.json").is_file():
        raise StudyError(f"{folder} lacks the real-model results on {cfg.model}; run "
                         f"`{cfg.command(folder)}` to finish it")
    samples = plan["samples"]
    table = run_table(raw.loss, raw.sinks)
    heads = sink_head_table(bos_table(raw.maps), raw.sinks)
    masked = masking_table(raw.masking, table)
    io.write_table(folder / "table_runs", table)
    io.write_table(folder / "table_sinks", heads)
    io.write_table(folder / "table_positions", position_table(raw.positions))
    io.write_table(folder / "table_masking", masked)
    io.write_table(folder / "table_writes", raw.writes)
    io.write_table(folder / "table_theorem3", raw.theorem3)
    figures = _figures(raw.maps, heads, table, masked, raw.positions, folder, samples)
    notes = _notes(cfg)
    findings = ([finding(arch, table, heads, raw.untrained, raw.positions, samples) for arch in ARCHS]
                + [layer_finding(arch, table, heads, raw.writes, raw.untrained, samples)
                   for arch, shape in ARCHS.items() if shape["layers"] > 1]
                + [masking_finding(masked, samples), theorem3_finding(raw.theorem3)])
    eps = ", ".join(_eps(e) for e in EPS)
    tables = [Table("table_runs", (
                  "Per run (s0, s1, ...: seeds): the step cap, steps taken, met_linf = stopped at App. A's rule (a "
                  f"training batch's l-inf < {LINF_TARGET:g}), batch_linf = that batch's l-inf (or the last batch's "
                  "at the cap); on 1000 held-out inputs (uniform trigger: uniform_*; trigger at j = "
                  f"{TRIGGER}: fixed_*) the l-inf loss and the squared-l2 loss, loss_ratio = uniform_loss / "
                  "uniform_zero_loss (the all-zeros predictor's); learned = met_linf; thm2_inputs_<eps> = the "
                  "fraction of held-out inputs with some layer, head and position 1 < i < j at alpha_(i,1) >= 1 - "
                  f"eps ({eps}).")),
              Table("table_sinks", (
                  f"Per run, layer and head: bos_mass = mean weight on key 1 over queries 2..{TRIGGER - 1} "
                  f"(trigger at j = {TRIGGER}, mean over inputs), its smallest and largest query, row_total "
                  "= the mean total weight of those rows (softmax rows sum to 1, ReLU rows need not), "
                  "bos_at_trigger = the weight on key 1 at the trigger query; and Theorem 1 per input on held-out "
                  "inputs with j uniform: thm1_positions_<eps> = the fraction of pre-trigger positions 1 < i < j "
                  "with alpha_(i,1) >= 1 - eps, thm1_inputs_<eps> = the fraction of inputs where every one does.")),
              Table("table_positions", (
                  "Theorem 2 per position: per run, eps and 1-based pre-trigger position i, the fraction of held-out "
                  "inputs (j uniform, i < j) where some layer and head has alpha_(i,1) >= 1 - eps, for the trained "
                  "model (trained) and the untrained one its training started from (untrained, the null control); "
                  "inputs = the held-out inputs with i before their trigger.")),
              Table("table_masking", (
                  "BOS masked at evaluation: per run, the held-out squared-l2 loss (j uniform) with BOS (loss) and "
                  "with key 1 taken from every query i > 1 in every layer (masked_loss; a softmax row renormalized "
                  "over keys 2..i, a ReLU row without key 1's term), the masked l-inf loss, the all-zeros "
                  "predictor's loss (zero_loss), rise_over_zero = (masked_loss - loss) / zero_loss, and the same "
                  "for the untrained model of the run's seed (untrained_*).")),
              Table("table_writes", (
                  "Per run and layer, on held-out inputs with j uniform: what the layer's attention writes to the "
                  "residual stream, as a mean l2 norm at the trigger (write_trigger) and elsewhere (write_elsewhere), "
                  "and off the trigger the mean cosine between its write and the sum of the other layers' writes "
                  "(cos_others; -1 where the layer cancels them, empty for one layer).")),
              Table("table_theorem3", (
                  "Theorem 3's construction (attnlab.studies.sinks.theorem3_model) on held-out inputs: its "
                  "squared-l2 and l-inf losses and the all-zeros predictor's, the largest weight on BOS of any "
                  "query, and the largest weight of any query other than the trigger."))]
    if (real / "config.json").is_file():
        real_finding_, real_table, real_figure, real_note = summarize_real(folder)
        findings.append(real_finding_)
        tables.append(real_table)
        figures.append(real_figure)
        notes.append(real_note)
    else:
        notes.append("The real-model part (first-token mass of a pretrained softmax LM) was not run: fetch a "
                     "model and pass it, e.g. `attnlab fetch smollm2` then `attnlab study sinks --model smollm2`.")
    return section(
        NAME, folder,
        question=("Does softmax attention trained on trigger-conditional averaging park its mass on BOS at "
                  "every position before the trigger (one layer), or somewhere (deeper models), while ReLU "
                  "attention solves the same task without a sink? Do the softmax models need that sink (masking BOS "
                  "at evaluation) while the ReLU ones do not? And, given --model, does a pretrained softmax LM park "
                  "its attention on its first token?"),
        findings=tuple(findings),
        tables=tuple(tables),
        figures=tuple(figures),
        notes=tuple(notes),
    )


STUDY = register(Study(
    name="sinks", title="Attention sinks: softmax vs ReLU attention on trigger-conditional averaging",
    source="Attention Sinks Essential",
    compute=compute, summarize=summarize, takes_model=True))
