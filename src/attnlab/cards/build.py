"""One card per checkpoint: the substitution screen, the best zero-shot recipe and the map of head types, in memory.

``build`` runs the in-memory API (``attnlab.audit``, ``attnlab.substitute``, ``attnlab.heads``, ``attnlab.sinks``)
under one budget and one b_auto and returns the typed ``Card`` (``cards.types``), as ``attnlab.card(model,
tokenizer)`` gives it; ``Card.save`` and ``attnlab card MODEL`` write it as card.json, card.md and one HTML page.
Every panel carries the command that reproduces it on its own.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import asdict, dataclass, replace

import pandas as pd

from attnlab import hooks, rowmaps
from attnlab.analyses.audit_tables import prevalence
from attnlab.analyses.run import (
    CALIBRATION_TOKENS,
    Bias,
    calibration_ids,
    check_count,
    check_model,
    check_tokenizer,
    context_length,
    evaluating,
)
from attnlab.analyses.substitute import BASELINE, baseline_warning
from attnlab.api.checks import as_prompts
from attnlab.api.entry import audit, sinks, substitute
from attnlab.api.entry import heads as api_heads
from attnlab.cards import calibration, panels, rules
from attnlab.cards.types import (
    AblationPanel,
    BestRecipe,
    Card,
    CardError,
    LengthPanel,
    SubstitutionPanel,
    TemperaturePanel,
    as_records,
    jsonable,
)
from attnlab.devices import model_device
from attnlab.errors import ArgumentTypeError
from attnlab.findings.calibrate import power
from attnlab.findings.stats import clopper_pearson
from attnlab.papers import cite
from attnlab.progress import Steps

SUITES = ("niah", "induction")
DEGREES = (2, 4, 8, 16)
# Polynomial Concentration §5.5, Tables 4-5: a cell with at most this % of active rows measured safe collapsed
# there every time, while one with this many safe still lost >= 19 pp once: the safe share is a necessary condition
# measured on the rows (S_p < 1 on them), not a prediction of accuracy.
LOW_SAFE = 3.0
HIGH_SAFE = 66.0
SCREEN = cite("Polynomial Concentration", "§5.5")
# The steps ``build`` names as it starts each: the trained-model check and b_auto; the audit of each suite; the
# substitution, heads, first-token mass, ablation, length, and temperature inside and past the window
STEPS = 2 + len(SUITES) + 7


@dataclass(frozen=True)
class CardPlan:
    """How much one card reads. prompts: per suite (audit and substitution); pad: NIAH haystack sentences;
    length: induction prompt length (audit and heads); heads_prompts: induction prompts of the head types;
    documents x tokens: generic texts of the first-token mass; queries: the audit's rows; recipes: the zero-shot
    candidates, softmax scored first; lengths x length_prompts: the length sweep's induction prompts;
    temperature_docs: novel windows read; inside_tokens: the longest temperature reading inside the window,
    past_tokens: the longest past it (1.25 x the window, else not read); n_boot: its bootstrap; ks x draws: the
    ablation's K sweep and random draws, with ablation_recipe."""

    name: str
    prompts: int
    pad: int | None
    length: int
    heads_prompts: int
    documents: int
    tokens: int
    queries: str
    recipes: tuple[str, ...]
    lengths: tuple[int, ...]
    length_prompts: int
    temperature_docs: int
    inside_tokens: int
    past_tokens: int
    n_boot: int
    ks: tuple[int, ...]
    draws: int
    about: str
    ablation_recipe: str = "relu_p2_bauto"


