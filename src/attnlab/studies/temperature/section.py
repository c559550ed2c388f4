"""The steps of the ``temperature`` study's ``summarize`` and its report section's text (Hayase & Karakida 2026
§4.5, App. B.1, F, G.1): each step reads what ``compute`` wrote, one reading of the decoder at a time, (a) the
beta_n fit, (b) the contact exponents, (c) the N_n(t) figure, (d) the sweep, then the per-seed estimates of each
arm and the findings on them, and writes the tables and figures that ``TABLES`` and ``FIGURES`` describe.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab import io
from attnlab.analyses.temperature import per_n
from attnlab.diagnostics.stats import check_cor49, tie_mask
from attnlab.findings.finding import Finding
from attnlab.report.sections import Figure, Table
from attnlab.studies.runner import StudyConfig
from attnlab.studies.temperature.findings import (
    ARMS,
    DIFFERENCE,
    EXT,
    agreement_finding,
    contact_exponents,
    cor49_finding,
    iid_lambda,
    intervals,
    per_seed,
    ppl_finding,
    side_finding,
    untestable,
)
from attnlab.studies.temperature.plan import BETA, EXT_ROWS, GAPS, HEAD_SCALES, NAME, ROWS, Plan, run_name
from attnlab.train.config import read_run_tables
from attnlab.train.metrics import outcome

QUESTION = (
    "Does the growth exponent xi_Lambda of the upper-tail accumulation scale, read off a trained "
    "model's attention scores alone, land on the same side of 1 as the exponent of the "
    "inverse temperature the same model learned, and as the multiplier exponent that minimizes its "
    "perplexity past the training window, where an untrained model and i.i.d. scores do not?"
)

TABLES = (
    Table(
        "comparison",
        "The estimates the findings compare, per arm (trained decoder; the same decoder "
        "untrained, the null; i.i.d. N(0, 1) rows of the same n): mean over training "
        "seeds, sd, 95% Student-t interval over training seeds, and the side of 1 where "
        "the interval lies. xi_hat_beta is the mean over heads of the exponent of the "
        "per-head multiplier s_h beta_n + b_h.",
    ),
    Table("per_seed", "The same estimates per training seed and arm."),
    Table(
        "exponents",
        "Growth exponents pooled over training seeds: xi_hat_Lambda, xi_hat_alpha, "
        "xi_hat_Delta (bucket-mean OLS slopes on log log n, half-IQR and 95% interval of "
        "the bootstrap over (training seed, layer, head)), Cor. 4.9's xi_alpha - xi_Delta "
        "+ 1, and the M2 grid argmin of the first seed's beta_n.",
    ),
    Table(
        "contact_per_n",
        "Per context length n (first training seed): rows, exact ties, and the "
        "bucket means of log Lambda_n, log alpha_n and log Delta_n over the non-tied "
        "rows.",
    ),
    Table(
        "beta_fit",
        "M2 fit of the first training seed's beta_n to a_1 (log n)^xi on n >= n_min: a_1 "
        "and the per-point MSE at each xi of the grid.",
    ),
    Table(
        "sweep",
        "Back-half sliding-window perplexity at each window length n_eval (rows) and "
        "multiplier exponent xi (columns), pooled over training seeds; n_eval equal to the "
        "training window is the reference, where m(n; xi) = 1.",
    ),
    Table("training", "Each training run and its learned beta_n (init 1) and per-head s_h, b_h."),
)

FIGURES = (
    Figure(
        "beta_fit",
        "Left: the first training seed's learned beta_n over positions n (dots) with the "
        "bias-free fits a_1 (log n)^xi at the MSE-optimal xi and at xi = 1; the grey band "
        "is n < n_min, left out of the fit. Right: the fit's MSE over xi (log scale), "
        "star at the argmin xi*_beta, dotted line at the logarithmic xi = 1.",
    ),
    Figure(
        "contact_exponents",
        "Bucket means of log Lambda_n, log alpha_n and log Delta_n against "
        "log log n (first training seed), with the pooled OLS lines whose "
        "slopes are the xi_hat of the exponents table.",
    ),
    Figure(
        "counting",
        "N_n(t) of the representative row at the largest n (nearest the bucket mean "
        "in (log alpha_n, log Delta_n)), log y: the step curve counts keys within gap t "
        "of the row maximum, the dashed curve is the envelope e^{Lambda_n t}, touching "
        "it at the contact point (red star, (Delta_n, N_n(Delta_n))); the right axis "
        "reads alpha = log N / log n.",
    ),
    Figure(
        "sweep",
        "Back-half sliding-window perplexity against the multiplier exponent xi, one "
        "curve per window length n_eval (the training window as reference, flat because "
        "m = 1 there); stars mark the minimum of each curve past the training window, the "
        "dotted line xi = 1.",
    ),
)


# ------------------------------------------------------------------------------------- descriptive tables


def read_vocab(path: Path) -> int | None:
    """The vocabulary size in a trained run's config.json (``train.config.read_run_tables``, model.vocab present)."""
    return read_run_tables(path, required=("model.vocab",))["model"]["vocab"]


