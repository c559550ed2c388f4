"""The page of ``attnlab card``, answer first: the three answers (``cards.answers``), the layer x head map of head
types inline, then one section per panel, its figures before its words and its tables collapsed; beside it, its tables
as CSV and the head-type map as PNG and SVG.

Rendering only: every number comes from the typed card (``cards.types.Card``, as ``cards.build.build`` gives it);
nothing here runs a model.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap, to_hex
from matplotlib.patches import Patch, Rectangle

from attnlab.cards.answers import answers
from attnlab.cards.types import FORMATS, Card
from attnlab.diagnostics.heads import TYPES
from attnlab.io import write_table, write_text
from attnlab.report.figures import plt, save_figure
from attnlab.report.html import badge_html, findings_list_html, href, page_html, panel_html
from attnlab.report.plot_concentration import plot_ablation, plot_unsafe_by_length
from attnlab.report.plot_temperature import plot_real_lambda
from attnlab.report.sections import Figure, Section, Table

PANELS = ("Substitution screen", "Best zero-shot recipe", "Heads", "Ablation", "Length", "Temperature", "Reproduce")
COLORS = ("tab:red", "tab:blue", "tab:green", "0.8")  # sink, induction, local, diffuse, as TYPES orders them
NUMBERED = 1024  # the most heads a map writes first-token masses in: past that they are unreadable anyway


def plot_head_types(heads: pd.DataFrame, path: str | Path, title: str) -> tuple[Path, Path]:
    """A layer x head map of each head's type (``head_type``), its first-token mass written in the cell and a blue
    frame round every head that carries the induction label besides another type."""
    layers, width = int(heads["layer"].max()) + 1, int(heads["head"].max()) + 1
    grid = np.full((layers, width), np.nan)
    for row in heads.itertuples(index=False):
        grid[row.layer, row.head] = TYPES.index(row.head_type)
    fig, ax = plt.subplots(figsize=(1.2 + 0.45 * width, 1.0 + 0.32 * layers), layout="constrained")
    ax.imshow(grid, cmap=ListedColormap(COLORS), vmin=-0.5, vmax=len(TYPES) - 0.5, aspect="auto")
    if _numbered(heads):
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


def plot_entropy_by_length(table: pd.DataFrame, path: str | Path) -> tuple[Path, Path]:
    """The median row entropy against the prompt length L beside log L, the entropy of uniform attention over L keys
    (the dispersion Long-Context Generalization with Sparse Attention §3.2 describes grows as log L)."""
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    ax.plot(table["L"], table["med entropy"], "o-", color="tab:purple", label="median row entropy (nats)")
    ax.plot(table["L"], np.log(table["L"].astype(float)), ":", color="0.4", label="log L (uniform over L keys)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(table["L"], [str(int(v)) for v in table["L"]])
    ax.set_xlabel("prompt length L (tokens)")
    ax.set_ylabel("entropy (nats)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def _frame(rows, columns=None) -> pd.DataFrame:
    """A panel's table (a tuple of records) as a DataFrame."""
    return pd.DataFrame(list(rows), columns=columns)


def _parts(card: Card) -> list[str]:
    """The temperature panel's parts read ("inside", "past"), in that order."""
    heat = card.temperature
    return [p for p in ("inside", "past") if heat is not None and getattr(heat, p) is not None]


