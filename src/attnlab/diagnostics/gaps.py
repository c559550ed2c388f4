"""Gap counting of a score row: N_n(t), the upper-tail accumulation scale Lambda_n and its contact point.

Seed 003 (A Unified Framework for Critical Scaling of Inverse Temperature in Self-Attention), §4.2 and
App. C-D. With gaps g_j = z* - z_j over the n allowed keys (z* the row maximum):

    N_n(t) = #{j : g_j <= t}                                    (Def. 4.3; the maximum itself counts)
    Lambda_n = sup_{t>0} log N_n(t) / t = max over positive gaps u of log N_n(u) / u   (Def. 4.4, Lemma C.1)
    Lambda_n = inf when the maximum is tied (N_n(0) >= 2, Cor. C.2)
    Delta_n = the largest positive gap u with log N_n(u) / u >= (1 - eps) Lambda_n  (Def. 4.5; eps absorbs
              float rounding, 1e-6 by default), alpha_n = log N_n(Delta_n) / log n, C_n = alpha_n log n
    Lambda_n^(r) = sup over t > 0 with log N_n(t) > r of (log N_n(t) - r) / t        (Def. D.3)
    p*_n(beta) = max_j softmax(beta z)_j = 1 / Z_n(beta),  Z_n(beta) = sum_j exp(-beta g_j)   (App. D)

Rows are float64 ``zm`` of shape (R, n) with -inf at masked keys; every row has at least one allowed
key and no NaN or +inf (``row_stats`` labels those rows first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def sorted_gaps(zm: torch.Tensor) -> torch.Tensor:
    """Gaps z* - z_j in ascending order along each row; masked keys sort last as +inf."""
    return (zm.amax(-1, keepdim=True) - zm).sort(-1).values


def counts(gs: torch.Tensor) -> torch.Tensor:
    """N_n(g_(j)) for each sorted gap: the number of gaps <= it, ties included (Def. 4.3)."""
    return torch.searchsorted(gs, gs, right=True)


def default_resolution(n_keys: torch.Tensor) -> torch.Tensor:
    """r = log(1 + log n): the envelope discretisation error of seed 003 App. D (eq. after Prop. D.6),
    the smallest resolution at which Lambda_n^(r) tracks the rank boundary."""
    return torch.log1p(n_keys.to(torch.float64).log())


def gap_stats(zm: torch.Tensor, n_keys: torch.Tensor, *, eps: float = 1e-6,
              r: float | None = None) -> dict[str, torch.Tensor]:
    """lambda_n, tie, contact_gap, contact_count, alpha_n, contact_entropy and lambda_resolved per row
    (seed 003 §4.2, Lemma C.1, Cor. C.2, Def. D.3).

    A single-key row has no competitor: N_n = 1 everywhere, so Lambda_n = 0 and the contact point is
    undefined (NaN). On tied rows Lambda_n = inf and the contact point is NaN; the seed leaves them out
    of aggregates. lambda_resolved is NaN where no t has log N_n(t) > r. ``r`` defaults to log(1 + log n).
    """
    gs = sorted_gaps(zm)
    count = counts(gs)
    log_n = count.to(torch.float64).log()
    positive = (gs > 0) & (gs < math.inf)
    ratio = torch.where(positive, log_n / gs, -math.inf)
    lam = ratio.amax(-1).clamp(min=0.0)
    n_max = count[:, 0]
    tie = n_max >= 2
    lam = torch.where(tie, math.inf, lam)
    contact = positive & (ratio >= (1 - eps) * lam.unsqueeze(-1)) & ~tie.unsqueeze(-1)
    # Counts grow with the gap, so the largest contact gap is also the one with the largest count.
    at = torch.where(contact, count, 0).amax(-1)
    has = at > 0
    delta = torch.where(contact, gs, -math.inf).amax(-1)
    log_keys = n_keys.to(torch.float64).log()
    log_count = at.to(torch.float64).log()
    alpha = torch.where(has & (n_keys > 1), log_count / log_keys, math.nan)
    res = default_resolution(n_keys) if r is None else torch.full_like(log_keys, float(r))
    above = positive & (log_n > res.unsqueeze(-1))
    lam_r = torch.where(above, (log_n - res.unsqueeze(-1)) / gs, -math.inf).amax(-1)
    lam_r = torch.where(above.any(-1), lam_r, math.nan)
    lam_r = torch.where(n_max.to(torch.float64).log() > res, math.inf, lam_r)
    return {
        "lambda_n": lam,
        "tie": tie,
        "contact_gap": torch.where(has, delta, math.nan),
        "contact_count": torch.where(has, at.to(torch.float64), math.nan),
        "alpha_n": alpha,
        "contact_entropy": torch.where(has, log_count, math.nan),
        "lambda_resolved": lam_r,
    }


def p_star_n(zm: torch.Tensor, betas: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """p*_n(beta) = 1 / Z_n(beta) for each row and beta (seed 003 App. D, D.1 boundary check); columns
    follow ``betas``, which may be per-row (R, m) for beta = gamma Lambda_n (inf gives 1 / n_max)."""
    g = zm.amax(-1, keepdim=True) - zm
    beta = torch.as_tensor(betas, dtype=zm.dtype)
    beta = beta.expand(zm.shape[0], -1) if beta.dim() == 1 else beta
    out = []
    for k in range(beta.shape[-1]):
        b = beta[:, k: k + 1]
        # exp(-beta g) with beta = inf is 1 at the maximum and 0 elsewhere; masked keys (g = inf) give 0.
        terms = torch.where(g == 0, 1.0, torch.exp(-b * g))
        out.append(1.0 / terms.sum(-1))
    return torch.stack(out, -1)