def beta_fit(beta: pd.DataFrame, n_min: int, xi_max: float, xi_step: float) -> pd.DataFrame:
    """Hayase & Karakida 2026 App. B.1, "M2": at each xi of the grid, a_1 = argmin sum_n (beta_n - a_1 (log n)^xi)^2
    over n >= n_min (bias-free, a_2 = 0) and the per-point MSE of that fit."""
    used = beta[beta["n"] >= max(n_min, 2)]
    log_n, y = np.log(used["n"].to_numpy(float)), used["beta_n"].to_numpy(float)
    lines = []
    for xi in np.round(np.arange(0.0, xi_max + xi_step / 2, xi_step), 10):
        x = log_n**xi
        a1 = float(x @ y / (x @ x))
        lines.append({"xi": float(xi), "a1": a1, "mse": float(np.mean((y - a1 * x) ** 2))})
    return pd.DataFrame(lines)


def representative(rows: pd.DataFrame, table: pd.DataFrame) -> pd.Series:
    """Hayase & Karakida 2026 App. G.1: at the largest n, the non-tied row nearest the bucket mean in
    (log alpha_n, log Delta_n)."""
    n = int(table["n"].max())
    at = table.set_index("n").loc[n]
    cand = rows[(rows["n_keys"] == n) & ~tie_mask(rows["lambda_n"]) & (rows["alpha_n"] > 0) & (rows["contact_gap"] > 0)]
    dist = (np.log(cand["alpha_n"]) - at["mean log alpha"]) ** 2 + (
        np.log(cand["contact_gap"]) - at["mean log Delta"]
    ) ** 2
    return cand.loc[dist.idxmin()]


def sweep_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """Back-half sliding-window perplexity per (n_eval, xi): exp of the mean per-window log-perplexity
    (Hayase & Karakida App. A.2), and the argmin xi per n_eval."""
    per_window = sweep.assign(nll=sweep["loss_sum"] / sweep["tokens"])
    ppl = per_window.groupby(["n_eval", "xi"])["nll"].mean().apply(math.exp).unstack("xi")
    out = ppl.rename(columns=lambda xi: f"xi={xi:g}").reset_index()
    out["best xi"] = ppl.idxmin(axis=1).to_numpy()
    out["ppl at best / at xi=0"] = (ppl.min(axis=1) / ppl[0.0]).to_numpy() if 0.0 in ppl.columns else np.nan
    return out


def exponents_table(fits: dict[str, dict], cor49: dict, xi_beta: float) -> pd.DataFrame:
    """The growth exponents read off the pooled scores of every training seed (half-IQR and 95% interval of the
    bootstrap over (training seed, layer, head); descriptive), Cor. 4.9's xi_alpha - xi_Delta + 1, and the M2 grid
    argmin of the first training seed's beta_n."""
    blank = {
        "half_iqr": np.nan,
        "lo": np.nan,
        "hi": np.nan,
        "buckets": np.nan,
        "rows used": np.nan,
        "ties excluded": np.nan,
    }
    return pd.DataFrame(
        [
            {
                "exponent": f"xi_hat_{k}",
                "read off": "attention scores",
                "value": f.xi_hat,
                "half_iqr": f.half_iqr,
                "lo": f.lo,
                "hi": f.hi,
                "buckets": f.n_buckets,
                "rows used": int(sum(f.bucket_count)),
                "ties excluded": f.n_excluded,
            }
            for k, f in fits.items()
        ]
        + [
            {**blank, "exponent": "xi_alpha - xi_Delta + 1", "read off": "Cor. 4.9", "value": cor49["predicted"]},
            {
                **blank,
                "exponent": "xi*_beta (M2 grid argmin, training seed 0)",
                "read off": "beta_n vector",
                "value": xi_beta,
            },
        ]
    )


