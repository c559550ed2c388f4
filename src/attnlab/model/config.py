"""``ModelConfig``: every design switch of the own decoder as a validated field.

Built from a mapping (a YAML/TOML file's ``model`` table, or ``--set model.key=value``) by
``ModelConfig.from_dict``, which rejects unknown keys; every check names the field, the value it got and
what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from attnlab import rowmaps
from attnlab.errors import Error
from attnlab.model.ffn import FFNS
from attnlab.model.scaling import FIXED_GAMMA_SCALERS, SCALERS

INPUTS = ("tokens", "vectors")
READOUTS = ("stream", "writes")
POSITIONS = ("none", "learned", "rope", "alibi", "nape")
ROPE_TYPES = ("linear", "llama3")
ALIBI_SLOPES = ("geometric", "inverse")
NORMS = ("layernorm", "rmsnorm", "none")


class ConfigError(Error, ValueError):
    """A config field holds a value it may not; the message names the field, the value and what is allowed."""


def _int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"model.{name} must be an int >= {low}, got {value!r}")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"model.{name} must be one of {', '.join(allowed)}, got {value!r}")


def _number(name: str, value: Any, *, low: float, inclusive: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < low or (value == low and not inclusive):
        bound = f">= {low:g}" if inclusive else f"> {low:g}"
        raise ConfigError(f"model.{name} must be a finite number {bound}, got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """A causal decoder.

    vocab, context (the training window: learned positions and dynamic NTK read it), layers, heads,
    d_model (a multiple of heads), ffn_width (the GELU-equivalent width, default 4 d_model; gated FFNs
    get the matched width of Zhu et al. 2026 §4 when ffn_matched). positions: none, learned, rope (rope_base,
    rope_scaling = the factor of rope_type linear (position interpolation) or llama3 (Llama 3's per-frequency
    scaling over ``context``, Vasylenko et al. 2025 App. G.2), rope_dynamic = the dynamic NTK base of Hayase & Karakida
    2026 App. A.2 beyond ``context``), alibi or
    nape (half the heads NoPE, half ALiBi, Vasylenko et al. 2025 §4.2), with alibi_slopes geometric or inverse (1/h);
    unset, each kind takes its source's slopes: geometric for alibi (Press et al.), 1/h for nape (Vasylenko et al. 2025
    App. G.2).
    rowmap: one row-map name for every head, a list with one name per layer, or a list of per-layer
    lists with one name per head. block: query rows per attention block at most (long inputs get fewer,
    so that a block holds at most 2^24 scores: see ``decoder.block_rows``).
    scaler: a learnable per-head inverse temperature on the score rows before the map (a name in
    ``model.scaling.SCALERS``): log_n (delta + s_h log n, the learned Scalable-Softmax), adaptive (delta +
    beta (log n)^gamma from the layer input, Vasylenko et al. 2025 eq. 8-9; with an
    entmax rowmap this is ASEntmax, with softmax ASSMax; scaler_bound is the bound s on |gamma|, default 2 as in
    the authors' code, deep-spin/asentmax ``attn_scale_gamma_range``), direct
    (delta + beta_h (log n)^gamma_h with beta_h, gamma_h learned per head: SEntmax, Vasylenko et al. 2025 App.
    G.2) or beta_n (s_h beta_n + b_h with one learnable beta_n over positions, Hayase & Karakida 2026 eq. A.1).
    Under nape the scalers of Vasylenko et al. 2025 (log_n, adaptive, direct) multiply the NoPE heads only, as
    the authors' code does; the ALiBi heads keep their scores (``model.scaling.scaled_heads``).
    scaler_gamma: a fixed gamma for the adaptive or direct scaler, which then learn beta only (the "beta
    learned, gamma fixed" ASEntmax of Vasylenko et al. 2025 App. H, Table 8); unset, gamma is learned.
    inputs: tokens (ids in, logits out; vocab required) or vectors (the input-free model of Attention Sinks Essential
    §3.4: d_model-wide vectors in and out, no embedding or head; with ffn none, norm none and
    residual false, each layer is exactly W_O sum_j alpha_ij W_V x_j).
    readout: stream (the last layer's residual stream h_D, through the final norm and head) or writes
    (vectors only, with residual true: the sum of what the layers write to the residual stream, h_D - h_0
    with h_0 the input after positions, then the final norm; Attention Sinks Essential §1 and §3.2 state the
    target as what the model writes, which is how §4.2 and App. B train multi-layer models with residual
    connections on it).
    """

    context: int
    vocab: int | None = None
    inputs: str = "tokens"
    layers: int = 2
    heads: int = 4
    d_model: int = 128
    ffn_width: int | None = None
    positions: str = "rope"
    rope_base: float = 10000.0
    rope_scaling: float = 1.0
    rope_type: str = "linear"
    rope_dynamic: bool = False
    alibi_slopes: str | None = None
    ffn: str = "gelu"
    ffn_matched: bool = True
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    bias: bool = True
    tie_embeddings: bool = True
    rowmap: str | tuple = "softmax"
    dropout: float = 0.0
    block: int = 512
    scaler: str = "none"
    scaler_delta: float = 1.0
    scaler_bound: float = 2.0
    scaler_gamma: float | None = None
    residual: bool = True
    readout: str = "stream"

    def __post_init__(self) -> None:
        _choice("inputs", self.inputs, INPUTS)
        if self.inputs == "tokens":
            if self.vocab is None:
                raise ConfigError("model.vocab is required for inputs tokens")
            _int("vocab", self.vocab, 2)
        elif self.vocab is not None:
            raise ConfigError(
                f"model.vocab must be unset for inputs vectors (vectors are d_model wide), got {self.vocab!r}"
            )
        _int("context", self.context, 1)
        _int("layers", self.layers, 1)
        _int("heads", self.heads, 1)
        _int("d_model", self.d_model, 1)
        if self.d_model % self.heads:
            raise ConfigError(f"model.d_model ({self.d_model}) must be a multiple of model.heads ({self.heads})")
        if self.ffn_width is not None:
            _int("ffn_width", self.ffn_width, 1)
        _choice("positions", self.positions, POSITIONS)
        if self.positions == "rope" and self.head_dim % 2:
            raise ConfigError(f"model.positions rope needs an even head width; d_model / heads = {self.head_dim}")
        _number("rope_base", self.rope_base, low=1.0)
        _number("rope_scaling", self.rope_scaling, low=1.0, inclusive=True)
        _choice("rope_type", self.rope_type, ROPE_TYPES)
        if self.rope_type == "llama3" and self.rope_dynamic:
            raise ConfigError("model.rope_type llama3 and rope_dynamic are two scalings of RoPE; choose one")
        if self.alibi_slopes is not None:
            _choice("alibi_slopes", self.alibi_slopes, ALIBI_SLOPES)
        _choice("ffn", self.ffn, ("none", *FFNS))
        _choice("norm", self.norm, NORMS)
        _number("norm_eps", self.norm_eps, low=0.0)
        _number("dropout", self.dropout, low=0.0, inclusive=True)
        if self.dropout >= 1:
            raise ConfigError(f"model.dropout must be in [0, 1), got {self.dropout!r}")
        _int("block", self.block, 32)
        if self.scaler == "ssmax":
            raise ConfigError(
                "model.scaler 'ssmax' is now called 'log_n' (ssmax names only the fixed-s row map "
                'ssmax_s{s}); set model.scaler = "log_n"'
            )
        _choice("scaler", self.scaler, ("none", *SCALERS))
        _number("scaler_delta", self.scaler_delta, low=float("-inf"))
        _number("scaler_bound", self.scaler_bound, low=0.0)
        if self.scaler_gamma is not None:
            _number("scaler_gamma", self.scaler_gamma, low=float("-inf"))
            if self.scaler not in FIXED_GAMMA_SCALERS:
                raise ConfigError(
                    f"model.scaler_gamma fixes the gamma of the scalers "
                    f"{' and '.join(FIXED_GAMMA_SCALERS)}; model.scaler is {self.scaler!r}"
                )
        for name in ("rope_dynamic", "ffn_matched", "bias", "tie_embeddings", "residual"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"model.{name} must be true or false, got {getattr(self, name)!r}")
        _choice("readout", self.readout, READOUTS)
        if self.readout == "writes" and (self.inputs != "vectors" or not self.residual):
            raise ConfigError(
                f"model.readout writes (h_D - h_0, the sum of the layers' residual writes) needs "
                f"model.inputs vectors and model.residual true, got inputs {self.inputs!r} and "
                f"residual {self.residual!r}"
            )
        object.__setattr__(self, "rowmap", _freeze(self.rowmap))
        self.head_maps()

    @property
    def slope_kind(self) -> str:
        if self.alibi_slopes is not None:
            return self.alibi_slopes
        return "inverse" if self.positions == "nape" else "geometric"

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def width(self) -> int:
        return 4 * self.d_model if self.ffn_width is None else self.ffn_width

    def head_maps(self) -> list[list[str]]:
        """The row-map name of every (layer, head), each checked against the registry."""
        spec = self.rowmap
        if isinstance(spec, str):
            names = [[spec] * self.heads for _ in range(self.layers)]
        elif len(spec) != self.layers:
            raise ConfigError(f"model.rowmap lists {len(spec)} layers but model.layers is {self.layers}")
        else:
            names = [[layer] * self.heads if isinstance(layer, str) else list(layer) for layer in spec]
        for i, layer in enumerate(names):
            if len(layer) != self.heads:
                raise ConfigError(f"model.rowmap layer {i} lists {len(layer)} heads but model.heads is {self.heads}")
            for name in layer:
                try:
                    rowmap = rowmaps.get(name)
                except (ValueError, TypeError) as exc:
                    raise ConfigError(f"model.rowmap: {exc}") from None
                if rowmap.needs_bias:
                    raise ConfigError(
                        f"model.rowmap {name!r} has b=auto, which is a zero-shot calibration; "
                        "give b as a number for training"
                    )
        return names

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> ModelConfig:
        """A config from a mapping; unknown keys are an error that lists the known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown model field(s) {unknown}; known: {', '.join(sorted(known))}")
        if "context" not in values:
            raise ConfigError("model.context is required")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _thaw(getattr(self, f.name)) for f in fields(self)}


def _freeze(spec: Any) -> str | tuple:
    """Lists (as YAML gives them) become tuples so that the config stays hashable and immutable."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, (list, tuple)):
        return tuple(_freeze(x) for x in spec)
    raise ConfigError(f"model.rowmap must be a name, a list of names per layer or of per-head lists, got {spec!r}")


def _thaw(value: Any) -> Any:
    return [_thaw(x) for x in value] if isinstance(value, tuple) else value
