"""The own causal decoder: pre-norm blocks whose attention goes through ``attnlab.site.attend``.

Each layer's row maps come from the config (one per head); ALiBi is a blockwise score bias, so no
(queries x keys) tensor exists at any length, and evaluation under ``torch.no_grad`` holds one query
block of scores at a time. ``Decoder.observed(observer)`` lets diagnostics and probes read every
layer's pre-map score blocks, as ``attnlab.hooks.observed`` does for Hugging Face models.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from .. import rowmaps
from ..site import Observer, Plan, attend
from . import positions as pe
from .config import ModelConfig
from .ffn import make_ffn, make_norm


class Attention(nn.Module):
    """Multi-head causal self-attention of one layer, routed through the site."""

    def __init__(self, cfg: ModelConfig, layer: int, slopes: torch.Tensor | None) -> None:
        super().__init__()
        self.cfg, self.layer = cfg, layer
        d = cfg.d_model
        self.q_proj = nn.Linear(d, d, bias=cfg.bias)
        self.k_proj = nn.Linear(d, d, bias=cfg.bias)
        self.v_proj = nn.Linear(d, d, bias=cfg.bias)
        self.o_proj = nn.Linear(d, d, bias=cfg.bias)
        names = cfg.head_maps()[layer]
        self.maps = {h: rowmaps.get(name) for h, name in enumerate(names) if name != "softmax"}
        self.register_buffer("slopes", slopes, persistent=False)
        self.observers: tuple[Observer, ...] = ()

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        b, t, _ = x.shape
        h, hd = self.cfg.heads, self.cfg.head_dim
        q, k, v = (proj(x).view(b, t, h, hd).transpose(1, 2) for proj in (self.q_proj, self.k_proj, self.v_proj))
        if rope is not None:
            q, k = pe.apply_rope(q, *rope), pe.apply_rope(k, *rope)
        bias = None
        if self.slopes is not None:
            keys = torch.arange(t, device=x.device)
            slopes = self.slopes

            def bias(start: int, stop: int) -> torch.Tensor:
                return pe.alibi_bias(slopes, keys[start:stop], keys).to(q.dtype)

        plan = Plan(maps=self.maps, observers=self.observers, block=self.cfg.block)
        out = attend(q, k, v, scaling=hd ** -0.5, causal=True, layer=self.layer, plan=plan, bias=bias,
                     dropout=self.cfg.dropout, training=self.training)
        return self.o_proj(out.reshape(b, t, h * hd))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int, slopes: torch.Tensor | None) -> None:
        super().__init__()
        self.attn_norm = make_norm(cfg.norm, cfg.d_model, bias=cfg.bias, eps=cfg.norm_eps)
        self.attn = Attention(cfg, layer, slopes)
        self.ffn_norm = make_norm(cfg.norm, cfg.d_model, bias=cfg.bias, eps=cfg.norm_eps)
        self.ffn = make_ffn(cfg.ffn, cfg.d_model, cfg.width, bias=cfg.bias, matched=cfg.ffn_matched)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, rope) -> torch.Tensor:
        x = x + self.drop(self.attn(self.attn_norm(x), rope))
        return x + self.drop(self.ffn(self.ffn_norm(x)))


class Decoder(nn.Module):
    """Token ids (batch, tokens) -> logits (batch, tokens, vocab)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.positions = pe.LearnedPositions(cfg.context, cfg.d_model) if cfg.positions == "learned" else None
        slopes = None
        if cfg.positions == "alibi":
            slopes = pe.alibi_slopes(cfg.heads, cfg.slope_kind)
        elif cfg.positions == "nape":
            slopes = pe.nape_slopes(cfg.heads, cfg.slope_kind)
        self.layers = nn.ModuleList(Block(cfg, i, slopes) for i in range(cfg.layers))
        self.norm = make_norm(cfg.norm, cfg.d_model, bias=cfg.bias, eps=cfg.norm_eps)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        if cfg.tie_embeddings:
            self.head.weight = self.embed.weight
        self.drop = nn.Dropout(cfg.dropout)
        self.apply(_init)

    def rope(self, t: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
        if self.cfg.positions != "rope":
            return None
        cfg = self.cfg
        base = pe.dynamic_ntk_base(cfg.rope_base, cfg.head_dim, t, cfg.context, cfg.rope_scaling) \
            if cfg.rope_dynamic else cfg.rope_base
        inv_freq = pe.rope_frequencies(cfg.head_dim, base=base,
                                       scaling=1.0 if cfg.rope_dynamic else cfg.rope_scaling)
        return pe.rope_angles(torch.arange(t, device=device), inv_freq.to(device))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.dim() != 2:
            raise ValueError(f"ids must be (batch, tokens), got shape {tuple(ids.shape)}")
        t = ids.shape[1]
        x = self.embed(ids)
        if self.positions is not None:
            x = x + self.positions(t)
        x = self.drop(x)
        rope = self.rope(t, ids.device)
        for block in self.layers:
            x = block(x, rope)
        return self.head(self.norm(x))

    @contextlib.contextmanager
    def observed(self, observer: Observer) -> Iterator[None]:
        """Call ``observer(ScoreBlock)`` on every layer's pre-map score blocks while the context is open."""
        attns = [block.attn for block in self.layers]
        for a in attns:
            a.observers = (*a.observers, observer)
        try:
            yield
        finally:
            for a in attns:
                a.observers = tuple(o for o in a.observers if o is not observer)


def _init(module: nn.Module) -> None:
    # GPT-2's scheme: N(0, 0.02) weights, zero biases; norms keep their ones and zeros.
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)


def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy; targets of -100 are ignored."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100)
