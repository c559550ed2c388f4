"""The ``temperature`` study (Hayase & Karakida 2026): does the growth exponent xi_Lambda of the
upper-tail accumulation scale, read off a trained model's attention scores alone, land on the same side
of 1 as the exponent of the inverse temperature beta_n that the same model learned?

``attnlab study temperature``: critical scaling of the inverse temperature on the own decoder and, with
``--model``, on a pretrained checkpoint (Hayase & Karakida, §3, §4.2, §4.5, App. A.2, A.3, B.1, F,
G.1).

One decoder is trained on text with the learnable per-position vector beta_n of Hayase & Karakida eq. (A.1),
beta_{n,l,h} = s_{l,h} beta_n + b_{l,h} (``ModelConfig(scaler="beta_n")``), and read four ways, (a) to (d);
(e) reads a pretrained checkpoint beside it:

(a) App. B.1: the trained beta_n, fitted bias-free to a_1 (log n)^xi on n >= n_min, a_1 by least
    squares at each xi of a 0.05 grid; the MSE curve over xi and its argmin xi*_beta (the body's "M2"
    fit), beside App. F's six-point OLS slope xi_hat_beta of log beta_n on log log n.
(b) §4.5.1 and App. F: score rows of the same model, acquired as App. G.1 does (per validation window
    one forward of max(n) tokens; per layer and head the query at position n - 1, which sees n keys, at
    each n of the grid), each giving the contact triple (Lambda_n, alpha_n, Delta_n) of Defs. 4.3-4.5;
    xi_hat_X is the OLS slope of the bucket means of log X on log log n, with half the IQR of B bootstrap
    resamples over (evaluation seed, layer, head), and Cor. 4.9's xi_Lambda = xi_alpha - xi_Delta + 1.
    The rows are the unscaled scores z = <q, k> / sqrt(d), before beta_n and the softmax (App. A.5).
(c) Fig. 2 / App. G.1: N_n(t) with its envelope e^{Lambda_n t} and the contact point, for the row at the
    largest n nearest the bucket mean in (log alpha_n, log Delta_n).
(d) §3 and App. A.2: the inference-time multiplier m(n; xi) = max(1, log n / log n_train)^xi (the
    ``logn_xi*_n*`` row maps) on top of the trained beta_n, at window lengths n_eval beyond training,
    scored by back-half sliding-window perplexity.
(e) With ``--model``, §4.5.1 on a pretrained checkpoint: ``attnlab temperature`` reads the model's own
    score rows at n = 2^7 .. 2^11 on generated documents; xi_hat_Lambda with its half-IQR over (layer,
    head), set against the side of 1 where Table 2 puts every pretrained (Qwen-7B-Chat) cell.

The findings (Hayase & Karakida 2026 §4.5.2, Table 2), each on 95% intervals (``comparison.csv``):
xi_hat_Lambda lands on the same side of 1 as the six-point OLS xi_hat_beta of the learned beta_n, both
intervals clear of 1; the two agree within 0.5; xi_hat_Lambda lands on the same side of 1 as the
perplexity-optimal multiplier exponent xi*_PPL at every window length past training. A claim about beta_n is
not checked unless beta_n learned a length dependence (xi_hat_beta's interval excludes 0, its init's slope).

``compute`` writes the raw results (each piece's file only once the piece is done, so a rerun skips it):
``real/`` (the temperature command's folder, with ``--model`` only; first, so a bad model fails before
training), ``plan.json`` (the budget), ``runs/beta_n/`` (the trainer's run, resumable), ``beta_n.parquet``
and ``head_scales.parquet``, ``gaps.parquet`` (the sorted gaps of every row at the largest n) then
``contact_rows.parquet``, and ``sweep_<n_eval>.parquet`` per window length. ``summarize`` derives
everything else from those files, the real part from ``real/config.json`` and its row table.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import io
from ..commands import temperature
from ..commands.temperature import TRIPLE, per_n
from ..commands.xi_sweep import parabola_min
from ..diagnostics.stats import UNREADABLE, check_cor49, exponent, t_quantile, tie_mask
from ..report.sections import Figure, Finding, Section, Table
from ..train.trainer import Trainer, outcome
from .runner import Study, StudyConfig, load_config, register, section

NAME = "beta_n"
PLAN = "plan.json"
BETA = "beta_n.parquet"
HEAD_SCALES = "head_scales.parquet"
GAPS = "gaps.parquet"
ROWS = "contact_rows.parquet"
EXPONENT_UNIT = ["seed", "layer", "head"]  # App. F: the nanoGPT bootstrap unit (s, l, h)
REAL = "real"
REAL_ROWS = "rows_contact.parquet"  # what ``temperature.run`` names its row table

# smoke: a byte-level decoder on the standard library, minutes on two CPU cores; 1500 steps, since after 500 beta_n's
# growth and the sweep's optimum are still settling (xi_hat_beta 0.24 -> 0.18, xi*_PPL 1.0 -> 0.45 at 2x); three
# evaluation seeds as App. F, and 32 sweep windows, which narrow xi*_PPL's interval. full: Hayase & Karakida App. A.3,
# Table 3 (GPT-124M shape, AdamW 6e-4 -> 6e-5 cosine, warmup 1000, effective batch 2048 x 1024, bf16,
# 100k iterations), the n-grid of §4.5.1 with three evaluation seeds of 16 windows (App. F), and a
# sweep over the xi grid of App. G.1 at 1.5-4x the training window (the Qwen ratios of App. A.4).
# every: the evaluation and checkpoint cadence (App. A.3 keeps a checkpoint every 5000 iterations).
BUDGETS: dict[str, dict[str, Any]] = {
    "smoke": {"context": 256, "layers": 2, "heads": 4, "d_model": 64, "steps": 1500, "batch": 16, "accum": 1,
              "lr": 3e-3, "min_lr": 3e-4, "warmup": 20, "precision": "fp32", "max_tokens": 1_000_000,
              "every": 375, "n_grid": [16, 32, 64, 128, 192, 256], "n_min": 16, "eval_seeds": 3, "windows": 16,
              "n_boot": 200, "eps": 1e-6, "xi_max": 3.0, "xi_step": 0.05,
              "sweep_lengths": [256, 512, 1024], "sweep_xi": [0, 0.5, 1, 1.5, 2, 2.5, 3], "sweep_windows": 32,
              "sweep_batch": 8},
    "full": {"context": 1024, "layers": 12, "heads": 12, "d_model": 768, "steps": 100_000, "batch": 2048,
             "accum": 64, "lr": 6e-4, "min_lr": 6e-5, "warmup": 1000, "precision": "bf16", "max_tokens": None,
             "every": 5000,
             "n_grid": [64, 128, 256, 512, 768, 1024], "n_min": 64, "eval_seeds": 3, "windows": 16,
             "n_boot": 200, "eps": 1e-6, "xi_max": 3.0, "xi_step": 0.05,
             "sweep_lengths": [1024, 1536, 2048, 3072, 4096], "sweep_xi": [0, 0.5, 1, 1.5, 2, 2.5, 3],
             "sweep_windows": 20, "sweep_batch": 4},
}


# The pretrained-checkpoint part (e): the n-grid 2^7 .. 2^11 and B = 200 (§4.5.1). smoke: four documents
# (the temperature command's default): SmolLM2-135M (30 x 9 heads) reads a 2048-token document in about 26 s
# on a quiet CPU core, 40-50 s on two busy ones; full: sixteen, more than the 4 + 5 per Qwen cell of App. G.1.
REAL_PLANS: dict[str, dict[str, Any]] = {
    "smoke": {"n": [128, 256, 512, 1024, 2048], "docs": 4, "n_boot": 200},
    "full": {"n": [128, 256, 512, 1024, 2048], "docs": 16, "n_boot": 200},
}


def run_config(plan: dict[str, Any], seed: int):
    """The training run: RoPE with the dynamic-NTK base of App. A.2 (inert up to the training window,
    so training is plain RoPE, and the sweep past it holds the base fixed per window as the seed does);
    learned absolute positions, the seed's other choice, have no row past the window to extrapolate to."""
    from ..train.config import RunConfig

    return RunConfig.from_dict({
        "model": {"context": plan["context"], "layers": plan["layers"], "heads": plan["heads"],
                  "d_model": plan["d_model"], "positions": "rope", "rope_dynamic": True, "scaler": NAME},
        "data": {"max_tokens": plan["max_tokens"]},
        "train": {"steps": plan["steps"], "batch": plan["batch"], "accum": plan["accum"], "lr": plan["lr"],
                  "min_lr": plan["min_lr"], "warmup": plan["warmup"], "weight_decay": 0.1, "betas": [0.9, 0.95],
                  "clip": 1.0, "precision": plan["precision"], "seed": seed, "eval_every": plan["every"],
                  "eval_batches": 4, "probes": False, "checkpoint_every": plan["every"], "keep": 1,
                  "tensorboard": False},
    })


