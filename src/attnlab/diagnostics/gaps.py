"""Gap counting of a score row: N_n(t), the upper-tail accumulation scale Lambda_n and its contact point.

Hayase & Karakida 2026 (A Unified Framework for Critical Scaling of Inverse Temperature in Self-Attention), §4.2 and
App. C-D. With gaps g_j = z* - z_j over the n allowed keys (z* the row maximum):

    N_n(t) = #{j : g_j <= t}                                    (Def. 4.3; the maximum itself counts)
    Lambda_n = sup_{t>0} log N_n(t) / t = max over positive gaps u of log N_n(u) / u   (Def. 4.4, Lemma C.1)
    Lambda_n = inf when the maximum is tied (N_n(0) >= 2, Cor. C.2)
    Delta_n = the largest positive gap u with log N_n(u) / u >= (1 - eps) Lambda_n  (Def. 4.5; eps absorbs
              float rounding, 1e-6 by default), alpha_n = log N_n(Delta_n) / log n, C_n = alpha_n log n
    Lambda_n^(r) = sup over t > 0 with log N_n(t) > r of (log N_n(t) - r) / t, sup of nothing = 0
                                                                             (Def. D.3, on request)
    p*_n(beta) = max_j softmax(beta z)_j = 1 / Z_n(beta),  Z_n(beta) = sum_j exp(-beta g_j)   (App. D)

Rows are float64 ``zm`` of shape (R, n) with -inf at masked keys; every row has at least one allowed
key and no NaN or +inf (``row_stats`` labels those rows first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def counts(gs: torch.Tensor) -> torch.Tensor:
    """j + 1 at sorted position j: N_n(g_(j)) at the last of each run of equal gaps (Def. 4.3).

    Earlier members of a run undercount, but they share the run's gap, so every maximum over gaps of
    a quantity increasing in N_n (log N / u, (log N - r) / u, the contact count) is attained at the run's
    last member with its exact count; no search is needed.
    """
    return torch.arange(1, gs.shape[-1] + 1).expand(gs.shape)


def resolution(n_keys: torch.Tensor, r: float | str) -> torch.Tensor:
    """The resolution r per row: a number, or "auto" for r = log(1 + log n), the envelope discretisation
    error of Hayase & Karakida 2026 App. D (after Prop. D.6) above which Lambda_n^(r) tracks the rank boundary."""
    if r == "auto":
        return torch.log1p(n_keys.to(torch.float64).log())
    return torch.full(n_keys.shape, float(r), dtype=torch.float64)


def gap_stats(
    zm: torch.Tensor, n_keys: torch.Tensor, *, eps: float = 1e-6, r: float | str | None = None
) -> dict[str, torch.Tensor]:
    """lambda_n, tie, contact_gap, contact_count, alpha_n, contact_entropy and, when ``r`` is given,
    lambda_resolved per row (Hayase & Karakida 2026 §4.2, Lemma C.1, Cor. C.2, Def. D.3).

    Rows with fewer than 2 allowed keys lie outside the seed's n >= 2 (§2.1): NaN, and ``tie`` False.
    On tied rows Lambda_n = inf and the contact point is NaN; the seed leaves them out of aggregates.
    lambda_resolved is 0 where no t has log N_n(t) > r (Def. D.3: sup of nothing = 0).
    """
    res = None if r is None else resolution(n_keys, r)
    g = zm.amax(-1, keepdim=True) - zm
    if zm.shape[-1] < DENSE_BELOW or not zm.shape[0]:  # no rows left (all empty, NaN or +inf): nothing to bin
        gs = g.sort(-1).values
        return _from_sorted(gs, counts(gs), n_keys, eps, res)
    return _from_sorted(*_binned_candidates(g, eps, res), n_keys, eps, res)


DENSE_BELOW = 512  # keys per row under which a full sort is as cheap as the binning below
KEYS_PER_BIN = 8  # bins per row: n / 8, at most MAX_BINS (finer bins prune more but cost a wider table)
MAX_BINS = 1024


def _binned_candidates(g: torch.Tensor, eps: float, res: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Ascending gaps of each row up to where they can matter (+inf padded), found without a full sort.

    A full sort costs ~100 softmax passes at 8192 keys. Instead the gaps of each row go into n / 8 (at
    most MAX_BINS) equal bins of width h over [0, max gap]. With C_k the number of gaps in bins 0..k,
    every gap in bin k >= 1 has log N / u <= log C_k / (k h), and the largest gap of bin k has
    log N / u > log C_k / ((k+1) h). The best such lower bound rules out every bin whose upper bound is
    below (1 - eps) of it (likewise for (log N - r) / u when r is given). The bins up to the last one
    still needed are sorted, and a key's count is its rank among them. On N(0, 1) rows of 8192 keys
    about 0.5% of the keys remain.
    """
    rows = g.shape[0]
    bins = min(MAX_BINS, g.shape[-1] // KEYS_PER_BIN)
    top = g.nan_to_num(posinf=0.0).amax(-1, keepdim=True)
    h = torch.where(top > 0, top / bins, 1.0)
    # Bin `bins` holds the largest gap itself; masked keys (+inf) go to a bin of their own, bins + 1.
    index = (g / h).clamp_(max=bins + 1).floor_().long()
    hist = torch.zeros(rows, bins + 2, dtype=torch.int64).scatter_add_(1, index, torch.ones_like(index))
    upto = hist.cumsum(-1)
    log_upto = upto.to(g.dtype).log()
    k = torch.arange(bins + 2, dtype=g.dtype)
    # A relative slack covers the rounding of g / h: a gap placed in bin k may sit an ulp below k h.
    lower_edge = k * h * (1 - 1e-12)
    upper_edge = (k + 1) * h * (1 + 1e-12)
    filled = hist > 0
    informative = filled.clone()
    informative[:, 0] = hist[:, 0] > 1  # bin 0 alone holds the maximum, gap 0: no ratio
    informative[:, bins + 1] = False
    ub = torch.where(k > 0, log_upto / lower_edge, math.inf)
    lb = torch.where(informative, log_upto / upper_edge, -math.inf).amax(-1, keepdim=True)
    keep = filled & (ub >= (1 - eps) * lb)
    if res is not None:
        excess = log_upto - res.unsqueeze(-1)
        ok = informative & (excess > 0)
        lb_r = torch.where(ok, excess / upper_edge, -math.inf).amax(-1, keepdim=True)
        keep |= filled & (excess > 0) & (torch.where(k > 0, excess / lower_edge, math.inf) >= lb_r)
    keep[:, bins + 1] = False
    # Keep every bin up to the last one needed: then a key's count is just its rank in the prefix.
    last = torch.where(keep, k.long(), -1).amax(-1, keepdim=True)
    chosen = index <= last
    per_row = chosen.sum(-1)
    width = max(int(per_row.max()), 1)
    where = chosen.nonzero()
    r_idx = where[:, 0]
    start = per_row.cumsum(0) - per_row
    gs = torch.full((rows, width), math.inf, dtype=g.dtype)
    gs[r_idx, torch.arange(r_idx.numel()) - start[r_idx]] = g[r_idx, where[:, 1]]
    gs = gs.sort(-1).values
    return gs, counts(gs)


def _from_sorted(
    gs: torch.Tensor, count: torch.Tensor, n_keys: torch.Tensor, eps: float, res: torch.Tensor | None
) -> dict[str, torch.Tensor]:
    """The statistics from each row's ascending gaps (those that can matter, +inf after) and N_n there."""
    log_count = count.to(torch.float64).log()
    positive = (gs > 0) & (gs < math.inf)
    ratio = torch.where(positive, log_count / gs, -math.inf)
    # N_n(0): the number of zero gaps, i.e. of keys at the maximum (Cor. C.2).
    n_max = torch.searchsorted(gs, torch.zeros(gs.shape[0], 1, dtype=gs.dtype), right=True).squeeze(-1)
    tie = n_max >= 2
    lam = torch.where(tie, math.inf, ratio.amax(-1).clamp(min=0.0))
    contact = positive & (ratio >= (1 - eps) * lam.unsqueeze(-1)) & ~tie.unsqueeze(-1)
    # Counts grow with the gap, so the largest contact gap is also the one with the largest count.
    at = torch.where(contact, count, 0).amax(-1)
    has = at > 0
    log_at = at.to(torch.float64).log()
    few = n_keys < 2  # outside the seed's n >= 2 (§2.1): no competitor, nothing to count
    tie = tie & ~few
    out = {
        "lambda_n": lam,
        "tie": tie,
        "contact_gap": torch.where(has, torch.where(contact, gs, -math.inf).amax(-1), math.nan),
        "contact_count": torch.where(has, at.to(torch.float64), math.nan),
        "alpha_n": torch.where(has & (n_keys > 1), log_at / n_keys.to(torch.float64).log(), math.nan),
        "contact_entropy": torch.where(has, log_at, math.nan),
    }
    if res is not None:
        above = positive & (log_count > res.unsqueeze(-1))
        lam_r = torch.where(above, (log_count - res.unsqueeze(-1)) / gs, -math.inf).amax(-1)
        lam_r = lam_r.clamp(min=0.0)  # Def. D.3: sup of nothing = 0
        out["lambda_resolved"] = torch.where(n_max.to(torch.float64).log() > res, math.inf, lam_r)
    return {k: v if k == "tie" else torch.where(few, math.nan, v) for k, v in out.items()}


def p_star_n(zm: torch.Tensor, betas: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """p*_n(beta) = 1 / Z_n(beta) for each row and beta (Hayase & Karakida 2026 App. D, D.1 boundary check); columns
    follow ``betas``, which may be per-row (R, m) for beta = gamma Lambda_n (inf gives 1 / n_max)."""
    g = zm.amax(-1, keepdim=True) - zm
    beta = torch.as_tensor(betas, dtype=zm.dtype)
    beta = beta.expand(zm.shape[0], -1) if beta.dim() == 1 else beta
    out = []
    for k in range(beta.shape[-1]):
        b = beta[:, k : k + 1]
        # exp(-beta g) with beta = inf is 1 at the maximum and 0 elsewhere; masked keys (g = inf) give 0.
        terms = torch.where(g == 0, 1.0, torch.exp(-b * g))
        out.append(1.0 / terms.sum(-1))
    return torch.stack(out, -1)
