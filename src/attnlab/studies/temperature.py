"""The ``temperature`` study (Hayase & Karakida 2026): does the growth exponent xi_Lambda of the
upper-tail accumulation scale, read off a trained model's attention scores alone, land on the same side
of 1 as the exponent of the inverse temperature that the same model learned, where an untrained model and
i.i.d. scores do not?

``attnlab study temperature``: critical scaling of the inverse temperature on the own decoder and, with
``--model``, on a pretrained checkpoint (Hayase & Karakida, §3, §4.2, §4.5, App. A.2, A.3, B.1, F,
G.1).

The decoder is trained on text with the learnable per-position vector beta_n of Hayase & Karakida eq. (A.1),
beta_{n,l,h} = s_{l,h} beta_n + b_{l,h} (``ModelConfig(scaler="beta_n")``), once per training seed (the unit
of replication: every interval a finding reads is a Student-t interval over training seeds), and every seed's
decoder is read four ways, (a) to (d), beside the same decoder untrained, the null control; (e) reads a
pretrained checkpoint:

(a) App. B.1: the trained beta_n, fitted bias-free to a_1 (log n)^xi on n >= n_min (the "M2" fit), and App. F's
    slope xi_hat_beta, here of the per-head multiplier s_h beta_n + b_h (eq. A.1 is unchanged by beta_n + c,
    b_h - s_h c, so beta_n's own slope is not identified; the per-head multiplier is).
(b) §4.5.1 and App. F: score rows of the same model, acquired as App. G.1 does (per validation window one
    forward of max(n) tokens; per layer and head the query at position n - 1, which sees n keys, at each n of
    the grid, and again past the training window), each giving the contact triple (Lambda_n, alpha_n, Delta_n)
    of Defs. 4.3-4.5; xi_hat_X is the OLS slope of the bucket means of log X on log log n, and Cor. 4.9's
    xi_Lambda = xi_alpha - xi_Delta + 1 (an identity of the estimators: a software check). The rows are the
    unscaled scores z = <q, k> / sqrt(d), before beta_n and the softmax (App. A.5).
(c) Fig. 2 / App. G.1: N_n(t) with its envelope e^{Lambda_n t} and the contact point, for the row at the
    largest n nearest the bucket mean in (log alpha_n, log Delta_n).
(d) §3 and App. A.2: the inference-time multiplier m(n; xi) = max(1, log n / log n_train)^xi (the
    ``logn_xi*_n*`` row maps) on top of the trained beta_n, at window lengths n_eval beyond training,
    scored by back-half sliding-window perplexity.
(e) With ``--model``, §4.5.1 on a pretrained checkpoint as App. G.1 reads Qwen: ``attnlab temperature`` reads the
    model's own score rows at n = n_eval x {1/4, 1/2, 3/4, 1} under dynamic-NTK RoPE at an n_eval past its training
    window (``REAL_PLANS``), on windows of the bundled public-domain novel; xi_hat_Lambda with its 95% interval over
    documents, against i.i.d. rows; not checked when the rows stay inside the window (no RoPE to rescale, or a
    window longer than the budget reads).

The findings (Hayase & Karakida 2026 §4.5.2, Table 2), each a rule fixed below (SIDE_RULE, AGREE_RULE,
PPL_RULE, REAL_RULE) run on the trained decoder and on its null: xi_hat_Lambda and xi_hat_beta both below 1
(which the untrained decoder and i.i.d. rows also give, so it is never reproduced); the two agree within 0.5;
xi_hat_Lambda read past the window lands on the same side of 1 as xi*_PPL at every window length past training.

``compute`` writes the raw results: ``real/`` (the temperature command's folder, with ``--model`` only; first,
so a bad model fails before training), ``plan.json`` (the budget), ``runs/beta_n/``, ``runs/beta_n_t1/``, ...
(the trainer's runs, resumable), then per arm (the untrained one prefixed ``untrained_``) ``sweep_<n_eval>``,
``head_scales``, ``beta_n``, ``gaps``, ``ext_rows`` and last ``contact_rows`` (.parquet, a ``train_seed`` column
in each). ``summarize`` derives everything else from those files, the real part from ``real/config.json`` and
its row table.
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
from ..commands.runs import context_length, load
from ..commands.temperature import TRIPLE, per_n
from ..commands.xi_sweep import parabola_min
from ..diagnostics.paired import paired_interval
from ..diagnostics.stats import UNREADABLE, check_cor49, exponent, tie_mask
from ..report.sections import MDE, Figure, Finding, Null, Section, Table
from ..train.metrics import outcome
from ..train.trainer import Trainer
from .runner import Study, StudyConfig, load_config, register, section
from .verdict import decide

NAME = "beta_n"
PLAN = "plan.json"
UNTRAINED = "untrained_"  # prefix of the null control's files: the same decoder at its initialization
EXT_ROWS = "ext_rows.parquet"  # contact rows past the training window, where xi*_PPL is read
BETA = "beta_n.parquet"
HEAD_SCALES = "head_scales.parquet"
GAPS = "gaps.parquet"
ROWS = "contact_rows.parquet"
EXPONENT_UNIT = ["train_seed", "layer", "head"]  # App. F resamples (seed, layer, head): seeds of training
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
              "sweep_batch": 8, "train_seeds": 3, "ext_grid": [256, 384, 512, 768, 1024], "ext_windows": 4},
    "full": {"context": 1024, "layers": 12, "heads": 12, "d_model": 768, "steps": 100_000, "batch": 2048,
             "accum": 64, "lr": 6e-4, "min_lr": 6e-5, "warmup": 1000, "precision": "bf16", "max_tokens": None,
             "every": 5000,
             "n_grid": [64, 128, 256, 512, 768, 1024], "n_min": 64, "eval_seeds": 3, "windows": 16,
             "n_boot": 200, "eps": 1e-6, "xi_max": 3.0, "xi_step": 0.05,
             "sweep_lengths": [1024, 1536, 2048, 3072, 4096], "sweep_xi": [0, 0.5, 1, 1.5, 2, 2.5, 3],
             "sweep_windows": 20, "sweep_batch": 4, "train_seeds": 3, "ext_grid": [1024, 1536, 2048, 3072, 4096],
             "ext_windows": 4},
}


# The pretrained-checkpoint part (e), read as App. G.1 reads Qwen: one forward of n_eval tokens per document under
# dynamic-NTK RoPE (App. A.2), rows at n = n_eval x {1/4, 1/2, 3/4, 1}, one fit per n_eval, B = 200 (§4.5.1), on
# windows of the bundled novel (public-domain prose, as PG-19 is). Table 2 reads n_eval = 2 and 4 x n_train. smoke:
# n_eval = 1.25 x n_train, the longest the CPU allows here: SmolLM2-135M (n_train 8192) reads one 8192-token document
# in 107 s and one of 10240 in about 160 s on two CPU cores, so four documents take about 11 minutes; a model whose
# n_eval would pass max_tokens (Gemma 3's 32768 window) is read at max_tokens inside its window instead, and says so.
# full: 2 x n_train and 7 documents, what the novel holds at SmolLM2's 16384 (125k tokens), near the 4 + 5 per
# Qwen cell of App. G.1.
REAL_PLANS: dict[str, dict[str, Any]] = {
    "smoke": {"ratio": 1.25, "fractions": [0.25, 0.5, 0.75, 1.0], "docs": 4, "n_boot": 200, "max_tokens": 12288},
    "full": {"ratio": 2.0, "fractions": [0.25, 0.5, 0.75, 1.0], "docs": 7, "n_boot": 200, "max_tokens": None},
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


def real_reading(plan: dict[str, Any], n_train: int | None, rope_ok: bool) -> tuple[str, list[int]]:
    """(rope, n-grid) of the real part: dynamic NTK at n_eval = ratio x n_train where the model has plain RoPE, a
    training window and n_eval within the budget's max_tokens; else the model's own positions at n_eval =
    min(n_train, max_tokens), inside the window, where the finding is not checked."""
    cap = plan["max_tokens"] or math.inf
    n_eval = round(plan["ratio"] * n_train) if n_train else None
    if n_eval is not None and rope_ok and n_eval <= cap:
        rope = "dynamic"
    else:
        rope, n_eval = "plain", int(min(n_train or cap, cap))
    return rope, [max(2, round(f * n_eval)) for f in plan["fractions"]]


def compute_real(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    """(e): ``attnlab temperature`` on ``cfg.model`` into folder/real (``real_reading``), unless its config.json
    (written last) says it is done; the seconds it took go in real/elapsed.json."""
    import time

    import torch

    from ..hooks import UnsupportedModel, rope_tables

    out = folder / REAL
    if (out / "config.json").is_file():
        return
    plan = REAL_PLANS[cfg.budget]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, _ = load(cfg.model, device, "float32")
    try:
        rope_tables(model)
        rope_ok = True
    except UnsupportedModel:
        rope_ok = False
    rope, grid = real_reading(plan, context_length(model), rope_ok)
    del model
    # float32 on a GPU too: bfloat16 scores tie competitors that float32 tells apart, and ties are dropped
    run = temperature.TemperatureConfig(model=cfg.model, n=tuple(grid), suite=temperature.NOVEL, rope=rope,
                                        docs=plan["docs"], n_boot=plan["n_boot"], seed=cfg.seed, device=device,
                                        dtype="float32")
    start = time.perf_counter()
    temperature.run(run, out, progress=progress)
    io.write_json(out / "elapsed.json", {"seconds": time.perf_counter() - start, "device": device})


def run_name(k: int) -> str:
    """The trainer folder of training seed index k under runs/ (index 0 keeps the single-seed name)."""
    return NAME if k == 0 else f"{NAME}_t{k}"


def untrained_model(plan: dict[str, Any], seed: int, device):
    """The decoder the training run of ``seed`` starts from: the trainer seeds torch, then builds it (the null
    control of every exponent: what an initialization gives before any learning)."""
    import torch

    from ..model.decoder import Decoder

    run = run_config(plan, seed)
    torch.manual_seed(run.train.seed)
    return Decoder(run.model).to(device).eval()


def read_model(model, val: np.ndarray, plan: dict[str, Any], seed: int, device) -> dict[str, pd.DataFrame]:
    """Everything the summary reads off one decoder: its beta_n and per-head s_h, b_h; the contact rows on the
    n-grid (and the sorted gaps at the largest n); the contact rows past the training window (``ext_grid``, the
    query at n - 1 of windows of max(ext_grid) tokens, beta_n holding its last entry there); the back-half
    sweep per window length and xi."""
    scalers = [block.attn.scaler for block in model.layers]
    beta = model.beta_n.detach().cpu().double().numpy()
    rows, gaps = contact_rows(model, val, plan, seed, device)
    ext, _ = contact_rows(model, val, {**plan, "n_grid": plan["ext_grid"], "windows": plan["ext_windows"]},
                          seed, device)
    parts = []
    for n_eval in plan["sweep_lengths"]:
        for xi in plan["sweep_xi"]:
            part = back_half_losses(sweep_model(model, xi), val, n_eval, plan["sweep_windows"],
                                    plan["sweep_batch"], device)
            parts.append(part.assign(n_eval=n_eval, xi=float(xi)))
    return {"beta": pd.DataFrame({"n": np.arange(1, len(beta) + 1), "beta_n": beta}),
            "scales": pd.DataFrame([{"layer": i, "head": h, "s": float(sc.s[h].detach()), "b": float(sc.b[h].detach())}
                                    for i, sc in enumerate(scalers) for h in range(len(sc.s))]),
            "rows": rows, "gaps": gaps, "ext": ext, "sweep": pd.concat(parts, ignore_index=True)}


def _write(folder: Path, prefix: str, pieces: list[dict[str, pd.DataFrame]], plan: dict[str, Any]) -> None:
    """The pieces of every training seed, each table with its train_seed column, into the study's files."""
    def joined(key):
        return pd.concat([p[key].assign(train_seed=k) for k, p in enumerate(pieces)], ignore_index=True)

    sweep = joined("sweep")
    for n_eval in plan["sweep_lengths"]:
        io.write_parquet(folder / f"{prefix}sweep_{n_eval}.parquet", sweep[sweep["n_eval"] == n_eval])
    io.write_parquet(folder / f"{prefix}{HEAD_SCALES}", joined("scales"))
    io.write_parquet(folder / f"{prefix}{BETA}", joined("beta"))
    io.write_parquet(folder / f"{prefix}{GAPS}", joined("gaps"))
    io.write_parquet(folder / f"{prefix}{EXT_ROWS}", joined("ext"))
    io.write_parquet(folder / f"{prefix}{ROWS}", joined("rows"))  # last: its presence says the set is complete


