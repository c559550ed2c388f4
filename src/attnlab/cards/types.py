"""The card's typed results: ``Card`` and one frozen dataclass per panel, as ``cards.build`` and ``cards.panels``
give them and ``cards.page`` and ``cards.compare`` read them.

Every value is held as card.json holds it (plain ints and floats, NaN as None, tables as tuples of records keyed by
their column names), so ``Card.to_dict()`` is card.json's content and ``Card.from_dict(card.to_dict())`` gives an
equal Card. Findings are ``attnlab.findings.Finding`` objects, turned into dicts only by ``to_dict``.

card.json carries ``"schema": SCHEMA``; a card written before the schema was versioned reads as schema 1, one
newer than ``SCHEMA`` is refused (``CardError``). The length, temperature and ablation panels are absent from cards
written before those panels existed (None here, and absent from ``to_dict``), and any value may be null. Schema 2
added the trained-model check (``trained``), the recipe reading (``best``'s ahead, reading and power) and the
length panel's reading past the window (``past_rows``, ``past``); a schema-1 card reads with them None or empty.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from attnlab.errors import Error
from attnlab.findings.finding import Finding
from attnlab.io import write_json
from attnlab.registry import Registry

SCHEMA = 2  # the card.json schema this code writes and the newest it reads
# card.json's JSON Schema (draft 2020-12), shipped with the package for readers in any language
SCHEMA_FILE = Path(__file__).with_name("card.schema.json")

Record = dict[str, Any]  # one row of a panel's table, keyed by its column names as card.json holds them


class CardError(Error, ValueError):
    """A card asked for with settings it cannot run (an unknown budget), or a card.json that cannot be read (not a
    card, or a schema newer than this code reads)."""


class CardSchemaError(CardError):
    """A card.json whose schema this code does not read (newer than ``SCHEMA``, or not a positive int)."""


def jsonable(value):
    """Numbers as plain floats and ints (NaN as None), tuples as lists, a fresh copy of every dict and list, so
    card.json is strict JSON."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def as_records(rows) -> tuple[Record, ...]:
    """A table (a DataFrame, or records) as card.json holds it: one JSON-ready dict per row."""
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows or ())
    return tuple(jsonable(rows))


def as_finding(value: Finding) -> Finding:
    """``value`` as card.json holds it (numbers plain, NaN as None): what reading the card back gives."""
    return Finding.from_dict(jsonable(asdict(value)))


def _finding(data) -> Finding | None:
    return None if data is None else Finding.from_dict(data)


def _ints(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values or ())


