"""The page of ``attnlab card``: its tables as CSV, the head-type map as PNG and SVG, and one section per panel.

Rendering only: every number comes from the card's data (``attnlab.card.card``); nothing here runs a model.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch, Rectangle

from ..diagnostics.heads import TYPES
from ..io import write_table, write_text
from .figures import plt, save_figure
from .html import render
from .sections import Figure, Section, Table

PANELS = ("Substitution screen", "Best zero-shot recipe", "Heads", "Reproduce")
COLORS = ("tab:red", "tab:blue", "tab:green", "0.8")  # sink, induction, local, diffuse, as TYPES orders them


def plot_head_types(heads: pd.DataFrame, path: str | Path, title: str) -> tuple[Path, Path]:
    """A layer x head map of each head's type (``head_type``), its first-token mass written in the cell and a blue
    frame round every head that carries the induction label besides another type."""
    layers, width = int(heads["layer"].max()) + 1, int(heads["head"].max()) + 1
    grid = np.full((layers, width), np.nan)
    for row in heads.itertuples(index=False):
        grid[row.layer, row.head] = TYPES.index(row.head_type)
    fig, ax = plt.subplots(figsize=(1.2 + 0.45 * width, 1.0 + 0.32 * layers), layout="constrained")
    ax.imshow(grid, cmap=ListedColormap(COLORS), vmin=-0.5, vmax=len(TYPES) - 0.5, aspect="auto")
    if layers * width <= 1024:  # past that the numbers are unreadable anyway
        for layer, head, mass in zip(heads["layer"], heads["head"], heads["first-token mass"]):
            if mass is not None and np.isfinite(mass):
                ax.text(head, layer, f"{mass:.2f}", ha="center", va="center", fontsize=6)
    for layer, head, labels in zip(heads["layer"], heads["head"], heads["labels"]):
        if "induction" in str(labels).split("+"):  # an induction head typed as a sink stays visible
            ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, edgecolor=COLORS[1], lw=2))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=10)
    ax.legend(
        handles=[Patch(color=c, label=t) for c, t in zip(COLORS, TYPES)]
        + [Patch(fill=False, edgecolor=COLORS[1], lw=2, label="induction label")],
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=8,
    )
    return save_figure(fig, path)


def write_card_page(data: dict, folder: str | Path, page: str | Path, shown: str | Path | None = None) -> Path:
    """Write the card's tables (CSV and Markdown) and head-type map into ``folder`` and the page to ``page``;
    ``shown``: the folder the page names instead (where a staged run moves its files)."""
    folder = Path(folder)
    sub = data["substitution"]
    heads = pd.DataFrame(data["heads"])
    write_table(folder / "unsafe", pd.DataFrame(sub["unsafe"]))
    write_table(folder / "screen", pd.DataFrame(sub["screen"], columns=["recipe", "suite", "p", "b", "safe %", "call"]))
    write_table(folder / "recipes", pd.DataFrame(sub["recipes"]))
    write_table(folder / "heads", heads)
    plot_head_types(heads, folder / "head_types", f"{data['model']}: head types (number: first-token mass)")
    text = render([(s, folder) for s in sections(data)], title=f"attnlab card {data['model']}", recomputed=False)
    if shown is not None:  # the page reads its files from the staging folder but must name where they will be
        text = text.replace(escape(str(folder)), escape(str(shown)))
    return write_text(page, text)


def sections(data: dict) -> list[Section]:
    """One section per panel of ``PANELS``."""
    plan, sub, cmd = data["budget"], data["substitution"], data["commands"]
    budget = (
        f"budget {plan['name']} ({plan['about']}): {plan['prompts']} prompts per suite, NIAH pad "
        f"{plan['pad'] if plan['pad'] is not None else 'the suite default'}, induction length {plan['length']}, "
        f"queries {plan['queries']}, seed {data['seed']}; b_auto = {_num(data['b_auto'])}"
    )
    best = sub["best"]
    told = "overlap: not told apart at this many prompts" if best["overlap"] else "do not overlap"
    held = pd.DataFrame(data["heads"])["labels"].astype(str).str.split("+")
    types = {t: int(held.map(lambda labels, t=t: t in labels).sum()) for t in TYPES}
    return [
        Section(
            study="card-screen",
            title=PANELS[0],
            source=sub["source"],
            question="How often is a row polynomial-unsafe (S_p >= 1, over active rows) at p = 2, 4, 8, 16 and "
            "b = 0 or b_auto, and what does the screen say of each ReLU or sigmoid recipe? A screen, not a guarantee: "
            f"a very low safe share predicts collapse, a high one does not promise preservation ({sub['source']}).",
            command=f"{cmd['audit niah']}; {cmd['audit induction']}",
            tables=(
                Table("unsafe", "unsafe % of active rows per suite, b and p, with its 95% interval over prompts"),
                Table(
                    "screen",
                    "the screen's call per recipe: a ReLU recipe's measured-safe % at its degree and bias, a "
                    "sigmoid's share of rows with S_sigma < 1; over every read row, not only final-query rows",
                ),
            ),
            notes=(budget,),
        ),
        Section(
            study="card-recipe",
            title=PANELS[1],
            source="Polynomial Concentration §5.3",
            question=f"Which zero-shot recipe keeps NIAH accuracy best? {best['recipe']} ({best['map']}): "
            f"{best['accuracy %']:.1f}% [{best['lo']:.1f}, {best['hi']:.1f}] against softmax "
            f"{best['softmax %']:.1f}% [{best['softmax lo']:.1f}, {best['softmax hi']:.1f}] (Wilson 95%), "
            f"{best['delta pp']:+.1f} pp; the intervals {told}.",
            command=cmd["substitute"],
            tables=(Table("recipes", "exact-match accuracy per recipe with Wilson 95% interval, delta pp"),),
            notes=(budget,),
        ),
        Section(
            study="card-heads",
            title=PANELS[2],
            source="Polynomial Concentration App. H; Attention Sinks Essential §4",
            question="What does each head do? Type from induction prompts, first-token mass on generic text, "
            "median S_2 of its active rows at b = 0 (both suites). Heads per label (a head counts under every "
            "label it carries): " + ", ".join(f"{t} {n}" for t, n in types.items()) + ".",
            command=f"{cmd['heads']}; {cmd['sinks']}",
            tables=(Table("heads", "per head: type, labels, features, first-token mass, median S_2"),),
            figures=(Figure("head_types", "layer x head map of the head types; the number is the first-token mass"),),
            notes=(budget,),
        ),
        Section(
            study="card-reproduce",
            title=PANELS[3],
            source=sub["source"],
            question=f"The commands that reproduce each panel on their own, reusing b_auto = {_num(data['b_auto'])}.",
            command="attnlab card",
            notes=tuple(f"{k}: {v}" for k, v in cmd.items()),
        ),
    ]


def _num(value) -> str:
    return "-" if value is None else f"{value:.6g}"