def write_card_page(card: Card | dict, folder: str | Path, page: str | Path, shown: str | Path | None = None) -> Path:
    """Write the card's tables (CSV and Markdown) and head-type map into ``folder`` and the page to ``page``;
    ``card``: a Card, or its dict (card.json's content, ``attnlab.card``'s result); ``shown``: the folder the page
    names instead (where a staged run moves its files)."""
    card = card if isinstance(card, Card) else Card.from_dict(card)
    folder = Path(folder)
    sub = card.substitution
    heads = _frame(card.heads)
    # which head, and what it is, before its features (card.json holds the keys sorted)
    first = [c for c in ("layer", "head", "head_type", "labels", "first-token mass", "med s_p2") if c in heads]
    heads = heads[first + [c for c in heads if c not in first]]
    write_table(folder / "unsafe", _frame(sub.unsafe))
    write_table(folder / "screen", _frame(sub.screen, columns=["recipe", "suite", "p", "b", "safe %", "call"]))
    write_table(folder / "recipes", _frame(sub.recipes))
    write_table(folder / "heads", heads)
    plot_head_types(heads, folder / "head_types", f"{card.model}: head types (number: first-token mass)")
    ablation, length, heat = card.ablation, card.length, card.temperature
    if ablation is not None:  # a card written before the panel existed has none
        write_table(folder / "ablation", _frame(ablation.rows))
        write_table(folder / "ablation_cells", _frame(ablation.cells))
        write_table(folder / "top_heads", _frame(ablation.top))
        if ablation.rows:
            plot_ablation(_frame(ablation.rows), folder / "ablation")
    if length is not None:
        lengths = _frame(length.rows)
        write_table(folder / "length", lengths)
        if length.past_rows:
            write_table(folder / "length_past", _frame(length.past_rows))
        if not lengths.empty:
            plot_unsafe_by_length(lengths.assign(p=length.p, b=length.b), folder / "length_unsafe")
            plot_entropy_by_length(lengths, folder / "length_entropy")
    for part in _parts(card):
        fit = getattr(heat, part)
        write_table(folder / f"temperature_{part}", _frame(fit.per_n))
        name = f"{card.model} ({part} the window)"
        plot_real_lambda(_frame(fit.per_n), fit.xi_hat, fit.half_iqr, name, folder / f"temperature_{part}")
    text = card_html(card, folder, Path(page).parent)
    if shown is not None:  # the page reads its files from the staging folder but must name where they will be
        text = text.replace(escape(str(folder)), escape(str(shown)))
    return write_text(page, text)


# The head map's numbers are too small to read on a phone: there its cells' tooltips and the line under it tell them.
STORY_STYLE = """
figure.story { margin: 0.5em 0 0.8em; } figure.story svg { display: block; width: 100%; height: auto; }
.legend { font-size: 0.85em; margin: 0.3em 0; } .legend span { white-space: nowrap; margin-right: 0.9em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: -0.1em; margin-right: 0.25em; }
@media (max-width: 600px) { svg text.mass, .legend .mass { display: none; } }
"""

# Hover or tap a cell of the head map: its tooltip's text shows under the map too (a phone shows no SVG tooltip).
STORY = """
(function () {
  var map = document.querySelector("svg.heads"), pick = document.getElementById("story-pick");
  function show(event) {
    var cell = event.target.closest("g.cell");
    if (cell) pick.textContent = cell.querySelector("title").textContent;
  }
  if (map && pick) { map.addEventListener("mouseover", show); map.addEventListener("click", show); }
})();
"""


