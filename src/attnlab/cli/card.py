"""``attnlab card MODEL [MODEL ...]``: one page on a checkpoint's attention (``attnlab.card``), with card.json beside
it; given several models, one card folder each and a page comparing them (``cards.compare``)."""

from __future__ import annotations

import gc
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from attnlab import options
from attnlab.cli.base import command
from attnlab.cli.checkpoint import output
from attnlab.devices import Placement
from attnlab.options import MODEL_HELP, option
from attnlab.progress import say

if TYPE_CHECKING:
    from attnlab.cards.types import Card

# What --format writes: the card's FORMATS (cards.types), card.json always, as the comparison page reads it.
OUTPUTS = {"html": ("json", "html", "md"), "md": ("json", "md")}


def _budgets() -> list[str]:
    from attnlab.cards.build import PLANS

    return list(PLANS)


@dataclass(frozen=True)
class CardConfig(Placement):
    """What ``attnlab card`` takes besides its output folder."""

    models: tuple[str, ...] = option(
        help=f"one or more models, each {MODEL_HELP}, with its tokenizer; with two or more, each card goes into "
        "DIR/<name>/ (the model's last path component) and DIR/index.html compares them",
        positional=True,
        metavar="MODEL",
    )
    budget: str = option(
        "quick",
        "quick: short prompts, 8 per suite (measured on 2 CPU cores: SmolLM2-135M 1.9 min idle; Gemma 3 270M 9.3 "
        "min at load 2-3.5, its first GGUF conversion included; a 24-layer 0.5B Qwen2 GGUF 4.7 min idle, its "
        "conversion included, benchmarks/card_large.py); standard: 40 prompts per suite on 300-token NIAH and "
        "512-token induction prompts (SmolLM2-135M 11.9 min idle); time grows about with parameters x prompt tokens",
        choices=_budgets,
    )
    seed: int = option(0, "prompt seed", metavar="N", type=options.seed)
    format: str = option(
        "html",
        "html: the page (index.html with its tables and figures), card.json and card.md; md: card.md (a section for "
        "a Hugging Face model card's README.md, YAML front matter included) with the image it shows, and card.json",
        choices=lambda: list(OUTPUTS),
    )
    target_length: int | None = option(
        None,
        "context length n at which the temperature panel gives the logit multiplier m(n; xi_hat) (Hayase & "
        "Karakida 2026 App. A.2); default: twice the model's window",
        metavar="N",
        type=options.count,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        from attnlab.analyses.run import check_count
        from attnlab.cards.build import CardError

        check_count("seed", self.seed, 0)
        if self.format not in OUTPUTS:
            raise CardError(f"format takes {' or '.join(map(repr, OUTPUTS))}, got {self.format!r}")
        if self.target_length is not None:
            check_count("target_length", self.target_length, 2)
        if isinstance(self.models, str) or not self.models:
            raise CardError(f"MODEL takes one or more model names, got {self.models!r}")
        seen = set()
        for model in self.models:
            if os.path.normpath(model) in seen:  # ckpt and ./ckpt/ are one model
                raise CardError(f"MODEL {model!r} is given twice; name each model once")
            seen.add(os.path.normpath(model))

    def settings(self, model: str | None = None) -> dict:
        """What config.json records: of one card (``model``, as one model's run always has), or of the comparison."""
        rest = {k: v for k, v in asdict(self).items() if k != "models"}
        return {"model": model, **rest} if model is not None else {"models": list(self.models), **rest}


def run(cfg: CardConfig, out: str | Path, *, overwrite: bool = False, progress: bool = True) -> dict:
    """One model: load it, compute its card and write card.json, index.html, the panels' tables and the head-type
    map into ``out``; returns the card (a ``cards.types.Card``) and the paths. Two or more: ``run_several``. Staged
    either way: a failed run leaves the folder as it was."""
    from attnlab.analyses.run import staged_output
    from attnlab.io import check_output, check_writable, locked

    if len(cfg.models) > 1:
        return run_several(cfg, out, overwrite=overwrite, progress=progress)
    (name,) = cfg.models
    settings = cfg.settings(name)
    _plan(cfg)
    check_writable(out)
    with locked(out):  # from the check through the write: a second card into ``out`` is refused at once
        check_output(out, settings, overwrite=overwrite, what="attnlab card")
        card = _card(cfg, name, progress)
        say(f"writing the card's page, card.json and card.md into {out}")
        with staged_output(out) as stage:
            written = _write_card(card, cfg, settings, stage, Path(out))
    final = Path(out)
    return {"card": card, "paths": {f: final / path.name for f, path in written.items()}}


def run_several(cfg: CardConfig, out: str | Path, *, overwrite: bool = False, progress: bool = True) -> dict:
    """Each model's card into ``out``/<slug>/ (as one model's run writes it), computed one model at a time, and
    the comparison (``cards.compare``) as ``out``/index.html, compare.csv/.md and config.json; staged: a
    failed run leaves the folder as it was. Returns the cards (``cards.types.Card``) by slug, the comparison table
    and the paths."""
    from attnlab.analyses.run import staged_output
    from attnlab.cards.compare import compare, slugs, write_compare_page
    from attnlab.io import check_output, check_writable, locked, swap_in, write_json
    from attnlab.loading.load import resolve_for

    settings = cfg.settings()
    _plan(cfg)
    check_writable(out)
    final = Path(out)
    with locked(out):  # from the check through the write: a second card into ``out`` is refused at once
        check_output(out, settings, overwrite=overwrite, what="attnlab card")
        for name in cfg.models:  # a mistyped last model is named before the first one's card is computed
            resolve_for(name, cfg.device, cfg.dtype, log=print)
        names = slugs(cfg.models)
        cards = {}
        for i, (slug, name) in enumerate(zip(names, cfg.models), 1):
            print(f"model {i}/{len(names)}: {name}")
            cards[slug] = _card(cfg, name, progress)
        say(f"writing {len(names)} cards and their comparison into {out}")
        with staged_output(out) as stage:
            for slug, name in zip(names, cfg.models):
                _write_card(cards[slug], cfg, cfg.settings(name), stage / slug, final / slug)
            links = [f"{slug}/{'index.html' if 'html' in OUTPUTS[cfg.format] else 'card.md'}" for slug in names]
            write_compare_page(list(cards.values()), stage, stage / "index.html", links=links, shown=final)
            write_json(stage / "config.json", {**settings, "folders": dict(zip(names, cfg.models))})
            # staged_output moves files into place, but a folder cannot be renamed over a non-empty one (a rerun's)
            for slug in names:
                swap_in(stage / slug, final / slug)
    return {
        "cards": cards,
        "table": compare(list(cards.values())),
        "paths": {"page": final / "index.html", "table": final / "compare.csv"}
        | {slug: final / slug / "card.json" for slug in names},
    }


def _plan(cfg: CardConfig) -> None:
    from attnlab.cards.build import plan

    plan(cfg.budget)  # an unknown budget is refused before any model loads


def _card(cfg: CardConfig, name: str, progress: bool) -> Card:
    """The card of model ``name`` (as ``attnlab.card`` checks and builds it, typed), with its provenance; the model
    is freed on return (gc, the CUDA cache), so a comparison holds one model at a time."""
    import torch

    from attnlab.analyses.run import load, model_record
    from attnlab.cards.build import build, checked_plan

    model, tokenizer = load(name, cfg.device, cfg.dtype)
    try:
        plan = checked_plan(
            model, tokenizer, budget=cfg.budget, seed=cfg.seed, name=name, target_length=cfg.target_length
        )
        card = build(model, tokenizer, plan, seed=cfg.seed, progress=progress, name=name, target=cfg.target_length)
        # model_record reads only the run's model name
        record = json.loads(json.dumps(model_record(SimpleNamespace(model=name), model), default=str))
        card = replace(card, provenance=record)
    finally:
        del model, tokenizer
        gc.collect()  # weights held in reference cycles would otherwise wait for the next collection
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    return card


def _write_card(card: Card, cfg: CardConfig, settings: dict, folder: Path, shown: Path) -> dict[str, Path]:
    """The card in ``cfg.format``'s files (``Card.save``) and config.json into ``folder``, the page naming ``shown``;
    returns the path written per format."""
    from attnlab.io import write_json

    written = card.save(folder, OUTPUTS[cfg.format], shown=shown)
    write_json(folder / "config.json", {**settings, "b_auto": card.b_auto})
    return written


def _recipes(best) -> str:
    """The recipe panel's reading: a recipe is named best only when it is ahead of every other (a schema-1 card,
    written before recipes were compared, has no reading)."""
    return f"recipes: {best.reading or 'not compared (a card of schema 1)'}"


@command(
    "card",
    "one page on the attention of one or more checkpoints: substitution, heads, ablation, length, temperature",
    "Audit NIAH and induction prompts at p = 2, 4, 8, 16 and b = 0, b_auto; screen the ReLU recipes by their "
    "measured-safe share (Polynomial Concentration §5.5: a screen, not a guarantee); score a few zero-shot recipes "
    "against softmax on NIAH; type every head and measure its first-token mass; ablate the heads of highest S_2 "
    "against random and bottom ones (§5.4); read the unsafe share and entropy against prompt length (App. C) and "
    "xi_hat_Lambda inside and past the window with the multiplier it suggests (Hayase & Karakida 2026 §4.5, App. "
    "A.2), each finding with its rule and null control. Writes card.json and index.html. "
    "Given two or more models, computes their cards one model at a time, each into DIR/<name>/, and writes a page "
    "comparing them, one row per model as Polynomial Concentration Table 1 (DIR/index.html, compare.csv).",
    CardConfig,
    output("card"),
)
def card_command(cfg: CardConfig, out) -> int:
    result = run(cfg, out.out, overwrite=out.overwrite, progress=not out.no_progress)
    if len(cfg.models) > 1:
        print(f"cards of {len(cfg.models)} models (budget {cfg.budget})")
        for slug, card in result["cards"].items():
            print(f"  {slug}: {card.model}; b_auto = {card.b_auto:.6g}; {_recipes(card.substitution.best)}")
    else:
        card = result["card"]
        best = card.substitution.best
        print(f"card of {cfg.models[0]} (budget {cfg.budget}); b_auto = {card.b_auto:.6g}")
        for line in card.substitution.unsafe:
            if line["p"] == 2:
                print(f"  {line['suite']}, b = {line['b']}, p = 2: {_pct(line['unsafe %'])} unsafe")
        print(
            f"  {_recipes(best)}; the highest, {best.recipe}: {best.accuracy:.1f}% [{best.lo:.1f}, {best.hi:.1f}] "
            f"against softmax {best.softmax:.1f}% [{best.softmax_lo:.1f}, {best.softmax_hi:.1f}] on NIAH"
        )
        heat = card.temperature
        parts = [(f"temperature {p}", getattr(heat, p)) for p in ("inside", "past")]
        for panel, finding in (
            ("ablation", card.ablation.finding),
            ("length", card.length.finding),
            *((panel, fit.finding) for panel, fit in parts if fit is not None),
        ):
            print(f"  {panel}: {finding.verdict}")
    print("wrote:")
    for path in result["paths"].values():
        print(f"  {path}")
    return 0


def _pct(value) -> str:
    return "-" if value is None else f"{value:.1f}%"
