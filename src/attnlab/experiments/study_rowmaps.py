"""The ``rowmaps`` section: every family of row maps on one score row (``experiments.rowmap_demo``).

Not one seed's question but the vocabulary of all of them: how each map spreads the same row's weight.
``summarize`` recomputes the table and figure from the row saved in ``row.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from .. import io
from ..report import plot_row_weights
from ..report.sections import Figure, Finding, Section, Table
from . import rowmap_demo
from .studies import StudyConfig, section


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    """Save the sample row; everything else is derived from it in ``summarize``."""
    if not (folder / "row.json").is_file():
        z, mask = rowmap_demo.sample_row(cfg.seed)
        io.write_json(folder / "row.json", {"seed": cfg.seed, "maps": list(rowmap_demo.MAPS), "row": z.tolist(),
                                            "mask": mask.tolist()})


def summarize(folder: Path) -> Section:
    saved = json.loads((folder / "row.json").read_text())
    z, mask = torch.tensor(saved["row"], dtype=torch.float32), torch.tensor(saved["mask"])
    table, weights = rowmap_demo.summarize(z, mask, saved["maps"])
    io.write_table(folder / "rowmaps", table)
    plot_row_weights(z.numpy(), weights, folder / "rowmaps.png", masked=(~mask).numpy())
    normalized = table[table.normalized]
    worst = float(np.abs(normalized["sum"] - 1).max())
    masked_weight = max(float(w[~mask.numpy()].max()) for w in weights.values())
    ok = worst <= 1e-5 and masked_weight == 0
    return section(
        "rowmaps", folder,
        question="How does each registered row map turn the same score row into weights: how many keys keep "
                 "weight, and how much goes to the largest score?",
        findings=(Finding("normalized maps put their weight on the simplex of allowed keys, and no map puts "
                          "weight on a masked key", "reproduced" if ok else "not reproduced",
                          f"largest |sum - 1| over the {len(normalized)} normalized maps: {worst:.2g}; largest "
                          f"weight on the masked key over all maps: {masked_weight:.2g}"),),
        tables=(Table("rowmaps", "One line per map: its sum, support (nonzero weights), largest weight, entropy "
                                 "(nats, normalized maps only) and the weight on the largest allowed score."),),
        figures=(Figure("rowmaps", "The score row (top; the hatched red bar is a masked key with a high score) and "
                                   "each map's weights key by key; grey ticks mark allowed keys with weight exactly "
                                   "0, so sparse maps stand out."),))
