"""Polynomial concentration of a score row: status, margins, S_p and the worst-case degree p*.

Polynomial Concentration (When Does Polynomial Attention Concentrate?), §3 and §4, App. B, P, S, T. For a target key *
(the row argmax, or a given answer key, App. S), bias b and optional cap tau:

    r_j = clamp(z_j + b, 0, tau),   u_* = z_* + b,   Delta = z_* - max_{j != *} z_j,   rho = Delta / u_*,
    S_p = sum_{j != *} (r_j / r_*)^p  (the relative form, App. B: r^p is never formed at large magnitude),

and normalized ReLU^p puts mass 1 / (1 + S_p) on the target (eq. 3). Every function takes float64 rows
zm of shape (R, n), -inf at masked keys, and returns one value per row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import torch

SQUARED_BELOW = 2**21
P_STAR_RHO_MAX = 0.99  # App. P: the clip of rho that caps log(1 / (1 - rho))


def margins(
    zm: torch.Tensor, target: torch.Tensor, b: float, rest_max: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """Delta, u_* and rho of Polynomial Concentration §3, and whether the target is score-maximal (Delta >= 0).

    ``zm`` holds -inf at masked keys; ``rest_max``, the largest score other than the target's, is
    computed when not given. Delta is +inf on a single-key row (no distractor); rho is NaN where
    u_* <= 0, where it has no meaning (a dead row).
    """
    idx = target.unsqueeze(-1)
    z_star = zm.gather(-1, idx).squeeze(-1)
    if rest_max is None:
        rest_max = zm.scatter(-1, idx, -math.inf).amax(-1)
    delta = z_star - rest_max
    u_star = z_star + b
    rho = torch.where(u_star > 0, delta / u_star, math.nan)
    return {"delta": delta, "u_star": u_star, "rho": rho, "target_is_max": delta >= 0}


STATUS = ("active", "dead", "saturated")


def status(u_star: torch.Tensor, tau: float | None) -> torch.Tensor:
    """Index into STATUS: "dead" where r_* = 0 (u_* <= 0), "saturated" where u_* >= tau, else "active"
    (Polynomial Concentration §3)."""
    code = torch.where(u_star <= 0, 1, 0)
    if tau is not None:
        code = torch.where((u_star >= tau) & (u_star > 0), 2, code)
    return code


def ratios(zm: torch.Tensor, target: torch.Tensor, b: float, tau: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(r_j / r_*) over the distractors (0 at the target and at masked keys, where ``zm`` is -inf) and
    A_act = #{j != *: r_j > 0}.

    Rows with r_* = 0 (dead) get NaN ratios: S_p is undefined there (Polynomial Concentration §3).
    """
    r = (zm + b).clamp_(min=0.0, max=tau if tau is not None else math.inf)
    idx = target.unsqueeze(-1)
    r_star = r.gather(-1, idx)
    r.scatter_(-1, idx, 0.0)
    a_act = r.sign().sum(-1).to(torch.int64)  # r >= 0: sign counts the active distractors, no bool pass
    return r.div_(torch.where(r_star > 0, r_star, math.nan)), a_act


def s_p(ratio: torch.Tensor, degrees: Sequence[float]) -> dict[float, torch.Tensor]:
    """S_p = sum_j (r_j / r_*)^p for each degree p (Polynomial Concentration eq. 3, App. B), NaN on dead rows.

    Integer degrees below 2^21 are built by repeated squaring (2, 4, 8, 16 cost one multiplication each,
    and an exact boundary such as a tied distractor gives S_p == 1 exactly); others go through pow, as in
    the kernel (diagnostics/_rows.c, MAX_BIT).
    """
    squares = {1: ratio}
    out = {}
    for p in degrees:
        if float(p).is_integer() and p < SQUARED_BELOW:
            n, bit, acc = int(p), 1, None
            while n:
                if bit not in squares:
                    squares[bit] = squares[bit // 2] * squares[bit // 2]
                if n & 1:
                    acc = squares[bit] if acc is None else acc * squares[bit]
                n >>= 1
                bit *= 2
            out[p] = cast(torch.Tensor, acc).sum(-1)  # set by the loop for every degree p >= 1
        else:
            out[p] = ratio.pow(p).sum(-1)
    return out


def p_star(a_act: torch.Tensor, rho: torch.Tensor, target_is_max: torch.Tensor) -> torch.Tensor:
    """p*_exact = log A / log(1 / (1 - rho)), rho clipped to [0, 0.99] (Polynomial Concentration Cor. 4.3, App. P).

    p >= p* guarantees A (1 - rho)^p <= 1, hence S_p <= 1. Edge cases, following the bound rather than
    0/0: A = 0 or A = 1 with rho >= 0 gives p* = 0 (no distractor can outweigh the target); rho = 0 with
    A >= 2 gives +inf (no degree suffices); a target that is not score-maximal (rho < 0, App. S) gives
    +inf, predicted-unsafe. NaN where rho is (dead rows).
    """
    a = a_act.to(rho.dtype)
    # + 0.0 turns a rho of -0.0 into +0.0, whose log1p divides log A into +inf, not -inf
    rc = rho.clamp(0.0, P_STAR_RHO_MAX) + 0.0
    ps = torch.log(a) / -torch.log1p(-rc)
    ps = torch.where(a <= 1, 0.0, ps)
    ps = torch.where(target_is_max, ps, math.inf)
    return torch.where(rho.isnan(), math.nan, ps)


def s_sigmoid(zm: torch.Tensor, target: torch.Tensor, b: float) -> torch.Tensor:
    """S_sigma = sum_{j != *} sigma(z_j + b) / sigma(z_* + b) with no clamp (Polynomial Concentration App. T).

    Ratios are taken in log space so that neither sigma underflows for scores far below -b; masked keys
    (-inf) give exp(-inf) = 0.
    """
    idx = target.unsqueeze(-1)
    log_sig = torch.nn.functional.logsigmoid(zm + b)
    return (log_sig - log_sig.gather(-1, idx)).exp_().scatter_(-1, idx, 0.0).sum(-1)
