"""Several checkpoints' cards side by side: one row per model, as Polynomial Concentration Table 1 lays them out.

``compare(cards)`` reads the numbers from each typed card (``cards.types.Card``; a folder's card.json read by
``Card.from_dict``) and ``write_compare_page`` writes them as compare.csv/.md (every value, unrounded), a few narrow
tables (intervals as ``value [lo, hi]`` in one cell, so the page fits a 1400 px screen), Table 1's published lines
beside the cards' (``TABLE_1``), one cross-model figure and one page; both take Cards, card dicts (``attnlab.card``'s,
card.json's content) or the folders ``attnlab card`` wrote, so ``attnlab compare`` rebuilds the page from existing
folders. Rendering only: nothing here runs a model. The length, temperature and ablation panels are absent from
cards written before those panels existed, and any value may be null: both read as '-'.
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
from attnlab.report.plot_concentration import plot_unsafe_beside_published
from attnlab.report.sections import Figure, Section, Table
from attnlab.studies.concentration.rules import PUBLISHED_DEGREES, TABLE_1, Published

NONE_AHEAD = "none ahead"  # the best-recipe cell of a card whose recipes no test tells apart
MISSING = "-"
NEEDED = ("model", "model_type", "layers", "heads_per_layer", "b_auto", "substitution", "heads")
SINK_MASS = "first-token mass of sink heads"
# written as .csv and .md beside the page: compare holds every value; the others are the page's narrow tables
TABLES = (
    "compare",
    "compare_models",
    "compare_table1",
    "compare_unsafe",
    "compare_recipes",
    "compare_heads",
    "compare_length",
    "compare_ablation",
)
FIGURE = "compare_unsafe_p2"  # .png and .svg beside the page
# A card folder named like one of the comparison's own files would collide with it.
RESERVED = frozenset(
    {
        "index.html",
        "config.json",
        *(f"{t}.{e}" for t in TABLES for e in ("csv", "md")),
        f"{FIGURE}.png",
        f"{FIGURE}.svg",
    }
)
# A model's name (a path, a Hub id) and a card's link may be one word wider than the page: the tables' first column
# and the links may break such a word anywhere (the other columns keep their words whole), a paragraph where it must.
WRAP = (
    "td.text:first-child, td.text a { overflow-wrap: anywhere; } td.text:first-child { min-width: 10em; } "
    "p, figcaption { overflow-wrap: break-word; }"
)


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


def _key(suite: str, b, p) -> str:
    return f"{suite}, b = {b}, p = {p:g}"


def _unsafe(card: Card) -> dict:
    """``{suite}, b = {b}, p = {p}`` -> (unsafe %, lo, hi), in the card's order."""
    return {
        _key(u["suite"], u["b"], u["p"]): (u.get("unsafe %"), u.get("unsafe lo"), u.get("unsafe hi"))
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
        "budget": _budget(card),
        "seed": card.seed,
        "b_auto": card.b_auto,
    }
    for key, (pct, lo, hi) in _unsafe(card).items():
        row |= {f"{key}: unsafe %": pct, f"{key}: unsafe 95% lo": lo, f"{key}: unsafe 95% hi": hi}
    row |= {
        # only a recipe ahead of every other is the best (its reading says why not); a schema-1 card, with no
        # reading, named the highest one
        "best recipe": _attr(best, "recipe") if _attr(best, "reading") is None or best.ahead else NONE_AHEAD,
        "recipe reading": _attr(best, "reading"),
        "highest recipe NIAH %": _attr(best, "accuracy"),
        "highest recipe NIAH 95% lo": _attr(best, "lo"),
        "highest recipe NIAH 95% hi": _attr(best, "hi"),
        "softmax NIAH %": _attr(best, "softmax"),
        "softmax NIAH 95% lo": _attr(best, "softmax_lo"),
        "softmax NIAH 95% hi": _attr(best, "softmax_hi"),
        **{f"{t} heads": int((heads["head_type"] == t).sum()) for t in TYPES},
        SINK_MASS: float(sinks.mean()) if len(sinks) else None,
    }
    for end, at in (("shortest", 0), ("longest", -1)):
        line = lengths[at] if lengths else {}
        row |= {f"{end} L": line.get("L"), f"unsafe % at the {end} L": line.get("unsafe %")}
    row["length verdict"] = _attr(_attr(card.length, "finding"), "verdict")
    for part in ("inside", "past"):
        fit = _attr(heat, part)
        row |= {
            f"xi_hat_Lambda {part} the window": _attr(fit, "xi_hat"),
            f"xi_hat_Lambda {part} the window 95% lo": _attr(fit, "lo"),
            f"xi_hat_Lambda {part} the window 95% hi": _attr(fit, "hi"),
        }
    row |= {
        "multiplier target n": _attr(m, "target"),
        "multiplier m": _attr(m, "m"),
        "multiplier m at xi_hat's 95% lo": _attr(m, "m_lo"),
        "multiplier m at xi_hat's 95% hi": _attr(m, "m_hi"),
    }
    last = ablation[-1] if ablation else {}
    row |= {
        "largest ablation K": last.get("k"),
        "top-K delta pp": last.get("top pp"),
        "top-K decisive": last.get("decisive"),
        "ablation verdict": _attr(_attr(card.ablation, "finding"), "verdict"),
    }
    return row


