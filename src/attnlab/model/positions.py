"""Positional encodings for attnlab's causal decoder: learned absolute, RoPE (linear and dynamic-NTK), ALiBi, NAPE.

RoPE rotates queries and keys before the dot product (``apply_rope``); ALiBi and NAPE are additive
score biases of shape (heads, queries, keys) (``alibi_bias``); learned positions are added to the token
embeddings (``LearnedPositions``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlab.errors import ArgumentError
from attnlab.site import linear_bias

SLOPE_KINDS = ("geometric", "inverse")


def _positive_int(name: str, value: object) -> int:
    # bool is an int subclass; True as a head count is always a bug
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"{name} must be a positive int, got {value!r}")
    return value


def _factor(name: str, value: object) -> float:
    # Below 1 would compress rather than stretch positions: almost always 1/factor written by mistake.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 1:
        raise ArgumentError(f"{name} must be a finite number >= 1 (1 means no scaling), got {value!r}")
    return float(value)


def _base(base: object) -> float:
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base) or base <= 1:
        raise ArgumentError(f"base must be a finite number > 1, got {base!r}")
    return float(base)


def _head_dim(head_dim: object, smallest: int = 2) -> int:
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < smallest or head_dim % 2:
        raise ArgumentError(f"head_dim must be an even int >= {smallest}, got {head_dim!r}")
    return head_dim


class LearnedPositions(nn.Module):
    """Learned absolute position embeddings (GPT-2 style): one trained row of width ``dim`` per position
    0 .. ``context`` - 1. ``forward(t)`` with an int returns the rows of positions 0 .. t - 1, shape (t, dim);
    ``forward(positions)`` with an integer tensor of any shape returns ``(*positions.shape, dim)``. A position
    outside the table raises ValueError, since there is no row to extrapolate to."""

    def __init__(self, context: int, dim: int) -> None:
        super().__init__()
        self.context = _positive_int("context", context)
        self.table = nn.Embedding(context, _positive_int("dim", dim))
        # GPT-2's scale: positions start small next to token embeddings instead of swamping them
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, positions: int | Tensor) -> Tensor:
        if isinstance(positions, int) and not isinstance(positions, bool):
            if positions < 0:
                raise ArgumentError(f"positions as a token count must be >= 0, got {positions}")
            positions = torch.arange(positions, device=self.table.weight.device)
        elif (
            not isinstance(positions, Tensor)
            or positions.dtype.is_floating_point
            or positions.dtype.is_complex
            or positions.dtype == torch.bool
        ):
            got = f"dtype {positions.dtype}" if isinstance(positions, Tensor) else repr(positions)
            raise ArgumentError(f"positions must be an int token count or an integer tensor, got {got}")
        if positions.numel():
            low, high = int(positions.min()), int(positions.max())
            if low < 0 or high >= self.context:
                raise ArgumentError(
                    f"positions must lie in [0, {self.context - 1}] (context={self.context}), "
                    f"got values in [{low}, {high}]"
                )
        return self.table(positions)


def rope_frequencies(head_dim: int, base: float = 10000.0, scaling: float = 1.0) -> Tensor:
    """RoPE inverse frequencies (Su et al. 2024), float32 of shape (head_dim // 2,):
    ``base ** (-2k / head_dim) / scaling`` for k = 0 .. head_dim/2 - 1, as Hugging Face Llama builds them.

    ``scaling`` is linear position interpolation: dividing the frequencies by ``scaling`` is dividing
    every position by it, so position ``scaling * p`` gets the unscaled angles of ``p``. Vasylenko et al. 2025
    (Vasylenko et al. 2025, App. G.2) uses a factor of 16 for its RoPE baselines. For dynamic NTK
    pass ``base=dynamic_ntk_base(...)``.
    """
    _head_dim(head_dim)
    base, scaling = _base(base), _factor("scaling", scaling)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    return 1.0 / (base**exponents) / scaling


def llama3_frequencies(
    inv_freq: Tensor, factor: float, original_context: int, low_freq_factor: float = 1.0, high_freq_factor: float = 4.0
) -> Tensor:
    """Llama 3's RoPE scaling of inverse frequencies, as Hugging Face's ``_compute_llama3_parameters`` builds
    them (the "Llama 3 RoPE scaling" Vasylenko et al. 2025 App. G.2 uses, factor 16): wavelengths longer than
    ``original_context / low_freq_factor`` are divided by ``factor``, ones shorter than ``original_context /
    high_freq_factor`` kept, and those between interpolated smoothly. ``original_context`` is the training
    length the scaling extends."""
    factor = _factor("factor", factor)
    original_context = _positive_int("original_context", original_context)
    if not 0 < low_freq_factor < high_freq_factor:
        raise ArgumentError(f"need 0 < low_freq_factor < high_freq_factor, got {low_freq_factor}, {high_freq_factor}")
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > original_context / low_freq_factor, inv_freq / factor, inv_freq)
    smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    medium = (wavelen >= original_context / high_freq_factor) & (wavelen <= original_context / low_freq_factor)
    return torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)


def dynamic_ntk_base(base: float, head_dim: int, n: int, n_train: int, factor: float = 1.0) -> float:
    """Dynamic-NTK RoPE base for a window of ``n`` tokens, model trained on ``n_train``.

    Hayase & Karakida 2026 (App. A.2, after Peng et al. 2023 §3.4) defines
    ``base * rho ** (d / (d - 2))`` with ``rho = max(1, n / n_train)`` and d = ``head_dim``; that is the
    default ``factor=1``. A ``factor`` above 1 follows Hugging Face transformers'
    ``_compute_dynamic_ntk_parameters``: ``base * (factor * n / n_train - (factor - 1)) ** (d / (d - 2))``
    when ``n > n_train``. Either way the base is unchanged for ``n <= n_train``. The base is meant to be
    computed once per window and held fixed for every position in it (Hayase & Karakida 2026, App. A.2).
    """
    d = _head_dim(head_dim, smallest=4)  # d / (d - 2) is undefined at d = 2
    n, n_train = _positive_int("n", n), _positive_int("n_train", n_train)
    base, factor = _base(base), _factor("factor", factor)
    if n <= n_train:
        return base
    return base * (factor * n / n_train - (factor - 1)) ** (d / (d - 2))


def rope_angles(positions: Tensor, inv_freq: Tensor) -> tuple[Tensor, Tensor]:
    """``(cos, sin)`` of the RoPE angles ``position * inv_freq``, each of shape
    ``(*positions.shape, 2 * len(inv_freq))`` in the rotate-half layout of Hugging Face Llama (the
    frequencies repeated, not interleaved). ``positions`` is ``(tokens,)`` or ``(batch, tokens)``; the
    dtype is ``inv_freq``'s."""
    if inv_freq.dim() != 1 or inv_freq.numel() == 0 or not inv_freq.dtype.is_floating_point:
        raise ArgumentError(
            f"inv_freq must be a non-empty 1-D float tensor, got shape {tuple(inv_freq.shape)} dtype {inv_freq.dtype}"
        )
    if positions.dim() not in (1, 2):
        raise ArgumentError(f"positions must be (tokens,) or (batch, tokens), got shape {tuple(positions.shape)}")
    angles = positions.to(inv_freq.dtype)[..., None] * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate ``x`` of shape (batch, heads, tokens, head_dim) by RoPE, rotate-half layout: coordinate k
    pairs with k + head_dim/2, exactly as Hugging Face Llama's ``apply_rotary_pos_emb``. ``cos`` and
    ``sin`` come from ``rope_angles``: (tokens, head_dim), or (batch, tokens, head_dim) for per-sequence
    positions."""
    if x.dim() != 4:
        raise ArgumentError(f"x must be (batch, heads, tokens, head_dim), got shape {tuple(x.shape)}")
    batch, _, tokens, head_dim = x.shape
    if head_dim % 2:
        raise ArgumentError(f"x's head_dim must be even for RoPE, got {head_dim}")
    wanted = f"(tokens, head_dim) = ({tokens}, {head_dim}) or (batch, tokens, head_dim) with batch 1 or {batch}"
    for name, t in (("cos", cos), ("sin", sin)):
        bad_batch = t.dim() == 3 and t.shape[0] not in (1, batch)
        if t.dim() not in (2, 3) or tuple(t.shape[-2:]) != (tokens, head_dim) or bad_batch:
            raise ArgumentError(f"{name} must be {wanted}, got shape {tuple(t.shape)}")
    if cos.dim() == 3:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


def alibi_slopes(n_heads: int, kind: str = "geometric") -> Tensor:
    """Per-head ALiBi slopes m_h > 0, float32 of shape (n_heads,).

    ``"geometric"`` (Press et al. 2022): for n_heads a power of two, m_h = 2 ** (-8 h / n_heads),
    h = 1 .. n_heads. Otherwise, with p the largest power of two below n_heads, the p slopes for p heads
    followed by the first n_heads - p odd-indexed slopes of the 2p-head sequence, 2 ** (-8 (2i - 1) / (2p)),
    as in the ALiBi reference code and BLOOM's ``build_alibi_tensor``. Vasylenko et al. 2025 uses these "original
    exponential" slopes for its language models (Vasylenko et al. 2025, App. G.3); its Def. 2 (App. E.2)
    writes 2 ** (-h / H), which we do not follow.

    ``"inverse"``: m_h = 1 / h, the linear slopes Vasylenko et al. 2025 uses for NAPE on its synthetic tasks (App. G.2).
    """
    n_heads = _positive_int("n_heads", n_heads)
    if kind == "inverse":
        return 1.0 / torch.arange(1, n_heads + 1, dtype=torch.float32)
    if kind != "geometric":
        raise ArgumentError(f"kind must be one of {SLOPE_KINDS}, got {kind!r}")
    p = 1 << (n_heads.bit_length() - 1)
    exponents = [8 * h / p for h in range(1, p + 1)]
    exponents += [8 * i / (2 * p) for i in range(1, 2 * (n_heads - p), 2)]
    return torch.tensor([2.0**-e for e in exponents], dtype=torch.float32)


def alibi_bias(slopes: Tensor, query_positions: Tensor, key_positions: Tensor) -> Tensor:
    """Additive ALiBi score bias of shape (heads, queries, keys): ``m_h (j - i)`` for key position
    j <= query position i and 0 for j > i (Vasylenko et al. 2025, §4.2 and App. E.2 eq. 109).
    Keys after the query get 0 rather than -inf: masking them is the causal mask's job. Zero slopes give
    NoPE heads, so this also builds NAPE's bias from ``nape_slopes``."""
    if slopes.dim() != 1 or not slopes.dtype.is_floating_point:
        raise ArgumentError(
            f"slopes must be a 1-D float tensor (heads,), got shape {tuple(slopes.shape)} dtype {slopes.dtype}"
        )
    if bool((slopes < 0).any()):
        raise ArgumentError(f"slopes must be >= 0 (0 is a NoPE head), got {slopes.tolist()}")
    for name, t in (("query_positions", query_positions), ("key_positions", key_positions)):
        if t.dim() != 1:
            raise ArgumentError(f"{name} must be 1-D (tokens,), got shape {tuple(t.shape)}")
    return linear_bias(slopes, query_positions, key_positions)


def nape_slopes(n_heads: int, kind: str = "inverse") -> Tensor:
    """NAPE slopes (Vasylenko et al. 2025, §4.2 and App. G.2): ALiBi on the first
    ``n_heads // 2`` heads, NoPE (slope 0) on the remaining ``n_heads - n_heads // 2``, so for odd n_heads
    NoPE has one head more (5 heads: 2 ALiBi, 3 NoPE; 1 head: NoPE only). The seed only says "half the
    heads"; the order and the rounding follow the authors' code (deep-spin/asentmax, ``get_nape_slopes``
    with ``alibi_num_heads = num_attention_heads // 2``). The ALiBi half gets
    ``alibi_slopes(n_heads // 2, kind)``; ``kind`` defaults to the 1/h slopes of the seed's synthetic tasks
    (App. G.2; its language models use ``"geometric"``, App. G.3). Feed the result to ``alibi_bias``."""
    n_heads = _positive_int("n_heads", n_heads)
    if kind not in SLOPE_KINDS:
        raise ArgumentError(f"kind must be one of {SLOPE_KINDS}, got {kind!r}")
    n_alibi = n_heads // 2
    alibi = alibi_slopes(n_alibi, kind) if n_alibi else torch.zeros(0)
    return torch.cat((alibi, torch.zeros(n_heads - n_alibi)))