PLANS = {
    "quick": CardPlan(
        "quick",
        prompts=8,
        pad=8,
        length=256,
        heads_prompts=8,
        documents=4,
        tokens=256,
        queries="every:16",
        recipes=("relu_p2_bauto", "relu_p4_bauto", "relu_p8_bauto", "sigmoid_b0"),
        lengths=(128, 256, 512, 1024),
        length_prompts=4,
        temperature_docs=4,
        inside_tokens=1024,
        past_tokens=2048,
        n_boot=200,
        ks=(4, 16),
        draws=3,
        about="minutes for a 135M model on 2 CPU cores: short prompts, 8 per suite; intervals are wide",
    ),
    # Sized to end within 15 minutes on 2 CPU cores for a 135M model: 40 prompts per suite as the paper's cells
    # hold, on shorter prompts (a 32-sentence NIAH haystack, about 300 tokens; 512-token induction prompts), two Ks
    # of the ablation with 2 random draws each, lengths to 2048. The reading past the window (n_eval = 1.25 x the
    # window) stays within 4096 tokens: one 10240-token forward of an 8k-window model took 170 s here, so its 4
    # documents alone would take 11 minutes; reading such a model past its window is the temperature command's job.
    "standard": CardPlan(
        "standard",
        prompts=40,
        pad=32,
        length=512,
        heads_prompts=40,
        documents=8,
        tokens=1024,
        queries="every:16",
        recipes=("relu_p2_bauto", "relu_p4_bauto", "relu_p8_bauto", "relu_p16_bauto", "relu_p4_b0", "sigmoid_b0"),
        lengths=(256, 512, 1024, 2048),
        length_prompts=8,
        temperature_docs=4,
        inside_tokens=2048,
        past_tokens=4096,
        n_boot=200,
        ks=(5, 20),
        draws=2,
        about="within 15 minutes for a 135M model on 2 CPU cores: 40 prompts per suite, NIAH pad 32, 512-token "
        "induction prompts",
    ),
}


def plan(budget: str) -> CardPlan:
    """The plan of ``budget``; a CardError naming the budgets otherwise."""
    if budget not in PLANS:
        raise CardError(f"budget takes {' or '.join(map(repr, PLANS))}, got {budget!r}")
    return PLANS[budget]


def build(
    model,
    tokenizer,
    cfg: CardPlan,
    *,
    seed: int = 0,
    progress: bool = False,
    name: str = "MODEL",
    target: int | None = None,
) -> Card:
    """The typed card under plan ``cfg``, from the in-memory API's audit, substitute, heads and sinks (``attnlab.card``
    checks its arguments and gives it). ``target``: the context length of the multiplier (None: twice the window).
    """
    planned, cfg = cfg.lengths, within_window(cfg, context_length(model))
    past = tuple(n for n in planned if n not in cfg.lengths)  # the plan's lengths past the window
    layers, heads = hooks.num_heads(model)
    steps = Steps("card", STEPS, hooks.attention_modules(model))
    with steps.step(f"trained-model check: next-token loss on the bundled novel's first {panels.LOSS_TOKENS} tokens"):
        trained = panels.loss_check(model, tokenizer)
    untrained = panels.untrained(trained)
    calibration = min(CALIBRATION_TOKENS, context_length(model) or CALIBRATION_TOKENS)
    # the first audit would calibrate it: done here, as it does, so that the log names its two forwards
    with steps.step(
        f"b_auto: 5% mass calibration on {calibration} tokens of generated text, 2 forwards (Polynomial "
        "Concentration App. B)"
    ):
        with evaluating(model):
            b_auto = hooks.calibrate_b_auto(model, calibration_ids(model, tokenizer, model_device(model)))
    sizes = {"niah": {"pad": cfg.pad}, "induction": {"length": cfg.length}}
    shapes = {"niah": "" if cfg.pad is None else f" (pad {cfg.pad})", "induction": f" of {cfg.length} tokens"}
    audits = {}
    for suite in SUITES:
        with steps.step(
            f"audit {suite}: {cfg.prompts} prompts{shapes[suite]}, rows {cfg.queries} of {layers} x {heads} heads, "
            f"S_p at p = {', '.join(map(str, DEGREES))} and S_sigma, b = 0 and b_auto"
        ):
            audits[suite] = audit(
                model,
                tokenizer,
                suite,
                n_prompts=cfg.prompts,
                seed=seed,
                p=DEGREES,
                b=(0.0, "auto"),
                b_auto=b_auto,
                queries=cfg.queries,
                sigmoid=True,
                progress=progress,
                **sizes[suite],
            )
    unsafe = unsafe_table(audits)
    with steps.step(
        f"substitution: softmax and {len(cfg.recipes)} recipes ({', '.join(cfg.recipes)}) on every head, greedy "
        f"answers to {cfg.prompts} NIAH prompts{shapes['niah']}"
    ):
        # one NIAH suite for the substitution and the ablation, whose softmax baseline is the substitution's own
        niah = as_prompts(model, tokenizer, "niah", n_prompts=cfg.prompts, seed=seed, pad=cfg.pad)
        table, answers = substitute(
            model, tokenizer, list(cfg.recipes), niah, b_auto=b_auto, progress=progress, answers=True
        )
    with steps.step(
        f"heads: types of {layers} x {heads} heads from {cfg.heads_prompts} induction prompts{shapes['induction']}"
    ):
        types = api_heads(
            model,
            tokenizer,
            n_prompts=cfg.heads_prompts,
            length=cfg.length,
            seed=seed,
            queries=cfg.queries,
            progress=progress,
        )
    with steps.step(f"first-token mass: {cfg.documents} documents of {cfg.tokens} tokens"):
        mass = sinks(model, tokenizer, n_documents=cfg.documents, tokens=cfg.tokens, seed=seed)
    baseline = answers[answers["recipe"] == BASELINE].to_dict("records")
    with steps.step(
        f"ablation: {cfg.ablation_recipe} on the top-, bottom- and {cfg.draws} random K heads by S_2, K = "
        f"{', '.join(map(str, cfg.ks))}: {len(cfg.ks) * (2 + cfg.draws)} subsets x {cfg.prompts} NIAH prompts"
    ):
        ablation = panels.ablation_panel(
            model,
            tokenizer,
            cfg,
            audits["induction"],
            niah,
            baseline,
            b_auto=b_auto,
            progress=progress,
            precondition=untrained,
        )
    beyond = f", past the window at L = {', '.join(map(str, past))} (RoPE models)" if past else ""
    with steps.step(
        f"length: induction audits at L = {', '.join(map(str, cfg.lengths))}{beyond}, {cfg.length_prompts} prompts each"
    ):
        length = panels.length_panel(
            model, tokenizer, cfg, audit, seed=seed, progress=progress, past=past, precondition=untrained
        )
    heat = panels.temperature_panel(
        model, tokenizer, cfg, seed=seed, progress=progress, target=target, precondition=untrained, stage=steps.step
    )
    return Card(
        model=name,
        model_type=getattr(model.config, "model_type", None),
        layers=jsonable(layers),
        heads_per_layer=jsonable(heads),
        b_auto=jsonable(b_auto),
        substitution=SubstitutionPanel(
            unsafe=as_records(unsafe),
            screen=as_records(screen(unsafe, cfg.recipes)),
            recipes=as_records(recipe_table(table)),
            best=best_recipe(table),
            source=SCREEN,
        ),
        heads=as_records(head_table(types, mass, audits)),
        budget=jsonable(asdict(cfg)),
        seed=jsonable(seed),
        ablation=ablation,
        length=length,
        temperature=heat,
        commands=commands(name, cfg, seed, b_auto, next(model.parameters(), None), reads(ablation, length, heat)),
        trained=trained,
    )


