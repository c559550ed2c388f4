"""The lengthgen study's paired rule on simulated worlds (``attnlab.findings.calibrate``), at each budget's seeds, test
rows and family of comparisons (Vasylenko et al. 2025 Table 1).

A world draws what the rule reads: per task of the family, the (seeds x rows) differences of the two maps on shared
test rows at each of the task's compared multiples. Without a difference both maps' seeds come from one quality
distribution (``rule.draw_no_difference``: spread, bimodal, all or none, often zero), one draw per task;
with Table 1's effect each seed's accuracy at a multiple is Table 1's cell with a seed-to-seed Beta spread
(``KAPPA``), the rows' shared difficulty tying the two maps' right answers as in the null. The rule must fire at most
2.5% (its design level) on every null world.

The Copy positive control's rule (``COPY_RULE``) reads the reported seed's rows at 1x, 2x and 4x; its worlds
(``findings.copy_worlds``) draw them at a map that stops generalizing on Copy (Table 1's alpha-entmax), at the floor,
and at Table 1's softmax.
"""

from __future__ import annotations

from attnlab.findings.calibrate import Calibration, register
from attnlab.studies.lengthgen.config import BUDGETS as RUN_BUDGETS
from attnlab.studies.lengthgen.findings import (
    COPY_NAME,
    COPY_RULE,
    ENTMAX_NAME,
    HEADLINE_NAME,
    HORIZON,
    MIN_GAP,
    PAIRED_RULE,
    TABLE1,
    copy_rule,
    copy_worlds,
)
from attnlab.studies.lengthgen.rule import paired_rule, paired_worlds
from attnlab.studies.lengthgen.study import BUDGETS


def family_cells(budget: str, variant: str) -> dict[str, list[tuple[float, float, float]]]:
    """task -> (multiple, the map's and softmax's Table 1 accuracy) where the budget compares ``variant`` with
    softmax: Table 1 separates them by ``MIN_GAP`` within the task's horizon, at a multiple the budget scores."""
    plan = BUDGETS[budget]
    out = {}
    for task, spec in plan.tasks.items():
        maps = plan.maps if spec.maps is None else spec.maps
        if task not in TABLE1 or not {variant, "softmax"} <= set(maps):
            continue
        table = TABLE1[task]
        cells = [
            (m, table[variant][m], table["softmax"][m])
            for m in spec.eval_mult
            if 1 < m <= HORIZON[task]
            and m in table["softmax"]
            and abs(table[variant][m] - table["softmax"][m]) >= MIN_GAP
        ]
        if cells:
            out[task] = cells
    return out


def paired_calibration(budget: str, variant: str, finding: str, seeds: int, rows: int) -> Calibration | None:
    """The paired rule on ``variant``'s family at ``budget`` (None where the budget compares nothing)."""
    cells = family_cells(budget, variant)
    if not cells:
        return None
    return Calibration(
        finding,
        budget,
        paired_rule,
        PAIRED_RULE,
        f"{seeds} paired seeds, {rows} test rows, {sum(map(len, cells.values()))} comparisons over " + ", ".join(cells),
        paired_worlds(cells, seeds, rows),
    )


def copy_calibration(budget: str, seeds: int, rows: int) -> Calibration:
    """The Copy positive control at ``rows`` test rows per multiple, its reported seed the best of ``seeds``."""
    return Calibration(
        COPY_NAME,
        budget,
        copy_rule,
        COPY_RULE,
        f"the reported seed of {seeds}, {rows} test rows at each of 1x, 2x and 4x",
        copy_worlds(rows),
    )


def calibrations(budget: str) -> list[Calibration]:
    """The Copy control (where the budget trains Copy), the headline and the alpha-entmax finding at ``budget``'s
    seeds and rows."""
    plan = BUDGETS[budget]
    rows = plan.samples or RUN_BUDGETS[plan.budget].samples
    found = (
        copy_calibration(budget, plan.seeds, rows) if "copy" in plan.tasks else None,
        paired_calibration(budget, "asentmax", HEADLINE_NAME, plan.seeds, rows),
        paired_calibration(budget, "entmax_a1.5", ENTMAX_NAME, plan.seeds, rows),
    )
    return [c for c in found if c is not None]


CALIBRATIONS = [register(c) for budget in BUDGETS for c in calibrations(budget)]
