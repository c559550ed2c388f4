"""The card's length, temperature and ablation panels, in memory, from the pieces of the commands that reproduce them.

- length: ``attnlab lengths``' reading (the audit at each prompt length L, induction, b = 0, p = 2) with the median
  row entropy beside the unsafe share (Polynomial Concentration App. C, Fig. 5);
- temperature: ``attnlab temperature``'s rows and fit (Hayase & Karakida 2026 §4.5.1) inside the model's window and,
  where the budget reaches it, past it under dynamic-NTK RoPE (App. A.2), with the i.i.d. null of the temperature
  study and the multiplier m(n; xi_hat) at a target length (App. A.2), by default twice the window;
- ablation: ``attnlab ablate``'s ranking, subsets, scoring and decisive flag (Polynomial Concentration §5.4, App. I).

Each panel carries a finding built by ``findings.verdict.decide``: its rule is fixed here before any number is
read, and its null control must fail it for "reproduced". Each returns its typed panel (``cards.types``), every
value as card.json holds it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from attnlab import hooks, tasks
from attnlab.analyses import ablate, temperature
from attnlab.analyses.audit_tables import prevalence
from attnlab.analyses.run import Bias, context_length
from attnlab.analyses.substitute import BASELINE, baseline_warning, score
from attnlab.analyses.temperature import real_fit, side_of_one
from attnlab.cards.types import (
    AblationPanel,
    Exponent,
    LengthPanel,
    Multiplier,
    TemperatureFit,
    TemperaturePanel,
    as_finding,
    as_records,
    jsonable,
)
from attnlab.devices import model_device
from attnlab.diagnostics.rows import SPECIAL
from attnlab.diagnostics.stats import bootstrap_ci
from attnlab.findings.finding import MDE, Null
from attnlab.findings.verdict import decide
from attnlab.rowmaps.softmax import length_multiplier
from attnlab.studies.concentration.findings import Z_ALPHA, Z_POWER, accuracy_mde
from attnlab.studies.temperature.findings import real_finding

LENGTH_P = 2
# Polynomial Concentration App. C, Fig. 5: Pythia's unsafe share rises from 66% at L = 1024 to 99% at 4096, two
# doublings past its 2048-token window; Llama, Qwen3 and Gemma-4 stay within 4 pp over L = 256-4096 in theirs.
PYTHIA_SLOPE = (99 - 66) / 2
TREND_RULE = "the 95% interval over prompts of the slope of each prompt's unsafe % on log2 L excludes 0"
ABLATION_RULE = (
    "at some K, top-K's change is below every random-K draw's (decisive, App. I) and its Wilson 95% upper bound "
    "lies below softmax's accuracy"
)
# Polynomial Concentration §5.4 on NIAH: Qwen3 and Gemma-4 lose 80 to 100 pp at top-K (K >= 20), bottom-K 0 pp
ABLATION_EFFECT = 80.0
PAST_RATIO = 1.25  # n_eval past the window, as the temperature study's smoke budget reads it
N_BOOT = 1000


def _slope(frame: pd.DataFrame) -> float:
    x = np.log2(frame["L"].to_numpy(dtype=float))
    if np.ptp(x) == 0:
        return np.nan
    return float(np.polyfit(x, frame["unsafe %"].to_numpy(dtype=float), 1)[0])


def trend(per_prompt: pd.DataFrame, seed: int) -> dict:
    """The OLS slope of each prompt's unsafe % on log2 L (pp per doubling of L) with its 95% percentile bootstrap
    interval over the (L, prompt) units (Polynomial Concentration App. R: the prompt is the unit of replication)."""
    slope, lo, hi = bootstrap_ci(per_prompt, _slope, unit=("L", "prompt"), n_boot=N_BOOT, seed=seed)
    return {"slope": slope, "lo": lo, "hi": hi}


def length_panel(model, tokenizer, cfg, audit, *, seed: int, progress: bool) -> LengthPanel:
    """Unsafe % of active rows (S_2 >= 1, b = 0) and the median entropy of the readable rows at each prompt length
    of ``cfg.lengths``, on induction prompts (Polynomial Concentration App. C), with the
    trend finding: the slope on log2 L against TREND_RULE, its null the same prompts with their L labels permuted."""
    window = context_length(model)
    lengths = list(cfg.lengths)  # ``cards.within_window`` cut them to the window
    lines, points = [], []
    for n in lengths:
        rows = audit(
            model,
            tokenizer,
            "induction",
            n_prompts=cfg.length_prompts,
            seed=seed,
            length=n,
            p=(LENGTH_P,),
            b=(0.0,),
            queries=cfg.queries,
            progress=progress,
        )
        (line,) = prevalence(rows, (LENGTH_P,), Bias("0", 0.0))
        readable = rows[~rows["status"].isin(SPECIAL)]
        active = readable[readable["status"] == "active"]
        unsafe = 100 * (1 - active[f"safe_p{LENGTH_P}"].astype(bool).groupby(active["prompt"]).mean())
        points += [{"L": n, "prompt": int(i), "unsafe %": float(v)} for i, v in unsafe.items()]
        tokens = rows.groupby("prompt")["query"].max().add(1).mean()
        keep = ("active", "prompts", "unsafe %", "unsafe lo", "unsafe hi", "med s_p")
        lines.append(
            {"L": n, "tokens": float(tokens), **{k: line[k] for k in keep}, "med entropy": readable["entropy"].median()}
        )
    per_prompt = pd.DataFrame(points, columns=["L", "prompt", "unsafe %"])
    return LengthPanel(
        suite="induction",
        b="0",
        p=LENGTH_P,
        window=jsonable(window),
        prompts=jsonable(cfg.length_prompts),
        rows=as_records(pd.DataFrame(lines)),
        finding=as_finding(trend_finding(per_prompt, window, seed)),
    )


def trend_finding(per_prompt: pd.DataFrame, window: int | None, seed: int):
    """Whether the unsafe share changes with L on this model, by TREND_RULE; "not reproduced" with a small MDE
    reads as App. C's in-window models (flat), "reproduced" as Pythia past its window."""
    claim = (
        "the unsafe share of active rows changes with the prompt length L (Polynomial Concentration App. C, Fig. 5: "
        "Pythia rises from 66% at L = 1024 to 99% at 4096, past its 2048-token window; Llama, Qwen3 and Gemma-4 "
        "stay within 4 pp over L = 256-4096)"
    )
    lengths = sorted(per_prompt["L"].unique())
    if len(lengths) < 2:
        return decide(
            claim,
            rule=TREND_RULE,
            holds=None,
            null=Null("the same prompts with their L labels permuted", None, "not run"),
            mde=MDE(None, PYTHIA_SLOPE, "pp per doubling of L", "one length: no slope"),
            evidence=f"lengths read: {lengths}",
            precondition=f"fewer than two prompt lengths fit the model's window ({window})",
        )
    fit = trend(per_prompt, seed)
    shuffled = per_prompt.assign(L=np.random.default_rng([seed, 3]).permutation(per_prompt["L"].to_numpy()))
    null = trend(shuffled, seed)
    se = (fit["hi"] - fit["lo"]) / (2 * Z_ALPHA)
    means = per_prompt.groupby("L")["unsafe %"].mean()
    return decide(
        claim,
        rule=TREND_RULE,
        holds=bool(fit["lo"] > 0 or fit["hi"] < 0) if math.isfinite(fit["lo"]) else None,
        null=Null(
            "the same prompts with their L labels permuted",
            bool(null["lo"] > 0 or null["hi"] < 0),
            f"slope {null['slope']:+.2f} [{null['lo']:+.2f}, {null['hi']:+.2f}] pp per doubling",
        ),
        mde=MDE(
            (Z_ALPHA + Z_POWER) * se if math.isfinite(se) else None,
            PYTHIA_SLOPE,
            "pp per doubling of L",
            "(1.96 + 0.84) x the slope's bootstrap standard error (its 95% interval's half-width / 1.96), against "
            "Pythia's rise past its window",
        ),
        evidence=f"slope {fit['slope']:+.2f} [{fit['lo']:+.2f}, {fit['hi']:+.2f}] pp per doubling of L over "
        f"L = {', '.join(map(str, lengths))} (inside the model's window {window}); mean unsafe % per L: "
        + ", ".join(f"{v:.1f}" for v in means),
    )