def card(
    model,
    tokenizer,
    *,
    budget: str = "quick",
    seed: int = 0,
    progress: bool = False,
    name: str = "MODEL",
    target_length: int | None = None,
) -> Card:
    """One checkpoint's attention on one page, as a typed ``cards.types.Card``: the substitution screen, the best
    zero-shot recipe, the head map and its ablation, the unsafe share and entropy against length, and the
    temperature exponent (Polynomial Concentration §5.2-5.5, App. C, H; Attention Sinks Essential §4 for the
    first-token mass; Hayase & Karakida 2026 §4.5, App. A.2), from ``audit``, ``substitute``, ``heads`` and ``sinks``
    and the ablate, lengths and temperature commands' pieces under one budget and one b_auto; as ``attnlab card``.

    Args:
        model, tokenizer: a transformers causal LM on any device and its tokenizer.
        budget: a key of ``attnlab.cards.build.PLANS``: "quick" (minutes for a 135M model on 2 CPU cores) or
            "standard". seed: the prompt seed of every suite. progress: show progress bars.
        name: how the commands that reproduce each panel name the model (``attnlab card`` passes MODEL as typed).
        target_length: the context length at which the temperature panel gives the multiplier m(n; xi_hat)
            (Hayase & Karakida 2026 App. A.2); None: twice the model's window.

    Returns:
        A ``cards.types.Card``: "substitution" (unsafe % of active rows per suite, b and p with its 95% interval over
        prompts; the screen's call per ReLU recipe; the recipes' NIAH accuracy with exact intervals and the best one
        against softmax), "heads" (per (layer, head): type, first-token mass, median S_2), "ablation" (the K sweep of
        top-, bottom- and random-K heads by S_2, with its finding), "length" (unsafe % and median entropy per prompt
        length inside the window, with its trend finding), "temperature" (xi_hat_Lambda inside and, where the budget
        reaches it, past the window, each with its finding; the multiplier m(target_length; xi_hat)) and "commands"
        (one per panel); ``answers`` (``cards.answers``) gives its three answers. ``Card.save(folder)`` writes the
        page, card.json and card.md; ``Card.to_dict()`` is card.json's content ("schema" first, findings as dicts),
        and ``Card.from_dict`` reads it back.
    """
    cfg = checked_plan(model, tokenizer, budget=budget, seed=seed, name=name, target_length=target_length)
    return build(model, tokenizer, cfg, seed=seed, progress=progress, name=name, target=target_length)