def card_html(card: Card, folder: Path, here: Path) -> str:
    """The card's page, answer first: the model and its shape, the three answers (``cards.answers``) each with its
    label and a link to its panel, the layer x head map of head types inline, every finding collapsed, then one
    panel per ``PANELS``, figures first. ``folder``: where its files are; ``here``: the page's folder."""
    panels = sections(card)
    anchors = [panel_anchor(s.title) for s in panels]
    plan = card.budget or {}
    meta = " &middot; ".join(
        [
            escape(card.model_type or "model type not read"),
            f"{card.layers} layers &times; {card.heads_per_layer} heads",
            *([f"budget {escape(str(plan['name']))}"] if plan.get("name") else []),
            *([f"seed {card.seed}"] if card.seed is not None else []),
            f"b_auto = {'-' if card.b_auto is None else f'{card.b_auto:.4g}'}",
        ]
    )
    told = "".join(
        f'<li><a href="#{panel_anchor(a.panel)}">{escape(a.question)}</a> {badge_html(a.label)}'
        f"<p>{escape(a.sentence)}</p></li>"
        for a in answers(card)
    )
    heads = _frame(card.heads)
    files = " &middot; ".join(
        f'<a href="{href(folder / name, here)}">{name}</a>'
        for name in ("head_types.png", "head_types.svg", "heads.csv")
    )
    numbers = ", its number its first-token mass on generic text" if _numbered(heads) else ""
    here_ref = f'<p class="lead">The head-type map is the <a href="#story">figure at the top</a> ({files}).</p>'
    body = "\n".join(
        [
            f'<header><h1>{escape(card.model)}</h1><p class="meta">{meta}</p></header>',
            f'<ol class="answers">{told}</ol>',
            f'<figure class="story" id="story">{head_map_svg(heads)}<figcaption>{_legend(heads)}'
            f'<p class="meta" id="story-pick">Hover or tap a cell for its head\'s labels, first-token mass and median '
            f'S_2.</p><p class="meta">Each cell is one head, layers across and heads down: its colour the head\'s type '
            f"from induction prompts{numbers} (Polynomial Concentration App. H; Attention Sinks Essential §4). "
            f"Files: {files}.</p></figcaption></figure>",
            findings_list_html([(a, s.title, f) for s, a in zip(panels, anchors) for f in s.findings]),
            '<nav class="toc">panels: '
            + " &middot; ".join(f'<a href="#{a}">{escape(s.title)}</a>' for s, a in zip(panels, anchors))
            + "</nav>",
            *(
                panel_html(s, folder, a, here, figures=[here_ref] if s.title == PANELS[2] else None)
                for s, a in zip(panels, anchors)
            ),
            f'<footer class="meta"><p>written {datetime.now(UTC):%Y-%m-%d %H:%M UTC} by attnlab; its tables (CSV, '
            f"Markdown) and figures (PNG, SVG) are files in <code>{escape(str(folder))}</code></p></footer>",
        ]
    )
    return page_html(f"attnlab card {card.model}", body, STORY, STORY_STYLE)


def panel_anchor(title: str) -> str:
    """The id of a panel's heading: its title in lower case, hyphens for the rest (the answers link to it)."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def head_map_svg(heads: pd.DataFrame) -> str:
    """The layer x head map of ``plot_head_types`` as inline SVG scaled to the page's width: one cell per head,
    layers across and heads down, coloured by type, its first-token mass written in it (on maps of at most
    ``NUMBERED`` heads), a blue frame where it carries the induction label, and a ``<title>`` tooltip naming its
    layer, head, type, labels, first-token mass and median S_2 of its active rows."""
    w, h = 36, 24  # a cell in SVG units: "0.54" fits at font size 11
    layers, width = int(heads["layer"].max()) + 1, int(heads["head"].max()) + 1
    # the map fills the page's width, so past 30 layers its cells shrink on the page: its axes' words grow and their
    # ticks thin out (on both axes, as both shrink alike) to stay readable
    k = max(1.0, layers / 30)
    left, top, bottom, step = 40 * k, 4, 40 * k, _step(layers / 30)
    written = _numbered(heads)
    cells = []
    for row in heads.to_dict("records"):
        layer, head, kind, labels = int(row["layer"]), int(row["head"]), row["head_type"], str(row.get("labels"))
        mass, s2 = row.get("first-token mass"), row.get("med s_p2")
        x, y = left + layer * w, top + head * h
        tip = (
            f"layer {layer}, head {head}: {kind} (labels {labels}); first-token mass {_fixed(mass, '.3f')}; "
            f"median S_2 {_fixed(s2, '.3g')}"
        )
        cell = [
            f'<g class="cell"><title>{escape(tip)}</title>',
            f'<rect x="{x:g}" y="{y}" width="{w - 1}" height="{h - 1}" fill="{to_hex(COLORS[TYPES.index(kind)])}"/>',
        ]
        if "induction" in labels.split("+"):  # an induction head typed as a sink stays visible
            cell.append(
                f'<rect x="{x + 1.5:g}" y="{y + 1.5}" width="{w - 4}" height="{h - 4}" fill="none" '
                f'stroke="{to_hex(COLORS[1])}" stroke-width="3"/>'
            )
        if written and _finite(mass):
            cell.append(f'<text class="mass" x="{x + w / 2:g}" y="{y + h / 2:g}">{mass:.2f}</text>')
        cells.append("".join(cell) + "</g>")
    across, down = left + layers * w, top + width * h
    ticks = "".join(
        f'<text x="{left + i * w + w / 2:g}" y="{down + 12 * k:g}">{i}</text>' for i in range(0, layers, step)
    ) + "".join(
        f'<text x="{left - 6 * k:g}" y="{top + i * h + h / 2:g}" text-anchor="end">{i}</text>'
        for i in range(0, width, step)
    )
    # a small model's map is drawn at most a quarter larger than its units, not blown up to the page's width
    return (
        f'<svg class="heads" viewBox="0 0 {across + 4:g} {down + bottom:g}" width="100%" '
        f'style="max-width: {1.25 * (across + 4):g}px" aria-label="layer x head map of head types">'
        '<g font-family="system-ui, sans-serif" font-size="11" text-anchor="middle" dominant-baseline="central">'
        f'{"".join(cells)}<g font-size="{13 * k:g}" fill="#444">{ticks}'
        f'<text x="{left + layers * w / 2:g}" y="{down + 30 * k:g}">layer</text>'
        f'<text transform="translate({10 * k:g} {top + width * h / 2:g}) rotate(-90)">head</text></g></g></svg>'
    )


def _legend(heads: pd.DataFrame) -> str:
    """The map's key: each type's colour and how many heads it types, and the frame of the induction label."""
    kinds = heads["head_type"].value_counts()
    framed = int(heads["labels"].astype(str).str.split("+").map(lambda labels: "induction" in labels).sum())
    return (
        '<p class="legend">'
        + "".join(
            f'<span><i class="swatch" style="background:{to_hex(c)}"></i>{t} {int(kinds.get(t, 0))}</span>'
            for c, t in zip(COLORS, TYPES)
        )
        + f'<span><i class="swatch" style="border:2px solid {to_hex(COLORS[1])}"></i>induction label {framed}</span>'
        + ('<span class="mass">number: first-token mass</span>' if _numbered(heads) else "")
        + "</p>"
    )


def _numbered(heads: pd.DataFrame) -> bool:
    """Whether the map of ``heads`` is small enough (``NUMBERED``) to write each head's first-token mass in it."""
    return (int(heads["layer"].max()) + 1) * (int(heads["head"].max()) + 1) <= NUMBERED


