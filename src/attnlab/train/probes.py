"""The Zhu et al. 2026 probes logged at every evaluation, and the differentiable upper entropy of its entropy floor.

Zhu et al. 2026 (Learning Less Is More: Premature Upper-Layer Attention Specialization) measures premature
upper-layer attention specialization with upper attention entropy and logit magnitude, the upper/lower
logit ratio, the top singular value of the upper W_Q^T W_K bilinear form and its displacement from
initialization, the FFN residual write, the lower-copy score, and the perplexity increase from zeroing
upper-half Q/K (§2, §4, §5.3-5.6, App. C, D, G).

    >>> record = probe(model, ids, targets, initial=initial_qk_weights)
    >>> record["upper_entropy"], record["dppl_zero_qk"], record["qk_sigma_max/1"]
    >>> with upper_entropy_tracker(model) as tracker:
    ...     logits = model(ids)
    >>> loss = ce + lam * torch.relu(h0 - tracker.value())

The upper half is layers L//2 .. L-1 (the layers whose Q/K the intervention slows,
``attnlab.train.optim.upper_qk_names``), the lower half 0 .. L//2-1. With L = 1 the single layer is upper
and every lower-half probe (``lower_entropy``, ``lower_logit``, ``upper_lower_logit_ratio``,
``lower_copy``) is NaN. Score and weight blocks are reduced to running sums as they pass, so no probe
holds more than one query block of a layer.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

import torch
from torch import nn

from attnlab.errors import ArgumentError
from attnlab.model.decoder import Decoder, loss
from attnlab.site import ScoreBlock, WeightBlock

PROJECTIONS = {"q": ("q_proj",), "k": ("k_proj",), "qk": ("q_proj", "k_proj")}


def upper_layers(n_layers: int) -> range:
    """Layers L//2 .. L-1: the upper half of Zhu et al. 2026 §2 (the single layer when L = 1)."""
    return range(n_layers // 2, n_layers)


def lower_layers(n_layers: int) -> range:
    """Layers 0 .. L//2-1: the lower half of Zhu et al. 2026 §2 (empty when L = 1)."""
    return range(n_layers // 2)


def _wide(t: torch.Tensor) -> torch.Tensor:
    # bf16/fp16 blocks under autocast would round the sums; float64 references stay float64
    return t if t.dtype == torch.float64 else t.float()


def row_entropy(weights: torch.Tensor, allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalized attention entropy H(w) / log n of every row (n = the row's allowed keys) and the mask
    of rows with n >= 2, where it is defined; both (batch, heads, queries).

    Zhu et al. 2026 §5.4-5.6, Tables 3-6 and App. D (h0 = 0.80). The seed does not write the normalization, but
    its numbers are on this scale: App. G pairs upper logit 0.342 with entropy 0.984, and rows whose
    logits are that small over hundreds of causal keys are nearly uniform, with a raw entropy near
    log n ~ 6, not below 1; an h0 = 0.80 floor only bites on the [0, 1] scale. Zero weights (masked keys,
    a sparse map's support) contribute 0 log 0 = 0, and their gradient stays finite, so the result can
    sit in a training loss.
    """
    w = _wide(weights)
    # log 1 = 0 at zero weights keeps 0 log 0 = 0 and its gradient at 0, where xlogy's would be 0/0
    h = -(w * torch.log(torch.where(w > 0, w, torch.ones_like(w)))).sum(-1)
    n = allowed.sum(-1)
    rows = (n >= 2).expand_as(h)
    return h / torch.log(n.clamp(min=2).to(h.dtype)), rows


def score_square_sum(scores: torch.Tensor, allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of z^2 over the allowed entries of a pre-map score block, and the number of those entries.

    Zhu et al. 2026 names "attention logit magnitude" (§2, §4, Tables 3, 5, 6, 10) without defining it; the
    probes take its RMS over allowed entries, ||Z||_F / sqrt(entries), the Frobenius size that the §6
    growth bound controls, made independent of sequence length.
    """
    z = _wide(scores)
    mask = allowed.expand_as(z)
    return torch.where(mask, z, torch.zeros_like(z)).square().sum(), mask.sum()


def previous_occurrence(ids: torch.Tensor) -> torch.Tensor:
    """For each position of ids (batch, tokens) the nearest earlier position holding the same token, -1
    where the token has not occurred before (Zhu et al. 2026 §2, the lower-copy target)."""
    # a stable sort groups equal tokens with their positions ascending, so each one's predecessor in the
    # sorted order is its nearest previous occurrence
    order = torch.sort(ids, dim=-1, stable=True).indices
    tokens = ids.gather(-1, order)
    prev = torch.where(tokens[:, 1:] == tokens[:, :-1], order[:, :-1], -1)
    return torch.full_like(ids, -1).scatter_(-1, order[:, 1:], prev)


def copy_mass(weights: torch.Tensor, previous: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of the attention mass each row puts on its query's nearest previous occurrence, over the rows
    whose token repeats, and the number of those (row, head) pairs (Zhu et al. 2026 §2).

    weights (batch, heads, queries, keys); previous (batch, queries): the key index of that occurrence
    for the block's queries, -1 where there is none.
    """
    b, h, q, _ = weights.shape
    valid = previous >= 0
    index = previous.clamp(min=0)[:, None, :, None].expand(b, h, q, 1)
    mass = _wide(weights).gather(-1, index).squeeze(-1)
    return torch.where(valid[:, None], mass, torch.zeros_like(mass)).sum(), valid.sum() * h


def lower_copy_chance(ids: torch.Tensor) -> float:
    """The lower-copy score of uniform causal attention on ids (batch, tokens): the mean of 1 / (i + 1) over
    the positions i whose token occurred earlier, since a uniform row at position i puts 1 / (i + 1) on each
    key. The release rule's chance baseline (Zhu et al. 2026 §2 sets its threshold 0.005 at context 1024,
    where this is about 0.004; at context 128 it is about 0.02). NaN with no repeated token."""
    valid = previous_occurrence(ids) >= 0
    if not bool(valid.any()):
        return math.nan
    uniform = 1.0 / torch.arange(1, ids.shape[-1] + 1, dtype=torch.float64)
    return float(uniform.expand(valid.shape)[valid].mean())


def qk_bilinear(q_weight: torch.Tensor, k_weight: torch.Tensor, heads: int) -> torch.Tensor:
    """B_h = W_Q,h^T W_K,h (heads, d_model, d_model) for every head, so that head h's logit between
    inputs x_i, x_j is x_i^T B_h x_j / sqrt(d_k) (biases and RoPE aside).

    Zhu et al. 2026 §2 eq. 1 writes B = W_Q W_K^T with row vectors (Q = X W_Q); nn.Linear keeps W as
    (out, in), where the same form reads W_Q^T W_K, the seed's §5.4 spelling.
    """
    d_out, d_in = q_weight.shape
    wq = _wide(q_weight).reshape(heads, d_out // heads, d_in)
    wk = _wide(k_weight).reshape(heads, d_out // heads, d_in)
    return wq.transpose(1, 2) @ wk


def perplexity(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """exp(mean next-token cross-entropy), targets of -100 ignored (Zhu et al. 2026 §4)."""
    return math.exp(float(loss(logits, targets)))


class _PerLayer:
    """Running (sum, count) per layer, so that each block is reduced as it passes and none is kept."""

    def __init__(self) -> None:
        self.sums: dict[int, torch.Tensor] = {}
        self.counts: dict[int, torch.Tensor | int] = {}

    def add(self, layer: int, total: torch.Tensor, count: torch.Tensor | int) -> None:
        self.sums[layer] = self.sums[layer] + total if layer in self.sums else total
        self.counts[layer] = self.counts[layer] + count if layer in self.counts else count

    def mean(self, layer: int) -> torch.Tensor:
        return self.sums[layer] / self.counts[layer]


def _half_mean(values: Mapping[int, float], layers: Iterable[int]) -> float:
    picked = [values[i] for i in layers if i in values]
    return sum(picked) / len(picked) if picked else math.nan


def _check_tokens(model: nn.Module) -> None:
    if not isinstance(model, Decoder):
        raise ArgumentError(f"the Zhu et al. 2026 probes need attnlab's own Decoder, got {type(model).__name__}")
    if model.cfg.inputs != "tokens":
        raise ArgumentError(
            f"the Zhu et al. 2026 probes need a token-mode model (model.inputs tokens: ids in, logits "
            f"out), got inputs {model.cfg.inputs!r}"
        )


def _entropy_sum(block: WeightBlock) -> tuple[torch.Tensor, torch.Tensor]:
    h, rows = row_entropy(block.weights, block.allowed)
    return torch.where(rows, h, torch.zeros_like(h)).sum(), rows.sum()


def _first_position(block: WeightBlock) -> int:
    # WeightBlock carries no n_keys; query i sits at key position n_keys - n_queries + i
    return block.weights.shape[-1] - block.n_queries + block.query_start


class UpperEntropyTracker:
    """A weight observer that sums the normalized entropy of the upper half's rows as blocks pass, inside
    the autograd graph (Zhu et al. 2026 App. D's H_upper)."""

    def __init__(self, n_layers: int) -> None:
        self.upper = upper_layers(n_layers)
        self._entropy = _PerLayer()

    def __call__(self, block: WeightBlock) -> None:
        if block.layer in self.upper:
            self._entropy.add(block.layer, *_entropy_sum(block))

    def value(self) -> torch.Tensor:
        """Mean normalized entropy over upper layers, heads, batch and rows with >= 2 allowed keys: a
        differentiable scalar (NaN if no row had two keys)."""
        if not self._entropy.sums:
            raise RuntimeError(
                "the upper-entropy tracker saw no attention weights; run the model's forward inside its context"
            )
        return torch.stack([self._entropy.mean(i) for i in sorted(self._entropy.sums)]).mean()


@contextlib.contextmanager
def upper_entropy_tracker(model: Decoder) -> Iterator[UpperEntropyTracker]:
    """Observe the model's forward passes inside the context; ``tracker.value()`` is then the mean
    normalized upper attention entropy H_upper of Zhu et al. 2026 App. D (the definition of
    :func:`row_entropy`), still in the autograd graph, for the floor lambda max(0, h0 - H_upper).

    Each block adds its entropy sum to a running total and is not held; the graph keeps only what the
    backward of those sums needs.
    """
    _check_tokens(model)
    tracker = UpperEntropyTracker(len(model.layers))
    with model.observed(tracker, weights=True):
        yield tracker


@contextlib.contextmanager
def zeroed(model: Decoder, layers: Iterable[int], projections: Sequence[str]) -> Iterator[None]:
    """Make the named projections (``q_proj``, ``k_proj``) of ``layers`` output zeros while the context is
    open: Zhu et al. 2026 §4's evaluation-time zeroing of upper Q, K or both."""
    with contextlib.ExitStack() as stack:
        for i in layers:
            for name in projections:
                handle = getattr(model.layers[i].attn, name).register_forward_hook(
                    lambda module, inputs, output: torch.zeros_like(output)
                )
                stack.callback(handle.remove)
        yield


@contextlib.contextmanager
def _evaluating(model: nn.Module) -> Iterator[None]:
    # per-module flags, so that a model left with mixed train/eval submodules gets exactly them back
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        for m, mode in modes:
            m.training = mode


@contextlib.contextmanager
def _ffn_writes(model: Decoder) -> Iterator[_PerLayer]:
    """Sum of squares and element count of each layer's FFN output, the residual write it adds."""
    writes = _PerLayer()
    with contextlib.ExitStack() as stack:
        for i, block in enumerate(model.layers):
            if block.ffn is None:
                continue

            def hook(module, inputs, output, layer=i):
                writes.add(layer, _wide(output).square().sum(), output.numel())

            stack.callback(block.ffn.register_forward_hook(hook).remove)
        yield writes


def _attention_readout(
    model: Decoder, ids: torch.Tensor, *, entropy: bool, logits: bool, copy: bool
) -> tuple[torch.Tensor, dict[str, _PerLayer], _PerLayer]:
    """One observed forward: per-layer entropy, score-square and lower-copy sums, and the FFN writes."""
    lower = lower_layers(len(model.layers))
    previous = previous_occurrence(ids) if copy else None
    sums = {"entropy": _PerLayer(), "logit": _PerLayer(), "copy": _PerLayer()}

    def on_weights(block: WeightBlock) -> None:
        if entropy:
            sums["entropy"].add(block.layer, *_entropy_sum(block))
        if copy and block.layer in lower:
            start = _first_position(block)
            sums["copy"].add(
                block.layer, *copy_mass(block.weights, previous[:, start : start + block.weights.shape[2]])
            )

    def on_scores(block: ScoreBlock) -> None:
        sums["logit"].add(block.layer, *score_square_sum(block.scores, block.allowed))

    with contextlib.ExitStack() as stack:
        stack.enter_context(model.observed(on_weights, weights=True))
        if logits:
            stack.enter_context(model.observed(on_scores))
        writes = stack.enter_context(_ffn_writes(model))
        out = model(ids)
    return out, sums, writes


def _lower_copy(copy: _PerLayer, n_layers: int) -> float:
    # every lower layer sees the same valid rows, so the pooled mean is the mean over layers
    layers = [i for i in lower_layers(n_layers) if i in copy.sums]
    if not layers:
        return math.nan
    count = sum(int(copy.counts[i]) for i in layers)
    return float(sum(float(copy.sums[i]) for i in layers) / count) if count else math.nan


def lower_copy_score(model: Decoder, ids: torch.Tensor) -> float:
    """Zhu et al. 2026 §2's lower-copy score on ids (batch, tokens): the lower-half attention mass on the
    nearest previous occurrence of each query's token, averaged over lower layers, heads and the
    positions whose token occurred earlier in its sequence. NaN with no repeated token, or with L = 1
    (no lower half). Runs in eval mode under no_grad and restores the model's modes."""
    _check_tokens(model)
    with _evaluating(model):
        _, sums, _ = _attention_readout(model, ids, entropy=False, logits=False, copy=True)
    return _lower_copy(sums["copy"], len(model.layers))


def _qk_spectra(model: Decoder, initial: Mapping[str, torch.Tensor] | None) -> dict[str, float]:
    """qk_sigma_max/<l>: the largest over heads of sigma_max(B_h) (Zhu et al. 2026 §5.4, Fig. 3C); with
    ``initial``, qk_sigma_shift/<l>: the largest over heads of sigma_max(B_h - B_h(0)), the displacement
    of the bilinear form from initialization (App. G, Table 10); both for every upper layer, and their
    means over the upper half."""
    heads = model.cfg.heads
    upper = upper_layers(len(model.layers))
    names = [f"layers.{i}.attn.{p}.weight" for i in upper for p in ("q_proj", "k_proj")]
    missing = [n for n in names if initial is not None and n not in initial]
    if missing:
        raise ArgumentError(
            f"initial lacks the upper Q/K weights {missing}; give the model's initial state_dict entries for them"
        )
    record: dict[str, float] = {}
    for i in upper:
        attn = model.layers[i].attn
        bilinear = qk_bilinear(attn.q_proj.weight, attn.k_proj.weight, heads)
        # B is per head (Zhu et al. 2026 §2 eq. 1); the layer reports its largest head, the one that can sharpen
        # its rows first
        record[f"qk_sigma_max/{i}"] = float(torch.linalg.matrix_norm(bilinear, ord=2).max())
        if initial is not None:
            start = qk_bilinear(
                initial[f"layers.{i}.attn.q_proj.weight"].to(bilinear.device),
                initial[f"layers.{i}.attn.k_proj.weight"].to(bilinear.device),
                heads,
            )
            record[f"qk_sigma_shift/{i}"] = float(torch.linalg.matrix_norm(bilinear - start, ord=2).max())
    for key in ("qk_sigma_max", "qk_sigma_shift"):
        values = [record[f"{key}/{i}"] for i in upper if f"{key}/{i}" in record]
        if values:
            record[f"upper_{key}"] = sum(values) / len(values)
    return record


def probe(
    model: Decoder, ids: torch.Tensor, targets: torch.Tensor, *, initial: Mapping[str, torch.Tensor] | None = None
) -> dict[str, float]:
    """Every Zhu et al. 2026 probe on one evaluation batch ids, targets (batch, tokens).

    Zhu et al. 2026 §2, §4, §5.3-5.6, App. C, D, G. Keys (upper half L//2 .. L-1, lower half 0 .. L//2-1):

    - ``entropy/<l>``, ``upper_entropy``, ``lower_entropy``: normalized attention entropy H(w) / log n
      of the weights after the row map, over heads, batch and rows with >= 2 allowed keys
      (:func:`row_entropy`); the halves are means over their layers.
    - ``logit/<l>``, ``upper_logit``, ``lower_logit``: RMS of the pre-map logits z = q k^T / sqrt(d_k)
      (+ any ALiBi bias, before a learnable scaler) over allowed entries (:func:`score_square_sum`);
      ``upper_lower_logit_ratio`` = upper_logit / lower_logit.
    - ``qk_sigma_max/<l>`` (upper layers) and ``upper_qk_sigma_max``; with ``initial`` (the model's
      initial ``state_dict`` entries for the upper q_proj/k_proj weights), ``qk_sigma_shift/<l>`` and
      ``upper_qk_sigma_shift`` (:func:`_qk_spectra`).
    - ``ffn_write_rms/<l>`` (layers with an FFN): RMS over all elements of the FFN output, the residual
      write it adds (App. C, Table 5); ``upper_ffn_write_rms``: its mean over upper layers.
    - ``lower_copy``: :func:`lower_copy_score`; ``lower_copy_chance``: :func:`lower_copy_chance` on the same
      ids; ``lower_copy_excess`` = lower_copy - lower_copy_chance.
    - ``ppl``: exp(mean CE); ``ppl_zero_q``, ``ppl_zero_k``, ``ppl_zero_qk``: the same with the upper
      half's Q, K or both projections outputting zeros (§4, §5.3), and ``dppl_zero_*`` = ppl_zero_* - ppl.
      In dot-product attention all three make upper logits 0 (uniform softmax rows); an ALiBi bias
      survives the zeroing.

    L = 1 leaves the lower-half keys NaN. Runs in eval mode under no_grad, restores the model's modes and
    leaves no hook or observer behind.
    """
    _check_tokens(model)
    n_layers = len(model.layers)
    upper, lower = upper_layers(n_layers), lower_layers(n_layers)
    record: dict[str, float] = {}
    with _evaluating(model):
        logits, sums, writes = _attention_readout(model, ids, entropy=True, logits=True, copy=True)
        record["ppl"] = perplexity(logits, targets)
        for which, projections in PROJECTIONS.items():
            with zeroed(model, upper, projections):
                record[f"ppl_zero_{which}"] = perplexity(model(ids), targets)
            record[f"dppl_zero_{which}"] = record[f"ppl_zero_{which}"] - record["ppl"]
        entropy = {i: float(sums["entropy"].mean(i)) for i in sums["entropy"].sums}
        logit = {i: math.sqrt(float(sums["logit"].mean(i))) for i in sums["logit"].sums}
        rms = {i: math.sqrt(float(writes.mean(i))) for i in writes.sums}
        record.update(_qk_spectra(model, initial))
    record.update({f"entropy/{i}": v for i, v in sorted(entropy.items())})
    record.update(upper_entropy=_half_mean(entropy, upper), lower_entropy=_half_mean(entropy, lower))
    record.update({f"logit/{i}": v for i, v in sorted(logit.items())})
    record.update(upper_logit=_half_mean(logit, upper), lower_logit=_half_mean(logit, lower))
    # NaN, not a ZeroDivisionError, when the lower logits are all zero (or there is no lower half)
    record["upper_lower_logit_ratio"] = (
        record["upper_logit"] / record["lower_logit"] if record["lower_logit"] else math.nan
    )
    record.update({f"ffn_write_rms/{i}": v for i, v in sorted(rms.items())})
    if rms:
        record["upper_ffn_write_rms"] = _half_mean(rms, upper)
    record.update(copy_scores(_lower_copy(sums["copy"], n_layers), ids))
    return record


def copy_scores(lower_copy: float, ids: torch.Tensor) -> dict[str, float]:
    """``lower_copy`` beside uniform attention's score on the same ids and the excess over it."""
    chance = lower_copy_chance(ids)
    return {"lower_copy": lower_copy, "lower_copy_chance": chance, "lower_copy_excess": lower_copy - chance}
