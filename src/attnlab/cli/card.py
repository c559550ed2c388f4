"""``attnlab card MODEL``: one page on a checkpoint's attention (``attnlab.card``), with card.json beside it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import options
from ..options import MODEL_HELP, option
from .base import command
from .checkpoint import output


def _budgets() -> list[str]:
    from ..cards import PLANS

    return list(PLANS)


@dataclass(frozen=True)
class CardConfig:
    """What ``attnlab card`` takes besides its output folder."""

    model: str = option(help=f"{MODEL_HELP}, with its tokenizer", positional=True, metavar="MODEL")
    budget: str = option(
        "quick",
        "quick: minutes for a 135M model on 2 CPU cores (short prompts, 8 per suite); standard: the suites' "
        "default sizes, 40 prompts per suite",
        choices=_budgets,
    )
    seed: int = option(0, "prompt seed", metavar="N", type=options.seed)
    device: str = option("cpu", "cpu or cuda[:i]")
    dtype: str | None = option(
        None, "default: float32 on CPU, bfloat16 on a GPU that supports it", choices=("float32", "bfloat16", "float16")
    )

    def __post_init__(self) -> None:
        from ..commands.runs import check_count

        check_count("seed", self.seed, 0)


def run(cfg: CardConfig, out: str | Path, *, overwrite: bool = False, progress: bool = True) -> dict:
    """Load ``cfg.model``, compute its card and write card.json, index.html, the panels' tables and the head-type
    map into ``out`` (staged: a failed run leaves the folder as it was). Returns the card's data and the paths."""
    from ..api import card
    from ..cards import plan
    from ..commands.runs import load, model_record, staged_output
    from ..io import check_output, check_writable, write_json
    from ..report.card_page import write_card_page

    plan(cfg.budget)  # an unknown budget is refused before the model loads
    settings = asdict(cfg)
    check_writable(out)
    check_output(out, settings, overwrite=overwrite, what="attnlab card")
    model, tokenizer = load(cfg.model, cfg.device, cfg.dtype)
    data = card(model, tokenizer, budget=cfg.budget, seed=cfg.seed, progress=progress, name=cfg.model)
    data["provenance"] = json.loads(json.dumps(model_record(cfg, model), default=str))
    with staged_output(out) as stage:
        write_json(stage / "card.json", data)
        write_card_page(data, stage, stage / "index.html", shown=Path(out))
        write_json(stage / "config.json", {**settings, "b_auto": data["b_auto"]})
    final = Path(out)
    return {"card": data, "paths": {"card": final / "card.json", "page": final / "index.html"}}


@command(
    "card",
    "one page on a checkpoint's attention: substitution screen, best recipe, head map",
    "Audit NIAH and induction prompts at p = 2, 4, 8, 16 and b = 0, b_auto; screen the ReLU recipes by their "
    "measured-safe share (Polynomial Concentration §5.5: a screen, not a guarantee); score a few zero-shot recipes "
    "against softmax on NIAH; type every head and measure its first-token mass. Writes card.json and index.html.",
    CardConfig,
    output("card"),
)
def card_command(cfg: CardConfig, out) -> int:
    result = run(cfg, out.out, overwrite=out.overwrite, progress=not out.no_progress)
    data = result["card"]
    best = data["substitution"]["best"]
    print(f"card of {cfg.model} (budget {cfg.budget}); b_auto = {data['b_auto']:.6g}")
    for line in data["substitution"]["unsafe"]:
        if line["p"] == 2:
            print(f"  {line['suite']}, b = {line['b']}, p = 2: {_pct(line['unsafe %'])} unsafe")
    print(
        f"  best recipe {best['recipe']}: {best['accuracy %']:.1f}% [{best['lo']:.1f}, {best['hi']:.1f}] against "
        f"softmax {best['softmax %']:.1f}% [{best['softmax lo']:.1f}, {best['softmax hi']:.1f}] on NIAH"
    )
    print("wrote:")
    for path in result["paths"].values():
        print(f"  {path}")
    return 0


def _pct(value) -> str:
    return "-" if value is None else f"{value:.1f}%"
