"""The own causal decoder: pre-norm blocks whose attention goes through ``attnlab.site.blockwise``.

Each layer's row maps come from the config (one per head); ALiBi is a blockwise score bias and a
learnable scaler a per-row multiplier, so no (queries x keys) tensor exists at any length, and
evaluation under ``torch.no_grad`` holds one query block of scores at a time. ``Decoder.observed``
lets diagnostics and probes read every layer's pre-map score blocks (and, with ``weights=True``, the
weights after the map), as ``attnlab.hooks.observed`` does for Hugging Face models.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from attnlab import rowmaps
from attnlab.errors import ArgumentError
from attnlab.model import positions as pe
from attnlab.model.config import ModelConfig
from attnlab.model.ffn import make_ffn, make_norm
from attnlab.model.scaling import make_scaler, scaled_heads
from attnlab.site import MIN_BLOCK, Causal, Observer, Plan, Scores, Slopes, WeightObserver, attend

# Score elements one query block may hold (64 MiB in float32): long inputs get thinner blocks, so a
# 65,536-token evaluation holds a few blocks' worth of rows for any map instead of 512 rows x 65,536 keys.
SCORE_BUDGET = 2**24


def block_rows(cfg_block: int, batch: int, heads: int, keys: int) -> int:
    """Query rows per block: ``cfg_block`` at most, fewer when the block would pass ``SCORE_BUDGET``."""
    return max(MIN_BLOCK, min(cfg_block, SCORE_BUDGET // max(1, batch * heads * keys)))


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
        self.scaler = make_scaler(
            cfg.scaler, cfg.heads, d, delta=cfg.scaler_delta, bound=cfg.scaler_bound, gamma=cfg.scaler_gamma
        )
        scaled = scaled_heads(cfg.scaler, slopes, cfg.positions, cfg.heads)
        # None when every head is scaled, so that the common case adds no select to the forward
        self.register_buffer("unscaled", None if bool(scaled.all()) else ~scaled, persistent=False)
        self.observers: tuple[Observer, ...] = ()
        self.weight_observers: tuple[WeightObserver, ...] = ()

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None, beta: torch.Tensor | None = None
    ) -> torch.Tensor:
        b, t, _ = x.shape
        h, hd = self.cfg.heads, self.cfg.head_dim
        q, k, v = (proj(x).view(b, t, h, hd).transpose(1, 2) for proj in (self.q_proj, self.k_proj, self.v_proj))
        if rope is not None:
            q, k = pe.apply_rope(q, *rope), pe.apply_rope(k, *rope)
        if not (
            self.maps or self.observers or self.weight_observers or self.scaler is not None or self.slopes is not None
        ):
            # plain softmax that nobody reads: PyTorch's fused kernel, which never holds the score matrix
            out = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=hd**-0.5, dropout_p=self.cfg.dropout if self.training else 0.0
            )
            return self.o_proj(out.transpose(1, 2).reshape(b, t, h * hd))
        scale = None
        if self.scaler is not None:
            # causal: query i may attend keys 0..i, so n = i + 1
            scale = self.scaler(x, torch.arange(1, t + 1, device=x.device), beta).to(q.dtype)
            if self.unscaled is not None:
                scale = scale.masked_fill(self.unscaled[:, None, None], 1.0)
        plan = Plan(
            maps=self.maps,
            observers=self.observers,
            weight_observers=self.weight_observers,
            block=block_rows(self.cfg.block, b, h, t),
            layer=self.layer,
            dropout=self.cfg.dropout if self.training else 0.0,
        )
        scores = Scores(hd**-0.5, bias=None if self.slopes is None else Slopes(self.slopes), scale=scale)
        out = attend(q, k, v, scores, Causal(), plan)
        return self.o_proj(out.reshape(b, t, h * hd))


def _norm(cfg: ModelConfig) -> nn.Module:
    return nn.Identity() if cfg.norm == "none" else make_norm(cfg.norm, cfg.d_model, bias=cfg.bias, eps=cfg.norm_eps)


class Block(nn.Module):
    """Pre-norm: x + attn(norm(x)), then x + ffn(norm(x)); without ``residual`` each sublayer's output
    replaces x (Attention Sinks Essential's single attention layer f(x) = W_O sum alpha W_V x)."""

    def __init__(self, cfg: ModelConfig, layer: int, slopes: torch.Tensor | None) -> None:
        super().__init__()
        self.residual = cfg.residual
        self.attn_norm = _norm(cfg)
        self.attn = Attention(cfg, layer, slopes)
        self.ffn = None
        if cfg.ffn != "none":
            self.ffn_norm = _norm(cfg)
            self.ffn = make_ffn(cfg.ffn, cfg.d_model, cfg.width, bias=cfg.bias, matched=cfg.ffn_matched)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, rope, beta: torch.Tensor | None = None) -> torch.Tensor:
        out = self.drop(self.attn(self.attn_norm(x), rope, beta))
        x = x + out if self.residual else out
        if self.ffn is None:
            return x
        out = self.drop(self.ffn(self.ffn_norm(x)))
        return x + out if self.residual else out


