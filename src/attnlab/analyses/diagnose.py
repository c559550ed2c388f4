"""``attnlab diagnose``: the per-row diagnostics of a saved score tensor, summarized per bias b
(Polynomial Concentration §3-4), every row kept in Parquet on request."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from attnlab import devices, options
from attnlab.devices import Placement
from attnlab.errors import Error
from attnlab.io import PARQUET_META_KEY, OutputError, check_writable, load_tensor, write_parquet
from attnlab.options import option
from attnlab.readback import parse_object


class DiagnoseError(Error, ValueError):
    """A score or mask file that cannot be read or used, or an --out that may not be replaced."""


@dataclass(frozen=True)
class DiagnoseConfig(Placement):
    scores: Path = option(help="score tensor file: .npy, .safetensors or .pt", positional=True)
    key: str | None = option(None, "tensor name inside a .safetensors/.pt file holding several")
    mask: Path | None = option(None, "bool mask file (True = key may be attended), broadcasting to scores")
    mask_key: str | None = option(None, "tensor name inside the mask file")
    causal: bool = option(False, "apply a causal mask over the last two axes")
    p: tuple[float, ...] = option((2, 4, 8, 16), "degrees of S_p", metavar="P", type=options.finite)
    b: tuple[float, ...] = option((0.0,), "biases b (one summary row each)", metavar="B", type=options.finite)
    tau: float | None = option(None, "cap tau of r = clamp(z + b, 0, tau)", type=options.finite)
    eps: float = option(1e-6, "tolerance of the eps-safe rule and contact gap", type=options.finite)
    beta: float = option(1.0, "inverse temperature for entropy and sink mass", type=options.finite)
    sink: int = option(0, "sink = the N-th allowed key (0: the first)")
    rowmap: str = option("softmax", "normalized row map for entropy/support/sink mass")
    sigmoid: bool = option(
        False, "also measure S_sigma, the sigmoid's analogue of S_p (Polynomial Concentration App. T)"
    )
    out: Path | None = option(None, "also keep every row here", metavar="FILE.parquet")
    overwrite: bool = option(False, "replace --out even when another command wrote it")

    def __post_init__(self) -> None:
        super().__post_init__()
        from attnlab.diagnostics import RowOptions

        if not self.b or len(set(self.b)) != len(self.b):
            raise DiagnoseError(f"--b takes distinct biases (one summary row each), got {list(self.b)}")
        try:  # the rows' own rules (distinct degrees, a normalized --rowmap...), before any score file is read
            for b in self.b:
                RowOptions.make(b=b, **self.row_options())
        except (TypeError, ValueError) as exc:
            raise DiagnoseError(str(exc)) from None

    def row_options(self) -> dict:
        """The row statistics' options but the bias, as ``row_stats`` and ``RowOptions.make`` take them."""
        return {
            "p": self.p,
            "tau": self.tau,
            "eps": self.eps,
            "beta": self.beta,
            "sink": self.sink,
            "rowmap": self.rowmap,
            "sigmoid": self.sigmoid,
        }

    def settings(self) -> dict[str, str]:
        """What a rerun must match to replace --out without --overwrite."""
        return {
            "command": "diagnose",
            **{k: str(list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if k != "overwrite"},
        }


def causal_mask(q: int, k: int):
    """Causal mask for the last q of k positions (query i sees keys 0..k-q+i)."""
    import torch

    return torch.ones(q, k, dtype=torch.bool).tril(k - q)


def check_out(cfg: DiagnoseConfig) -> None:
    """--out may be new, or this very command's earlier output; anything else needs --overwrite."""
    import pyarrow.parquet as pq

    out = cfg.out
    try:
        check_writable(out.parent if str(out.parent) else Path("."))
    except OutputError as exc:
        raise DiagnoseError(str(exc)) from None
    if cfg.overwrite or not out.exists():
        return
    if out.is_dir():
        raise DiagnoseError(f"--out {out} is a folder; pass a file name ending in .parquet")
    try:
        meta = parse_object((pq.read_schema(out).metadata or {}).get(PARQUET_META_KEY, b"{}"), out)
    except (OSError, ValueError):  # pyarrow's ArrowInvalid, and a ReadBackError, are ValueErrors: not ours
        meta = {}
    if meta.get("command") != "diagnose" or meta.get("args") != cfg.settings():
        raise DiagnoseError(
            f"--out {out} exists and was not written by this diagnose command; pass --overwrite "
            "to replace it, or choose another file"
        )


def run(cfg: DiagnoseConfig) -> tuple[tuple[int, ...], int, pd.DataFrame]:
    """(the scores' shape, its number of rows, the summary per b); every row goes to ``cfg.out`` when set."""
    from attnlab.diagnostics import row_stats
    from attnlab.diagnostics.summary import summarize
    from attnlab.rowmaps import check_rows

    try:
        scores = load_tensor(cfg.scores, key=cfg.key)
        mask = None if cfg.mask is None else load_tensor(cfg.mask, key=cfg.mask_key)
    except (FileNotFoundError, KeyError, TypeError, ValueError) as exc:
        raise DiagnoseError(str(exc).strip("'\"")) from None
    scores = devices.place(scores, cfg.device, cfg.dtype)
    mask = None if mask is None else devices.place(mask, cfg.device)
    if mask is not None:
        try:
            check_rows(scores, mask, -1)  # first: the causal AND below fails on a float or misshapen mask, or hides it
        except (TypeError, ValueError) as exc:
            raise DiagnoseError(str(exc)) from None
    if cfg.causal:
        if scores.dim() < 2:
            raise DiagnoseError(f"--causal needs scores of shape (..., queries, keys); got {tuple(scores.shape)}")
        causal = causal_mask(*scores.shape[-2:]).to(scores.device)
        mask = causal if mask is None else mask & causal
    if cfg.out is not None:
        check_out(cfg)
    frames = []
    for b in cfg.b:
        try:
            df = row_stats(scores, mask, b=b, **cfg.row_options())
        except (TypeError, ValueError) as exc:
            raise DiagnoseError(str(exc)) from None
        frames.append(df.assign(b=b, row=range(len(df))))
    rows = pd.concat(frames, ignore_index=True)
    summary = summarize(rows, p=cfg.p, by="b")
    if cfg.out is not None:
        write_parquet(
            cfg.out, rows, metadata={"command": "diagnose", "scores": str(cfg.scores), "args": cfg.settings()}
        )
    return tuple(scores.shape), len(frames[0]), summary