def temperature_fit(rows: pd.DataFrame, grid, *, past: bool, rope: str, seed: int, n_boot: int) -> TemperatureFit:
    """xi_hat_Lambda with its 95% interval over documents, the per-n bucket means (``analyses.temperature.real_fit``)
    and the finding of the temperature study's real part (``studies.temperature.findings.real_finding``); not checked
    inside the window."""
    fit = real_fit(rows, n_boot, seed)
    xi, half, lo, hi = fit.xi_hat, fit.half_iqr, fit.lo, fit.hi
    where = f"under dynamic-NTK RoPE at n_eval = {max(grid)}, past the window" if past else "inside the model's window"
    finding, null = real_finding(
        rows,
        fit,
        seed=seed,
        n_boot=n_boot,
        evidence=f"xi_hat_Lambda = {xi:.3f} [{lo:.3f}, {hi:.3f}] (95%, B = {n_boot} over "
        f"{rows['prompt'].nunique()} documents), {side_of_one(lo, hi)}, at n = {list(grid)} {where}; Cor. 4.9's "
        f"xi_alpha - xi_Delta + 1 = {fit.cor49['predicted']:.3f}.",
        precondition=None
        if past
        else "the rows lie inside the model's training window, where Table 2 reads past it: the claim's regime "
        "is not reached",
    )
    return TemperatureFit(
        n=tuple(int(n) for n in grid),
        rope=rope,
        xi_hat=jsonable(xi),
        half_iqr=jsonable(half),
        lo=jsonable(lo),
        hi=jsonable(hi),
        null=Exponent(**{k: jsonable(null[k]) for k in ("xi_hat", "lo", "hi")}),
        per_n=as_records(fit.per_n),
        windowed=fit.windowed,
        finding=as_finding(finding),
    )


