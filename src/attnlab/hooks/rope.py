"""Dynamic-NTK RoPE on a loaded Hugging Face model, for one evaluation window (Hayase & Karakida 2026 App. A.2).

The schedule replaces the RoPE base theta_0 by theta_0 s(n_eval), s = rho^{d/(d-2)} with rho = max(1, n_eval /
n_train), computed once per window of n_eval tokens and held fixed inside it. transformers (5.x) computes this
as its "dynamic" rope type, ``ROPE_INIT_FUNCTIONS["dynamic"]``, whose base is
theta_0 (factor seq_len / max_position_embeddings - (factor - 1))^{d/(d-2)}: with factor 1,
max_position_embeddings = n_train and seq_len = n_eval that is the paper's s(n_eval) exactly. (The
suggestive factor = n_eval / n_train would give (rho^2 - rho + 1)^{d/(d-2)} instead.) attnlab therefore asks
transformers for the inverse frequencies of that configuration and puts them in place of the model's own
tables while the context is open, rather than rebuilding the model from an edited config: the weights stay
loaded once, and the model's ``max_position_embeddings`` (which other code reads) is left alone.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import torch
from torch import nn

from attnlab.hooks.hf import UnsupportedModel


def rope_tables(model: nn.Module) -> list[tuple[nn.Module, str, str | None]]:
    """(rotary module, name of its inverse-frequency buffer, layer type or None) for every RoPE table of the
    model: one per model (Llama, Qwen...), or one per layer type (Gemma 3's sliding and full layers). Only
    plain RoPE (rope type "default") is rescaled: a table already scaled another way (llama3, yarn, linear...)
    would get a second schedule on top of its own."""
    found = []
    for module in model.modules():
        kinds = getattr(module, "rope_type", None)
        if kinds is None:
            continue
        named = {None: kinds} if isinstance(kinds, str) else dict(kinds)
        for layer_type, kind in named.items():
            name = "inv_freq" if layer_type is None else f"{layer_type}_inv_freq"
            if not isinstance(getattr(module, name, None), torch.Tensor):
                continue
            if kind != "default":
                raise UnsupportedModel(
                    f"dynamic-NTK RoPE rescales plain RoPE (rope type 'default'); {type(model).__name__}'s "
                    f"{layer_type or 'RoPE'} table has rope type {kind!r} already; use --rope plain"
                )
            found.append((module, name, layer_type))
    if not found:
        raise UnsupportedModel(f"{type(model).__name__} has no rotary position embedding to rescale; use --rope plain")
    return found


def dynamic_inv_freq(
    config, layer_type: str | None, n_train: int, n_eval: int, device: torch.device | None = None
) -> torch.Tensor:
    """The inverse frequencies of dynamic-NTK RoPE at window n_eval for a model trained at n_train
    (Hayase & Karakida 2026 App. A.2), from transformers' own "dynamic" rope type (see the module docstring)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    flat = copy.deepcopy(config)
    own = config.rope_parameters if layer_type is None else config.rope_parameters[layer_type]
    # a flat (not per-layer-type) parameter set: the function reads it as the model's only one
    flat.rope_parameters = {
        **{k: v for k, v in own.items() if k in ("rope_theta", "partial_rotary_factor")},
        "rope_type": "dynamic",
        "factor": 1.0,
    }
    flat.max_position_embeddings = n_train
    inv_freq, _ = ROPE_INIT_FUNCTIONS["dynamic"](flat, device, seq_len=n_eval)
    return inv_freq


@contextlib.contextmanager
def dynamic_ntk(model: nn.Module, n_train: int, n_eval: int) -> Iterator[None]:
    """Dynamic-NTK RoPE for windows of n_eval tokens while the context is open (every RoPE table of the
    model, ``rope_tables``); the model's own tables come back on leaving. For n_eval <= n_train, rho = 1 and
    the model keeps its own tables."""
    tables = rope_tables(model)
    if n_eval <= n_train:
        yield
        return
    saved = [(module, name, getattr(module, name)) for module, name, _ in tables]
    try:
        for module, name, layer_type in tables:
            own = getattr(module, name)
            setattr(
                module, name, dynamic_inv_freq(module.config, layer_type, n_train, n_eval, own.device).to(own.dtype)
            )
        yield
    finally:
        for module, name, own in saved:
            setattr(module, name, own)
