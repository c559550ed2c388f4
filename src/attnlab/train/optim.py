"""AdamW with named parameter groups, and the cosine learning-rate schedule with linear warmup.

Groups: ``decay`` (matrices and embeddings), ``no_decay`` (biases, norm gains, scalers' vectors),
and, for the Zhu et al. 2026 intervention, ``upper_qk`` / ``upper_qk_no_decay``: the query and key projections
of the upper half of the layers (Zhu et al. 2026 §2), split out so that one multiplier reaches them and nothing
else. Each group's learning rate is base lr x cosine(step) x its multiplier.
"""

from __future__ import annotations

import math

import torch
from torch import nn

UPPER_QK = ("upper_qk", "upper_qk_no_decay")


def upper_qk_names(model: nn.Module) -> list[str]:
    """Parameter names of W_Q and W_K (and their biases) in layers L//2 .. L-1 (Zhu et al. 2026 §2: the upper
    half), in ``model.named_parameters`` order."""
    layers = len(model.layers)
    upper = {f"layers.{i}.attn.{proj}." for i in range(layers // 2, layers) for proj in ("q_proj", "k_proj")}
    return [name for name, _ in model.named_parameters() if any(name.startswith(u) for u in upper)]


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups with a ``name`` key each; empty groups are left out."""
    inner = getattr(model, "module", model)  # DDP wraps the model; group names must not depend on it
    upper = set(upper_qk_names(inner))
    buckets: dict[str, list[nn.Parameter]] = {"decay": [], "no_decay": [], "upper_qk": [], "upper_qk_no_decay": []}
    for name, param in inner.named_parameters():
        if not param.requires_grad:
            continue
        decay = param.dim() >= 2
        prefix = "upper_qk" if name in upper else ""
        key = (prefix or "decay") if decay else (f"{prefix}_no_decay" if prefix else "no_decay")
        buckets[key].append(param)
    return [
        {"name": key, "params": params, "weight_decay": weight_decay if key in ("decay", "upper_qk") else 0.0}
        for key, params in buckets.items()
        if params
    ]


def make_optimizer(model: nn.Module, lr: float, weight_decay: float, betas: tuple[float, float]) -> torch.optim.AdamW:
    return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=betas)


def cosine_lr(step: int, *, steps: int, lr: float, min_lr: float, warmup: int) -> float:
    """Linear warmup from lr/warmup to lr over ``warmup`` steps, then cosine decay to ``min_lr`` at the
    last step (step counts from 0)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, steps - 1 - warmup)
    progress = min(1.0, (step - warmup) / span)
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))


def set_lr(optimizer: torch.optim.Optimizer, lr: float, upper_qk_multiplier: float = 1.0) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr * (upper_qk_multiplier if group["name"] in UPPER_QK else 1.0)
