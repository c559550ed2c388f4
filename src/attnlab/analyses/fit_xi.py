"""``attnlab fit-xi``: the growth exponents xi_hat_Lambda, xi_hat_alpha and xi_hat_Delta of saved score rows from
any source (Hayase & Karakida 2026 §4.5.1), with bootstrap half-IQRs and Cor. 4.9's identity check.

Input: one or more tensor files (.npy, .safetensors, .pt; ``--key`` picks the tensor of a file holding several),
keys on the last axis. A row is one index of the leading axes, and its length n is its number of allowed keys:
a key is disallowed where its score is -inf, where the boolean tensor ``--mask-key`` names in the same file is
False (True = allowed; it broadcasts to the scores), and, with ``--causal``, where it lies after the query on
the last two axes. So rows of several lengths come from one file (rows padded with -inf, a mask, or a causal
score matrix) or from several (one length per file, say).

Each row gives its contact triple (Lambda_n, alpha_n, Delta_n) at tolerance --eps (Defs. 4.3-4.5), and the fit
is ``attnlab temperature``'s: per n the bucket means of log X over non-tied rows (log10 Lambda_n > 5 excluded),
xi_hat_X the OLS slope of those means on log log n, half the IQR of B bootstrap resamples over the unit, and
Cor. 4.9's xi_Lambda = xi_alpha - xi_Delta + 1. The unit is named by ``--unit-axes``, leading axes whose
indices label it (0 1 for the (layer, head) of a (layers, heads, queries, keys) tensor, the unit §4.5.1
resamples); rows of equal indices in different files share their unit. Without it each row is its own unit.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab import devices, options
from attnlab.analyses.diagnose import causal_mask
from attnlab.analyses.run import RunError, check_count, settings, staged_output
from attnlab.analyses.sections import register
from attnlab.analyses.temperature import EXPONENTS_CAPTION, TRIPLE, cor49_note, exponents, per_n, summary_line
from attnlab.devices import Placement
from attnlab.diagnostics.stats import UNREADABLE
from attnlab.io import check_output, load_tensor, write_json, write_parquet, write_table
from attnlab.options import command_line, option
from attnlab.report.sections import Section, Table


@dataclass(frozen=True, kw_only=True)
class FitXiConfig(Placement):
    scores: tuple[Path, ...] = option(
        help="score tensor files (.npy, .safetensors, .pt), keys on the last axis", positional=True, metavar="FILE"
    )
    key: str | None = option(None, "tensor name inside files holding several")
    mask_key: str | None = option(
        None, "name of a boolean tensor in each file, True where a key may be attended, broadcasting to its scores"
    )
    causal: bool = option(
        False, "allow only causal keys on the last two axes (of Q queries and K keys, query i sees keys 0 .. K - Q + i)"
    )
    n: tuple[int, ...] = option(
        (), "fit on the rows of these lengths only (default: every n >= 2 among the rows)", metavar="N"
    )
    unit_axes: tuple[int, ...] = option(
        (),
        "leading axes whose indices name the bootstrap unit, e.g. 0 1 for the "
        "(layer, head) of (layers, heads, queries, keys) scores (default: each "
        "row its own unit)",
        metavar="AXIS",
    )
    eps: float = option(1e-6, "tolerance of the contact gap", type=options.finite)
    n_boot: int = option(200, "bootstrap resamples", metavar="B")
    seed: int = option(0, "bootstrap seed", metavar="N", type=options.seed)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.scores:
            raise RunError("fit-xi needs at least one score file")
        check_count("n_boot", self.n_boot)
        if not all(isinstance(n, int) and n >= 2 for n in self.n) or len(set(self.n)) != len(self.n):
            raise RunError(f"--n takes distinct row lengths >= 2, got {list(self.n)}")
        if len(self.n) == 1:
            raise RunError(f"--n takes at least two row lengths (a slope needs two), got {list(self.n)}")
        if not all(isinstance(a, int) and a >= 0 for a in self.unit_axes) or len(set(self.unit_axes)) != len(
            self.unit_axes
        ):
            raise RunError(f"--unit-axes takes distinct axis indices >= 0, got {list(self.unit_axes)}")
        if not (math.isfinite(self.eps) and self.eps >= 0):
            raise RunError(f"--eps must be a finite number >= 0, got {self.eps!r}")

    @property
    def unit(self) -> tuple[str, ...]:
        """The columns of the row table that name a row's bootstrap unit."""
        return tuple(f"axis{a}" for a in self.unit_axes) or ("file", "row")


