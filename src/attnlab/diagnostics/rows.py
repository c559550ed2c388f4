"""``row_stats``: every per-row statistic of a block of score rows, one record per row, in float64.

Rows are the last axis of ``scores``; leading dims are flattened in C order. Rows that cannot be read
are labelled in ``status`` and get NaN statistics, never dropped and never mixed into aggregates:
"empty" (no allowed key), "nan" (NaN at an allowed key), "inf" (+inf at an allowed key). A score of
-inf counts as masked, as in ``attnlab.rowmaps``. The other rows are "active", "dead" or "saturated"
(Polynomial Concentration §3).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard, cast

import numpy as np
import pandas as pd
import torch
from numpy.typing import ArrayLike

from attnlab import rowmaps
from attnlab.diagnostics import concentration as conc
from attnlab.diagnostics import kernel
from attnlab.diagnostics.dispersion import dispersion, key_mass, normalized_entropy, sink_index, weights
from attnlab.diagnostics.gaps import gap_stats, p_star_n
from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.rowmaps import check_rows

SPECIAL = ("empty", "nan", "inf")
CHUNK_VALUES = 1 << 21  # scores per block inside row_stats (16 MiB as float64)


def _deg(p: float) -> str:
    return f"{p:g}"


@dataclass(frozen=True)
class RowOptions:
    """The per-row options of ``row_stats``, validated (see its docstring)."""

    p: tuple[float, ...] = (2, 4, 8, 16)
    b: float = 0.0
    tau: float | None = None
    eps: float = 1e-6
    beta: tuple[float, ...] = (1.0,)
    sink: int = 0
    rowmap: str = "softmax"
    sigmoid: bool = False
    r: float | str | None = None
    gamma: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not self.p or not all(_finite(p) and p > 0 for p in self.p):
            raise ArgumentError(f"p must be a non-empty list of finite degrees > 0, got {self.p!r}")
        if len({_deg(p) for p in self.p}) != len(self.p):
            raise ArgumentError(f"p has repeated degrees: {self.p!r}; give each degree once")
        if not _finite(self.b):
            raise ArgumentError(f"b must be a finite number, got {self.b!r}")
        if self.tau is not None and not (_finite(self.tau) and self.tau > 0):
            raise ArgumentError(f"tau must be None or a finite number > 0, got {self.tau!r}")
        if not (_finite(self.eps) and self.eps >= 0):
            raise ArgumentError(f"eps must be a finite number >= 0, got {self.eps!r}")
        if not self.beta or not all(_finite(x) and x > 0 for x in self.beta):
            raise ArgumentError(f"beta must be a finite number > 0 or a list of them, got {self.beta!r}")
        if isinstance(self.sink, bool) or not (isinstance(self.sink, int) and self.sink >= 0):
            raise ArgumentError(f"sink must be an int >= 0 (0 = the first allowed key), got {self.sink!r}")
        if not (self.r is None or self.r == "auto" or (_finite(self.r) and self.r >= 0)):
            raise ArgumentError(
                f"r must be None (no lambda_resolved), 'auto' (log(1 + log n)) or a finite number >= 0, got {self.r!r}"
            )
        if not all(_finite(x) and x > 0 for x in self.gamma):
            raise ArgumentError(
                f"gamma must be a list of finite numbers > 0 (beta = gamma Lambda_n), got {self.gamma!r}"
            )
        rm = rowmaps.get(self.rowmap)
        if not rm.normalized or rm.needs_bias:
            raise ArgumentError(f"rowmap must be a normalized map with its parameters resolved, got {self.rowmap!r}")

    @classmethod
    def make(
        cls,
        *,
        p: float | Sequence[float] = (2, 4, 8, 16),
        b: float = 0.0,
        tau: float | None = None,
        eps: float = 1e-6,
        beta: float | Sequence[float] = 1.0,
        sink: int = 0,
        rowmap: str = "softmax",
        sigmoid: bool = False,
        r: float | str | None = None,
        gamma: float | Sequence[float] = (),
    ) -> RowOptions:
        return cls(
            p=_several(p),
            b=b,
            tau=tau,
            eps=eps,
            beta=_several(beta),
            sink=sink,
            rowmap=rowmap,
            sigmoid=bool(sigmoid),
            r=r,
            gamma=_several(gamma),
        )

    def beta_suffix(self, beta: float) -> str:
        return "" if len(self.beta) == 1 else f"_beta{beta:g}"


def _finite(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _several(x: object) -> tuple[Any, ...]:
    """A list, tuple or array as a tuple; anything else as a tuple of itself, for the checks to name."""
    return tuple(x) if isinstance(x, (list, tuple, range, np.ndarray)) else (x,)


def flat_rows(
    scores: torch.Tensor | np.ndarray,
    mask: torch.Tensor | np.ndarray | None = None,
    target: torch.Tensor | ArrayLike | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Validate, then view as rows: scores (R, n) in their own dtype, mask (R, n) bool or None and
    target (R,) int64 or None. Nothing is upcast yet, so callers can convert a block at a time."""
    if isinstance(scores, np.ndarray):
        scores = torch.from_numpy(scores)
    if isinstance(mask, np.ndarray):
        mask = torch.from_numpy(mask)
    check_rows(scores, mask, -1)
    n = scores.shape[-1]
    if n == 0:
        raise ArgumentError(f"scores has an empty key axis (shape {tuple(scores.shape)}); rows need >= 1 key")
    rows = scores.detach().to("cpu").reshape(-1, n)
    mask = None if mask is None else mask.to("cpu").expand(scores.shape).reshape(-1, n)
    if target is None:
        return rows, mask, None
    if isinstance(target, np.ndarray):
        target = torch.from_numpy(target)
    try:
        target = torch.as_tensor(target)
    except (TypeError, ValueError, RuntimeError):  # strings, ragged lists, objects: torch names none of them
        raise ArgumentTypeError(
            f"target must hold integer key indices (a tensor, array or list of ints), got "
            f"{type(target).__name__} {str(target)[:40]!r}"
        ) from None
    if target.is_floating_point() or target.dtype == torch.bool or target.is_complex():
        raise ArgumentTypeError(f"target must hold integer key indices, got dtype {target.dtype}")
    lead = scores.shape[:-1]
    try:
        target = target.to("cpu", torch.int64).expand(lead).reshape(-1)
    except RuntimeError:
        raise ArgumentError(
            f"target shape {tuple(target.shape)} does not broadcast to the rows' shape {tuple(lead)}"
        ) from None
    if ((target < 0) | (target >= n)).any():
        raise ArgumentError(
            f"target indices must lie in [0, {n}); got min {int(target.min())}, max {int(target.max())}"
        )
    return rows, mask, target