def checked_plan(model, tokenizer, *, budget: str, seed: int, name: str, target_length: int | None = None) -> CardPlan:
    """The plan of ``budget`` once ``card``'s arguments are checked (each refused in one line, before any forward)."""
    cfg = plan(budget)
    check_model(model)
    check_tokenizer(tokenizer)
    check_count("seed", seed, 0, api=True)
    if not isinstance(name, str) or not name:
        raise ArgumentTypeError(f"name takes a non-empty string, got {name!r}")
    if target_length is not None:
        check_count("target_length", target_length, 2, api=True)
    return cfg


def within_window(cfg: CardPlan, window: int | None) -> CardPlan:
    """``cfg`` with every prompt and document inside a context of ``window`` tokens: the induction prompts (one
    token under it, room for a BOS token), the first-token documents and the length sweep cut to it. NIAH's pad
    is left as it is: a haystack that still overruns is refused by the audit, naming the lengths."""
    if window is None:
        return cfg
    return replace(
        cfg,
        length=min(cfg.length, window - 1),
        tokens=min(cfg.tokens, window),
        lengths=tuple(n for n in cfg.lengths if n < window),
    )


def reads(ablation: AblationPanel, length: LengthPanel, heat: TemperaturePanel) -> dict:
    """What the length, temperature and ablation panels read, for ``commands``."""
    parts = {k: getattr(heat, k) for k in ("inside", "past") if getattr(heat, k) is not None}
    return {
        "ks": [int(r["k"]) for r in ablation.rows],
        "lengths": [int(r["L"]) for r in length.rows],
        "temperature": {k: (list(part.n), part.rope) for k, part in parts.items()},
    }