def file_rows(path: Path, file: int, cfg: FitXiConfig) -> pd.DataFrame:
    """The status, n and contact triple of every row of one score file, with its file index, its row index
    (leading axes in C order) and the indices of its ``--unit-axes``."""
    import torch

    from attnlab.diagnostics import row_stats
    from attnlab.rowmaps import check_rows

    try:
        scores = load_tensor(path, key=cfg.key)
        mask = None if cfg.mask_key is None else load_tensor(path, key=cfg.mask_key)
    except (FileNotFoundError, KeyError, TypeError, ValueError) as exc:
        raise RunError(str(exc).strip("'\"")) from None
    if not scores.is_floating_point() or scores.dim() < 1:
        raise RunError(
            f"{path}: scores must be a floating-point tensor with keys on the last axis, got "
            f"{scores.dtype} of shape {tuple(scores.shape)}"
        )
    if mask is not None and mask.dtype != torch.bool:
        raise RunError(
            f"{path}: --mask-key {cfg.mask_key} must name a boolean tensor (True = key allowed), got {mask.dtype}"
        )
    scores = devices.place(scores, cfg.device, cfg.dtype)
    mask = None if mask is None else devices.place(mask, cfg.device)
    lead = tuple(scores.shape[:-1])
    beyond = [a for a in cfg.unit_axes if a >= len(lead)]
    if beyond:
        raise RunError(
            f"--unit-axes {beyond} out of range for {path}: its scores of shape {tuple(scores.shape)} "
            f"have {len(lead)} leading axes before the keys"
        )
    if mask is not None:
        try:
            check_rows(scores, mask, -1)  # first: the causal AND below fails on a misshapen mask, or hides it
        except (TypeError, ValueError) as exc:
            raise RunError(f"{path}: {exc}") from None
    if cfg.causal:
        if scores.dim() < 2:
            raise RunError(f"--causal needs scores of shape (..., queries, keys); {path} has {tuple(scores.shape)}")
        causal = causal_mask(*scores.shape[-2:]).to(scores.device)
        mask = causal if mask is None else mask & causal
    try:
        stats = row_stats(scores, mask, p=2, eps=cfg.eps)
    except (TypeError, ValueError) as exc:
        raise RunError(f"{path}: {exc}") from None
    rows = stats[["status", "n_keys", *TRIPLE.values()]].assign(file=file, row=np.arange(len(stats)))
    if cfg.unit_axes:
        index = np.indices(lead).reshape(len(lead), -1)
        for a in cfg.unit_axes:
            rows[f"axis{a}"] = index[a]
    return rows


def on_grid(rows: pd.DataFrame, n: tuple[int, ...]) -> pd.DataFrame:
    """The readable rows whose n is on the grid: ``n``, or every n >= 2 the readable rows have."""
    readable = rows[~rows["status"].isin(UNREADABLE)]
    have = sorted(int(x) for x in readable["n_keys"].unique())
    shown = f"{have[:8]}{' ...' if len(have) > 8 else ''}"
    missing = [x for x in n if x not in have]
    if missing:
        raise RunError(f"--n {missing}: no readable row has that many allowed keys; the rows have n in {shown}")
    grid = list(n) or [x for x in have if x >= 2]
    if len(grid) < 2:
        raise RunError(
            f"fit-xi needs readable rows of at least two lengths n >= 2 (n = allowed keys of a row), "
            f"got n in {shown}; mark disallowed keys with -inf, --mask-key or --causal, or pass files "
            "of other lengths"
        )
    return readable[readable["n_keys"].isin(grid)].reset_index(drop=True)


def run(cfg: FitXiConfig, out: str | Path, *, progress: bool = True, overwrite: bool = False) -> dict:
    """Read every file's rows and fit; write exponents.csv/.md, fit_xi.csv/.md (per n), rows_contact.parquet
    (the rows fitted) and config.json (with the Cor. 4.9 check). Returns {"table" (the exponents), "per_n",
    "cor49", "summary", ...}. ``progress`` is taken for the shape of every checkpoint command; nothing here
    runs long enough to draw a bar."""
    check_output(out, settings(cfg), overwrite=overwrite, what="attnlab fit-xi")
    read = pd.concat([file_rows(path, i, cfg) for i, path in enumerate(cfg.scores)], ignore_index=True)
    rows = on_grid(read, cfg.n)
    table = per_n(rows)
    fits, cor49 = exponents(rows, cfg.n_boot, cfg.seed, unit=cfg.unit)
    config = {
        **asdict(cfg),
        "rows read": len(read),
        "rows fitted": len(rows),
        "unreadable": int(read["status"].isin(UNREADABLE).sum()),
        "cor49": cor49,
    }
    config = json.loads(json.dumps(config, default=str))
    with staged_output(out) as stage:
        write_parquet(stage / "rows_contact.parquet", rows, metadata=config)
        write_table(stage / "fit_xi", table)
        write_table(stage / "exponents", fits)
        write_json(stage / "config.json", config)
    left = len(read) - len(rows)
    summary = (
        f"{summary_line(fits, cor49, cfg.n_boot, cfg.unit)}\n{len(rows)} of {len(read)} rows fitted "
        f"over n = {' '.join(str(int(n)) for n in table['n'])}"
        + (f" ({left} unreadable or off the grid)" if left else "")
    )
    final = Path(out)
    return {
        "table": fits,
        "per_n": table,
        "cor49": cor49,
        "summary": summary,
        "b_auto": None,
        "paths": {
            k: final / f
            for k, f in (
                ("exponents", "exponents.csv"),
                ("per_n", "fit_xi.csv"),
                ("rows", "rows_contact.parquet"),
                ("config", "config.json"),
            )
        },
    }


@register("fit-xi", "fit_xi.csv", FitXiConfig)
def report_section(folder: Path, config: dict) -> Section:
    """The contact exponents of saved score rows (Hayase & Karakida 2026 §4.5.1)."""
    unit = [f"axis{a}" for a in config["unit_axes"]] or ["file", "row"]
    return Section(
        study="fit-xi",
        title=f"Contact exponents of {len(config['scores'])} score file(s)",
        source="Hayase & Karakida 2026",
        question="How fast do Lambda_n, alpha_n and Delta_n of the saved score rows grow with log n?",
        command=command_line("fit-xi", FitXiConfig, config, str(folder)),
        tables=(
            Table("exponents", f"{EXPONENTS_CAPTION} ({', '.join(unit)})."),
            Table(
                "fit_xi",
                "Per n: rows, exact ties, and the bucket means of log Lambda_n, log alpha_n and "
                "log Delta_n over the non-tied rows.",
            ),
        ),
        notes=(
            f"{config['rows fitted']} of {config['rows read']} rows fitted ({config['unreadable']} unreadable).",
            cor49_note(config),
        ),
    )
