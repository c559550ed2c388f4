"""Route a Hugging Face model's attention through the attnlab site.

transformers 5.x lets a model pick its attention function by name (``AttentionInterface``). attnlab
registers one, ``"attnlab"``, and the mask function that goes with it: without a registered mask function
transformers builds no causal mask for an unknown implementation and the logits drift (measured:
up to 0.42). The mask function registered is transformers' own eager one, so the site sees the very
additive mask the eager forward adds.

While a context of ``attnlab.hooks`` is open, each attention module carries a ``Route`` (its layer index
and the site's plan); the registered function reads it from the module it is called with. No global
state of attnlab's is involved: two models can be observed at once. A model that carries a lasting
implementation (``attnlab.hooks.register_attention``) is routed from that implementation's map on every head:
contexts observe and substitute the model as it is, and leaving them gives its implementation back.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from attnlab.errors import ArgumentError, Error
from attnlab.hooks.implementations import registered_map
from attnlab.rowmaps import RowMap
from attnlab.site import DEFAULT_BLOCK, Observer, Plan, Scores, attend

ATTN_NAME = "attnlab"
SUPPORTED = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3",
    "gpt_neox",
    "phi",
    "phi3",
    "olmo",
    "olmo2",
)
_ROUTE = "_attnlab_route"
_STATE = "_attnlab_state"


class UnsupportedModel(Error, TypeError):
    """The model does not send its attention through transformers' attention-function interface."""


@dataclass
class Route:
    layer: int
    plan: Plan


@dataclass
class _State:
    implementation: object
    routes: dict[int, Route]
    modules: list[nn.Module]
    plans: list[dict[int, Plan]] = field(default_factory=list)
    base: dict[int, RowMap] = field(default_factory=dict)  # a lasting implementation's map on every head


