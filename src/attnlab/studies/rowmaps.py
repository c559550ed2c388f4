"""The ``rowmaps`` study: how does each registered row map turn the same score row into weights, how
many keys keep weight, and how much goes to the largest score?

Not one paper's question but the vocabulary of all of them: how each map spreads the same row's weight.
Every map sees the same row (24 keys: a clear winner, two runners-up, small and negative scores, and
one masked key whose score is high, so that ignoring the mask would show). ``compute`` saves the row in
``row.json``; ``summarize`` recomputes from it the table (per map, how concentrated its weights are) and
the figure (the weights key by key), and checks that the normalized maps sum to 1 and that no map puts
weight on the masked key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnlab import io, rowmaps
from attnlab.findings.finding import Finding
from attnlab.readback import ReadBackError, read_record
from attnlab.report import plot_row_weights
from attnlab.report.sections import Figure, Section, Table
from attnlab.studies.runner import Study, StudyConfig, register, section

MAPS = (
    "softmax",
    "softmax_t0.5",
    "ssmax_s0.43",
    "logn_xi2_n8",
    "topk_k4",
    "entmax_a1.25",
    "entmax_a1.5",
    "sparsemax",
    "relu_p2_b0",
    "relu_p4_b1",
    "relu_p16_b1",
    "sigmoid_b0",
    "wortsman_p2_sqrtL",
    "reluattn",
)
KEYS = 24
MASKED_KEY = 20
LARGE = (4.0, 3.2, 2.4)  # the winner and two runners-up
MASKED_SCORE = 3.6  # high on purpose: a map that ignored the mask would put weight here
COLUMNS = ("name", "family", "normalized", "sum", "support", "max_weight", "entropy", "argmax_weight")


@dataclass(frozen=True)
class Plan:
    """One budget of the study: nothing to set, since one score row costs nothing and both budgets compute the
    same."""


BUDGETS: dict[str, Plan] = {"smoke": Plan(), "full": Plan()}


@dataclass(frozen=True)
class Row:
    """row.json (``compute``): the score row, its mask (True = key may be attended) and the maps to apply."""

    seed: int
    maps: list[str]
    row: list[float]
    mask: list[bool]


def read_row(path: Path) -> dict:
    """row.json checked against ``Row`` (``readback.read_record``), one mask entry per score, some key allowed and
    some map named; a ReadBackError naming the file and what is allowed where not."""
    saved = read_record(path, Row)
    if not (saved["maps"] and len(saved["row"]) == len(saved["mask"]) and any(saved["mask"])):
        raise ReadBackError(
            f"{path}: {len(saved['row'])} scores, {len(saved['mask'])} mask entries ({sum(saved['mask'])} allowed) "
            f"and {len(saved['maps'])} maps; allowed: one mask entry per score, at least one allowed, at least one map"
        )
    return saved


def sample_row(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The demo's score row (float32, ``KEYS`` keys) and its mask (True = key may be attended).

    Deterministic in ``seed``: Gaussian scores (sd 1.2) with ``LARGE`` placed at random allowed keys
    and key ``MASKED_KEY`` masked.
    """
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(KEYS, generator=gen, dtype=torch.float64) * 1.2
    allowed = [k for k in torch.randperm(KEYS, generator=gen).tolist() if k != MASKED_KEY]
    for key, value in zip(allowed, LARGE):
        z[key] = value
    z[MASKED_KEY] = MASKED_SCORE
    mask = torch.ones(KEYS, dtype=torch.bool)
    mask[MASKED_KEY] = False
    return z.to(torch.float32), mask


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    """Save the sample row; everything else is derived from it in ``summarize``."""
    if not (folder / "row.json").is_file():
        z, mask = sample_row(cfg.seed)
        io.write_json(
            folder / "row.json", {"seed": cfg.seed, "maps": list(MAPS), "row": z.tolist(), "mask": mask.tolist()}
        )


def entropy(w: np.ndarray) -> float:
    """Shannon entropy (nats) over the nonzero weights."""
    nz = w[w > 0].astype(np.float64)
    return float(-(nz * np.log(nz)).sum()) + 0.0  # + 0.0: a one-hot row's -0.0 reads as 0


def map_table(z: torch.Tensor, mask: torch.Tensor, names=MAPS) -> tuple[pd.DataFrame, dict]:
    """Weights of each map on the row, and one summary row per map (columns ``COLUMNS``).

    support counts exact nonzeros; entropy is given for normalized maps only (NaN otherwise);
    argmax_weight is the weight on the allowed key with the largest score.
    """
    star = int(torch.where(mask, z, float("-inf")).argmax())
    weights, records = {}, []
    for name in names:
        rm = rowmaps.get(name)
        w = rm(z, mask).numpy()
        weights[rm.name] = w
        records.append(
            {
                "name": rm.name,
                "family": rm.family,
                "normalized": rm.normalized,
                "sum": float(w.sum(dtype=np.float64)),
                "support": int(np.count_nonzero(w)),
                "max_weight": float(w.max()),
                "entropy": entropy(w) if rm.normalized else float("nan"),
                "argmax_weight": float(w[star]),
            }
        )
    return pd.DataFrame.from_records(records, columns=list(COLUMNS)), weights


SIMPLEX_NAME = "rowmaps: weights on the simplex"  # ``Finding.name``: the study declares it


def finding(table: pd.DataFrame, weights: dict[str, np.ndarray], mask: np.ndarray) -> Finding:
    """Normalized maps sum to 1 and no map weighs the masked key (``mask`` False), to float32 rounding:
    identities of the maps, so a check, not a paper's finding."""
    normalized = table[table.normalized]
    worst = float(np.abs(normalized["sum"] - 1).max())
    masked_weight = max(float(w[~mask].max()) for w in weights.values())
    ok = worst <= 1e-5 and masked_weight == 0
    return Finding(
        "normalized maps put their weight on the simplex of allowed keys, and no map puts weight on a masked key",
        "check passed" if ok else "check failed",
        f"largest |sum - 1| over the {len(normalized)} normalized maps: {worst:.2g}; largest "
        f"weight on the masked key over all maps: {masked_weight:.2g}",
        name=SIMPLEX_NAME,
    )


def summarize(folder: Path) -> Section:
    saved = read_row(folder / "row.json")
    z, mask = torch.tensor(saved["row"], dtype=torch.float32), torch.tensor(saved["mask"])
    table, weights = map_table(z, mask, saved["maps"])
    io.write_table(folder / "rowmaps", table)
    plot_row_weights(z.numpy(), weights, folder / "rowmaps.png", masked=(~mask).numpy())
    return section(
        "rowmaps",
        folder,
        question="How does each registered row map turn the same score row into weights: how many keys keep "
        "weight, and how much goes to the largest score?",
        findings=(finding(table, weights, mask.numpy()),),
        tables=(
            Table(
                "rowmaps",
                "One line per map: its sum, support (nonzero weights), largest weight, entropy "
                "(nats, normalized maps only) and the weight on the largest allowed score.",
            ),
        ),
        figures=(
            Figure(
                "rowmaps",
                "The score row (top; the hatched red bar is a masked key with a high score) and "
                "each map's weights key by key; grey ticks mark allowed keys with weight exactly "
                "0, so sparse maps stand out.",
            ),
        ),
    )


STUDY = register(
    Study(
        name="rowmaps",
        title="Row maps on one score row",
        source="Polynomial Concentration, Vasylenko et al. 2025, Hayase & Karakida 2026, Attention Sinks Essential",
        compute=compute,
        summarize=summarize,
        findings=(SIMPLEX_NAME,),
    )
)
