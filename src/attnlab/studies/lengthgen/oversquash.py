"""Over-squashing (Vasylenko et al. 2025 §3.3, Prop. 2 part 2; App. D.3, Prop. 4, Fig. 7): trained on a delayed copy at
sequence length 256, do alpha-entmax models (alpha > 1) carry larger gradients back to their early layers than
softmax models, through far fewer active paths?

Protocol (App. D.3: "8-layer transformers ... on a delayed copying task ... sequences of length 256"): one 8-layer
decoder per map (softmax, and entmax at each alpha) and seed, trained on attnlab's Copy rows of 256 tokens (``<bos>``,
127 random symbols, ``<sep>``, the symbols again, ``<eos>``; ``tasks.sequences.Copy``) with lengthgen's trainer; the
maps of one seed share the initialization and the data order (the seed sets both), so they are paired by seed. On
held-out rows (``MEASURE_SEED``, apart from lengthgen's test and selection rows) each trained model gives, per layer:

- ``grad_norm``: the mean over tokens of ||d loss / d x_l||_2, x_l the input of block l (the residual stream entering
  it; x_0 the embeddings), the loss being each row's own (mean cross-entropy over its scored answer tokens, the
  training loss of a one-row batch), so the number does not depend on how many rows are measured
  (``grad_source``: the same over the source tokens, the distant inputs the copy must reach);
- ``support``: the mean number of keys with non-zero weight per query (every head and every query of the rows):
  for softmax the weights > 0 in float32 (the paper's "within machine precision"), for entmax its exact support;
  ``causal``: the mean number of keys a query may attend (T + 1) / 2.

What the paper leaves open, settled as its plainest reading (the authors' public code, deep-spin/asentmax, holds
the length-generalization experiments but no over-squashing script): the model's positions are RoPE (the paper's
synthetic models use NAPE, whose ALiBi half underflows float32 softmax weights beyond about 100 keys at slope 1,
which would make softmax sparse by its position encoding rather than its map); the gradient is the row loss's; the
norm is averaged over every token of the row; "active paths" of a layer is the attention support per query
(App. D.3's |T_l| counts it plus the residual's own token, the same for every map). The measurement runs in float32
wherever the model trained. Budgets are this module's ``BUDGETS``; the demo's models are far smaller and shorter
trained than the paper's (it does not say how long its Fig. 7 models trained).

The two findings (``GRADIENT_NAME``, ``PATHS_NAME``) are decided by ``GRADIENT_RULE`` and ``PATHS_RULE``, pure
functions of per-seed numbers whose thresholds are the paper's (a ratio above 1, 5 keys), not any run's. Both read log
scales (a gradient ratio; a typical seed's support): the active-paths rule first read the arithmetic mean over seeds,
and moved to the logs when the demo's right-skewed supports led to simulating that interval, which fired on 7-15% of
lognormal draws at exactly 5 keys. Models whose held-out token accuracy is below ``LEARNED`` leave both not checked.
Their null controls are real worlds without the effect: a second softmax arm trained under other seeds
(``NULL_ARM``: entmax at alpha = 1 is softmax) in place of the entmax arms. ``calibrations`` registers each rule's
false-positive rate, power at the paper's effect and interval coverage per budget.

Entry points for the study: ``compute`` (train and measure into a folder, resumable), ``read`` (its raw table),
``report`` (writes the summary tables and the figure beside the study's and returns the findings, tables, figures
and notes of a section).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from attnlab import devices, io
from attnlab.diagnostics.paired import paired_interval, paired_mde, t_cdf
from attnlab.errors import ArgumentError
from attnlab.findings import calibrate
from attnlab.findings.calibrate import Calibration, Coverage, World, register
from attnlab.findings.finding import MDE, Finding, Null
from attnlab.findings.stats import holm
from attnlab.findings.verdict import FPR_MAX, decide
from attnlab.readback import ReadBackError, read_object
from attnlab.report.sections import Figure, Parts, Table
from attnlab.studies.lengthgen.config import schedule
from attnlab.tasks import TaskStream, get_task
from attnlab.tasks.seqtask import IGNORE
from attnlab.train.config import RunConfig
from attnlab.workers import Launch, check_jobs, in_process, spread

# The findings' names (``Finding.name``): what the study declares, the calibrations and the claims table cite.
GRADIENT_NAME = "lengthgen: over-squashing gradient norms"
PATHS_NAME = "lengthgen: over-squashing active paths"
NAMES = (GRADIENT_NAME, PATHS_NAME)

TASK = "copy"
SOFTMAX = "softmax"
# The null arm: softmax again (alpha-entmax at alpha = 1 is softmax), its initialization and data drawn from the
# seed + NULL_OFFSET, so that it pairs with the softmax arm of the seed as an entmax arm would, without the map.
NULL_ARM = "softmax_null"
NULL_OFFSET = 1000
MEASURE_SEED = 30_000  # the held-out rows measured (lengthgen's test rows are 10_000, its selection rows 20_000)
FIRST = 0  # the layer the rules read: the first (App. D.3: "especially in earlier layers", "in the first layer")

# The paper's effects. Fig. 7 left: entmax's gradient norms "up to 6x higher than softmax", largest in the earliest
# layers; Fig. 7 right: "in the first layer less than 5 tokens are kept active on average", softmax "always selects
# all possible paths (within machine precision)".
PAPER_RATIO = 6.0
PATHS_MAX = 5.0
FULL_SHARE = 0.99  # softmax's first-layer support over the causal count that counts as every key active
EFFECT_SUPPORT = 3.0  # the simulated world of the paper's claim: 3 active keys, two under its bound of 5
# Fig. 7's models are trained ones: an arm whose mean held-out answer-token accuracy (teacher forced) is below this has
# not learned the copy, and the findings are not checked (lengthgen's own bar for "learned", ``experiment.LEARNED``).
LEARNED = 0.5

GRADIENT_RULE = (
    f"per entmax alpha, the per-seed log ratio log(entmax / softmax) of the mean first-layer input-gradient norm on "
    "the held-out rows (paired by seed: same initialization and data order) gets a one-sided paired Student-t "
    f"p-value (H0: mean <= 0, S - 1 degrees of freedom); Holm's step-down over the alphas at family-wise "
    f"{FPR_MAX:.0%}; the claim holds when every alpha trained rejects (at least 2 pairs each)"
)
PATHS_RULE = (
    "for every entmax alpha, the Student-t 95% interval over seeds of the log of each seed's mean number of keys with "
    "non-zero weight per query in the first layer (over heads and every query of the held-out rows) lies below "
    f"log {PATHS_MAX:g}, i.e. the geometric mean over seeds (a typical seed) is below {PATHS_MAX:g} keys with 95% "
    "confidence (seeds' supports are right-skewed: an interval of their arithmetic mean fired on 7-15% of simulated "
    f"lognormal draws whose mean was exactly {PATHS_MAX:g}); and "
    f"softmax keeps every causal key active: on every seed its mean first-layer support is at least "
    f"{FULL_SHARE:.0%} of the mean causal count (weights > 0 in float32, the paper's 'within machine precision'); "
    "at least 2 seeds"
)
GRADIENT_NULL = (
    f"alpha = 1: a second softmax arm (seeds + {NULL_OFFSET}) in place of the entmax arms, its per-seed log ratio "
    "to softmax under the same rule"
)
PATHS_NULL = (
    "alpha = 1: the softmax arms read as the entmax arm (the first arm's supports) with the second softmax arm "
    f"(seeds + {NULL_OFFSET}) as softmax, under the same rule"
)


@dataclass(frozen=True)
class Budget:
    """One budget: the maps (softmax first, then entmax at each alpha), paired seeds, the 8-layer model (heads,
    width, FFN width; None: 4 d_model), the Copy row length in tokens, the training (steps of ``batch`` rows at peak
    ``lr``) and the held-out rows measured."""

    maps: tuple[str, ...]
    seeds: int
    layers: int
    heads: int
    d_model: int
    ffn_width: int | None
    length: int
    steps: int
    batch: int
    lr: float
    rows: int


# a quick look: 3 pairs, the shortest training that moves the maps apart
SMOKE = Budget(
    maps=("softmax", "entmax_a1.5", "entmax_a2"),
    seeds=3,
    layers=8,
    heads=2,
    d_model=32,
    ffn_width=None,
    length=256,
    steps=150,
    batch=4,
    lr=3e-3,
    rows=8,
)
BUDGETS: dict[str, Budget] = {
    "smoke": SMOKE,
    # what attnlab demo runs: 5 pairs (a one-sided sign-flip test over 5 pairs can reach 1/32), about 4-6 minutes on 2
    # cores. Rows of 4 for 300 steps: 85-99% held-out token accuracy on two pilot seeds per map, where rows of 8 for
    # 150 steps (the same tokens) left 18-41%.
    "demo": replace(SMOKE, seeds=5, steps=300, rows=16),
    # the paper's scale: 8 layers at length 256, Table 5's Copy width (16 heads of 16, FFN 1024) and data (20M
    # samples in batches of 128, App. G.2), the alphas of App. D.2 (1.5, 1.75, 2); the peak learning rate 1e-3 is
    # attnlab's choice (the paper gives none for Fig. 7). 12 pairs: the active-paths rule needs every alpha's interval
    # under 5 keys, which at a log-support sd of 0.45 and a typical seed at 3 keys 5 pairs reach 13% of the time
    "full": Budget(
        maps=("softmax", "entmax_a1.5", "entmax_a1.75", "entmax_a2"),
        seeds=12,
        layers=8,
        heads=16,
        d_model=256,
        ffn_width=1024,
        length=256,
        steps=20_000_000 // 128,
        batch=128,
        lr=1e-3,
        rows=64,
    ),
}


def arms(budget: str) -> tuple[str, ...]:
    """The arms the budget trains: its maps and the null arm."""
    return (*BUDGETS[budget].maps, NULL_ARM)


def arm_map(arm: str) -> str:
    """The row map of an arm (the null arm is softmax)."""
    return SOFTMAX if arm == NULL_ARM else arm


def alpha_of(arm: str) -> float:
    """An arm's alpha: 1 for softmax (and the null arm), else entmax's."""
    name = arm_map(arm)
    return 1.0 if name == SOFTMAX else float(name.removeprefix("entmax_a"))


def init_seed(arm: str, seed: int) -> int:
    """The seed of an arm's initialization and data order: the pair's seed, offset for the null arm."""
    return seed + NULL_OFFSET if arm == NULL_ARM else seed


def run_config(budget: str, arm: str, seed: int, vocab: int) -> RunConfig:
    """The training run of ``arm`` under pair ``seed``: the budget's 8-layer RoPE decoder with the arm's map, AdamW
    with warmup and cosine decay, no weight decay (the authors' Copy config), one checkpoint at the end."""
    plan = BUDGETS[budget]
    model = {
        "context": plan.length,
        "vocab": vocab,
        "layers": plan.layers,
        "heads": plan.heads,
        "d_model": plan.d_model,
        "ffn": "gelu",
        "ffn_width": plan.ffn_width,
        "positions": "rope",
        "rowmap": arm_map(arm),
    }
    train = {
        **schedule(plan.steps, plan.batch, plan.lr, budget),
        "seed": init_seed(arm, seed),
        "eval_every": plan.steps,
        "checkpoint_every": max(1, min(plan.steps, 1000)),
        "keep": 1,
    }
    return RunConfig.from_dict({"model": model, "train": train})


# --- measurement ---


def _add_norms(sums: dict[str, torch.Tensor], grads: Sequence[torch.Tensor], scored: torch.Tensor) -> None:
    """Add one chunk's per-token input-gradient norms per layer to ``sums``: over every token and over the source
    tokens 1..m of a Copy row (those before the separator, where the first scored target sits)."""
    first = scored.float().argmax(-1)
    pos = torch.arange(scored.shape[1], device=scored.device)
    source = ((pos[None, :] >= 1) & (pos[None, :] < first[:, None])).cpu()
    for layer, g in enumerate(grads):
        norms = g.float().norm(dim=-1).double().cpu()
        sums["grad"][layer] += norms.sum()
        sums["tokens"][layer] += norms.numel()
        sums["source"][layer] += norms[source].sum()
        sums["n_source"][layer] += float(source.sum())


def measure(model: torch.nn.Module, ids: torch.Tensor, targets: torch.Tensor, chunk: int = 16) -> list[dict[str, Any]]:
    """Per layer of ``model`` (a ``Decoder``) on the rows ``ids`` / ``targets``: the mean over tokens of the input
    gradient's L2 norm (``grad_norm``; over the tokens before the first scored one too, ``grad_source`` over the
    tokens 1..m of a Copy row, i.e. those before the separator), the mean attention support per query over heads
    (``support``: weights > 0 as the map returned them) and the mean causal count (``causal``). Each row's loss is
    its own mean cross-entropy over its scored tokens; ``chunk`` rows per forward, in float32."""
    model.eval()
    device = devices.model_device(model)
    layers = len(model.layers)
    sums = {k: torch.zeros(layers, dtype=torch.float64) for k in ("grad", "tokens", "source", "n_source")}
    sums.update({k: torch.zeros(layers, dtype=torch.float64) for k in ("support", "causal", "queries")})

    def observe(block) -> None:
        w = block.weights.detach()
        allowed = block.allowed.expand(w.shape)
        sums["support"][block.layer] += float((w > 0).sum())
        sums["causal"][block.layer] += float(allowed.sum())
        sums["queries"][block.layer] += w.shape[:-1].numel()

    inputs: list[torch.Tensor] = []  # each block's input x_l, in order, for the chunk in flight
    hooks = [b.register_forward_pre_hook(lambda _m, args: inputs.append(args[0])) for b in model.layers]
    try:
        for start in range(0, ids.shape[0], chunk):
            inputs.clear()
            x_ids = ids[start : start + chunk].to(device)
            y = targets[start : start + chunk].to(device)
            with torch.enable_grad(), model.observed(observe, weights=True):
                logits = model(x_ids).float()
                scored = y != IGNORE
                ce = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=IGNORE, reduction="none"
                ).view_as(y)
                # each row's own loss, summed over rows: every row's tokens get the gradient of their row's loss
                row_loss = (ce * scored).sum(-1) / scored.sum(-1).clamp(min=1)
                grads = torch.autograd.grad(row_loss.sum(), inputs)
            _add_norms(sums, grads, scored)
    finally:
        for h in hooks:
            h.remove()
    return [
        {
            "layer": layer,
            "grad_norm": float(sums["grad"][layer] / sums["tokens"][layer]),
            "grad_source": float(sums["source"][layer] / sums["n_source"][layer])
            if sums["n_source"][layer]
            else math.nan,
            "support": float(sums["support"][layer] / sums["queries"][layer]),
            "causal": float(sums["causal"][layer] / sums["queries"][layer]),
        }
        for layer in range(layers)
    ]


