"""``attnlab temperature``: how a checkpoint's critical inverse temperature grows with context (Hayase &
Karakida 2026 §4.5).

As Hayase & Karakida 2026 App. G.1 acquires rows: one forward per document of max(n) tokens, and per document, layer
and head one score row at each context length n of the grid, the query at position n - 1 (which sees n
keys). With ``--rope dynamic`` the forward runs under dynamic-NTK RoPE at n_eval = max(n), the base rescaled once
for the window and held fixed inside it (App. A.2), so the grid may pass the model's training window as App. G.1
reads Qwen (n = n_eval x {1/4, 1/2, 3/4, 1}, one fit per n_eval). Each row gives the contact triple (Lambda_n, alpha_n,
Delta_n) of Definitions 4.3 to 4.5 at
tolerance eps. Per n the table gives the bucket means of log Lambda_n, log alpha_n and log Delta_n over
non-tied rows (exact ties, log10 Lambda_n > 5, are excluded and counted); xi_hat_X is the OLS slope of
those bucket means on log log n, with half the IQR of B bootstrap resamples over (layer, head) (§4.5.1),
and Cor. 4.9's identity xi_Lambda = xi_alpha - xi_Delta + 1 is checked on the three estimates.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab import hooks, options, tasks
from attnlab.analyses.readout import FLAGS, Reading, read_rows, read_tables
from attnlab.analyses.run import (
    CheckpointRun,
    RunError,
    check_count,
    context_length,
    load,
    model_record,
    read_text,
    settings,
    staged_output,
    suite_prompts,
    with_bos,
)
from attnlab.analyses.sections import register
from attnlab.devices import model_device
from attnlab.diagnostics import RowOptions
from attnlab.diagnostics.paired import t_quantile
from attnlab.diagnostics.stats import UNREADABLE, ExponentFit, check_cor49, exponent, tie_mask
from attnlab.diagnostics.stream import RowStatsCollector
from attnlab.io import check_output, write_json, write_table
from attnlab.options import command_line, option
from attnlab.report.sections import Section, Table

TEXT = "text"
NOVEL = "novel"
ROPES = ("plain", "dynamic")
TRIPLE = {"Lambda": "lambda_n", "alpha": "alpha_n", "Delta": "contact_gap"}


@dataclass(frozen=True, kw_only=True)
class TemperatureConfig(CheckpointRun):
    n: tuple[int, ...] = option((128, 256, 512, 1024), "context lengths of the grid", metavar="N")
    suite: str = option(
        TEXT,
        "text (generated, or --text FILE), novel (the bundled public-domain novel, cut into "
        "documents) or a suite with exact lengths (induction, copying)",
    )
    rope: str = option(
        "plain",
        "plain (the model's own RoPE; n within its context) or dynamic (dynamic-NTK RoPE at "
        "n_eval = max(n), Hayase & Karakida 2026 App. A.2: n may pass the context)",
        choices=ROPES,
    )
    text: str | None = option(None, "UTF-8 text file cut into documents of max(n) tokens", metavar="FILE")
    docs: int = option(4, "documents", metavar="N")
    eps: float = option(1e-6, "tolerance of the contact gap", type=options.finite)
    n_boot: int = option(200, "bootstrap resamples", metavar="B")

    def __post_init__(self) -> None:
        super().__post_init__()
        distinct = len(set(self.n)) == len(self.n)
        if len(self.n) < 2 or not distinct or not all(isinstance(n, int) and n >= 2 for n in self.n):
            raise RunError(f"--n takes at least two distinct context lengths >= 2, got {list(self.n)}")
        for name in ("docs", "n_boot"):
            check_count(name, getattr(self, name))
        if not (math.isfinite(self.eps) and self.eps >= 0):
            raise RunError(f"--eps must be a finite number >= 0, got {self.eps!r}")
        if self.text is not None and self.suite != TEXT:
            raise RunError("--text gives the documents of --suite text; drop one of them")
        if self.rope not in ROPES:
            raise RunError(f"--rope takes one of {', '.join(ROPES)}, got {self.rope!r}")


def documents(model, tokenizer, cfg: TemperatureConfig) -> list[tuple[int, ...]]:
    """``cfg.docs`` token sequences of max(n) tokens: windows of the --text file or of the bundled novel,
    generated text (one seed per document), or prompts of a registered suite built at that length."""
    need = max(cfg.n)
    limit = context_length(model)
    if cfg.rope == "plain" and limit is not None and need > limit:
        raise RunError(
            f"--n reaches {need} tokens but the model's context is {limit}; lower --n, or pass --rope "
            "dynamic to read past the context under dynamic-NTK RoPE"
        )
    if cfg.suite == NOVEL:
        return token_windows(tokenizer, need, cfg.docs, seed=cfg.seed, bos=cfg.bos, text=tasks.novel_path())
    if cfg.suite != TEXT:
        prompts = suite_prompts(model, tokenizer, cfg.suite, cfg.docs, seed=cfg.seed, length=need, bos=cfg.bos)
        short = min(len(p.input_ids) for p in prompts)
        if short < need:
            raise RunError(
                f"suite {cfg.suite} built a {short}-token prompt for --n {need}; use --suite text, "
                "induction or copying (exact lengths)"
            )
        return [p.input_ids[:need] for p in prompts]
    return token_windows(tokenizer, need, cfg.docs, seed=cfg.seed, bos=cfg.bos, text=cfg.text)


def token_windows(
    tokenizer, length: int, count: int, *, seed: int, bos: bool, text: str | None
) -> list[tuple[int, ...]]:
    """Up to ``count`` sequences of ``length`` tokens: the first non-overlapping windows of the ``text`` file
    (fewer when the file is short), else ``count`` generated documents, one seed each from ``seed``; with
    ``bos`` each starts with the BOS token."""
    if text is None:
        texts = [tasks.generic_text(2 * length, seed=seed + i) for i in range(count)]
        ids = [
            tuple(with_bos(tokenizer, tokenizer(t, add_special_tokens=True)["input_ids"], bos)[:length]) for t in texts
        ]
        if min(map(len, ids)) < length:
            raise RunError(
                f"the tokenizer made fewer than {length} tokens of {2 * length} generated words; pass --text FILE"
            )
        return ids
    ids = tokenizer(read_text(text, "--text"), add_special_tokens=True)["input_ids"]
    if bos:  # every window, not only the file's first, starts with the BOS token
        ids = with_bos(tokenizer, ids, True)[1:]
    step = length - bos
    windows = [tuple(with_bos(tokenizer, ids[i : i + step], bos)) for i in range(0, len(ids) - step + 1, step)]
    if not windows:
        raise RunError(f"--text {text} has {len(ids)} tokens, fewer than the {length} of one window")
    return windows[:count]


def per_n(rows: pd.DataFrame) -> pd.DataFrame:
    """Per n: rows, exact ties, and the bucket means of log X over non-tied rows with X > 0."""
    lines = []
    for n, g in rows.groupby("n_keys", sort=True):
        tie = tie_mask(g["lambda_n"])
        line = {"n": int(n), "rows": len(g), "ties": int(tie.sum()), "tie %": 100 * float(tie.mean())}
        for name, col in TRIPLE.items():
            x = g[col].to_numpy(dtype=float)[~tie]
            x = x[np.isfinite(x) & (x > 0)]
            line[f"mean log {name}"] = float(np.log(x).mean()) if x.size else np.nan
        lines.append(line)
    return pd.DataFrame(lines)


def contact_fits(rows: pd.DataFrame, n_boot: int, seed: int, unit: tuple[str, ...]) -> dict[str, ExponentFit]:
    """xi_hat of Lambda, alpha and Delta (bucket-mean OLS slopes, exact ties excluded from all three) with B
    bootstrap resamples over the ``unit`` columns (Hayase & Karakida 2026 §4.5.1)."""
    tie = tie_mask(rows["lambda_n"])
    return {
        name: exponent(rows["n_keys"], rows[col], exclude=tie, unit=rows[list(unit)], n_boot=n_boot, seed=seed)
        for name, col in TRIPLE.items()
    }


def exponents_table(fits: dict[str, ExponentFit]) -> pd.DataFrame:
    """The exponents table of ``contact_fits``: one line per coordinate."""
    return pd.DataFrame(
        [
            {
                "exponent": f"xi_{name}",
                "xi_hat": f.xi_hat,
                "half_iqr": f.half_iqr,
                "buckets": f.n_buckets,
                "rows used": int(sum(f.bucket_count)),
                "excluded (ties)": f.n_excluded,
                "invalid": f.n_invalid,
            }
            for name, f in fits.items()
        ]
    )


def exponents(
    rows: pd.DataFrame, n_boot: int, seed: int, unit: tuple[str, ...] = ("layer", "head")
) -> tuple[pd.DataFrame, dict]:
    """xi_hat of Lambda, alpha and Delta with bootstrap half-IQRs over the ``unit`` columns ((layer, head), as
    Hayase & Karakida 2026 §4.5.1 resamples a pretrained model's rows), and Cor. 4.9."""
    fits = contact_fits(rows, n_boot, seed, unit)
    return exponents_table(fits), check_cor49(fits["Lambda"], fits["alpha"], fits["Delta"])


@dataclass(frozen=True)
class RealFit:
    """One model's contact exponents off its own score rows, as the temperature study's real part and the card read
    them (Hayase & Karakida 2026 §4.5.1-4.5.2): ``exponents`` is the xi_hat table with the half-IQR of B bootstrap
    resamples of the documents (§4.5.1's spread) and the 95% interval over documents (lo, hi) of
    ``document_interval``, ``cor49`` its Cor. 4.9 check, ``per_n`` the bucket means per n and ``windowed`` what
    sliding-window layers do to the buckets (None without them)."""

    exponents: pd.DataFrame
    cor49: dict
    per_n: pd.DataFrame
    windowed: str | None

    def _lambda(self, column: str) -> float:
        return float(self.exponents.set_index("exponent").loc["xi_Lambda", column])

    @property
    def xi_hat(self) -> float:
        return self._lambda("xi_hat")

    @property
    def half_iqr(self) -> float:
        return self._lambda("half_iqr")

    @property
    def lo(self) -> float:
        return self._lambda("lo")

    @property
    def hi(self) -> float:
        return self._lambda("hi")


def document_buckets(rows: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What ``document_interval`` reads off ``rows``: the n of the grid, and per document (the ``prompt`` column)
    and n the sum of log X (``column``) over its kept rows and their count, (documents x n) each. Rows are kept as
    ``diagnostics.stats.exponent`` keeps them: exact ties (by Lambda_n) and X NaN, infinite or <= 0 left out; a
    document with no kept row is no document of the fit."""
    x = rows[column].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        keep = ~tie_mask(rows["lambda_n"]) & np.isfinite(x) & (x > 0)
    n = rows["n_keys"].to_numpy(dtype=float)[keep]
    grid = np.unique(n)
    _, doc = np.unique(rows["prompt"].to_numpy()[keep], return_inverse=True)
    docs, cells = int(doc.max(initial=-1)) + 1, len(grid)
    cell = doc * cells + np.searchsorted(grid, n)
    sums = np.bincount(cell, weights=np.log(x[keep]), minlength=docs * cells).reshape(docs, cells)
    counts = np.bincount(cell, minlength=docs * cells).reshape(docs, cells)
    return grid, sums, counts


def _pooled_slope(t: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> float:
    """The OLS slope on t of the bucket means sums / counts, over the buckets with rows; NaN with fewer than two."""
    fit = counts > 0
    if fit.sum() < 2:
        return math.nan
    tc = t[fit] - t[fit].mean()
    return float(tc @ (sums[fit] / counts[fit]) / (tc @ tc))


def document_interval(
    grid: np.ndarray, sums: np.ndarray, counts: np.ndarray, level: float = 0.95
) -> tuple[float, float, float]:
    """(xi_hat, lo, hi) over documents (Hayase & Karakida 2026 §4.5.1's estimator, its interval over the unit of
    replication): xi_hat is the OLS slope on log log n (n in ``grid``) of the bucket means pooled over every
    document's rows (``document_buckets``: the slope ``diagnostics.stats.exponent`` gives), lo and hi its Student-t
    interval at D - 1 degrees of freedom with the jackknife over the D documents as its standard error (leave one
    document out and refit: sqrt((D - 1) / D x the sum of the D refits' squared deviations from their mean)). With
    equal counts the refits are means of the other documents' own slopes, so this is the t-interval over
    per-document slopes, centred on the pooled slope. A percentile bootstrap over the documents covered 80% at 4
    documents and 87-90% at 7 on ``temperature.calibration``'s worlds (it resamples four values and takes their
    spread as known); this interval covers 94-98% there. NaN ends with fewer than two documents or a refit without
    two buckets."""
    t = np.log(np.log(np.asarray(grid, dtype=float)))
    xi = _pooled_slope(t, sums.sum(0), counts.sum(0))
    docs = len(sums)
    if docs < 2 or not math.isfinite(xi):
        return xi, math.nan, math.nan
    total, rows = sums.sum(0), counts.sum(0)
    refits = np.array([_pooled_slope(t, total - sums[d], rows - counts[d]) for d in range(docs)])
    if not np.isfinite(refits).all():
        return xi, math.nan, math.nan
    se = math.sqrt((docs - 1) / docs * float(((refits - refits.mean()) ** 2).sum()))
    half = t_quantile(0.5 + level / 2, docs - 1) * se
    return xi, xi - half, xi + half


def real_fit(rows: pd.DataFrame, n_boot: int, seed: int) -> RealFit:
    """xi_hat of Lambda, alpha and Delta with the half-IQR of B bootstrap resamples of the documents and the 95%
    interval of ``document_interval`` over them, the unit of replication (rows of one document share its tokens;
    (layer, head) of one forward are not independent), Cor. 4.9, the bucket means per n and the sliding-window note:
    everything the temperature study's real part and the card read off one model's rows."""
    fits = contact_fits(rows, n_boot, seed, ("prompt",))
    ends = [document_interval(*document_buckets(rows, col))[1:] for col in TRIPLE.values()]
    table = exponents_table(fits).assign(lo=[lo for lo, _ in ends], hi=[hi for _, hi in ends])
    cor49 = check_cor49(fits["Lambda"], fits["alpha"], fits["Delta"])
    return RealFit(table, cor49, per_n(rows), windowed_note(rows, n_boot, seed))


def contact_rows(
    model, docs: list[tuple[int, ...]], grid, *, eps: float, rope: str, n_train: int | None, progress: bool
) -> pd.DataFrame:
    """The rows ``run`` reads, in memory: per document, layer and head the query at n - 1 for each n of ``grid`` at
    tolerance ``eps``, under dynamic-NTK RoPE at n_eval = max(grid) when ``rope`` says so; unreadable rows dropped."""
    options = RowOptions.make(p=2, eps=eps)
    queries = tuple(sorted(n - 1 for n in grid))
    positions = hooks.dynamic_ntk(model, n_train, max(grid)) if rope == "dynamic" else contextlib.nullcontext()
    with positions:
        rows = read_tables(
            model,
            [Reading(ids, queries) for ids in docs],
            {"contact": RowStatsCollector(options, flags=FLAGS)},
            desc="temperature",
            progress=progress,
        )["contact"]
    return rows[~rows["status"].isin(UNREADABLE)].reset_index(drop=True)


def side_of_one(lo: float, hi: float) -> str:
    """Where an interval lies against 1, the boundary between sub- and super-logarithmic growth (Hayase &
    Karakida §4.5.2): "below 1", "above 1", "contains 1", or "undefined" without a finite interval."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "undefined"
    return "below 1" if hi < 1 else "above 1" if lo > 1 else "contains 1"


def windowed_note(rows: pd.DataFrame, n_boot: int, seed: int) -> str | None:
    """What sliding-window layers do to the buckets: their query at n - 1 sees only its last W keys, so its
    row lands in the bucket n_keys = W, not n. None when every row sees n keys."""
    short = rows["n_keys"] < rows["query"] + 1
    if not short.any():
        return None
    layers = sorted(int(x) for x in rows.loc[short, "layer"].unique())
    windows = sorted(int(x) for x in rows.loc[short, "n_keys"].unique())
    full = rows[~rows["layer"].isin(layers)]
    words = (
        f"{int(short.sum())} of {len(rows)} rows, in layers {layers}, see fewer keys than "
        f"their n (a sliding window: the query at n - 1 attends its last {windows} keys only). Rows are "
        "binned by the keys they see, so those rows join the bucket at the window, and every bucket above "
        "it holds the other layers' rows alone: xi_hat mixes a change of n with a change of layers. "
    )
    if full.empty:
        return words + "No layer sees n keys at every n, so no full-attention fit exists here."
    fit = exponents(full, n_boot, seed)[0].set_index("exponent").loc["xi_Lambda"]
    return words + (
        f"On layers {sorted(int(x) for x in full['layer'].unique())} alone, which see n keys at every "
        f"n, xi_hat_Lambda = {fit['xi_hat']:.3f} (half-IQR {fit['half_iqr']:.3f})."
    )


def summary_line(fits: pd.DataFrame, cor49: dict, n_boot: int, unit: tuple[str, ...]) -> str:
    """xi_hat_Lambda with its half-IQR and Cor. 4.9's xi_alpha - xi_Delta + 1, in one line."""
    xi = fits.set_index("exponent")
    return (
        f"xi_hat_Lambda = {xi.loc['xi_Lambda', 'xi_hat']:.3f} +- {xi.loc['xi_Lambda', 'half_iqr']:.3f} "
        f"(half-IQR, B = {n_boot} over ({', '.join(unit)})); xi_alpha - xi_Delta + 1 = "
        f"{cor49['predicted']:.3f}, residual {cor49['residual']:.2e}"
    )


def run(cfg: TemperatureConfig, out: str | Path, *, progress: bool = True, overwrite: bool = False) -> dict:
    """Read the rows and fit; write temperature.csv/.md (per n), exponents.csv/.md, rows_contact.parquet
    and config.json (with the Cor. 4.9 check). Returns {"table", "exponents", "cor49", "summary", ...}."""
    check_output(out, settings(cfg), overwrite=overwrite, what="attnlab temperature")
    model, tokenizer = load(cfg.model, cfg.device, cfg.dtype)
    docs = documents(model, tokenizer, cfg)
    queries = tuple(sorted(n - 1 for n in cfg.n))
    n_layers, n_heads = hooks.num_heads(model)
    n_train = context_length(model)
    if cfg.rope == "dynamic" and n_train is None:
        raise RunError(
            "--rope dynamic rescales RoPE past the training window, and the model's config has no "
            "max_position_embeddings to give it"
        )
    config = {
        **asdict(cfg),
        "layers": n_layers,
        "heads": n_heads,
        "model_type": model.config.model_type,
        "documents": len(docs),
        "n_train": n_train,
        **model_record(cfg, model),
    }
    positions = hooks.dynamic_ntk(model, n_train, max(cfg.n)) if cfg.rope == "dynamic" else contextlib.nullcontext()
    with staged_output(out) as stage, positions:
        readings = [Reading(ids, queries) for ids in docs]
        paths = read_rows(
            model,
            readings,
            {"contact": RowOptions.make(p=2, eps=cfg.eps)},
            stage,
            config=config,
            device=model_device(model),
            block=cfg.block,
            desc="temperature",
            progress=progress,
        )
        rows = pd.read_parquet(paths["contact"], columns=["layer", "head", "n_keys", "status", *TRIPLE.values()])
        rows = rows[~rows["status"].isin(UNREADABLE)]
        table = per_n(rows)
        fits, cor49 = exponents(rows, cfg.n_boot, cfg.seed)
        config["cor49"] = cor49
        write_table(stage / "temperature", table)
        write_table(stage / "exponents", fits)
        write_json(stage / "config.json", json.loads(json.dumps(config, default=str)))
    summary = summary_line(fits, cor49, cfg.n_boot, ("layer", "head"))
    final = Path(out)
    return {
        "table": table,
        "exponents": fits,
        "cor49": cor49,
        "summary": summary,
        "b_auto": None,
        "paths": {
            k: final / f
            for k, f in (
                ("table", "temperature.csv"),
                ("exponents", "exponents.csv"),
                ("rows", paths["contact"].name),
                ("config", "config.json"),
            )
        },
    }


EXPONENTS_CAPTION = (
    "xi_hat_Lambda, xi_hat_alpha, xi_hat_Delta: OLS slopes of the bucket means of log X on log log n "
    "(Hayase & Karakida 2026 §4.5.1), with the half-IQR of B bootstrap resamples over the units"
)


def cor49_note(config: dict) -> str:
    """Cor. 4.9's check as a report note, from a folder's config.json."""
    cor = config["cor49"]
    return (
        f"Cor. 4.9 (Hayase & Karakida 2026): xi_alpha - xi_Delta + 1 = {cor['predicted']:.3f}, residual "
        f"{cor['residual']:.2e} from xi_hat_Lambda."
    )


@register("temperature", "temperature.csv", TemperatureConfig)
def report_section(folder: Path, config: dict) -> Section:
    """The contact exponents of a checkpoint's own rows (Hayase & Karakida 2026 §4.5.1)."""
    return Section(
        study="temperature",
        title=f"Contact exponents of {config['model']}",
        source="Hayase & Karakida 2026",
        question="How fast do Lambda_n, alpha_n and Delta_n of the checkpoint's own score rows grow with log n?",
        command=command_line("temperature", TemperatureConfig, config, str(folder)),
        tables=(
            Table("exponents", f"{EXPONENTS_CAPTION} (layer, head)."),
            Table(
                "temperature",
                "Per n: rows, exact ties, and the bucket means of log Lambda_n, log alpha_n "
                "and log Delta_n over the non-tied rows.",
            ),
        ),
        notes=(
            f"{config['documents']} documents; per layer and head ({config['layers']} x {config['heads']}) the "
            f"query at n - 1 for n = {config['n']}; {positions_words(config)}.",
            cor49_note(config),
        ),
    )


def positions_words(config: dict) -> str:
    """How the forward placed its tokens: the model's own RoPE, or dynamic NTK at n_eval = max(n) against the
    training window (folders written before --rope existed read plain)."""
    if config.get("rope", "plain") == "plain":
        return "the model's own positions"
    n_eval, n_train = max(config["n"]), config["n_train"]
    return (
        f"dynamic-NTK RoPE at n_eval = {n_eval} = {n_eval / n_train:.3g} x the training window {n_train} "
        "(Hayase & Karakida 2026 App. A.2)"
    )