def compare(cards: Sequence[Card | dict | str | os.PathLike]) -> pd.DataFrame:
    """One row per card (a Card, a card dict, or a folder ``attnlab card`` wrote): model, model_type, layers x heads,
    budget, seed, b_auto; the unsafe % of active rows with its 95% interval per audited suite, b (0, auto) and p; the
    best zero-shot recipe (named only when ahead of every other, else "none ahead") and the card's reading of the
    recipes, the highest recipe's NIAH accuracy and softmax's with their exact 95% intervals; heads per type (each head
    once, by its head_type) and the mean first-token mass of the sink-typed ones; the unsafe % at the shortest
    and longest prompt length with the length finding's verdict; xi_hat_Lambda [lo, hi] inside and past the
    window and the multiplier m at its target length; the largest K's top-K change (pp), decisive flag and the
    ablation finding's verdict. Values as the cards hold them, unrounded, under column names a reader can take as
    they are (compare.csv is this table); '-' where a card lacks one (an older card, a panel not read)."""
    rows = [_row(card) for card in _cards(cards)]
    columns = list(dict.fromkeys(k for row in rows for k in row))  # a suite one card lacks still gets its column
    return pd.DataFrame([{k: _value(row.get(k)) for k in columns} for row in rows], columns=columns)


def _missing(value) -> bool:
    return (
        value is None or (isinstance(value, str) and value == MISSING) or (isinstance(value, float) and value != value)
    )


def _number(value, digits: int) -> str:
    return MISSING if _missing(value) else f"{value:.{digits}f}"


def _ci(value, lo, hi, digits: int = 1) -> str:
    """``value [lo, hi]`` in one cell, or '-' where the value is missing."""
    if _missing(value):
        return MISSING
    return f"{value:.{digits}f} [{_number(lo, digits)}, {_number(hi, digits)}]"


def _row_ci(row: pd.Series, stem: str, lo: str, hi: str, digits: int = 1) -> str:
    return _ci(row[stem], row[lo], row[hi], digits)


def _at(text: str, label: str, where) -> str:
    """``text (label = where)``; ``text`` alone where either is missing."""
    return text if _missing(text) or _missing(where) else f"{text} ({label} = {where})"


def _by_suite(card: Card, b: str) -> dict[str, dict[float, tuple]]:
    """The card's unsafe lines at bias label ``b`` ("0", "auto"): suite -> p -> (unsafe %, lo, hi)."""
    out: dict[str, dict[float, tuple]] = {}
    for u in card.substitution.unsafe:
        if str(u["b"]) == b:
            out.setdefault(u["suite"], {})[u["p"]] = (u.get("unsafe %"), u.get("unsafe lo"), u.get("unsafe hi"))
    return out