def _step(least: float) -> int:
    """The smallest round tick step of at least ``least`` cells."""
    return next(s for s in (1, 2, 5, 10, 20, 50, 100) if s >= least)


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def _fixed(value, spec: str) -> str:
    return format(value, spec) if _finite(value) else "-"


UNRECORDED = "not recorded on this card"  # a command a card written before commands were recorded lacks


def sections(card: Card) -> list[Section]:
    """One section per panel of ``PANELS`` the card holds (a card written before the ablation, length and temperature
    panels existed, or before it recorded its plan and commands, has the others)."""
    plan, sub, cmd = card.budget, card.substitution, card.commands or {}
    budget = (
        f"budget {plan['name']} ({plan['about']}): {plan['prompts']} prompts per suite, NIAH pad "
        f"{plan['pad'] if plan['pad'] is not None else 'the suite default'}, induction length {plan['length']}, "
        f"queries {plan['queries']}, seed {card.seed}; b_auto = {_num(card.b_auto)}"
        if plan
        else f"budget not recorded; b_auto = {_num(card.b_auto)}"
    )
    best = sub.best
    told = "overlap: not told apart at this many prompts" if best.overlap else "do not overlap"
    # a schema-1 card has no reading: it named the highest recipe the best
    reading = best.reading or f"highest: {best.recipe}"
    later = [
        section(card, budget)
        for panel, section in (
            (card.ablation, ablation_section),
            (card.length, length_section),
            (card.temperature, temperature_section),
        )
        if panel is not None
    ]
    held = _frame(card.heads)["labels"].astype(str).str.split("+")
    types = {t: int(held.map(lambda labels, t=t: t in labels).sum()) for t in TYPES}
    return [
        Section(
            study="card-screen",
            title=PANELS[0],
            source=sub.source,
            question="How often is a row polynomial-unsafe (S_p >= 1, over active rows) at p = 2, 4, 8, 16 and "
            "b = 0 or b_auto, and what does the screen say of each ReLU or sigmoid recipe? A screen, not a guarantee: "
            f"a very low safe share predicts collapse, a high one does not promise preservation ({sub.source}).",
            command=f"{cmd.get('audit niah', UNRECORDED)}; {cmd.get('audit induction', UNRECORDED)}",
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
            question=f"Which zero-shot recipe keeps NIAH accuracy best? {reading}. Highest: {best.recipe} "
            f"({best.map}): {best.accuracy:.1f}% [{best.lo:.1f}, {best.hi:.1f}] against softmax "
            f"{best.softmax:.1f}% [{best.softmax_lo:.1f}, {best.softmax_hi:.1f}] (exact 95%), "
            f"{best.delta_pp:+.1f} pp; the intervals {told}.",
            command=cmd.get("substitute", UNRECORDED),
            tables=(Table("recipes", "exact-match accuracy per recipe with its exact 95% interval, delta pp"),),
            notes=(budget, *trained_note(card)),
        ),
        Section(
            study="card-heads",
            title=PANELS[2],
            source="Polynomial Concentration App. H; Attention Sinks Essential §4",
            question="What does each head do? Type from induction prompts, first-token mass on generic text, "
            "median S_2 of its active rows at b = 0 (both suites). Heads per label (a head counts under every "
            "label it carries): " + ", ".join(f"{t} {n}" for t, n in types.items()) + ".",
            command=f"{cmd.get('heads', UNRECORDED)}; {cmd.get('sinks', UNRECORDED)}",
            tables=(Table("heads", "per head: type, labels, features, first-token mass, median S_2"),),
            figures=(Figure("head_types", "layer x head map of the head types; the number is the first-token mass"),),
            notes=(budget,),
        ),
        *later,
        Section(
            study="card-reproduce",
            title=PANELS[-1],
            source=sub.source,
            question=f"The commands that reproduce each panel on their own, reusing b_auto = {_num(card.b_auto)}.",
            command="; ".join(cmd.values()) or UNRECORDED,
            notes=(budget,),
        ),
    ]


