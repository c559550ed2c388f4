"""Brute-force per-row references for the diagnostics tests: plain Python loops over one row, no torch."""

from __future__ import annotations

import math

INF = math.inf


def first_argmax(z, keys):
    best = keys[0]
    for j in keys[1:]:
        if z[j] > z[best]:
            best = j
    return best


def concentration_row(z, allowed, *, b=0.0, tau=None, target=None, ps=(2, 4, 8, 16)):
    """Seed 000 §3, Cor. 4.3, App. P on one row, written out longhand."""
    keys = [j for j in range(len(z)) if allowed[j]]
    star = first_argmax(z, keys) if target is None else target
    others = [j for j in keys if j != star]
    cap = INF if tau is None else tau

    def r(j):
        return min(max(z[j] + b, 0.0), cap)

    delta = z[star] - max(z[j] for j in others) if others else INF
    u = z[star] + b
    if u <= 0:
        status = "dead"
    elif tau is not None and u >= tau:
        status = "saturated"
    else:
        status = "active"
    a_act = sum(1 for j in others if r(j) > 0)
    rho = delta / u if u > 0 else math.nan
    out = {
        "status": status,
        "target": star,
        "delta": delta,
        "u_star": u,
        "rho": rho,
        "a_act": a_act,
        "target_is_max": delta >= 0,
    }
    for p in ps:
        total = 0.0
        for j in others:
            total += (r(j) / r(star)) ** p if r(star) > 0 else math.nan
        out[f"s_p{p:g}"] = total if r(star) > 0 else math.nan
    if math.isnan(rho):
        p_star = math.nan
    elif delta < 0:
        p_star = INF
    elif a_act <= 1:
        p_star = 0.0
    else:
        rc = min(max(rho, 0.0), 0.99)
        p_star = INF if rc == 0 else math.log(a_act) / math.log(1.0 / (1.0 - rc))
    out["p_star"] = p_star
    return out


def softmax_row(z, allowed, beta=1.0):
    keys = [j for j in range(len(z)) if allowed[j]]
    m = max(beta * z[j] for j in keys)
    e = {j: math.exp(beta * z[j] - m) for j in keys}
    s = sum(e.values())
    return [e[j] / s if j in e else 0.0 for j in range(len(z))]


def dispersion_row(w, allowed):
    """Entropy, normalized entropy, support, max weight and top-two gap of one row of weights."""
    keys = [j for j in range(len(w)) if allowed[j]]
    entropy = -sum(w[j] * math.log(w[j]) for j in keys if w[j] > 0)
    ordered = sorted((w[j] for j in keys), reverse=True)
    return {
        "entropy": entropy,
        "entropy_norm": entropy / math.log(len(keys)) if len(keys) > 1 else math.nan,
        "support": sum(1 for j in keys if w[j] > 0),
        "max_weight": ordered[0],
        "top2_gap": ordered[0] - (ordered[1] if len(ordered) > 1 else 0.0),
    }


def sink_key(allowed, sink):
    keys = [j for j in range(len(allowed)) if allowed[j]]
    return keys[sink] if sink < len(keys) else None