def _degrees(cards: list[Card]) -> list[float]:
    return sorted({u["p"] for c in cards for u in c.substitution.unsafe} | set(PUBLISHED_DEGREES))


def _measured(card: Card) -> str:
    return f"measured (budget {_budget(card) or MISSING}, seed {_value(card.seed)})"


def _published(line: Published) -> str:
    return f"published: {cite('Polynomial Concentration', line.where)}, L = {line.L}{line.note}"


def _models_table(cards: list[Card], table: pd.DataFrame, links: list[str | None]) -> pd.DataFrame:
    """Per model: its card's page (the link), model_type, layers x heads and b_auto."""
    return pd.DataFrame(
        {
            "model": table["model"],
            "card": [link or MISSING for link in links],
            "model_type": table["model_type"],
            "layers x heads": table["layers x heads"],
            "b_auto": table["b_auto"],
            "made": [_measured(c) for c in cards],
        }
    )


def table_1(cards: Sequence[Card | dict | str | os.PathLike]) -> pd.DataFrame:
    """Polynomial Concentration Table 1's shape: one line per model and suite, the unsafe % of active rows at b = 0
    per degree p (each card's with its 95% interval over prompts as ``value [lo, hi]``), each card's lines first,
    then ``TABLE_1``'s published lines (their own values, no interval: Table 1 gives none; median A_act as published,
    which a card does not record), each marked in ``source``."""
    data = _cards(cards)
    degrees = _degrees(data)
    lines = []
    for card in data:
        for suite, cells in _by_suite(card, "0").items():
            lines.append(
                {"model": card.model, "suite": suite}
                | {f"p = {p:g}": _ci(*cells.get(p, (None, None, None))) for p in degrees}
                | {"median A_act (p = 2)": MISSING, "source": _measured(card)}
            )
    for line in TABLE_1:
        published = dict(zip(PUBLISHED_DEGREES, line.unsafe))
        lines.append(
            {"model": line.model, "suite": line.suite}
            | {f"p = {p:g}": _number(published.get(p), 1) for p in degrees}
            | {"median A_act (p = 2)": _value(line.a_act), "source": _published(line)}
        )
    return pd.DataFrame(lines)


def _auto_table(cards: list[Card]) -> pd.DataFrame:
    """Per model and suite, the unsafe % of active rows at b = b_auto per degree p, as ``value [lo, hi]``
    (Polynomial Concentration Table 11's layout)."""
    degrees = sorted({u["p"] for c in cards for u in c.substitution.unsafe})
    return pd.DataFrame(
        [
            {"model": card.model, "suite": suite, "b_auto": _value(card.b_auto)}
            | {f"p = {p:g}": _ci(*cells.get(p, (None, None, None))) for p in degrees}
            for card in cards
            for suite, cells in _by_suite(card, "auto").items()
        ],
        columns=["model", "suite", "b_auto", *(f"p = {p:g}" for p in degrees)],
    )


def _recipes_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: the best zero-shot recipe, the highest recipe's and softmax's NIAH accuracy [exact 95%] and the
    card's reading of the recipes."""
    return pd.DataFrame(
        {
            "model": table["model"],
            "best recipe": table["best recipe"],
            "highest recipe NIAH % [95%]": [
                _row_ci(r, "highest recipe NIAH %", "highest recipe NIAH 95% lo", "highest recipe NIAH 95% hi")
                for _, r in table.iterrows()
            ],
            "softmax NIAH % [95%]": [
                _row_ci(r, "softmax NIAH %", "softmax NIAH 95% lo", "softmax NIAH 95% hi") for _, r in table.iterrows()
            ],
            "reading": table["recipe reading"],
        }
    )