def trained_note(card: Card) -> tuple[str, ...]:
    """The trained-model check in words (none on a card written before it)."""
    t = card.trained
    if t is None:
        return ()
    verdict = "trained" if t.trained else "untrained: the findings about trained attention are not checked"
    return (
        f"trained-model check: mean next-token loss {t.loss:.2f} nats on {t.tokens} tokens of the bundled novel, "
        f"against {t.ratio:g} x log V = {t.ratio * t.uniform:.2f} (log V = {t.uniform:.2f}): {verdict}",
    )


def ablation_section(card: Card, budget: str) -> Section:
    """The K sweep: top-K, bottom-K and random-K heads polynomialized, NIAH scored (Polynomial Concentration §5.4)."""
    ab = card.ablation
    top = ", ".join(f"L{h['layer']}H{h['head']}" for h in ab.top[:10]) or "none"
    decisive = [r["k"] for r in ab.rows if r["decisive"]]
    return Section(
        study="card-ablation",
        title="Ablation",
        source="Polynomial Concentration §5.4, App. I",
        question=f"Which heads does NIAH need? Heads ranked by {ab.rank}; {ab.recipe} given to the top-K, "
        f"bottom-K and random-K heads of K = {[r['k'] for r in ab.rows]} ({ab.ranked} heads ranked). Top "
        f"heads by S_2: {top}. Top-K below every random draw (decisive, a descriptive flag, App. I, not the "
        f"finding's test) at K = {decisive or 'none'}.",
        command=card.commands.get("ablate", "not run: no K fits the ranked heads"),
        findings=(ab.finding,),
        tables=(
            Table("ablation", "per K: top, bottom and random-K change in accuracy (pp), draws above top, decisive"),
            Table("top_heads", "the heads of highest median S_2, in rank order"),
            Table("ablation_cells", "per K, subset and draw: NIAH accuracy with its exact 95% interval"),
        ),
        figures=(Figure("ablation", "change in NIAH accuracy against K: top, bottom and random-K"),) if ab.rows else (),
        notes=(budget, *trained_note(card)),
    )


