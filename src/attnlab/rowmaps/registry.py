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
import numbers
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.registry import Registry
from attnlab.rowmaps._rows import apply_rows

NUM = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"  # a number as users type it in a name


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

    def __call__(self, scores: torch.Tensor, mask: torch.Tensor | None = None, *, dim: int = -1) -> torch.Tensor:
        if self.rows is None:
            raise ArgumentError(
                f"row map {self.name!r} has b=auto: resolve it first with .with_bias(b) "
                "(b_auto comes from calibration on held-out text)"
            )
        return apply_rows(scores, mask, dim, self.rows)

    def with_bias(self, b: float) -> RowMap:
        """The same map with bias b, named as a user would type it (``relu_p4_b3.55``)."""
        if "b" not in self.params:
            raise ArgumentError(f"row map {self.name!r} has no bias parameter")
        if not math.isfinite(b):
            raise ArgumentError(f"bias must be finite, got {b!r}")
        stem = self.name.rsplit("_b", 1)[0]
        return get(f"{stem}_b{b:g}", **self.options)

    @property
    def options(self) -> dict[str, Any]:
        """The family options this map was built with (``dead=``, ``method=``)."""
        return {k: v for k, v in self.params.items() if k in family_of(self.name).options}


RowFn = Callable[[torch.Tensor], torch.Tensor]  # rows over the last dimension -> weights
Built = tuple[dict[str, Any], RowFn | None]  # a builder's result: the map's parameters and its row function
Build = Callable[..., Built]


@dataclass(frozen=True)
class Family:
    """A family of row maps: names matching ``pattern`` (a full-match regex) build one map each.

    ``build(name, match, **options)`` returns the map's parameters and its row function (None while a
    bias is 'auto'); ``formula``, ``params`` and ``source`` are the text ``attnlab maps`` shows and each
    built map carries, written once here. ``family`` is the label maps of this family report (several
    registry entries may share one: sparsemax is alpha-entmax at alpha = 2).
    """

    key: str
    pattern: str
    example: str
    formula: str
    params: str
    source: str
    build: Build = field(repr=False)
    options: tuple[str, ...] = ()
    normalized: bool = True
    family: str = ""

    def __post_init__(self) -> None:
        if not self.family:
            object.__setattr__(self, "family", self.key)
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise ArgumentError(
                f"row map family {self.key!r}: pattern {self.pattern!r} is not a regex ({exc})"
            ) from None
        if not re.fullmatch(self.pattern, self.example):
            raise ArgumentError(
                f"row map family {self.key!r}: example {self.example!r} does not match {self.pattern!r}"
            )


FAMILIES: Registry[Family] = Registry("row map family")


def register(
    key: str,
    *,
    formula: str,
    source: str,
    pattern: str | None = None,
    example: str | None = None,
    params: str = "-",
    options: tuple[str, ...] = (),
    normalized: bool = True,
    family: str = "",
    replace: bool = False,
) -> Callable[[Build], Build]:
    """Declare a family of row maps on its builder, in the manner of transformers' ``AttentionInterface``:

        >>> @rowmaps.register("cubic", formula="ReLU(z_i)^3 / sum_j ReLU(z_j)^3", source="my notes")
        ... def _cubic(name, match):
        ...     return {}, lambda z: rowmaps.relu_power(z, 3.0, 0.0)
        >>> rowmaps.get("cubic")

    ``pattern`` defaults to the key itself (a map without parameters); its groups reach the builder as
    ``match``. The row function receives rows over the last dimension with masked keys at -inf
    (``attnlab.rowmaps.apply_rows`` gives the rules for empty, NaN and infinite rows).
    """

    def add(build: Build) -> Build:
        FAMILIES.register(
            key,
            Family(
                key,
                re.escape(key) if pattern is None else pattern,
                key if example is None else example,
                formula,
                params,
                source,
                build,
                tuple(options),
                normalized,
                family,
            ),
            replace=replace,
        )
        return build

    return add


def family_of(name: str) -> Family:
    """The family whose pattern matches ``name``; ValueError listing every family's example otherwise."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"row map name must be a string, got {type(name).__name__}")
    for fam in FAMILIES.values():
        if re.fullmatch(fam.pattern, name):
            return fam
    examples = ", ".join(f.example for f in FAMILIES.values())
    raise ArgumentError(f"unknown row map {name!r}; names look like: {examples}")


def get(name: str, **options: Any) -> RowMap:
    """The row map called ``name``; ``options`` are family options (``dead=``, ``method=``).

    Raises ValueError for an unknown name or option, or a parameter outside its range (module doc).
    """
    fam = family_of(name)
    unknown = set(options) - set(fam.options)
    if unknown:
        allowed = ", ".join(fam.options) or "none"
        raise ArgumentError(f"{name}: unknown option(s) {sorted(unknown)}; allowed: {allowed}")
    params, rows = fam.build(name, re.fullmatch(fam.pattern, name), **options)
    return RowMap(name, fam.family, params, fam.formula, fam.normalized, rows)


SCALE_RANGE = (1e-4, 1e4)  # temperature t and ssmax's s (module doc)
BIAS_RANGE = (-1e4, 1e4)
MAX_DEGREE = 256.0
XI_RANGE = (-8.0, 8.0)


def within(name: str, what: str, value: float, bounds: tuple[float, float]) -> float:
    """``value`` if it lies in ``bounds``; ValueError naming the map, the parameter and the range."""
    lo, hi = bounds
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name}: {what} must be a number in [{lo:g}, {hi:g}], got {type(value).__name__}")
    if not lo <= value <= hi:  # NaN fails too
        raise ArgumentError(f"{name}: {what} = {value:g} is outside the allowed range [{lo:g}, {hi:g}]")
    return value


def degree(name: str, value: float) -> float:
    """A degree p in (0, MAX_DEGREE]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name}: degree p must be a number in (0, {MAX_DEGREE:g}], got {type(value).__name__}")
    if not 0 < value <= MAX_DEGREE:
        raise ArgumentError(f"{name}: degree p = {value:g} is outside the allowed range (0, {MAX_DEGREE:g}]")
    return value


def bias(name: str, text: str) -> float | None:
    """A bias b as typed in a name: None for 'auto', else a number in BIAS_RANGE."""
    return None if text == "auto" else within(name, "bias b", float(text), BIAS_RANGE)
