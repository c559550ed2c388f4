"""Lasting attention implementations: a row map as a name that transformers' ``attn_implementation`` takes.

transformers 5.x picks a model's attention function by name from its ``AttentionInterface`` (the idea this
module builds on: one registered function per name, read by every attention layer). ``register_attention``
registers one such function per row-map recipe; it sends every head of every layer through
:func:`attnlab.site.blockwise` with that map, so the model trains, evaluates and generates with it for as long
as it carries the name, with no context open:

    >>> from attnlab import hooks
    >>> name = hooks.register_attention("entmax_a1.5")            # "attnlab_entmax_a1.5"
    >>> model = AutoModelForCausalLM.from_config(config, attn_implementation=name)
    >>> model.set_attn_implementation(hooks.register_attention("softmax"))   # eager's exact arithmetic

Where the maps come from (``attnlab maps`` shows each family's formula and source): softmax and its
temperature, length (SSMax, log n) and top-k variants (Hayase & Karakida 2026 §2, App. A.2; Vasylenko et al.
2025 §5), alpha-entmax and sparsemax (Vasylenko et al. 2025 §2.2, App. A), normalized ReLU^p, sigmoid and
Wortsman's un-normalized map, with the calibrated bias b_auto (Polynomial Concentration §5.3, App. B, J),
and ReLU/n (Attention Sinks Essential §3.4).

As with the context managers' implementation (``attnlab.hooks.hf``), the matching mask function, transformers'
eager one, is registered under the same name: without it transformers builds no causal mask for an unknown
implementation. The site therefore receives eager's additive mask, padding and sliding windows included.
"softmax" runs the plain plan (no row map), whose arithmetic is eager's bit for bit; every other recipe
puts its map on all heads. Dropout on the weights applies in training, as eager's does.

``attnlab.hooks.observed`` and ``substituted`` work on a model that carries such a name: the routed
forward starts from the name's map on every head (an observer sees that model; a substitution replaces the
map on the heads it selects), and leaving the context gives the name back.
"""

from __future__ import annotations

import dataclasses
import numbers
import re
from collections.abc import Callable

import torch
from torch import nn

from attnlab import rowmaps
from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.rowmaps import RowMap
from attnlab.site import Plan, Scores, attend

PREFIX = "attnlab_"
# What transformers 5 reads into an implementation name: "a/b" (optionally "@rev", ":fn") is a Hub kernel
# it would download, "paged|" a prefix it strips, and "flash", "flex_attention" and "sdpa" anywhere in the
# name switch on the checks of those backends. Names are kept to these characters and clear of those words.
_VALID = re.compile(r"[A-Za-z0-9_.+-]+")
_RESERVED = ("flash", "flex_attention", "sdpa", "paged")

_MAPS: dict[str, RowMap | None] = {}  # registered name -> its row map (None: softmax, eager's arithmetic)


def _rowmap(recipe: str, b_auto: float | None) -> RowMap:
    # attnlab.hooks.resolve's rule, here because attnlab.hooks imports this module
    if not isinstance(recipe, str):
        raise ArgumentTypeError(
            f"recipe must be a row-map name such as 'softmax', 'entmax_a1.5', 'relu_p4_b0' or "
            f"'sigmoid_bauto' (attnlab maps lists them), got {type(recipe).__name__}"
        )
    if b_auto is not None and (isinstance(b_auto, bool) or not isinstance(b_auto, numbers.Real)):
        raise ArgumentTypeError(
            f"b_auto must be a number (attnlab.hooks.calibrate_b_auto), got {type(b_auto).__name__}"
        )
    rowmap = rowmaps.get(recipe)
    if rowmap.needs_bias:
        if b_auto is None:
            raise ArgumentError(
                f"recipe {recipe!r} needs b_auto: calibrate it first (attnlab.hooks.calibrate_b_auto) and pass b_auto="
            )
        rowmap = rowmap.with_bias(float(b_auto))
    return rowmap


def _forward(rowmap: RowMap | None) -> Callable[..., tuple[torch.Tensor, None]]:
    """The attention function for ``rowmap`` on every head (None: the plain plan, eager's softmax)."""
    plans: dict[tuple[int, int], Plan] = {}

    def attention(
        module: nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        scaling: float | None = None,
        dropout: float = 0.0,
        softcap: float | None = None,
        **_: object,
    ) -> tuple[torch.Tensor, None]:
        layer, n_heads = getattr(module, "layer_idx", None) or 0, query.shape[1]
        plan = plans.get((layer, n_heads))
        if plan is None:
            maps = {} if rowmap is None else dict.fromkeys(range(n_heads), rowmap)
            plan = plans[(layer, n_heads)] = Plan(maps=maps, layer=layer)
        if dropout and module.training:
            plan = dataclasses.replace(plan, dropout=dropout)
        if scaling is None:  # Gemma's eager default
            scaling = getattr(module, "head_dim", query.shape[-1]) ** -0.5
        return attend(query, key, value, Scores(scaling, softcap=softcap), attention_mask, plan), None

    return attention


def register_attention(recipe: str, *, b_auto: float | None = None) -> str:
    """Register ``recipe`` as a transformers attention implementation; returns its name, ``attnlab_<map>``.

    ``recipe``: any row-map name ``attnlab.rowmaps.get`` takes ("softmax", "entmax_a1.5", "relu_p4_b0",
    "sigmoid_b0", "wortsman_p2_sqrtL" ...); a ``_bauto`` name needs ``b_auto`` (``calibrate_b_auto``), and the
    name then carries the resolved bias ("relu_p4_bauto", b_auto=1.88 -> "attnlab_relu_p4_b1.88"). As
    elsewhere in attnlab, ``b_auto`` is ignored by a recipe without an auto bias. The same recipe registers
    once and always gets the same name. Pass the name as ``attn_implementation=`` to ``from_pretrained`` or
    ``from_config``, or to ``model.set_attn_implementation``; in a new process, register it again first.
    ``save_pretrained`` does not store the name: a model trained with a map is loaded back with
    ``attn_implementation=name`` (else transformers gives it sdpa, i.e. softmax).
    """
    rowmap = _rowmap(recipe, b_auto)
    name = PREFIX + rowmap.name
    if not _VALID.fullmatch(name) or any(word in name for word in _RESERVED):
        raise ArgumentError(
            f"row map {rowmap.name!r} cannot name a transformers attention implementation: a name "
            f"may hold only letters, digits and _ . + - and none of {', '.join(_RESERVED)}"
        )
    plain = None if rowmap.name == "softmax" else rowmap
    if name in _MAPS and _MAPS[name] == plain:
        return name
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(name, _forward(plain))
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, eager_mask)
    _MAPS[name] = plain
    return name


def registered_map(implementation: object) -> RowMap | None:
    """The row map every head of a model with ``attn_implementation=implementation`` uses: the map of a
    name from :func:`register_attention`, None for softmax and any other implementation."""
    return _MAPS.get(implementation) if isinstance(implementation, str) else None