@torch.no_grad()
def token_accuracy(model: torch.nn.Module, ids: torch.Tensor, targets: torch.Tensor, chunk: int = 16) -> float:
    """The share of scored answer tokens the model predicts right (teacher forced) on the rows."""
    model.eval()
    device = devices.model_device(model)
    right = total = 0
    for start in range(0, ids.shape[0], chunk):
        y = targets[start : start + chunk].to(device)
        pred = model(ids[start : start + chunk].to(device)).argmax(-1)
        scored = y != IGNORE
        right += int(((pred == y) & scored).sum())
        total += int(scored.sum())
    return right / max(1, total)


def cell_name(arm: str, seed: int) -> str:
    return f"{arm}_seed{seed}"


def _settings(budget: str, arm: str, seed: int) -> dict[str, Any]:
    return json.loads(
        json.dumps(
            {
                "budget": budget,
                "plan": asdict(BUDGETS[budget]),
                "arm": arm,
                "seed": seed,
                "init_seed": init_seed(arm, seed),
                "measure_seed": MEASURE_SEED,
                "task": TASK,
            }
        )
    )


def _finished(path: Path, settings: Mapping[str, Any]) -> dict[str, Any] | None:
    try:
        done = read_object(path)
    except (ReadBackError, OSError):
        return None
    ok = isinstance(done, dict) and done.get("settings") == settings and isinstance(done.get("layers"), list)
    return done if ok else None