def training_table(folder: Path, beta: pd.DataFrame, scales: pd.DataFrame, n_min: int) -> pd.DataFrame:
    """Per training seed: the training record and beta_n's movement from its initialization (1 everywhere,
    App. A.3)."""
    lines = []
    for k, mine in beta.groupby("train_seed"):
        summary = outcome(folder / "runs" / run_name(int(k)))
        fit_domain = mine[mine["n"] >= n_min]["beta_n"]
        heads = scales[scales["train_seed"] == k]
        lines.append(
            {
                "train_seed": int(k),
                "steps": summary["steps"],
                "train loss": summary["loss"],
                "val loss": summary["val_loss"],
                "val ppl": summary["val_ppl"],
                "beta_n min (n >= n_min)": float(fit_domain.min()),
                "beta_n max (n >= n_min)": float(fit_domain.max()),
                "max |beta_n - 1| (n >= n_min)": float((fit_domain - 1).abs().max()),
                "mean s_h": float(heads["s"].mean()),
                "mean b_h": float(heads["b"].mean()),
            }
        )
    return pd.DataFrame(lines)


def budget_notes(
    cfg: StudyConfig, plan: Plan, training: pd.DataFrame, rows: pd.DataFrame, ppl: pd.DataFrame
) -> tuple[str, ...]:
    """The budget against the paper's, the n-grid and its ties, and the sweep's best xi per length."""
    beyond = ppl[ppl["n_eval"] > plan.context]
    sweep_words = "; ".join(
        f"n_eval = {int(r['n_eval'])}: best xi = {r['best xi']:g} (ppl ratio to xi = 0: "
        f"{r['ppl at best / at xi=0']:.3f})"
        for _, r in beyond.iterrows()
    )
    tie_pct = 100 * float(tie_mask(rows["lambda_n"]).mean())
    # the grids as lists, so the notes read as they did when the plan was a dict of JSON values
    return (
        f"Budget {cfg.budget}: {len(training)} training seeds of a {plan.layers}-layer, {plan.heads}-head, "
        f"d_model {plan.d_model} decoder with RoPE (dynamic NTK past the window), each trained "
        f"{int(training['steps'].max())} steps of {plan.batch} x {plan.context} bytes of the Python standard "
        "library (bytes tokenizer); Hayase & Karakida train GPT-124M (12 x 12 x 768, GPT-2 BPE, 1024 tokens) 100k "
        "steps of 2048 sequences on SlimPajama/OpenWebText. The null controls are each seed's decoder at its "
        "initialization and i.i.d. N(0, 1) rows of the same n.",
        f"n-grid {list(plan.n_grid)} (the seed's {{64, ..., 1024}} scaled to the window), {plan.eval_seeds} "
        f"evaluation seeds x {plan.windows} validation windows x all layers and heads, the same windows for every "
        f"model; past the window n = {list(plan.ext_grid)} on {plan.eval_seeds} x {plan.ext_windows} windows; "
        f"{tie_pct:.1f}% of the rows are exact ties (log10 Lambda_n > 5) and are excluded from every aggregate.",
        f"Inference-time sweep: xi in {list(plan.sweep_xi)}, {plan.sweep_windows} non-overlapping windows of the "
        f"validation split per n_eval (consecutive files joined, not single long documents as PG-19); "
        f"beta_n past the window holds its last entry. Pooled over training seeds: {sweep_words}. The seed runs this "
        "sweep on Qwen-7B, not on the beta_n model; here it scores the multiplier on top of the trained beta_n.",
    )


# ------------------------------------------------------------------------------------------------- steps


def read_arm(folder: Path, prefix: str, plan: Plan) -> dict[str, pd.DataFrame]:
    """One arm's raw tables (prefix "" trained, ``UNTRAINED`` the null); a folder of one training seed, written
    before seeds were replicated, has no train_seed column and reads as seed 0."""

    def read(name):
        table = pd.read_parquet(folder / f"{prefix}{name}")
        return table if "train_seed" in table else table.assign(train_seed=0)

    return {
        "beta": read(BETA),
        "scales": read(HEAD_SCALES),
        "rows": read(ROWS),
        "ext": read(EXT_ROWS),
        "sweep": pd.concat([read(f"sweep_{n}.parquet") for n in plan.sweep_lengths], ignore_index=True),
    }