def _attention(
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
    route: Route | None = getattr(module, _ROUTE, None)
    if route is None:
        raise RuntimeError(
            f"{type(module).__name__} uses attn_implementation='{ATTN_NAME}' outside an "
            "attnlab.hooks context; open attnlab.hooks.observed(...) or substituted(...)"
        )
    if scaling is None:  # Gemma's eager default
        scaling = module.head_dim**-0.5
    plan = dataclasses.replace(route.plan, dropout=dropout) if dropout and module.training else route.plan
    out = attend(query, key, value, Scores(scaling, softcap=softcap), attention_mask, plan)
    return out, None


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(ATTN_NAME, _attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTN_NAME, eager_mask)


def _check_supported(model: nn.Module) -> None:
    from transformers import PreTrainedModel

    what = "supported: transformers models built on its attention-function interface, e.g. " + ", ".join(SUPPORTED)
    if not isinstance(model, PreTrainedModel):
        raise UnsupportedModel(f"{type(model).__name__} is not a transformers PreTrainedModel; {what}")
    name = type(model).__name__
    if not type(model).__module__.startswith("transformers."):
        raise UnsupportedModel(
            f"{name} comes from custom modeling code ({type(model).__module__}), which attnlab cannot route; {what}"
        )
    if not (model._supports_attention_backend and model._can_set_attn_implementation()):
        raise UnsupportedModel(
            f"{name} computes attention itself instead of through transformers' attention-function interface; {what}"
        )


def last_forward(model: nn.Module, input_ids: torch.Tensor):
    """``model(input_ids=...)`` with the logits of the last position only (``logits_to_keep=1``, where the model's
    forward takes it), for a forward read for its score rows alone: the language-model head over every position is a
    tenth of SmolLM2-135M's forward and half of Gemma 3 270M's (a 262k vocabulary), and its float32 logits (tokens x
    vocabulary) are the largest tensor of a long prompt's forward. Attention, and so every score row, is computed as
    before; the one logit row kept may differ from the full forward's in its last bits (another matmul shape)."""
    import inspect

    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        return model(input_ids=input_ids, logits_to_keep=1)
    return model(input_ids=input_ids)


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The model's attention modules in layer order: those carrying a ``layer_idx`` that call the
    attention-function interface (transformers' ``*Attention`` classes)."""
    _check_supported(model)
    found = [
        m
        for m in model.modules()
        if type(m).__name__.endswith("Attention") and hasattr(m, "layer_idx") and hasattr(m, "config")
    ]
    if not found:
        raise UnsupportedModel(f"found no attention module with a layer index in {type(model).__name__}")
    layers = [m.layer_idx for m in found]
    if None in layers or len(set(layers)) != len(layers):
        layers = list(range(len(found)))
    return [m for _, m in sorted(zip(layers, found, strict=True), key=lambda t: t[0])]


def num_heads(model: nn.Module) -> tuple[int, int]:
    """(layers, query heads per layer) as the routed attention modules see them."""
    mods = attention_modules(model)
    cfg = mods[0].config
    heads = getattr(cfg, "num_attention_heads", None)
    if heads is None:
        raise UnsupportedModel(f"{type(model).__name__}'s config has no num_attention_heads")
    return len(mods), heads


def _merge(plans: list[dict[int, Plan]], layer: int, base: dict[int, RowMap]) -> Plan:
    maps, observers, length_scale, block = dict(base), [], None, None
    for level in plans:
        plan = level.get(layer)
        if plan is None:
            continue
        maps.update(plan.maps)
        observers.extend(plan.observers)
        length_scale = plan.length_scale or length_scale
        block = plan.block if block is None else min(block, plan.block)
    return Plan(
        maps=maps,
        observers=tuple(observers),
        length_scale=length_scale,
        layer=layer,
        **({} if block is None else {"block": block}),
    )


def _install(model: nn.Module) -> _State:
    _register()
    mods = attention_modules(model)
    state = _State(model.config._attn_implementation, {}, mods)
    lasting = registered_map(state.implementation)
    if lasting is not None:
        state.base = dict.fromkeys(range(num_heads(model)[1]), lasting)
    model.set_attn_implementation(ATTN_NAME)
    if model.config._attn_implementation != ATTN_NAME:
        model.set_attn_implementation(state.implementation)
        raise UnsupportedModel(f"{type(model).__name__} refused attn_implementation={ATTN_NAME!r}")
    for layer, module in enumerate(mods):
        route = Route(layer, Plan(layer=layer))
        state.routes[layer] = route
        setattr(module, _ROUTE, route)
    setattr(model, _STATE, state)
    return state


def _uninstall(model: nn.Module, state: _State) -> None:
    for module in state.modules:
        if hasattr(module, _ROUTE):
            delattr(module, _ROUTE)
    delattr(model, _STATE)
    model.set_attn_implementation(state.implementation)


@contextlib.contextmanager
def routed(model: nn.Module, plans: dict[int, Plan]) -> Iterator[dict[int, Route]]:
    """Open a routing level: ``plans`` maps layer index -> the site's plan for that layer. Levels nest
    (an observer inside a substitution); leaving the last one restores the model's own attention."""
    state: _State | None = getattr(model, _STATE, None)
    if state is None:
        state = _install(model)
    bad = [layer for layer in plans if layer not in state.routes]
    if bad:
        if not state.plans:
            _uninstall(model, state)
        raise ArgumentError(f"layers {bad} out of range: the model has {len(state.routes)} attention layers")
    state.plans.append(plans)
    try:
        for layer, route in state.routes.items():
            route.plan = _merge(state.plans, layer, state.base)
        yield state.routes
    finally:
        state.plans.pop()
        for layer, route in state.routes.items():
            route.plan = _merge(state.plans, layer, state.base)
        if not state.plans:
            _uninstall(model, state)


@contextlib.contextmanager
def observed(
    model: nn.Module, observer: Observer, *, layers: Iterable[int] | None = None, block: int = DEFAULT_BLOCK
) -> Iterator[None]:
    """Call ``observer(ScoreBlock)`` on every block of pre-map scores of ``layers`` (default all) while
    the context is open; the forward itself is unchanged."""
    n_layers, _ = num_heads(model)
    chosen = range(n_layers) if layers is None else list(layers)
    with routed(model, {layer: Plan(observers=(observer,), block=block) for layer in chosen}):
        yield