def length_section(card: Card, budget: str) -> Section:
    """Unsafe share and row entropy against the prompt length (Polynomial Concentration App. C, Fig. 5)."""
    length = card.length
    cut = list(length.cut)  # the plan's lengths the window left no room for
    window = "none in its config" if length.window is None else length.window
    return Section(
        study="card-length",
        title="Length",
        source="Polynomial Concentration App. C",
        question=f"How do the unsafe share of active rows (S_{length.p:g} >= 1 at b = {length.b}) and the "
        f"median row entropy change with the prompt length L on induction prompts ({length.prompts} per L), "
        f"inside the model's window ({window})?"
        + (f" Lengths the window leaves no room for (a BOS token included), not read: {cut}." if cut else "")
        + (f" {length.past.words}." if length.past is not None and length.past.words else ""),
        command=card.commands.get("lengths", "not run: no length fits the window"),
        findings=(length.finding,),
        tables=(Table("length", "per L: prompt tokens, active rows, unsafe % with its 95% interval, median entropy"),)
        + ((Table("length_past", "the same past the window: a description, no verdict"),) if length.past_rows else ()),
        figures=(
            Figure("length_unsafe", "unsafe % of active rows against L, 95% band over prompts"),
            Figure("length_entropy", "median row entropy against L beside log L"),
        )
        if length.rows
        else (),
        notes=(budget, *trained_note(card)),
    )


def temperature_section(card: Card, budget: str) -> Section:
    """xi_hat_Lambda inside and past the window, and the multiplier it suggests (Hayase & Karakida 2026)."""
    heat, cmd = card.temperature, card.commands
    parts = _parts(card)
    fits = {p: getattr(heat, p) for p in parts}
    words = "; ".join(
        f"{p} the window (n = {list(fit.n)}): xi_hat_Lambda = {fit.xi_hat:.3f} [{fit.lo:.3f}, {fit.hi:.3f}]"
        for p, fit in fits.items()
    )
    m = heat.multiplier
    advice = (
        f"m(n; xi) = max(1, log n / log {heat.window})^xi at the target n = {m.target} "
        f"({m.target / heat.window:.3g} x the window) is "
        f"{_num(m.m)} for xi = xi_hat_Lambda = {m.xi:.3f} ({_num(m.m_lo)} to {_num(m.m_hi)} over its "
        "interval): a reading of the fitted exponent, not a tuned value (Hayase & Karakida's perplexity sweep puts "
        "Qwen-7B's best xi at 2 to 2.5, App. A.2)"
        if m
        else "no multiplier: no finite exponent or no training window"
    )
    notes = [
        budget,
        *trained_note(card),
        advice,
        *(f"{p} the window: {fit.windowed}" for p, fit in fits.items() if fit.windowed),
    ]
    if heat.past is None:
        notes.append(f"Past the window: not read ({heat.past_reason}).")
    return Section(
        study="card-temperature",
        title="Temperature",
        source="Hayase & Karakida 2026 §4.5, App. A.2",
        question="How fast does the upper-tail accumulation scale Lambda_n of the model's own score rows grow with "
        f"the context n, read on windows of the bundled novel? {words}.",
        command="; ".join(cmd[f"temperature {p}"] for p in parts),
        findings=tuple(fit.finding for fit in fits.values()),
        tables=tuple(Table(f"temperature_{p}", f"{p} the window: per n, bucket means of log Lambda_n") for p in parts),
        figures=tuple(
            Figure(f"temperature_{p}", f"{p} the window: bucket means of log Lambda_n against log log n") for p in parts
        ),
        notes=tuple(notes),
    )


def _num(value) -> str:
    return "-" if value is None else f"{value:.6g}"


@FORMATS.register("html")
def write_card_html(card: Card, folder: Path, shown: str | Path | None = None) -> Path:
    """index.html with the tables and figures it shows, in ``folder`` (``write_card_page``)."""
    return write_card_page(card, folder, folder / "index.html", shown=shown)
