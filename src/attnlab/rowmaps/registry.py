"""The one registry of row maps, keyed by the names users type (``relu_p4_b3.55``, ``entmax_a1.5``...).

Parameters are checked when a name is parsed; each range below is wide for scores of size 1..100 and
keeps every map finite in float32:

- temperature t (``softmax_t``) and scale s (``ssmax_s``) in [1e-4, 1e4]: the factor on the scores
  (1/t, s log L) and its reciprocal stay normal float32 numbers, and scores up to 1e34 stay finite;
- bias b (``relu_p``, ``sigmoid``) in [-1e4, 1e4]: at |b| = 1e4, z + b in float32 already rounds
  the scores to ulp(1e4) = 1e-3;
- degree p (``relu_p``, ``wortsman``) in (0, 256]: q^p carries p times q's relative rounding, 1.5e-5
  at p = 256 in float32;
- exponent xi (``logn``) in [-8, 8]: the factor max(1, log L / log n_train)^xi stays within
  [63^-8, 63^8] = [4e-15, 2.5e14] for L <= 2^63 keys and n_train >= 2;
- n_train (``logn``) a finite integer >= 2; alpha (``entmax``) finite, >= 1; k (``topk``) >= 1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .entmax import check as check_entmax
from .entmax import entmax as _entmax_rows
from . import pointwise as _pw
from . import softmax as _sm
from ._rows import apply_rows

_NUM = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"


@dataclass(frozen=True)
class RowMap:
    """A row map: ``rowmap(scores, mask=None, dim=-1)`` returns weights of the scores' shape and dtype.

    ``mask`` is boolean (True = the key may be attended) and broadcasts to ``scores``. See
    ``attnlab.rowmaps._rows`` for the rules on masked, empty, NaN and infinite rows.
    """

    name: str
    family: str
    params: dict[str, Any]
    formula: str
    normalized: bool
    rows: Callable[[torch.Tensor], torch.Tensor] | None = field(repr=False, compare=False)

    @property
    def needs_bias(self) -> bool:
        """True for ``..._bauto`` names: the caller must resolve b (Polynomial Concentration App. B, J) first."""
        return self.rows is None

    def __call__(
        self, scores: torch.Tensor, mask: torch.Tensor | None = None, *, dim: int = -1
    ) -> torch.Tensor:
        if self.rows is None:
            raise ValueError(
                f"row map {self.name!r} has b=auto: resolve it first with .with_bias(b) "
                "(b_auto comes from calibration on held-out text)"
            )
        return apply_rows(scores, mask, dim, self.rows)

    def with_bias(self, b: float) -> RowMap:
        """The same map with bias b, named as a user would type it (``relu_p4_b3.55``)."""
        if "b" not in self.params:
            raise ValueError(f"row map {self.name!r} has no bias parameter")
        if not math.isfinite(b):
            raise ValueError(f"bias must be finite, got {b!r}")
        stem = self.name.rsplit("_b", 1)[0]
        return get(f"{stem}_b{b:g}", **self.options)

    @property
    def options(self) -> dict[str, Any]:
        return {k: v for k, v in self.params.items() if k in ("dead", "method")}


@dataclass(frozen=True)
class Family:
    pattern: str
    example: str
    formula: str
    params: str
    source: str
    options: tuple[str, ...]
    build: Callable[..., RowMap]


SCALE_RANGE = (1e-4, 1e4)  # temperature t and ssmax's s (module doc)
BIAS_RANGE = (-1e4, 1e4)
MAX_DEGREE = 256.0
XI_RANGE = (-8.0, 8.0)


def _within(name: str, what: str, value: float, bounds: tuple[float, float]) -> float:
    lo, hi = bounds
    if not lo <= value <= hi:  # NaN fails too
        raise ValueError(f"{name}: {what} = {value:g} is outside the allowed range [{lo:g}, {hi:g}]")
    return value


def _degree(name: str, value: float) -> float:
    if not 0 < value <= MAX_DEGREE:
        raise ValueError(f"{name}: degree p = {value:g} is outside the allowed range (0, {MAX_DEGREE:g}]")
    return value


def _bias(name: str, text: str) -> float | None:
    return None if text == "auto" else _within(name, "bias b", float(text), BIAS_RANGE)


def _softmax(name, m, **o):
    return RowMap(name, "softmax", {}, "exp(z_i) / sum_j exp(z_j)", True, _sm.softmax)


def _temp(name, m, **o):
    t = _within(name, "temperature t", float(m[1]), SCALE_RANGE)
    return RowMap(name, "softmax", {"t": t}, "softmax(z / t)", True,
                  lambda z: _sm.softmax_temperature(z, t))


def _ssmax(name, m, **o):
    s = _within(name, "scale s", float(m[1]), SCALE_RANGE)
    return RowMap(name, "ssmax", {"s": s}, "softmax(s log(L) z), L = allowed keys", True,
                  lambda z: _sm.ssmax(z, s))


def _logn(name, m, **o):
    xi, n_train = _within(name, "xi", float(m[1]), XI_RANGE), float(m[2])
    if not (math.isfinite(n_train) and n_train >= 2):
        raise ValueError(f"{name}: n_train = {n_train:g} must be a finite integer >= 2")
    return RowMap(name, "logn", {"xi": xi, "n_train": n_train},
                  "softmax(max(1, log L / log n_train)^xi z)", True,
                  lambda z: _sm.logn_softmax(z, xi, n_train))


def _topk(name, m, **o):
    k = int(m[1])
    if k < 1:
        raise ValueError(f"{name}: k must be at least 1")
    return RowMap(name, "topk", {"k": k}, "softmax over the k largest z (ties kept)", True,
                  lambda z: _sm.topk_softmax(z, k))


def _entmax_map(name, alpha, method="newton"):
    try:
        check_entmax(alpha, method)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    return RowMap(name, "entmax", {"alpha": alpha, "method": method},
                  "[(alpha-1) z_i - tau]_+^(1/(alpha-1)), tau so the row sums to 1", True,
                  lambda z: _entmax_rows(z, alpha, method))


def _entmax_fam(name, m, method="newton", **o):
    return _entmax_map(name, float(m[1]), method)


def _sparsemax(name, m, method="newton", **o):
    return _entmax_map(name, 2.0, method)


def _relu(name, m, dead="zeros", **o):
    p, b = _degree(name, float(m[1])), _bias(name, m[2])
    if dead not in _pw.DEAD_RULES:
        raise ValueError(f"{name}: dead-row rule must be one of {_pw.DEAD_RULES}, got {dead!r}")
    rows = None if b is None else (lambda z: _pw.relu_power(z, p, b, dead))
    return RowMap(name, "relu_p", {"p": p, "b": b, "dead": dead},
                  "ReLU(z_i + b)^p / sum_j ReLU(z_j + b)^p", True, rows)


def _sigmoid(name, m, **o):
    b = _bias(name, m[1])
    rows = None if b is None else (lambda z: _pw.sigmoid_normalized(z, b))
    return RowMap(name, "sigmoid", {"b": b}, "sigmoid(z_i + b) / sum_j sigmoid(z_j + b)", True, rows)


def _wortsman(name, m, **o):
    p, by = _degree(name, float(m[1])), m[2]
    return RowMap(name, "wortsman", {"p": p, "by": by},
                  f"ReLU(z_i)^p / {'L' if by == 'L' else 'sqrt(L)'}, L = allowed keys (not normalized)",
                  False, lambda z: _pw.wortsman(z, p, by))


def _reluattn(name, m, **o):
    return RowMap(name, "reluattn", {}, "ReLU(z_i) / max(L - 2, 1), L = allowed keys (not normalized)",
                  False, _pw.relu_attention)


FAMILIES: tuple[Family, ...] = (
    Family(r"softmax", "softmax", "exp(z_i) / sum_j exp(z_j)", "-", "all seeds", (), _softmax),
    Family(rf"softmax_t({_NUM})", "softmax_t0.5", "softmax(z / t)", "t in [1e-4, 1e4]: temperature",
           "Hayase & Karakida 2026 §2", (), _temp),
    Family(rf"ssmax_s({_NUM})", "ssmax_s0.43", "softmax(s log(L) z)", "s in [1e-4, 1e4]; L = allowed keys",
           "Vasylenko et al. 2025 §5 (Scalable-Softmax)", (), _ssmax),
    Family(rf"logn_xi({_NUM})_n(\d+)", "logn_xi2_n8192", "softmax(max(1, log L / log n_train)^xi z)",
           "xi in [-8, 8]: exponent; n_train >= 2: training length", "Hayase & Karakida 2026 App. A.2", (), _logn),
    Family(r"topk_k(\d+)", "topk_k32", "softmax over the k largest scores (ties kept)", "k >= 1",
           "Vasylenko et al. 2025 §5 (top-K)", (), _topk),
    Family(rf"entmax_a({_NUM})", "entmax_a1.5", "[(alpha-1) z_i - tau]_+^(1/(alpha-1))",
           "alpha >= 1 (1 = softmax, 2 = sparsemax); option method=newton|sort",
           "Vasylenko et al. 2025 §2.2, App. A", ("method",), _entmax_fam),
    Family(r"sparsemax", "sparsemax", "[z_i - tau]_+ (alpha-entmax at alpha = 2)",
           "option method=newton|sort", "Vasylenko et al. 2025 App. A", ("method",), _sparsemax),
    Family(rf"relu_p({_NUM})_b({_NUM}|auto)", "relu_p4_b3.55", "ReLU(z_i + b)^p / sum_j ReLU(z_j + b)^p",
           "p in (0, 256]; b in [-1e4, 1e4] or 'auto' (resolved by the caller); option dead=zeros|uniform|softmax",
           "Polynomial Concentration §5.3, Alg. 1", ("dead",), _relu),
    Family(rf"sigmoid_b({_NUM}|auto)", "sigmoid_b0", "sigmoid(z_i + b) / sum_j sigmoid(z_j + b)",
           "b in [-1e4, 1e4]: bias, or 'auto'", "Polynomial Concentration §5.3, App. T", (), _sigmoid),
    Family(rf"wortsman_p({_NUM})_(L|sqrtL)", "wortsman_p2_sqrtL", "ReLU(z_i)^p / L or / sqrt(L)",
           "p in (0, 256]; L = allowed keys; not normalized", "Polynomial Concentration §5.3 (Wortsman et al. 2023)", (),
           _wortsman),
    Family(r"reluattn", "reluattn", "ReLU(z_i) / max(L - 2, 1)", "L = allowed keys; not normalized",
           "Attention Sinks Essential §3.4", (), _reluattn),
)


def get(name: str, **options: Any) -> RowMap:
    """The row map called ``name``; ``options`` are family options (``dead=``, ``method=``).

    Raises ValueError for an unknown name or option, or a parameter outside its range (module doc).
    """
    if not isinstance(name, str):
        raise TypeError(f"row map name must be a string, got {type(name).__name__}")
    for fam in FAMILIES:
        m = re.fullmatch(fam.pattern, name)
        if m:
            unknown = set(options) - set(fam.options)
            if unknown:
                allowed = ", ".join(fam.options) or "none"
                raise ValueError(f"{name}: unknown option(s) {sorted(unknown)}; allowed: {allowed}")
            return fam.build(name, m, **options)
    examples = ", ".join(f.example for f in FAMILIES)
    raise ValueError(f"unknown row map {name!r}; names look like: {examples}")