def beta_step(folder: Path, beta: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """(a): the M2 fit of the first training seed's beta_n, its table and figure."""
    from attnlab.report import plot_temperature as plots

    beta0 = beta[beta["train_seed"] == 0]
    fit = beta_fit(beta0, plan.n_min, plan.xi_max, plan.xi_step)
    io.write_table(folder / "beta_fit", fit)
    plots.plot_beta_fit(beta0, fit, plan.n_min, folder / "beta_fit")
    return fit


def contact_step(
    folder: Path, rows: pd.DataFrame, plan: Plan, seed: int, fit: pd.DataFrame
) -> tuple[pd.DataFrame, dict[str, dict], dict]:
    """(b): the first training seed's bucket means per n, and the contact exponents pooled over training seeds
    with Cor. 4.9; returns the per-n table, the fits and the check."""
    from attnlab.report import plot_temperature as plots

    table = per_n(rows[rows["train_seed"] == 0])
    io.write_table(folder / "contact_per_n", table)
    fits = contact_exponents(rows, plan.n_boot, seed)
    cor49 = check_cor49(fits["Lambda"], fits["alpha"], fits["Delta"])
    io.write_table(folder / "exponents", exponents_table(fits, cor49, float(fit.loc[fit["mse"].idxmin(), "xi"])))
    plots.plot_bucket_means(table, fits, folder / "contact_exponents")
    return table, fits, cor49


def counting_step(folder: Path, rows: pd.DataFrame, table: pd.DataFrame) -> None:
    """(c): N_n(t) of the representative row of the first training seed, from its stored sorted gaps."""
    from attnlab.report import plot_temperature as plots

    gaps = pd.read_parquet(folder / GAPS)
    gaps = gaps[gaps["train_seed"] == 0] if "train_seed" in gaps else gaps
    rep = representative(rows[rows["train_seed"] == 0], table)
    key = (
        (gaps["seed"] == rep["seed"])
        & (gaps["doc"] == rep["doc"])
        & (gaps["layer"] == rep["layer"])
        & (gaps["head"] == rep["head"])
    )
    rep_gaps = np.asarray(gaps.loc[key, "gaps"].iloc[0], dtype=float)
    plots.plot_counting(
        rep_gaps,
        float(rep["lambda_n"]),
        float(rep["contact_gap"]),
        int(rep["n_keys"]),
        f"layer {int(rep['layer'])}, head {int(rep['head'])}, eval seed {int(rep['seed'])}, window {int(rep['doc'])}",
        folder / "counting",
    )


def sweep_step(folder: Path, sweep: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """(d): the inference-time sweep's perplexity table and figure, pooled over training seeds."""
    from attnlab.report import plot_temperature as plots

    ppl = sweep_table(sweep)
    io.write_table(folder / "sweep", ppl)
    plots.plot_sweep(ppl, plan.context, folder / "sweep")
    return ppl


def training_step(folder: Path, trained: dict[str, pd.DataFrame], plan: Plan) -> pd.DataFrame:
    """Each training run's record and its learned beta_n, s_h, b_h (the table the findings' precondition reads)."""
    training = training_table(folder, trained["beta"], trained["scales"], plan.n_min)
    io.write_table(folder / "training", training)
    return training


def comparison_step(
    folder: Path, trained: dict[str, pd.DataFrame], untrained: dict[str, pd.DataFrame], plan: Plan, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-seed estimates of each arm (one table, an arm column) and their 95% intervals over training seeds:
    the tables the findings read."""
    seeds = {"trained": per_seed(trained, plan), "untrained": per_seed(untrained, plan)}
    # i.i.d. rows have no temperature of their own: they stand beside the trained seed's multipliers, with the
    # seed's count of rows at each n on the grid and past the window, so each rule compares a seed with its own noise
    iid = iid_lambda(trained["rows"], seed).merge(iid_lambda(trained["ext"], seed, EXT, 13), on="train_seed")
    iid = iid.merge(seeds["trained"][["train_seed", "xi_hat_beta"]], on="train_seed")
    seeds[ARMS[2]] = iid.assign(**{DIFFERENCE: iid["xi_hat_Lambda"] - iid["xi_hat_beta"]})
    per = pd.concat([t.assign(arm=a) for a, t in seeds.items()], ignore_index=True)
    io.write_table(folder / "per_seed", per)
    comparison = pd.concat([intervals(t, a) for a, t in seeds.items()], ignore_index=True)
    io.write_table(folder / "comparison", comparison)
    return comparison, per


def findings_step(
    folder: Path,
    comparison: pd.DataFrame,
    seeds: pd.DataFrame,
    training: pd.DataFrame,
    fits: dict[str, dict],
    cor49: dict,
    edge: list[str],
    budget: str,
) -> list[Finding]:
    """The trained decoder's findings, each not checked where the run cannot test it; the perplexity finding needs
    a decoder that learned, not multipliers that grew, and an optimum inside the sweep's grid (``edges``)."""
    vocab = read_vocab(folder / "runs" / NAME / "config.json")
    why = untestable(comparison, training, vocab)
    learned_only = why if why and not why.startswith("the per-head") else None
    return [
        side_finding(comparison, seeds, why, budget),
        agreement_finding(comparison, seeds, why, budget),
        ppl_finding(comparison, seeds, learned_only, edge, budget),
        cor49_finding(fits, cor49),
    ]
