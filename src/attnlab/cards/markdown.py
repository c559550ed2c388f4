"""card.md: the card as a section of a Hugging Face model card (README.md with YAML front matter).

The front matter carries the fields a Hub card's metadata takes (``tags``, ``library_name`` is the model's own and
left out) and the card's numbers under one key, ``attnlab_card``; the body holds the three answers with their labels,
the head-type map (an image beside the file, referenced relatively), one table in the shape of Polynomial
Concentration Table 1 (unsafe share of active rows per suite, one row per degree p at b = 0) and the command that
reproduces the card. Rendering only: every number is read from the typed card.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd
import yaml

from attnlab.cards.answers import answers, with_interval
from attnlab.cards.page import plot_head_types
from attnlab.cards.types import FORMATS, Card
from attnlab.io import to_markdown, write_text

IMAGE = "head_types"  # the story figure card.md shows, as the page draws it


def front_matter(card: Card) -> dict:
    """The YAML front matter: Hub tags, and the card's identity, plan and labels under ``attnlab_card``."""
    provenance = card.provenance or {}
    fields = {
        "schema": Card.SCHEMA,
        "model": card.model,
        "model_type": card.model_type,
        "layers": card.layers,
        "heads_per_layer": card.heads_per_layer,
        "budget": (card.budget or {}).get("name"),
        "seed": card.seed,
        "b_auto": card.b_auto,
        "model_sha256": provenance.get("model_sha256"),
        "answers": {a.key: a.label for a in answers(card)},
    }
    return {
        "tags": ["attnlab", "attention-analysis"],
        "attnlab_card": {k: v for k, v in fields.items() if v is not None},
    }


def table_1(card: Card) -> pd.DataFrame:
    """Unsafe % of active rows at b = 0 with its 95% interval over prompts, one column per suite and one row per
    degree p, as Polynomial Concentration Table 1 lays out one model."""
    rows = [u for u in card.substitution.unsafe if str(u.get("b")) == "0"]
    table: dict[float, dict[str, str]] = {}
    for u in rows:
        pct, lo, hi = u.get("unsafe %"), u.get("unsafe lo"), u.get("unsafe hi")
        cell = with_interval(pct, lo, hi, unit="")
        table.setdefault(float(u["p"]), {})[f"{u['suite']} unsafe %"] = cell
    return pd.DataFrame([{"model": card.model, "p": f"{p:g}", "b": "0", **cells} for p, cells in sorted(table.items())])


def card_markdown(card: Card) -> str:
    """card.md's text: front matter, the three answers, the head-type map, Table 1's shape, the command."""
    meta = yaml.safe_dump(front_matter(card), sort_keys=False, allow_unicode=True)
    lines = [
        f"---\n{meta}---",
        "",
        f"## Attention card: {card.model}",
        "",
        f"{card.model_type or 'a model'} with {card.layers} layers x {card.heads_per_layer} heads, read by "
        f"attnlab at the {(card.budget or {}).get('name', '-')} budget "
        f"(seed {card.seed}, b_auto = {'-' if card.b_auto is None else f'{card.b_auto:.4g}'}). Each answer carries "
        "the label its rule gave: a rule fixed before the numbers were read, a null control, and its power at the "
        "paper's effect measured by simulation at this budget.",
        "",
    ]
    for a in answers(card):
        lines += [f"- **{a.question}** {a.sentence} *({a.label})*"]
    lines += [
        "",
        f"![{card.model}: layer x head map of head types, first-token mass in each cell]({IMAGE}.png)",
        "",
        "Unsafe share of active rows (S_p >= 1) at b = 0, with its 95% interval over prompts, in the shape of "
        "Polynomial Concentration Table 1:",
        "",
        to_markdown(table_1(card)).rstrip("\n"),
        "",
        "Reproduce:",
        "",
        "```bash",
        _reproduce(card),
        "```",
        "",
    ]
    return "\n".join(lines)


def _reproduce(card: Card) -> str:
    """``attnlab card`` with the budget, seed and multiplier target this card was made with."""
    budget = (card.budget or {}).get("name", "quick")
    flags = f" --seed {card.seed}" if card.seed else ""
    heat = card.temperature
    m = heat.multiplier if heat is not None else None
    if m is not None and m.target is not None and heat.window is not None and m.target != 2 * heat.window:
        flags += f" --target-length {m.target}"  # the default target is twice the window
    return f"attnlab card {shlex.quote(card.model)} --budget {budget}{flags} --out card"


@FORMATS.register("md")
def write_card_markdown(card: Card, folder: Path, shown=None) -> Path:
    """card.md, and the head-type map it shows where the folder lacks it (the page draws the same figure)."""
    if not (folder / f"{IMAGE}.png").exists():
        heads = pd.DataFrame(list(card.heads))
        plot_head_types(heads, folder / IMAGE, f"{card.model}: head types (number: first-token mass)")
    return write_text(folder / "card.md", card_markdown(card))