def compute(cfg, folder: Path, progress: bool) -> None:
    """The real-model part if asked for, then train (or resume) the beta_n decoder once per training seed
    (seeds cfg.seed, cfg.seed + 1, ...: the bootstrap's unit of replication), read each trained decoder and, as
    the null control, the same decoder untrained (see the module docstring)."""
    folder = Path(folder)
    if cfg.model is not None:
        compute_real(cfg, folder, progress)
    plan = BUDGETS[cfg.budget]
    if (folder / PLAN).is_file():
        plan = json.loads((folder / PLAN).read_text())
    else:
        io.write_json(folder / PLAN, plan)
    if (folder / ROWS).is_file() and (folder / f"{UNTRAINED}{ROWS}").is_file():
        return
    trained, untrained = [], []
    for k in range(plan["train_seeds"]):
        trainer = Trainer(run_config(plan, cfg.seed + k), folder / "runs" / run_name(k), resume=True,
                          progress=progress)
        trainer.run()
        device, val = trainer.world.device, trainer.stream.val_tokens
        trained.append(read_model(trainer.model.eval(), val, plan, cfg.seed, device))
        untrained.append(read_model(untrained_model(plan, cfg.seed + k, device), val, plan, cfg.seed, device))
    _write(folder, UNTRAINED, untrained, plan)
    _write(folder, "", trained, plan)


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


