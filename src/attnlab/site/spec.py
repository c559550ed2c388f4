"""What a call of :func:`attnlab.site.blockwise` says besides its tensors, as small validated objects: how the scores
are formed (:class:`Scores`, with a position bias as :class:`Slopes`), which keys a query may attend
(:class:`Causal`), what else the layer does (:class:`Plan`, with a :class:`LengthScale`), and what its observers
receive (:class:`ScoreBlock`, :class:`WeightBlock`). ``attnlab.site`` exports them all."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.rowmaps import RowMap

MIN_BLOCK = 32
DEFAULT_BLOCK = 512
KERNELS = ("auto", "triton", "torch")


@dataclass(frozen=True)
class ScoreBlock:
    """What an observer sees: the pre-map scores of a block of queries of one layer.

    ``scores`` (batch, heads, queries, keys) are post-softcap, with the additive mask added, before any
    length multiplier or row map: the row z of Polynomial Concentration App. B. ``allowed`` (bool, broadcastable to
    ``scores``) marks the keys each query may attend. ``query_start`` is the index of the block's first
    query among the call's ``n_queries``; with a key cache, query i sits at key position
    ``n_keys - n_queries + i``.
    """

    layer: int
    scores: torch.Tensor
    allowed: torch.Tensor
    query_start: int
    n_queries: int

    @property
    def n_keys(self) -> int:
        return self.scores.shape[-1]

    @property
    def first_position(self) -> int:
        """Key position of the block's first query (its absolute position in the sequence)."""
        return self.n_keys - self.n_queries + self.query_start


Observer = Callable[[ScoreBlock], None]


@dataclass(frozen=True)
class WeightBlock:
    """What a weight observer sees: the attention weights (batch, heads, queries, keys) of a block of
    queries of one layer, after the row map (and any scale) and before dropout, still in the autograd
    graph so a regularizer can use them. The other fields are those of :class:`ScoreBlock`."""

    layer: int
    weights: torch.Tensor
    allowed: torch.Tensor
    query_start: int
    n_queries: int


WeightObserver = Callable[[WeightBlock], None]


@dataclass(frozen=True)
class LengthScale:
    """The inference-time multiplier m(n; xi) = max(1, log n / log n_train)^xi on the logits, with n the
    number of keys the query may attend (Hayase & Karakida 2026 App. A.2). Observers still read the unscaled row."""

    xi: float
    n_train: int

    def __post_init__(self) -> None:
        if not (isinstance(self.xi, (int, float)) and math.isfinite(self.xi) and self.xi >= 0):
            raise ArgumentError(f"length multiplier exponent xi must be a finite number >= 0, got {self.xi!r}")
        if not (isinstance(self.n_train, int) and self.n_train >= 2):
            raise ArgumentError(
                f"length multiplier n_train must be an int >= 2 (the training length), got {self.n_train!r}"
            )


