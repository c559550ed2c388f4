"""AdaptiveScale / ASEntmax / ASSMax multiply scores by delta + softplus(x w_beta) (log n)^(s tanh(x w_gamma)) per head and query (Vasylenko et al. 2025 eq. 8-9), or by a fixed power of log n (App. H), and gradients reach w_beta, w_gamma."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.func import functional_call

from attnlab.rowmaps import AdaptiveScale, ASEntmax, ASSMax
from rowmaps.rowmap_refs import assert_close_np, np64, ref_entmax, ref_softmax

H, D, Q, K = 2, 3, 4, 6


def _softplus(v: float) -> float:
    return max(v, 0.0) + math.log1p(math.exp(-abs(v)))


def ref_multiplier(x, w_beta, w_gamma, n, delta, s, per_head, gamma=None):
    """delta + softplus(x.w_beta[h]) * log(n)^(s tanh(x.w_gamma[h])) for every (b, h, q), by loops; with
    ``gamma`` (w_gamma None) the exponent is that constant.

    x: (B, Q, d) shared or (B, H, Q, d) per head; n: (B, H, Q) allowed-key counts (>= 2).
    Returns (B, H, Q) float64.
    """
    x, wb, n = np64(x), np64(w_beta), np.asarray(n, dtype=np.float64)
    B = x.shape[0]
    out = np.zeros((B, H, Q))
    for b in range(B):
        for h in range(H):
            for q in range(Q):
                xv = x[b, h, q] if per_head else x[b, q]
                beta = _softplus(float(np.dot(xv, wb[h])))
                power = gamma if gamma is not None else s * math.tanh(float(np.dot(xv, np64(w_gamma)[h])))
                out[b, h, q] = delta + beta * math.log(n[b, h, q]) ** power
    return out


def _weights(mod, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        mod.w_beta.copy_(torch.randn(H, D, generator=g))
        mod.w_gamma.copy_(torch.randn(H, D, generator=g) * 2)
    return mod


def _inputs(B, seed, per_head, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, H, Q, K, generator=g, dtype=dtype) * 2
    x = torch.randn(*((B, H, Q, D) if per_head else (B, Q, D)), generator=g, dtype=dtype)
    # a different number of allowed keys per batch, head and query; at least 2 each
    mask = torch.rand(B, H, Q, K, generator=g) > 0.4
    mask[..., :2] = True
    return scores, x, mask


@pytest.mark.parametrize("per_head", [False, True], ids=["shared_x", "per_head_x"])
@pytest.mark.parametrize("delta,s", [(1.0, 1.0), (0.5, 2.0)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_scaled_scores_match_hand_formula(per_head, delta, s, dtype):
    B = 3  # != H, so a shared x (B, Q, d) cannot be mistaken for a per-head one
    mod = _weights(AdaptiveScale(H, D, delta=delta, s=s), seed=1).to(dtype)
    scores, x, mask = _inputs(B, seed=2, per_head=per_head, dtype=dtype)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    # with a mask: n = allowed keys of each (b, h, q) row
    n = mask.sum(-1).numpy()
    mult = ref_multiplier(x, mod.w_beta, mod.w_gamma, n, delta, s, per_head)
    out = mod(scores, x, mask)
    assert out.shape == scores.shape and out.dtype == dtype
    assert_close_np(out, np64(scores) * mult[..., None], tol, tol)
    assert_close_np(mod.multiplier(x, torch.tensor(n)[..., None], per_head), mult[..., None], tol, tol)
    # without a mask: n = K for every row
    mult = ref_multiplier(x, mod.w_beta, mod.w_gamma, np.full((B, H, Q), K), delta, s, per_head)
    assert_close_np(mod(scores, x), np64(scores) * mult[..., None], tol, tol)


def test_mask_broadcast_over_heads():
    """A (B, 1, Q, K) mask gives every head the same n."""
    mod = _weights(AdaptiveScale(H, D), seed=3).double()
    scores, x, mask = _inputs(3, seed=4, per_head=False)
    mask = mask[:, :1]
    n = mask.expand(3, H, Q, K).sum(-1).numpy()
    mult = ref_multiplier(x, mod.w_beta, mod.w_gamma, n, 1.0, 1.0, False)
    assert_close_np(mod(scores, x, mask), np64(scores) * mult[..., None], 1e-12, 1e-12)


def test_shared_x_equals_per_head_x_repeated():
    mod = _weights(AdaptiveScale(H, D), seed=5).double()
    scores, x, mask = _inputs(3, seed=6, per_head=False)
    shared = mod(scores, x, mask)
    per_head = mod(scores, x[:, None].expand(3, H, Q, D), mask)
    assert torch.allclose(shared, per_head, rtol=1e-13, atol=1e-13)


def test_shared_x_when_batch_equals_heads():
    """x of shape (B, Q, d) is shared by all heads even when B happens to equal H."""
    mod = _weights(AdaptiveScale(H, D), seed=7).double()
    scores, x, mask = _inputs(H, seed=8, per_head=False)  # B == H
    n = mask.sum(-1).numpy()
    mult = ref_multiplier(x, mod.w_beta, mod.w_gamma, n, 1.0, 1.0, per_head=False)
    assert_close_np(mod(scores, x, mask), np64(scores) * mult[..., None], 1e-12, 1e-12)


def test_unbatched_inputs():
    """scores (H, Q, K) with x (Q, d) shared or (H, Q, d) per head."""
    mod = _weights(AdaptiveScale(H, D), seed=9).double()
    scores, x, mask = _inputs(1, seed=10, per_head=True)
    n = mask.sum(-1).numpy()
    mult = ref_multiplier(x, mod.w_beta, mod.w_gamma, n, 1.0, 1.0, per_head=True)
    assert_close_np(mod(scores[0], x[0], mask[0]), np64(scores[0]) * mult[0][..., None], 1e-12, 1e-12)
    xs = x[0, 0]  # (Q, d)
    mult = ref_multiplier(xs[None], mod.w_beta, mod.w_gamma, n, 1.0, 1.0, per_head=False)
    assert_close_np(mod(scores[0], xs, mask[0]), np64(scores[0]) * mult[0][..., None], 1e-12, 1e-12)


def test_zero_weights_give_delta_plus_log2_over_log_n():
    """w = 0: beta = softplus(0) = log 2, gamma = 0, so the multiplier is delta + log 2."""
    mod = AdaptiveScale(H, D, delta=1.0).double()
    scores, x, mask = _inputs(3, seed=11, per_head=False)
    assert_close_np(mod(scores, x, mask), np64(scores) * (1 + math.log(2)), 1e-13, 1e-13)


@pytest.mark.parametrize("per_head", [False, True], ids=["shared_x", "per_head_x"])
@pytest.mark.parametrize("alpha", [1.5, 2.0])
def test_asentmax_attend_is_entmax_of_scaled_scores(per_head, alpha):
    mod = _weights(ASEntmax(H, D, alpha=alpha), seed=12).double()
    assert mod.row_map.name == f"entmax_a{alpha:g}"
    scores, x, mask = _inputs(3, seed=13, per_head=per_head)
    mult = ref_multiplier(x, mod.w_beta, mod.w_gamma, mask.sum(-1).numpy(), 1.0, 1.0, per_head)
    out = mod.attend(scores, x, mask)
    assert_close_np(out, ref_entmax(np64(scores) * mult[..., None], mask, alpha), 1e-10)
    mult = ref_multiplier(x, mod.w_beta, mod.w_gamma, np.full((3, H, Q), K), 1.0, 1.0, per_head)
    assert_close_np(mod.attend(scores, x), ref_entmax(np64(scores) * mult[..., None], None, alpha), 1e-10)


def test_asentmax_float32_module():
    mod = _weights(ASEntmax(H, D), seed=14)
    scores, x, mask = _inputs(3, seed=15, per_head=False, dtype=torch.float32)
    mult = ref_multiplier(x, mod.w_beta, mod.w_gamma, mask.sum(-1).numpy(), 1.0, 1.0, False)
    out = mod.attend(scores, x, mask)
    assert out.dtype == torch.float32
    assert_close_np(out, ref_entmax(np64(scores) * mult[..., None], mask, 1.5), 1e-5)


@pytest.mark.parametrize("delta", [1.0, 2.0])
def test_asentmax_with_vanishing_beta_is_entmax_of_delta_z(delta):
    mod = ASEntmax(H, D, delta=delta).double()
    with torch.no_grad():
        mod.w_beta.fill_(-1e3)
        mod.w_gamma.normal_()
    scores, x, mask = _inputs(3, seed=16, per_head=False)
    x = x.abs() + 0.1  # x . w_beta <= -300: softplus ~ e^-300 ~ 0
    out = mod.attend(scores, x, mask)
    assert_close_np(out, ref_entmax(delta * np64(scores), mask, 1.5), 1e-12)


def test_assmax_attend_is_softmax_of_scaled_scores():
    mod = _weights(ASSMax(H, D, delta=0.5, s=1.5), seed=17).double()
    scores, x, mask = _inputs(3, seed=18, per_head=True)
    mult = ref_multiplier(x, mod.w_beta, mod.w_gamma, mask.sum(-1).numpy(), 0.5, 1.5, True)
    out = mod.attend(scores, x, mask)
    assert_close_np(out, ref_softmax(np64(scores) * mult[..., None], mask), 1e-12)


def test_single_allowed_key_row():
    """n = 1 is clamped to 2 (documented), so the multiplier stays finite and the one key gets 1."""
    mod = _weights(ASEntmax(H, D), seed=19).double()
    scores, x, mask = _inputs(3, seed=20, per_head=False)
    mask[0, 0, 0] = False
    mask[0, 0, 0, 3] = True
    out = mod.attend(scores, x, mask)
    assert torch.isfinite(out).all()
    assert out[0, 0, 0, 3] == 1.0 and (out[0, 0, 0].sum() == 1.0)
    scaled = mod(scores, x, mask)
    n = mask.sum(-1).clamp_min(2).numpy()
    mult = ref_multiplier(x, mod.w_beta, mod.w_gamma, n, 1.0, 1.0, False)
    assert_close_np(scaled, np64(scores) * mult[..., None], 1e-12, 1e-12)


@pytest.mark.parametrize("cls", [ASEntmax, ASSMax])
@pytest.mark.parametrize("per_head", [False, True], ids=["shared_x", "per_head_x"])
def test_gradcheck_through_weights(cls, per_head):
    torch.manual_seed(0)
    mod = _weights(cls(H, D), seed=21).double()
    g = torch.Generator().manual_seed(22)
    scores = torch.randn(1, H, 3, 5, generator=g, dtype=torch.float64)
    x = torch.randn(*((1, H, 3, D) if per_head else (1, 3, D)), generator=g, dtype=torch.float64)
    mask = torch.ones(1, H, 3, 5, dtype=torch.bool)
    mask[0, :, 1, 4] = False

    def weights_fn(wb, wg, sc, xx):
        scaled = functional_call(mod, {"w_beta": wb, "w_gamma": wg}, (sc, xx, mask))
        return mod.row_map(scaled, mask)

    inputs = (
        mod.w_beta.detach().clone().requires_grad_(),
        mod.w_gamma.detach().clone().requires_grad_(),
        scores.requires_grad_(),
        x.requires_grad_(),
    )
    assert torch.autograd.gradcheck(weights_fn, inputs)


def test_gradients_reach_parameters():
    mod = _weights(ASEntmax(H, D), seed=23)
    scores, x, mask = _inputs(3, seed=24, per_head=False, dtype=torch.float32)
    target = torch.rand(scores.shape)
    (mod.attend(scores, x, mask) * target).sum().backward()
    for p in (mod.w_beta, mod.w_gamma):
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0


def test_constructor_and_shape_errors():
    with pytest.raises(ValueError):
        AdaptiveScale(0, 3)
    with pytest.raises(ValueError):
        AdaptiveScale(2, 0)
    with pytest.raises(ValueError):
        AdaptiveScale(2, 3, s=0)
    mod = AdaptiveScale(H, D)
    with pytest.raises(ValueError, match="feature size"):
        mod(torch.zeros(1, H, Q, K), torch.zeros(1, Q, D + 1))
    with pytest.raises(ValueError, match="H="):
        mod(torch.zeros(1, H + 1, Q, K), torch.zeros(1, Q, D))
    assert {n for n, _ in mod.named_parameters()} == {"w_beta", "w_gamma"}
    assert mod.w_beta.shape == (H, D) and mod.w_gamma.shape == (H, D)
    with pytest.raises(ValueError, match="gamma must be a finite number"):
        AdaptiveScale(2, 3, gamma=float("inf"))


@pytest.mark.parametrize("per_head", [False, True])
def test_a_fixed_gamma_is_the_hand_formula_with_that_exponent(per_head):
    mod = AdaptiveScale(H, D, delta=0.5, gamma=-0.5).double()
    assert mod.w_gamma is None
    with torch.no_grad():
        mod.w_beta.copy_(torch.randn(H, D, generator=torch.Generator().manual_seed(31)))
    scores, x, mask = _inputs(3, seed=32, per_head=per_head, dtype=torch.float64)
    mult = ref_multiplier(x, mod.w_beta, None, mask.sum(-1).numpy(), 0.5, 1.0, per_head, gamma=-0.5)
    assert_close_np(mod(scores, x, mask), np64(scores) * mult[..., None], 1e-12, 1e-12)
