"""The ``concentration`` study ("When Does Polynomial Attention Concentrate?", cited as Polynomial
Concentration): when does polynomial attention concentrate like softmax?

A small Llama decoder is trained with softmax on the induction suite (or the user's ``--model`` is
taken as is) and saved as a Hugging Face checkpoint in ``folder/model``; then the checkpoint engines run
on it, each into its own subfolder:

- ``audit`` (§5.2, Tables 1/10/11): prevalence of the unsafe regime S_p >= 1 at p in {2, 4, 8, 16} and
  b in {0, auto}, with the per-row rho, A_act, S_p and p* (Cor. 4.3) kept in ``rows_b*.parquet``;
- ``substitute`` (§5.3, Table 3): the 14 recipes put in place of softmax on every head;
- ``ablate`` (§5.4, App. D/V): the top-, bottom- and random-K heads by median S_p polynomialized.

``summarize`` reads those folders back into the phase plot of per-head median (rho, A_act) against the
boundaries A (1 - rho)^p = 1 (Thm. 4.1: S_p <= A (1 - rho)^p), the lower-bound validation (p >= p*
predicts S_p <= 1), the substitution table, the matched diagnostic (per ReLU cell, the measured-safe
fraction of the rows that answer, over all heads and over the K heads the ablation substituted first,
beside the cell's change in accuracy) and the ablation table, and decides the paper's screen: cells with a
very low measured-safe fraction collapse under substitution.

The study's budgets are in ``concentration_plan``, the toy model and its training in ``concentration_train``, the
findings and their rules in ``concentration_findings``, ``summarize``'s tables and notes in
``concentration_section``.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from attnlab import devices, io
from attnlab.analyses import ablate, audit, substitute
from attnlab.analyses import heads as head_types
from attnlab.report.sections import Figure, Section, Table, read_section
from attnlab.studies.concentration.findings import (
    bound_check,
    finding,
    prevalence_finding,
    sufficiency_finding,
    unnormalized_finding,
)
from attnlab.studies.concentration.plan import BUDGETS, MATCHED_QUERIES, REAL, RECIPES, B, P, Plan
from attnlab.studies.concentration.rules import NAMES
from attnlab.studies.concentration.section import (
    _notes,
    _rows,
    causal_k,
    matched,
    prevalence_null,
    prevalence_shares,
    prevalence_table,
    read_audit_config,
    softmax_halves,
)
from attnlab.studies.concentration.train import train
from attnlab.studies.runner import Study, StudyConfig, load_config, register, section


def plan_for(cfg: StudyConfig) -> Plan:
    """The budget's plan: the toy one, or the pretrained-model one when ``--model`` is given."""
    return (BUDGETS if cfg.model is None else REAL)[cfg.budget]


def model_path(cfg: StudyConfig, folder: Path) -> str:
    """The model the engines load: the user's (a name, GGUF or folder) or the one trained here."""
    return cfg.model if cfg.model is not None else str(folder / "model")


