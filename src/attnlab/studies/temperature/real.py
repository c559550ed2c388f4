"""The ``temperature`` study's pretrained-checkpoint part (e), with ``--model`` (Hayase & Karakida 2026 §4.5.1,
§4.5.2, Table 2, App. A.2, G.1): ``attnlab temperature`` reads the model's own score rows at n = n_eval x {1/4, 1/2,
3/4, 1} under dynamic-NTK RoPE at an n_eval past its training window (``REAL_PLANS``), on windows of the bundled
public-domain novel; xi_hat_Lambda with its 95% interval over documents, against i.i.d. rows; not checked when the
rows stay inside the window (no RoPE to rescale, or a window longer than the budget reads).

``compute_real`` runs the command into the study's ``real/`` folder; ``real_part`` reads that folder back into the
part's finding, tables, figure and notes, from ``real/config.json`` and its row table alone.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd

from attnlab import io
from attnlab.analyses import temperature
from attnlab.analyses.run import context_length, load
from attnlab.analyses.temperature import TRIPLE, real_fit, side_of_one
from attnlab.devices import model_device
from attnlab.diagnostics.stats import UNREADABLE, tie_mask
from attnlab.report.readback import read_record
from attnlab.report.sections import Figure, Parts, Table
from attnlab.studies.runner import StudyConfig
from attnlab.studies.temperature.findings import real_finding
from attnlab.studies.temperature.plan import REAL_PLANS, real_reading

REAL = "real"
REAL_ROWS = "rows_contact.parquet"  # what ``temperature.run`` names its row table


# ----------------------------------------------------------------------------------------------- compute


def compute_real(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    """(e): ``attnlab temperature`` on ``cfg.model`` into folder/real (``real_reading``), unless its config.json
    (written last) says it is done; the seconds it took go in real/elapsed.json."""
    import time

    from attnlab.hooks import UnsupportedModel, rope_tables

    out = folder / REAL
    if (out / "config.json").is_file():
        return
    plan = REAL_PLANS[cfg.budget]
    # float32 unless --dtype says otherwise: the contact triples are differences of nearby logits
    dtype = "float32" if cfg.dtype == "auto" else cfg.dtype
    model, _ = load(cfg.model, cfg.device, dtype)
    device = str(model_device(model))
    try:
        rope_tables(model)
        rope_ok = True
    except UnsupportedModel:
        rope_ok = False
    rope, grid = real_reading(plan, context_length(model), rope_ok)
    del model
    # float32 on a GPU too: bfloat16 scores tie competitors that float32 tells apart, and ties are dropped
    run = temperature.TemperatureConfig(
        model=cfg.model,
        n=tuple(grid),
        suite=temperature.NOVEL,
        rope=rope,
        docs=plan.docs,
        n_boot=plan.n_boot,
        seed=cfg.seed,
        device=device,
        dtype=dtype,
    )
    start = time.perf_counter()
    temperature.run(run, out, progress=progress)
    io.write_json(out / "elapsed.json", {"seconds": time.perf_counter() - start, "device": device})


# --------------------------------------------------------------------------------------------- summarize


def real_rows(folder: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The readable rows of folder/real, the ones ``temperature.run`` fits, and its config.json."""
    real = folder / REAL
    config = read_record(real / "config.json", temperature.TemperatureConfig)
    rows = pd.read_parquet(
        real / REAL_ROWS, columns=["layer", "head", "prompt", "query", "n_keys", "status", *TRIPLE.values()]
    )
    return rows[~rows["status"].isin(UNREADABLE)].reset_index(drop=True), config


def reached(config: dict) -> dict[str, Any]:
    """Where the real part's rows lie against the checkpoint's training window: past (dynamic NTK at an n_eval
    beyond it, the regime of Table 2) or not, in words. Folders written before the command took --rope read
    inside the window."""
    n_eval, n_train = max(config["n"]), config.get("n_train")
    window = f"n_train = {n_train}" if n_train else "no window in its config"
    if config.get("rope", "plain") == "dynamic" and n_train and n_eval > n_train:
        return {
            "past": True,
            "window": window,
            "words": f"The rows are read under dynamic-NTK RoPE at n_eval = {n_eval}, {n_eval / n_train:.3g} x "
            f"the training window {n_train}: past it, the regime of Table 2, at a shorter reach than "
            "Table 2's 2 and 4 x.",
        }
    return {
        "past": False,
        "window": window,
        "words": f"The rows are read with the model's own positions up to n = {n_eval}, inside its training "
        f"window ({window}); no row past it is read.",
    }


def source_words(config: dict) -> str:
    """Where the real part's documents come from, in words."""
    if config.get("suite") == temperature.NOVEL:
        return (
            "consecutive windows of the bundled novel, Austen's Pride and Prejudice, chapters I-L: "
            "public-domain long-form prose, as PG-19's books are"
        )
    if config.get("text"):
        return f"windows of {config['text']}"
    return "generated text (tasks.generic_text sentences), not PG-19 or Proof-Pile-2"


@dataclasses.dataclass(frozen=True)
class Elapsed:
    """real/elapsed.json: how long the real part took, and where."""

    seconds: float
    device: str