class _Flat:
    """A dataclass of scalars whose card.json keys are its field names, but those ``KEYS`` renames."""

    KEYS: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict:
        return {self.KEYS.get(f.name, f.name): jsonable(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping | None):
        """None for a null; a key an older card lacks reads as None."""
        if data is None:
            return None
        return cls(**{f.name: data.get(cls.KEYS.get(f.name, f.name)) for f in fields(cls)})


@dataclass(frozen=True)
class BestRecipe(_Flat):
    """The recipe other than softmax with the highest NIAH accuracy (%) beside softmax's, each with its exact
    (Clopper-Pearson) 95% interval (lo, hi; softmax_lo, softmax_hi); delta_pp: the difference; overlap: whether the
    intervals overlap; ahead: whether it is ahead of every other recipe (``cards.rules.RECIPE_RULE``: only then is
    it the best); reading: the panel's sentence (best, tied, or no recipe preserves NIAH); power: the rule's
    simulated power at this run's sizes (``cards.calibration.recipe``)."""

    KEYS: ClassVar[dict[str, str]] = {
        "accuracy": "accuracy %",
        "softmax": "softmax %",
        "softmax_lo": "softmax lo",
        "softmax_hi": "softmax hi",
        "delta_pp": "delta pp",
    }

    recipe: str | None
    map: str | None
    accuracy: float | None
    lo: float | None
    hi: float | None
    softmax: float | None
    softmax_lo: float | None
    softmax_hi: float | None
    delta_pp: float | None
    overlap: bool | None
    ahead: bool | None = None
    reading: str | None = None
    power: float | None = None


@dataclass(frozen=True)
class LossCheck(_Flat):
    """Whether the model is trained: its mean next-token loss (nats) on ``tokens`` tokens of the bundled novel
    against the uniform predictor's log V (``uniform``); trained when loss < ratio x uniform."""

    tokens: int | None
    loss: float | None
    uniform: float | None
    ratio: float | None
    trained: bool | None


@dataclass(frozen=True)
class Slope(_Flat):
    """A slope of unsafe % on log2 L (pp per doubling) with its 95% interval [lo, hi], and its reading in words."""

    slope: float | None
    lo: float | None
    hi: float | None
    words: str | None


@dataclass(frozen=True)
class SubstitutionPanel:
    """unsafe: the unsafe % of active rows per suite, b and p with its 95% interval over prompts; screen: the
    screen's call per ReLU or sigmoid recipe and suite; recipes: NIAH accuracy per recipe with its exact interval;
    best: the best zero-shot recipe against softmax; source: the screen's citation."""

    unsafe: tuple[Record, ...]
    screen: tuple[Record, ...]
    recipes: tuple[Record, ...]
    best: BestRecipe | None
    source: str | None

    def to_dict(self) -> dict:
        return {
            "unsafe": jsonable(self.unsafe),
            "screen": jsonable(self.screen),
            "recipes": jsonable(self.recipes),
            "best": None if self.best is None else self.best.to_dict(),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> SubstitutionPanel:
        return cls(
            unsafe=as_records(data.get("unsafe")),
            screen=as_records(data.get("screen")),
            recipes=as_records(data.get("recipes")),
            best=BestRecipe.from_dict(data.get("best")),
            source=data.get("source"),
        )


@dataclass(frozen=True)
class AblationPanel:
    """``attnlab ablate``'s K sweep: ``recipe`` given to the top-, bottom- and random-K heads ranked by ``rank``
    (``ranked`` heads); rows: per K (decisive flag, App. I); cells: per K, subset and draw; top: the heads of
    highest median S_2; finding: Polynomial Concentration §5.4's claim."""

    recipe: str
    rank: str
    ranked: int
    rows: tuple[Record, ...]
    cells: tuple[Record, ...]
    top: tuple[Record, ...]
    finding: Finding | None

    def to_dict(self) -> dict:
        return {
            "recipe": self.recipe,
            "rank": self.rank,
            "ranked": self.ranked,
            "rows": jsonable(self.rows),
            "cells": jsonable(self.cells),
            "top": jsonable(self.top),
            "finding": None if self.finding is None else asdict(self.finding),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> AblationPanel:
        return cls(
            recipe=data["recipe"],
            rank=data["rank"],
            ranked=data["ranked"],
            rows=as_records(data.get("rows")),
            cells=as_records(data.get("cells")),
            top=as_records(data.get("top")),
            finding=_finding(data.get("finding")),
        )


@dataclass(frozen=True)
class LengthPanel:
    """The unsafe % (S_p >= 1 at b, on ``suite`` prompts, ``prompts`` per L) and the median row entropy per prompt
    length L (rows) inside the model's ``window``, with the flat-in-L finding (Polynomial Concentration App. C); cut:
    the plan's lengths past the window left unread (a model without RoPE); past_rows: those read past the window,
    and past: their slope, described beside Pythia's past-window rise."""

    suite: str
    b: str
    p: int
    window: int | None
    prompts: int
    rows: tuple[Record, ...]
    finding: Finding | None
    cut: tuple[int, ...] = ()
    past_rows: tuple[Record, ...] = ()
    past: Slope | None = None

    def to_dict(self) -> dict:
        return {
            "suite": self.suite,
            "b": self.b,
            "p": self.p,
            "window": self.window,
            "prompts": self.prompts,
            "rows": jsonable(self.rows),
            "finding": None if self.finding is None else asdict(self.finding),
            "cut": list(self.cut),
            "past_rows": jsonable(self.past_rows),
            "past": None if self.past is None else self.past.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> LengthPanel:
        return cls(
            suite=data["suite"],
            b=data["b"],
            p=data["p"],
            window=data.get("window"),
            prompts=data["prompts"],
            rows=as_records(data.get("rows")),
            finding=_finding(data.get("finding")),
            cut=_ints(data.get("cut")),
            past_rows=as_records(data.get("past_rows")),
            past=Slope.from_dict(data.get("past")),
        )


@dataclass(frozen=True)
class Exponent(_Flat):
    """An exponent xi_hat with its 95% interval [lo, hi]."""

    xi_hat: float | None
    lo: float | None
    hi: float | None


@dataclass(frozen=True)
class TemperatureFit:
    """xi_hat_Lambda at the context lengths ``n`` (``rope``: plain, or dynamic past the window) with its half-IQR
    and 95% interval over documents [lo, hi] (Hayase & Karakida 2026 §4.5.1); null: the i.i.d. null's exponent;
    per_n: the bucket means per n; windowed: what sliding-window layers do to the buckets (None without them);
    finding: the temperature study's real-part claim."""

    n: tuple[int, ...]
    rope: str
    xi_hat: float | None
    half_iqr: float | None
    lo: float | None
    hi: float | None
    null: Exponent | None
    per_n: tuple[Record, ...]
    windowed: str | None
    finding: Finding | None

    def to_dict(self) -> dict:
        return {
            "n": list(self.n),
            "rope": self.rope,
            "xi_hat": self.xi_hat,
            "half_iqr": self.half_iqr,
            "lo": self.lo,
            "hi": self.hi,
            "null": None if self.null is None else self.null.to_dict(),
            "per_n": jsonable(self.per_n),
            "windowed": self.windowed,
            "finding": None if self.finding is None else asdict(self.finding),
        }

    @classmethod
    def from_dict(cls, data: Mapping | None) -> TemperatureFit | None:
        if data is None:
            return None
        return cls(
            n=_ints(data.get("n")),
            rope=data["rope"],
            xi_hat=data.get("xi_hat"),
            half_iqr=data.get("half_iqr"),
            lo=data.get("lo"),
            hi=data.get("hi"),
            null=Exponent.from_dict(data.get("null")),
            per_n=as_records(data.get("per_n")),
            windowed=data.get("windowed"),
            finding=_finding(data.get("finding")),
        )


@dataclass(frozen=True)
class Multiplier(_Flat):
    """m(n; xi) = max(1, log n / log n_train)^xi at n = ``target`` for xi = xi_hat_Lambda (``xi``) and its
    interval's ends (m_lo, m_hi) (Hayase & Karakida 2026 App. A.2)."""

    KEYS: ClassVar[dict[str, str]] = {"m_lo": "m lo", "m_hi": "m hi"}

    target: int | None
    xi: float | None
    m: float | None
    m_lo: float | None
    m_hi: float | None


@dataclass(frozen=True)
class TemperaturePanel:
    """xi_hat_Lambda inside the model's training ``window`` and past it (None where not read: ``past_reason``
    says why), and the multiplier the fitted exponent suggests at the target length."""

    window: int | None
    inside: TemperatureFit | None
    past: TemperatureFit | None
    past_reason: str | None
    multiplier: Multiplier | None

    def to_dict(self) -> dict:
        return {
            "window": self.window,
            "inside": None if self.inside is None else self.inside.to_dict(),
            "past": None if self.past is None else self.past.to_dict(),
            "past_reason": self.past_reason,
            "multiplier": None if self.multiplier is None else self.multiplier.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> TemperaturePanel:
        return cls(
            window=data.get("window"),
            inside=TemperatureFit.from_dict(data.get("inside")),
            past=TemperatureFit.from_dict(data.get("past")),
            past_reason=data.get("past_reason"),
            multiplier=Multiplier.from_dict(data.get("multiplier")),
        )


@dataclass(frozen=True, repr=False)
class Card:
    """One checkpoint's card (card.json, schema ``SCHEMA``). model: as the commands name it; model_type, layers,
    heads_per_layer: the model's; budget: the plan as read (``cards.build.CardPlan`` as a dict); seed: every suite's
    prompt seed; b_auto: the bias calibrated once, by the first audit; heads: per (layer, head), its type, labels,
    first-token mass and median S_2; commands: the command reproducing each panel; provenance: the model's record
    (added by ``attnlab card``); trained: the trained-model check every finding about trained attention needs. A
    field an older card lacks is None, and absent from ``to_dict``.

    ``save(folder)`` writes it in every format of ``FORMATS`` (the page, card.json, card.md); ``to_json()`` is
    card.json's text."""

    SCHEMA: ClassVar[int] = SCHEMA

    model: str
    model_type: str | None
    layers: int
    heads_per_layer: int
    b_auto: float | None
    substitution: SubstitutionPanel
    heads: tuple[Record, ...]
    budget: dict[str, Any] | None = None
    seed: int | None = None
    ablation: AblationPanel | None = None
    length: LengthPanel | None = None
    temperature: TemperaturePanel | None = None
    commands: dict[str, str] | None = None
    provenance: dict[str, Any] | None = None
    trained: LossCheck | None = None

    def to_dict(self) -> dict:
        """card.json's content, "schema" first: a fresh JSON-ready dict."""
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "model": self.model,
            "model_type": self.model_type,
            "layers": self.layers,
            "heads_per_layer": self.heads_per_layer,
        }
        optional = {"budget": self.budget, "seed": self.seed}
        out |= {k: v for k, v in optional.items() if v is not None}
        out |= {"b_auto": self.b_auto, "substitution": self.substitution.to_dict(), "heads": self.heads}
        if self.trained is not None:
            out["trained"] = self.trained.to_dict()
        for key in ("ablation", "length", "temperature"):
            panel = getattr(self, key)
            if panel is not None:
                out[key] = panel.to_dict()
        optional = {"commands": self.commands, "provenance": self.provenance}
        out |= {k: v for k, v in optional.items() if v is not None}
        return jsonable(out)

    def to_json(self) -> str:
        """card.json's text: ``to_dict`` as JSON, keys sorted, as ``save`` writes it."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def save(
        self, folder: str | os.PathLike, formats: Sequence[str] = ("json", "html", "md"), *, shown=None
    ) -> dict[str, Path]:
        """Write the card into ``folder`` (made if absent) in each of ``formats``, keys of ``FORMATS``: "json"
        (card.json), "html" (index.html with its tables and figures), "md" (card.md for a model's Hub README, with
        the image it names); ``shown``: the folder the page names instead of ``folder`` (where a staged run moves
        its files). Each file is written atomically. Returns the path written per format."""
        writers = [FORMATS.find(f) for f in formats]  # an unknown format is named before anything is written
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        return {f: writer(self, folder, shown) for f, writer in zip(formats, writers)}

    def __repr__(self) -> str:
        """The model, its shape, budget and b_auto, and each panel's label: what a notebook cell shows."""
        budget = (self.budget or {}).get("name", "-")
        b_auto = "-" if self.b_auto is None else f"{self.b_auto:.4g}"
        best = self.substitution.best
        labels = [f"recipes: {(best.reading or '-').split(':')[0] if best is not None else '-'}"]
        found = {"ablation": self.ablation, "length": self.length}
        labels += [f"{k}: {p.finding.verdict}" for k, p in found.items() if p is not None and p.finding is not None]
        heat = self.temperature
        for part in ("inside", "past"):
            fit = getattr(heat, part) if heat is not None else None
            if fit is not None and fit.finding is not None:
                labels.append(f"temperature {part}: {fit.finding.verdict}")
        return (
            f"Card({self.model!r}: {self.model_type or '-'}, {self.layers} layers x {self.heads_per_layer} heads, "
            f"budget {budget}, b_auto {b_auto}; {'; '.join(labels)})"
        )

    @classmethod
    def from_dict(cls, data: Mapping) -> Card:
        """The card a card.json holds (``json.loads`` of it). No "schema": a card written before the schema was
        versioned, read as schema 1; a schema newer than ``SCHEMA``, or data that is no card: a CardError."""
        if not isinstance(data, Mapping):
            raise CardError(f"a card is a JSON object, got {type(data).__name__}")
        schema = data.get("schema", 1)
        if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
            raise CardSchemaError(f"a card's schema is an int >= 1, got {schema!r}")
        if schema > SCHEMA:
            raise CardSchemaError(
                f"the card has schema {schema}, newer than this attnlab reads (schema {SCHEMA}): upgrade attnlab "
                "to read it"
            )
        try:
            return cls(
                model=data["model"],
                model_type=data["model_type"],
                layers=data["layers"],
                heads_per_layer=data["heads_per_layer"],
                b_auto=data["b_auto"],
                substitution=SubstitutionPanel.from_dict(data["substitution"]),
                heads=as_records(data["heads"]),
                budget=_copy(data.get("budget")),
                seed=data.get("seed"),
                ablation=_panel(AblationPanel, data.get("ablation")),
                length=_panel(LengthPanel, data.get("length")),
                temperature=_panel(TemperaturePanel, data.get("temperature")),
                commands=_copy(data.get("commands")),
                provenance=_copy(data.get("provenance")),
                trained=LossCheck.from_dict(data.get("trained")),
            )
        except KeyError as exc:
            raise CardError(f"not a card: it lacks {exc.args[0]!r}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise CardError(f"not a card: {exc}") from None


def _panel(kind, data):
    return None if data is None else kind.from_dict(data)


def _copy(data: Mapping | None):
    return None if data is None else jsonable(dict(data))


Writer = Callable[[Card, Path, "str | os.PathLike | None"], Path]
# The files a card is saved as, by the name ``attnlab card --format`` takes; each writer is registered beside its
# code (``cards.page``: html, ``cards.markdown``: md) and takes (card, folder, the folder the page names instead).
FORMATS: Registry[Writer] = Registry("card format")


@FORMATS.register("json")
def write_card_json(card: Card, folder: Path, shown=None) -> Path:
    """card.json: ``Card.to_dict``, valid under ``SCHEMA_FILE``."""
    return write_json(folder / "card.json", card.to_dict())