def _heads_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: its heads per type and the mean first-token mass of the sink-typed ones."""
    shown = table[["model", *(f"{t} heads" for t in TYPES)]].copy()
    shown[SINK_MASS] = [_number(v, 3) for v in table[SINK_MASS]]
    return shown


def _length_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: the unsafe % at the shortest and longest prompt length and the length verdict; xi_hat_Lambda
    [95%] inside and past the window and the multiplier m at its target n."""
    lines = []
    for _, r in table.iterrows():
        line = {"model": r["model"]}
        for end in ("shortest", "longest"):
            line[f"unsafe % at the {end} L"] = _at(_number(r[f"unsafe % at the {end} L"], 1), "L", r[f"{end} L"])
        line["length verdict"] = r["length verdict"]
        for part in ("inside", "past"):
            stem = f"xi_hat_Lambda {part} the window"
            line[f"xi_hat_Lambda {part} [95%]"] = _row_ci(r, stem, f"{stem} 95% lo", f"{stem} 95% hi", 3)
        m = _row_ci(r, "multiplier m", "multiplier m at xi_hat's 95% lo", "multiplier m at xi_hat's 95% hi", 3)
        line["multiplier m [at xi_hat's 95%]"] = _at(m, "n", r["multiplier target n"])
        lines.append(line)
    return pd.DataFrame(lines)


def _ablation_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: the largest K's top-K change in NIAH accuracy, whether it is decisive, and the finding's verdict."""
    return pd.DataFrame(
        {
            "model": table["model"],
            "top-K delta pp": [
                _at(_number(pp, 1), "K", k) for pp, k in zip(table["top-K delta pp"], table["largest ablation K"])
            ],
            "decisive": [MISSING if _missing(d) else "yes" if d else "no" for d in table["top-K decisive"]],
            "verdict": table["ablation verdict"],
        }
    )


def _figure(cards: list[Card], folder: Path) -> None:
    """The cross-model figure: each card's unsafe % at p = 2, b = 0 per suite with its 95% interval beside
    ``TABLE_1``'s published values at p = 2 (L = 4096), each model labelled by the last part of its name (``slugs``)."""
    names = slugs([c.model for c in cards])
    measured = [
        {"model": name, "suite": suite, "unsafe %": pct, "unsafe lo": lo, "unsafe hi": hi}
        for name, card in zip(names, cards)
        for suite, cells in _by_suite(card, "0").items()
        for pct, lo, hi in [cells.get(2, (None, None, None))]
        if not _missing(pct)
    ]
    published = [
        {"model": line.model, "suite": line.suite, "unsafe %": line.unsafe[0]}
        for line in TABLE_1
        if line.where == "Table 1"
    ]
    columns = ["model", "suite", "unsafe %", "unsafe lo", "unsafe hi"]
    numbers = {c: float for c in columns[2:]}  # a null bound (fewer than two prompts) as NaN
    plot_unsafe_beside_published(
        pd.DataFrame(measured, columns=columns).astype(numbers), pd.DataFrame(published), folder / FIGURE
    )


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


