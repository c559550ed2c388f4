"""The ``sinks`` study's section material: its figures (Attention Sinks Essential Fig. 2-6: the attention heat maps,
the BOS mass, BOS masking, Theorem 2 per position and the training curves) and the captions of the tables it
writes from the toy runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attnlab.report.plot_sinks import (
    plot_bos_mass,
    plot_heat_mosaic,
    plot_heatmaps,
    plot_linf_curves,
    plot_loss_curves,
    plot_masking,
    plot_positions,
)
from attnlab.report.sections import Figure, Table
from attnlab.studies.sinks.findings import MASK_TOL, NO_SINK, SINK, _eps, _seed_label
from attnlab.studies.sinks.measures import ARCHS, ATTENTION, DELTA, EPS, EPS_VERDICT, LENGTH, LINF_TARGET, TRIGGER


def _heat_figure(maps: pd.DataFrame, arch: str, folder: Path) -> str:
    stem = f"heatmaps_{arch}"
    part = maps[maps["arch"] == arch]
    part = part[part["seed"] == part["seed"].min()]
    shape = ARCHS[arch]
    title = (
        f"Attention weights, {shape['layers']} layer(s) x {shape['heads']} head(s), first seed: mean and std "
        f"over inputs, trigger at j = {TRIGGER}"
    )
    if shape["layers"] == 1 and shape["heads"] == 1:
        grid = {
            (att, stat): block.pivot(index="query", columns="key", values=stat).to_numpy()
            for att, block in part.groupby("attention")
            for stat in ("mean", "std")
        }
        # softmax first, as Attention Sinks Essential's Fig. 2 (a-b) before (c-d)
        plot_heatmaps(
            grid, sorted(ATTENTION, key=lambda a: a != "softmax"), ["mean", "std"], TRIGGER, folder / stem, title
        )
        return stem
    blocks = {}
    for att in sorted(ATTENTION, key=lambda a: a != "softmax"):
        block = part[part["attention"] == att].sort_values(["layer", "head", "query", "key"])
        for stat in ("mean", "std"):
            blocks[f"{att} {stat}"] = block[stat].to_numpy().reshape(shape["layers"], shape["heads"], LENGTH, LENGTH)
    plot_heat_mosaic(blocks, TRIGGER, folder / stem, title)
    return stem


def draw_figures(
    maps: pd.DataFrame,
    heads: pd.DataFrame,
    table: pd.DataFrame,
    masked: pd.DataFrame,
    positions: pd.DataFrame,
    folder: Path,
    samples: int,
) -> list[Figure]:
    """Draw the heat maps per architecture, the BOS mass bars, the masking bars, Theorem 2 per position and the
    training curves into ``folder``."""
    figures = []
    for arch, shape in ARCHS.items():
        stem = _heat_figure(maps, arch, folder)
        figures.append(
            Figure(
                stem,
                (
                    f"{shape['layers']} layer(s) x {shape['heads']} head(s) (Attention Sinks Essential Fig. 2-6), the "
                    "first seed: attention weight of each query position (rows) on each key position (columns), "
                    f"1-based, mean and std over {samples} inputs with the trigger at j = {TRIGGER}; "
                    + (
                        "one row of panels per attention kind. "
                        if shape["layers"] == 1
                        else "one panel per attention kind and statistic, holding one map per layer (rows) and head "
                        "(columns). "
                    )
                    + "The cyan box outlines the BOS key column, the red box the trigger query row; a sink is a bright "
                    "BOS "
                    "column above the red row. The upper triangle is 0 (causal mask)."
                ),
            )
        )
    largest = heads.groupby(["run", "attention", "arch", "layer"], sort=False)["bos_mass"].max().reset_index()
    labels = [f"{r.attention} {r.arch} {_seed_label(r.run)} L{r.layer}" for r in largest.itertuples()]
    plot_bos_mass(
        labels,
        largest["bos_mass"].tolist(),
        largest["attention"].tolist(),
        SINK,
        NO_SINK,
        folder / "bos_mass",
        title=f"BOS mass before the trigger (j = {TRIGGER}, L = {LENGTH}), largest head per run and layer",
    )
    figures.append(
        Figure(
            "bos_mass",
            (
                f"The largest head's mean attention weight on BOS over the pre-trigger queries 2..{TRIGGER - 1} (j = "
                f"{TRIGGER}; log axis, values printed on the bars, floored at 1e-6 for drawing), one bar per run (s0, "
                f"s1, ...: seeds) and layer; the dashed line is {SINK:g} (1 - eps, Theorem 1's sink), the dotted one "
                f"{NO_SINK:g} (ReLU's bound)."
            ),
        )
    )
    plot_masking(
        [f"{r.attention} {r.arch} {_seed_label(r.run)}" for r in masked.itertuples()],
        masked["loss"],
        masked["masked_loss"],
        masked["zero_loss"],
        MASK_TOL,
        folder / "masking",
        f"Held-out loss with BOS and with BOS masked in every layer ({samples} inputs, j uniform)",
    )
    figures.append(
        Figure(
            "masking",
            (
                f"Per run, the held-out squared-l2 loss ({samples} inputs, j uniform over 3..L) with BOS (blue) and "
                "with BOS masked in every layer (red; key 1 taken from every query i > 1), log axis, values printed, "
                "floored at 1e-9 for drawing; the black tick is the run's all-zeros predictor's loss, the grey dotted "
                f"one {MASK_TOL:g} x it. Softmax models need the sink when red passes black; ReLU models do not when "
                "red stays under grey."
            ),
        )
    )
    soft = positions[(positions["attention"] == "softmax") & np.isclose(positions["eps"], EPS_VERDICT)]

    def lines(model: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        part = soft[soft["model"] == model].sort_values("position")
        return {
            f"{arch} {_seed_label(run)}": (g["position"].to_numpy(), g["fraction"].to_numpy())
            for (arch, run), g in part.groupby(["arch", "run"], sort=False)
        }

    plot_positions(
        lines("trained"),
        lines("untrained"),
        1 - DELTA,
        folder / "positions",
        f"Theorem 2 per position, softmax runs (eps = {EPS_VERDICT:g})",
    )
    figures.append(
        Figure(
            "positions",
            (
                f"Per softmax run (shape and seed), the fraction of held-out inputs ({samples}, j uniform) with query "
                f"i before the trigger where some layer and head has alpha_(i,1) >= {1 - EPS_VERDICT:g}, against i "
                "(1-based; few inputs reach the last positions: table_positions counts them); dashed in the same "
                "colour, the untrained model the run started from (the null control); the dashed black line is "
                f"{1 - DELTA:g}, the verdict's threshold."
            ),
        )
    )
    curves, linf = {}, {}
    for run in table["run"]:
        train = pd.read_csv(folder / "runs" / run / "train.csv")
        curves[run] = (train["step"].to_numpy(), train["loss"].to_numpy())
        linf[run] = (train["step"].to_numpy(), train["linf"].to_numpy())
    plot_loss_curves(curves, float(table["uniform_zero_loss"].mean()), folder / "loss_curves")
    figures.append(
        Figure(
            "loss_curves",
            (
                "Training loss (squared l2 error averaged over positions, batch of 128) against step for each run, "
                "log axis; the dashed line is the all-zeros predictor's loss on held-out inputs. A run ends at App. "
                f"A's stop (batch l-inf < {LINF_TARGET:g}) or its step cap."
            ),
        )
    )
    plot_linf_curves(linf, LINF_TARGET, folder / "linf_curves")
    figures.append(
        Figure(
            "linf_curves",
            (
                "Training batch l-inf loss (largest l2 error over the batch's rows and positions, before the step's "
                f"update) against step for each run, log axis; the dashed line is App. A's target {LINF_TARGET:g}."
            ),
        )
    )
    return figures


def toy_tables() -> list[Table]:
    """The captions of the tables ``summarize`` writes from the toy runs, in its order; the real-model part adds its
    own (``sinks_real.summarize_real``)."""
    eps = ", ".join(_eps(e) for e in EPS)
    return [
        Table(
            "table_runs",
            (
                "Per run (s0, s1, ...: seeds): the step cap, steps taken, met_linf = stopped at App. A's rule (a "
                f"training batch's l-inf < {LINF_TARGET:g}), batch_linf = that batch's l-inf (or the last batch's "
                "at the cap); on 1000 held-out inputs (uniform trigger: uniform_*; trigger at j = "
                f"{TRIGGER}: fixed_*) the l-inf loss and the squared-l2 loss, loss_ratio = uniform_loss / "
                "uniform_zero_loss (the all-zeros predictor's); learned = met_linf; thm2_inputs_<eps> = the "
                "fraction of held-out inputs with some layer, head and position 1 < i < j at alpha_(i,1) >= 1 - "
                f"eps ({eps})."
            ),
        ),
        Table(
            "table_sinks",
            (
                f"Per run, layer and head: bos_mass = mean weight on key 1 over queries 2..{TRIGGER - 1} "
                f"(trigger at j = {TRIGGER}, mean over inputs), its smallest and largest query, row_total "
                "= the mean total weight of those rows (softmax rows sum to 1, ReLU rows need not), "
                "bos_at_trigger = the weight on key 1 at the trigger query; and Theorem 1 per input on held-out "
                "inputs with j uniform: thm1_positions_<eps> = the fraction of pre-trigger positions 1 < i < j "
                "with alpha_(i,1) >= 1 - eps, thm1_inputs_<eps> = the fraction of inputs where every one does."
            ),
        ),
        Table(
            "table_positions",
            (
                "Theorem 2 per position: per run, eps and 1-based pre-trigger position i, the fraction of held-out "
                "inputs (j uniform, i < j) where some layer and head has alpha_(i,1) >= 1 - eps, for the trained "
                "model (trained) and the untrained one its training started from (untrained, the null control); "
                "inputs = the held-out inputs with i before their trigger."
            ),
        ),
        Table(
            "table_masking",
            (
                "BOS masked at evaluation: per run, the held-out squared-l2 loss (j uniform) with BOS (loss) and "
                "with key 1 taken from every query i > 1 in every layer (masked_loss; a softmax row renormalized "
                "over keys 2..i, a ReLU row without key 1's term), the masked l-inf loss, the all-zeros "
                "predictor's loss (zero_loss), rise_over_zero = (masked_loss - loss) / zero_loss, and the same "
                "for the untrained model of the run's seed (untrained_*)."
            ),
        ),
        Table(
            "table_writes",
            (
                "Per run and layer, on held-out inputs with j uniform: what the layer's attention writes to the "
                "residual stream, as a mean l2 norm at the trigger (write_trigger) and elsewhere (write_elsewhere), "
                "and off the trigger the mean cosine between its write and the sum of the other layers' writes "
                "(cos_others; -1 where the layer cancels them, empty for one layer)."
            ),
        ),
        Table(
            "table_theorem3",
            (
                "Theorem 3's construction (attnlab.studies.sinks.theorem3_model) on held-out inputs: its "
                "squared-l2 and l-inf losses and the all-zeros predictor's, the largest weight on BOS of any "
                "query, and the largest weight of any query other than the trigger."
            ),
        ),
    ]
