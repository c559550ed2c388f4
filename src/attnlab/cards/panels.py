"""The card's length, temperature and ablation panels, in memory, from the pieces of the commands that reproduce them.

- length: ``attnlab lengths``' reading (the audit at each prompt length L, induction, b = 0, p = 2) with the median
  row entropy beside the unsafe share (Polynomial Concentration App. C, Fig. 5), inside the window and, on a RoPE
  model, past it (described beside Pythia's rise);
- temperature: ``attnlab temperature``'s rows and fit (Hayase & Karakida 2026 §4.5.1) inside the model's window and,
  where the budget reaches it, past it under dynamic-NTK RoPE (App. A.2), with the i.i.d. null of the temperature
  study and the multiplier m(n; xi_hat) at a target length (App. A.2), by default twice the window;
- ablation: ``attnlab ablate``'s ranking, subsets, scoring and decisive flag (Polynomial Concentration §5.4, App. I).

Each panel carries a finding built by ``findings.verdict.decide``: its rule (``cards.rules``) is fixed before any
number is read, its null control must fail it for "reproduced", its power is simulated at the run's own sizes
(``cards.calibration``), and a model that ``loss_check`` finds untrained gets "not checked". Each returns its typed
panel (``cards.types``), every value as card.json holds it.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from attnlab import hooks, tasks
from attnlab.analyses import ablate, temperature
from attnlab.analyses.audit_tables import prevalence
from attnlab.analyses.run import Bias, context_length, evaluating
from attnlab.analyses.substitute import BASELINE, baseline_warning, score
from attnlab.analyses.temperature import real_fit, side_of_one
from attnlab.cards import calibration, rules
from attnlab.cards.types import (
    AblationPanel,
    Exponent,
    LengthPanel,
    LossCheck,
    Multiplier,
    Slope,
    TemperatureFit,
    TemperaturePanel,
    as_finding,
    as_records,
    jsonable,
)
from attnlab.devices import model_device
from attnlab.diagnostics.rows import SPECIAL
from attnlab.findings.calibrate import power
from attnlab.findings.finding import MDE, Null, named
from attnlab.findings.stats import clopper_pearson
from attnlab.findings.verdict import decide
from attnlab.progress import progress as progress_of
from attnlab.rowmaps.registry import XI_RANGE
from attnlab.rowmaps.softmax import length_multiplier
from attnlab.studies.concentration.findings import accuracy_mde
from attnlab.studies.temperature.findings import real_finding

LENGTH_P = 2
# Polynomial Concentration §5.4 on NIAH: Qwen3 and Gemma-4 lose 80 to 100 pp at top-K (K >= 20), bottom-K 0 pp
ABLATION_EFFECT = 80.0
PAST_RATIO = 1.25  # n_eval past the window, as the temperature study's smoke budget reads it
# The trained-model check: a model whose mean next-token loss on the bundled novel is not well below the uniform
# predictor's log V has no trained attention to compare with the papers' pretrained models. Pretrained LMs score
# well under half of log V on English prose (SmolLM2-135M: about 3 nats of log 49152 = 10.8); a random
# initialisation scores log V or more. 0.7 x log V sits between with room on both sides.
LOSS_TOKENS = 256
TRAINED_RATIO = 0.7
MIN_SPREAD = 0.5  # pp: the floor of the measured per-prompt spread the length power is simulated at


def loss_check(model, tokenizer) -> LossCheck:
    """The model's mean next-token loss (nats) on the first LOSS_TOKENS tokens of the bundled novel
    (``tasks.novel_path()``), within its window, against the uniform predictor's log V: trained when below
    TRAINED_RATIO x log V."""
    with open(tasks.novel_path(), encoding="utf-8") as handle:
        text = handle.read(40 * LOSS_TOKENS)  # a few characters per token is plenty
    window = context_length(model)
    ids = tokenizer(text)["input_ids"][: min(LOSS_TOKENS, window or LOSS_TOKENS)]
    device = model_device(model)
    with torch.no_grad(), evaluating(model):
        logits = model(input_ids=torch.tensor([ids], device=device)).logits[0, :-1].float()
    loss = float(torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:], device=device)))
    uniform = math.log(logits.shape[-1])
    return LossCheck(
        tokens=len(ids), loss=loss, uniform=uniform, ratio=TRAINED_RATIO, trained=loss < TRAINED_RATIO * uniform
    )


def untrained(check: LossCheck | None) -> str | None:
    """The precondition every finding about trained attention states when ``check`` says the model is untrained."""
    if check is None or check.trained:
        return None
    return (
        f"the model looks untrained: its mean next-token loss on {check.tokens} tokens of the bundled novel is "
        f"{check.loss:.2f} nats, not below {check.ratio:g} x log V = {check.ratio * check.uniform:.2f} (the uniform "
        "predictor's loss is log V): its attention has no trained behaviour to set beside the papers' models"
    )


@contextlib.contextmanager
def _past_window(model, n: int):
    """``model`` allowed prompts of ``n`` tokens (and a BOS token) past its window: its config's
    max_position_embeddings raised while open, restored after. Only for RoPE models, whose positions are computed
    on the fly: App. C read Pythia past its window so, with its own RoPE unrescaled."""
    config = model.config
    before = config.max_position_embeddings
    config.max_position_embeddings = max(before, n + 1)
    try:
        yield
    finally:
        config.max_position_embeddings = before


def _read_lengths(model, tokenizer, cfg, audit, lengths, *, seed: int, progress: bool):
    """Per L of ``lengths``: the prevalence line with median entropy, and each prompt's unsafe % of active rows."""
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
    return lines, pd.DataFrame(points, columns=["L", "prompt", "unsafe %"])