# ----------------------------------------------------------------------------------------------- compute


class _ContactRows:
    """Observer of the decoder's score blocks: per layer and grid point n, the row of the query at
    position n - 1 over its n keys (all of them allowed), in float64 (Hayase & Karakida App. G.1)."""

    def __init__(self, n_grid: list[int]) -> None:
        self.n_grid = n_grid
        self.rows: list[tuple[int, int, Any]] = []

    def __call__(self, block) -> None:
        for n in self.n_grid:
            local = n - 1 - block.first_position
            if 0 <= local < block.scores.shape[2]:
                self.rows.append((block.layer, n, block.scores[:, :, local, :n].double().cpu()))


def contact_rows(model, tokens: np.ndarray, plan: dict[str, Any], seed: int, device) -> tuple[pd.DataFrame,
                                                                                            pd.DataFrame]:
    """The per-row contact triples at every (evaluation seed, window, layer, head, n), and the sorted gaps
    z* - z of the rows at the largest n (for the N_n(t) figure). Evaluation seed s draws ``windows``
    windows of max(n) validation tokens (App. F: independent validation batches per seed)."""
    import torch

    from ..diagnostics.gaps import gap_stats

    need = max(plan["n_grid"])
    records, gap_records = [], []
    model.eval()
    for s in range(plan["eval_seeds"]):
        starts = np.random.default_rng([seed, 1000 + s]).integers(0, len(tokens) - need, size=plan["windows"])
        ids = torch.from_numpy(np.stack([tokens[a:a + need] for a in starts]).astype(np.int64)).to(device)
        observer = _ContactRows(plan["n_grid"])
        with model.observed(observer), torch.no_grad():
            model(ids)
        for layer, n, z in observer.rows:
            docs, heads = z.shape[0], z.shape[1]
            stats = gap_stats(z.reshape(-1, n), torch.full((docs * heads,), n), eps=plan["eps"])
            doc, head = np.divmod(np.arange(docs * heads), heads)
            records.append(pd.DataFrame({
                "seed": s, "doc": doc, "layer": layer, "head": head, "n_keys": n, "query": n - 1,
                **{k: v.numpy() for k, v in stats.items()}}))
            if n == need:
                gaps = (z.amax(-1, keepdim=True) - z).reshape(-1, n).sort(-1).values.numpy()
                gap_records.append(pd.DataFrame({"seed": s, "doc": doc, "layer": layer, "head": head,
                                                 "gaps": list(gaps)}))
    return pd.concat(records, ignore_index=True), pd.concat(gap_records, ignore_index=True)


def back_half_losses(model, tokens: np.ndarray, n_eval: int, windows: int, batch: int, device) -> pd.DataFrame:
    """Per window: the summed cross-entropy of the back half (positions n_eval/2 .. n_eval - 1, each
    conditioned on >= n_eval/2 tokens) and its token count (Hayase & Karakida App. A.2). The windows are
    non-overlapping, spread evenly over the token array, the same for every xi."""
    import torch
    import torch.nn.functional as F

    available = (len(tokens) - 1) // n_eval
    if available < windows:
        raise ValueError(f"the validation split holds {available} windows of {n_eval} tokens, fewer than "
                         f"{windows}; lower sweep_windows or sweep_lengths")
    starts = (np.arange(windows) * available // windows) * n_eval
    half = n_eval // 2
    out = []
    model.eval()
    with torch.no_grad():
        for i in range(0, windows, batch):
            chunk = np.stack([tokens[a:a + n_eval + 1] for a in starts[i:i + batch]]).astype(np.int64)
            x = torch.from_numpy(chunk).to(device)
            logits = model(x[:, :-1])[:, half:]
            ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), x[:, 1:][:, half:].reshape(-1),
                                 reduction="none").view(len(chunk), -1)
            out += [{"window": i + j, "start": int(starts[i + j]), "loss_sum": float(v), "tokens": n_eval - half}
                    for j, v in enumerate(ce.sum(-1).tolist())]
    return pd.DataFrame(out)


