"""Several checkpoints' cards side by side: one row per model, as Polynomial Concentration Table 1 lays them out.

``compare(cards)`` reads the numbers from each typed card (``cards.types.Card``; a folder's card.json read by
``Card.from_dict``) and ``write_compare_page`` writes them as compare.csv/.md and one page; both take Cards, card
dicts (``attnlab.card``'s, card.json's content) or the folders ``attnlab card`` wrote, so the page can be rebuilt
from existing folders. Rendering only: nothing here runs a model. The length, temperature and ablation panels are
absent from cards written before those panels existed, and any value may be null: both read as '-'.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from attnlab.cards.types import Card, CardError, CardSchemaError
from attnlab.diagnostics.heads import TYPES
from attnlab.errors import Error
from attnlab.io import write_table, write_text
from attnlab.papers import cite
from attnlab.readback import ReadBackError, check, read_object
from attnlab.report.html import render
from attnlab.report.sections import Section, Table

NONE_AHEAD = "none ahead"  # the best-recipe cell of a card whose recipes no test tells apart
MISSING = "-"
NEEDED = ("model", "model_type", "layers", "heads_per_layer", "b_auto", "substitution", "heads")
TABLES = ("compare", "compare_unsafe", "compare_panels")  # written as .csv and .md beside the page
# A card folder named like one of the comparison's own files would collide with it.
RESERVED = frozenset({"index.html", "config.json", *(f"{t}.{e}" for t in TABLES for e in ("csv", "md"))})


class CompareError(Error, ValueError):
    """Cards that cannot be compared: none given, a folder without a readable card.json, a dict that is no card."""


def slugs(models: Sequence[str]) -> list[str]:
    """A folder name per model, unique within the list (case aside, for case-blind file systems): the model's
    last path component without .gguf, characters other than letters, digits, '.', '_' and '-' as '-', a second
    and third alike as -2, -3."""
    taken, out = set(RESERVED), []
    for model in models:
        last = re.split(r"[/\\]", model.rstrip("/\\"))[-1].removesuffix(".gguf")
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", last).strip(".-") or "model"  # no hidden name, no '..'
        name, k = base, 1
        while name.lower() in taken:
            k += 1
            name = f"{base}-{k}"
        taken.add(name.lower())
        out.append(name)
    return out


def read_card(folder: str | os.PathLike) -> Card:
    """The card ``attnlab card`` wrote into ``folder`` (its card.json, ``Card.from_dict``); a CompareError naming
    the folder where there is no readable card.json or it is no card, a CardError naming the file where its schema
    is newer than this attnlab reads."""
    path = Path(folder) / "card.json"
    try:
        data = read_object(path, allowed="a card.json that attnlab card wrote")
    except (ReadBackError, OSError) as exc:  # MissingFileError where there is none
        raise CompareError(f"not a readable card.json: {exc}; pass a folder attnlab card wrote") from None
    return _card(data, folder, path)


@dataclass(frozen=True)
class _Keys:
    """The keys of a card's dict that ``Card.from_dict`` takes as they are, of ``Card``'s types; its panels (objects
    here) are checked as they are built."""

    model: str
    model_type: str | None
    layers: int
    heads_per_layer: int
    b_auto: float | None
    substitution: dict[str, Any]
    heads: list[dict[str, Any]]
    budget: dict[str, Any] | None = None
    seed: int | None = None
    ablation: dict[str, Any] | None = None
    length: dict[str, Any] | None = None
    temperature: dict[str, Any] | None = None
    commands: dict[str, str] | None = None
    provenance: dict[str, Any] | None = None
    trained: dict[str, Any] | None = None


def _card(data, given, path=None) -> Card:
    """``data`` (a Card, or a card's dict) as a Card; ``given``: how the error names it (``path``: its file)."""
    if isinstance(data, Card):
        return data
    missing = [k for k in NEEDED if not isinstance(data, dict) or k not in data]
    if missing:
        raise CompareError(f"{given} is not a card: it lacks {', '.join(missing)}")
    try:
        card = Card.from_dict(data)
    except CardSchemaError as exc:
        raise CardSchemaError(f"{path or given}: {exc}") from None
    except CardError as exc:
        raise CompareError(f"{given} is not a card: {exc}") from None
    try:  # after the schema's check: a newer card is named as such, whatever its keys hold
        check(data, _Keys, path or given)
    except ReadBackError as exc:
        raise CompareError(f"{exc}; pass a card attnlab card wrote") from None
    return card


def _cards(cards: Sequence[Card | dict | str | os.PathLike]) -> list[Card]:
    if isinstance(cards, (Card, dict, str, os.PathLike)) or not cards:
        raise CompareError("compare takes a list of one or more cards (Cards, card dicts or card folders)")
    return [_card(c, "a card dict") if isinstance(c, (Card, dict)) else read_card(c) for c in cards]


def _value(value):
    """A card's value as the table shows it: null (and NaN) as '-'."""
    return MISSING if value is None or (isinstance(value, float) and value != value) else value


def _attr(obj, name: str):
    """``obj.name``, None where ``obj`` is None (a panel or value an older card lacks, or null)."""
    return None if obj is None else getattr(obj, name)


def _unsafe(card: Card) -> dict:
    """``{suite} b={b} p={p}`` -> (unsafe %, lo, hi), in the card's order."""
    return {
        f"{u['suite']} b={u['b']} p={u['p']:g}": (u.get("unsafe %"), u.get("unsafe lo"), u.get("unsafe hi"))
        for u in card.substitution.unsafe
    }


def _row(card: Card) -> dict:
    best = card.substitution.best
    heads = pd.DataFrame(list(card.heads), columns=["head_type", "first-token mass"])
    sinks = heads.loc[heads["head_type"] == "sink", "first-token mass"].dropna()
    lengths = sorted(_attr(card.length, "rows") or (), key=lambda r: r["L"])
    ablation = sorted(_attr(card.ablation, "rows") or (), key=lambda r: r["k"])
    heat = card.temperature
    m = _attr(heat, "multiplier")
    row = {
        "model": card.model,
        "model_type": card.model_type,
        "layers x heads": f"{card.layers} x {card.heads_per_layer}",
        "b_auto": card.b_auto,
    }
    for key, (pct, lo, hi) in _unsafe(card).items():
        row |= {f"{key} unsafe %": pct, f"{key} lo": lo, f"{key} hi": hi}
    row |= {
        # only a recipe ahead of every other is the best (its reading says why not); a schema-1 card, with no
        # reading, named the highest one
        "best recipe": _attr(best, "recipe") if _attr(best, "reading") is None or best.ahead else NONE_AHEAD,
        "recipe reading": _attr(best, "reading"),
        "best %": _attr(best, "accuracy"),
        "best lo": _attr(best, "lo"),
        "best hi": _attr(best, "hi"),
        "softmax %": _attr(best, "softmax"),
        "softmax lo": _attr(best, "softmax_lo"),
        "softmax hi": _attr(best, "softmax_hi"),
        **{f"{t} heads": int((heads["head_type"] == t).sum()) for t in TYPES},
        "sink mass": float(sinks.mean()) if len(sinks) else None,
    }
    for end, at in (("short", 0), ("long", -1)):
        line = lengths[at] if lengths else {}
        row |= {f"length L {end}": line.get("L"), f"length unsafe % {end}": line.get("unsafe %")}
    row["length verdict"] = _attr(_attr(card.length, "finding"), "verdict")
    for part in ("inside", "past"):
        fit = _attr(heat, part)
        row |= {
            f"xi {part}": _attr(fit, "xi_hat"),
            f"xi {part} lo": _attr(fit, "lo"),
            f"xi {part} hi": _attr(fit, "hi"),
        }
    row |= {"m target": _attr(m, "target"), "m": _attr(m, "m"), "m lo": _attr(m, "m_lo"), "m hi": _attr(m, "m_hi")}
    last = ablation[-1] if ablation else {}
    row |= {"ablation K": last.get("k"), "top-K pp": last.get("top pp"), "decisive": last.get("decisive")}
    return row


def compare(cards: Sequence[Card | dict | str | os.PathLike]) -> pd.DataFrame:
    """One row per card (a Card, a card dict, or a folder ``attnlab card`` wrote): model, model_type, layers x heads,
    b_auto; the unsafe % of active rows with its 95% interval per audited suite, b (0, auto) and p; the best
    zero-shot recipe (named only when ahead of every other, else "none ahead") and the card's reading of the
    recipes, the highest recipe's NIAH accuracy and softmax's with their exact 95% intervals; heads per type (each head
    once, by its head_type) and the mean first-token mass of the sink-typed ones; the unsafe % at the shortest
    and longest prompt length with the length finding's verdict; xi_hat_Lambda [lo, hi] inside and past the
    window and the multiplier m at its target length; the largest K's top-K change (pp) and decisive flag.
    Values as the cards hold them, unrounded; '-' where a card lacks one (an older card, a panel not read)."""
    rows = [_row(card) for card in _cards(cards)]
    columns = list(dict.fromkeys(k for row in rows for k in row))  # a suite one card lacks still gets its column
    return pd.DataFrame([{k: _value(row.get(k)) for k in columns} for row in rows], columns=columns)


def _missing(value) -> bool:
    return isinstance(value, str) and value == MISSING


def _number(value, digits: int) -> str:
    return MISSING if _missing(value) else f"{value:.{digits}f}"


def _ci(row: pd.Series, stem: str, lo: str, hi: str, digits: int = 1) -> str:
    """``value [lo, hi]``, or '-' where the value is missing."""
    if _missing(row[stem]):
        return MISSING
    return f"{row[stem]:.{digits}f} [{_number(row[lo], digits)}, {_number(row[hi], digits)}]"


def _at(text: str, label: str, where) -> str:
    """``text (label = where)``; ``text`` alone where either is missing."""
    return text if _missing(text) or _missing(where) else f"{text} ({label} = {where})"


def _unsafe_table(table: pd.DataFrame, links: list[str | None]) -> pd.DataFrame:
    """The page's screen table: per model, its card's page and each unsafe % as ``value [lo, hi]``."""
    keys = [c.removesuffix(" unsafe %") for c in table.columns if c.endswith(" unsafe %") and " b=" in c]
    shown = pd.DataFrame({"model": table["model"], "card": [link or MISSING for link in links]})
    shown["b_auto"] = table["b_auto"]
    for key in keys:
        shown[key] = [_ci(r, f"{key} unsafe %", f"{key} lo", f"{key} hi") for _, r in table.iterrows()]
    return shown


def _panels_table(table: pd.DataFrame) -> pd.DataFrame:
    """The page's table of the other panels, intervals as ``value [lo, hi]``."""
    lines = []
    for _, r in table.iterrows():
        line = {
            "model": r["model"],
            "model_type": r["model_type"],
            "layers x heads": r["layers x heads"],
            "best recipe": r["best recipe"],
            "best % [95%]": _ci(r, "best %", "best lo", "best hi"),
            "softmax % [95%]": _ci(r, "softmax %", "softmax lo", "softmax hi"),
            "heads " + "/".join(TYPES): "/".join(str(r[f"{t} heads"]) for t in TYPES),
            "first-token mass of sink heads": _number(r["sink mass"], 3),
        }
        for end in ("short", "long"):
            pct = _number(r[f"length unsafe % {end}"], 1)
            line[f"unsafe % at the {end}est L"] = _at(pct, "L", r[f"length L {end}"])
        line["length verdict"] = r["length verdict"]
        for part in ("inside", "past"):
            line[f"xi_hat_Lambda {part} [95%]"] = _ci(r, f"xi {part}", f"xi {part} lo", f"xi {part} hi", 3)
        line["multiplier m [over xi_hat's 95%]"] = _at(_ci(r, "m", "m lo", "m hi", 3), "n", r["m target"])
        line["top-K delta pp"] = _at(_number(r["top-K pp"], 1), "K", r["ablation K"])
        line["decisive"] = MISSING if _missing(r["decisive"]) else "yes" if r["decisive"] else "no"
        lines.append(line)
    return pd.DataFrame(lines)


def _budget(card: Card) -> str | None:
    return (card.budget or {}).get("name")


def _setting(cards: list[Card]) -> tuple[str, tuple[str, ...]]:
    """The command that makes these cards together and, where their budgets or seeds differ, the warning."""
    made = {(_budget(c), c.seed) for c in cards}
    models = [str(c.model) for c in cards]
    if len(made) > 1:
        shown = "; ".join(f"{c.model}: budget {_budget(c)}, seed {c.seed}" for c in cards)
        warning = f"the cards were made under different budgets or seeds ({shown}): their numbers differ in kind"
        return shlex.join(["attnlab", "card", *models]), (warning,)
    ((budget, seed),) = made
    flags = []
    for flag, value in (("--budget", budget), ("--seed", seed)):
        if value is not None:  # only a hand-made card dict lacks them
            flags += [flag, str(value)]
    return shlex.join(["attnlab", "card", *models, *flags]), ()


def sections(cards: list[Card]) -> list[Section]:
    """The page's two sections: the substitution screen across models (Table 1's layout), and the recipe, heads,
    length, temperature and ablation panels across models."""
    command, warnings = _setting(cards)
    plan = cards[0].budget or {}
    seed = MISSING if cards[0].seed is None else cards[0].seed
    budget = (
        f"budget {plan.get('name', MISSING)} ({plan.get('about', MISSING)}), seed {seed}; "
        "every number unrounded, with its interval, is in compare.csv; '-': the card holds no such value (a panel "
        "not read, or a card written before the panel existed)"
    )
    screen = cite("Polynomial Concentration", "Table 1, §5.5")
    return [
        Section(
            study="card-compare-screen",
            title="Substitution screen across models",
            source=screen,
            question="How often is a row polynomial-unsafe (S_p >= 1, over active rows) in each model, per audited "
            "suite, b = 0 or b_auto and p = 2, 4, 8, 16, with its 95% interval over prompts? One row per model as in "
            f"{screen}: a screen, not a guarantee.",
            command=command,
            tables=(
                Table(
                    "compare_unsafe", "unsafe % of active rows [95% interval], one row per model; card: its own page"
                ),
            ),
            notes=(budget,),
            warnings=warnings,
        ),
        Section(
            study="card-compare-panels",
            title="Recipe, heads, length, temperature and ablation across models",
            source="; ".join(
                (
                    cite("Polynomial Concentration", "§5.3, §5.4, App. C, App. H, App. I"),
                    cite("Attention Sinks Essential", "§4"),
                    cite("Hayase & Karakida 2026", "§4.5, App. A.2"),
                )
            ),
            question="Per model: the best zero-shot recipe's NIAH accuracy against softmax's (exact 95%); heads "
            "per type (each head once, by its type) and the mean first-token mass of the sink-typed ones; the "
            "unsafe % at the shortest and longest prompt length read and the length finding's verdict; "
            "xi_hat_Lambda [95%] inside and past the window and the multiplier m(n; xi) it suggests at the target n; "
            "the largest K's top-K change in NIAH accuracy and whether it is decisive (below every random-K draw).",
            command=command,
            tables=(Table("compare_panels", "one row per model; each model's own page has the findings and figures"),),
            notes=(budget,),
            warnings=warnings,
        ),
    ]


def write_compare_page(
    cards: Sequence[Card | dict | str | os.PathLike],
    folder: str | os.PathLike,
    page: str | os.PathLike,
    *,
    links: Sequence[str | None] | None = None,
    shown: str | os.PathLike | None = None,
) -> Path:
    """Write compare.csv/.md (``compare``), the page's tables and the page to ``page``. ``cards``: Cards, card dicts
    or card folders; ``links``: per card, its own page relative to ``page`` (None: a folder's index.html, none for a
    Card or dict); ``shown``: the folder the page names instead of ``folder`` (where a staged run moves its files)."""
    folder, page = Path(folder), Path(page)
    data = _cards(cards)
    if links is None:
        links = [
            None if isinstance(c, (Card, dict)) else os.path.relpath(Path(c) / "index.html", page.parent) for c in cards
        ]
    elif len(links) != len(data):
        raise CompareError(f"links takes one per card ({len(data)}), got {len(links)}")
    table = compare(data)
    for stem, shown_table in zip(TABLES, (table, _unsafe_table(table, list(links)), _panels_table(table))):
        write_table(folder / stem, shown_table)
    text = render([(s, folder) for s in sections(data)], title=f"attnlab card: {len(data)} models", recomputed=False)
    if shown is not None:  # the page reads its files from the staging folder but must name where they will be
        text = text.replace(escape(str(folder)), escape(str(shown)))
    for link in filter(None, links):  # the table shows each card's page as text; here it becomes its link
        cell = f'<td class="text">{escape(link)}</td>'
        text = text.replace(cell, f'<td class="text"><a href="{escape(link)}">{escape(link)}</a></td>')
    return write_text(page, text)