class Decoder(nn.Module):
    """Token ids (batch, tokens) -> logits (batch, tokens, vocab); with ``inputs: vectors``, vectors
    (batch, tokens, d_model) -> vectors of the same shape (with ``readout: writes``, h_D - h_0: what the
    layers wrote to the residual stream)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        tokens = cfg.inputs == "tokens"
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model) if tokens else None
        self.beta_n = nn.Parameter(torch.ones(cfg.context)) if cfg.scaler == "beta_n" else None
        self.positions = pe.LearnedPositions(cfg.context, cfg.d_model) if cfg.positions == "learned" else None
        slopes = None
        if cfg.positions == "alibi":
            slopes = pe.alibi_slopes(cfg.heads, cfg.slope_kind)
        elif cfg.positions == "nape":
            slopes = pe.nape_slopes(cfg.heads, cfg.slope_kind)
        self.layers = nn.ModuleList(Block(cfg, i, slopes) for i in range(cfg.layers))
        self.norm = _norm(cfg)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False) if tokens else None
        if tokens and cfg.tie_embeddings:
            self.head.weight = self.embed.weight
        self.drop = nn.Dropout(cfg.dropout)
        self.apply(_init)

    def rope(self, t: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
        if self.cfg.positions != "rope":
            return None
        cfg = self.cfg
        base = (
            pe.dynamic_ntk_base(cfg.rope_base, cfg.head_dim, t, cfg.context, cfg.rope_scaling)
            if cfg.rope_dynamic
            else cfg.rope_base
        )
        if cfg.rope_type == "llama3":
            inv_freq = pe.llama3_frequencies(
                pe.rope_frequencies(cfg.head_dim, base=base), cfg.rope_scaling, cfg.context
            )
        else:
            inv_freq = pe.rope_frequencies(
                cfg.head_dim, base=base, scaling=1.0 if cfg.rope_dynamic else cfg.rope_scaling
            )
        return pe.rope_angles(torch.arange(t, device=device), inv_freq.to(device))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            if inputs.dim() != 2:
                raise ArgumentError(f"ids must be (batch, tokens), got shape {tuple(inputs.shape)}")
            x = self.embed(inputs)
        else:
            if inputs.dim() != 3 or inputs.shape[-1] != self.cfg.d_model:
                raise ArgumentError(
                    f"vectors must be (batch, tokens, d_model={self.cfg.d_model}), got shape {tuple(inputs.shape)}"
                )
            x = inputs
        t = inputs.shape[1]
        if self.positions is not None:
            x = x + self.positions(t)
        x = h0 = self.drop(x)
        rope = self.rope(t, inputs.device)
        for block in self.layers:
            x = block(x, rope, self.beta_n)
        if self.cfg.readout == "writes":
            x = x - h0
        x = self.norm(x)
        return x if self.head is None else self.head(x)

    @contextlib.contextmanager
    def observed(self, observer: Observer | WeightObserver, *, weights: bool = False) -> Iterator[None]:
        """Call ``observer`` on every layer's pre-map ``ScoreBlock``s (or, with ``weights``, on its
        ``WeightBlock``s after the map) while the context is open."""
        slot = "weight_observers" if weights else "observers"
        attns = [block.attn for block in self.layers]
        for a in attns:
            setattr(a, slot, (*getattr(a, slot), observer))
        try:
            yield
        finally:
            for a in attns:
                setattr(a, slot, tuple(o for o in getattr(a, slot) if o is not observer))


def _init(module: nn.Module) -> None:
    # GPT-2's scheme: N(0, 0.02) weights, zero biases; norms keep their ones and zeros.
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)


def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy; targets of -100 are ignored."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100)