def head_slopes(beta: pd.DataFrame, scales: pd.DataFrame, n_grid: list[int]) -> pd.Series:
    """Per (layer, head): the OLS slope of log(s_h beta_n + b_h) on log log n at the grid's n (Hayase & Karakida
    App. F's xi_hat_beta, on the multiplier a head applies). Eq. A.1 is unchanged by beta_n + c, b_h - s_h c, so
    the shared vector beta_n alone is not identified (its slope moves with c while no logit changes); the per-head
    multiplier s_h beta_n + b_h is what the logits see and is invariant. NaN where a multiplier is <= 0."""
    at = beta.set_index("n").loc[n_grid, "beta_n"].to_numpy(float)
    t = np.log(np.log(np.asarray(n_grid, float)))
    tc = t - t.mean()
    out = {}
    for _, h in scales.iterrows():
        m = h["s"] * at + h["b"]
        out[(int(h["layer"]), int(h["head"]))] = (
            float((np.log(m) - np.log(m).mean()) @ tc / (tc @ tc)) if np.all(m > 0) else math.nan)
    return pd.Series(out, dtype=float)


def contact_exponents(rows: pd.DataFrame, n_boot: int, seed: int) -> dict[str, dict]:
    """xi_hat of Lambda, alpha and Delta (bucket-mean OLS slopes, exact ties excluded from all three) pooled over
    every training seed, with bootstrap half-IQRs over (training seed, layer, head) (Hayase & Karakida §4.5.1,
    App. F; descriptive: the findings read the per-training-seed estimates)."""
    tie = tie_mask(rows["lambda_n"])
    return {name: exponent(rows["n_keys"], rows[col], exclude=tie, unit=rows[EXPONENT_UNIT], n_boot=n_boot,
                           seed=seed) for name, col in TRIPLE.items()}


def lambda_slope(rows: pd.DataFrame) -> float:
    """xi_hat_Lambda of one model's rows: the bucket-mean OLS slope, exact ties excluded (§4.5.1)."""
    return float(exponent(rows["n_keys"], rows["lambda_n"], exclude=tie_mask(rows["lambda_n"]))["xi_hat"])


def ppl_optimum(sweep: pd.DataFrame) -> float:
    """xi*_PPL of one model at one n_eval: the parabola vertex of the window-mean back-half loss over xi."""
    nll = sweep.assign(nll=sweep["loss_sum"] / sweep["tokens"]).groupby("xi")["nll"].mean()
    return float(_optimum(nll.index.to_numpy(float), nll.to_numpy(float)[None])[0])


def per_seed(pieces: dict[str, pd.DataFrame], plan: dict[str, Any]) -> pd.DataFrame:
    """One line per training seed of one arm (trained or untrained): xi_hat_Lambda on the n-grid, xi_hat_beta (the
    mean over heads of ``head_slopes``), their difference, xi_hat_Lambda past the window (``ext_grid``) and xi*_PPL
    per window length past training. Training seeds are the unit of replication: the findings' intervals are
    Student-t intervals over these lines."""
    lines = []
    for k, rows in pieces["rows"].groupby("train_seed"):
        line = {"train_seed": int(k), "xi_hat_Lambda": lambda_slope(rows),
                "xi_hat_beta": float(head_slopes(pieces["beta"][pieces["beta"]["train_seed"] == k],
                                                 pieces["scales"][pieces["scales"]["train_seed"] == k],
                                                 plan["n_grid"]).mean()),
                EXT: lambda_slope(pieces["ext"][pieces["ext"]["train_seed"] == k])}
        line[DIFFERENCE] = line["xi_hat_Lambda"] - line["xi_hat_beta"]
        mine = pieces["sweep"][pieces["sweep"]["train_seed"] == k]
        for n_eval, part in mine[mine["n_eval"] > plan["context"]].groupby("n_eval"):
            line[f"xi*_PPL at n_eval = {int(n_eval)}"] = ppl_optimum(part)
        lines.append(line)
    return pd.DataFrame(lines)


def iid_rows(counts: pd.Series, rng: np.random.Generator) -> pd.DataFrame:
    """i.i.d. N(0, 1) score rows, ``counts[n]`` of them with n keys, and their Lambda_n: rows with no structure."""
    import torch

    from ..diagnostics.gaps import gap_stats

    frames = []
    for n, count in counts.items():
        stats = gap_stats(torch.from_numpy(rng.standard_normal((int(count), int(n)))), torch.full((int(count),), int(n)))
        frames.append(pd.DataFrame({"n_keys": int(n), "lambda_n": stats["lambda_n"].numpy()}))
    return pd.concat(frames, ignore_index=True)