def sections(cards: list[Card], command: str | None = None) -> list[Section]:
    """The page's two sections: the substitution screen across models (Table 1's layout, beside its published
    lines, and the figure), and the recipe, heads, length, temperature and ablation panels across models.
    ``command``: the command that wrote the page (``attnlab compare``), where not the cards' own."""
    made, warnings = _setting(cards)
    plan = cards[0].budget or {}
    seed = MISSING if cards[0].seed is None else cards[0].seed
    notes = (
        f"budget {plan.get('name', MISSING)} ({plan.get('about', MISSING)}), seed {seed}; "
        "every number unrounded, with its interval, is in compare.csv; '-': the card holds no such value (a panel "
        "not read, or a card written before the panel existed)",
    )
    if command is not None:
        notes += (f"the cards themselves are made by {made}",)
    command = command or made
    screen = cite("Polynomial Concentration", "Table 1, §5.5")
    table1 = cite("Polynomial Concentration", "Table 1")
    return [
        Section(
            study="card-compare-screen",
            title="Substitution screen across models",
            source=screen,
            question="How often is a row polynomial-unsafe (S_p >= 1, over active rows) in each model, per audited "
            "suite, b = 0 or b_auto and p = 2, 4, 8, 16, with its 95% interval over prompts, and where does it sit "
            f"among the four models of {table1}? One line per model and suite as in {table1}: a screen, not a "
            "guarantee.",
            command=command,
            tables=(
                Table("compare_models", "the models; card: each model's own page, with its findings and figures"),
                Table(
                    "compare_table1",
                    f"{table1}'s shape: unsafe % of active rows at b = 0 [95% interval over prompts], each card's "
                    f"lines first, then the published lines of {table1} (no interval published; L = 4096 is past "
                    "Pythia-1.4b's 2048-token training length, and Table 1's note gives its in-distribution line at "
                    "L = 1024; Table 1 shows p = 2, 4, 8 only)",
                ),
                Table("compare_unsafe", "unsafe % of active rows at b = b_auto [95% interval over prompts]"),
            ),
            figures=(
                Figure(
                    FIGURE,
                    "unsafe % of active rows at p = 2, b = 0 per suite: each card's model (filled, with its 95% "
                    f"interval over prompts, labelled by the last part of its name) beside the four models of {table1} "
                    "(hollow grey markers, labelled published; L = 4096, no interval published). A card reads its "
                    "budget's prompts, far shorter than L = 4096 at the quick budget: a placement, not a replication",
                ),
            ),
            notes=notes,
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
            tables=(
                Table("compare_recipes", "recipes: the best zero-shot recipe against softmax on NIAH"),
                Table("compare_heads", "heads per type"),
                Table("compare_length", "length and temperature"),
                Table("compare_ablation", "ablation: the largest K's top-K heads"),
            ),
            notes=notes,
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
    command: str | None = None,
) -> Path:
    """Write compare.csv/.md (``compare``), the page's narrow tables, the cross-model figure and the page to
    ``page``. ``cards``: Cards, card dicts or card folders; ``links``: per card, its own page relative to ``page``
    (None: a folder's index.html, none for a Card or dict); ``shown``: the folder the page names instead of
    ``folder`` (where a staged run moves its files); ``command``: the command that wrote the page, where not the
    cards' own ``attnlab card``."""
    folder, page = Path(folder), Path(page)
    data = _cards(cards)
    if links is None:
        links = [
            None if isinstance(c, (Card, dict)) else os.path.relpath(Path(c) / "index.html", page.parent) for c in cards
        ]
    elif len(links) != len(data):
        raise CompareError(f"links takes one per card ({len(data)}), got {len(links)}")
    table = compare(data)
    shown_tables = {
        "compare": table,
        "compare_models": _models_table(data, table, list(links)),
        "compare_table1": table_1(data),
        "compare_unsafe": _auto_table(data),
        "compare_recipes": _recipes_table(table),
        "compare_heads": _heads_table(table),
        "compare_length": _length_table(table),
        "compare_ablation": _ablation_table(table),
    }
    for stem in TABLES:
        write_table(folder / stem, shown_tables[stem])
    _figure(data, folder)
    text = render(
        [(s, folder) for s in sections(data, command)], title=f"attnlab card: {len(data)} models", recomputed=False
    )
    if shown is not None:  # the page reads its files from the staging folder but must name where they will be
        text = text.replace(escape(str(folder)), escape(str(shown)))
    for link in filter(None, links):  # the table shows each card's page as text; here it becomes its link
        cell = f'<td class="text">{escape(link)}</td>'
        text = text.replace(cell, f'<td class="text"><a href="{escape(link)}">{escape(link)}</a></td>')
    text = text.replace("</style>", f"{WRAP}</style>", 1)  # the page's own style ends there
    return write_text(page, text)
