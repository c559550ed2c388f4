"""The ``sinks`` study (Attention Sinks Essential): attention sinks on trigger-conditional
averaging, softmax against ReLU attention. Does softmax attention trained on that task park its mass on
BOS at every position before the trigger, while ReLU attention solves it without a sink? And, given
``--model``, does a pretrained softmax LM park its attention on its first token?

The task is Attention Sinks Essential §3.2 (``attnlab.tasks.vectors.TriggerAveraging``, n = L = 16, App. A);
the model is the input-free attention stack of §3.4 (``ModelConfig(inputs="vectors")`` with no FFN, norm,
bias or residual, so each layer is W_O sum_j alpha_ij W_V x_j and D layers compose), with softmax rows or
ReLU attention (``reluattn``: ReLU(score) / max(i - 2, 1), §3.4). Four runs: each map as 1 layer x 1 head
(§4.1, Theorems 1 and 3) and as 2 layers x 2 heads (§4.2, App. B.1, Theorem 2). Each trained model is read
on 1000 inputs with the trigger fixed at j = 8 and L = 16, as §4's figures are: the mean and std of every
(layer, head)'s attention weights per (query, key), and the BOS mass before the trigger, the mean weight on
key 1 over the queries 1 < i < j (Theorem 1's positions: the BOS query itself, which softmax must give all
its mass to key 1, is left out).

``compute`` writes per run ``raw/<run>_attention.parquet`` (layer, head, query, key, mean, std; 1-based
positions) and then ``raw/<run>_loss.csv`` (final losses and the all-zeros predictor's on the same
inputs); a run whose two files exist is skipped, and training resumes from ``runs/<run>``'s checkpoints.

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
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import hooks, io, tasks
from ..commands.runs import RunError, context_length
from ..commands.runs import load as load_checkpoint
from ..hooks.load import resolve_checkpoint
from ..report.plot_sinks import plot_bos_mass, plot_first_token_mass, plot_heatmaps, plot_loss_curves
from ..report.sections import Figure, Finding, Section, Table
from ..site import ScoreBlock, WeightBlock
from ..tasks import TaskStream
from ..tasks.vectors import TriggerAveraging
from ..train.config import RunConfig
from ..train.trainer import Trainer, vector_loss
from .runner import Study, StudyConfig, StudyError, load_config, register, section

NAME = "sinks"
DIM = 16      # the seed's n (App. A)
LENGTH = 16   # the seed's L (§4)
TRIGGER = 8   # §4: every figure fixes the trigger at j = 8 (1-based)
SINK = 0.9    # Attention Sinks Essential §4: softmax puts at least this much on BOS before the trigger ...
NO_SINK = 0.1  # ... and ReLU attention less than this
# A run is "at low loss" when its squared-l2 loss on held-out inputs is at most this fraction of the
# all-zeros predictor's (the loss of writing nothing anywhere, the task's trivial yardstick).
LOW_LOSS = 0.01
LINF_TARGET = 1e-2  # App. A trains until the l-infinity loss of the batch is below this

ATTENTION = {"softmax": "softmax", "relu": "reluattn"}
# init: "gpt2" keeps the decoder's N(0, 0.02) weights; "torch" resets every Linear to PyTorch's default
# (Kaiming-uniform) init, which the 2-layer composition needs: through four N(0, 0.02) matrices and no
# residual its output and gradients nearly vanish, and a 2x2 ReLU model trained from there collapsed to
# the all-zeros output in our trials, while the 1-layer softmax model learns from N(0, 0.02) and stalls
# from the Kaiming init.
ARCHS: dict[str, dict[str, Any]] = {
    "1x1": {"layers": 1, "heads": 1, "init": "gpt2"},
    "2x2": {"layers": 2, "heads": 2, "init": "torch"},
}
# App. A: Adam, lr 1e-3, batch 128, trained until the l-inf loss < 1e-2; the trainer runs a fixed number
# of steps, so "full" gives every run 20,000 and the tables report the final l-inf loss beside the target.
# Smoke runs fewer steps and a larger lr for the slower 2x2 models.
BUDGETS: dict[str, dict[str, Any]] = {
    "smoke": {"steps": {"1x1": 2000, "2x2": 3000}, "lr": {"1x1": 1e-3, "2x2": 3e-3}, "batch": 128,
              "samples": 1000},
    "full": {"steps": {"1x1": 20000, "2x2": 20000}, "lr": {"1x1": 1e-3, "2x2": 1e-3}, "batch": 128,
             "samples": 1000},
}
RUNS = tuple(f"{att}_{arch}" for arch in ARCHS for att in ATTENTION)

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



def _parts(run: str) -> tuple[str, str]:
    attention, arch = run.split("_")
    return attention, arch


def run_config(run: str, plan: dict[str, Any], seed: int) -> RunConfig:
    """The run's config: Attention Sinks Essential §3.4's model (vectors in and out, no FFN/norm/bias/residual, no
    positions) and App. A's optimizer (Adam: AdamW without decay, betas (0.9, 0.999), constant lr)."""
    attention, arch = _parts(run)
    shape = ARCHS[arch]
    steps, lr = plan["steps"][arch], plan["lr"][arch]
    model = {"context": LENGTH, "inputs": "vectors", "layers": shape["layers"], "heads": shape["heads"],
             "d_model": DIM, "positions": "none", "ffn": "none", "norm": "none", "bias": False,
             "residual": False, "rowmap": ATTENTION[attention]}
    train = {"steps": steps, "batch": plan["batch"], "lr": lr, "min_lr": lr, "warmup": 0, "weight_decay": 0.0,
             "betas": [0.9, 0.999], "clip": 0.0, "seed": seed, "eval_every": max(1, steps // 10),
             "eval_batches": 1, "probes": False, "checkpoint_every": max(1, steps // 4), "tensorboard": False}
    return RunConfig.from_dict({"model": model, "train": train})


def linf(outputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Attention Sinks Essential §3.2's l-infinity loss on a sample: the largest l2 error over rows and positions."""
    return float((outputs.float() - targets.float()).norm(dim=-1).max())


def _linf_hook(trainer: Trainer) -> dict[str, float]:
    inputs, targets = trainer.stream.val_batches(trainer.cfg.train.batch, 1)[0]
    with torch.no_grad():
        return {"val_linf": linf(trainer.model(inputs), targets)}


@torch.no_grad()
def attention_maps(model, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std (population) over rows of every (layer, head)'s weights: two (layers, heads, L, L)."""
    seen: dict[int, list[WeightBlock]] = {}

    def observe(block: WeightBlock) -> None:
        seen.setdefault(block.layer, []).append(block)

    model.eval()
    with model.observed(observe, weights=True):
        model(inputs)
    full = torch.stack([torch.cat([b.weights.detach() for b in sorted(seen[layer], key=lambda b: b.query_start)],
                                  dim=-2) for layer in sorted(seen)])  # (layers, rows, heads, L, L)
    return full.mean(1), full.std(1, correction=0)


@torch.no_grad()
def losses(model, inputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """The model's squared-l2 loss (the trainer's) and l-inf loss, and the all-zeros predictor's."""
    model.eval()
    out = model(inputs)
    zero = torch.zeros_like(targets)
    return {"loss": float(vector_loss(out, targets)), "linf": linf(out, targets),
            "zero_loss": float(vector_loss(zero, targets)), "zero_linf": linf(zero, targets)}


def _reinit(model: torch.nn.Module, seed: int) -> None:
    torch.manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.reset_parameters()


def run_piece(run: str, plan: dict[str, Any], seed: int, folder: Path, progress: bool) -> None:
    """Train (or resume) one run, then write its attention maps and losses; skipped when both exist."""
    raw = folder / "raw"
    attention_path, loss_path = raw / f"{run}_attention.parquet", raw / f"{run}_loss.csv"
    if attention_path.is_file() and loss_path.is_file():
        return
    stream = TaskStream("trigger_averaging", LENGTH, seed=seed, dim=DIM)
    trainer = Trainer(run_config(run, plan, seed), folder / "runs" / run, resume=True, progress=progress,
                      stream=stream, eval_hooks=(_linf_hook,))
    attention, arch = _parts(run)
    if trainer.step == 0 and ARCHS[arch]["init"] == "torch":
        _reinit(trainer.model, seed)
    summary = trainer.run()
    model = trainer.model
    # Held-out inputs apart from the stream's: the training distribution (j uniform over 3..L) for the
    # losses, and §4's fixed trigger j = 8 for the maps and their own losses.
    uniform = TriggerAveraging(dim=DIM).generate(plan["samples"], LENGTH, seed=10_000 + seed)
    fixed = TriggerAveraging(dim=DIM, trigger=TRIGGER).generate(plan["samples"], LENGTH, seed=20_000 + seed)
    mean, std = attention_maps(model, fixed.inputs)
    layers, heads = mean.shape[:2]
    index = np.indices((layers, heads, LENGTH, LENGTH)).reshape(4, -1)
    frame = pd.DataFrame({"run": run, "attention": attention, "arch": arch, "layer": index[0] + 1,
                          "head": index[1] + 1, "query": index[2] + 1, "key": index[3] + 1,
                          "mean": mean.reshape(-1).numpy(), "std": std.reshape(-1).numpy()})
    io.write_parquet(attention_path, frame, metadata={"samples": plan["samples"], "trigger": TRIGGER,
                                                      "length": LENGTH, "seed": 20_000 + seed})
    row = {"run": run, "attention": attention, "arch": arch, "steps": summary["steps"],
           "lr": plan["lr"][arch], "init": ARCHS[arch]["init"], "train_loss": summary["loss"],
           **{f"uniform_{k}": v for k, v in losses(model, uniform.inputs, uniform.targets).items()},
           **{f"fixed_{k}": v for k, v in losses(model, fixed.inputs, fixed.targets).items()}}
    io.write_table(loss_path.with_suffix(""), pd.DataFrame([row]))


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
        for run in RUNS:
            run_piece(run, plan, cfg.seed, Path(folder), progress)
    finally:
        torch.set_num_threads(threads)


# ----------------------------------------------------------------------------------------------- summary

def _read(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    raw = folder / "raw"
    missing = [run for run in RUNS
               if not ((raw / f"{run}_attention.parquet").is_file() and (raw / f"{run}_loss.csv").is_file())]
    if missing:
        raise StudyError(f"{folder} lacks the raw results of {', '.join(missing)}; run "
                         f"`{load_config(folder).command(folder)}` to finish it")
    maps = pd.concat([pd.read_parquet(raw / f"{run}_attention.parquet") for run in RUNS], ignore_index=True)
    loss = pd.concat([pd.read_csv(raw / f"{run}_loss.csv") for run in RUNS], ignore_index=True)
    return maps, loss


def loss_table(loss: pd.DataFrame) -> pd.DataFrame:
    """Per run: final losses on held-out inputs against the all-zeros predictor's, and the verdict
    inputs (ratio to the zero predictor, low loss, App. A's l-inf target met)."""
    out = loss[["run", "attention", "arch", "steps", "lr", "init", "train_loss", "uniform_loss", "uniform_zero_loss",
                "uniform_linf", "fixed_loss", "fixed_zero_loss", "fixed_linf"]].copy()
    out["loss_ratio"] = out["uniform_loss"] / out["uniform_zero_loss"]
    out["low_loss"] = out["loss_ratio"] <= LOW_LOSS
    out["linf_below_target"] = out["uniform_linf"] < LINF_TARGET
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


def finding(arch: str, loss: pd.DataFrame, bos: pd.DataFrame) -> Finding:
    """Attention Sinks Essential's claim for one architecture, decided from the tables: every run at low loss, then the
    softmax run's largest per-head BOS mass >= SINK (Theorem 2 asks one layer; for 1x1 the only head) and
    the ReLU run's largest < NO_SINK (no head sinks)."""
    shape = ARCHS[arch]
    claim = (f"({shape['layers']} layer(s) x {shape['heads']} head(s)) softmax puts at least {SINK:g} of its "
             f"attention mass on BOS before the trigger while ReLU attention puts under {NO_SINK:g}, both at low loss")
    runs = loss[loss["arch"] == arch].set_index("attention")
    mass = bos[bos["arch"] == arch]

    def heads(att: str) -> str:
        rows = mass[mass["attention"] == att]
        return ", ".join(f"L{r.layer}H{r.head} {r.bos_mass:.3g}" for r in rows.itertuples())

    soft = float(mass.loc[mass["attention"] == "softmax", "bos_mass"].max())
    relu = float(mass.loc[mass["attention"] == "relu", "bos_mass"].max())
    evidence = (f"BOS mass before the trigger (j = {TRIGGER}, queries 2..{TRIGGER - 1}, mean of 1000 inputs): "
                f"softmax {heads('softmax')} (largest {soft:.3g}); ReLU {heads('relu')} (largest {relu:.3g}). "
                + "; ".join(f"{att} loss {r.uniform_loss:.3g} = {r.loss_ratio:.3g} x the all-zeros predictor's "
                            f"{r.uniform_zero_loss:.3g} (l-inf {r.uniform_linf:.3g})" for att, r in runs.iterrows())
                + f"; low loss means ratio <= {LOW_LOSS:g}.")
    if not runs["low_loss"].all():
        slow = ", ".join(runs.index[~runs["low_loss"]])
        return Finding(claim, "not checked",
                       f"{slow} did not reach low loss, so the claim cannot be tested. {evidence}")
    verdict = "reproduced" if soft >= SINK and relu < NO_SINK else "not reproduced"
    return Finding(claim, verdict, evidence)


def _heat_figure(maps: pd.DataFrame, arch: str, folder: Path) -> str:
    stem = f"heatmaps_{arch}"
    part = maps[maps["arch"] == arch]
    grid = {}
    for (att, layer, head), block in part.groupby(["attention", "layer", "head"], sort=True):
        for stat in ("mean", "std"):
            grid[(f"{att} layer {layer}", f"head {head} {stat}")] = \
                block.pivot(index="query", columns="key", values=stat).to_numpy()
    # softmax first, as Attention Sinks Essential's Fig. 2 (a-b) before (c-d)
    rows = sorted({r for r, _ in grid}, key=lambda r: (r.split()[0] != "softmax", r))
    # all means, then all stds, so each colour bar sits beside the panels it scales
    cols = sorted({c for _, c in grid}, key=lambda c: (c.endswith("std"), c))
    shape = ARCHS[arch]
    plot_heatmaps(grid, rows, cols, TRIGGER, folder / stem,
                  f"Attention weights, {shape['layers']} layer(s) x {shape['heads']} head(s): mean and std over "
                  f"inputs, trigger at j = {TRIGGER}")
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
    """Attention Sinks Essential's claim carried to a pretrained LM: in a majority of the layers after the first
    SKIP_LAYERS, the median head puts at least SINK_MASS of its weight on key 0."""
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
    if later.empty:
        return Finding(claim, "not checked",
                       evidence + f"The model has only {len(layers)} layers, none after the first {SKIP_LAYERS}.")
    sinking = int((later["median"] >= SINK_MASS).sum())
    uniform = float(later["uniform"].mean())
    total = int(later["heads"].sum())
    evidence += (f"{sinking} of {len(later)} layers after the first {SKIP_LAYERS} reach {SINK_MASS:g}; there "
                 f"{int(later['sink_heads'].sum())} of {total} heads put >= {SINK_MASS:g} and "
                 f"{int(later['heads_over_half'].sum())} put > {HALF:g} on key 0, and the largest head reaches "
                 f"{SINK_MASS:g} in {int((later['max'] >= SINK_MASS).sum())} of those layers. The "
                 f"uniform share over the same queries is {uniform:.3g}, so {SINK_MASS:g} is "
                 f"{SINK_MASS / uniform:.0f}x it.")
    return Finding(claim, "reproduced" if sinking > len(later) / 2 else "not reproduced", evidence)


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


def _figures(maps: pd.DataFrame, bos: pd.DataFrame, loss: pd.DataFrame, folder: Path,
             samples: int) -> list[Figure]:
    """Draw the heat maps per architecture, the BOS mass bars and the training curves into ``folder``."""
    figures = []
    for arch, shape in ARCHS.items():
        stem = _heat_figure(maps, arch, folder)
        figures.append(Figure(stem, (
            f"{shape['layers']} layer(s) x {shape['heads']} head(s) (Attention Sinks Essential Fig. 2-4): "
            f"attention weight of each query position (rows) on each key position (columns), 1-based, mean and "
            f"std over {samples} inputs with the trigger at j = {TRIGGER}; one row of panels per attention kind "
            f"and layer, two panels per head. The cyan box outlines the BOS key column, the red box the trigger "
            f"query row; a sink is a bright BOS column above the red row. The upper triangle is 0 (causal mask).")))
    labels = [f"{r.attention} {r.arch} L{r.layer}H{r.head}" for r in bos.itertuples()]
    plot_bos_mass(labels, bos["bos_mass"].tolist(), bos["attention"].tolist(), SINK, NO_SINK, folder / "bos_mass")
    figures.append(Figure("bos_mass", (
        f"Mean attention weight on BOS over the pre-trigger queries 2..{TRIGGER - 1} (log axis, values printed "
        f"on the bars, floored at 1e-6 for drawing), one bar per run, layer and head; the dashed line is "
        f"{SINK:g} (the softmax sink the paper predicts), the dotted one {NO_SINK:g} (ReLU's bound).")))
    curves = {}
    for run in RUNS:
        train = pd.read_csv(folder / "runs" / run / "train.csv")
        curves[run] = (train["step"].to_numpy(), train["loss"].to_numpy())
    plot_loss_curves(curves, float(loss["uniform_zero_loss"].mean()), folder / "loss_curves")
    figures.append(Figure("loss_curves", (
        "Training loss (squared l2 error averaged over positions, batch of 128) against step for each run, "
        "log axis; the dashed line is the all-zeros predictor's loss on held-out inputs.")))

    return figures


def _notes(cfg: StudyConfig) -> list[str]:
    """The budget against App. A's, and where the models here differ from the paper's."""
    plan = BUDGETS[cfg.budget]
    samples = plan["samples"]
    notes = [
        f"Budget {cfg.budget}: steps {plan['steps']}, lr {plan['lr']}, batch {plan['batch']} (App. A: Adam, lr 1e-3, "
        "batch 128, trained until the l-inf loss of a batch is below 1e-2; here a fixed step count, and the "
        f"final l-inf loss on {samples} held-out inputs is in table_losses).",
        "Multi-layer models are the plain composition of §3.4 (no residual); §4.2 and App. B.1 mention "
        "residual connections for the 2x2 models, which would add the input to an output whose target is "
        "zero almost everywhere; we keep §3.4's definition.",
        "Heads split d_model = 16 into head widths 16 / heads, and scores carry the usual 1/sqrt(head width) "
        "factor (a rescaling of W_Q W_K^T); the seed gives each head full n x n matrices.",
        "2x2 models start from PyTorch's default Linear init, 1x1 from the decoder's N(0, 0.02) (see "
        "attnlab.studies.sinks.ARCHS for why).",
    ]
    return notes


def summarize(folder: Path) -> Section:
    folder = Path(folder)
    cfg = load_config(folder)
    maps, raw_loss = _read(folder)
    real = folder / REAL
    if cfg.model is not None and not (real / "config.json").is_file():
        raise StudyError(f"{folder} lacks the real-model results on {cfg.model}; run "
                         f"`{cfg.command(folder)}` to finish it")
    loss = loss_table(raw_loss)
    bos = bos_table(maps)
    io.write_table(folder / "table_losses", loss)
    io.write_table(folder / "table_bos_mass", bos)
    samples = BUDGETS[cfg.budget]["samples"]
    figures = _figures(maps, bos, loss, folder, samples)
    notes = _notes(cfg)
    findings = [finding(arch, loss, bos) for arch in ARCHS]
    tables = [Table("table_losses", (
                  "Per run: final training loss, and on 1000 held-out inputs (uniform trigger: uniform_*; "
                  f"trigger at j = {TRIGGER}: fixed_*) the squared-l2 loss, the l-inf loss (largest l2 error "
                  "of any position) and the all-zeros predictor's loss; loss_ratio = uniform_loss / "
                  f"uniform_zero_loss, low_loss = ratio <= {LOW_LOSS:g}, linf_below_target = l-inf < "
                  f"{LINF_TARGET:g} (App. A's stopping rule).")),
              Table("table_bos_mass", (
                  f"Per run, layer and head: bos_mass = mean weight on key 1 over queries 2..{TRIGGER - 1} "
                  f"(trigger at j = {TRIGGER}, mean over inputs), its smallest and largest query, row_total "
                  "= the mean total weight of those rows (softmax rows sum to 1, ReLU rows need not), and "
                  "bos_at_trigger = the weight on key 1 at the trigger query."))]
    if (real / "config.json").is_file():
        real_finding, real_table, real_figure, real_note = summarize_real(folder)
        findings.append(real_finding)
        tables.append(real_table)
        figures.append(real_figure)
        notes.append(real_note)
    else:
        notes.append("The real-model part (first-token mass of a pretrained softmax LM) was not run: fetch a "
                     "model and pass it, e.g. `attnlab fetch smollm2` then `attnlab study sinks --model smollm2`.")
    return section(
        NAME, folder,
        question=("Does softmax attention trained on trigger-conditional averaging park its mass on BOS at "
                  "every position before the trigger, while ReLU attention solves the same task without a sink? "
                  "And, given --model, does a pretrained softmax LM park its attention on its first token?"),
        findings=tuple(findings),
        tables=tuple(tables),
        figures=tuple(figures),
        notes=tuple(notes),
    )


STUDY = register(Study(
    name="sinks", title="Attention sinks: softmax vs ReLU attention on trigger-conditional averaging",
    source="Attention Sinks Essential",
    compute=compute, summarize=summarize, takes_model=True))