def run_cell(
    budget: str, arm: str, seed: int, folder: Path, progress: bool = False, device: str = "auto", dtype: str = "auto"
) -> dict[str, Any]:
    """Train (or resume) ``arm`` under pair ``seed`` into ``folder/runs/<arm>_seed<seed>`` and measure it on the
    held-out rows; written to ``folder/cells/<arm>_seed<seed>.json``, reused when its settings match."""
    from attnlab.train.trainer import Trainer

    folder = Path(folder)
    plan, stem = BUDGETS[budget], cell_name(arm, seed)
    path = folder / "cells" / f"{stem}.json"
    settings = _settings(budget, arm, seed)
    if (done := _finished(path, settings)) is not None:
        return done
    stream = TaskStream(TASK, plan.length, seed=init_seed(arm, seed))
    run = devices.training(run_config(budget, arm, seed, stream.vocab_size), dtype, device)
    trainer = Trainer(run, folder / "runs" / stem, resume=True, progress=progress, stream=stream, device=device)
    summary = trainer.run()
    model = trainer.model.float()
    batch = get_task(TASK).generate(plan.rows, plan.length, MEASURE_SEED)
    cell = {
        "settings": settings,
        "arm": arm,
        "map": arm_map(arm),
        "alpha": alpha_of(arm),
        "seed": seed,
        "train_loss": summary.get("loss"),
        "seconds": summary.get("seconds"),
        "token_accuracy": token_accuracy(model, batch.ids, batch.targets),
        "layers": measure(model, batch.ids, batch.targets),
    }
    io.write_json(path, cell)
    return cell