@dataclass(frozen=True)
class Plan:
    """What the site does in one layer besides attending: per-head row maps (heads not listed keep the
    model's softmax), observers of the scores and of the weights, an optional length multiplier, the
    query block size, the layer's index and dropout on the weights. ``fused=False`` keeps the
    block-materializing path even where the fused one applies (to compare the two). ``kernel`` says where the
    fused Triton attention (:mod:`attnlab.site.route`) may serve the layer: "auto" on CUDA tensors, "triton" on
    any device (on the CPU under Triton's interpreter, for tests), "torch" nowhere."""

    maps: Mapping[int, RowMap] = field(default_factory=dict)
    observers: Sequence[Observer] = ()
    weight_observers: Sequence[WeightObserver] = ()
    length_scale: LengthScale | None = None
    block: int = DEFAULT_BLOCK
    fused: bool = True
    layer: int = 0  # the layer's index, which observers receive
    dropout: float = 0.0  # dropout on the weights: the caller sets it in training only
    kernel: str = "auto"

    def __post_init__(self) -> None:
        if not (isinstance(self.block, int) and self.block >= MIN_BLOCK):
            raise ArgumentError(f"query block must be an int >= {MIN_BLOCK}, got {self.block!r}")
        if not (isinstance(self.dropout, (int, float)) and 0 <= self.dropout < 1):
            raise ArgumentError(f"dropout must be a probability in [0, 1), got {self.dropout!r}")
        if not isinstance(self.fused, bool):
            raise ArgumentError(f"fused must be True or False, got {self.fused!r}")
        if self.kernel not in KERNELS:
            raise ArgumentError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")
        for head, rowmap in self.maps.items():
            if not isinstance(rowmap, RowMap) or isinstance(head, bool) or not isinstance(head, int):
                raise ArgumentTypeError(
                    f"plan maps take head index -> RowMap (attnlab.rowmaps.get), got {head!r}: {type(rowmap).__name__}"
                )
            if rowmap.needs_bias:
                raise ArgumentError(
                    f"head {head}: row map {rowmap.name!r} has b=auto; resolve b first (attnlab.hooks.calibrate_b_auto)"
                )


VANILLA = Plan()


@dataclass(frozen=True)
class Causal:
    """The causal mask, built per block: a query attends the keys up to its own position; with ``window``, only
    the last ``window`` of them (a sliding-window layer). The other masks ``attend`` takes are tensors: boolean
    (True = may attend) or additive, broadcastable to (batch, heads, queries, keys)."""

    window: int | None = None

    def __post_init__(self) -> None:
        if self.window is not None and not (isinstance(self.window, int) and self.window >= 1):
            raise ArgumentError(f"window must be an int >= 1, got {self.window!r}")


@dataclass(frozen=True)
class Slopes:
    """The linear position bias of :func:`position_bias` (ALiBi, NAPE), one slope per head, built by the site for
    each tile of scores it computes."""

    slopes: torch.Tensor

    def __post_init__(self) -> None:
        if not (isinstance(self.slopes, torch.Tensor) and self.slopes.is_floating_point() and self.slopes.dim() == 1):
            raise ArgumentTypeError(
                f"slopes must be a 1-D floating tensor, one slope per head, got {describe(self.slopes)}"
            )


@dataclass(frozen=True)
class Scores:
    """How a row of scores is formed before its map: z = scale * (cap(q k^T * scaling) + bias), where
    cap(x) = softcap * tanh(x / softcap) when ``softcap`` is set (Gemma); ``bias`` is :class:`Slopes` or a
    function ``bias(start, stop)`` giving an additive bias for query rows start..stop-1, broadcastable to (batch,
    heads, rows, keys), built per block so that no (queries x keys) tensor is held; ``scale`` (broadcastable to
    (batch, heads, queries, 1)) is a learnable inverse temperature. Observers read z before ``scale``."""

    scaling: float
    softcap: float | None = None
    bias: Slopes | Callable[[int, int], torch.Tensor] | None = None
    scale: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if not _positive(self.scaling):
            raise ArgumentError(f"scaling must be a finite number > 0, got {self.scaling!r}")
        if self.softcap is not None and not _positive(self.softcap):
            raise ArgumentError(f"softcap must be a finite number > 0 or None, got {self.softcap!r}")
        if not (self.bias is None or isinstance(self.bias, Slopes) or callable(self.bias)):
            raise ArgumentTypeError(
                f"bias must be Slopes(...), a function bias(start, stop) or None, got {describe(self.bias)}"
            )
        if self.scale is not None and not (isinstance(self.scale, torch.Tensor) and self.scale.is_floating_point()):
            raise ArgumentTypeError(f"scale must be a floating tensor or None, got {describe(self.scale)}")


def _positive(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def describe(x: object) -> str:
    """What an argument is, for an error message: a tensor's dtype and shape, else its type."""
    return f"a {x.dtype} tensor of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
