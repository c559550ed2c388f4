"""The ``specialization`` study's design (Zhu et al. 2026 §2-§4, App. D-G, J): the architectures (``ARCHS``) and
arms (``ARMS``) a budget trains, ``Plan``, one budget, and ``BUDGETS``; the runs of a budget and each run's name and
training config; and the name of the file that keeps a run's final figures. Compute, tables and summary all read
these, so they live apart from each of them.

Paired design, as the seed's Table 1: per architecture and seed, a control and an intervention run from the same
initialization and data order (the seed fixes both; the intervention changes no parameter, only the upper Q/K
learning rate), and more arms (fixed releases, global learning rate x0.5, entropy floor, other multipliers) when
the budget names them. Every arm reads the lower-copy score on the release rule's grid, so the control's
lower-copy maturity is dated as the intervention's is.

The residual-write pathway (§4, Table 5, App. C) reads the control runs of GELU, the width-matched GELU, SwiGLU and
GEGLU at the 3% evaluation (``pathway_step``) over ``pathway_seeds`` paired seeds, and GELU controls of as many other
seeds (its null: GELU against GELU). A control the budget trains fully is read there; every other is a short run
(``pathway_runs``): the same control trained only up to that evaluation, on the full run's schedule (``train.stop_at``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from attnlab.model.ffn import matched_width
from attnlab.registry import Registry
from attnlab.train.config import InterventionConfig, RunConfig

MULTIPLIER = 0.25  # Zhu et al. 2026 §2
FINAL = "final_eval.json"
# an ffn_width that run_config resolves to the gated FFNs' matched hidden width at the plan's d_model
MATCHED = "matched"
PATHWAY_AT = 3  # percent of training: Table 5's checkpoint

# Architectures: model-field changes over the plan's shape (Zhu et al. 2026 §3-§4, Tables 3-5); gated FFNs
# have the matched width of §4.
ARCHS: Registry[dict[str, Any]] = Registry("specialization architecture")
ARCHS.register("gelu", {"ffn": "gelu"})
ARCHS.register("swiglu", {"ffn": "swiglu"})
ARCHS.register("geglu", {"ffn": "geglu"})
ARCHS.register("gelu_rmsnorm", {"ffn": "gelu", "norm": "rmsnorm"})
ARCHS.register("gelu_biasless", {"ffn": "gelu", "bias": False})
ARCHS.register("llama", {"ffn": "swiglu", "norm": "rmsnorm", "bias": False})
# Table 5's capacity control: GELU at the gated FFNs' hidden width (GELU-2560 beside GELU-3840 at d_model 960)
ARCHS.register("gelu_matched", {"ffn": "gelu", "ffn_width": MATCHED})
GATED = ("swiglu", "geglu")
# Table 5's comparisons, (gated, reference): every gated FFN against GELU and against the width-matched GELU
PATHWAY_COMPARISONS = tuple((g, r) for g in GATED for r in ("gelu", "gelu_matched"))

# Arms: intervention-table fields and a scale of the learning rate, over the plan's run. "control" is the
# pair's reference and must come first.
ARMS: Registry[dict[str, Any]] = Registry("specialization arm")
ARMS.register("control", {})
ARMS.register("intervention", {"intervention": {"upper_qk_lr": MULTIPLIER}})
# App. G, Table 10: the multiplier sweep
ARMS.register("intervention_m0.5", {"intervention": {"upper_qk_lr": 0.5}})
ARMS.register("intervention_m0.125", {"intervention": {"upper_qk_lr": 0.125}})
# App. F, Table 9: the same multiplier released at a fixed step
ARMS.register("fixed_3", {"intervention": {"upper_qk_lr": MULTIPLIER, "release": "fixed", "release_at": 0.03}})
ARMS.register("fixed_6", {"intervention": {"upper_qk_lr": MULTIPLIER, "release": "fixed", "release_at": 0.06}})
# App. D: the entropy floor lambda max(0, h0 - H_upper), lambda 0.10, h0 0.80, without the multiplier
ARMS.register("entropy_floor", {"intervention": {"entropy_floor": 0.10}})
# App. E: the whole run at half the learning rate, no intervention
ARMS.register("global_lr_half", {"lr_scale": 0.5})


@dataclass(frozen=True)
class Plan:
    """One budget of the study (Zhu et al. 2026 §4, App. J): the model, its AdamW training with cosine decay, the
    evaluation cadence and batches, the byte data's cap (None: all of it), the architectures, arms and controls
    trained (``ARCHS``, ``ARMS``), the seeds per architecture, and the release rule's score and reading interval;
    ``pathway``: the architectures whose controls the residual-write finding reads at 3%, over ``pathway_seeds``
    seeds."""

    layers: int
    heads: int
    d_model: int
    context: int
    steps: int
    batch: int
    accum: int
    lr: float
    min_lr: float
    warmup: int
    weight_decay: float
    betas: tuple[float, float]
    eval_every: int
    eval_batches: int
    final_batches: int
    max_tokens: int | None
    precision: str
    archs: tuple[str, ...]
    arms: tuple[str, ...]
    controls: tuple[str, ...]
    seeds: Mapping[str, int]
    score: str
    score_every: float
    pathway: tuple[str, ...] = ()
    pathway_seeds: int = 0


# smoke: byte-level decoders on the standard library's .py files, all runs within 30 minutes on two CPU cores
# (two at a time); the final loss is read on 64 validation batches (131K tokens), the evaluations on 4
# (at 600 steps and 4 batches the paired loss gains spread by 0.012 over seeds). The rule compares the excess
# of the lower-copy score over uniform attention's (about 0.02 at context 128, above the seed's threshold
# 0.005 by itself), read on the first evaluation batch every 0.5% of training up to the forced release, so that
# patience 3 can fire at 4% as the seed's Table 8 does (4.01%); the evaluations every 3% put one at the seed's
# 3% readout. full: Zhu et al. 2026 §4 and App. J: 20 layers x 960 wide x 15 heads, context 1024, 2.5B tokens
# in batches of 512 x 1024 tokens (4,768 steps), AdamW lr 2.5e-4 with cosine decay to 10% after 2% warmup,
# weight decay 0.1, betas (0.9, 0.95), bf16; evaluations every 0.5% of training as the seed's Table 8 cadence
# implies. seeds: a count per architecture.
BUDGETS: dict[str, Plan] = {
    "smoke": Plan(
        layers=4,
        heads=4,
        d_model=64,
        context=128,
        steps=1500,
        batch=16,
        accum=1,
        lr=3e-3,
        min_lr=3e-4,
        warmup=30,
        weight_decay=0.1,
        betas=(0.9, 0.95),
        eval_every=45,
        eval_batches=4,
        final_batches=64,
        max_tokens=2_000_000,
        precision="fp32",
        archs=("gelu", "swiglu"),
        arms=("control", "intervention"),
        controls=(),
        seeds={"gelu": 3, "swiglu": 3},
        score="excess",
        score_every=0.005,
        pathway=("gelu", "gelu_matched", "swiglu", "geglu"),
        pathway_seeds=5,
    ),
    "full": Plan(
        layers=20,
        heads=15,
        d_model=960,
        context=1024,
        steps=4768,
        batch=512,
        accum=16,
        lr=2.5e-4,
        min_lr=2.5e-5,
        warmup=95,
        weight_decay=0.1,
        betas=(0.9, 0.95),
        eval_every=24,
        eval_batches=8,
        final_batches=32,
        max_tokens=None,
        precision="bf16",
        arms=("control", "intervention"),
        archs=("gelu", "swiglu", "geglu", "gelu_rmsnorm", "gelu_biasless", "llama"),
        controls=("fixed_3", "fixed_6", "global_lr_half", "entropy_floor", "intervention_m0.5", "intervention_m0.125"),
        # Table 1's 3 seeds cannot decide here: the one-sided sign-flip test's smallest share is 1/8 at 3 pairs
        # (1/32 at 5), so at 3 the rule fires on no data at all and every finding would read underpowered
        seeds=dict.fromkeys(("gelu", "swiglu", "geglu", "gelu_rmsnorm", "gelu_biasless", "llama"), 5),
        score="raw",
        score_every=0.005,
        pathway=("gelu", "gelu_matched", "swiglu", "geglu"),
        pathway_seeds=5,
    ),
}
# What attnlab demo runs: smoke's pairs over 600 steps, evaluations every 3% (18 steps), and as many pairs as
# the time of its former 3 + 3 pairs evaluated every 2% allows, 7: 5 GELU pairs, the fewest whose one-sided sign-flip
# test can reach 5% (1/32; at 4 pairs the smallest share is 1/16), so the GELU findings can be reproduced; 2 SwiGLU.
BUDGETS["demo"] = replace(BUDGETS["smoke"], steps=600, warmup=12, eval_every=18, seeds={"gelu": 5, "swiglu": 2})


def run_name(arch: str, arm: str, seed: int) -> str:
    return f"{arch}_{arm}_seed{seed}"


def plan_runs(plan: Plan, first_seed: int) -> list[tuple[str, str, int]]:
    """(arch, arm, seed) of every run: each architecture's arms over its seeds, and the controls (App. D-G) for
    the first architecture only, as the seed runs them for its GPT-style model."""

    def seeds(arch: str) -> list[int]:
        return [first_seed + i for i in range(plan.seeds[arch])]

    runs = [(arch, arm, s) for arch in plan.archs for arm in plan.arms for s in seeds(arch)]
    return runs + [(plan.archs[0], arm, s) for arm in plan.controls for s in seeds(plan.archs[0])]


def gated_width(plan: Plan) -> int:
    """The gated FFNs' hidden width at the plan's d_model (Zhu et al. 2026 §4: 2/3 of GELU's 4 d_model, 2560 at
    960), which the width-matched GELU takes as its own."""
    return matched_width(4 * plan.d_model, GATED[0])


def hidden_width(plan: Plan, arch: str) -> int:
    """The hidden width of ``arch``'s FFN at the plan's d_model (a gated FFN's matched width, or GELU's own)."""
    model = run_config(plan, arch, "control", 0).model
    gated = model.ffn != "gelu" and model.ffn_matched
    return matched_width(model.width, model.ffn) if gated else model.width


def pathway_step(plan: Plan) -> int:
    """The step of Table 5's 3% checkpoint: the first evaluation at or after 3% of training (18 of 600, 45 of
    1,500, 144 of 4,768)."""
    at = -(-plan.steps * PATHWAY_AT // 100)
    return min(plan.steps, -(-at // plan.eval_every) * plan.eval_every)


def pathway_name(arch: str, seed: int, plan: Plan) -> str:
    """A short pathway run's name: the control's, to the 3% step."""
    return f"{run_name(arch, 'control', seed)}_to{pathway_step(plan)}"


def pathway_runs(plan: Plan, first_seed: int) -> list[tuple[str, int, str, bool]]:
    """(arch, seed, run name, short) of every control the residual-write finding reads: each pathway architecture
    over ``pathway_seeds`` seeds, and GELU over as many seeds after them (the null). ``short``: not trained fully by
    the budget, so trained only up to ``pathway_step``."""
    full = set(plan_runs(plan, first_seed))
    n = plan.pathway_seeds
    wanted = [(arch, first_seed + i) for arch in plan.pathway for i in range(n)]
    wanted += [("gelu", first_seed + n + i) for i in range(n if plan.pathway else 0)]
    out = []
    for arch, seed in wanted:
        short = (arch, "control", seed) not in full
        out.append((arch, seed, pathway_name(arch, seed, plan) if short else run_name(arch, "control", seed), short))
    return out


def run_config(
    plan: Plan, arch: str, arm: str, seed: int, shards: str | None = None, stop_at: int | None = None
) -> RunConfig:
    """One run's training config; ``stop_at``: end it at that step on the full run's schedule."""
    changes = ARMS.find(arm)
    scale = changes.get("lr_scale", 1.0)
    model = {
        "context": plan.context,
        "layers": plan.layers,
        "heads": plan.heads,
        "d_model": plan.d_model,
        "positions": "rope",
        **{k: gated_width(plan) if v == MATCHED else v for k, v in ARCHS.find(arch).items()},
    }
    train = {
        "steps": plan.steps,
        "batch": plan.batch,
        "accum": plan.accum,
        "lr": plan.lr * scale,
        "min_lr": plan.min_lr * scale,
        "warmup": plan.warmup,
        "weight_decay": plan.weight_decay,
        "betas": list(plan.betas),
        "eval_every": plan.eval_every,
        "eval_batches": plan.eval_batches,
        "checkpoint_every": plan.eval_every * 10,
        "tensorboard": False,
        "seed": seed,
        "precision": plan.precision,
        **({"stop_at": stop_at} if stop_at is not None else {}),
    }
    # every arm reads the lower-copy score on the rule's grid, the control included (finding 5 dates both)
    intervention = {"score": plan.score, "score_every": plan.score_every, **changes.get("intervention", {})}
    data = {"shards": shards} if shards is not None else {"max_tokens": plan.max_tokens}
    return RunConfig.from_dict({"model": model, "data": data, "train": train, "intervention": intervention})


def rule_config(plan: Plan) -> InterventionConfig:
    """The intervention arm's release rule: what dates lower-copy maturity in every arm."""
    return run_config(plan, plan.archs[0], "intervention", 0).intervention
