"""Feed-forward blocks and norms of attnlab's causal decoder (Zhu et al. 2026 §3-4).

    >>> ffn = make_ffn("swiglu", 960, 3840, bias=False)    # width 2560: the parameters of GELU-3840
    >>> norm = make_norm("rmsnorm", 960, bias=False, eps=1e-5)

Linear layers are named ``up`` and ``down`` (GELU) or ``gate``, ``up`` and ``down`` (gated) so a trainer
can select parameters by name; the module's output is the FFN's residual write, which a probe reads with a
forward hook. GELU is the exact erf form (torch's default) everywhere, gate included.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.errors import ArgumentError
from attnlab.registry import Registry

GATED_KINDS = ("swiglu", "geglu")
NORM_KINDS = ("layernorm", "rmsnorm")

_GATE_ACTIVATION = {"swiglu": F.silu, "geglu": F.gelu}


def _check_kind(name: str, value, kinds: tuple[str, ...]) -> None:
    if value not in kinds:
        raise ArgumentError(f"{name} must be one of {', '.join(map(repr, kinds))}, got {value!r}")


def _check_count(name: str, value) -> None:
    # bool is an int subclass, and True as a width is always a mistake
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"{name} must be an int >= 1, got {value!r}")


def _check_flag(name: str, value) -> None:
    if not isinstance(value, bool):
        raise ArgumentError(f"{name} must be a bool, got {value!r}")


def matched_width(gelu_width: int, kind: str, *, multiple_of: int = 1) -> int:
    """Hidden width of a ``kind`` FFN with the parameters and FLOPs of a GELU FFN of width ``gelu_width``.

    Zhu et al. 2026 §4 replaces GELU width 3840 by gated width 2560: three d x r matrices match two d x h ones
    when r = 2h/3. For a gated kind this returns the multiple of ``multiple_of`` nearest to 2h/3 (exact
    halves round up, so a tie never shrinks the block), and at least ``multiple_of``; with the default
    multiple_of=1 that is the nearest integer, and the match is exact when 3 divides h. For "gelu" it
    returns ``gelu_width`` unchanged (it is the reference) and ``multiple_of`` is not applied.
    """
    _check_kind("kind", kind, ("gelu", *GATED_KINDS))
    _check_count("gelu_width", gelu_width)
    _check_count("multiple_of", multiple_of)
    if kind == "gelu":
        return gelu_width
    # floor(2h/(3m) + 1/2) in integers, so that large widths do not pick up float rounding
    return max(1, (4 * gelu_width + 3 * multiple_of) // (6 * multiple_of)) * multiple_of


class GeluFFN(nn.Module):
    """GPT-style single-branch FFN ``down(gelu(up(x)))`` (Zhu et al. 2026 eq. 2)."""

    kind = "gelu"

    def __init__(self, d_model: int, width: int, *, bias: bool) -> None:
        _check_count("d_model", d_model)
        _check_count("width", width)
        _check_flag("bias", bias)
        super().__init__()
        self.width = width
        self.up = nn.Linear(d_model, width, bias=bias)
        self.down = nn.Linear(width, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class GatedFFN(nn.Module):
    """Multiplicative gated FFN ``down(act(gate(x)) * up(x))`` (Zhu et al. 2026 eq. 3): act is SiLU for "swiglu",
    GELU for "geglu", with the same three matrices, so the two differ only in the gate activation."""

    def __init__(self, kind: str, d_model: int, width: int, *, bias: bool) -> None:
        _check_kind("kind", kind, GATED_KINDS)
        _check_count("d_model", d_model)
        _check_count("width", width)
        _check_flag("bias", bias)
        super().__init__()
        self.kind = kind
        self.width = width
        self.gate = nn.Linear(d_model, width, bias=bias)
        self.up = nn.Linear(d_model, width, bias=bias)
        self.down = nn.Linear(width, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(_GATE_ACTIVATION[self.kind](self.gate(x)) * self.up(x))


FFNS: Registry[Callable[..., nn.Module]] = Registry("ffn")
"""FFN builders ``(d_model, width, *, bias, matched) -> module`` by the name a config's ``ffn`` field holds;
``FFNS.register("mine")`` on a builder adds one's own."""


@FFNS.register("gelu")
def _gelu(d_model: int, width: int, *, bias: bool, matched: bool) -> GeluFFN:
    return GeluFFN(d_model, width, bias=bias)  # the reference width: matching changes nothing


def _gated(kind: str) -> Callable[..., GatedFFN]:
    def build(d_model: int, width: int, *, bias: bool, matched: bool) -> GatedFFN:
        return GatedFFN(kind, d_model, matched_width(width, kind) if matched else width, bias=bias)

    return build


for _kind in GATED_KINDS:
    FFNS.register(_kind, _gated(_kind))


def make_ffn(kind: str, d_model: int, width: int, *, bias: bool, matched: bool = True) -> nn.Module:
    """A ``kind`` FFN (a name in ``FFNS``) on ``d_model`` features.

    ``width`` is the GELU-equivalent width: with ``matched`` a gated kind gets ``matched_width(width,
    kind)``, the Zhu et al. 2026 §4 rule that keeps parameters and FLOPs equal to the GELU block it replaces.
    ``matched=False`` uses ``width`` as the hidden width as it is (Zhu et al. 2026's GELU-2560 capacity control,
    or a width already taken from ``matched_width`` with a ``multiple_of``).
    """
    _check_kind("kind", kind, tuple(FFNS))
    _check_flag("matched", matched)
    return FFNS[kind](d_model, width, bias=bias, matched=matched)


def make_norm(kind: str, d_model: int, *, bias: bool, eps: float) -> nn.LayerNorm | nn.RMSNorm:
    """LayerNorm (GPT-style) or RMSNorm (LLaMA-style) over the last ``d_model`` features (Zhu et al. 2026 §4).

    ``bias`` gives LayerNorm its additive bias; RMSNorm has none (it neither centres nor shifts), so one
    ``bias`` flag can serve a whole decoder, as in Zhu et al. 2026's GPT+RMSNorm ablation with biased projections.
    """
    _check_kind("kind", kind, NORM_KINDS)
    _check_count("d_model", d_model)
    _check_flag("bias", bias)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (math.isfinite(eps) and eps > 0):
        raise ArgumentError(f"eps must be a finite number > 0, got {eps!r}")
    if kind == "layernorm":
        return nn.LayerNorm(d_model, eps=float(eps), bias=bias)
    return nn.RMSNorm(d_model, eps=float(eps))