def elapsed_words(folder: Path) -> str:
    """', taking M minutes' from real/elapsed.json, or nothing when the folder has no record of it."""
    path = folder / REAL / "elapsed.json"
    if not path.is_file():
        return ""
    took = read_record(path, Elapsed)
    return f", {took['seconds'] / 60:.1f} minutes in all"


def missing_real_note(cfg: StudyConfig, folder: Path) -> str:
    """Why the folder has no real-model section, and the command that adds one."""
    if cfg.model is None:
        return (
            "The real-model section (Hayase & Karakida §4.5.1 on a pretrained checkpoint: xi_hat_Lambda from the "
            "model's own score rows past its training window) was not run, for want of --model. Run `attnlab fetch "
            "smollm2`, then `attnlab study temperature --model smollm2 --out NEW_FOLDER` (a new folder: this "
            "one belongs to its own command, and the trained part runs again there)."
        )
    return (
        f"The real-model section on {cfg.model} has not finished (no {REAL}/config.json); rerun "
        f"`{cfg.command(folder)}` to complete it."
    )


def real_part(cfg: StudyConfig, folder: Path) -> Parts:
    """(e): the tables, figure, finding and notes of folder/real, or the note saying it is missing."""
    from attnlab.report import plot_temperature as plots

    if not (folder / REAL / "config.json").is_file():
        return Parts(notes=(missing_real_note(cfg, folder),))
    rows, config = real_rows(folder)
    fit = real_fit(rows, config["n_boot"], config["seed"])
    table, cor49 = fit.per_n, fit.cor49
    io.write_table(folder / "real_per_n", table)
    io.write_table(folder / "real_exponents", fit.exponents)
    xi, h, lo, hi = fit.xi_hat, fit.half_iqr, fit.lo, fit.hi
    model = f"{config['model']} ({config['model_type']}, {config['layers']} layers x {config['heads']} heads)"
    plots.plot_real_lambda(table, xi, h, str(config["model"]), folder / "real_lambda")
    means = ", ".join(f"{m:.3f} at n = {n}" for n, m in zip(table["n"], table["mean log Lambda"]))
    evidence = (
        f"xi_hat_Lambda = {xi:.3f} [{lo:.3f}, {hi:.3f}] (95% Student-t over {config['documents']} documents, "
        f"jackknifed) on {model}: {side_of_one(lo, hi)}; bucket means of log Lambda_n: "
        f"{means}; Cor. 4.9's xi_alpha - xi_Delta + 1 = {cor49['predicted']:.3f}."
    )
    grid = config["n"]
    reach = reached(config)
    finding, _ = real_finding(
        rows,
        fit,
        seed=config["seed"],
        n_boot=config["n_boot"],
        evidence=f"{evidence} {reach['words']}",
        precondition=None
        if reach["past"]
        else (
            f"the rows are read at n = {min(grid)} .. {max(grid)}, inside {config['model']}'s training window "
            f"({reach['window']}), where Table 2 reads Qwen at 2-4x past its window under dynamic NTK: the regime "
            "of the claim is not reached"
        ),
    )
    tie_pct = 100 * float(tie_mask(rows["lambda_n"]).mean())
    notes = [
        f"Real-model section: `attnlab temperature` on {model}, {config['documents']} documents of "
        f"{max(grid)} tokens ({source_words(config)}), one {config['dtype']} forward each on "
        f"{config['device']}{elapsed_words(folder)}; per layer, head and n = {grid} the query at n - 1; "
        f"{tie_pct:.1f}% exact ties excluded. {reach['words']} Table 2's Qwen cells are read at n_eval = 16384 "
        "and 32768, 2 and 4 x Qwen-7B-Chat's n_train = 8192, with rows at n_eval x {1/4, 1/2, 3/4, 1} and "
        "one fit per n_eval (App. G.1), pooled there over seven multiplier exponents xi_0 of the upstream "
        "pass; these rows come from the unmodified forward alone (xi_0 = 0)."
    ]
    if fit.windowed:
        notes.append(fit.windowed)
        finding = dataclasses.replace(
            finding,
            evidence=finding.evidence + " Sliding-window rows change the layers "
            "behind the buckets above the window (see the notes).",
        )
    return Parts(
        (finding,),
        (
            Table(
                "real_per_n",
                f"Real model ({config['model']}): per n, rows, exact ties and the bucket means "
                "of log Lambda_n, log alpha_n and log Delta_n over the non-tied rows of all layers "
                "and heads.",
            ),
            Table(
                "real_exponents",
                f"Real model ({config['model']}): xi_hat_Lambda, xi_hat_alpha, xi_hat_Delta "
                "(bucket-mean OLS slopes on log log n) with the half-IQR of B bootstrap resamples over documents "
                "(§4.5.1) and the 95% Student-t interval over documents, jackknifed.",
            ),
        ),
        (
            Figure(
                "real_lambda",
                f"Real model ({config['model']}): bucket means of log Lambda_n against log log n "
                "(top axis: n), the OLS line whose slope is xi_hat_Lambda, and the slope-1 line "
                "through the same centroid (dotted), the finding's threshold: a fitted line "
                "steeper than it lands on the side of Table 2's pretrained cells.",
            ),
        ),
        tuple(notes),
    )