def iid_lambda(rows: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The second null control: per training seed, ``iid_rows`` with as many rows at each n as that seed's model
    gave, and their xi_hat_Lambda."""
    rng = np.random.default_rng([seed, 7])
    return pd.DataFrame([{"train_seed": int(k), "xi_hat_Lambda": lambda_slope(iid_rows(part.groupby("n_keys").size(),
                                                                                         rng))}
                         for k, part in rows.groupby("train_seed")])


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


# --------------------------------------------------------------------------------------- the real model


def real_rows(folder: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The readable rows of folder/real, the ones ``temperature.run`` fits, and its config.json."""
    real = folder / REAL
    config = json.loads((real / "config.json").read_text())
    rows = pd.read_parquet(real / REAL_ROWS, columns=["layer", "head", "prompt", "query", "n_keys", "status",
                                                      *TRIPLE.values()])
    return rows[~rows["status"].isin(UNREADABLE)].reset_index(drop=True), config


def real_exponents(rows: pd.DataFrame, n_boot: int, seed: int) -> tuple[pd.DataFrame, dict]:
    """The temperature command's xi_hat table (Hayase & Karakida §4.5.1) with the 95% percentile interval of xi_hat
    over B resamples of the documents, the unit of replication (rows of one document share its tokens; (layer, head)
    of one forward are not independent), and its Cor. 4.9 check."""
    fits, cor49 = temperature.exponents(rows, n_boot, seed, unit=("prompt",))
    tie = tie_mask(rows["lambda_n"])
    bounds = [exponent(rows["n_keys"], rows[col], exclude=tie, unit=rows[["prompt"]], n_boot=n_boot, seed=seed)
              for col in TRIPLE.values()]
    return fits.assign(lo=[b["lo"] for b in bounds], hi=[b["hi"] for b in bounds]), cor49


def iid_real(rows: pd.DataFrame, seed: int, n_boot: int) -> dict[str, float]:
    """The pretrained finding's null: ``iid_rows`` with the model's count of rows at each n, split into as many
    documents, and their xi_hat_Lambda with its 95% interval over those documents."""
    null = iid_rows(rows.groupby("n_keys").size(), np.random.default_rng([seed, 11]))
    null["prompt"] = np.arange(len(null)) % max(int(rows["prompt"].nunique()), 1)
    fit = exponent(null["n_keys"], null["lambda_n"], exclude=tie_mask(null["lambda_n"]), unit=null[["prompt"]],
                   n_boot=n_boot, seed=seed)
    return {"xi_hat": fit["xi_hat"], "lo": fit["lo"], "hi": fit["hi"]}


# Hayase & Karakida Table 2: the pretrained Qwen-7B-Chat cells give xi_hat_Lambda 1.74 to 2.33, read at n up to
# 16384 and 32768, past Qwen's n_train = 8192 under dynamic NTK.
REAL_RULE = "xi_hat_Lambda's 95% interval over documents lies above 1"
REAL_EFFECT = 0.74  # the smallest distance above 1 among Table 2's pretrained cells (1.74)


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


def reached(config: dict) -> dict[str, Any]:
    """Where the real part's rows lie against the checkpoint's training window: past (dynamic NTK at an n_eval
    beyond it, the regime of Table 2) or not, in words. Folders written before the command took --rope read
    inside the window."""
    n_eval, n_train = max(config["n"]), config.get("n_train")
    window = f"n_train = {n_train}" if n_train else "no window in its config"
    if config.get("rope", "plain") == "dynamic" and n_train and n_eval > n_train:
        return {"past": True, "window": window,
                "words": f"The rows are read under dynamic-NTK RoPE at n_eval = {n_eval}, {n_eval / n_train:.3g} x "
                         f"the training window {n_train}: past it, the regime of Table 2, at a shorter reach than "
                         "Table 2's 2 and 4 x."}
    return {"past": False, "window": window,
            "words": f"The rows are read with the model's own positions up to n = {n_eval}, inside its training "
                     f"window ({window}); no row past it is read."}


def source_words(config: dict) -> str:
    """Where the real part's documents come from, in words."""
    if config.get("suite") == temperature.NOVEL:
        return ("consecutive windows of the bundled novel, Austen's Pride and Prejudice, chapters I-L: "
                "public-domain long-form prose, as PG-19's books are")
    if config.get("text"):
        return f"windows of {config['text']}"
    return "generated text (tasks.generic_text sentences), not PG-19 or Proof-Pile-2"


def elapsed_words(folder: Path) -> str:
    """', taking M minutes' from real/elapsed.json, or nothing when the folder has no record of it."""
    path = folder / REAL / "elapsed.json"
    if not path.is_file():
        return ""
    took = json.loads(path.read_text())
    return f", {took['seconds'] / 60:.1f} minutes in all"


def missing_real_note(cfg: StudyConfig, folder: Path) -> str:
    """Why the folder has no real-model section, and the command that adds one."""
    if cfg.model is None:
        return ("The real-model section (Hayase & Karakida §4.5.1 on a pretrained checkpoint: xi_hat_Lambda from the "
                "model's own score rows past its training window) was not run, for want of --model. Run `attnlab fetch "
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
    xi, h, lo, hi = (float(lam[c]) for c in ("xi_hat", "half_iqr", "lo", "hi"))
    model = f"{config['model']} ({config['model_type']}, {config['layers']} layers x {config['heads']} heads)"
    plots.plot_real_lambda(table, xi, h, str(config["model"]), folder / "real_lambda")
    null = iid_real(rows, config["seed"], config["n_boot"])
    means = ", ".join(f"{m:.3f} at n = {n}" for n, m in zip(table["n"], table["mean log Lambda"]))
    evidence = (f"xi_hat_Lambda = {xi:.3f} [{lo:.3f}, {hi:.3f}] (95%, B = {config['n_boot']} over "
                f"{config['documents']} documents) on {model}: {side_of_one(lo, hi)}; bucket means of log Lambda_n: "
                f"{means}; Cor. 4.9's xi_alpha - xi_Delta + 1 = {cor49['predicted']:.3f}.")
    grid = config["n"]
    claim = ("on a pretrained checkpoint, xi_hat_Lambda read off the model's own score rows lies above 1 (Hayase & "
             "Karakida §4.5.2, Table 2: all four pretrained Qwen-7B-Chat cells give 1.74 to 2.33, read past the "
             "training window under dynamic NTK)")
    reach = reached(config)
    finding = decide(
        claim, rule=REAL_RULE, holds=bool(lo > 1) if math.isfinite(lo) else None,
        null=Null("i.i.d. N(0, 1) rows with the model's count of rows at each n", bool(null["lo"] > 1),
                  f"xi_hat_Lambda = {null['xi_hat']:.3f} [{null['lo']:.3f}, {null['hi']:.3f}]"),
        mde=MDE((hi - lo) / 2 if math.isfinite(hi - lo) else None, REAL_EFFECT, "in xi",
                "the half-width of the 95% interval over documents, against the distance of Table 2's nearest "
                "pretrained cell above 1"),
        evidence=f"{evidence} {reach['words']}",
        precondition=None if reach["past"] else (
            f"the rows are read at n = {min(grid)} .. {max(grid)}, inside {config['model']}'s training window "
            f"({reach['window']}), where Table 2 reads Qwen at 2-4x past its window under dynamic NTK: the regime "
            "of the claim is not reached"))
    tie_pct = 100 * float(tie_mask(rows["lambda_n"]).mean())
    notes = [f"Real-model section: `attnlab temperature` on {model}, {config['documents']} documents of "
             f"{max(grid)} tokens ({source_words(config)}), one {config['dtype']} forward each on "
             f"{config['device']}{elapsed_words(folder)}; per layer, head and n = {grid} the query at n - 1; "
             f"{tie_pct:.1f}% exact ties excluded. {reach['words']} Table 2's Qwen cells are read at n_eval = 16384 "
             "and 32768, 2 and 4 x Qwen-7B-Chat's n_train = 8192, with rows at n_eval x {1/4, 1/2, 3/4, 1} and "
             "one fit per n_eval (App. G.1), pooled there over seven multiplier exponents xi_0 of the upstream "
             "pass; these rows come from the unmodified forward alone (xi_0 = 0)."]
    windowed = windowed_note(rows, config["n_boot"], config["seed"])
    if windowed:
        notes.append(windowed)
        finding = dataclasses.replace(finding, evidence=finding.evidence + " Sliding-window rows change the layers "
                                      "behind the buckets above the window (see the notes).")
    return ([finding],
            [Table("real_per_n", f"Real model ({config['model']}): per n, rows, exact ties and the bucket means "
                                 "of log Lambda_n, log alpha_n and log Delta_n over the non-tied rows of all layers "
                                 "and heads."),
             Table("real_exponents", f"Real model ({config['model']}): xi_hat_Lambda, xi_hat_alpha, xi_hat_Delta "
                                     "(bucket-mean OLS slopes on log log n) with the half-IQR and 95% interval of "
                                     "B bootstrap resamples over documents.")],
            [Figure("real_lambda", f"Real model ({config['model']}): bucket means of log Lambda_n against log log n "
                                   "(top axis: n), the OLS line whose slope is xi_hat_Lambda, and the slope-1 line "
                                   "through the same centroid (dotted), the finding's threshold: a fitted line "
                                   "steeper than it lands on the side of Table 2's pretrained cells.")],
            notes)


def exponents_table(fits: dict[str, dict], cor49: dict, xi_beta: float) -> pd.DataFrame:
    """The growth exponents read off the pooled scores of every training seed (half-IQR and 95% interval of the
    bootstrap over (training seed, layer, head); descriptive), Cor. 4.9's xi_alpha - xi_Delta + 1, and the M2 grid
    argmin of the first training seed's beta_n."""
    blank = {"half_iqr": np.nan, "lo": np.nan, "hi": np.nan, "buckets": np.nan, "rows used": np.nan,
             "ties excluded": np.nan}
    return pd.DataFrame(
        [{"exponent": f"xi_hat_{k}", "read off": "attention scores", "value": f["xi_hat"],
          "half_iqr": f["half_iqr"], "lo": f["lo"], "hi": f["hi"], "buckets": f["n_buckets"],
          "rows used": int(sum(f["bucket_count"])), "ties excluded": f["n_excluded"]} for k, f in fits.items()]
        + [{**blank, "exponent": "xi_alpha - xi_Delta + 1", "read off": "Cor. 4.9", "value": cor49["predicted"]},
           {**blank, "exponent": "xi*_beta (M2 grid argmin, training seed 0)", "read off": "beta_n vector",
            "value": xi_beta}])


def training_table(folder: Path, beta: pd.DataFrame, scales: pd.DataFrame, n_min: int) -> pd.DataFrame:
    """Per training seed: the training record and beta_n's movement from its initialization (1 everywhere,
    App. A.3)."""
    lines = []
    for k, mine in beta.groupby("train_seed"):
        summary = outcome(folder / "runs" / run_name(int(k)))
        fit_domain = mine[mine["n"] >= n_min]["beta_n"]
        heads = scales[scales["train_seed"] == k]
        lines.append({"train_seed": int(k), "steps": summary["steps"], "train loss": summary["loss"],
                      "val loss": summary["val_loss"], "val ppl": summary["val_ppl"],
                      "beta_n min (n >= n_min)": float(fit_domain.min()),
                      "beta_n max (n >= n_min)": float(fit_domain.max()),
                      "max |beta_n - 1| (n >= n_min)": float((fit_domain - 1).abs().max()),
                      "mean s_h": float(heads["s"].mean()), "mean b_h": float(heads["b"].mean())})
    return pd.DataFrame(lines)


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
EXT = "xi_hat_Lambda past the window"
# Table 2's nanoGPT xi_hat_Lambda closest to 1 (0.69): the smallest distance from 1 a side-of-1 claim must resolve.
PAPER_DISTANCE = 0.31
ARMS = ("trained", "untrained", "i.i.d. N(0, 1)")

# The decision rules, fixed before any number is read. Every interval is a 95% Student-t interval over training
# seeds (the unit of replication); the same rule is run on the untrained decoder of every seed (the null).
SIDE_RULE = ("xi_hat_Lambda's and xi_hat_beta's 95% intervals over training seeds both lie below 1 (Table 2's "
             "side for its trained GPT-124M)")
AGREE_RULE = f"the 95% interval over training seeds of {DIFFERENCE} lies within +-{AGREE_WITHIN:g}"
PPL_RULE = ("xi_hat_Lambda read past the training window and xi*_PPL at every window length past it have 95% "
            "intervals over training seeds on one side of 1, none containing it")


def intervals(table: pd.DataFrame, arm: str) -> pd.DataFrame:
    """Every estimate column of a per-seed table: mean over training seeds, sd, and the 95% t interval."""
    lines = []
    for col in table.columns.drop("train_seed"):
        got = paired_interval(table[col].to_numpy(float))
        lines.append({"arm": arm, "estimate": col, "training seeds": got["n"], "value": got["mean"], "sd": got["sd"],
                      "lo": got["lo"], "hi": got["hi"],
                      "side of 1": "" if col == DIFFERENCE else side_of_one(got["lo"], got["hi"])})
    return pd.DataFrame(lines)


def _at(table: pd.DataFrame, arm: str, estimate: str) -> pd.Series:
    return table[(table["arm"] == arm) & (table["estimate"] == estimate)].iloc[0]


def _interval(row: pd.Series) -> str:
    return f"{row['value']:.3f} [{row['lo']:.3f}, {row['hi']:.3f}]"


def _half(*rows: pd.Series) -> float | None:
    widths = [(r["hi"] - r["lo"]) / 2 for r in rows]
    return max(widths) if all(math.isfinite(w) for w in widths) else None


def side_holds(table: pd.DataFrame, arm: str) -> bool:
    return all(_at(table, arm, e)["side of 1"] == "below 1" for e in ("xi_hat_Lambda", "xi_hat_beta"))


def agree_holds(table: pd.DataFrame, arm: str) -> bool:
    diff = _at(table, arm, DIFFERENCE)
    return bool(-AGREE_WITHIN <= diff["lo"] and diff["hi"] <= AGREE_WITHIN)


def ppl_holds(table: pd.DataFrame, arm: str) -> bool:
    mine = table[(table["arm"] == arm) & ((table["estimate"] == EXT) | table["estimate"].str.startswith("xi*_PPL"))]
    sides = set(mine["side of 1"])
    return len(sides) == 1 and sides <= {"below 1", "above 1"} and mine["estimate"].str.startswith("xi*_PPL").any()


def untestable(table: pd.DataFrame, training: pd.DataFrame, vocab: int) -> str | None:
    """Why the run cannot test a claim about the trained decoder, or None: fewer than two training seeds (no
    interval over seeds), a seed that did not learn (validation loss above half the uniform guess's), or beta_n with
    no length dependence (xi_hat_beta's interval contains 0, the slope of its init)."""
    if len(training) < 2:
        return "one training seed cannot say how much seeds vary: no interval over training seeds"
    if (training["val loss"].isna() | (training["val loss"] >= math.log(vocab) / 2)).any():
        return "a training seed did not learn (validation loss at or above half the uniform guess's log(vocab))"
    beta = _at(table, "trained", "xi_hat_beta")
    if beta["lo"] <= 0 <= beta["hi"]:
        return (f"the per-head multipliers learned no length dependence: xi_hat_beta's interval "
                f"[{beta['lo']:.3f}, {beta['hi']:.3f}] contains 0, the slope of their init")
    return None


NULL_CONTROL = ("the same decoder untrained, every training seed; and i.i.d. N(0, 1) rows of the same n beside the "
                "trained seed's multipliers (the null passes if either passes)")


def _null_passes(table: pd.DataFrame, holds) -> bool:
    return bool(holds(table, "untrained") or holds(table, ARMS[2]))


def side_finding(table: pd.DataFrame, precondition: str | None) -> Finding:
    """The training-side headline (Table 2, nanoGPT rows): xi_hat_Lambda, read off the scores, and xi_hat_beta, the
    exponent of the learned per-head multipliers, both lie below 1 (SIDE_RULE). Below 1 is also what an untrained
    decoder (flat multipliers, xi_hat_Lambda 0.65-0.83) and i.i.d. rows give, so wherever the rule holds its null
    passes it too, and the finding says so."""
    lam, beta = _at(table, "trained", "xi_hat_Lambda"), _at(table, "trained", "xi_hat_beta")
    n_lam, n_beta = _at(table, "untrained", "xi_hat_Lambda"), _at(table, "untrained", "xi_hat_beta")
    iid = _at(table, ARMS[2], "xi_hat_Lambda")
    return decide(
        "xi_hat_Lambda, read off the attention scores, and the exponent xi_hat_beta of the learned inverse "
        "temperature both lie below 1 (Hayase & Karakida Table 2, nanoGPT rows)",
        rule=SIDE_RULE, holds=side_holds(table, "trained"),
        null=Null(NULL_CONTROL, _null_passes(table, side_holds),
                  f"untrained: xi_hat_Lambda {_interval(n_lam)}, xi_hat_beta {_interval(n_beta)}; i.i.d. rows: "
                  f"xi_hat_Lambda {_interval(iid)}"),
        mde=MDE(_half(lam, beta), PAPER_DISTANCE, "in xi",
                "the wider half-width of the two 95% intervals over training seeds, against the distance of Table "
                "2's nanoGPT xi_hat_Lambda nearest 1 (0.69)"),
        evidence=f"trained: xi_hat_Lambda = {_interval(lam)} ({lam['side of 1']}), xi_hat_beta = {_interval(beta)} "
                 f"({beta['side of 1']}) over {int(lam['training seeds'])} training seeds.",
        precondition=precondition)


def agreement_finding(table: pd.DataFrame, precondition: str | None) -> Finding:
    """Beyond the side of 1: xi_hat_Lambda - xi_hat_beta within +-AGREE_WITHIN (Hayase & Karakida §4.5.2). The
    untrained decoder has flat multipliers (xi_hat_beta = 0) beside its xi_hat_Lambda, and i.i.d. rows stand beside
    the trained multipliers: agreement that noise reaches as well does not need the trained scores."""
    diff = _at(table, "trained", DIFFERENCE)
    return decide(
        f"xi_hat_Lambda matches xi_hat_beta to within {AGREE_WITHIN:g} (the 0.5-grid within which Hayase & Karakida "
        "§4.5.2 call the estimates in agreement)",
        rule=AGREE_RULE, holds=agree_holds(table, "trained"),
        null=Null(NULL_CONTROL, _null_passes(table, agree_holds),
                  f"untrained: {DIFFERENCE} = {_interval(_at(table, 'untrained', DIFFERENCE))}; i.i.d. rows: "
                  f"{_interval(_at(table, ARMS[2], DIFFERENCE))}"),
        mde=MDE(_half(diff), AGREE_WITHIN, "in xi",
                f"the half-width of the difference's 95% interval over training seeds: agreement within "
                f"+-{AGREE_WITHIN:g} can be shown only when it is narrower than the band"),
        evidence=f"{DIFFERENCE} = {_interval(diff)} over {int(diff['training seeds'])} training seeds; Table 2's "
                 "nanoGPT cells differ by 0.12 to 0.27.",
        precondition=precondition)


def ppl_finding(table: pd.DataFrame, precondition: str | None) -> Finding:
    """The inference-side headline (Table 2, every cell): xi_hat_Lambda, read past the training window where the
    sweep is read, lies on the same side of 1 as the perplexity-optimal multiplier exponent xi*_PPL at every window
    length past training (PPL_RULE). beta_n holds its last entry there, so the multiplier carries all of the inverse
    temperature's growth past the window."""
    mine = table[(table["arm"] == "trained") & ((table["estimate"] == EXT)
                                                | table["estimate"].str.startswith("xi*_PPL"))]
    null = table[(table["arm"] == "untrained") & ((table["estimate"] == EXT)
                                                  | table["estimate"].str.startswith("xi*_PPL"))]

    def words(rows):
        return "; ".join(f"{r['estimate']} = {_interval(r)} ({r['side of 1']})" for _, r in rows.iterrows())

    return decide(
        "xi_hat_Lambda read past the training window lands on the same side of 1 as the perplexity-optimal "
        "multiplier exponent xi*_PPL at every window length past training (Hayase & Karakida Table 2 and the §3 "
        "sweep, scored by back-half perplexity)",
        rule=PPL_RULE, holds=ppl_holds(table, "trained"),
        null=Null("the same decoder untrained, every training seed", ppl_holds(table, "untrained"), words(null)),
        mde=MDE(_half(*[r for _, r in mine.iterrows()]), PAPER_DISTANCE, "in xi",
                "the widest half-width of the 95% intervals over training seeds, against the distance of Table 2's "
                "nanoGPT xi_hat_Lambda nearest 1 (0.69)"),
        evidence=f"trained: {words(mine)}.",
        precondition=precondition if not mine.empty else "no window length past training was swept")


def cor49_finding(fits: dict[str, dict], cor49: dict) -> Finding:
    """Cor. 4.9 on the three bucket-mean slopes: an identity of the estimators (it holds to rounding on i.i.d.
    noise too), so a software check, not a finding."""
    holds = cor49["holds"]
    return Finding(
        "the bucket-mean slopes satisfy Cor. 4.9, xi_Lambda = xi_alpha - xi_Delta + 1 (Hayase & Karakida Table 2), "
        "an identity of the estimators",
        "check failed" if holds is False else "check passed",
        f"xi_hat_alpha = {fits['alpha']['xi_hat']:.3f}, xi_hat_Delta = {fits['Delta']['xi_hat']:.3f}, so "
        f"xi_alpha - xi_Delta + 1 = {cor49['predicted']:.3f} against xi_hat_Lambda = {fits['Lambda']['xi_hat']:.3f}: "
        f"residual {cor49['residual']:.2e}, tolerance {cor49['tolerance']:.3f}.",
        rule="the residual of Cor. 4.9 lies within the sum of the three slopes' half-IQRs")


def _notes(cfg: StudyConfig, plan: dict[str, Any], training: pd.DataFrame, rows: pd.DataFrame,
           ppl: pd.DataFrame) -> tuple[str, ...]:
    """The budget against the paper's, the n-grid and its ties, and the sweep's best xi per length."""
    beyond = ppl[ppl["n_eval"] > plan["context"]]
    sweep_words = "; ".join(f"n_eval = {int(r['n_eval'])}: best xi = {r['best xi']:g} (ppl ratio to xi = 0: "
                            f"{r['ppl at best / at xi=0']:.3f})" for _, r in beyond.iterrows())
    tie_pct = 100 * float(tie_mask(rows["lambda_n"]).mean())
    return (
        f"Budget {cfg.budget}: {len(training)} training seeds of a {plan['layers']}-layer, {plan['heads']}-head, "
        f"d_model {plan['d_model']} decoder with RoPE (dynamic NTK past the window), each trained "
        f"{int(training['steps'].max())} steps of {plan['batch']} x {plan['context']} bytes of the Python standard "
        "library (bytes tokenizer); Hayase & Karakida train GPT-124M (12 x 12 x 768, GPT-2 BPE, 1024 tokens) 100k "
        "steps of 2048 sequences on SlimPajama/OpenWebText. The null controls are each seed's decoder at its "
        "initialization and i.i.d. N(0, 1) rows of the same n.",
        f"n-grid {plan['n_grid']} (the seed's {{64, ..., 1024}} scaled to the window), {plan['eval_seeds']} "
        f"evaluation seeds x {plan['windows']} validation windows x all layers and heads, the same windows for every "
        f"model; past the window n = {plan['ext_grid']} on {plan['eval_seeds']} x {plan['ext_windows']} windows; "
        f"{tie_pct:.1f}% of the rows are exact ties (log10 Lambda_n > 5) and are excluded from every aggregate.",
        f"Inference-time sweep: xi in {plan['sweep_xi']}, {plan['sweep_windows']} non-overlapping windows of the "
        f"validation split per n_eval (consecutive files joined, not single long documents as PG-19); "
        f"beta_n past the window holds its last entry. Pooled over training seeds: {sweep_words}. The seed runs this "
        "sweep on Qwen-7B, not on the beta_n model; here it scores the multiplier on top of the trained beta_n.",
    )


def _pieces(folder: Path, prefix: str, plan: dict[str, Any]) -> dict[str, pd.DataFrame]:
    def read(name):
        table = pd.read_parquet(folder / f"{prefix}{name}")
        return table if "train_seed" in table else table.assign(train_seed=0)

    return {"beta": read(BETA), "scales": read(HEAD_SCALES), "rows": read(ROWS), "ext": read(EXT_ROWS),
            "sweep": pd.concat([read(f"sweep_{n}.parquet") for n in plan["sweep_lengths"]], ignore_index=True)}


def summarize(folder: Path) -> Section:
    from ..report import plot_temperature as plots

    folder = Path(folder)
    cfg = load_config(folder)
    plan = json.loads((folder / PLAN).read_text())
    trained, untrained = _pieces(folder, "", plan), _pieces(folder, UNTRAINED, plan)
    rows, first = trained["rows"], trained["rows"][trained["rows"]["train_seed"] == 0]
    gaps = pd.read_parquet(folder / GAPS)
    gaps = gaps[gaps["train_seed"] == 0] if "train_seed" in gaps else gaps
    beta0 = trained["beta"][trained["beta"]["train_seed"] == 0]

    # (a) the beta_n fit of the first training seed
    fit = beta_fit(beta0, plan["n_min"], plan["xi_max"], plan["xi_step"])
    io.write_table(folder / "beta_fit", fit)
    plots.plot_beta_fit(beta0, fit, plan["n_min"], folder / "beta_fit")

    # (b) the contact exponents pooled over training seeds, and Cor. 4.9
    table = per_n(first)
    io.write_table(folder / "contact_per_n", table)
    fits = contact_exponents(rows, plan["n_boot"], cfg.seed)
    cor49 = check_cor49(fits["Lambda"], fits["alpha"], fits["Delta"])
    io.write_table(folder / "exponents", exponents_table(fits, cor49, float(fit.loc[fit["mse"].idxmin(), "xi"])))
    plots.plot_bucket_means(table, fits, folder / "contact_exponents")

    # (c) N_n(t) of the representative row of the first training seed
    rep = representative(first, table)
    key = (gaps["seed"] == rep["seed"]) & (gaps["doc"] == rep["doc"]) & (gaps["layer"] == rep["layer"]) & (
        gaps["head"] == rep["head"])
    rep_gaps = np.asarray(gaps.loc[key, "gaps"].iloc[0], dtype=float)
    plots.plot_counting(rep_gaps, float(rep["lambda_n"]), float(rep["contact_gap"]), int(rep["n_keys"]),
                        f"layer {int(rep['layer'])}, head {int(rep['head'])}, eval seed {int(rep['seed'])}, "
                        f"window {int(rep['doc'])}", folder / "counting")

    # (d) the inference-time sweep
    ppl = sweep_table(trained["sweep"])
    io.write_table(folder / "sweep", ppl)
    plots.plot_sweep(ppl, plan["context"], folder / "sweep")

    training = training_table(folder, trained["beta"], trained["scales"], plan["n_min"])
    io.write_table(folder / "training", training)

    # the per-seed estimates of each arm, and their 95% intervals over training seeds
    seeds = {"trained": per_seed(trained, plan), "untrained": per_seed(untrained, plan)}
    # i.i.d. rows have no temperature of their own: they stand beside the trained seed's multipliers, so the null
    # asks whether agreeing with them needs the trained scores at all
    iid = iid_lambda(rows, cfg.seed).merge(seeds["trained"][["train_seed", "xi_hat_beta"]], on="train_seed")
    seeds[ARMS[2]] = iid.assign(**{DIFFERENCE: iid["xi_hat_Lambda"] - iid["xi_hat_beta"]})
    io.write_table(folder / "per_seed", pd.concat([t.assign(arm=a) for a, t in seeds.items()], ignore_index=True))
    comparison = pd.concat([intervals(t, a) for a, t in seeds.items()], ignore_index=True)
    io.write_table(folder / "comparison", comparison)
    vocab = json.loads((folder / "runs" / NAME / "config.json").read_text())["model"]["vocab"]
    why = untestable(comparison, training, vocab)
    learned_only = why if why and not why.startswith("the per-head") else None
    findings = [side_finding(comparison, why), agreement_finding(comparison, why),
                ppl_finding(comparison, learned_only), cor49_finding(fits, cor49)]
    notes = _notes(cfg, plan, training, rows, ppl)
    real_findings, real_tables, real_figures, real_notes = real_part(cfg, folder)
    return section(
        "temperature", folder,
        question="Does the growth exponent xi_Lambda of the upper-tail accumulation scale, read off a trained "
                 "model's attention scores alone, land on the same side of 1 as the exponent of the "
                 "inverse temperature the same model learned, and as the multiplier exponent that minimizes its "
                 "perplexity past the training window, where an untrained model and i.i.d. scores do not?",
        findings=(*findings, *real_findings),
        tables=(Table("comparison", "The estimates the findings compare, per arm (trained decoder; the same decoder "
                                    "untrained, the null; i.i.d. N(0, 1) rows of the same n): mean over training "
                                    "seeds, sd, 95% Student-t interval over training seeds, and the side of 1 where "
                                    "the interval lies. xi_hat_beta is the mean over heads of the exponent of the "
                                    "per-head multiplier s_h beta_n + b_h."),
                Table("per_seed", "The same estimates per training seed and arm."),
                Table("exponents", "Growth exponents pooled over training seeds: xi_hat_Lambda, xi_hat_alpha, "
                                   "xi_hat_Delta (bucket-mean OLS slopes on log log n, half-IQR and 95% interval of "
                                   "the bootstrap over (training seed, layer, head)), Cor. 4.9's xi_alpha - xi_Delta "
                                   "+ 1, and the M2 grid argmin of the first seed's beta_n."),
                Table("contact_per_n", "Per context length n (first training seed): rows, exact ties, and the "
                                       "bucket means of log Lambda_n, log alpha_n and log Delta_n over the non-tied "
                                       "rows."),
                Table("beta_fit", "M2 fit of the first training seed's beta_n to a_1 (log n)^xi on n >= n_min: a_1 "
                                  "and the per-point MSE at each xi of the grid."),
                Table("sweep", "Back-half sliding-window perplexity at each window length n_eval (rows) and "
                               "multiplier exponent xi (columns), pooled over training seeds; n_eval equal to the "
                               "training window is the reference, where m(n; xi) = 1."),
                Table("training", "Each training run and its learned beta_n (init 1) and per-head s_h, b_h."),
                *real_tables),
        figures=(Figure("beta_fit", "Left: the first training seed's learned beta_n over positions n (dots) with the "
                                    "bias-free fits a_1 (log n)^xi at the MSE-optimal xi and at xi = 1; the grey band "
                                    "is n < n_min, left out of the fit. Right: the fit's MSE over xi (log scale), "
                                    "star at the argmin xi*_beta, dotted line at the logarithmic xi = 1."),
                 Figure("contact_exponents", "Bucket means of log Lambda_n, log alpha_n and log Delta_n against "
                                             "log log n (first training seed), with the pooled OLS lines whose "
                                             "slopes are the xi_hat of the exponents table."),
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
