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
(e) With ``--model``, §4.5.1 on a pretrained checkpoint as App. G.1 reads Qwen (``temperature_real``).

The study's budgets and file names are in ``temperature_plan``, its findings and their rules in
``temperature_findings``, the steps of ``summarize`` with its tables and figures in ``temperature_section``.

``compute`` writes the raw results: ``real/`` (the temperature command's folder, with ``--model`` only; first,
so a bad model fails before training), ``plan.json`` (the budget), ``runs/beta_n/``, ``runs/beta_n_t1/``, ...
(the trainer's runs, resumable), then per arm (the untrained one prefixed ``untrained_``) ``sweep_<n_eval>``,
``head_scales``, ``beta_n``, ``gaps``, ``ext_rows`` and last ``contact_rows`` (.parquet, a ``train_seed`` column
in each). ``summarize`` derives everything else from those files, the real part from ``real/config.json`` and
its row table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from attnlab import devices, io
from attnlab.batches import DataError
from attnlab.report.sections import Section
from attnlab.studies.runner import Study, load_config, register, section
from attnlab.studies.temperature.findings import edges
from attnlab.studies.temperature.plan import (
    BETA,
    BUDGETS,
    EXT_ROWS,
    GAPS,
    HEAD_SCALES,
    PLAN,
    ROWS,
    UNTRAINED,
    Plan,
    read_plan,
    run_config,
    run_name,
)
from attnlab.studies.temperature.real import compute_real, real_part
from attnlab.studies.temperature.rules import NAMES
from attnlab.studies.temperature.section import (
    FIGURES,
    QUESTION,
    TABLES,
    beta_step,
    budget_notes,
    comparison_step,
    contact_step,
    counting_step,
    findings_step,
    read_arm,
    sweep_step,
    training_step,
)
from attnlab.train.trainer import Trainer


class _ContactRows:
    """Observer of the decoder's score blocks: per layer and grid point n, the row of the query at
    position n - 1 over its n keys (all of them allowed), in float64 (Hayase & Karakida App. G.1)."""

    def __init__(self, n_grid: Sequence[int]) -> None:
        self.n_grid = n_grid
        self.rows: list[tuple[int, int, Any]] = []

    def __call__(self, block) -> None:
        for n in self.n_grid:
            local = n - 1 - block.first_position
            if 0 <= local < block.scores.shape[2]:
                self.rows.append((block.layer, n, block.scores[:, :, local, :n].double().cpu()))


def contact_rows(model, tokens: np.ndarray, plan: Plan, seed: int, device) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-row contact triples at every (evaluation seed, window, layer, head, n), and the sorted gaps
    z* - z of the rows at the largest n (for the N_n(t) figure). Evaluation seed s draws ``windows``
    windows of max(n) validation tokens (App. F: independent validation batches per seed)."""
    import torch

    from attnlab.diagnostics.gaps import gap_stats

    need = max(plan.n_grid)
    records, gap_records = [], []
    model.eval()
    for s in range(plan.eval_seeds):
        starts = np.random.default_rng([seed, 1000 + s]).integers(0, len(tokens) - need, size=plan.windows)
        ids = torch.from_numpy(np.stack([tokens[a : a + need] for a in starts]).astype(np.int64)).to(device)
        observer = _ContactRows(plan.n_grid)
        with model.observed(observer), torch.no_grad():
            model(ids)
        for layer, n, z in observer.rows:
            docs, heads = z.shape[0], z.shape[1]
            stats = gap_stats(z.reshape(-1, n), torch.full((docs * heads,), n), eps=plan.eps)
            doc, head = np.divmod(np.arange(docs * heads), heads)
            records.append(
                pd.DataFrame(
                    {
                        "seed": s,
                        "doc": doc,
                        "layer": layer,
                        "head": head,
                        "n_keys": n,
                        "query": n - 1,
                        **{k: v.numpy() for k, v in stats.items()},
                    }
                )
            )
            if n == need:
                gaps = (z.amax(-1, keepdim=True) - z).reshape(-1, n).sort(-1).values.numpy()
                gap_records.append(
                    pd.DataFrame({"seed": s, "doc": doc, "layer": layer, "head": head, "gaps": list(gaps)})
                )
    return pd.concat(records, ignore_index=True), pd.concat(gap_records, ignore_index=True)


def back_half_losses(model, tokens: np.ndarray, n_eval: int, windows: int, batch: int, device) -> pd.DataFrame:
    """Per window: the summed cross-entropy of the back half (positions n_eval/2 .. n_eval - 1, each
    conditioned on >= n_eval/2 tokens) and its token count (Hayase & Karakida App. A.2). The windows are
    non-overlapping, spread evenly over the token array, the same for every xi."""
    import torch
    import torch.nn.functional as F

    available = (len(tokens) - 1) // n_eval
    if available < windows:
        raise DataError(
            f"the validation split holds {available} windows of {n_eval} tokens, fewer than "
            f"{windows}; lower sweep_windows or sweep_lengths"
        )
    starts = (np.arange(windows) * available // windows) * n_eval
    half = n_eval // 2
    out = []
    model.eval()
    with torch.no_grad():
        for i in range(0, windows, batch):
            chunk = np.stack([tokens[a : a + n_eval + 1] for a in starts[i : i + batch]]).astype(np.int64)
            x = torch.from_numpy(chunk).to(device)
            logits = model(x[:, :-1])[:, half:]
            ce = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(), x[:, 1:][:, half:].reshape(-1), reduction="none"
            ).view(len(chunk), -1)
            out += [
                {"window": i + j, "start": int(starts[i + j]), "loss_sum": float(v), "tokens": n_eval - half}
                for j, v in enumerate(ce.sum(-1).tolist())
            ]
    return pd.DataFrame(out)


def sweep_model(trained, xi: float):
    """The trained decoder with m(n; xi) on every head's logits, after its own beta_n (App. A.2)."""
    from attnlab.model.decoder import Decoder

    cfg = trained.cfg
    model = Decoder(dataclasses.replace(cfg, rowmap=f"logn_xi{xi:g}_n{cfg.context}"))
    model.load_state_dict(trained.state_dict())
    return model.to(next(trained.parameters()).device)


def untrained_model(plan: Plan, seed: int, device):
    """The decoder the training run of ``seed`` starts from: the trainer seeds torch, then builds it (the null
    control of every exponent: what an initialization gives before any learning)."""
    import torch

    from attnlab.model.decoder import Decoder

    run = run_config(plan, seed)
    torch.manual_seed(run.train.seed)
    return Decoder(run.model).to(device).eval()


def read_model(model, val: np.ndarray, plan: Plan, seed: int, device) -> dict[str, pd.DataFrame]:
    """Everything the summary reads off one decoder: its beta_n and per-head s_h, b_h; the contact rows on the
    n-grid (and the sorted gaps at the largest n); the contact rows past the training window (``ext_grid``, the
    query at n - 1 of windows of max(ext_grid) tokens, beta_n holding its last entry there); the back-half
    sweep per window length and xi."""
    scalers = [block.attn.scaler for block in model.layers]
    beta = model.beta_n.detach().cpu().double().numpy()
    rows, gaps = contact_rows(model, val, plan, seed, device)
    ext, _ = contact_rows(
        model, val, dataclasses.replace(plan, n_grid=plan.ext_grid, windows=plan.ext_windows), seed, device
    )
    parts = []
    for n_eval in plan.sweep_lengths:
        for xi in plan.sweep_xi:
            part = back_half_losses(sweep_model(model, xi), val, n_eval, plan.sweep_windows, plan.sweep_batch, device)
            parts.append(part.assign(n_eval=n_eval, xi=float(xi)))
    return {
        "beta": pd.DataFrame({"n": np.arange(1, len(beta) + 1), "beta_n": beta}),
        "scales": pd.DataFrame(
            [
                {"layer": i, "head": h, "s": float(sc.s[h].detach()), "b": float(sc.b[h].detach())}
                for i, sc in enumerate(scalers)
                for h in range(len(sc.s))
            ]
        ),
        "rows": rows,
        "gaps": gaps,
        "ext": ext,
        "sweep": pd.concat(parts, ignore_index=True),
    }


def _write(folder: Path, prefix: str, pieces: list[dict[str, pd.DataFrame]], plan: Plan) -> None:
    """The pieces of every training seed, each table with its train_seed column, into the study's files."""

    def joined(key):
        return pd.concat([p[key].assign(train_seed=k) for k, p in enumerate(pieces)], ignore_index=True)

    sweep = joined("sweep")
    for n_eval in plan.sweep_lengths:
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
        plan = read_plan(folder)
    else:
        io.write_json(folder / PLAN, dataclasses.asdict(plan))
    if (folder / ROWS).is_file() and (folder / f"{UNTRAINED}{ROWS}").is_file():
        return
    trained, untrained = [], []
    for k in range(plan.train_seeds):
        run = devices.training(run_config(plan, cfg.seed + k), cfg.dtype, cfg.device)
        trainer = Trainer(run, folder / "runs" / run_name(k), resume=True, progress=progress, device=cfg.device)
        trainer.run()
        device, val = trainer.world.device, trainer.stream.val_tokens
        trained.append(read_model(trainer.model.eval(), val, plan, cfg.seed, device))
        untrained.append(read_model(untrained_model(plan, cfg.seed + k, device), val, plan, cfg.seed, device))
    _write(folder, UNTRAINED, untrained, plan)
    _write(folder, "", trained, plan)


def summarize(folder: Path) -> Section:
    """The section, from the files ``compute`` wrote alone: (a) to (d) on the trained decoder, the per-seed
    estimates of both arms and the i.i.d. rows with the findings that compare them, then the real part (e), each
    step writing its tables and figures (``temperature_section``)."""
    folder = Path(folder)
    cfg = load_config(folder)
    plan = read_plan(folder)
    trained, untrained = read_arm(folder, "", plan), read_arm(folder, UNTRAINED, plan)
    fit = beta_step(folder, trained["beta"], plan)
    table, fits, cor49 = contact_step(folder, trained["rows"], plan, cfg.seed, fit)
    counting_step(folder, trained["rows"], table)
    ppl = sweep_step(folder, trained["sweep"], plan)
    training = training_step(folder, trained, plan)
    comparison, seeds = comparison_step(folder, trained, untrained, plan, cfg.seed)
    edge = edges(trained["sweep"], plan.context)
    findings = findings_step(folder, comparison, seeds, training, fits, cor49, edge, cfg.budget)
    notes = budget_notes(cfg, plan, training, trained["rows"], ppl)
    real = real_part(cfg, folder)
    return section(
        "temperature",
        folder,
        question=QUESTION,
        findings=(*findings, *real.findings),
        tables=(*TABLES, *real.tables),
        figures=(*FIGURES, *real.figures),
        notes=(*notes, *real.notes),
    )


STUDY = register(
    Study(
        name="temperature",
        title="Critical scaling of the inverse temperature",
        source="Hayase & Karakida 2026",
        compute=compute,
        summarize=summarize,
        takes_model=True,
        findings=NAMES,
    )
)
