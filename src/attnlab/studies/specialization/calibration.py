"""The specialization study's rules on simulated worlds (``attnlab.findings.calibrate``), at each budget's paired
seeds (Zhu et al. 2026 §3-§5, Tables 1, 4, 8, Fig. 3).

The rules read one value per seed (a paired gain, a shrinkage, a reliance gap, a relative perplexity rise, a delay of
lower-copy maturity), so the worlds draw those: normal around the world's mean with the seed-to-seed spread of
``Spread``, relative to the control's perplexity (the paper's effects are relative too, so they carry to this scale);
delays fall on the release rule's 0.5%-of-training readings. The gain, shrinkage and reliance rules are calibrated
as the label "reproduced" needs them: the interval above 0 and the sign-flip null failing. Worlds without the effect
are no effect and the effect's opposite (and, for the two thresholds, a world just at the threshold); the worlds with
it are the paper's effects. At run time the findings call the same factories with the run's pairs and measured
spread.

The routing finding's null stays the untrained model, whose lower-copy score never matures: an arm that really
delays lower-layer routing (the lower layers' learning rate slowed) would be one more training run per seed (about
+50% of the budget's run time) and a training option the intervention table does not have, so the delayed world is
simulated here instead (a true delay of 1% and of 4% of training).

The residual-write finding (§4, Table 5) reads four comparisons of the same seeds' controls, so its worlds draw a log
write RMS per architecture and seed (normal around the architecture's log mean, sd ``Spread.pathway`` / sqrt 2, so
that each paired log ratio has sd ``Spread.pathway``) and hand the rule the four comparisons' per-seed log ratios,
correlated as the real ones are (SwiGLU against GELU and against the width-matched GELU share the SwiGLU runs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from attnlab.diagnostics.paired import paired_interval
from attnlab.findings.calibrate import Calibration, Coverage, World, register
from attnlab.studies.specialization.plan import BUDGETS, GATED, PATHWAY_COMPARISONS
from attnlab.studies.specialization.rules import (
    DELAY_MARGIN,
    DELAY_NAME,
    DELAY_RULE,
    DEPENDENCE_MIN,
    DEPENDENCE_NAME,
    DEPENDENCE_RULE,
    GAIN_NAME,
    GAIN_RULE,
    PAPER_GAIN,
    PAPER_PATHWAY,
    PAPER_RELIANCE,
    PAPER_SHRINKAGE,
    PATHWAY_NAME,
    PATHWAY_RULE,
    RELIANCE_NAME,
    RELIANCE_RULE,
    SHRINKAGE_NAME,
    SHRINKAGE_RULE,
    above,
    below,
    reproduces,
    write_cut,
)

# §5.3, Fig. 3D: zeroing upper Q/K at 3% adds 82.3 ppl; the paper gives no perplexity at 3%, so the world reads it
# against the control's final 26.80 (Table 1).
PAPER_DEPENDENCE = 82.3 / 26.7981
TRUE_DELAY = 0.04  # a world whose intervention matures 4% of training late (the paper's release is at 4.01%)


@dataclass(frozen=True)
class Spread:
    """Seed-to-seed standard deviations, relative to the control's perplexity (gain, shrinkage, reliance gap,
    dependence) or as a fraction of training (delay)."""

    gain: float
    shrinkage: float
    reliance: float
    dependence: float
    delay: float
    pathway: float = 0.3  # the paired log ratio of the upper FFN write RMS at 3%


# demo (and smoke, whose 1500-step runs are not recorded): the demo record's 5 GELU pairs (gain sd 0.124 of 8.04
# ppl, 1.5%; reliance gap sd about 0.1; delays 0 to -0.5%, sd 0.25%), its SwiGLU shrinkage (1.8%), and a generous 5%
# for the early rise (measured 0.03%). full: Table 1's +-0.08 of 26.80 ppl (0.3%), the shrinkage of two such gains
# (0.42%), and the demo's for what the paper does not report. pathway: the demo record's two SwiGLU / GELU log ratios of
# the upper write at 3% (-1.09, -1.39: sd 0.21) and GELU's own log write over 5 seeds (sd 0.11), rounded up to 0.3;
# the paper reports no spread, so full keeps it.
DEMO = Spread(gain=0.0154, shrinkage=0.0184, reliance=0.1, dependence=0.05, delay=0.0025)
SPREADS = {"smoke": DEMO, "demo": DEMO, "full": Spread(0.003, 0.0042, 0.1, 0.05, 0.0025)}


def _normal(mean: float, sd: float, n: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.normal(mean, sd, n)


def _readings(mean: float, sd: float, n: int, reading: float) -> Callable[[np.random.Generator], np.ndarray]:
    # maturity is dated on the release rule's readings, so a delay is a whole number of them
    return lambda rng: np.round(rng.normal(mean, sd, n) / reading) * reading


def _coverage(name: str, truth: float, sd: float, n: int) -> Coverage:
    def draw(rng):
        stats = paired_interval(rng.normal(truth, sd, n))
        return stats["lo"], stats["hi"], truth

    return Coverage(f"{name}, {n} pairs", draw)


def gain_rule(values: Sequence[float]) -> bool:
    """GAIN_RULE (and SHRINKAGE_RULE and RELIANCE_RULE per architecture) as "reproduced" needs it."""
    return reproduces(values, above(0.0))


def _paired(finding: str, budget: str, rule_text: str, effect: float, sd: float, pairs: int) -> Calibration:
    return Calibration(
        finding,
        budget,
        gain_rule,
        rule_text + ", and the sign-flip null fails it",
        f"{pairs} pairs",
        (
            World("no effect", False, _normal(0.0, sd, pairs)),
            World("the effect's opposite", False, _normal(-effect, sd, pairs)),
            World(f"the paper's: {effect:.2%} of the control's perplexity", True, _normal(effect, sd, pairs)),
        ),
        (_coverage("the paired interval", effect, sd, pairs),),
    )


def headline_calibration(budget: str, pairs: int, sd: float) -> Calibration:
    """The GELU gain (Table 1: 1.85% of the control's perplexity) at ``pairs`` pairs of relative spread ``sd``."""
    return _paired(GAIN_NAME, budget, GAIN_RULE, PAPER_GAIN, sd, pairs)


def shrinkage_calibration(budget: str, pairs: int, sd: float) -> Calibration:
    """One gated FFN's shrinkage of the gain (Table 4: 1.78% of the control's perplexity)."""
    return _paired(SHRINKAGE_NAME, budget, SHRINKAGE_RULE, PAPER_SHRINKAGE, sd, pairs)


def reliance_calibration(budget: str, pairs: int, sd: float) -> Calibration:
    """The final reliance gap (Fig. 3D: 4.8 x the control's perplexity)."""
    return _paired(RELIANCE_NAME, budget, RELIANCE_RULE, PAPER_RELIANCE, sd, pairs)


def dependence_calibration(budget: str, seeds: int, sd: float) -> Calibration:
    """The control's early rise from zeroing upper Q/K, against the 10% floor."""
    return Calibration(
        DEPENDENCE_NAME,
        budget,
        above(DEPENDENCE_MIN),
        DEPENDENCE_RULE,
        f"{seeds} control seeds",
        (
            World("no dependence (the untrained model's)", False, _normal(0.0, sd, seeds)),
            World(f"a rise of exactly {DEPENDENCE_MIN:.0%}", False, _normal(DEPENDENCE_MIN, sd, seeds)),
            World(
                f"the paper's: 82.3 ppl on 26.80 ({PAPER_DEPENDENCE:.0%})", True, _normal(PAPER_DEPENDENCE, sd, seeds)
            ),
        ),
    )


def routing_calibration(budget: str, pairs: int, sd: float, reading: float = 0.005) -> Calibration:
    """The delay of lower-copy maturity against the +1% margin, read every ``reading`` of training: the claim is
    no delay."""
    return Calibration(
        DELAY_NAME,
        budget,
        below(DELAY_MARGIN),
        DELAY_RULE,
        f"{pairs} pairs, delays on {reading:.1%} readings",
        (
            World(f"a delay of {DELAY_MARGIN:.0%} of training", False, _readings(DELAY_MARGIN, sd, pairs, reading)),
            World(f"a delay of {TRUE_DELAY:.0%} of training", False, _readings(TRUE_DELAY, sd, pairs, reading)),
            World("the paper's: no delay (3% in both, Fig. 3A)", True, _readings(0.0, sd, pairs, reading)),
        ),
    )


def _log_writes(means: dict[str, float], sd: float, n: int) -> Callable[[np.random.Generator], list[np.ndarray]]:
    """The four comparisons' per-seed log ratios from per-architecture log writes ``means`` (each seed's draw shared
    by the comparisons that read that architecture)."""

    def draw(rng: np.random.Generator) -> list[np.ndarray]:
        logs = {arch: rng.normal(mean, sd / np.sqrt(2), n) for arch, mean in means.items()}
        return [logs[gated] - logs[ref] for gated, ref in PATHWAY_COMPARISONS]

    return draw


def pathway_calibration(budget: str, seeds: int, sd: float) -> Calibration:
    """The residual-write rule (``write_cut``) at ``seeds`` paired seeds with paired log-ratio spread ``sd``. Worlds
    without the claim: every FFN writing alike; alike but heavy-tailed; GEGLU writing as the width-matched GELU
    does, so one of the four comparisons lacks the effect and three have the paper's (the harshest); the effect's
    opposite. With it: the paper's Table 5 (-55.0%, -42.2%, -52.4%, -38.9%). The printed interval is the SwiGLU /
    width-matched GELU log ratio's."""
    paper = {arch: float(np.log(PAPER_PATHWAY[arch][0])) for arch in ("gelu", "gelu_matched", "swiglu", "geglu")}
    flat = dict.fromkeys(paper, paper["gelu"])
    opposite = {arch: 2 * paper["gelu"] - value for arch, value in paper.items()}
    partial = {**paper, "geglu": paper["gelu_matched"]}

    def heavy(rng: np.random.Generator) -> list[np.ndarray]:
        logs = {arch: rng.standard_t(3, seeds) * sd / np.sqrt(2) for arch in paper}
        return [logs[gated] - logs[ref] for gated, ref in PATHWAY_COMPARISONS]

    truth = paper["swiglu"] - paper["gelu_matched"]

    def interval(rng: np.random.Generator) -> tuple[float, float, float]:
        stats = paired_interval(
            _log_writes(paper, sd, seeds)(rng)[PATHWAY_COMPARISONS.index(("swiglu", "gelu_matched"))]
        )
        return stats["lo"], stats["hi"], truth

    return Calibration(
        PATHWAY_NAME,
        budget,
        write_cut,
        PATHWAY_RULE,
        f"{seeds} paired seeds per architecture, paired log-ratio sd {sd:g}",
        (
            World("every FFN writes alike", False, _log_writes(flat, sd, seeds)),
            World("every FFN writes alike, heavy-tailed seeds (t, 3 df)", False, heavy),
            World("GEGLU writes as the width-matched GELU does", False, _log_writes(partial, sd, seeds)),
            World("the effect's opposite", False, _log_writes(opposite, sd, seeds)),
            World("the paper's Table 5: -55.0%, -42.2%, -52.4%, -38.9%", True, _log_writes(paper, sd, seeds)),
        ),
        (Coverage(f"the SwiGLU / width-matched GELU log ratio, {seeds} pairs", interval),),
    )


def calibrations(budget: str) -> list[Calibration]:
    """Every finding at ``budget``'s GELU pairs (and its fewest gated-FFN pairs for the shrinkage)."""
    plan, spread = BUDGETS[budget], SPREADS[budget]
    gelu = plan.seeds["gelu"]
    gated = min((min(gelu, plan.seeds[a]) for a in plan.archs if a in GATED), default=0)
    out = [
        dependence_calibration(budget, gelu, spread.dependence),
        headline_calibration(budget, gelu, spread.gain),
        reliance_calibration(budget, gelu, spread.reliance),
        routing_calibration(budget, sum(plan.seeds[a] for a in plan.archs), spread.delay, plan.score_every),
    ]
    out += [shrinkage_calibration(budget, gated, spread.shrinkage)] if gated >= 2 else []
    return out + ([pathway_calibration(budget, plan.pathway_seeds, spread.pathway)] if plan.pathway_seeds >= 2 else [])


CALIBRATIONS = [register(c) for budget in BUDGETS for c in calibrations(budget)]