def sweep_model(trained, xi: float):
    """The trained decoder with m(n; xi) on every head's logits, after its own beta_n (App. A.2)."""
    from ..model.decoder import Decoder

    cfg = trained.cfg
    model = Decoder(dataclasses.replace(cfg, rowmap=f"logn_xi{xi:g}_n{cfg.context}"))
    model.load_state_dict(trained.state_dict())
    return model.to(next(trained.parameters()).device)


def compute_real(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    """(e): ``attnlab temperature`` on ``cfg.model`` into folder/real, unless its config.json (written
    last) says it is done."""
    import torch

    out = folder / REAL
    if (out / "config.json").is_file():
        return
    plan = REAL_PLANS[cfg.budget]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # float32 on a GPU too: bfloat16 scores tie competitors that float32 tells apart, and ties are dropped
    run = temperature.TemperatureConfig(model=cfg.model, n=tuple(plan["n"]), docs=plan["docs"],
                                        n_boot=plan["n_boot"], seed=cfg.seed, device=device, dtype="float32")
    temperature.run(run, out, progress=progress)


def compute(cfg, folder: Path, progress: bool) -> None:
    """The real-model part if asked for, then train (or resume) the beta_n decoder and write each
    missing piece (see the module docstring)."""
    folder = Path(folder)
    if cfg.model is not None:
        compute_real(cfg, folder, progress)
    plan = BUDGETS[cfg.budget]
    if (folder / PLAN).is_file():
        plan = json.loads((folder / PLAN).read_text())
    else:
        io.write_json(folder / PLAN, plan)
    trainer = Trainer(run_config(plan, cfg.seed), folder / "runs" / NAME, resume=True, progress=progress)
    trainer.run()
    model, device = trainer.model.eval(), trainer.world.device
    val = trainer.stream.val_tokens

    if not (folder / BETA).is_file():
        layers = [block.attn.scaler for block in model.layers]
        io.write_parquet(folder / HEAD_SCALES, pd.DataFrame(
            [{"layer": i, "head": h, "s": float(sc.s[h].detach()), "b": float(sc.b[h].detach())}
             for i, sc in enumerate(layers) for h in range(len(sc.s))]))
        beta = model.beta_n.detach().cpu().double().numpy()
        io.write_parquet(folder / BETA, pd.DataFrame({"n": np.arange(1, len(beta) + 1), "beta_n": beta}))

    if not (folder / ROWS).is_file():
        rows, gaps = contact_rows(model, val, plan, cfg.seed, device)
        io.write_parquet(folder / GAPS, gaps)
        io.write_parquet(folder / ROWS, rows)

    for n_eval in plan["sweep_lengths"]:
        path = folder / f"sweep_{n_eval}.parquet"
        if path.is_file():
            continue
        parts = []
        for xi in plan["sweep_xi"]:
            part = back_half_losses(sweep_model(model, xi), val, n_eval, plan["sweep_windows"],
                                    plan["sweep_batch"], device)
            parts.append(part.assign(n_eval=n_eval, xi=float(xi)))
        io.write_parquet(path, pd.concat(parts, ignore_index=True))


# --------------------------------------------------------------------------------------------- summarize


def beta_fit(beta: pd.DataFrame, n_min: int, xi_max: float, xi_step: float) -> pd.DataFrame:
    """Hayase & Karakida 2026 App. B.1, "M2": at each xi of the grid, a_1 = argmin sum_n (beta_n - a_1 (log n)^xi)^2
    over n >= n_min (bias-free, a_2 = 0) and the per-point MSE of that fit."""
    used = beta[beta["n"] >= max(n_min, 2)]
    log_n, y = np.log(used["n"].to_numpy(float)), used["beta_n"].to_numpy(float)
    lines = []
    for xi in np.round(np.arange(0.0, xi_max + xi_step / 2, xi_step), 10):
        x = log_n ** xi
        a1 = float(x @ y / (x @ x))
        lines.append({"xi": float(xi), "a1": a1, "mse": float(np.mean((y - a1 * x) ** 2))})
    return pd.DataFrame(lines)


def beta_slope(beta: pd.DataFrame, n_grid: list[int]) -> dict[str, float]:
    """Hayase & Karakida 2026 App. F: xi_hat_beta, the OLS slope of log beta_n on log log n at the grid's n, its OLS
    standard error (the interval Table 2 quotes) and the 95% t interval on k - 2 degrees of freedom (lo, hi)
    around it: with six points a residual bootstrap covers the slope ~87% of the time, the t interval 95% (NaN
    where some beta_n <= 0, whose log is undefined)."""
    at = beta.set_index("n").loc[n_grid, "beta_n"].to_numpy(float)
    if np.any(at <= 0) or len(at) < 3:
        return {"xi_hat": math.nan, "se": math.nan, "lo": math.nan, "hi": math.nan}
    t, y = np.log(np.log(np.asarray(n_grid, float))), np.log(at)
    tc = t - t.mean()
    slope = float((y - y.mean()) @ tc / (tc @ tc))
    resid = y - y.mean() - slope * tc
    se = float(np.sqrt(resid @ resid / (len(t) - 2) / (tc @ tc)))
    half = t_quantile(0.975, len(t) - 2) * se
    return {"xi_hat": slope, "se": se, "lo": slope - half, "hi": slope + half}


def contact_exponents(rows: pd.DataFrame, n_boot: int, seed: int) -> dict[str, dict]:
    """xi_hat of Lambda, alpha and Delta (bucket-mean OLS slopes, exact ties excluded from all three)
    with bootstrap half-IQRs over (evaluation seed, layer, head) (Hayase & Karakida §4.5.1, App. F)."""
    tie = tie_mask(rows["lambda_n"])
    return {name: exponent(rows["n_keys"], rows[col], exclude=tie, unit=rows[EXPONENT_UNIT], n_boot=n_boot,
                           seed=seed) for name, col in TRIPLE.items()}


def per_seed_lambda(rows: pd.DataFrame, n_boot: int, seed: int) -> dict[int, dict]:
    """xi_hat_Lambda of each evaluation seed's rows alone, with its bootstrap over (layer, head): the pooled
    slope is the mean of these (Hayase & Karakida App. F), and their spread shows what one seed would say."""
    return {int(s): contact_exponents(part, n_boot, seed)["Lambda"] for s, part in rows.groupby("seed")}


def representative(rows: pd.DataFrame, table: pd.DataFrame) -> pd.Series:
    """Hayase & Karakida 2026 App. G.1: at the largest n, the non-tied row nearest the bucket mean in
    (log alpha_n, log Delta_n)."""
    n = int(table["n"].max())
    at = table.set_index("n").loc[n]
    cand = rows[(rows["n_keys"] == n) & ~tie_mask(rows["lambda_n"]) & (rows["alpha_n"] > 0)
                & (rows["contact_gap"] > 0)]
    dist = (np.log(cand["alpha_n"]) - at["mean log alpha"]) ** 2 + (np.log(cand["contact_gap"])
                                                                    - at["mean log Delta"]) ** 2
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


def _optimum(xi: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """xi*_PPL per row of ``loss`` (one row per window resample): the vertex of the parabola through the grid
    argmin and its neighbours, or the grid edge where the argmin lies there."""
    out = np.empty(len(loss))
    for i, row in enumerate(loss):
        vertex = parabola_min(xi, row)
        out[i] = xi[int(np.argmin(row))] if math.isnan(vertex) else vertex
    return out


def sweep_optimum(sweep: pd.DataFrame, context: int, n_boot: int, seed: int) -> pd.DataFrame:
    """Per n_eval past the training window: the perplexity-optimal multiplier exponent xi*_PPL (Hayase &
    Karakida §3, Fig. 1a-b, refined between grid points by ``parabola_min``) and its 95% percentile interval
    over B resamples of the windows, each window keeping its losses at every xi (the windows are the same
    for every xi, so a resample is paired across the grid)."""
    lines = []
    for n_eval, g in sweep[sweep["n_eval"] > context].groupby("n_eval"):
        nll = g.assign(nll=g["loss_sum"] / g["tokens"]).pivot(index="window", columns="xi", values="nll")
        xi, per_window = nll.columns.to_numpy(float), nll.to_numpy(float)
        draws = np.random.default_rng([seed, int(n_eval)]).integers(0, len(per_window),
                                                                     size=(n_boot, len(per_window)))
        boot = _optimum(xi, per_window[draws].mean(axis=1))
        lo, hi = np.percentile(boot, [2.5, 97.5])
        lines.append({"n_eval": int(n_eval), "windows": len(per_window), "xi*_PPL": float(
            _optimum(xi, per_window.mean(axis=0)[None])[0]), "lo": float(lo), "hi": float(hi)})
    return pd.DataFrame(lines, columns=["n_eval", "windows", "xi*_PPL", "lo", "hi"])


# --------------------------------------------------------------------------------------- the real model


def real_rows(folder: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The readable rows of folder/real, the ones ``temperature.run`` fits, and its config.json."""
    real = folder / REAL
    config = json.loads((real / "config.json").read_text())
    rows = pd.read_parquet(real / REAL_ROWS, columns=["layer", "head", "query", "n_keys", "status",
                                                      *TRIPLE.values()])
    return rows[~rows["status"].isin(UNREADABLE)].reset_index(drop=True), config


def real_exponents(rows: pd.DataFrame, n_boot: int, seed: int) -> tuple[pd.DataFrame, dict]:
    """The temperature command's xi_hat table (Hayase & Karakida §4.5.1, half-IQR over (layer, head)) with the band
    xi_hat +- 2 half-IQR that the finding reads, and its Cor. 4.9 check."""
    fits, cor49 = temperature.exponents(rows, n_boot, seed)
    return fits.assign(**{"xi_hat - 2 half_iqr": fits["xi_hat"] - 2 * fits["half_iqr"],
                          "xi_hat + 2 half_iqr": fits["xi_hat"] + 2 * fits["half_iqr"]}), cor49


def real_verdict(xi: float, half_iqr: float) -> tuple[str, str]:
    """Hayase & Karakida 2026 Table 2's side for pretrained models: reproduced when the band xi_hat_Lambda +- 2 half-IQR
    (the band the trained part quotes too; +-1.35 standard deviations were the bootstrap normal) lies above 1,
    not reproduced when it reaches 1 or lies below; not checked without a finite band."""
    lo, hi = xi - 2 * half_iqr, xi + 2 * half_iqr
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "not checked", "xi_hat_Lambda +- 2 half-IQR is not finite (fewer than two n with rows). "
    band = f"the band xi_hat_Lambda +- 2 half-IQR = [{lo:.3f}, {hi:.3f}]"
    if lo > 1:
        return "reproduced", f"{band} lies above 1. "
    return "not reproduced", f"{band} {'contains 1' if hi >= 1 else 'lies below 1'}. "


def windowed_note(rows: pd.DataFrame, n_boot: int, seed: int) -> str | None:
    """What sliding-window layers do to the buckets: their query at n - 1 sees only its last W keys, so its
    row lands in the bucket n_keys = W, not n. None when every row sees n keys."""
    short = rows["n_keys"] < rows["query"] + 1
    if not short.any():
        return None
    layers = sorted(int(x) for x in rows.loc[short, "layer"].unique())
    windows = sorted(int(x) for x in rows.loc[short, "n_keys"].unique())
    full = rows[~rows["layer"].isin(layers)]
    words = (f"{int(short.sum())} of {len(rows)} rows, in layers {layers}, see fewer keys than "
             f"their n (a sliding window: the query at n - 1 attends its last {windows} keys only). Rows are "
             "binned by the keys they see, so those rows join the bucket at the window, and every bucket above "
             "it holds the other layers' rows alone: xi_hat mixes a change of n with a change of layers. ")
    if full.empty:
        return words + "No layer sees n keys at every n, so no full-attention fit exists here."
    fit = temperature.exponents(full, n_boot, seed)[0].set_index("exponent").loc["xi_Lambda"]
    return words + (f"On layers {sorted(int(x) for x in full['layer'].unique())} alone, which see n keys at every "
                    f"n, xi_hat_Lambda = {fit['xi_hat']:.3f} (half-IQR {fit['half_iqr']:.3f}).")


def missing_real_note(cfg: StudyConfig, folder: Path) -> str:
    """Why the folder has no real-model section, and the command that adds one."""
    if cfg.model is None:
        return ("The real-model section (Hayase & Karakida §4.5.1 on a pretrained checkpoint: xi_hat_Lambda from the "
                "model's own score rows at n = 2^7 .. 2^11) was not run, for want of --model. Run `attnlab fetch "
                "smollm2`, then `attnlab study temperature --model smollm2 --out NEW_FOLDER` (a new folder: this "
                "one belongs to its own command, and the trained part runs again there).")
    return (f"The real-model section on {cfg.model} has not finished (no {REAL}/config.json); rerun "
            f"`{cfg.command(folder)}` to complete it.")


def real_part(cfg: StudyConfig, folder: Path) -> tuple[list[Finding], list[Table], list[Figure], list[str]]:
    """(e): the tables, figure, finding and notes of folder/real, or the note saying it is missing."""
    from ..report import plot_temperature as plots

    if not (folder / REAL / "config.json").is_file():
        return [], [], [], [missing_real_note(cfg, folder)]
    rows, config = real_rows(folder)
    table = per_n(rows)
    io.write_table(folder / "real_per_n", table)
    exps, cor49 = real_exponents(rows, config["n_boot"], config["seed"])
    io.write_table(folder / "real_exponents", exps)
    lam = exps.set_index("exponent").loc["xi_Lambda"]
    xi, h = float(lam["xi_hat"]), float(lam["half_iqr"])
    model = f"{config['model']} ({config['model_type']}, {config['layers']} layers x {config['heads']} heads)"
    plots.plot_real_lambda(table, xi, h, str(config["model"]), folder / "real_lambda")

    verdict, why = real_verdict(xi, h)
    means = ", ".join(f"{m:.3f} at n = {n}" for n, m in zip(table["n"], table["mean log Lambda"]))
    evidence = (why + f"xi_hat_Lambda = {xi:.3f} (half-IQR {h:.3f}, B = {config['n_boot']} over (layer, head)) on "
                f"{model}, {config['documents']} documents; bucket means of log Lambda_n: {means}; Cor. 4.9's "
                f"xi_alpha - xi_Delta + 1 = {cor49['predicted']:.3f}.")
    grid = config["n"]
    claim = (f"on a pretrained checkpoint, xi_hat_Lambda read off the model's own score rows at n = {min(grid)} .. "
             f"{max(grid)} lies above 1, its band xi_hat_Lambda +- 2 half-IQR clear of 1 (Hayase & Karakida §4.5.2, "
             f"Table "
             "2: all four pretrained Qwen-7B-Chat cells give 1.74 to 2.33, half-IQR 0.10 to 0.11)")
    tie_pct = 100 * float(tie_mask(rows["lambda_n"]).mean())
    notes = [f"Real-model section: `attnlab temperature` on {model}, {config['documents']} generated documents "
             f"(tasks.generic_text sentences, not PG-19 or Proof-Pile-2) of {max(grid)} tokens, one {config['dtype']} "
             f"forward each on {config['device']}; per layer, head and n = {grid} the query at n - 1; "
             f"{tie_pct:.1f}% exact ties excluded. These n lie inside the checkpoint's context window, while "
             "Table 2's Qwen cells are read at n up to 16384 and 32768, past Qwen-7B-Chat's n_train = 8192 under "
             "dynamic NTK: the comparison is of the side of 1, across that difference of regime."]
    windowed = windowed_note(rows, config["n_boot"], config["seed"])
    if windowed:
        notes.append(windowed)
        evidence += " Sliding-window rows change the layers behind the buckets above the window (see the notes)."
    return ([Finding(claim, verdict, evidence)],
            [Table("real_per_n", f"Real model ({config['model']}): per n, rows, exact ties and the bucket means "
                                 "of log Lambda_n, log alpha_n and log Delta_n over the non-tied rows of all layers "
                                 "and heads."),
             Table("real_exponents", f"Real model ({config['model']}): xi_hat_Lambda, xi_hat_alpha, xi_hat_Delta "
                                     "(bucket-mean OLS slopes on log log n) with the half-IQR of B bootstrap "
                                     "resamples over (layer, head), and the band +- 2 half-IQR.")],
            [Figure("real_lambda", f"Real model ({config['model']}): bucket means of log Lambda_n against log log n "
                                   "(top axis: n), the OLS line whose slope is xi_hat_Lambda, and the slope-1 line "
                                   "through the same centroid (dotted), the finding's threshold: a fitted line "
                                   "steeper than it lands on the side of Table 2's pretrained cells.")],
            notes)


def exponents_table(fits: dict[str, dict], per_seed: dict[int, dict], cor49: dict, xi_beta: float,
                    slope: dict[str, float], n_grid: list[int]) -> pd.DataFrame:
    """The growth exponents read off the scores (half-IQR and 95% interval of the bootstrap over units),
    xi_hat_Lambda per evaluation seed, Cor. 4.9's xi_alpha - xi_Delta + 1, and the two fits of beta_n (M2 grid
    argmin; six-point OLS slope with its SE in the half_iqr column and its t interval)."""
    blank = {"half_iqr": np.nan, "lo": np.nan, "hi": np.nan, "buckets": np.nan, "rows used": np.nan,
             "ties excluded": np.nan}
    return pd.DataFrame(
        [{"exponent": f"xi_hat_{k}", "read off": "attention scores", "value": f["xi_hat"],
          "half_iqr": f["half_iqr"], "lo": f["lo"], "hi": f["hi"], "buckets": f["n_buckets"],
          "rows used": int(sum(f["bucket_count"])), "ties excluded": f["n_excluded"]} for k, f in fits.items()]
        + [{"exponent": f"xi_hat_Lambda, eval seed {s}", "read off": "attention scores", "value": f["xi_hat"],
            "half_iqr": f["half_iqr"], "lo": f["lo"], "hi": f["hi"], "buckets": f["n_buckets"],
            "rows used": int(sum(f["bucket_count"])), "ties excluded": f["n_excluded"]} for s, f in per_seed.items()]
        + [{**blank, "exponent": "xi_alpha - xi_Delta + 1", "read off": "Cor. 4.9", "value": cor49["predicted"]},
           {**blank, "exponent": "xi*_beta (M2 grid argmin)", "read off": "beta_n vector", "value": xi_beta},
           {**blank, "exponent": "xi_hat_beta (OLS on the n-grid)", "read off": "beta_n vector",
            "value": slope["xi_hat"], "half_iqr": slope["se"], "lo": slope["lo"], "hi": slope["hi"],
            "buckets": len(n_grid)}])


def training_table(summary: dict[str, Any], beta: pd.DataFrame, scales: pd.DataFrame, n_min: int) -> pd.DataFrame:
    """The training record and beta_n's movement from its initialization (1 everywhere, App. A.3)."""
    fit_domain = beta[beta["n"] >= n_min]["beta_n"]
    return pd.DataFrame([{"steps": summary["steps"], "train loss": summary["loss"],
                          "val loss": summary["val_loss"], "val ppl": summary["val_ppl"],
                          "beta_n min (n >= n_min)": float(fit_domain.min()),
                          "beta_n max (n >= n_min)": float(fit_domain.max()),
                          "max |beta_n - 1| (n >= n_min)": float((fit_domain - 1).abs().max()),
                          "beta_n[n_min]": float(beta.set_index("n").loc[n_min, "beta_n"]),
                          "beta_n[n_train]": float(beta["beta_n"].iloc[-1]),
                          "mean s_h": float(scales["s"].mean()), "mean b_h": float(scales["b"].mean())}])


def side_of_one(lo: float, hi: float) -> str:
    """Where an interval lies against 1, the boundary between sub- and super-logarithmic growth (Hayase &
    Karakida §4.5.2): "below 1", "above 1", "contains 1", or "undefined" without a finite interval."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "undefined"
    return "below 1" if hi < 1 else "above 1" if lo > 1 else "contains 1"


# Hayase & Karakida §4.5.2 call the Qwen estimates in agreement "within the §3 0.5-grid" (largest gap 0.26; the
# nanoGPT gaps are 0.12-0.27): the agreement finding asks the difference's interval to lie within +-0.5.
AGREE_WITHIN = 0.5
DIFFERENCE = "xi_hat_Lambda - xi_hat_beta"


def comparison_table(fits: dict[str, dict], slope: dict[str, float], optimum: pd.DataFrame) -> pd.DataFrame:
    """Every estimate the findings compare, with its 95% interval and its side of 1: xi_hat_Lambda (bootstrap
    over units), xi_hat_beta (OLS t interval), their difference (the two half-widths added in quadrature,
    the estimates being read off disjoint inputs: scores against the beta_n vector), and xi*_PPL per n_eval
    (bootstrap over windows)."""
    lam = fits["Lambda"]
    half = math.hypot((lam["hi"] - lam["lo"]) / 2, (slope["hi"] - slope["lo"]) / 2)
    diff = lam["xi_hat"] - slope["xi_hat"]
    lines = [("xi_hat_Lambda", "attention scores", lam["xi_hat"], lam["lo"], lam["hi"],
              "bootstrap over (eval seed, layer, head)"),
             ("xi_hat_beta", "beta_n vector", slope["xi_hat"], slope["lo"], slope["hi"],
              "OLS t interval over the n-grid"),
             (DIFFERENCE, "both", diff, diff - half, diff + half, "the two half-widths in quadrature")]
    lines += [(f"xi*_PPL at n_eval = {int(r['n_eval'])}", "back-half perplexity sweep", r["xi*_PPL"], r["lo"],
               r["hi"], f"bootstrap over {int(r['windows'])} windows") for _, r in optimum.iterrows()]
    out = pd.DataFrame(lines, columns=["estimate", "read off", "value", "lo", "hi", "95% interval"])
    out["side of 1"] = [side_of_one(lo, hi) if name != DIFFERENCE else ""
                        for name, lo, hi in zip(out["estimate"], out["lo"], out["hi"])]
    return out


def _interval(row: pd.Series) -> str:
    return f"{row['value']:.3f} [{row['lo']:.3f}, {row['hi']:.3f}]"


def untestable_beta(slope: dict[str, float], moved: float, learned: bool) -> str | None:
    """Why the run cannot test a claim about the learned beta_n, or None when it can: the model learned (its
    validation loss is below half the uniform guess's) and beta_n learned a length dependence (its
    xi_hat_beta interval excludes 0, the slope of its init, beta_n = 1 everywhere)."""
    if not learned:
        return "the model did not learn (validation loss above half the uniform guess's log(vocab))"
    if not (slope["lo"] > 0 or slope["hi"] < 0):
        return (f"beta_n learned no length dependence: its xi_hat_beta interval [{slope['lo']:.3f}, "
                f"{slope['hi']:.3f}] contains 0, the slope of its init (max |beta_n - 1| = {moved:.3f})")
    return None


def side_finding(table: pd.DataFrame, summary: dict[str, Any], plan: dict[str, Any], moved: float,
                 untestable: str | None) -> Finding:
    """The training-side headline (Table 2, nanoGPT rows): xi_hat_Lambda, read off the scores, and xi_hat_beta,
    fitted to the learned beta_n, lie on the same side of 1, each 95% interval clear of 1. Not reproduced when
    they lie on opposite sides or either interval contains 1; not checked when ``untestable`` says why."""
    at = table.set_index("estimate")
    lam, beta = at.loc["xi_hat_Lambda"], at.loc["xi_hat_beta"]
    numbers = (f"xi_hat_Lambda = {_interval(lam)} (B = {plan['n_boot']} over (eval seed, layer, head)); "
               f"xi_hat_beta = {_interval(beta)} (six-point OLS on n = {plan['n_grid']}, t interval); "
               f"validation loss {summary['val_loss']:.3f} nats per token after {summary['steps']} steps; beta_n "
               f"moved at most {moved:.3f} from its init 1 on n >= {plan['n_min']}.")
    if untestable or lam["side of 1"] == "undefined":
        verdict, why = "not checked", f"the run cannot test it: {untestable or 'no finite xi_hat_Lambda interval'}. "
    elif lam["side of 1"] == beta["side of 1"] != "contains 1":
        verdict, why = "reproduced", f"both intervals lie {lam['side of 1']}. "
    else:
        verdict, why = "not reproduced", (f"xi_hat_Lambda's interval: {lam['side of 1']}; xi_hat_beta's: "
                                          f"{beta['side of 1']}. ")
    return Finding("xi_hat_Lambda, read off the attention scores, lands on the same side of 1 as the exponent "
                   "xi_hat_beta of the learned beta_n, each 95% interval clear of 1 (Hayase & Karakida Table 2, "
                   "nanoGPT rows: both below 1)", verdict, why + numbers)


def agreement_finding(table: pd.DataFrame, untestable: str | None) -> Finding:
    """Beyond the side of 1: xi_hat_Lambda - xi_hat_beta within +-AGREE_WITHIN (Hayase & Karakida §4.5.2)."""
    diff = table.set_index("estimate").loc[DIFFERENCE]
    evidence = (f"{DIFFERENCE} = {_interval(diff)} (95%, the two half-widths in quadrature); Table 2's "
                "nanoGPT cells differ by 0.12 to 0.27.")
    if untestable or not (math.isfinite(diff["lo"]) and math.isfinite(diff["hi"])):
        verdict, why = "not checked", f"the run cannot test it: {untestable or 'no finite interval'}. "
    elif -AGREE_WITHIN <= diff["lo"] and diff["hi"] <= AGREE_WITHIN:
        verdict, why = "reproduced", f"the interval lies within +-{AGREE_WITHIN:g}. "
    else:
        verdict, why = "not reproduced", f"the interval reaches beyond +-{AGREE_WITHIN:g}. "
    return Finding(f"xi_hat_Lambda matches xi_hat_beta to within {AGREE_WITHIN:g} (the 0.5-grid within which Hayase "
                   "& Karakida §4.5.2 call the estimates in agreement)", verdict, why + evidence)


def ppl_finding(table: pd.DataFrame, learned: bool) -> Finding:
    """The inference-side headline (Table 2, every cell): xi_hat_Lambda lies on the same side of 1 as the
    perplexity-optimal multiplier exponent xi*_PPL at every n_eval past the training window. beta_n holds its
    last entry there, so the multiplier carries all of the inverse temperature's growth past the window."""
    lam = table.set_index("estimate").loc["xi_hat_Lambda"]
    ppl = table[table["estimate"].str.startswith("xi*_PPL")]
    evidence = f"xi_hat_Lambda = {_interval(lam)}; " + "; ".join(
        f"{r['estimate']}: {_interval(r)}, {r['side of 1']}" for _, r in ppl.iterrows()) + "."
    if not learned or ppl.empty or lam["side of 1"] == "undefined":
        verdict, why = "not checked", ("the run cannot test it (the model did not learn, no window past the "
                                       "training window, or no finite xi_hat_Lambda interval). ")
    elif lam["side of 1"] != "contains 1" and (ppl["side of 1"] == lam["side of 1"]).all():
        verdict, why = "reproduced", f"xi_hat_Lambda and every xi*_PPL interval lie {lam['side of 1']}. "
    else:
        verdict, why = "not reproduced", ("xi_hat_Lambda's interval and every xi*_PPL interval do not all lie on "
                                          "one side of 1. ")
    return Finding("xi_hat_Lambda lands on the same side of 1 as the perplexity-optimal multiplier exponent "
                   "xi*_PPL at every window length past training, each 95% interval clear of 1 (Hayase & Karakida "
                   "Table 2 and the §3 sweep, scored by back-half perplexity)", verdict, why + evidence)


def cor49_finding(fits: dict[str, dict], cor49: dict) -> Finding:
    """Cor. 4.9 on the three bucket-mean slopes, within the sum of their half-IQRs."""
    holds = cor49["holds"]
    return Finding(
        "the bucket-mean slopes satisfy Cor. 4.9, xi_Lambda = xi_alpha - xi_Delta + 1 (Hayase & Karakida Table 2)",
        "not checked" if holds is None else "reproduced" if holds else "not reproduced",
        f"xi_hat_alpha = {fits['alpha']['xi_hat']:.3f}, xi_hat_Delta = {fits['Delta']['xi_hat']:.3f}, so "
        f"xi_alpha - xi_Delta + 1 = {cor49['predicted']:.3f} against xi_hat_Lambda = {fits['Lambda']['xi_hat']:.3f}: "
        f"residual {cor49['residual']:.2e}, tolerance (sum of half-IQRs) {cor49['tolerance']:.3f}.")


def _notes(cfg: StudyConfig, plan: dict[str, Any], summary: dict[str, Any], rows: pd.DataFrame,
           ppl: pd.DataFrame) -> tuple[str, ...]:
    """The budget against the paper's, the n-grid and its ties, and the sweep's best xi per length."""
    beyond = ppl[ppl["n_eval"] > plan["context"]]
    sweep_words = "; ".join(f"n_eval = {int(r['n_eval'])}: best xi = {r['best xi']:g} (ppl ratio to xi = 0: "
                            f"{r['ppl at best / at xi=0']:.3f})" for _, r in beyond.iterrows())
    tie_pct = 100 * float(tie_mask(rows["lambda_n"]).mean())
    return (
        f"Budget {cfg.budget}: a {plan['layers']}-layer, {plan['heads']}-head, d_model {plan['d_model']} decoder "
        f"with RoPE (dynamic NTK past the window), trained {summary['steps']} steps of {plan['batch']} x "
        f"{plan['context']} bytes of the Python standard library (bytes tokenizer); Hayase & Karakida train GPT-124M "
        "(12 x 12 x 768, GPT-2 BPE, 1024 tokens) 100k steps of 2048 sequences on SlimPajama/OpenWebText.",
        f"n-grid {plan['n_grid']} (the seed's {{64, ..., 1024}} scaled to the window), {plan['eval_seeds']} "
        f"evaluation seeds x {plan['windows']} validation windows x all layers and heads; {tie_pct:.1f}% of the "
        "rows are exact ties (log10 Lambda_n > 5) and are excluded from every aggregate.",
        f"Inference-time sweep: xi in {plan['sweep_xi']}, {plan['sweep_windows']} non-overlapping windows of the "
        f"validation split per n_eval (consecutive files joined, not single long documents as PG-19); "
        f"beta_n past the window holds its last entry. {sweep_words}. The seed runs this sweep on Qwen-7B, "
        "not on the beta_n model; here it scores the multiplier on top of the trained beta_n.",
    )


def summarize(folder: Path) -> Section:
    from ..report import plot_temperature as plots

    folder = Path(folder)
    cfg = load_config(folder)
    plan = json.loads((folder / PLAN).read_text())
    run = folder / "runs" / NAME
    summary = outcome(run)
    beta = pd.read_parquet(folder / BETA)
    scales = pd.read_parquet(folder / HEAD_SCALES)
    rows = pd.read_parquet(folder / ROWS)
    gaps = pd.read_parquet(folder / GAPS)
    sweep = pd.concat([pd.read_parquet(folder / f"sweep_{n}.parquet") for n in plan["sweep_lengths"]])

    # (a) the beta_n fit
    fit = beta_fit(beta, plan["n_min"], plan["xi_max"], plan["xi_step"])
    best = fit.loc[fit["mse"].idxmin()]
    xi_beta = float(best["xi"])
    slope = beta_slope(beta, plan["n_grid"])
    io.write_table(folder / "beta_fit", fit)
    plots.plot_beta_fit(beta, fit, plan["n_min"], folder / "beta_fit")

    # (b) the contact exponents and Cor. 4.9
    table = per_n(rows)
    io.write_table(folder / "contact_per_n", table)
    fits = contact_exponents(rows, plan["n_boot"], cfg.seed)
    cor49 = check_cor49(fits["Lambda"], fits["alpha"], fits["Delta"])
    per_seed = per_seed_lambda(rows, plan["n_boot"], cfg.seed)
    io.write_table(folder / "exponents", exponents_table(fits, per_seed, cor49, xi_beta, slope, plan["n_grid"]))
    plots.plot_bucket_means(table, fits, folder / "contact_exponents")

    # (c) N_n(t) of the representative row
    rep = representative(rows, table)
    key = (gaps["seed"] == rep["seed"]) & (gaps["doc"] == rep["doc"]) & (gaps["layer"] == rep["layer"]) & (
        gaps["head"] == rep["head"])
    rep_gaps = np.asarray(gaps.loc[key, "gaps"].iloc[0], dtype=float)
    plots.plot_counting(rep_gaps, float(rep["lambda_n"]), float(rep["contact_gap"]), int(rep["n_keys"]),
                        f"layer {int(rep['layer'])}, head {int(rep['head'])}, eval seed {int(rep['seed'])}, "
                        f"window {int(rep['doc'])}", folder / "counting")

    # (d) the inference-time sweep
    ppl = sweep_table(sweep)
    io.write_table(folder / "sweep", ppl)
    plots.plot_sweep(ppl, plan["context"], folder / "sweep")

    training = training_table(summary, beta, scales, plan["n_min"])
    io.write_table(folder / "training", training)
    moved = float(training["max |beta_n - 1| (n >= n_min)"].iloc[0])
    # learned: validation loss below half the uniform guess's log(vocab)
    vocab = json.loads((run / "config.json").read_text())["model"]["vocab"]
    learned = summary["val_loss"] is not None and summary["val_loss"] < math.log(vocab) / 2

    # the headline comparisons, each estimate with its 95% interval
    comparison = comparison_table(fits, slope, sweep_optimum(sweep, plan["context"], plan["n_boot"], cfg.seed))
    io.write_table(folder / "comparison", comparison)
    untestable = untestable_beta(slope, moved, learned)
    findings = [side_finding(comparison, summary, plan, moved, untestable), agreement_finding(comparison, untestable),
                ppl_finding(comparison, learned), cor49_finding(fits, cor49)]
    notes = _notes(cfg, plan, summary, rows, ppl)
    real_findings, real_tables, real_figures, real_notes = real_part(cfg, folder)
    return section(
        "temperature", folder,
        question="Does the growth exponent xi_Lambda of the upper-tail accumulation scale, read off a trained "
                 "model's attention scores alone, land on the same side of 1 as the exponent of the "
                 "inverse temperature beta_n that the same model learned, and as the multiplier exponent that "
                 "minimizes its perplexity past the training window?",
        findings=(*findings, *real_findings),
        tables=(Table("comparison", "The estimates the findings compare, each with its 95% interval and the side "
                                    "of 1 where the interval lies: xi_hat_Lambda (bootstrap over (eval seed, layer, "
                                    "head)), xi_hat_beta (t interval of the six-point OLS), their "
                                    "difference, and the perplexity-optimal multiplier exponent xi*_PPL per window "
                                    "length past training (bootstrap over windows)."),
                Table("exponents", "Growth exponents: xi_hat_Lambda, xi_hat_alpha, xi_hat_Delta (bucket-mean "
                                   "OLS slopes on log log n, half-IQR and 95% interval of the bootstrap over "
                                   "(eval seed, layer, head)), xi_hat_Lambda of each evaluation seed alone "
                                   "(bootstrap over (layer, head)), Cor. 4.9's xi_alpha - xi_Delta + 1, and the two "
                                   "fits of beta_n (M2 grid argmin; six-point OLS slope with its SE in the half_iqr "
                                   "column and its t interval)."),
                Table("contact_per_n", "Per context length n: rows, exact ties, and the bucket means of log "
                                       "Lambda_n, log alpha_n and log Delta_n over the non-tied rows."),
                Table("beta_fit", "M2 fit of beta_n to a_1 (log n)^xi on n >= n_min: a_1 and the per-point MSE "
                                  "at each xi of the grid."),
                Table("sweep", "Back-half sliding-window perplexity at each window length n_eval (rows) and "
                               "multiplier exponent xi (columns); n_eval equal to the training window is the "
                               "reference, where m(n; xi) = 1."),
                Table("training", "The training run and the learned beta_n (init 1) and per-head s_h, b_h."),
                *real_tables),
        figures=(Figure("beta_fit", "Left: the learned beta_n over positions n (dots) with the bias-free fits "
                                    "a_1 (log n)^xi at the MSE-optimal xi and at xi = 1; the grey band is n < "
                                    "n_min, left out of the fit. Right: the fit's MSE over xi (log scale), star at "
                                    "the argmin xi*_beta, dotted line at the logarithmic xi = 1."),
                 Figure("contact_exponents", "Bucket means of log Lambda_n, log alpha_n and log Delta_n against "
                                             "log log n, with the OLS lines whose slopes are the xi_hat of the "
                                             "exponents table."),
                 Figure("counting", "N_n(t) of the representative row at the largest n (nearest the bucket mean "
                                    "in (log alpha_n, log Delta_n)), log y: the step curve counts keys within gap t "
                                    "of the row maximum, the dashed curve is the envelope e^{Lambda_n t}, touching "
                                    "it at the contact point (red star, (Delta_n, N_n(Delta_n))); the right axis "
                                    "reads alpha = log N / log n."),
                 Figure("sweep", "Back-half sliding-window perplexity against the multiplier exponent xi, one "
                                 "curve per window length n_eval (the training window as reference, flat because "
                                 "m = 1 there); stars mark the minimum of each curve past the training window, the "
                                 "dotted line xi = 1."),
                 *real_figures),
        notes=(*notes, *real_notes))


STUDY = register(Study(
    name="temperature", title="Critical scaling of the inverse temperature",
    source="Hayase & Karakida 2026",
    compute=compute, summarize=summarize, takes_model=True))