def unsafe_table(audits: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per suite, bias and degree: the unsafe share of active rows (S_p >= 1, not ``safe_p<p>``) with its 95%
    interval over prompts, as ``attnlab audit`` tabulates it (``analyses.audit_tables.prevalence``)."""
    lines = []
    for suite, rows in audits.items():
        for label, value in rows.attrs["biases"].items():
            part = rows[rows["b"] == float(value)]
            for line in prevalence(part, DEGREES, Bias(label, float(value))):
                lines.append({"suite": suite, **line})
    frame = pd.DataFrame(lines)
    keep = ["suite", "b", "b value", "p", "active", "prompts", "unsafe %", "unsafe lo", "unsafe hi", "med s_p"]
    return frame[keep + (["sigma safe %"] if "sigma safe %" in frame else [])]


def call(safe: float) -> str:
    """The screen's reading of a measured-safe share (%) (Polynomial Concentration §5.5): a necessary condition
    (rows with S_p < 1) measured on the audited rows, not a prediction of the recipe's accuracy."""
    if not math.isfinite(safe):
        return "no active rows: not screened"
    if safe <= LOW_SAFE:
        return (
            f"fails the screen: <= {LOW_SAFE:g}% of active rows measured safe, the necessary condition fails on "
            "the rows; §5.5 saw every such cell collapse"
        )
    strong = f" (>= {HIGH_SAFE:g}% safe)" if safe >= HIGH_SAFE else ""
    return (
        f"passes the screen{strong}: the necessary condition holds on {safe:.0f}% of active rows; not a prediction "
        f"of accuracy, not a guarantee (§5.5: cells with >= {HIGH_SAFE:g}% safe still lost >= 19 pp): check the "
        "accuracy"
    )


def screen(unsafe: pd.DataFrame, recipes: tuple[str, ...]) -> list[dict]:
    """The screen's call per recipe the audit reads, and suite: a ReLU recipe (relu_p<p>_b0 / _bauto) by its
    degree's measured-safe share of active rows at its bias, a sigmoid one (sigmoid_b0 / _bauto) by the share of
    readable rows with S_sigma < 1 (App. T). A screen, not a guarantee (Polynomial Concentration §5.5): a very low
    share predicts collapse, a high one does not promise preservation. The shares are over the audit's rows (every
    ``queries`` row of every head), not §5.5's final-query rows; other recipes are left out."""
    lines = []
    for recipe in recipes:
        rm = rowmaps.get(recipe)  # the registry's reading of the name: its family, p, and b (None: auto)
        if rm.family not in ("relu_p", "sigmoid") or rm.params["b"] not in (0.0, None):
            continue
        label = "auto" if rm.params["b"] is None else "0"
        p = float(rm.params["p"]) if rm.family == "relu_p" else None
        for suite in SUITES:
            cell = unsafe[(unsafe["suite"] == suite) & (unsafe["b"] == label)]
            cell = cell[cell["p"] == p] if p is not None else cell.head(1)
            if cell.empty or (p is None and "sigma safe %" not in cell):
                continue
            safe = 100 - float(cell["unsafe %"].iloc[0]) if p is not None else float(cell["sigma safe %"].iloc[0])
            lines.append({"recipe": recipe, "suite": suite, "p": p, "b": label, "safe %": safe, "call": call(safe)})
    return lines


def recipe_table(table: pd.DataFrame) -> pd.DataFrame:
    """The substitution table's accuracy columns: recipe, resolved map, correct of n, accuracy % with its exact
    (Clopper-Pearson) 95% interval (``panels.exact_intervals``), and delta pp from softmax."""
    columns = ["recipe", "map", "correct", "n", "accuracy %", "lo", "hi", "delta pp"]
    return panels.exact_intervals(table[columns]).reset_index(drop=True)


def recipe_words(reading: rules.Reading, top: pd.Series, base: float, chance: float) -> str:
    """The recipe panel's sentence: the best recipe only when it is ahead of every other (``rules.RECIPE_RULE``),
    else the recipes tied with the leader, or that none preserves NIAH (Polynomial Concentration §5.5, Table 3:
    Gemma-4's relu_p8_bauto keeps 0 pp, Qwen3 admits no preserving recipe)."""
    if warning := baseline_warning(base, "niah"):
        return f"not read: {warning}"
    weak = (
        f" (this design finds a recipe ahead of others 50 pp lower in {chance:.0%} of simulated runs: underpowered)"
        if chance < 0.8
        else ""
    )
    if reading.ahead is not None:
        below = ", yet below softmax" if reading.none else ""
        return (
            f"best: {reading.ahead} {float(top['accuracy %']):.1f}%, ahead of every other recipe (one-sided Fisher, "
            f"Holm over the others, p <= 0.05){below}{weak}"
        )
    if reading.none:
        return f"no recipe preserves NIAH here: each scores below softmax's {base:.1f}% or none answers any{weak}"
    return f"tied: {', '.join(reading.tied)} (none ahead of every other at p <= 0.05){weak}"


def best_recipe(table: pd.DataFrame) -> BestRecipe:
    """The recipe other than softmax with the highest NIAH accuracy (the first listed on a tie), beside softmax's,
    each with its exact (Clopper-Pearson) 95% interval; ``overlap``: whether the two intervals overlap; ``ahead``:
    whether it is ahead of every other recipe by ``rules.RECIPE_RULE`` (only then is it called the best);
    ``reading``: the sentence; ``power``: the rule's simulated power at this table's sizes and softmax accuracy
    (``cards.calibration.recipe``)."""
    base = table.iloc[0]
    others = table.iloc[1:]
    top = others.loc[others["accuracy %"].idxmax()]
    lo, hi = clopper_pearson(int(top["correct"]), int(top["n"]))
    base_lo, base_hi = clopper_pearson(int(base["correct"]), int(base["n"]))
    counts = [(r["recipe"], int(r["correct"]), int(r["n"])) for _, r in others.iterrows()]
    softmax = (int(base["correct"]), int(base["n"]))
    reading = rules.recipe_reading(softmax, counts)
    chance = power(calibration.recipe("this run", softmax[1], len(counts), softmax[0] / softmax[1]))
    return BestRecipe(
        recipe=top["recipe"],
        map=top["map"],
        accuracy=jsonable(float(top["accuracy %"])),
        lo=jsonable(100 * float(lo)),
        hi=jsonable(100 * float(hi)),
        softmax=jsonable(float(base["accuracy %"])),
        softmax_lo=jsonable(100 * float(base_lo)),
        softmax_hi=jsonable(100 * float(base_hi)),
        delta_pp=jsonable(float(top["accuracy %"] - base["accuracy %"])),
        overlap=bool(lo <= base_hi and base_lo <= hi),
        ahead=reading.ahead is not None,
        reading=recipe_words(reading, top, float(base["accuracy %"]), chance),
        power=jsonable(chance),
    )


def head_table(types: pd.DataFrame, mass: pd.DataFrame, audits: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per (layer, head): its type and labels (``attnlab.heads``), first-token mass and its ratio to the uniform
    share (``attnlab.sinks``), and the median S_2 of its active rows at b = 0 over both audited suites."""
    rows = pd.concat([r[(r["b"] == 0.0) & (r["status"] == "active")] for r in audits.values()])
    s2 = rows.groupby(["layer", "head"])["s_p2"].median().rename("med s_p2").reset_index()
    out = types[["layer", "head", "head_type", "labels", "induction", "entropy", "locality", "sink"]]
    out = out.merge(mass[["layer", "head", "mass", "ratio"]], on=["layer", "head"], how="left")
    out = out.rename(columns={"mass": "first-token mass", "ratio": "mass / uniform"})
    return out.merge(s2, on=["layer", "head"], how="left").sort_values(["layer", "head"]).reset_index(drop=True)


def commands(
    name: str, cfg: CardPlan, seed: int, b_auto: float | None, weights=None, reads: dict | None = None
) -> dict[str, str]:
    """The commands that reproduce each panel on their own: b_auto reused at full precision, so none calibrates
    again; ``weights`` (a parameter of the model) adds its device and dtype where they are not the CPU's float32;
    ``reads``: what the length, temperature and ablation panels read (lengths, the temperature grids by part, the
    K sweep), where the model's window cut the plan's."""
    device, dtype = ("cpu", "float32") if weights is None else (weights.device, weights.dtype)
    dtype = str(dtype).removeprefix("torch.")
    place = "" if (str(device), dtype) == ("cpu", "float32") else f" --device {device} --dtype {dtype}"
    model = shlex.quote(name) + place
    common = f"--prompts {cfg.prompts} --seed {seed}"
    reuse = "" if b_auto is None else f" --b-auto {float(b_auto)!r}"
    niah = f"--suite niah {common}" + ("" if cfg.pad is None else f" --pad {cfg.pad}")
    induction = f"--suite induction {common} --length {cfg.length}"
    audit = f"attnlab audit --model {model} --b 0 auto --queries {cfg.queries} --sigmoid{reuse}"
    out = {
        "audit niah": f"{audit} {niah} --out runs/card-audit-niah",
        "audit induction": f"{audit} {induction} --out runs/card-audit-induction",
        "substitute": f"attnlab substitute --model {model} {niah} --recipes {' '.join(cfg.recipes)}{reuse} "
        "--out runs/card-substitute",
        "heads": f"attnlab heads --model {model} --prompts {cfg.heads_prompts} --length {cfg.length} --seed {seed} "
        f"--queries {cfg.queries} --out runs/card-heads",
        "sinks": f"attnlab.sinks(model, tokenizer, n_documents={cfg.documents}, tokens={cfg.tokens}, seed={seed})",
    }
    reads = reads or {}
    if reads.get("ks"):
        out["ablate"] = (
            f"attnlab ablate --model {model} {niah} --k {_ints(reads['ks'])} --random-draws {cfg.draws} "
            f"--recipe {cfg.ablation_recipe} --rank-suite induction --rank-prompts {cfg.prompts} "
            f"--rank-length {cfg.length} --queries {cfg.queries} --p 2 --b auto{reuse} --out runs/card-ablate"
        )
    if reads.get("lengths"):
        out["lengths"] = (
            f"attnlab lengths --model {model} --suite induction --lengths {_ints(reads['lengths'])} --p 2 --b 0 "
            f"--prompts {cfg.length_prompts} --seed {seed} --queries {cfg.queries} --out runs/card-lengths"
        )
    for part, (grid, rope) in reads.get("temperature", {}).items():
        out[f"temperature {part}"] = (
            f"attnlab temperature --model {model} --n {_ints(grid)} --suite novel --rope {rope} "
            f"--docs {cfg.temperature_docs} --n-boot {cfg.n_boot} --seed {seed} --out runs/card-temperature-{part}"
        )
    return out


def _ints(values) -> str:
    return " ".join(str(int(v)) for v in values)
