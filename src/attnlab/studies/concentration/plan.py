"""The concentration study's plans (Polynomial Concentration §5.2-§5.5, App. H): the audited p and b, the
substituted recipes, the suites, the toy model's shape and training, and ``BUDGETS`` and ``REAL``, the toy and the
pretrained-model budgets."""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.analyses import substitute

P = (2, 4, 8, 16)
B = ("0", "auto")
# Polynomial Concentration §5.3's sweep: ReLU^p at both biases, normalized sigmoid, and Wortsman et al.'s
# unnormalized ReLU^p.
RECIPES = substitute.PAPER_RECIPES
SUITE = "induction"
# Polynomial Concentration App. B/E/AI's diagnostic suites, audited on a pretrained model.
REAL_SUITES = ("niah", "induction", "mqar", "copying", "uuid_niah")
# The matched diagnostic (Polynomial Concentration §5.5, Table 5) reads one row per layer, head and scored prompt:
# the last position, the one that answers.
MATCHED_QUERIES = "last"


@dataclass(frozen=True)
class TrainPlan:
    """The toy model the study trains with softmax on the induction suite: a Llama decoder's shape (layers,
    heads, hidden and FFN width, context) and its training (steps of ``batch`` prompts, AdamW's peak lr)."""

    layers: int
    heads: int
    hidden: int
    ffn: int
    context: int
    steps: int
    batch: int
    lr: float


@dataclass(frozen=True)
class Plan:
    """One budget of the study (Polynomial Concentration §5.2-§5.5, App. H): the prompts' length (``pad``, where
    given: the scored suite's padding instead), the audit's prompts per suite and query stride (``every``), the
    prompts scored per recipe, the ablation's K, random draws and ranking prompts, the audited ``suites`` and
    the scored ``suite``, the head-type prompts, and ``train``: the toy model's (None where a pretrained model
    is audited as given)."""

    length: int
    audit_prompts: int
    every: int
    prompts: int
    k: tuple[int, ...]
    random_draws: int
    rank_prompts: int
    suites: tuple[str, ...]
    suite: str
    heads_prompts: int
    train: TrainPlan | None = None
    pad: int | None = None


# The toy plans audit and score the suite they train on; a pretrained model (REAL) is audited on every
# diagnostic suite and scored on NIAH, as Polynomial Concentration §5.5 scores its matched diagnostic.
BUDGETS: dict[str, Plan] = {
    # ~250 steps take the 2-layer model's answer-position loss from 6.3 to ~0.05 (100% accuracy) in
    # seconds on 2 CPU cores; the engines then dominate.
    "smoke": Plan(
        train=TrainPlan(layers=2, heads=4, hidden=64, ffn=128, context=256, steps=250, batch=32, lr=3e-3),
        length=48,
        audit_prompts=20,
        every=4,
        prompts=200,
        k=(2, 4),
        random_draws=5,
        rank_prompts=20,
        suites=(SUITE,),
        suite=SUITE,
        heads_prompts=20,
    ),
    # Polynomial Concentration scores 200 prompts per cell (500 in its fresh-seed replication) and ablates K in
    # {5, 10, 20, 40} of a pretrained model's heads.
    "full": Plan(
        train=TrainPlan(layers=4, heads=8, hidden=256, ffn=1024, context=1024, steps=3000, batch=64, lr=1e-3),
        length=256,
        audit_prompts=100,
        every=4,
        prompts=500,
        k=(5, 10, 20),
        random_draws=5,
        rank_prompts=50,
        suites=(SUITE,),
        suite=SUITE,
        heads_prompts=80,
    ),
}
REAL: dict[str, Plan] = {
    # Sized for a 135M-270M model on 2 CPU cores: the scored NIAH suite at Polynomial Concentration's pad = 8 (about 130
    # tokens; softmax scored 80% on SmolLM2 and 95% on Gemma 3 there, against 75% and 45% at 256 tokens),
    # the other suites audited at 256 tokens. 150 prompts per cell give the collapse screen 83% power when two
    # low-safe cells keep 2.5% of an 80% softmax (20 gave 0%: no k of 20 has a Wilson bound under an 8% line),
    # 20 prompts per suite give the placement's t-interval >= 93% coverage (``calibration``). The cost, measured
    # on SmolLM2-135M with one thread: ~0.35 s per scored prompt and ~2 s per audited prompt and suite, so the
    # run grows from ~5 to ~30 minutes (substitution 15 x 150 and ablation 11 x 150 scored prompts dominate).
    "smoke": Plan(
        length=256,
        pad=8,
        audit_prompts=20,
        every=16,
        prompts=150,
        k=(10, 40),
        random_draws=3,
        rank_prompts=4,
        suites=REAL_SUITES,
        suite="niah",
        heads_prompts=8,
    ),
    # Polynomial Concentration §5.5: NIAH at pad = 128 (~1500 tokens), 200 prompts per cell, K in
    # {5, 10, 20, 40, 80}, 5 random draws, head types over 80 prompts.
    "full": Plan(
        length=1024,
        pad=128,
        audit_prompts=20,
        every=8,
        prompts=200,
        k=(5, 10, 20, 40, 80),
        random_draws=5,
        rank_prompts=20,
        suites=REAL_SUITES,
        suite="niah",
        heads_prompts=80,
    ),
}
