"""What a length-generalization run is (Vasylenko et al. 2025 §5.1, App. G): the attention variants and their name
grammar (a registered row map, or a scaler plus a map such as ``asentmax_a2_s0.5``), the budgets with Table 5's
per-task shapes and data, the validated ``LengthgenConfig`` and the training run of one cell. ``lengthgen`` runs,
scores and tabulates the cells."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from attnlab import options, rowmaps
from attnlab.errors import ArgumentError
from attnlab.model.config import ConfigError
from attnlab.options import assignment, option
from attnlab.registry import Registry
from attnlab.tasks import TASKS, get_task
from attnlab.tasks.seqtask import Task
from attnlab.train.config import RunConfig

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
    from attnlab.model.config import ModelConfig

    known = {f.name for f in fields(ModelConfig)}
    if stray := sorted(set(model_fields) - known):
        raise ArgumentError(
            f"variant {name!r} sets {', '.join(stray)}, which are not model fields; choose from "
            f"{', '.join(sorted(known))}"
        )
    if name in RENAMED:
        raise ArgumentError(f"variant name {name!r} is retired (it was renamed {RENAMED[name]!r}); pick another")
    try:
        rowmaps.get(name)
    except ValueError:
        pass
    else:
        raise ArgumentError(f"{name!r} names a row map, which is a variant already; pick another name")
    return VARIANTS.register(name, dict(model_fields), replace=replace)


register_variant("ssmax_learned", {"scaler": "log_n", "rowmap": "softmax"})
register_variant("asentmax", {"scaler": "adaptive", "rowmap": "entmax_a1.5"})
register_variant("assmax", {"scaler": "adaptive", "rowmap": "softmax"})
register_variant("sentmax", {"scaler": "direct", "rowmap": "entmax_a1.5"})
# ASEntmax and SEntmax with their options in the name (Vasylenko et al. 2025 §4.1, App. G.2, App. H): alpha of
# the entmax, s, the bound on |gamma|, and g, a fixed gamma (beta alone learned, Table 8); e.g.
# asentmax_a2_s0.5, sentmax_a1.25, asentmax_g1, asentmax_g-0.5.
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
SCALED_ENTMAX = re.compile(
    rf"(?P<kind>asentmax|sentmax)(?:_a(?P<alpha>{_NUMBER}))?(?:_s(?P<s>{_NUMBER}))?"
    rf"(?:_g(?P<g>-?{_NUMBER}))?"
)


@dataclass(frozen=True)
class Plan:
    """What a budget trains and scores for one task: the model (layers, heads, width, FFN and its width, None:
    the model's 4 d_model), the training (steps of ``batch`` rows at peak ``lr``, ``checkpoints`` kept for the
    selection at ``select_mult`` on ``select_samples`` held-out rows, Vasylenko et al. 2025 App. G.2) and the
    rows scored per length at the multiples ``eval_mult``."""

    steps: int
    layers: int
    heads: int
    d_model: int
    ffn: str
    ffn_width: int | None
    batch: int
    lr: float
    samples: int
    eval_mult: tuple[float, ...]
    checkpoints: int
    select_samples: int

    @classmethod
    def from_dict(cls, saved: Mapping[str, Any]) -> Plan:
        """The plan as ``asdict`` wrote it to a run's config.json, its list read back as the declared tuple; a
        key this version does not declare, or one it lacks, raises TypeError."""
        return cls(**{k: tuple(v) if k == "eval_mult" else v for k, v in saved.items()})


# The smoke budget stops at 16x: one 65,536-token row of an entmax model takes minutes on two CPU cores.
BUDGETS: dict[str, Plan] = {
    "smoke": Plan(
        steps=2000,
        layers=2,
        heads=4,
        d_model=64,
        ffn="gelu",
        ffn_width=None,
        batch=32,
        lr=3e-3,
        samples=200,
        eval_mult=(1, 2, 4, 8, 16),
        checkpoints=4,
        select_samples=64,
    ),
    "full": Plan(
        steps=20000,
        layers=4,
        heads=8,
        d_model=256,
        ffn="gelu",
        ffn_width=1024,
        batch=128,
        lr=3e-3,
        samples=1000,
        eval_mult=(1, 2, 4, 16, 64, 256, 1024),
        checkpoints=10,
        select_samples=1000,
    ),
}
# Smoke plans of the tasks that the defaults above do not teach in minutes on two CPU cores. MQMTAR's
# first answer token needs two hops (to the query's key 3 * queries + 1 tokens back, then to the pair), a
# circuit of attention alone. With the GELU FFN (two thirds of a step's arithmetic) the 2 x 64 models sat
# at the plateau (0% exact match) for 6,000 to 20,000 steps, and which map escaped it in the budget was a
# draw of batch and width; without it a step costs about a third as much and both maps leave the plateau
# within 2,000-4,000 steps (figures in the README, lengthgen).
SMOKE_TASKS: dict[str, Plan] = {
    "mqmtar": replace(BUDGETS["smoke"], ffn="none", lr=1e-3, steps=15000),
    "copy": replace(BUDGETS["smoke"], heads=8),
    "reverse": replace(BUDGETS["smoke"], heads=8, layers=4),
}
# Vasylenko et al. 2025 App. G.2, Table 5: (heads, layers, hidden, intermediate) per task; the full budget takes them
# (batch 128 for all), and its defaults above for the tasks the table does not list.
TABLE5 = {
    "2back": (8, 2, 256, 512),
    "local_count": (8, 3, 128, 512),
    "flipflop_sparse": (8, 4, 256, 512),
    "flipflop_dense": (8, 4, 256, 512),
    "copy": (16, 2, 256, 1024),
    "reverse": (8, 6, 256, 512),
    "mqmtar": (16, 4, 512, 1024),
    "sort": (8, 2, 256, 1024),
}
# Table 5's data per task: training samples (the full budget's steps are samples / batch 128), the training
# lengths in the paper's units (App. G.1; give them as --units paper --min-train-len --train-len) and the task
# parameters the full budget uses unless --param gives others (2Back's vocabulary 16, Local Count's 16 symbols
# repeated U(1, 48) times, MQMTAR's alphabet 256 and key/value vocabulary 10K, vocabulary 32 elsewhere).
TABLE5_DATA: dict[str, tuple[int, tuple[int, int], dict[str, Any]]] = {
    "2back": (10_000_000, (32, 64), {"symbols": 16}),
    "local_count": (10_000_000, (64, 128), {"symbols": 16, "max_repeat": 48}),
    "flipflop_sparse": (10_000_000, (32, 64), {}),
    "flipflop_dense": (10_000_000, (32, 64), {}),
    "copy": (20_000_000, (32, 64), {"symbols": 32}),
    "reverse": (30_000_000, (32, 64), {"symbols": 32}),
    "mqmtar": (50_000_000, (32, 64), {"alphabet": 256, "kv_vocab": 10_000}),
    "sort": (40_000_000, (32, 64), {"symbols": 32}),
}
# Each budget's plan per task; a task not listed takes the budget's own.
TASK_PLANS: dict[str, dict[str, Plan]] = {
    "smoke": SMOKE_TASKS,
    "full": {
        task: replace(
            BUDGETS["full"],
            **dict(zip(("heads", "layers", "d_model", "ffn_width"), row)),
            steps=TABLE5_DATA[task][0] // BUDGETS["full"].batch,
        )
        for task, row in TABLE5.items()
    },
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
                raise ArgumentError(f"variant {name!r}: {exc}") from None
        if match["s"]:
            s = float(match["s"])
            if not (math.isfinite(s) and s > 0):
                raise ArgumentError(f"variant {name!r}: s (the bound on |gamma|) must be > 0, got {match['s']}")
            fields["scaler_bound"] = s
        if match["g"]:
            fields["scaler_gamma"] = float(match["g"])
        return fields
    if name in RENAMED:
        raise ArgumentError(
            f"variant {name!r} was renamed {RENAMED[name]!r} (the learned SSMax scale); "
            f"{name} now names only the row maps {name}_s<s>, e.g. {name}_s0.43"
        )
    try:
        rowmap = rowmaps.get(name)
    except ValueError as exc:
        raise ArgumentError(
            f"unknown variant {name!r}: {exc}; or one of {', '.join(VARIANTS)} (ASEntmax and "
            f"SEntmax take options: asentmax_a<alpha>_s<s>_g<gamma>)"
        ) from None
    if rowmap.needs_bias:  # what a model config would refuse after the folder is claimed: refused before
        raise ArgumentError(
            f"variant {name!r} has b=auto, a zero-shot calibration that a trained model does not take; "
            "give b as a number, e.g. relu_p2_b0"
        )
    return {"rowmap": name}


def task_params(items: list[str] | None) -> dict[str, Any]:
    """--param KEY=VALUE items as a dict, each value read as YAML would (numbers, booleans, strings)."""
    return dict(assignment(item, "--param", "alphabet=16") for item in items or ())


@dataclass(frozen=True)
class LengthgenConfig:
    task: str = option("mqmtar", "a token task (attnlab tasks lists them)")
    maps: tuple[str, ...] = option(
        ("softmax", "entmax_a1.5"),
        "variants: registry row maps, or ssmax_learned, "
        "assmax, asentmax and sentmax (options in the name: "
        "asentmax_a2_s0.5 = alpha 2, |gamma| <= 0.5; "
        "asentmax_g1 = gamma fixed at 1)",
        metavar="NAME",
    )
    pe: str = option("nape", "positions", choices=("none", "learned", "rope", "alibi", "nape"))
    rope_scaling: float | None = option(
        None,
        "with --pe rope: Llama 3's RoPE scaling by this factor over the "
        "training length (Vasylenko et al. 2025 App. G.2 uses 16)",
        metavar="FACTOR",
        type=options.positive,
    )
    train_len: int = option(64, "training length, in --units", type=options.count)
    min_train_len: int | None = option(
        None,
        "train on lengths drawn per step from N..--train-len (Vasylenko et "
        "al. 2025: 32-64); scores stay multiples of --train-len",
        metavar="N",
        type=options.count,
    )
    units: str = option(
        "tokens",
        "what --train-len, --min-train-len and their multiples count: tokens of a row, or "
        "the paper's units for the task (Vasylenko et al. 2025 App. G.1: Copy's source "
        "tokens, MQMTAR's context...; attnlab tasks NAME says which)",
        choices=("tokens", "paper"),
    )
    eval_mult: tuple[float, ...] | None = option(
        None,
        "evaluation lengths as multiples of --train-len, "
        "fractions allowed, e.g. 1 1.5 2 4 as in Vasylenko et al. "
        "2025 Table 1 (default: smoke 1 2 4 8 16, full 1 2 4 16 64 "
        "256 1024)",
        metavar="M",
        type=options.positive,
    )
    budget: str = option("smoke", "steps, model size and samples", choices=tuple(BUDGETS))
    steps: int | None = option(None, "override the budget's training steps", type=options.count)
    samples: int | None = option(None, "override the budget's samples per length", type=options.count)
    seed: int = option(0, "seed of data and initialization", metavar="N", type=options.seed)
    seeds: int = option(
        1,
        "train each variant with seeds --seed .. --seed + N - 1, every one scored; the one "
        "best at --select-mult is the variant's pick (Vasylenko et al. 2025 App. G.2: best of 3)",
        metavar="N",
        type=options.count,
    )
    select_mult: float = option(
        8.0,
        "choose each seed's checkpoint, and the variant's best seed, by the score at "
        "this multiple of --train-len on held-out rows (Vasylenko et al. 2025 App. "
        "G.2: 8x), by token accuracy where none scores there",
        metavar="M",
        type=options.positive,
    )
    lr: float | None = option(None, "override the budget's peak learning rate", type=options.positive)
    params: Mapping[str, Any] = option(
        help="a task parameter, e.g. --param alphabet=16 (repeatable; attnlab tasks NAME lists them)",
        flag="--param",
        metavar="KEY=VALUE",
        action="append",
        convert=task_params,
        default_factory=dict,
    )

    def __post_init__(self) -> None:
        if self.task not in TASKS or TASKS[self.task].kind == "vector":
            tokens = ", ".join(n for n, t in TASKS.items() if t.kind != "vector")
            raise ConfigError(f"task must be a token task: {tokens}; got {self.task!r}")
        if self.budget not in BUDGETS:
            raise ConfigError(f"budget must be one of {', '.join(BUDGETS)}, got {self.budget!r}")
        if not self.maps:
            raise ConfigError("maps must name at least one variant")
        options.check_distinct("maps", self.maps)
        if self.lr is not None and not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"lr must be a positive finite number, got {self.lr}")
        for name in ("steps", "samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value}")
        if self.rope_scaling is not None and (
            self.pe != "rope" or not math.isfinite(self.rope_scaling) or self.rope_scaling < 1
        ):
            raise ConfigError(f"rope_scaling {self.rope_scaling} needs --pe rope (got {self.pe!r}) and a factor >= 1")
        if self.seeds < 1:
            raise ConfigError(f"seeds must be an integer >= 1, got {self.seeds}")
        if not (math.isfinite(self.select_mult) and self.select_mult >= 1):
            raise ConfigError(f"select_mult must be a multiple >= 1, got {self.select_mult}")
        if self.units not in UNITS:
            raise ConfigError(f"units must be one of {', '.join(UNITS)}, got {self.units!r}")
        task = self.task_def
        if self.units == "paper" and task.paper_units is None:
            raise ConfigError(
                f"units 'paper': the paper's length units of task {self.task!r} are not known; use "
                f"units tokens, or one of the tasks that have them: "
                f"{', '.join(n for n, t in TASKS.items() if t.paper_units is not None)}"
            )
        if self.eval_mult is not None and (not self.eval_mult or any(m < 1 for m in self.eval_mult)):
            raise ConfigError(f"eval_mult must be non-empty multiples >= 1, got {self.eval_mult}")
        if self.eval_mult is not None and len({self.length_at(m) for m in self.eval_mult}) != len(self.eval_mult):
            raise ConfigError(
                f"eval_mult {list(self.eval_mult)} gives the same length twice at --train-len "
                f"{self.train_len}; give distinct multiples"
            )
        for name in self.maps:
            variant(name)
        task.check_length(self.train_tokens)
        if self.min_train_len is not None:
            task.check_length(self.tokens(self.min_train_len))
            if self.min_train_len > self.train_len:
                raise ConfigError(f"min_train_len {self.min_train_len} is above train_len {self.train_len}")

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
        samples = self.plan.samples
        if self.budget == "full":
            return samples
        return min(samples, max(8, samples * 4 * self.train_tokens // length))

    @property
    def plan(self) -> Plan:
        """The task's plan under the budget (``TASK_PLANS``, else the budget's own) with the given overrides
        (steps, samples, eval_mult, lr) applied."""
        plan = TASK_PLANS[self.budget].get(self.task, BUDGETS[self.budget])
        given = {"steps": self.steps, "samples": self.samples, "eval_mult": self.eval_mult, "lr": self.lr}
        return replace(plan, **{k: v for k, v in given.items() if v is not None})

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
        return [self.length_at(m) for m in self.plan.eval_mult]


def run_config(cfg: LengthgenConfig, name: str, vocab: int, seed: int | None = None) -> RunConfig:
    """The run of variant ``name`` under ``seed`` (default ``cfg.seed``): the plan's model and optimizer, a
    checkpoint every ``steps / checkpoints`` steps, all kept for the selection at ``select_mult``, in the
    budget's precision (bf16 autocast for the full budget)."""
    plan = cfg.plan
    model = {
        "context": cfg.train_tokens,
        "vocab": vocab,
        "layers": plan.layers,
        "heads": plan.heads,
        "d_model": plan.d_model,
        "ffn": plan.ffn,
        "ffn_width": plan.ffn_width,
        "positions": cfg.pe,
        **({} if cfg.rope_scaling is None else {"rope_type": "llama3", "rope_scaling": cfg.rope_scaling}),
        **variant(name),
    }
    train = {
        **schedule(plan.steps, plan.batch, plan.lr, cfg.budget),
        "seed": cfg.seed if seed is None else seed,
        "eval_every": max(1, plan.steps // 4),
        "checkpoint_every": max(1, plan.steps // plan.checkpoints),
        "keep": plan.checkpoints + 1,
    }
    return RunConfig.from_dict({"model": model, "train": train})


def schedule(steps: int, batch: int, lr: float, budget: str) -> dict[str, object]:
    """The training fields every synthetic-task run of the study shares (the authors' Copy config, Vasylenko et al.
    2025 App. G.2): AdamW at peak ``lr`` with 5% warmup and cosine decay to a tenth, no weight decay, one
    evaluation batch, no probes, no TensorBoard, and the full budget's precision where a GPU trains it
    (``devices.training`` keeps float32 on a CPU)."""
    return {
        "steps": steps,
        "batch": batch,
        "lr": lr,
        "min_lr": lr / 10,
        "warmup": max(1, steps // 20),
        "weight_decay": 0.0,
        "eval_batches": 1,
        "probes": False,
        "tensorboard": False,
        "precision": "bf16" if budget == "full" else "fp32",
    }