def _done(folder: Path) -> bool:
    return (folder / "config.json").is_file()


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    plan = plan_for(cfg)
    model = model_path(cfg, folder)
    device = str(devices.resolve(cfg.device))  # the full budget is meant for a GPU
    if cfg.model is None and not _done(folder / "model"):
        for stale in folder.glob(".model-*"):
            shutil.rmtree(stale, ignore_errors=True)
        train(plan, cfg.seed, folder / "model", progress, device)
    common = dict(model=str(model), seed=cfg.seed, device=cfg.device, dtype=cfg.dtype)
    # The scored suite is audited on the very prompts the sweep scores (the matched diagnostic).
    sized = {
        s: ({"pad": plan.pad} if s == plan.suite and plan.pad is not None else {"length": plan.length})
        for s in plan.suites
    }
    # Every engine after the first audit reuses its calibrated b_auto: one calibration per study.
    b_auto = None
    for suite in (plan.suite, *(s for s in plan.suites if s != plan.suite)):
        out = folder / "audit" / suite
        if not _done(out):
            audit.run(
                audit.AuditConfig(
                    **common,
                    **sized[suite],
                    suite=suite,
                    prompts=plan.audit_prompts,
                    p=P,
                    b=B,
                    queries=f"every:{plan.every}",
                    b_auto=b_auto,
                ),
                out,
                progress=progress,
            )
        b_auto = read_audit_config(out)["b_auto"]
    suite = dict(common, **sized[plan.suite], suite=plan.suite, prompts=plan.prompts, b_auto=b_auto)
    if not _done(folder / "audit_matched"):
        audit.run(
            audit.AuditConfig(**suite, p=P, b=B, queries=MATCHED_QUERIES), folder / "audit_matched", progress=progress
        )
    if not _done(folder / "substitute"):
        substitute.run(substitute.SubstituteConfig(**suite, recipes=RECIPES), folder / "substitute", progress=progress)
    layers_heads = read_audit_config(folder / "audit" / plan.suite)
    n_heads = layers_heads["layers"] * layers_heads["heads"]
    if not _done(folder / "ablate"):
        ablate.run(
            ablate.AblateConfig(
                **suite,
                k=tuple(k for k in plan.k if k <= n_heads // 2) or (1,),
                random_draws=plan.random_draws,
                rank_prompts=plan.rank_prompts,
                rank_length=plan.length,
                queries=f"every:{plan.every}",
            ),
            folder / "ablate",
            progress=progress,
        )
    if not _done(folder / "heads"):
        head_types.run(
            head_types.HeadsConfig(
                **common, prompts=plan.heads_prompts, length=plan.length, queries=f"every:{plan.every}"
            ),
            folder / "heads",
            progress=progress,
        )


# ---- summarize: everything below reads only the folder's files ----


def summarize(folder: Path) -> Section:
    from attnlab.report import plot_concentration as plots

    cfg = load_config(folder)
    plan = plan_for(cfg)
    rows = {b: _rows(folder / "audit" / plan.suite, b) for b in B}
    answering = {b: _rows(folder / "audit_matched", b, answering=True) for b in B}
    audit_cfg = read_audit_config(folder / "audit" / plan.suite)
    prevalence = prevalence_table(folder, plan.suites)
    sub = pd.read_csv(folder / "substitute" / "substitute.csv")
    abl = pd.read_csv(folder / "ablate" / "ablate.csv")
    types = pd.read_csv(folder / "heads" / "types.csv")
    k = causal_k(abl["k"], audit_cfg["layers"] * audit_cfg["heads"])
    causal = ablate.subsets(pd.read_csv(folder / "ablate" / "ranking.csv"), k, 0)[0][2]
    valid = audit.bound_validation(rows, P)
    heads, diag = audit.head_medians(rows, P), matched(answering, sub, causal)
    for stem, table in (
        ("prevalence", prevalence),
        ("head_medians", heads),
        ("bound_validation", valid),
        ("substitution", sub),
        ("matched", diag),
        ("ablation", abl),
        ("head_types", types),
    ):
        io.write_table(folder / stem, table)
    plots.plot_phase(heads, P, folder / "phase")
    plots.plot_p_star({b: r["p_star"].to_numpy(dtype=float) for b, r in rows.items()}, P, folder / "p_star")
    plots.plot_matched(diag, k, folder / "matched")
    plots.plot_substitution(sub, folder / "substitution")

    base = float(sub.set_index("recipe").loc[substitute.BASELINE, "accuracy %"])
    halves = softmax_halves(folder)  # both softmax-against-itself nulls read the same two halves
    warning = substitute.baseline_warning(base, plan.suite)
    warnings = () if warning is None else (warning,)
    notes = _notes(cfg, plan, folder, audit_cfg, sorted(set(abl["k"])))
    return section(
        "concentration",
        folder,
        question="How often do a softmax model's attention rows sit in the regime where ReLU^p attention cannot "
        "concentrate (S_p >= 1), does the bound A (1 - rho)^p predict it, and does putting polynomial maps "
        "in place of softmax break the model where rows are unsafe?",
        findings=(
            *(
                [prevalence_finding(prevalence_shares(folder, plan.suites), prevalence_null(folder, plan))]
                if cfg.model is not None
                else []
            ),
            finding(diag, plan.prompts),
            sufficiency_finding(diag, plan.prompts, halves),
            unnormalized_finding(sub, plan.prompts, halves),
            bound_check(valid),
        ),
        tables=(
            Table(
                "prevalence",
                "Audit (Polynomial Concentration Table 1): per suite, b and p, the unsafe % of active rows with "
                "its 95% percentile-bootstrap interval over prompts (the placement finding reads a Student-t "
                "interval over prompts instead), the rows' Wilson interval and the medians of rho, A_act and S_p.",
            ),
            Table(
                "bound_validation",
                "Lower-bound validation: rows predicted safe (p >= p*) vs measured safe "
                "(S_p < 1), named as Polynomial Concentration Table 8 names "
                "them: FN would violate the bound, FP are its conservatism.",
            ),
            Table(
                "substitution",
                "Substitution sweep (Polynomial Concentration Table 3): exact-match accuracy % "
                "of each recipe "
                "on every head, Wilson 95% interval, change from softmax in pp.",
            ),
            Table(
                "matched",
                f"Matched diagnostic (Polynomial Concentration Table 5): per ReLU cell, the "
                f"measured-safe % (S_p < 1) of the rows that answer (each scored prompt's last "
                f"position, one row per head; 'rows' counts the active ones) over all heads and over "
                f"the fixed causal set, the top-{k} heads the ablation substituted; beside the "
                f"cell's accuracy.",
            ),
            Table(
                "ablation",
                "Group head ablation (relu_p2_bauto on K heads): change in accuracy for top-, "
                "bottom- and random-K; decisive when top-K is worse than every random draw.",
            ),
            Table(
                "head_types",
                "Head types (Polynomial Concentration App. H): heads passing the sink, induction "
                "or local test, a head counted under every test it passes (diffuse: none); "
                "per-head features, labels and App. H's first-match type in heads/heads.csv.",
            ),
            Table("head_medians", "Per b and head: median rho and A_act over active rows, measured-safe % per p."),
        ),
        figures=(
            Figure(
                "phase",
                "Phase plot: each point is one head's median (rho, A_act) over active rows, one "
                "panel per b; the curves are the boundaries A (1 - rho)^p = 1 (legend below). A "
                "row above the p curve can have S_p >= 1 (unsafe at p); a row below it is "
                "guaranteed safe, so a head whose median sits above the curve has many rows at risk.",
            ),
            Figure(
                "p_star",
                "Histogram of p* = log A / log(1/(1 - rho)) over active rows (log2 axis), per b; "
                "rows left of a dashed p line are predicted safe at that p. Rows at p* = 0 and "
                "p* = inf, off a log axis, are counted in the panel title.",
            ),
            Figure(
                "matched",
                f"Matched diagnostic: per ReLU cell, accuracy % under substitution (Wilson "
                f"interval) against the measured-safe % of the answering rows over all heads "
                f"(circle) and over the ablation's top-{k} heads (cross, joined by a line); one "
                "colour per p, two cells (b = 0, auto) each. The dashed line is softmax. The "
                "claim predicts points near 0% safe at the bottom.",
            ),
            Figure("substitution", "Accuracy % of every recipe with Wilson 95% intervals; the dashed line is softmax."),
        ),
        notes=tuple(notes),
        warnings=warnings,
    )


def model_row(folder: Path) -> dict[str, Any]:
    """One model's line of the cross-model table (Polynomial Concentration Table 1's layout: one row per model),
    read from
    a summarized study folder."""
    cfg = load_config(folder)
    plan = plan_for(cfg)
    audit_cfg = read_audit_config(folder / "audit" / plan.suite)
    prevalence = pd.read_csv(folder / "prevalence.csv")
    cells = prevalence[(prevalence["p"] == 2) & (prevalence["b"].astype(str) == "0")].set_index("suite")
    sub = pd.read_csv(folder / "substitution.csv").set_index("recipe")
    recipes = sub.drop(index=substitute.BASELINE)
    best = recipes["accuracy %"].idxmax()
    findings = read_section(folder / "section.json").findings
    verdicts = {f.claim.split(":")[0]: f.verdict for f in findings}
    return {
        "model": cfg.model or "trained here",
        "type": audit_cfg["model_type"],
        "layers x heads": f"{audit_cfg['layers']} x {audit_cfg['heads']}",
        "b_auto": audit_cfg["b_auto"],
        **{f"{suite} unsafe % (p2, b0)": float(cells.loc[suite, "unsafe %"]) for suite in plan.suites},
        f"softmax % ({plan.suite})": float(sub.loc[substitute.BASELINE, "accuracy %"]),
        "best recipe": best,
        "best recipe %": float(recipes.loc[best, "accuracy %"]),
        **{f"verdict: {claim}": verdict for claim, verdict in verdicts.items()},
    }


def compare(folders: list[Path], into: Path) -> Section | None:
    """The cross-model table over the folders made with ``--model`` (one row per model), or None when
    fewer than two are."""
    given = [f for f in folders if load_config(f).model is not None]
    if len(given) < 2:
        return None
    table = pd.DataFrame([model_row(f) for f in given])
    io.write_table(into / "models", table)
    command = shlex.join(["attnlab", "report", *map(str, given)])
    return Section(
        study="concentration",
        title="Across models: polynomial-unsafe prevalence and substitution",
        source=STUDY.source,
        command=command,
        question="Do the pretrained models agree: how unsafe are their rows on each suite, and does any recipe "
        "replace softmax?",
        tables=(
            Table(
                "models",
                "One row per model (Polynomial Concentration Table 1's layout): unsafe % of active "
                "rows at p = 2, "
                "b = 0 per suite, softmax's and the best recipe's accuracy, and each finding's "
                "verdict; every cell is read from that model's study folder.",
            ),
        ),
        notes=tuple(f"{row['model']}: {folder}" for row, folder in zip(table.to_dict("records"), given)),
    )


STUDY = register(
    Study(
        name="concentration",
        title="When does polynomial attention concentrate? Audit, substitution and ablation",
        source="Polynomial Concentration",
        compute=compute,
        summarize=summarize,
        compare=compare,
        takes_model=True,
        findings=NAMES,
    )
)