COLUMNS = (
    "budget",
    "arm",
    "map",
    "alpha",
    "seed",
    "layer",
    "grad_norm",
    "grad_source",
    "support",
    "causal",
    "token_accuracy",
    "train_loss",
)


def layer_table(cells: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The raw table: one row per arm, seed and layer (``COLUMNS``)."""
    rows = [
        {
            "budget": cell["settings"]["budget"],
            **{k: cell[k] for k in ("arm", "map", "alpha", "seed", "token_accuracy", "train_loss")},
            **layer,
        }
        for cell in cells
        for layer in cell["layers"]
    ]
    return pd.DataFrame(rows, columns=list(COLUMNS))


LAYERS = "layers"  # the raw table's stem in the compute folder


def compute(
    budget: str,
    seed: int,
    folder: Path,
    progress: bool = False,
    device: str = "auto",
    dtype: str = "auto",
    *,
    launch: Launch | None = None,
    jobs: int | None = None,
) -> pd.DataFrame:
    """Train and measure every arm (``arms``) under the pairs ``seed .. seed + seeds - 1`` into ``folder``, the cells
    spread as ``launch`` says (default: this machine, ``jobs`` at once on the CPU, default one per core below the
    full budget), then write the raw table ``folder/layers.csv`` (and .md) and return it. Resumable: a cell whose
    JSON holds its settings is reused, a run resumes from its last checkpoint."""
    if budget not in BUDGETS:
        raise ArgumentError(f"over-squashing budget must be one of {', '.join(BUDGETS)}, got {budget!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    launch = launch or Launch()
    jobs = (1 if budget == "full" else max(1, os.cpu_count() or 1)) if jobs is None else jobs
    check_jobs(jobs)
    todo = [(arm, s) for arm in arms(budget) for s in range(seed, seed + BUDGETS[budget].seeds)]
    shown = progress and in_process(len(todo), jobs=jobs, device=device, launch=launch)
    calls = [(budget, arm, s, folder, shown, device, dtype) for arm, s in todo]
    cells = spread(run_cell, calls, jobs=jobs, device=device, launch=launch, folder=folder)
    table = layer_table(cells)
    io.write_table(folder / LAYERS, table)
    return table


def read(folder: Path) -> pd.DataFrame:
    """The raw table ``compute`` wrote into ``folder``."""
    return pd.read_csv(Path(folder) / f"{LAYERS}.csv")


# --- tables ---


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per arm and layer, over seeds: the geometric mean gradient norm (all tokens, source tokens), its ratio to
    softmax's (the geometric mean of the per-seed ratios, paired by seed), the mean support, the causal count, the
    support's share of it, the held-out token accuracy and the seeds."""
    soft = table[table.arm == SOFTMAX].set_index(["seed", "layer"]).grad_norm
    out = []
    for (arm, layer), part in table.groupby(["arm", "layer"], sort=False):
        ratio = np.log(
            part.set_index(["seed", "layer"]).grad_norm / soft.reindex(part.set_index(["seed", "layer"]).index)
        )
        out.append(
            {
                "arm": arm,
                "map": part["map"].iloc[0],
                "alpha": part.alpha.iloc[0],
                "layer": int(layer),
                "grad_norm": float(np.exp(np.log(part.grad_norm).mean())),
                "grad_source": float(np.exp(np.log(part.grad_source).mean())),
                "ratio_to_softmax": float(np.exp(ratio.mean())) if ratio.notna().any() else math.nan,
                "support": float(part.support.mean()),
                "causal": float(part.causal.mean()),
                "support_share": float((part.support / part.causal).mean()),
                "token_accuracy": float(part.token_accuracy.mean()),
                "seeds": int(part.seed.nunique()),
            }
        )
    return pd.DataFrame(out)


def first_layer(table: pd.DataFrame) -> pd.DataFrame:
    """One row per pair seed: each arm's first-layer gradient norm, log ratio to softmax and support."""
    first = table[table.layer == FIRST]
    wide = first.pivot_table(index="seed", columns="arm", values=["grad_norm", "support"])
    out = pd.DataFrame(index=wide.index)
    for arm in first.arm.unique():
        out[f"{arm} grad"] = wide["grad_norm"][arm]
        if arm != SOFTMAX:
            out[f"{arm} log ratio"] = np.log(wide["grad_norm"][arm] / wide["grad_norm"][SOFTMAX])
        out[f"{arm} support"] = wide["support"][arm]
    return out.reset_index()


# --- rules: pure functions of per-seed numbers ---


def one_sided_p(values: Sequence[float]) -> float:
    """The one-sided paired Student-t p-value of H0: mean <= 0 from per-seed values (1 with fewer than two finite
    values or a mean <= 0; 0 with a positive mean and no spread)."""
    d = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if len(d) < 2 or d.mean() <= 0:
        return 1.0
    sd = float(d.std(ddof=1))
    if sd == 0:
        return 0.0
    return 1.0 - t_cdf(float(d.mean()) / (sd / math.sqrt(len(d))), len(d) - 1)


def gradient_pvalues(ratios: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Holm-adjusted one-sided p-values per arm of the per-seed log ratios ``ratios`` (arm -> values)."""
    names = list(ratios)
    return dict(zip(names, holm([one_sided_p(ratios[n]) for n in names]) if names else []))


def gradient_rule(ratios: Mapping[str, Sequence[float]]) -> bool:
    """``GRADIENT_RULE`` on arm -> per-seed log ratios entmax / softmax of the first-layer gradient norm."""
    if not ratios or any(len([v for v in r if math.isfinite(v)]) < 2 for r in ratios.values()):
        return False
    return all(p <= FPR_MAX for p in gradient_pvalues(ratios).values())


def support_interval(values: Sequence[float]) -> dict[str, float]:
    """The geometric mean over seeds of per-seed mean supports (keys, each >= 1) and its Student-t 95% interval, from
    the interval of their logs: n, mean, sd (of the logs), lo, hi (keys)."""
    v = np.asarray([x for x in values if math.isfinite(x) and x > 0], dtype=float)
    stats = paired_interval(np.log(v))
    return {"n": stats["n"], "sd": stats["sd"], **{k: math.exp(stats[k]) for k in ("mean", "lo", "hi")}}


def paths_rule(data: Mapping[str, Any]) -> bool:
    """``PATHS_RULE`` on ``{"entmax": arm -> per-seed first-layer supports, "softmax_share": per-seed softmax
    support / causal count}``."""
    entmax, share = data["entmax"], list(data["softmax_share"])
    if not entmax or not share or any(not math.isfinite(s) for s in share):
        return False
    for values in entmax.values():
        stats = support_interval(values)
        if not (stats["n"] >= 2 and stats["hi"] < PATHS_MAX):
            return False
    return min(share) >= FULL_SHARE


# --- calibration: the rules on simulated worlds ---


@dataclass(frozen=True)
class Spread:
    """Seed-to-seed spreads the worlds use: ``ratio`` the sd of a per-seed log ratio entmax / softmax of the
    first-layer gradient norm, ``support`` the sd of the log of a per-seed mean first-layer support."""

    ratio: float
    support: float


# The demo record (5 pairs) measured per-seed log-ratio sds of 0.40 (alpha 1.5) and 0.46 (alpha 2), 0.21 for the
# null arm, and log-support sds of 0.45 (alpha 1.5) and 0.90 (alpha 2): smoke and demo take 0.6 and the larger
# 0.9. The full budget's better-trained models are assumed to vary like the demo's alpha 1.5 (0.45). The findings
# use each run's own spread at run time for their power.
SPREADS = {"smoke": Spread(0.6, 0.9), "demo": Spread(0.6, 0.9), "full": Spread(0.6, 0.45)}


def _ratio_draw(mean: float, sd: float, pairs: int, alphas: int, tails: float | None = None):
    """Per-seed log ratios for ``alphas`` entmax arms sharing one softmax arm: each arm's log norm is its mean plus
    noise of sd sd / sqrt(2) (normal, or Student-t with ``tails`` df scaled to that sd)."""
    half = sd / math.sqrt(2)

    def noise(rng, size):
        if tails is None:
            return rng.normal(0.0, half, size)
        return rng.standard_t(tails, size) * half / math.sqrt(tails / (tails - 2))

    def draw(rng):
        soft = noise(rng, pairs)
        return {f"entmax {i}": mean + noise(rng, pairs) - soft for i in range(alphas)}

    return draw


def gradient_calibration(budget: str, pairs: int, alphas: int, sd: float) -> Calibration:
    """``GRADIENT_RULE`` at ``pairs`` pairs, ``alphas`` entmax arms and per-seed log-ratio spread ``sd``."""
    effect = math.log(PAPER_RATIO)

    def coverage(rng):
        d = rng.normal(effect, sd, pairs)
        stats = paired_interval(d)
        return stats["lo"], stats["hi"], effect

    return Calibration(
        GRADIENT_NAME,
        budget,
        gradient_rule,
        GRADIENT_RULE,
        f"{pairs} pairs, {alphas} entmax alphas, per-seed log-ratio sd {sd:g}",
        (
            World("no effect (alpha = 1: softmax against softmax)", False, _ratio_draw(0.0, sd, pairs, alphas)),
            World("no effect, heavy-tailed seeds (t, 3 df)", False, _ratio_draw(0.0, sd, pairs, alphas, tails=3.0)),
            World(
                f"the effect's opposite: softmax {PAPER_RATIO:g}x entmax",
                False,
                _ratio_draw(-effect, sd, pairs, alphas),
            ),
            World(
                f"the paper's: entmax {PAPER_RATIO:g}x softmax in the first layer",
                True,
                _ratio_draw(effect, sd, pairs, alphas),
            ),
        ),
        (Coverage(f"the mean log ratio's 95% interval, {pairs} pairs", coverage),),
    )


def _paths_draw(support: float, share: float, sd: float, seeds: int, alphas: int, tails: float | None = None):
    """Per-seed first-layer supports of ``alphas`` entmax arms, lognormal about the geometric mean ``support`` with
    log sd ``sd`` (or Student-t logs with ``tails`` df scaled to it), and softmax's share ``share`` on every seed."""

    def noise(rng):
        if tails is None:
            return rng.normal(0.0, sd, seeds)
        return rng.standard_t(tails, seeds) * sd / math.sqrt(tails / (tails - 2))

    def draw(rng):
        return {
            "entmax": {f"entmax {i}": support * np.exp(noise(rng)) for i in range(alphas)},
            "softmax_share": np.full(seeds, share),
        }

    return draw


def paths_calibration(budget: str, seeds: int, alphas: int, sd: float, causal: float = 128.5) -> Calibration:
    """``PATHS_RULE`` at ``seeds`` seeds, ``alphas`` entmax arms and a per-seed log-support spread ``sd``."""

    def coverage(rng):
        stats = support_interval(EFFECT_SUPPORT * np.exp(rng.normal(0.0, sd, seeds)))
        return stats["lo"], stats["hi"], EFFECT_SUPPORT

    return Calibration(
        PATHS_NAME,
        budget,
        paths_rule,
        PATHS_RULE,
        f"{seeds} seeds, {alphas} entmax alphas, per-seed log-support sd {sd:g}",
        (
            World(
                f"entmax support exactly {PATHS_MAX:g} keys (geometric mean)",
                False,
                _paths_draw(PATHS_MAX, 1.0, sd, seeds, alphas),
            ),
            World(
                f"entmax support exactly {PATHS_MAX:g} keys, heavy-tailed seeds (t, 3 df, on the logs)",
                False,
                _paths_draw(PATHS_MAX, 1.0, sd, seeds, alphas, tails=3.0),
            ),
            World(
                "alpha = 1: the 'entmax' arm as dense as softmax", False, _paths_draw(causal, 1.0, sd, seeds, alphas)
            ),
            World(
                f"entmax sparse, softmax losing keys ({FULL_SHARE - 0.04:.0%} of the causal count)",
                False,
                _paths_draw(EFFECT_SUPPORT, FULL_SHARE - 0.04, sd, seeds, alphas),
            ),
            World(
                f"the paper's: entmax {EFFECT_SUPPORT:g} keys (under {PATHS_MAX:g}), softmax every key",
                True,
                _paths_draw(EFFECT_SUPPORT, 1.0, sd, seeds, alphas),
            ),
        ),
        (Coverage(f"the geometric mean support's 95% interval, {seeds} seeds", coverage),),
    )


def calibrations(budget: str) -> list[Calibration]:
    """Both rules at ``budget``'s pairs and alphas, with its nominal ``SPREADS``."""
    plan, spread_ = BUDGETS[budget], SPREADS[budget]
    alphas = len(plan.maps) - 1
    causal = (plan.length + 1) / 2
    return [
        gradient_calibration(budget, plan.seeds, alphas, spread_.ratio),
        paths_calibration(budget, plan.seeds, alphas, spread_.support, causal),
    ]


CALIBRATIONS = [register(c) for budget in BUDGETS for c in calibrations(budget)]


# --- findings ---


def gradient_data(table: pd.DataFrame) -> tuple[dict[str, list[float]], list[float]]:
    """(entmax arm -> per-seed first-layer log ratios to softmax, the null arm's per-seed log ratios to softmax),
    over the seeds both arms of a pair measured."""
    first = table[table.layer == FIRST].pivot_table(index="seed", columns="arm", values="grad_norm")
    if SOFTMAX not in first:
        return {}, []

    def ratios(arm: str) -> list[float]:
        if arm not in first:
            return []
        both = first[[arm, SOFTMAX]].dropna()
        return np.log(both[arm] / both[SOFTMAX]).tolist()

    entmax = [a for a in table.arm.unique() if a not in (SOFTMAX, NULL_ARM)]
    return {a: ratios(a) for a in entmax}, ratios(NULL_ARM)


def _sd(values: Sequence[Sequence[float]]) -> float:
    pooled = [np.std(v, ddof=1) for v in values if len(v) >= 2]
    return float(max(pooled)) if pooled else math.nan


def _listed(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    return "/".join(fmt.format(v) for v in values)


def not_learned(table: pd.DataFrame) -> str | None:
    """Why the run cannot test Fig. 7's claims: the arms whose mean held-out token accuracy is below ``LEARNED``
    (None when every arm learned)."""
    acc = table.groupby("arm").token_accuracy.mean()
    low = acc[acc < LEARNED]
    if low.empty:
        return None
    cells = ", ".join(f"{arm} {100 * v:.0f}%" for arm, v in low.items())
    return f"not every arm learned the copy (mean held-out token accuracy below {LEARNED:.0%}: {cells})"


def gradient_finding(table: pd.DataFrame) -> Finding:
    """Fig. 7 left: entmax's first-layer input-gradient norm above softmax's, paired by seed (``GRADIENT_RULE``;
    null: the second softmax arm)."""
    ratios, null_ratios = gradient_data(table)
    claim = (
        "alpha-entmax (alpha > 1) carries larger gradients to the earliest layers than softmax: on the delayed copy "
        "at length 256, the first layer's input-gradient norm is higher, up to 6x (Vasylenko et al. 2025 App. D.3, "
        "Fig. 7 left)"
    )
    holds = gradient_rule(ratios) if ratios else None
    null_holds = gradient_rule({NULL_ARM: null_ratios}) if len(null_ratios) >= 2 else None
    null_p = one_sided_p(null_ratios)
    null = Null(
        GRADIENT_NULL,
        null_holds,
        f"log ratios {_listed(null_ratios)} (ratio {math.exp(np.mean(null_ratios)):.2f}x), one-sided p {null_p:.3f}"
        if null_ratios
        else "no second softmax arm in the table",
    )
    n = min((len(v) for v in ratios.values()), default=0)
    sd = _sd(list(ratios.values()))
    effect = math.log(PAPER_RATIO)
    if n >= 2 and math.isfinite(sd):
        k = len(ratios)
        value = paired_mde(sd, n, alpha=2 * FPR_MAX / k)  # one-sided 5% / k: the strictest Holm step
        power = calibrate.power(gradient_calibration("this run", n, k, max(sd, 1e-9)))
        mde = MDE(
            float(value),
            effect,
            "log ratio entmax / softmax",
            f"paired t at one-sided {FPR_MAX:.0%}/{k} (Holm's strictest step) and 80% power from the run's largest "
            f"per-seed log-ratio sd {sd:.3f} over {n} pairs; power simulated at the paper's 6x with that sd",
            power,
        )
    else:
        mde = MDE(None, effect, "log ratio entmax / softmax", "fewer than two pairs: no spread to size the design")
    pvals = gradient_pvalues(ratios) if ratios else {}
    parts = []
    for arm, values in ratios.items():
        stats = paired_interval(values)
        parts.append(
            f"{arm}: log ratios {_listed(values)} over {stats['n']} pairs, mean {stats['mean']:+.2f} "
            f"(ratio {math.exp(stats['mean']):.2f}x, 95% [{math.exp(stats['lo']):.2f}x, "
            f"{math.exp(stats['hi']):.2f}x]), "
            f"Holm p {pvals[arm]:.3g}"
            if stats["n"] >= 2
            else f"{arm}: {stats['n']} pair"
        )
    return decide(
        claim,
        rule=GRADIENT_RULE,
        holds=holds,
        null=null,
        mde=mde,
        evidence="; ".join(parts) or "no entmax arm in the table",
        precondition=not_learned(table)
        if ratios and n >= 2
        else "fewer than two paired seeds of an entmax arm and softmax",
        reads={arm: v for arm, v in ratios.items()},
        null_reads={NULL_ARM: null_ratios} if null_ratios else None,
        name=GRADIENT_NAME,
    )


def paths_data(table: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rule's data and its null's: entmax arm -> per-seed first-layer support with softmax's per-seed share of
    the causal count; the null reads the softmax arm as the entmax arm and the second softmax arm as softmax."""
    first = table[table.layer == FIRST]

    def supports(arm: str) -> list[float]:
        return first[first.arm == arm].sort_values("seed").support.tolist()

    def shares(arm: str) -> list[float]:
        part = first[first.arm == arm].sort_values("seed")
        return (part.support / part.causal).tolist()

    entmax = [a for a in first.arm.unique() if a not in (SOFTMAX, NULL_ARM)]
    data = {"entmax": {a: supports(a) for a in entmax}, "softmax_share": shares(SOFTMAX)}
    null = {"entmax": {SOFTMAX: supports(SOFTMAX)}, "softmax_share": shares(NULL_ARM) or shares(SOFTMAX)}
    return data, null


def paths_finding(table: pd.DataFrame) -> Finding:
    """Fig. 7 right: entmax keeps fewer than 5 keys active per query in the first layer, softmax every causal key
    (``PATHS_RULE``; null: alpha = 1, the softmax arms)."""
    data, null_data = paths_data(table)
    claim = (
        "alpha-entmax prunes the gradient paths: fewer than 5 keys per query keep a non-zero weight in the first "
        "layer on average, while softmax keeps every causal key active within machine precision (Vasylenko et al. "
        "2025 Prop. 2 part 2, Prop. 4, Fig. 7 right)"
    )
    first = table[table.layer == FIRST]
    causal = float(first.causal.mean()) if len(first) else math.nan
    holds = paths_rule(data) if data["entmax"] and data["softmax_share"] else None
    null_holds = paths_rule(null_data) if null_data["entmax"][SOFTMAX] else None
    soft = null_data["entmax"][SOFTMAX]
    null = Null(
        PATHS_NULL,
        null_holds,
        f"softmax's first-layer support {np.mean(soft):.1f} of {causal:.1f} causal keys per query"
        if soft
        else "no softmax arm",
    )
    n = min((len(v) for v in data["entmax"].values()), default=0)
    logs = [np.log([x for x in v if math.isfinite(x) and x > 0]) for v in data["entmax"].values()]
    sd = _sd(logs)
    effect = math.log(PATHS_MAX / EFFECT_SUPPORT)
    unit = f"log keys below log {PATHS_MAX:g}"
    if n >= 2 and math.isfinite(sd):
        power = calibrate.power(paths_calibration("this run", n, len(data["entmax"]), max(sd, 1e-9), causal))
        mde = MDE(
            float(paired_mde(sd, n)),
            effect,
            unit,
            f"Student-t 95% interval (two-sided 5%) and 80% power from the run's largest per-seed log-support sd "
            f"{sd:.3f} over {n} seeds; power simulated at a geometric mean of {EFFECT_SUPPORT:g} keys with that sd",
            power,
        )
    else:
        mde = MDE(None, effect, unit, "fewer than two seeds: no spread")
    parts = []
    for arm, values in data["entmax"].items():
        stats = support_interval(values)
        parts.append(
            f"{arm}: first-layer support {_listed(values, '{:.1f}')} keys per seed, geometric mean {stats['mean']:.2f} "
            f"(95% [{stats['lo']:.2f}, {stats['hi']:.2f}])"
        )
    share = data["softmax_share"]
    parts.append(
        f"softmax: {np.mean(soft):.1f} of {causal:.1f} causal keys, share {_listed(share, '{:.4f}')} per seed"
        if share
        else "no softmax arm"
    )
    return decide(
        claim,
        rule=PATHS_RULE,
        holds=holds,
        null=null,
        mde=mde,
        evidence="; ".join(parts),
        precondition=not_learned(table) if n >= 2 and share else "fewer than two seeds of an entmax arm and softmax",
        reads={**data["entmax"], "softmax share": share},
        null_reads={"softmax support": soft, "second softmax share": null_data["softmax_share"]},
        name=PATHS_NAME,
    )


def findings(table: pd.DataFrame) -> list[Finding]:
    """Both findings from the raw table."""
    return [gradient_finding(table), paths_finding(table)]


def report(folder: Path, out: Path, stem: str = "oversquash") -> Parts:
    """The section's parts from the run in ``folder``: writes ``out/<stem>_layers`` (the summary per arm and layer),
    ``out/<stem>_seeds`` (the first layer per seed) and the figure ``out/<stem>`` (.png, .svg); returns the findings,
    tables, figures and notes they add to the study's section."""
    from attnlab.report.plot_lengthgen import plot_oversquash

    table = read(folder)
    out = Path(out)
    io.write_table(out / f"{stem}_layers", summary(table))
    io.write_table(out / f"{stem}_seeds", first_layer(table))
    plot_oversquash(table, out / stem)
    budget = str(table.budget.iloc[0]) if len(table) else None
    plan = BUDGETS.get(budget)
    notes = [
        f"Over-squashing (App. D.3, Fig. 7), {budget} budget: {plan.layers if plan else '?'}-layer RoPE decoders "
        f"trained on Copy rows of {plan.length if plan else '?'} tokens"
        + (
            f", {plan.heads} heads x {plan.d_model} wide, {plan.steps} steps of {plan.batch} rows, {plan.seeds} "
            f"pairs; measured on {plan.rows} held-out rows"
            if plan
            else ""
        )
        + ". Maps of one seed share the initialization and data order; the null arm is softmax under the seed + "
        f"{NULL_OFFSET}. The paper does not say how long its Fig. 7 models trained; the demo's are far smaller."
    ]
    return Parts(
        tuple(findings(table)),
        (
            Table(
                f"{stem}_layers",
                "Over-squashing per arm and layer (geometric means over seeds): the mean L2 norm of d loss / d "
                "(layer input) over all tokens and over the source tokens, its ratio to softmax's (paired by seed), "
                "the mean number of keys with non-zero weight per query, the causal count and its share.",
            ),
            Table(
                f"{stem}_seeds",
                "Over-squashing, the first layer per seed: each arm's input-gradient norm, its log ratio to "
                "softmax's and its mean support (keys per query): what the two rules read.",
            ),
        ),
        (
            Figure(
                stem,
                "Over-squashing (Vasylenko et al. 2025 Fig. 7): left, the mean input-gradient norm per layer (log "
                "scale; dots are seeds); right, the mean number of keys with non-zero weight per query (log scale), "
                "the dotted line every causal key. Entmax above softmax on the left and far below the dotted line "
                "on the right is the paper's picture.",
            ),
        ),
        tuple(notes),
    )
