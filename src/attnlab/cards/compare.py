"""Several checkpoints' cards side by side: one row per model, as Polynomial Concentration Table 1 lays them out.

``compare(cards)`` reads the numbers from each card's data (``attnlab.card`` / card.json) and
``write_compare_page`` writes them as compare.csv/.md and one page; both take card dicts or the folders
``attnlab card`` wrote, so the page can be rebuilt from existing folders. Rendering only: nothing here runs a
model. The length, temperature and ablation panels are absent from cards written before those panels existed,
and any value may be null: both read as '-'.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Sequence
from html import escape
from pathlib import Path

import pandas as pd

from attnlab.diagnostics.heads import TYPES
from attnlab.errors import Error
from attnlab.io import write_table, write_text
from attnlab.papers import cite
from attnlab.report.html import render
from attnlab.report.sections import Section, Table

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


def read_card(folder: str | os.PathLike) -> dict:
    """The card.json ``attnlab card`` wrote into ``folder``; a CompareError naming the folder otherwise."""
    path = Path(folder) / "card.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CompareError(
            f"{path}: not a readable card.json ({exc.__class__.__name__}); pass a folder attnlab card wrote"
        ) from None


def _cards(cards: Sequence[dict | str | os.PathLike]) -> list[dict]:
    if isinstance(cards, (dict, str, os.PathLike)) or not cards:
        raise CompareError("compare takes a list of one or more cards (card dicts or card folders)")
    data = [c if isinstance(c, dict) else read_card(c) for c in cards]
    for card, given in zip(data, cards):
        missing = [k for k in NEEDED if not isinstance(card, dict) or k not in card]
        if missing:
            raise CompareError(
                f"{given if not isinstance(given, dict) else 'a card dict'} is not a card: it "
                f"lacks {', '.join(missing)}"
            )
    return data


def _value(value):
    """A card's value as the table shows it: null (and NaN) as '-'."""
    return MISSING if value is None or (isinstance(value, float) and value != value) else value


def _get(data, *keys):
    """``data[keys[0]][keys[1]]...``, None where a key is absent or a step is null (older cards lack panels)."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _unsafe(card: dict) -> dict:
    """``{suite} b={b} p={p}`` -> (unsafe %, lo, hi), in the card's order."""
    return {
        f"{u['suite']} b={u['b']} p={u['p']:g}": (u.get("unsafe %"), u.get("unsafe lo"), u.get("unsafe hi"))
        for u in _get(card, "substitution", "unsafe") or []
    }


def _row(card: dict) -> dict:
    best = _get(card, "substitution", "best") or {}
    heads = pd.DataFrame(card["heads"], columns=["head_type", "first-token mass"])
    sinks = heads.loc[heads["head_type"] == "sink", "first-token mass"].dropna()
    lengths = sorted(_get(card, "length", "rows") or [], key=lambda r: r["L"])
    ablation = sorted(_get(card, "ablation", "rows") or [], key=lambda r: r["k"])
    heat = card.get("temperature") or {}
    m = heat.get("multiplier") or {}
    row = {
        "model": card["model"],
        "model_type": card["model_type"],
        "layers x heads": f"{card['layers']} x {card['heads_per_layer']}",
        "b_auto": card["b_auto"],
    }
    for key, (pct, lo, hi) in _unsafe(card).items():
        row |= {f"{key} unsafe %": pct, f"{key} lo": lo, f"{key} hi": hi}
    row |= {
        "best recipe": best.get("recipe"),
        "best %": best.get("accuracy %"),
        "best lo": best.get("lo"),
        "best hi": best.get("hi"),
        "softmax %": best.get("softmax %"),
        "softmax lo": best.get("softmax lo"),
        "softmax hi": best.get("softmax hi"),
        **{f"{t} heads": int((heads["head_type"] == t).sum()) for t in TYPES},
        "sink mass": float(sinks.mean()) if len(sinks) else None,
    }
    for end, at in (("short", 0), ("long", -1)):
        line = lengths[at] if lengths else {}
        row |= {f"length L {end}": line.get("L"), f"length unsafe % {end}": line.get("unsafe %")}
    row["length verdict"] = _get(card, "length", "finding", "verdict")
    for part in ("inside", "past"):
        fit = heat.get(part) or {}
        row |= {f"xi {part}": fit.get("xi_hat"), f"xi {part} lo": fit.get("lo"), f"xi {part} hi": fit.get("hi")}
    row |= {"m target": m.get("target"), "m": m.get("m"), "m lo": m.get("m lo"), "m hi": m.get("m hi")}
    last = ablation[-1] if ablation else {}
    row |= {"ablation K": last.get("k"), "top-K pp": last.get("top pp"), "decisive": last.get("decisive")}
    return row


def compare(cards: Sequence[dict | str | os.PathLike]) -> pd.DataFrame:
    """One row per card (a card dict, or a folder ``attnlab card`` wrote): model, model_type, layers x heads,
    b_auto; the unsafe % of active rows with its 95% interval per audited suite, b (0, auto) and p; the best
    zero-shot recipe's NIAH accuracy and softmax's with their Wilson 95% intervals; heads per type (each head
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


def _setting(cards: list[dict]) -> tuple[str, tuple[str, ...]]:
    """The command that makes these cards together and, where their budgets or seeds differ, the warning."""
    made = {(_get(c, "budget", "name"), c.get("seed")) for c in cards}
    models = [str(c["model"]) for c in cards]
    if len(made) > 1:
        shown = "; ".join(f"{c['model']}: budget {_get(c, 'budget', 'name')}, seed {c.get('seed')}" for c in cards)
        warning = f"the cards were made under different budgets or seeds ({shown}): their numbers differ in kind"
        return shlex.join(["attnlab", "card", *models]), (warning,)
    ((budget, seed),) = made
    flags = []
    for flag, value in (("--budget", budget), ("--seed", seed)):
        if value is not None:  # only a hand-made card dict lacks them
            flags += [flag, str(value)]
    return shlex.join(["attnlab", "card", *models, *flags]), ()


def sections(cards: list[dict]) -> list[Section]:
    """The page's two sections: the substitution screen across models (Table 1's layout), and the recipe, heads,
    length, temperature and ablation panels across models."""
    command, warnings = _setting(cards)
    plan = cards[0].get("budget") or {}
    budget = (
        f"budget {plan.get('name', MISSING)} ({plan.get('about', MISSING)}), seed {cards[0].get('seed', MISSING)}; "
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
            question="Per model: the best zero-shot recipe's NIAH accuracy against softmax's (Wilson 95%); heads "
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
    cards: Sequence[dict | str | os.PathLike],
    folder: str | os.PathLike,
    page: str | os.PathLike,
    *,
    links: Sequence[str | None] | None = None,
    shown: str | os.PathLike | None = None,
) -> Path:
    """Write compare.csv/.md (``compare``), the page's tables and the page to ``page``. ``cards``: card dicts or
    card folders; ``links``: per card, its own page relative to ``page`` (None: a folder's index.html, none for a
    dict); ``shown``: the folder the page names instead of ``folder`` (where a staged run moves its files)."""
    folder, page = Path(folder), Path(page)
    data = _cards(cards)
    if links is None:
        links = [None if isinstance(c, dict) else os.path.relpath(Path(c) / "index.html", page.parent) for c in cards]
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
