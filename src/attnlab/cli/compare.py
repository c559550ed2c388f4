"""``attnlab compare CARD_DIR [CARD_DIR ...] --out DIR``: the page comparing cards ``attnlab card`` already wrote,
one row per model as Polynomial Concentration Table 1 lays them out, built from their card.json files
(``cards.compare``) without loading any model."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from attnlab.cli.base import command
from attnlab.cli.checkpoint import OVERWRITE_HELP
from attnlab.options import option


@dataclass(frozen=True)
class CompareConfig:
    """What ``attnlab compare`` takes: the card folders and where the comparison goes."""

    cards: tuple[Path, ...] = option(
        help="two or more folders that attnlab card wrote, each holding its card.json (the page links each one's "
        "index.html where it has one)",
        positional=True,
        metavar="CARD_DIR",
    )
    # No default: the page links the card folders by relative path, so where it goes is the user's choice.
    out: Path = option(
        help="the folder to write: DIR/index.html, compare.csv/.md (every value), the page's tables and figure, and "
        "config.json; new, empty or an earlier comparison's, and none of CARD_DIR",
        metavar="DIR",
    )
    overwrite: bool = option(False, OVERWRITE_HELP)

    def __post_init__(self) -> None:
        from attnlab.cards.compare import CompareError

        if isinstance(self.cards, (str, os.PathLike)) or len(self.cards) < 2:
            given = "none" if not self.cards else "one"
            raise CompareError(
                f"CARD_DIR takes two or more card folders, got {given}: a comparison needs two or more "
                "(one card's own page is its index.html)"
            )
        seen: dict[str, Path] = {}
        for folder in self.cards:
            key = os.path.realpath(folder)  # card and ./card/ are one folder
            if key in seen:
                raise CompareError(f"CARD_DIR {str(folder)!r} is given twice; name each card folder once")
            seen[key] = folder
        if os.path.realpath(self.out) in seen:
            raise CompareError(
                f"--out {str(self.out)!r} is one of the card folders: the comparison would replace its page; "
                "choose another --out"
            )

    def settings(self) -> dict:
        """What config.json records and a rerun into the same --out must agree with: the card folders, absolute."""
        return {"cards": [os.path.abspath(folder) for folder in self.cards]}

    def command_line(self) -> str:
        return shlex.join(["attnlab", "compare", *map(str, self.cards), "--out", str(self.out)])


def run(cfg: CompareConfig) -> dict:
    """Read each folder's card.json (``cards.compare.read_card``; a folder without one is named before anything is
    written) and write the comparison into ``cfg.out``: index.html, compare.csv/.md and the page's tables and figure
    (``cards.compare.write_compare_page``), and config.json, as ``attnlab card`` writes its comparison; staged and
    held (``staged_output``, ``locked``): a failed run leaves the folder as it was. Loads no model. Returns the cards
    (``cards.types.Card``) in the order given and the paths."""
    from attnlab.analyses.run import staged_output
    from attnlab.cards.compare import read_card, write_compare_page
    from attnlab.io import check_output, check_writable, locked, write_json

    cards = [read_card(folder) for folder in cfg.cards]
    settings = cfg.settings()
    check_writable(cfg.out)
    final = Path(cfg.out)
    # relative from the page's folder, so the folders can move together; a folder without a page gets no link
    links = [
        os.path.relpath(os.path.abspath(Path(folder) / "index.html"), os.path.abspath(final))
        if (Path(folder) / "index.html").is_file()
        else None
        for folder in cfg.cards
    ]
    with locked(final):  # from the check through the write: a second comparison into ``out`` is refused at once
        check_output(final, settings, overwrite=cfg.overwrite, what="attnlab compare")
        with staged_output(final) as stage:
            write_compare_page(cards, stage, stage / "index.html", links=links, shown=final, command=cfg.command_line())
            write_json(stage / "config.json", {**settings, "models": [card.model for card in cards]})
    return {"cards": cards, "paths": {"page": final / "index.html", "table": final / "compare.csv"}}


@command(
    "compare",
    "one page comparing cards that attnlab card wrote, read from their card.json (no model is loaded)",
    "Read the card.json of each CARD_DIR (a folder attnlab card wrote) and write a page comparing them into DIR: "
    "one line per model and suite as Polynomial Concentration Table 1, beside Table 1's published lines for its "
    "four models; a figure of each model's unsafe share at p = 2, b = 0 per suite with its 95% interval beside "
    "the published values; narrow tables of the recipes, heads, length and temperature, and ablation panels; "
    "each card's own page linked. Writes DIR/index.html, compare.csv/.md (every value, unrounded) and config.json. "
    "Nothing is recomputed: attnlab card MODEL MODEL ... --out DIR computes the cards and this page together.",
    CompareConfig,
)
def compare_command(cfg: CompareConfig) -> int:
    result = run(cfg)
    print(f"compared {len(result['cards'])} cards")
    for folder, card in zip(cfg.cards, result["cards"]):
        print(f"  {folder}: {card.model}")
    print("wrote:")
    for path in result["paths"].values():
        print(f"  {path}")
    return 0
