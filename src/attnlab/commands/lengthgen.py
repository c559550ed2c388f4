"""Length generalization (Vasylenko et al. 2025 §5.1, Table 1): one model per attention variant, trained at one length
(or at lengths drawn from a range, as the seed's 32-64) on a synthetic task and scored by exact match
(accuracy for classification tasks) at multiples of it, with the entropy and support of the attention
rows at every length (the non-dispersion claim of Vasylenko et al. 2025 §3.2).

Under NAPE the split between rows that disperse and rows that stay bounded can follow the head's
position encoding rather than the row map: on small Copy models the ALiBi heads keep a bounded support
under entmax while the NoPE heads spread under both maps (see the per-head ``dispersion`` table and
``tests/commands/test_lengthgen.py``).

Each variant is a cell: trained into ``out/runs/<variant>`` (resumable) and written to
``out/cells/<variant>.json`` once scored; a rerun skips finished cells whose config matches, and may change
only what is scored (``SCORING``): a folder trained under other settings is refused unless overwritten.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .. import io, options, rowmaps
from ..options import option
from ..registry import Registry
from ..site import WeightBlock
from ..tasks import TASKS, TaskStream, exact_match, get_task, scored_accuracy
from ..tasks.seqtask import IGNORE, Task
from ..train.config import RunConfig, assignment
from ..train import checkpoint as ckpt
from ..train.trainer import Trainer
from ..workers import check_jobs, run_all

# Variants that are a scaler plus a map rather than a registry row map (Vasylenko et al. 2025 §4.1, §5
# baselines): name -> the model fields they set. Any registered row-map name is a variant as well.
VARIANTS: Registry[dict[str, Any]] = Registry("lengthgen variant")
# Old variant names -> new ones. "ssmax" names only the row-map family ssmax_s{s} (fixed s); the SSMax
# baseline with a learned per-head scale of log n is "ssmax_learned".
RENAMED = {"ssmax": "ssmax_learned"}
# What a config's lengths count: tokens of a row, or the paper's units of the task (``Task.row_length``).
UNITS = ("tokens", "paper")
# Seeds of the rows that score (test) and that choose checkpoints and seeds (selection), apart from each
# other and from training's stream. Every variant and seed is scored on the same rows at each length (and
# selected on the same rows), so that two models are compared row by row (paired) and a difference between
# them is not one of test rows.
TEST_SEED, SELECT_SEED = 10_000, 20_000


def register_variant(name: str, model_fields: Mapping[str, Any], *, replace: bool = False) -> dict[str, Any]:
    """Add a variant that sets ``model_fields`` (e.g. scaler and rowmap) and return them. A name already
    taken raises ValueError unless ``replace``; so does a retired name or a row map's, which the variant
    would hide."""
    from ..model.config import ModelConfig

    known = {f.name for f in fields(ModelConfig)}
    if stray := sorted(set(model_fields) - known):
        raise ValueError(f"variant {name!r} sets {', '.join(stray)}, which are not model fields; choose from "
                         f"{', '.join(sorted(known))}")
    if name in RENAMED:
        raise ValueError(f"variant name {name!r} is retired (it was renamed {RENAMED[name]!r}); pick another")
    try:
        rowmaps.get(name)
    except ValueError:
        pass
    else:
        raise ValueError(f"{name!r} names a row map, which is a variant already; pick another name")
    return VARIANTS.register(name, dict(model_fields), replace=replace)


register_variant("ssmax_learned", {"scaler": "log_n", "rowmap": "softmax"})
register_variant("asentmax", {"scaler": "adaptive", "rowmap": "entmax_a1.5"})
register_variant("assmax", {"scaler": "adaptive", "rowmap": "softmax"})
register_variant("sentmax", {"scaler": "direct", "rowmap": "entmax_a1.5"})
# ASEntmax and SEntmax with their options in the name (Vasylenko et al. 2025 §4.1, App. G.2, App. H): alpha of
# the entmax, s, the bound on |gamma|, and g, a fixed gamma (beta alone learned, Table 8); e.g.
# asentmax_a2_s0.5, sentmax_a1.25, asentmax_g1, asentmax_g-0.5.
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
SCALED_ENTMAX = re.compile(rf"(?P<kind>asentmax|sentmax)(?:_a(?P<alpha>{_NUMBER}))?(?:_s(?P<s>{_NUMBER}))?"
                           rf"(?:_g(?P<g>-?{_NUMBER}))?")
# The smoke budget stops at 16x: one 65,536-token row of an entmax model takes minutes on two CPU cores.
BUDGETS: dict[str, dict[str, Any]] = {
    "smoke": {"steps": 2000, "layers": 2, "heads": 4, "d_model": 64, "ffn": "gelu", "ffn_width": None,
              "batch": 32, "lr": 3e-3, "samples": 200, "eval_mult": (1, 2, 4, 8, 16),
              "checkpoints": 4, "select_samples": 64},
    "full": {"steps": 20000, "layers": 4, "heads": 8, "d_model": 256, "ffn": "gelu", "ffn_width": 1024,
             "batch": 128, "lr": 3e-3, "samples": 1000, "eval_mult": (1, 2, 4, 16, 64, 256, 1024),
             "checkpoints": 10, "select_samples": 1000},
}
# Smoke settings of the tasks that the defaults above do not teach in minutes on two CPU cores. MQMTAR's
# first answer token needs two hops (to the query's key 3 * queries + 1 tokens back, then to the pair), a
# circuit of attention alone. With the GELU FFN (two thirds of a step's arithmetic) the 2 x 64 models sat
# at the plateau (0% exact match) for 6,000 to 20,000 steps, and which map escaped it in the budget was a
# draw of batch and width; without it a step costs about a third as much and both maps leave the plateau
# within 2,000-4,000 steps (figures in the README, lengthgen).
SMOKE_TASKS: dict[str, dict[str, Any]] = {
    "mqmtar": {"ffn": "none", "lr": 1e-3, "steps": 15000},
    "copy": {"heads": 8},
    "reverse": {"heads": 8, "layers": 4},
}
# Vasylenko et al. 2025 App. G.2, Table 5: (heads, layers, hidden, intermediate) per task; the full budget takes them
# (batch 128 for all), and its defaults above for the tasks the table does not list.
TABLE5 = {
    "2back": (8, 2, 256, 512), "local_count": (8, 3, 128, 512), "flipflop_sparse": (8, 4, 256, 512),
    "flipflop_dense": (8, 4, 256, 512), "copy": (16, 2, 256, 1024), "reverse": (8, 6, 256, 512),
    "mqmtar": (16, 4, 512, 1024), "sort": (8, 2, 256, 1024),
}
# Table 5's data per task: training samples (the full budget's steps are samples / batch 128), the training
# lengths in the paper's units (App. G.1; give them as --units paper --min-train-len --train-len) and the task
# parameters the full budget uses unless --param gives others (2Back's vocabulary 16, Local Count's 16 symbols
# repeated U(1, 48) times, MQMTAR's alphabet 256 and key/value vocabulary 10K, vocabulary 32 elsewhere).
TABLE5_DATA: dict[str, tuple[int, tuple[int, int], dict[str, Any]]] = {
    "2back": (10_000_000, (32, 64), {"symbols": 16}),
    "local_count": (10_000_000, (64, 128), {"symbols": 16, "max_repeat": 48}),
    "flipflop_sparse": (10_000_000, (32, 64), {}), "flipflop_dense": (10_000_000, (32, 64), {}),
    "copy": (20_000_000, (32, 64), {"symbols": 32}), "reverse": (30_000_000, (32, 64), {"symbols": 32}),
    "mqmtar": (50_000_000, (32, 64), {"alphabet": 256, "kv_vocab": 10_000}),
    "sort": (40_000_000, (32, 64), {"symbols": 32}),
}
# Each budget's settings per task, applied over the budget's own.
TASK_PLANS: dict[str, dict[str, dict[str, Any]]] = {
    "smoke": SMOKE_TASKS,
    "full": {task: {**dict(zip(("heads", "layers", "d_model", "ffn_width"), row)),
                    "steps": TABLE5_DATA[task][0] // BUDGETS["full"]["batch"]} for task, row in TABLE5.items()},
}


def variant(name: str) -> dict[str, Any]:
    """The model fields of a variant name: one of ``VARIANTS``, ASEntmax or SEntmax with options
    (``SCALED_ENTMAX``: asentmax_a<alpha>_s<s>_g<gamma>), or any registered row-map name."""
    if name in VARIANTS:
        return dict(VARIANTS[name])
    if (match := SCALED_ENTMAX.fullmatch(name)) and (match["alpha"] or match["s"] or match["g"]):
        fields = dict(VARIANTS[match["kind"]])
        if match["alpha"]:
            fields["rowmap"] = f"entmax_a{match['alpha']}"
            try:
                rowmaps.get(fields["rowmap"])
            except ValueError as exc:
                raise ValueError(f"variant {name!r}: {exc}") from None
        if match["s"]:
            s = float(match["s"])
            if not (math.isfinite(s) and s > 0):
                raise ValueError(f"variant {name!r}: s (the bound on |gamma|) must be > 0, got {match['s']}")
            fields["scaler_bound"] = s
        if match["g"]:
            fields["scaler_gamma"] = float(match["g"])
        return fields
    if name in RENAMED:
        raise ValueError(f"variant {name!r} was renamed {RENAMED[name]!r} (the learned SSMax scale); "
                         f"{name} now names only the row maps {name}_s<s>, e.g. {name}_s0.43")
    try:
        rowmap = rowmaps.get(name)
    except ValueError as exc:
        raise ValueError(f"unknown variant {name!r}: {exc}; or one of {', '.join(VARIANTS)} (ASEntmax and "
                         f"SEntmax take options: asentmax_a<alpha>_s<s>_g<gamma>)") from None
    if rowmap.needs_bias:  # what a model config would refuse after the folder is claimed: refused before
        raise ValueError(f"variant {name!r} has b=auto, a zero-shot calibration that a trained model does not take; "
                         "give b as a number, e.g. relu_p2_b0")
    return {"rowmap": name}


def task_params(items: list[str] | None) -> dict[str, Any]:
    """--param KEY=VALUE items as a dict, each value read as YAML would (numbers, booleans, strings)."""
    return dict(assignment(item, "--param", "alphabet=16") for item in items or ())


@dataclass(frozen=True)
class LengthgenConfig:
    task: str = option("mqmtar", "a token task (attnlab tasks lists them)")
    maps: tuple[str, ...] = option(("softmax", "entmax_a1.5"), "variants: registry row maps, or ssmax_learned, "
                                                              "assmax, asentmax and sentmax (options in the name: "
                                                              "asentmax_a2_s0.5 = alpha 2, |gamma| <= 0.5; "
                                                              "asentmax_g1 = gamma fixed at 1)",
                                   metavar="NAME")
    pe: str = option("nape", "positions", choices=("none", "learned", "rope", "alibi", "nape"))
    rope_scaling: float | None = option(None, "with --pe rope: Llama 3's RoPE scaling by this factor over the "
                                              "training length (Vasylenko et al. 2025 App. G.2 uses 16)",
                                        metavar="FACTOR", type=options.positive)
    train_len: int = option(64, "training length, in --units", type=options.count)
    min_train_len: int | None = option(None, "train on lengths drawn per step from N..--train-len (Vasylenko et "
                                             "al. 2025: 32-64); scores stay multiples of --train-len", metavar="N",
                                       type=options.count)
    units: str = option("tokens", "what --train-len, --min-train-len and their multiples count: tokens of a row, or "
                                  "the paper's units for the task (Vasylenko et al. 2025 App. G.1: Copy's source "
                                  "tokens, MQMTAR's context...; attnlab tasks NAME says which)",
                        choices=("tokens", "paper"))
    eval_mult: tuple[float, ...] | None = option(None, "evaluation lengths as multiples of --train-len, "
                                                       "fractions allowed, e.g. 1 1.5 2 4 as in Vasylenko et al. "
                                                       "2025 Table 1 (default: smoke 1 2 4 8 16, full 1 2 4 16 64 "
                                                       "256 1024)", metavar="M", type=options.positive)
    budget: str = option("smoke", "steps, model size and samples", choices=tuple(BUDGETS))
    steps: int | None = option(None, "override the budget's training steps", type=options.count)
    samples: int | None = option(None, "override the budget's samples per length", type=options.count)
    seed: int = option(0, "seed of data and initialization", metavar="N", type=options.seed)
    seeds: int = option(1, "train each variant with seeds --seed .. --seed + N - 1, every one scored; the one "
                           "best at --select-mult is the variant's pick (Vasylenko et al. 2025 App. G.2: best of 3)",
                        metavar="N", type=options.count)
    select_mult: float = option(8.0, "choose each seed's checkpoint, and the variant's best seed, by the score at "
                                     "this multiple of --train-len on held-out rows (Vasylenko et al. 2025 App. "
                                     "G.2: 8x), by token accuracy where none scores there", metavar="M",
                                type=options.positive)
    lr: float | None = option(None, "override the budget's peak learning rate", type=options.positive)
    params: Mapping[str, Any] = option(help="a task parameter, e.g. --param alphabet=16 (repeatable; attnlab tasks "
                                            "NAME lists them)", flag="--param", metavar="KEY=VALUE",
                                       action="append", convert=task_params, default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS or TASKS[self.task].kind == "vector":
            tokens = ", ".join(n for n, t in TASKS.items() if t.kind != "vector")
            raise ValueError(f"task must be a token task: {tokens}; "
                             f"got {self.task!r}")
        if self.budget not in BUDGETS:
            raise ValueError(f"budget must be one of {', '.join(BUDGETS)}, got {self.budget!r}")
        if not self.maps:
            raise ValueError("maps must name at least one variant")
        if self.lr is not None and not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive finite number, got {self.lr}")
        for name in ("steps", "samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value}")
        if self.rope_scaling is not None and (self.pe != "rope" or not math.isfinite(self.rope_scaling)
                                              or self.rope_scaling < 1):
            raise ValueError(f"rope_scaling {self.rope_scaling} needs --pe rope (got {self.pe!r}) and a factor >= 1")
        if self.seeds < 1:
            raise ValueError(f"seeds must be an integer >= 1, got {self.seeds}")
        if not (math.isfinite(self.select_mult) and self.select_mult >= 1):
            raise ValueError(f"select_mult must be a multiple >= 1, got {self.select_mult}")
        if self.units not in UNITS:
            raise ValueError(f"units must be one of {', '.join(UNITS)}, got {self.units!r}")
        task = self.task_def
        if self.units == "paper" and task.paper_units is None:
            raise ValueError(f"units 'paper': the paper's length units of task {self.task!r} are not known; use "
                             f"units tokens, or one of the tasks that have them: "
                             f"{', '.join(n for n, t in TASKS.items() if t.paper_units is not None)}")
        if self.eval_mult is not None and (not self.eval_mult or any(m < 1 for m in self.eval_mult)):
            raise ValueError(f"eval_mult must be non-empty multiples >= 1, got {self.eval_mult}")
        if self.eval_mult is not None and len({self.length_at(m) for m in self.eval_mult}) != len(self.eval_mult):
            raise ValueError(f"eval_mult {list(self.eval_mult)} gives the same length twice at --train-len "
                             f"{self.train_len}; give distinct multiples")
        for name in self.maps:
            variant(name)
        task.check_length(self.train_tokens)
        if self.min_train_len is not None:
            task.check_length(self.tokens(self.min_train_len))
            if self.min_train_len > self.train_len:
                raise ValueError(f"min_train_len {self.min_train_len} is above train_len {self.train_len}")

    @property
    def task_def(self) -> Task:
        """The task with ``params`` replacing its defaults (``attnlab tasks NAME`` lists them), over Table 5's
        under the full budget."""
        table5 = TABLE5_DATA.get(self.task, (0, (0, 0), {}))[2] if self.budget == "full" else {}
        return get_task(self.task, **{**table5, **self.params})

    def tokens(self, n: int) -> int:
        """The row length in tokens of length ``n`` in ``units`` (``Task.row_length`` for the paper's)."""
        return n if self.units == "tokens" else self.task_def.row_length(n)

    @property
    def train_tokens(self) -> int:
        return self.tokens(self.train_len)

    @property
    def min_train_tokens(self) -> int | None:
        return None if self.min_train_len is None else self.tokens(self.min_train_len)

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seed, self.seed + self.seeds))

    @property
    def select_length(self) -> int:
        return self.length_at(self.select_mult)

    def samples_at(self, length: int) -> int:
        """Rows scored at ``length``: the plan's samples, and under the smoke budget fewer at long lengths
        (as many tokens as 4x the training length would take, at least 8), so that a CPU run ends."""
        samples = self.plan["samples"]
        if self.budget == "full":
            return samples
        return min(samples, max(8, samples * 4 * self.train_tokens // length))

    @property
    def plan(self) -> dict[str, Any]:
        """The budget's settings, with the task's own for that budget (``TASK_PLANS``) and then the given
        overrides (steps, samples, eval_mult, lr) applied."""
        plan = {**BUDGETS[self.budget], **TASK_PLANS[self.budget].get(self.task, {})}
        given = {"steps": self.steps, "samples": self.samples, "eval_mult": self.eval_mult, "lr": self.lr}
        return {k: v if given.get(k) is None else given[k] for k, v in plan.items()}

    @property
    def trained_at(self) -> str:
        """The training length, or range of lengths, with its units as a reader sees it ("64 tokens", "32-64
        source tokens m")."""
        span = f"{self.min_train_len}-{self.train_len}" if self.min_train_len else str(self.train_len)
        return f"{span} {'tokens' if self.units == 'tokens' else self.task_def.paper_units.split(' (')[0]}"

    def length_at(self, mult: float) -> int:
        """The evaluation row length (tokens) of a multiple of the training length: 1.5x of 64 is 96 in
        ``units``, rounded to a whole unit, then turned into tokens."""
        return self.tokens(int(round(self.train_len * mult)))

    @property
    def lengths(self) -> list[int]:
        return [self.length_at(m) for m in self.plan["eval_mult"]]


def run_config(cfg: LengthgenConfig, name: str, vocab: int, seed: int | None = None) -> RunConfig:
    """The run of variant ``name`` under ``seed`` (default ``cfg.seed``): the plan's model and optimizer, a
    checkpoint every ``steps / checkpoints`` steps, all kept for the selection at ``select_mult``."""
    plan = cfg.plan
    model = {"context": cfg.train_tokens, "vocab": vocab, "layers": plan["layers"], "heads": plan["heads"],
             "d_model": plan["d_model"], "ffn": plan["ffn"], "ffn_width": plan["ffn_width"], "positions": cfg.pe,
             **({} if cfg.rope_scaling is None else {"rope_type": "llama3", "rope_scaling": cfg.rope_scaling}),
             **variant(name)}
    train = {"steps": plan["steps"], "batch": plan["batch"], "lr": plan["lr"], "min_lr": plan["lr"] / 10,
             "warmup": max(1, plan["steps"] // 20), "weight_decay": 0.0, "seed": cfg.seed if seed is None else seed,
             "eval_every": max(1, plan["steps"] // 4), "eval_batches": 1, "probes": False,
             "checkpoint_every": max(1, plan["steps"] // plan["checkpoints"]), "keep": plan["checkpoints"] + 1,
             "tensorboard": False}
    return RunConfig.from_dict({"model": model, "train": train})


ROWS = ("all", "answer")
SAMPLED_ROWS = 1024  # rows of each kind per sequence whose dispersion is measured


def spaced(mask: torch.Tensor, most: int) -> torch.Tensor:
    """``mask`` (batch, length) thinned to at most ``most`` evenly spaced true positions per row."""
    rank = mask.cumsum(-1) - 1
    step = (mask.sum(-1, keepdim=True) + most - 1) // most
    return mask & (rank % step.clamp(min=1) == 0)


def _dispersion(layers: int, heads: int, answer: torch.Tensor) -> tuple[Any, dict[str, torch.Tensor]]:
    """A weight observer summing, per layer and head, row entropy (nats) and support (weights > 0) over
    rows with at least two allowed keys: all rows, and the rows whose prediction is scored (``answer``,
    (batch, length) bool), where the task needs the model to find something. Each kind keeps at most
    ``SAMPLED_ROWS`` evenly spaced rows per sequence, which makes the means estimates at long lengths but
    keeps the observer from costing more than the forward. Returns the observer and its sums."""
    sums = {f"{kind}_{what}": torch.zeros(layers, heads, dtype=torch.float64)
            for kind in ROWS for what in ("entropy", "support", "rows")}
    kept = {"all": spaced(torch.ones_like(answer), SAMPLED_ROWS), "answer": spaced(answer, SAMPLED_ROWS)}

    def observe(block: WeightBlock) -> None:
        span = slice(block.query_start, block.query_start + block.weights.shape[-2])
        masks = {kind: m[:, span] for kind, m in kept.items()}
        local = (masks["all"] | masks["answer"]).any(0).nonzero().squeeze(-1)
        if not len(local):
            return
        w = block.weights.detach()[..., local, :]
        allowed = block.allowed[..., local, :] if block.allowed.shape[-2] > 1 else block.allowed
        rows = allowed.sum(-1).expand(w.shape[:-1]) >= 2
        stats = {"entropy": -torch.special.xlogy(w, w).sum(-1, dtype=torch.float64),
                 "support": (w > 0).sum(-1).double()}
        for kind, mask in masks.items():
            keep = rows & mask[:, local][:, None, :]
            sums[f"{kind}_rows"][block.layer] += keep.sum((0, 2))
            for what, value in stats.items():
                sums[f"{kind}_{what}"][block.layer] += torch.where(keep, value, 0.0).sum((0, 2))

    return observe, sums


def metric(task: Task) -> tuple[str, Any]:
    """The name and function of the task's score (Vasylenko et al. 2025 App. G.2): exact match of the whole answer,
    and accuracy over positions for the classification tasks (2Back, Local Count)."""
    return ("accuracy", scored_accuracy) if task.kind == "classification" else ("exact match", exact_match)


def _chunk(length: int) -> int:
    """Rows per forward at ``length``: about 2^16 tokens, so that long rows fit in memory."""
    return max(1, 2**16 // length)


@torch.no_grad()
def row_scores(model, task: Task, batch, observe=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of ``batch``: the task's ``metric`` and its token accuracy (the fraction of the row's scored
    positions right, the graded score), ``_chunk`` rows per forward; the first chunk runs under the weight
    observer ``observe`` when one is given."""
    model.eval()
    rows, chunk, right = batch.ids.shape[0], _chunk(batch.ids.shape[1]), metric(task)[1]
    scores, tokens = [], []
    for start in range(0, rows, chunk):
        watched = observe is not None and start == 0
        with model.observed(observe, weights=True) if watched else contextlib.nullcontext():
            logits = model(batch.ids[start:start + chunk])
        targets = batch.targets[start:start + chunk]
        scores.append(right(logits, targets).double())
        tokens.append(scored_accuracy(logits, targets).double())
    return torch.cat(scores), torch.cat(tokens)


def fraction_right(model, task: Task, batch, observe=None) -> float:
    """The task's ``metric`` over ``batch`` (the fraction right); see ``row_scores``."""
    return float(row_scores(model, task, batch, observe)[0].mean())


@torch.no_grad()
def score(model, task: Task, length: int, samples: int, seed: int) -> dict[str, Any]:
    """The task's ``metric`` over ``samples`` fixed rows at ``length`` (the fraction right, ``accuracy``; per
    row, ``rows``), the token accuracy (``token_accuracy``; per row, ``token_rows``), and the mean entropy
    and support of the attention rows of the first chunk (see ``_dispersion``) per layer (pooled over
    heads) and per layer and head, over all rows (``entropy``, ``support``) and over the scored rows
    (``answer_entropy``, ``answer_support``)."""
    batch = task.generate(samples, length, seed)
    observe, sums = _dispersion(model.cfg.layers, model.cfg.heads, batch.targets[:_chunk(length)] != IGNORE)
    rows, tokens = row_scores(model, task, batch, observe)
    result: dict[str, Any] = {"accuracy": float(rows.mean()), "token_accuracy": float(tokens.mean()),
                              "rows": _rounded(rows), "token_rows": _rounded(tokens), "heads": {}}
    for kind in ROWS:
        rows = sums[f"{kind}_rows"]
        prefix = "" if kind == "all" else f"{kind}_"
        for what in ("entropy", "support"):
            total = sums[f"{kind}_{what}"]
            result[prefix + what] = (total.sum(1) / rows.sum(1)).tolist()
            result["heads"][prefix + what] = (total / rows).tolist()
    return result


def _rounded(values: torch.Tensor) -> list[float]:
    return [round(float(v), 6) for v in values]


def cell_name(name: str, seed: int) -> str:
    """The folder and file stem of variant ``name`` trained under ``seed``."""
    return f"{name}_seed{seed}"


@torch.no_grad()
def select(model, run: Path, cfg: LengthgenConfig, seed: int) -> dict[str, Any]:
    """Vasylenko et al. 2025 App. G.2's checkpoint choice: the saved checkpoint of ``run`` with the best score
    at ``cfg.select_mult`` on held-out rows (seed ``SELECT_SEED``, the same for every seed and variant, apart
    from the scored rows), the latest one on a tie. Where no checkpoint scores at all there, the task's
    metric cannot rank them and the choice falls back to the graded score, token accuracy (``by`` says which
    decided). Loads it into ``model``; returns the length, the rows, the criterion and every checkpoint's
    scores."""
    length, rows = cfg.select_length, cfg.plan["select_samples"]
    batch = cfg.task_def.generate(rows, length, SELECT_SEED)
    scores, tokens, paths = {}, {}, sorted(ckpt.step_dirs(run).items())
    for step, path in paths:
        model.load_state_dict(ckpt.load_checkpoint(path).model_state)
        right, token = row_scores(model, cfg.task_def, batch)
        scores[step], tokens[step] = float(right.mean()), float(token.mean())
    by = metric(cfg.task_def)[0] if max(scores.values()) > 0 else "token accuracy"
    ranked = scores if by != "token accuracy" else tokens
    best = max(ranked, key=lambda step: (ranked[step], step))  # a tie goes to the later step
    model.load_state_dict(ckpt.load_checkpoint(dict(paths)[best]).model_state)
    return {"multiple": cfg.select_mult, "length": length, "samples": rows, "step": best, "by": by,
            "score": scores[best], "token_score": tokens[best], "scores": {str(k): v for k, v in scores.items()},
            "token_scores": {str(k): v for k, v in tokens.items()}}


def run_cell(cfg: LengthgenConfig, name: str, out: Path, progress: bool = False,
             seed: int | None = None) -> dict[str, Any]:
    """Train (or resume) variant ``name`` under ``seed`` (default ``cfg.seed``), choose its checkpoint
    (``select``) and score that one at every length; reuses a finished cell."""
    seed = cfg.seed if seed is None else seed
    stem = cell_name(name, seed)
    path = out / "cells" / f"{stem}.json"
    # what shapes and scores this one cell: not the other variants and seeds of the run
    settings = {**{k: v for k, v in asdict(cfg).items() if k not in ("maps", "seeds")}, "variant": name,
                "cell_seed": seed, "test_rows": TEST_SEED, "select_rows": SELECT_SEED}
    if path.is_file():
        done = json.loads(path.read_text())
        if done.get("settings") == json.loads(json.dumps(settings)):
            return done
    stream = TaskStream(cfg.task, cfg.train_tokens, seed=seed, min_length=cfg.min_train_tokens, **cfg.params)
    runs = out / "runs" / stem
    trainer = Trainer(run_config(cfg, name, stream.vocab_size, seed), runs, resume=True, progress=progress,
                      stream=stream)
    summary = trainer.run()
    chosen = select(trainer.model, runs, cfg, seed)
    lengths = {}
    for length in cfg.lengths:
        n = cfg.samples_at(length)
        lengths[str(length)] = {"samples": n, **score(trainer.model, cfg.task_def, length, n, seed=TEST_SEED)}
    cell = {"settings": settings, "variant": name, "seed": seed, "train": summary, "selection": chosen,
            "lengths": lengths, "untrained": untrained_scores(cfg, name, stream.vocab_size, seed)}
    io.write_json(path, cell)
    return cell


@torch.no_grad()
def untrained_scores(cfg: LengthgenConfig, name: str, vocab: int, seed: int) -> dict[str, Any]:
    """The null control of a cell: the same variant at its initialization under ``seed`` (before any step),
    scored on the same test rows at every length: length -> the metric per row (``rows``) and its mean."""
    from ..model.decoder import Decoder

    torch.manual_seed(seed)
    model = Decoder(run_config(cfg, name, vocab, seed).model)
    out = {}
    for length in cfg.lengths:
        batch = cfg.task_def.generate(cfg.samples_at(length), length, TEST_SEED)
        rows = row_scores(model, cfg.task_def, batch)[0]
        out[str(length)] = {"accuracy": float(rows.mean()), "rows": _rounded(rows)}
    return out


def mult_label(mult: float) -> str:
    """A length multiple's column name: "1x", "1.5x", "16x"."""
    return f"{mult:g}x"


def table(cells: Mapping[str, Mapping[str, Any]], cfg: LengthgenConfig) -> pd.DataFrame:
    """Vasylenko et al. 2025 Table 1's shape, one row per variant and seed: the selected checkpoint's step,
    what chose it (``select_by``: the metric, or token accuracy where no checkpoint scored) and its score and
    token accuracy at ``select_mult`` (``select_score``, ``select_token``, %), ``best`` marking the variant's
    seed with the highest select score (by token accuracy where no seed of the variant scores there; the
    lowest seed on a tie: the paper's single reported model), and the score (%) per length multiple."""
    rows = []
    for cell in cells.values():
        chosen = cell["selection"]
        rows.append({"variant": cell["variant"], "seed": cell["seed"], "selected_step": chosen["step"],
                     "select_by": chosen["by"], "select_score": 100 * chosen["score"],
                     "select_token": 100 * chosen["token_score"],
                     **{mult_label(m): 100 * cell["lengths"][str(cfg.length_at(m))]["accuracy"]
                        for m in cfg.plan["eval_mult"]}})
    frame = pd.DataFrame(rows)
    scored = frame.groupby("variant").select_score.transform("max") > 0
    frame["rank_by"] = frame.select_score.where(scored, frame.select_token)
    order = frame.sort_values(["variant", "rank_by", "seed"], ascending=[True, False, True])
    frame["best"] = frame.index.isin(order.groupby("variant", sort=False).head(1).index)
    frame = frame.drop(columns="rank_by")
    first = ["variant", "seed", "best", "selected_step", "select_by", "select_score", "select_token"]
    return frame[first + [c for c in frame.columns if c not in first]]


LEARNED = 0.5  # in-distribution score below which a model has not learned the task (Vasylenko et al. 2025 §5)


def not_learned(acc: pd.DataFrame) -> dict[str, float]:
    """"variant seed N" -> its in-distribution score (%, the 1x column) for every seed's model below
    ``LEARNED``: its out-of-distribution numbers say nothing about length generalization. Empty without a
    1x column."""
    if "1x" not in acc:
        return {}
    return {f"{r.variant} seed {r.seed}": float(r["1x"]) for _, r in acc.iterrows() if r["1x"] < 100 * LEARNED}


def rows_table(cells: Mapping[str, Mapping[str, Any]], cfg: LengthgenConfig) -> pd.DataFrame:
    """Every scored row: per variant, seed, length multiple and row of the shared test set (``row``, the
    same rows for every variant and seed), the metric (``score``, 0/1 for exact match), the token accuracy
    (``token``) and the metric of the cell's untrained model on that row (``untrained``), the paired
    outcomes a comparison of two variants reads."""
    frames = []
    for cell in cells.values():
        for mult in cfg.plan["eval_mult"]:
            length = str(cfg.length_at(mult))
            scored, null = cell["lengths"][length], cell["untrained"][length]
            frames.append(pd.DataFrame({"variant": cell["variant"], "seed": cell["seed"], "multiple": mult,
                                        "length": int(length), "row": range(len(scored["rows"])),
                                        "score": scored["rows"], "token": scored["token_rows"],
                                        "untrained": null["rows"]}))
    return pd.concat(frames, ignore_index=True)


def dispersion_table(cells: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Per variant, seed, length, layer and head: mean row entropy (nats) and support size over all rows and
    over the answer rows."""
    rows = [{"variant": cell["variant"], "seed": cell["seed"], "length": int(length),
             "log_length": math.log(int(length)), "layer": layer, "head": head,
             **{key: r["heads"][key][layer][head] for key in r["heads"]}}
            for cell in cells.values() for length, r in cell["lengths"].items()
            for layer in range(len(r["entropy"])) for head in range(len(r["heads"]["entropy"][layer]))]
    return pd.DataFrame(rows)


def plot(acc: pd.DataFrame, cfg: LengthgenConfig, path: Path) -> tuple[Path, Path]:
    """The run's figure: one curve per variant (its best seed), the task's score against the evaluation
    length."""
    from ..report.plot_lengthgen import plot_run_accuracy

    given = "".join(f", {k}={v}" for k, v in cfg.params.items())
    best = acc[acc["best"]].set_index("variant")[[mult_label(m) for m in cfg.plan["eval_mult"]]]
    return plot_run_accuracy(best, cfg.lengths, f"{metric(cfg.task_def)[0]} (%)",
                             f"{cfg.task}{given}, trained at {cfg.trained_at}, {cfg.pe}", path)


def _run_cells(cfg: LengthgenConfig, out: Path, progress: bool, jobs: int) -> dict[str, dict[str, Any]]:
    """Every (variant, seed) cell, ``jobs`` at a time (``workers.run_all``), keyed by ``cell_name``; each cell
    writes its own JSON, so a failed cell leaves the others."""
    todo = [(name, seed) for name in cfg.maps for seed in cfg.seed_list]
    if min(jobs, len(todo)) == 1:
        return {cell_name(n, s): run_cell(cfg, n, out, progress, seed=s) for n, s in todo}
    cells = run_all(run_cell, [(cfg, n, out, False, s) for n, s in todo], jobs)
    return {cell_name(n, s): cell for (n, s), cell in zip(todo, cells)}


# Settings that only choose what is scored: a rerun may change them and reuse the trained models. Every
# other setting, and the plan it resolves to, shapes the model of each variant (trained in its own folder).
SCORING = ("maps", "eval_mult", "samples", "seeds", "select_mult")
# Everything a run writes into its folder: what --overwrite removes, leaving any other file there.
WRITES = ("config.json", "cells", "runs", "accuracy.csv", "accuracy.md", "accuracy.png", "accuracy.svg",
          "dispersion.csv", "dispersion.md", "rows.csv")


# What the decoder computes for the same settings: a folder trained by another version holds checkpoints whose
# weights mean something else, so a rerun refuses it. 2: under NAPE the length scalers scale the NoPE heads only,
# and ASEntmax's bound s defaults to 2 (Vasylenko et al. 2025's code); folders without a version are 1.
MODEL_VERSION = 2


class FolderError(ValueError):
    """The output folder holds results that this configuration must neither reuse nor write over."""


def trained_settings(cfg: LengthgenConfig, plan: Mapping[str, Any], version: int = MODEL_VERSION) -> dict[str, Any]:
    """What shaped each variant's model, as JSON reads it back: every setting but ``SCORING``, the task's
    parameters with its defaults filled in, the given overrides as ``plan`` resolves them and the decoder's
    ``version`` (``MODEL_VERSION``)."""
    given = {k: v for k, v in asdict(cfg).items() if k not in SCORING and k not in plan}
    plan = {k: v for k, v in plan.items() if k not in SCORING}
    return json.loads(json.dumps({**given, "params": cfg.task_def.params(), **plan, "model_version": version}))


def _saved(path: Path, retry: str) -> tuple[LengthgenConfig, dict[str, Any], int]:
    """The config, plan and decoder version of the run whose ``config.json`` is ``path``."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FolderError(f"{path} is unreadable ({exc}); {retry}") from None
    version = saved.pop("model_version", 1) if isinstance(saved, dict) else 1
    keys = {f.name for f in fields(LengthgenConfig)} | {"plan"}
    if not isinstance(saved, dict) or set(saved) != keys or not isinstance(saved["plan"], dict):
        raise FolderError(f"{path} is not a lengthgen config; {retry}")
    plan = saved.pop("plan")
    tuples = {k: tuple(saved[k]) for k in ("maps", "eval_mult") if saved[k] is not None}
    try:
        return LengthgenConfig(**{**saved, **tuples}), plan, version
    except (TypeError, ValueError) as exc:
        raise FolderError(f"{path} describes a run this version cannot reuse ({exc}); {retry}") from None


def prepare(cfg: LengthgenConfig, out: Path, overwrite: bool = False) -> None:
    """Make ``out`` ready for ``cfg`` before anything is written into it. With ``overwrite``, remove what an
    earlier run wrote (``WRITES``); otherwise refuse results that ``cfg`` must not reuse: another run's
    (``trained_settings`` differ) or ones without the config.json saying how they were made."""
    if out.exists() and not out.is_dir():
        raise FolderError(f"--out {out} is a file; pass a folder")
    found = [name for name in WRITES if (out / name).exists()]
    if overwrite:
        for name in found:
            io.remove(out / name)
        return
    if not found:
        return
    retry = "pass --overwrite to start clean, or choose another --out"
    if "config.json" not in found:
        raise FolderError(f"{out} holds lengthgen results ({', '.join(found)}) but no config.json saying how "
                          f"they were made; {retry}")
    there, now = trained_settings(*_saved(out / "config.json", retry)), trained_settings(cfg, cfg.plan)
    differ = [f"{k}: {there.get(k)!r} there, {now.get(k)!r} now" for k in {**now, **there}
              if there.get(k) != now.get(k)]
    if differ:
        raise FolderError(f"{out} holds a lengthgen run trained with other settings ({'; '.join(differ)}); "
                          f"{retry}")


def run(cfg: LengthgenConfig, out: str | Path, progress: bool = False, jobs: int = 1,
        overwrite: bool = False) -> dict[str, Any]:
    """Train and score every variant (``jobs`` cells at once, see ``_run_cells``), then write the config,
    the accuracy and dispersion tables and the plot into ``out``; ``out`` is checked (or, with
    ``overwrite``, cleared) first, see ``prepare``."""
    check_jobs(jobs)
    out = Path(out)
    prepare(cfg, out, overwrite)
    with io.locked(out):
        io.write_json(out / "config.json", {**asdict(cfg), "plan": cfg.plan, "model_version": MODEL_VERSION})
        cells = _run_cells(cfg, out, progress, jobs)
        acc = table(cells, cfg)
        rows = rows_table(cells, cfg)
        paths = {**io.write_table(out / "accuracy", acc),
                 "rows": io.atomic_write(out / "rows.csv", lambda tmp: rows.to_csv(tmp, index=False)),
                 **{f"dispersion_{k}": v
                    for k, v in io.write_table(out / "dispersion", dispersion_table(cells)).items()}}
        png, svg = plot(acc, cfg, out / "accuracy")
    paths.update(png=png, svg=svg)
    return {"table": acc, "cells": cells, "paths": paths}