def temperature_panel(
    model, tokenizer, cfg, *, seed: int, progress: bool, target: int | None = None
) -> TemperaturePanel:
    """xi_hat_Lambda inside the window (rows at n = n_eval x {1/4, 1/2, 3/4, 1}, n_eval = min(window,
    ``cfg.inside_tokens``)) and past it (n_eval = 1.25 x window under dynamic NTK) where that is at most
    ``cfg.past_tokens`` and the model has RoPE tables to rescale; documents are windows of the bundled novel, as
    the temperature study reads them; with the multiplier m(target; xi_hat) of Hayase & Karakida App. A.2 (target
    None: twice the window)."""
    n_train = context_length(model)
    fractions = (0.25, 0.5, 0.75, 1.0)
    inside = min(n_train or cfg.inside_tokens, cfg.inside_tokens)
    parts = {}
    reach = {"inside": inside, "past": round(PAST_RATIO * n_train) if n_train else None}
    why = None
    try:
        hooks.rope_tables(model)
    except hooks.UnsupportedModel as error:
        why = f"no RoPE to rescale ({error})"
    if n_train is None:
        why = "the model's config gives no training window"
    elif why is None and reach["past"] > cfg.past_tokens:
        why = f"n_eval = {reach['past']} ({PAST_RATIO:g} x the window) passes this budget's {cfg.past_tokens} tokens"
    for part, n_eval in reach.items():
        if part == "past" and why is not None:
            parts[part] = None
            continue
        grid = sorted({max(2, round(f * n_eval)) for f in fractions})
        novel = tasks.novel_path()
        docs = temperature.token_windows(tokenizer, max(grid), cfg.documents, seed=seed, bos=False, text=novel)
        rope = "dynamic" if part == "past" else "plain"
        rows = temperature.contact_rows(
            model, docs, grid, eps=temperature.TemperatureConfig.eps, rope=rope, n_train=n_train, progress=progress
        )
        parts[part] = temperature_fit(rows, grid, past=part == "past", rope=rope, seed=seed, n_boot=cfg.n_boot)
    return TemperaturePanel(
        window=jsonable(n_train),
        inside=parts["inside"],
        past=parts["past"],
        past_reason=why,
        multiplier=multiplier(parts["past"] or parts["inside"], n_train, target),
    )


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def multiplier(fit: TemperatureFit | Exponent, n_train: int | None, target: int | None = None) -> Multiplier | None:
    """m(n; xi) = max(1, log n / log n_train)^xi at n = ``target`` (None: 2 x n_train) for xi = xi_hat_Lambda and its
    interval's ends (``fit``'s xi_hat, lo and hi; Hayase & Karakida 2026 App. A.2): the logit multiplier the fitted
    exponent suggests there; a negative exponent reads as 0, no multiplier."""
    if n_train is None or n_train < 2 or not _finite(fit.xi_hat):
        return None
    import torch

    target = 2 * n_train if target is None else target

    def m(xi: float | None) -> float | None:
        if not _finite(xi):
            return None
        return float(length_multiplier(torch.tensor([float(target)]), max(xi, 0.0), n_train)[0])

    values = {"target": target, "xi": fit.xi_hat, "m": m(fit.xi_hat), "m_lo": m(fit.lo), "m_hi": m(fit.hi)}
    return Multiplier(**jsonable(values))