def unsafe_table(per_prompt: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(unsafe % per prompt x length, NaN where not read; log2 L per column), as ``rules.slope_interval`` reads it."""
    table = per_prompt.pivot_table(index="prompt", columns="L", values="unsafe %", aggfunc="mean")
    return table.to_numpy(dtype=float), np.log2(table.columns.to_numpy(dtype=float))


def length_panel(
    model, tokenizer, cfg, audit, *, seed: int, progress: bool, past=(), precondition: str | None = None
) -> LengthPanel:
    """Unsafe % of active rows (S_2 >= 1, b = 0) and the median entropy of the readable rows at each prompt length
    of ``cfg.lengths`` (inside the window), on induction prompts (Polynomial Concentration App. C), with the flat-in-L
    finding (``trend_finding``); the lengths ``past`` the window are read apart, on a RoPE model, and described
    against Pythia's past-window rise (``past_reading``); on a model without RoPE they are cut."""
    window = context_length(model)
    lines, per_prompt = _read_lengths(model, tokenizer, cfg, audit, cfg.lengths, seed=seed, progress=progress)
    past_lines, reading, cut = [], None, tuple(past)
    try:
        hooks.rope_tables(model)
    except hooks.UnsupportedModel:
        past = ()  # learned positions have no rows past the window to read
    if past:
        with _past_window(model, max(past)):
            past_lines, beyond = _read_lengths(model, tokenizer, cfg, audit, past, seed=seed, progress=progress)
        cut = ()
        reading = past_reading(per_prompt, beyond)
    return LengthPanel(
        suite="induction",
        b="0",
        p=LENGTH_P,
        window=jsonable(window),
        prompts=jsonable(cfg.length_prompts),
        rows=as_records(pd.DataFrame(lines)),
        finding=as_finding(trend_finding(per_prompt, window, precondition=precondition)),
        cut=cut,
        past_rows=as_records(pd.DataFrame(past_lines)),
        past=reading,
    )


def past_reading(inside: pd.DataFrame, beyond: pd.DataFrame) -> Slope | None:
    """The slope of unsafe % on log2 L from the longest length inside the window through those past it, with its 95%
    t-interval over prompts: a description beside Pythia's 16.5 pp per doubling past its window (Polynomial
    Concentration App. C, Fig. 5), no verdict. None without an inside length to start from."""
    if inside.empty or beyond.empty:
        return None
    anchor = inside[inside["L"] == inside["L"].max()]
    slope, lo, hi = rules.slope_interval(*unsafe_table(pd.concat([anchor, beyond])))
    lengths = sorted({int(n) for n in (*anchor["L"], *beyond["L"])})
    where = (
        "a rise like Pythia's past its window"
        if math.isfinite(lo) and lo > rules.FLAT_BAND
        else "flat as the in-window models"
        if rules.flat_call(lo, hi) == "flat"
        else "between flat and Pythia's rise, or too few prompts to tell"
    )
    words = (
        f"past the window, L = {lengths}: slope {slope:+.2f} [{lo:+.2f}, {hi:+.2f}] pp per doubling (95% t-interval "
        f"over prompts); Pythia rose {rules.PYTHIA_SLOPE:g} pp per doubling past its 2048-token window (App. C, "
        f"Fig. 5): {where}; descriptive, no verdict"
    )
    return Slope(**jsonable({"slope": slope, "lo": lo, "hi": hi}), words=words)


def length_placement(slope: float, lo: float, hi: float) -> str:
    """Where the in-window slope places the model among Polynomial Concentration App. C's (Fig. 5)."""
    call = rules.flat_call(lo, hi)
    if call == "flat":
        return "like Llama, Qwen3 and Gemma-4 inside their windows (at most 1 pp per doubling)"
    if call == "not flat":
        rise = "rise" if slope > 0 else "fall"
        return (
            f"a {rise} beyond the band, unlike App. C's in-window models (Pythia rose {rules.PYTHIA_SLOPE:g} pp "
            "per doubling only past its window)"
        )
    return (
        "not placed: the interval reaches past the band's edge, between App. C's in-window models (<= 1 pp per "
        f"doubling) and Pythia past its window ({rules.PYTHIA_SLOPE:g})"
    )


@named(rules.LENGTH_NAME)
def trend_finding(per_prompt: pd.DataFrame, window: int | None, *, precondition: str | None = None):
    """Whether the unsafe share is flat in L inside the window, by ``rules.FLAT_RULE`` (an equivalence band around
    App. C's in-window flatness); its null: the same prompts with a band-sized change per doubling added in the
    direction the estimate leans, which the rule must not call flat; power simulated at this run's lengths, prompts
    and measured per-prompt spread (``cards.calibration.length``)."""
    claim = (
        "inside its window the unsafe share of active rows is flat in L, as the paper's in-window models "
        "(Polynomial Concentration App. C, Fig. 5: Llama, Qwen3 and Gemma-4 stay within 4 pp over L = 256-4096; "
        "Pythia rises 16.5 pp per doubling only past its 2048-token window)"
    )
    lengths = sorted(int(n) for n in per_prompt["L"].unique())
    null_words = f"the same prompts with a +-{rules.FLAT_BAND:g} pp per doubling change added (away from flat)"
    if len(lengths) < 2:
        return decide(
            claim,
            rule=rules.FLAT_RULE,
            holds=None,
            null=Null(null_words, None, "not run"),
            mde=MDE(None, rules.FLAT_BAND, "pp per doubling of L", "one length: no slope"),
            evidence=f"lengths read: {lengths}",
            precondition=precondition or f"fewer than two prompt lengths fit the model's window ({window})",
        )
    table, x = unsafe_table(per_prompt)
    slope, lo, hi = rules.slope_interval(table, x)
    per = rules.slopes(table, x)
    spread = float(np.nanstd(per, ddof=1) * math.sqrt(((x - x.mean()) ** 2).sum())) if np.isfinite(per).sum() > 1 else 0
    cal = calibration.length("this run", lengths, table.shape[0], spreads=(max(spread, MIN_SPREAD),))
    chance = power(cal)
    lean = 1.0 if not math.isfinite(slope) or slope >= 0 else -1.0
    _, nlo, nhi = rules.slope_interval(table + lean * rules.FLAT_BAND * (x - x[0]), x)
    call = rules.flat_call(lo, hi)
    undecided = call == "undecided" and chance >= 0.8
    means = per_prompt.groupby("L")["unsafe %"].mean()
    return decide(
        claim,
        rule=rules.FLAT_RULE,
        holds=None if call is None else call == "flat",
        null=Null(
            null_words,
            rules.flat_call(nlo, nhi) == "flat" if math.isfinite(nlo) else None,
            f"slope interval [{nlo:+.2f}, {nhi:+.2f}] pp per doubling",
        ),
        mde=MDE(
            (hi - lo) / 2 if math.isfinite(hi - lo) else None,
            rules.FLAT_BAND,
            "pp per doubling of L",
            "the half-width of the slope's 95% t-interval over prompts, against the band; power: the rule's firing "
            f"rate on flat worlds (0 and 1 pp per doubling) at these lengths and prompts and the measured per-prompt "
            f"spread {spread:.2f} pp",
            power=chance,
        ),
        evidence=f"slope {slope:+.2f} [{lo:+.2f}, {hi:+.2f}] pp per doubling of L over L = "
        f"{', '.join(map(str, lengths))} (inside the model's window {window}): {length_placement(slope, lo, hi)}; "
        "mean unsafe % per L: " + ", ".join(f"{v:.1f}" for v in means),
        precondition=precondition
        or (
            f"undecided: the interval [{lo:+.2f}, {hi:+.2f}] straddles the band's edge (+-{rules.FLAT_BAND:g})"
            if undecided
            else None
        ),
    )


def temperature_fit(
    rows: pd.DataFrame, grid, *, past: bool, rope: str, seed: int, n_boot: int, precondition: str | None = None
) -> TemperatureFit:
    """xi_hat_Lambda with its 95% interval over documents, the per-n bucket means (``analyses.temperature.real_fit``)
    and the finding of the temperature study's real part (``studies.temperature.findings.real_finding``); not checked
    inside the window, nor where ``precondition`` (an untrained model, ``untrained``) says why."""
    fit = real_fit(rows, n_boot, seed)
    xi, half, lo, hi = fit.xi_hat, fit.half_iqr, fit.lo, fit.hi
    where = f"under dynamic-NTK RoPE at n_eval = {max(grid)}, past the window" if past else "inside the model's window"
    finding, null = real_finding(
        rows,
        fit,
        seed=seed,
        n_boot=n_boot,
        evidence=f"xi_hat_Lambda = {xi:.3f} [{lo:.3f}, {hi:.3f}] (95% Student-t over "
        f"{rows['prompt'].nunique()} documents, jackknifed; half-IQR {half:.3f} of B = {n_boot} resamples of "
        f"them), {side_of_one(lo, hi)}, at n = {list(grid)} {where}; Cor. 4.9's "
        f"xi_alpha - xi_Delta + 1 = {fit.cor49['predicted']:.3f}; {temperature_placement(lo, hi)}.",
        precondition=precondition
        or (
            None
            if past
            else "the rows lie inside the model's training window, where Table 2 reads past it: the claim's regime "
            "is not reached"
        ),
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
        finding=as_finding(replace(finding, name=rules.TEMPERATURE_NAME)),
    )


def temperature_placement(lo: float, hi: float) -> str:
    """Where xi_hat_Lambda's interval places the model beside Hayase & Karakida 2026 Table 2's pretrained
    Qwen-7B-Chat cells (1.74 to 2.33) and the i.i.d. rows of the null (no growth past log n)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "not placed: no finite interval"
    if lo > 1:
        return "above 1, like Table 2's pretrained Qwen-7B-Chat cells (1.74 to 2.33)"
    if hi < 1:
        return "below 1, unlike every pretrained cell of Table 2 (1.74 to 2.33)"
    return "its interval holds 1: not told apart from 1, below Table 2's pretrained cells (1.74 to 2.33) or among them"


def temperature_panel(
    model,
    tokenizer,
    cfg,
    *,
    seed: int,
    progress: bool,
    target: int | None = None,
    precondition: str | None = None,
    stage=None,
) -> TemperaturePanel:
    """xi_hat_Lambda inside the window (rows at n = n_eval x {1/4, 1/2, 3/4, 1}, n_eval = min(window,
    ``cfg.inside_tokens``)) and past it (n_eval = 1.25 x window under dynamic NTK) where that is at most
    ``cfg.past_tokens`` and the model has RoPE tables to rescale; documents are windows of the bundled novel, as
    the temperature study reads them; with the multiplier m(target; xi_hat) of Hayase & Karakida App. A.2 (target
    None: twice the window); ``precondition``: why no finding can be decided (an untrained model). ``stage``
    (``progress.Steps.step``): each part, read or not, runs as a step it names."""
    stage = stage or (lambda _: contextlib.nullcontext())
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
        where = "inside the window" if part == "inside" else "past the window"
        if part == "past" and why is not None:
            with stage(f"temperature {where}: not read, {why}"):
                parts[part] = None
            continue
        grid = sorted({max(2, round(f * n_eval)) for f in fractions})
        rope = "dynamic" if part == "past" else "plain"
        under = " under dynamic-NTK RoPE" if part == "past" else ""
        with stage(
            f"temperature {where}: xi_hat_Lambda{under} on {cfg.temperature_docs} windows of {max(grid)} tokens of "
            f"the novel, n = {', '.join(map(str, grid))}, {cfg.n_boot} bootstrap resamples"
        ):
            novel = tasks.novel_path()
            docs = temperature.token_windows(
                tokenizer, max(grid), cfg.temperature_docs, seed=seed, bos=False, text=novel
            )
            rows = temperature.contact_rows(
                model, docs, grid, eps=temperature.TemperatureConfig.eps, rope=rope, n_train=n_train, progress=progress
            )
            parts[part] = temperature_fit(
                rows, grid, past=part == "past", rope=rope, seed=seed, n_boot=cfg.n_boot, precondition=precondition
            )
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
    exponent suggests there; a negative exponent reads as 0, no multiplier; an exponent past the largest
    ``length_multiplier`` takes (``XI_RANGE``), which the interval over a few documents can reach, gives none."""
    if n_train is None or n_train < 2 or not _finite(fit.xi_hat):
        return None
    import torch

    target = 2 * n_train if target is None else target

    def m(xi: float | None) -> float | None:
        if not _finite(xi) or xi > XI_RANGE[1]:
            return None
        return float(length_multiplier(torch.tensor([float(target)]), max(xi, 0.0), n_train)[0])

    values = {"target": target, "xi": fit.xi_hat, "m": m(fit.xi_hat), "m_lo": m(fit.lo), "m_hi": m(fit.hi)}
    return Multiplier(**jsonable(values))


def ablation_panel(
    model,
    tokenizer,
    cfg,
    induction: pd.DataFrame,
    prompts,
    baseline: list[dict],
    *,
    b_auto: float,
    progress: bool,
    precondition: str | None = None,
) -> AblationPanel:
    """``attnlab ablate``'s K sweep in memory: heads ranked by their median S_2 at b_auto over the induction audit's
    active rows, relu_p2_bauto given to the top-K, bottom-K and ``cfg.draws`` random-K heads of each K, NIAH
    ``prompts`` scored by exact match against softmax's answers on them (``baseline``, ``analyses.substitute.score``'s
    records, as the substitution scored them); the decisive flag per K (App. I, descriptive) and the finding
    (``rules.ABLATION_RULE``, bottom-K as its null)."""
    column = f"s_p{LENGTH_P}"
    ranking = ablate.rank_heads(induction[induction["b"] == float(b_auto)], column)
    ranked = int(ranking["ranked"].sum())
    ks = [k for k in cfg.ks if k <= ranked]
    device = str(model_device(model))
    records = [{**r, "k": 0, "subset": BASELINE, "draw": 0} for r in baseline]
    plan = [(k, *subset) for k in ks for subset in ablate.subsets(ranking, k, cfg.draws)]
    for k, subset, draw, chosen in progress_of(plan, desc="ablation", unit="subset", enabled=progress):
        with hooks.substituted(model, cfg.ablation_recipe, heads=chosen, b_auto=b_auto):
            label = f"{subset}-{k}" + (f"#{draw}" if subset == "random" else "")
            got = score(model, tokenizer, prompts, "niah", device, label, progress)
            records += [{**r, "k": k, "subset": subset, "draw": draw} for r in got]
    cells = exact_intervals(ablate.cells(pd.DataFrame(records)))
    table = ablate.decisive_table(cells)
    top = ranking[ranking["ranked"]].head(max(ks, default=0))
    return AblationPanel(
        recipe=cfg.ablation_recipe,
        rank=f"median S_{LENGTH_P} at b = b_auto over the induction audit's active rows",
        ranked=ranked,
        rows=as_records(table),
        cells=as_records(cells),
        top=as_records(top[["layer", "head", f"median {column}", "rank"]]),
        finding=as_finding(ablation_finding(cells, precondition=precondition)),
    )


def exact_intervals(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its accuracy interval (``lo``, ``hi``, %) recomputed from ``correct`` of ``n`` as the exact
    (Clopper-Pearson) 95% interval: a card scores 8 to 40 prompts per cell, where the Wilson interval the commands
    print covers as little as 85% at some rates; the exact one covers at least 95% at every rate, as the card's
    calibration table measures."""
    out = table.copy()
    bounds = [clopper_pearson(int(k), int(n)) for k, n in zip(out["correct"], out["n"], strict=True)]
    out["lo"] = [100 * lo for lo, _ in bounds]
    out["hi"] = [100 * hi for _, hi in bounds]
    return out


def sweep_counts(cells: pd.DataFrame) -> tuple[tuple[int, int], list[rules.Arms]]:
    """``attnlab ablate``'s cell table as the rule reads it: softmax's (correct, n) and, per K, the counts of top-K,
    bottom-K and the random-K draws pooled."""
    base = cells[cells["subset"] == BASELINE].iloc[0]
    sweep = []
    for k, group in cells[cells["k"] > 0].groupby("k"):
        arm = {s: group[group["subset"] == s] for s in ("top", "bottom", "random")}
        sweep.append(
            rules.Arms(
                k=int(k),
                n=int(arm["top"]["n"].iloc[0]),
                top=int(arm["top"]["correct"].iloc[0]),
                bottom=int(arm["bottom"]["correct"].iloc[0]),
                random=int(arm["random"]["correct"].sum()),
                random_n=int(arm["random"]["n"].sum()),
            )
        )
    return (int(base["correct"]), int(base["n"])), sweep


def ablation_words(softmax: tuple[int, int], sweep: list[rules.Arms]) -> str:
    """Per K: each arm's count and change from softmax, the two Holm-adjusted p-values, and where the largest
    top-K loss places the model among Polynomial Concentration Fig. 4's."""
    share = softmax[0] / softmax[1]
    parts = []
    for a, (ps, pr) in zip(sweep, rules.ablation_pvalues(softmax, sweep)):
        parts.append(
            f"K = {a.k}: top {a.top}/{a.n} ({100 * (a.top / a.n - share):+.1f} pp), bottom {a.bottom}/{a.n}, random "
            f"{a.random}/{a.random_n} pooled; Holm p against softmax {ps:.3g}, against random {pr:.3g}"
        )
    worst = max(sweep, key=lambda a: share - a.top / a.n)
    loss, random_loss = 100 * (share - worst.top / worst.n), 100 * (share - worst.random / worst.random_n)
    return (
        "; ".join(parts) + f". The largest top-K change, top-{worst.k}, is {-loss:+.1f} pp against softmax "
        f"(random-{worst.k} {-random_loss:+.1f} pp): {rules.placement(loss, random_loss)}"
    )


@named(rules.ABLATION_NAME)
def ablation_finding(cells: pd.DataFrame, *, precondition: str | None = None):
    """Whether the heads of highest S_2 carry NIAH here (Polynomial Concentration §5.4, App. I), by
    ``rules.ABLATION_RULE``; the null is the bottom-K heads under the same rule; power simulated at this run's
    prompts, K values, draws and softmax accuracy (``cards.calibration.ablation``)."""
    softmax, sweep = sweep_counts(cells)
    base = 100 * softmax[0] / softmax[1]
    top, bottom = rules.ablation_ks(softmax, sweep, "top"), rules.ablation_ks(softmax, sweep, "bottom")
    draws = sweep[0].random_n // sweep[0].n if sweep else 0
    chance = (
        power(calibration.ablation("this run", softmax[1], [a.k for a in sweep], draws, softmax[0] / softmax[1]))
        if sweep and draws
        else None
    )
    return decide(
        "polynomializing the heads of highest S_p costs more NIAH accuracy than softmax and than random heads do "
        "(Polynomial Concentration §5.4, Fig. 4: Qwen3 and Gemma-4 lose 80 to 100 pp at top-K, K >= 20, bottom-K "
        "0 pp)",
        rule=rules.ABLATION_RULE,
        holds=bool(top) if sweep else None,
        null=Null(
            "the bottom-K heads (lowest S_p) under the same rule",
            bool(bottom),
            f"below softmax and random, both Holm p <= 0.05, at K = {bottom}" if bottom else "at no K",
        ),
        mde=MDE(
            accuracy_mde(base, softmax[1]),
            ABLATION_EFFECT,
            "pp of accuracy",
            f"two-sample test of {softmax[1]} prompts per cell at softmax's rate (5% two-sided, 80% power); power: the "
            "rule's firing rate where top-K loses 80 pp at the largest K and random-K 10 pp, at this run's sizes",
            power=chance,
        ),
        evidence=f"softmax {softmax[0]}/{softmax[1]} ({base:.1f}%) NIAH prompts; "
        + (ablation_words(softmax, sweep) if sweep else "no K fits the ranked heads")
        + f"; top-K meets the rule at K = {top or 'none'}.",
        precondition=precondition or baseline_warning(base, "niah"),
    )