def masked_float64(rows: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """One float64 copy of the rows that serves every statistic: masked keys (and a NaN there) -> -inf."""
    z = rows.to(torch.float64)
    return z if mask is None else torch.where(mask, z, -math.inf)


def _special(zmax: torch.Tensor) -> torch.Tensor:
    """Per-row code from the row maximum (NaN propagates through it): 0 readable, 1 empty (all keys
    masked), 2 NaN at an allowed key, 3 +inf at an allowed key."""
    code = torch.zeros(zmax.shape, dtype=torch.int64)
    code[torch.isposinf(zmax)] = 3
    code[torch.isnan(zmax)] = 2
    code[torch.isneginf(zmax)] = 1
    return code


def _torch_basics(zm: torch.Tensor, target: torch.Tensor | None, opt: RowOptions) -> dict[str, Any]:
    """The per-row basics of ``_readable_stats`` by torch ops, one pass per statistic: n_keys, first and
    second (argmax and runner-up), rest (the largest score but the argmax's), a_act, S_p per degree,
    sink, softmax dispersion per beta (None for other maps) and the gap statistics."""
    n = zm.shape[-1]
    full = bool(zm.amin(-1).gt(-math.inf).all()) if zm.numel() else True
    n_keys = torch.full(zm.shape[:1], n, dtype=torch.int64) if full else (zm > -math.inf).sum(-1)
    first = zm.max(-1).indices
    rest = zm.scatter(-1, first.unsqueeze(-1), -math.inf).max(-1)
    second = torch.where(rest.values > -math.inf, rest.indices, first)
    ratio, a_act = conc.ratios(zm, first if target is None else target, opt.b, opt.tau)
    s = conc.s_p(ratio, opt.p)
    del ratio
    return {
        "n_keys": n_keys,
        "first": first,
        "second": second,
        "rest": rest.values,
        "a_act": a_act,
        "s_p": s,
        "sink": sink_index(zm, n_keys, opt.sink, full),
        "softmax": None,
        "gaps": gap_stats(zm, n_keys, eps=opt.eps, r=opt.r),
    }


R_MODES: dict[float | str | None, int] = {None: 0, "auto": 2}


def _kernel_basics(k: kernel.Kernel, zm: torch.Tensor, target: torch.Tensor | None, opt: RowOptions) -> dict[str, Any]:
    """``_torch_basics`` from the compiled kernel (``kernel.py``, ``_rows.c``), which reads each row while it
    is in cache; softmax's dispersion comes with it when the row map is softmax."""
    softmax = opt.rowmap == "softmax"
    betas = torch.tensor(opt.beta if softmax else (), dtype=torch.float64)
    table = k.diag_rows(
        zm,
        None if target is None else target.contiguous(),
        opt.b,
        opt.tau,
        torch.tensor(opt.p, dtype=torch.float64),
        betas,
        opt.sink,
        opt.eps,
        R_MODES.get(opt.r, 1),
        0.0 if opt.r in R_MODES else float(cast(float, opt.r)),  # r: a number here (RowOptions)
    )
    (n_keys, first, second, rest, a_act, sink, lam, tie, cgap, ccount, alpha, cent, lam_r) = table[: kernel.DIAG_FIXED]
    gaps = {
        "lambda_n": lam,
        "tie": tie > 0,
        "contact_gap": cgap,
        "contact_count": ccount,
        "alpha_n": alpha,
        "contact_entropy": cent,
    }
    if opt.r is not None:
        gaps["lambda_resolved"] = lam_r
    s_cols = table[kernel.DIAG_FIXED : kernel.DIAG_FIXED + len(opt.p)]
    per_beta = table[kernel.DIAG_FIXED + len(opt.p) :].reshape(len(betas), kernel.DIAG_PER_BETA, zm.shape[0])
    n_keys = n_keys.long()
    return {
        "n_keys": n_keys,
        "first": first.long(),
        "second": second.long(),
        "rest": rest,
        "a_act": a_act.long(),
        "s_p": dict(zip(opt.p, s_cols)),
        "sink": sink.long(),
        # mypy gives a starred argument every remaining parameter, so it counts n_keys as one too many
        "softmax": [_softmax_columns(*cols, n_keys) for cols in per_beta] if softmax else None,  # type: ignore[call-arg]
        "gaps": gaps,
    }


def _softmax_columns(
    entropy: torch.Tensor,
    support: torch.Tensor,
    max_weight: torch.Tensor,
    top2_gap: torch.Tensor,
    target_mass: torch.Tensor,
    sink_mass: torch.Tensor,
    n_keys: torch.Tensor,
) -> dict[str, torch.Tensor]:
    return {
        "entropy": entropy,
        "entropy_norm": normalized_entropy(entropy, n_keys),
        "support": support.long(),
        "max_weight": max_weight,
        "top2_gap": top2_gap,
        "target_mass": target_mass,
        "sink_mass": sink_mass,
    }


def _readable_stats(zm: torch.Tensor, target: torch.Tensor | None, opt: RowOptions) -> dict[str, torch.Tensor]:
    if target is not None and not (zm.gather(-1, target.unsqueeze(-1)) > -math.inf).all():
        raise ArgumentError("a target index points at a masked key; targets must be attended keys")
    k = kernel.for_rows(zm) if zm.numel() else None
    basics = _kernel_basics(k, zm, target, opt) if k is not None else _torch_basics(zm, target, opt)
    first, n_keys = basics["first"], basics["n_keys"]
    rest = basics["rest"]
    if target is not None:
        # the largest score but the target's: the runner-up's where the target is the argmax, else the max
        rest = torch.where(target == first, rest, zm.gather(-1, first.unsqueeze(-1)).squeeze(-1))
    else:
        target = first
    m = conc.margins(zm, target, opt.b, rest_max=rest)
    out: dict[str, torch.Tensor] = {
        "status": conc.status(m["u_star"], opt.tau),
        "target": target,
        "target_is_max": m["target_is_max"],
        "n_keys": n_keys,
        "a_act": basics["a_act"],
        "delta": m["delta"],
        "u_star": m["u_star"],
        "rho": m["rho"],
    }
    for p in opt.p:
        out[f"s_p{_deg(p)}"] = basics["s_p"][p]
    out["p_star"] = conc.p_star(basics["a_act"], m["rho"], m["target_is_max"])
    if opt.sigmoid:
        out["s_sigmoid"] = conc.s_sigmoid(zm, target, opt.b)
    out["argmax"] = first
    rm = rowmaps.get(opt.rowmap)
    for i, beta in enumerate(opt.beta):
        suffix = opt.beta_suffix(beta)
        if basics["softmax"] is not None:
            cols = basics["softmax"][i]
        else:
            w = weights(zm, rm, beta)
            cols = dispersion(w, zm, first, basics["second"], n_keys, beta, softmax=opt.rowmap == "softmax")
            cols["target_mass"] = key_mass(w, target)
            cols["sink_mass"] = key_mass(w, basics["sink"])
            del w
        for name, v in cols.items():
            out[name + suffix] = v
        # p*_n(beta) is softmax's largest weight (Hayase & Karakida 2026 App. D): already at hand for softmax.
        out["p_star_n" + suffix] = (
            out["max_weight" + suffix] if opt.rowmap == "softmax" else p_star_n(zm, (beta,))[:, 0]
        )
    out.update(basics["gaps"])
    if opt.gamma:
        gammas = torch.tensor(opt.gamma, dtype=zm.dtype)
        ps = p_star_n(zm, out["lambda_n"].unsqueeze(-1) * gammas)
        for j, gamma in enumerate(opt.gamma):
            out[f"p_star_n_gamma{gamma:g}"] = ps[:, j]
    return out


LABELS = np.array([*conc.STATUS, *SPECIAL], dtype=object)


def _column(
    name: str, values: torch.Tensor, code: torch.Tensor, readable: np.ndarray | None
) -> np.ndarray | pd.arrays.BooleanArray | pd.arrays.IntegerArray:
    """Scatter per-readable-row values into a full-length column (``readable`` None: every row is):
    NaN or NA on unreadable rows, whose status is their special label. Integer and boolean columns are
    pandas' nullable types always, so every block has the same schema."""
    v = values.numpy()
    if name == "status":
        full = code.numpy() + len(conc.STATUS) - 1
        if readable is not None:
            full[readable] = v
        return LABELS[full if readable is not None else v]
    if readable is not None:
        col = np.zeros(len(readable), dtype=v.dtype) if v.dtype.kind != "f" else np.full(len(readable), np.nan)
        col[readable] = v
        v = col
    if v.dtype.kind == "f":
        return v
    missing = np.zeros(len(v), dtype=bool) if readable is None else ~readable
    if v.dtype == np.bool_:
        return pd.arrays.BooleanArray(v, missing)
    return pd.arrays.IntegerArray(v.astype(np.int64), missing)


def blocks(
    rows: torch.Tensor,
    mask: torch.Tensor | None,
    target: torch.Tensor | None,
    opt: RowOptions,
    chunk_values: int | None = None,
) -> Iterator[tuple[int, pd.DataFrame]]:
    """(first row, records) for successive blocks of rows from ``flat_rows``: the float64 copies and
    temporaries stay O(chunk_values) scores (default CHUNK_VALUES) however many rows come."""
    step = max(1, (CHUNK_VALUES if chunk_values is None else chunk_values) // rows.shape[-1])
    for i in range(0, max(rows.shape[0], 1), step):
        zm = masked_float64(rows[i : i + step], None if mask is None else mask[i : i + step])
        yield i, stats_frame(zm, None if target is None else target[i : i + step], opt)


def stats_frame(zm: torch.Tensor, target: torch.Tensor | None, opt: RowOptions) -> pd.DataFrame:
    """Records of float64 rows zm (-inf at masked keys) validated by ``flat_rows``."""
    code = _special(zm.amax(-1))
    readable = code == 0
    every = bool(readable.all())
    sub: Callable[[torch.Tensor], torch.Tensor] = (lambda t: t) if every else (lambda t: t[readable])
    stats = _readable_stats(sub(zm), None if target is None else sub(target), opt)
    keep = None if every else readable.numpy()
    cols = {k: _column(k, v, code, keep) for k, v in stats.items()}
    for p in opt.p:
        s = cols[f"s_p{_deg(p)}"]
        known = ~np.isnan(s)
        cols[f"safe_p{_deg(p)}"] = _flag(s < 1, known)
        cols[f"safe_eps_p{_deg(p)}"] = _flag(s < 1 + opt.eps, known)
        cols[f"pred_safe_p{_deg(p)}"] = _flag(p >= cols["p_star"], ~np.isnan(cols["p_star"]))
    return pd.DataFrame(cols)


def _flag(values: np.ndarray, known: np.ndarray) -> pd.arrays.BooleanArray:
    return pd.arrays.BooleanArray(values & known, ~known)


def row_stats(
    scores: torch.Tensor | np.ndarray,
    mask: torch.Tensor | np.ndarray | None = None,
    *,
    p: float | Sequence[float] = (2, 4, 8, 16),
    b: float = 0.0,
    tau: float | None = None,
    target: torch.Tensor | ArrayLike | None = None,
    eps: float = 1e-6,
    beta: float | Sequence[float] = 1.0,
    sink: int = 0,
    rowmap: str = "softmax",
    sigmoid: bool = False,
    r: float | str | None = None,
    gamma: float | Sequence[float] = (),
) -> pd.DataFrame:
    """One record per score row (leading dims of ``scores`` flattened in C order), in float64.

    scores: (..., n) floating tensor or array, keys last. mask: bool, True = key may be attended,
    broadcasting to scores. target: per-row answer key index (shape scores.shape[:-1] or broadcasting
    to it); None = the row argmax (Polynomial Concentration §3, App. S). b, tau: bias and optional cap of
    r = clamp(z + b, 0, tau). p: degrees of S_p. eps: tolerance of the measured-safe rule
    ``safe_eps_p*`` (S_p < 1 + eps, Polynomial Concentration App. P) and of the contact gap (Hayase & Karakida 2026
    §4.2). beta: inverse temperature(s) of ``rowmap`` for the dispersion columns, the sink and target mass and
    p*_n(beta); with several betas those columns get a ``_beta<b>`` suffix. sink: which allowed key is the sink (0 =
    the first allowed key; NaN where not yet visible). sigmoid: add S_sigma (App. T). r: add lambda_resolved,
    Lambda_n^(r) at resolution r (a number, or "auto" for log(1 + log n), Hayase & Karakida 2026 App. D); it reads
    deeper into each row than Lambda_n and costs more. gamma: add p*_n(gamma Lambda_n) columns
    ``p_star_n_gamma<g>`` (the App. D.1 boundary check).

    Columns: status, target, target_is_max, n_keys, a_act, delta, u_star, rho, s_p<p>, p_star, entropy,
    entropy_norm, support, max_weight, top2_gap, target_mass, sink_mass, argmax, lambda_n, tie,
    contact_gap, contact_count, alpha_n, contact_entropy, p_star_n, [lambda_resolved], safe_p<p>
    (S_p < 1), safe_eps_p<p> (S_p < 1 + eps), pred_safe_p<p> (p >= p_star); boolean columns are NA
    where their statistic is undefined.
    """
    opt = RowOptions.make(
        p=p, b=b, tau=tau, eps=eps, beta=beta, sink=sink, rowmap=rowmap, sigmoid=sigmoid, r=r, gamma=gamma
    )
    frames = [frame for _, frame in blocks(*flat_rows(scores, mask, target), opt)]
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