def ablation_panel(
    model, tokenizer, cfg, induction: pd.DataFrame, prompts, baseline: list[dict], *, b_auto: float, progress: bool
) -> AblationPanel:
    """``attnlab ablate``'s K sweep in memory: heads ranked by their median S_2 at b_auto over the induction audit's
    active rows, relu_p2_bauto given to the top-K, bottom-K and ``cfg.draws`` random-K heads of each K, NIAH
    ``prompts`` scored by exact match against softmax's answers on them (``baseline``, ``analyses.substitute.score``'s
    records, as the substitution scored them); the decisive flag per K (App. I) and the finding (ABLATION_RULE,
    bottom-K as its null)."""
    column = f"s_p{LENGTH_P}"
    ranking = ablate.rank_heads(induction[induction["b"] == float(b_auto)], column)
    ranked = int(ranking["ranked"].sum())
    ks = [k for k in cfg.ks if k <= ranked]
    device = str(model_device(model))
    records = [{**r, "k": 0, "subset": BASELINE, "draw": 0} for r in baseline]
    for k in ks:
        for subset, draw, chosen in ablate.subsets(ranking, k, cfg.draws):
            with hooks.substituted(model, cfg.ablation_recipe, heads=chosen, b_auto=b_auto):
                label = f"{subset}-{k}" + (f"#{draw}" if subset == "random" else "")
                got = score(model, tokenizer, prompts, "niah", device, label, progress)
                records += [{**r, "k": k, "subset": subset, "draw": draw} for r in got]
    cells = ablate.cells(pd.DataFrame(records))
    table = ablate.decisive_table(cells)
    top = ranking[ranking["ranked"]].head(max(ks, default=0))
    return AblationPanel(
        recipe=cfg.ablation_recipe,
        rank=f"median S_{LENGTH_P} at b = b_auto over the induction audit's active rows",
        ranked=ranked,
        rows=as_records(table),
        cells=as_records(cells),
        top=as_records(top[["layer", "head", f"median {column}", "rank"]]),
        finding=as_finding(ablation_finding(cells, len(prompts))),
    )


def _drops(cells: pd.DataFrame, arm: str, base: float) -> list[int]:
    """The K at which ``arm``'s change is below every random draw's and its Wilson upper bound below softmax."""
    out = []
    for k, group in cells[cells["k"] > 0].groupby("k"):
        mine = group[group["subset"] == arm].iloc[0]
        random = group[group["subset"] == "random"]["delta pp"]
        if len(random) and (mine["delta pp"] < random).all() and mine["hi"] < base:
            out.append(int(k))
    return out


def ablation_finding(cells: pd.DataFrame, prompts: int):
    """Whether the heads of highest S_2 carry NIAH here (Polynomial Concentration §5.4, App. I), by ABLATION_RULE;
    the null is the bottom-K heads under the same rule."""
    base = float(cells.loc[cells["subset"] == BASELINE, "accuracy %"].iloc[0])
    top, bottom = _drops(cells, "top", base), _drops(cells, "bottom", base)
    sweep = cells[cells["subset"].isin(("top", "bottom"))]
    words = "; ".join(
        f"{r['subset']}-{r['k']}: {r['accuracy %']:.1f}% ({r['delta pp']:+.1f} pp)" for _, r in sweep.iterrows()
    )
    return decide(
        "polynomializing the heads of highest S_p costs more NIAH accuracy than random heads do (Polynomial "
        "Concentration §5.4, Fig. 4: Qwen3 and Gemma-4 lose 80 to 100 pp at top-K, K >= 20, bottom-K 0 pp)",
        rule=ABLATION_RULE,
        holds=bool(top) if not cells[cells["k"] > 0].empty else None,
        null=Null(
            "the bottom-K heads (lowest S_p) under the same rule",
            bool(bottom),
            f"decisive and significant at K = {bottom}" if bottom else "at no K",
        ),
        mde=MDE(
            accuracy_mde(base, prompts),
            ABLATION_EFFECT,
            "pp of accuracy",
            f"two-sample test of {prompts} prompts per cell at softmax's rate (5% two-sided, 80% power)",
        ),
        evidence=f"softmax {base:.1f}% on {prompts} NIAH prompts; {words or 'no K fits the ranked heads'}; "
        f"top-K meets the rule at K = {top or 'none'}.",
        precondition=baseline_warning(base, "niah"),
    )
