"""Audit and zero-shot substitution on loaded Hugging Face models.

    >>> from attnlab import hooks
    >>> with hooks.observed(model, observer):          # observer(ScoreBlock) sees every pre-map score block
    ...     model(input_ids)
    >>> with hooks.substituted(model, "relu_p4_bauto", heads=[(3, 1)], b_auto=b):
    ...     model(input_ids)

Both are context managers; leaving them restores the model exactly (its attention implementation and
every attribute attnlab attached). With nothing substituted the logits are bit-identical to the eager
forward (Polynomial Concentration App. I).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping

from torch import nn

from attnlab import rowmaps
from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.hooks.calibrate import calibrate_b_auto
from attnlab.hooks.hf import UnsupportedModel, attention_modules, last_forward, num_heads, observed, routed
from attnlab.hooks.implementations import register_attention
from attnlab.hooks.rope import dynamic_inv_freq, dynamic_ntk, rope_tables
from attnlab.loading.load import LoadError, load_model, provenance
from attnlab.rowmaps import RowMap
from attnlab.site import DEFAULT_BLOCK, LengthScale, Observer, Plan, ScoreBlock

Recipe = str | Mapping[tuple[int, int], str]


def resolve(name: str, b_auto: float | None) -> RowMap:
    """The row map a recipe name stands for, with ``_bauto`` resolved to the calibrated bias."""
    rowmap = rowmaps.get(name)
    if rowmap.needs_bias:
        if b_auto is None:
            raise ArgumentError(
                f"recipe {name!r} needs b_auto: calibrate it first (attnlab.hooks.calibrate_b_auto) and pass b_auto="
            )
        rowmap = rowmap.with_bias(b_auto)
    return rowmap


def head_maps(
    model: nn.Module, recipe: Recipe, heads: Iterable[tuple[int, int]] | None = None, *, b_auto: float | None = None
) -> dict[int, dict[int, RowMap]]:
    """layer -> {head -> row map} for a recipe: one name for ``heads`` (None = every head), or a dict
    from (layer, head) to name."""
    n_layers, n_heads = num_heads(model)
    if isinstance(recipe, str):
        rowmap = resolve(recipe, b_auto)
        pairs = (
            [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
            if heads is None
            else [tuple(p) for p in heads]
        )
        chosen = {pair: rowmap for pair in pairs}
    elif isinstance(recipe, Mapping):
        if heads is not None:
            raise ArgumentError("give heads either as the recipe's keys or as heads=, not both")
        chosen = {tuple(pair): resolve(name, b_auto) for pair, name in recipe.items()}
    else:
        raise ArgumentTypeError(
            f"recipe must be a row-map name or a dict (layer, head) -> name, got {type(recipe).__name__}"
        )
    out: dict[int, dict[int, RowMap]] = {}
    for pair, rowmap in chosen.items():
        if len(pair) != 2 or not all(isinstance(x, int) for x in pair):
            raise ArgumentError(f"heads are (layer, head) pairs of ints, got {pair!r}")
        layer, head = pair
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ArgumentError(f"head {pair} out of range: the model has {n_layers} layers x {n_heads} heads")
        out.setdefault(layer, {})[head] = rowmap
    return out


@contextlib.contextmanager
def substituted(
    model: nn.Module,
    recipe: Recipe | None,
    heads: Iterable[tuple[int, int]] | None = None,
    *,
    b_auto: float | None = None,
    length_scale: LengthScale | None = None,
    block: int = DEFAULT_BLOCK,
) -> Iterator[None]:
    """Replace softmax by ``recipe`` on ``heads`` (None = every head) while the context is open.

    ``recipe``: a row-map name (``relu_p4_bauto``, ``sigmoid_b0``, ``entmax_a1.5`` ...) or a dict from
    (layer, head) to name; None substitutes nothing (useful with ``length_scale`` alone). ``_bauto``
    names need ``b_auto`` (``calibrate_b_auto``). ``length_scale`` multiplies every head's logits by
    m(n; xi) (Hayase & Karakida 2026 App. A.2) before its map.
    """
    maps = {} if recipe is None else head_maps(model, recipe, heads, b_auto=b_auto)
    n_layers, _ = num_heads(model)
    plans = {
        layer: Plan(maps=maps.get(layer, {}), length_scale=length_scale, block=block)
        for layer in range(n_layers)
        if layer in maps or length_scale is not None
    }
    with routed(model, plans):
        yield


__all__ = [
    "LengthScale",
    "LoadError",
    "Observer",
    "Plan",
    "ScoreBlock",
    "UnsupportedModel",
    "attention_modules",
    "calibrate_b_auto",
    "dynamic_inv_freq",
    "dynamic_ntk",
    "head_maps",
    "last_forward",
    "load_model",
    "num_heads",
    "observed",
    "provenance",
    "register_attention",
    "resolve",
    "rope_tables",
    "substituted",
]
