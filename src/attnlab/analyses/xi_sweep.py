"""``attnlab xi-sweep``: back-half sliding-window perplexity of a checkpoint under the length multiplier
m(n; xi) = max(1, log n / log n_train)^xi, swept over xi and the window length n_eval (Hayase & Karakida 2026
§3, Fig. 1a-b, App. A.2).

Per window length n_eval (multiples of n_train) the text is cut into non-overlapping windows of n_eval tokens
(generated text, one document per window, or --text FILE); per xi every attention layer multiplies its logits
by m(n; xi), n the keys each query may attend, through the attention site (``hooks.substituted`` with a
``LengthScale``: at xi = 0 the forward is bit-identical to the model's own), optionally with dynamic-NTK RoPE
(``hooks.dynamic_ntk``: the RoPE base rescaled once per n_eval, App. A.2). Each window scores its back half
only, the tokens j in (n_eval/2, n_eval], so that every scored token sees at least n_eval/2 tokens before it;
the loss is the mean over windows of each window's mean cross-entropy there, the perplexity its exp.

n_train is the length the multiplier and the RoPE rescale start from: the config's max_position_embeddings
unless --n-train says otherwise, since models are often trained at shorter contexts than their config allows.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from attnlab import hooks, options
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
)
from attnlab.analyses.sections import register
from attnlab.analyses.temperature import token_windows
from attnlab.devices import model_device
from attnlab.io import check_output, write_json, write_parquet, write_table
from attnlab.options import command_line, option
from attnlab.progress import progress as progress_of
from attnlab.report.sections import Section, Table
from attnlab.site import DEFAULT_BLOCK

ROPES = ("plain", "dynamic")
MIN_WINDOW = 4  # the shortest window whose back half holds two scored tokens


@dataclass(frozen=True, kw_only=True)
class XiSweepConfig(CheckpointRun):
    xi: tuple[float, ...] = option(
        (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0),
        "exponents xi of the multiplier m(n; xi) = max(1, log n / log n_train)^xi",
        metavar="XI",
        type=options.finite,
    )
    ratios: tuple[float, ...] = option(
        (1.0, 2.0, 4.0),
        "window lengths n_eval as multiples of n_train (rounded to whole tokens)",
        metavar="R",
        type=options.positive,
    )
    n_train: int | None = option(
        None,
        "the training context n_train where m(n; xi) and the dynamic RoPE start "
        "(default: the config's max_position_embeddings)",
        metavar="N",
    )
    rope: tuple[str, ...] = option(
        ("plain",),
        "plain (the model's own RoPE) and/or dynamic (dynamic-NTK RoPE: "
        "the base rescaled per n_eval, Hayase & Karakida 2026 App. A.2)",
        choices=ROPES,
    )
    text: str | None = option(
        None,
        "UTF-8 text file cut into non-overlapping windows of n_eval tokens (default: "
        "generated text, one document per window)",
        metavar="FILE",
    )
    windows: int = option(4, "windows per n_eval", metavar="N")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_count("windows", self.windows)
        if self.n_train is not None:
            check_count("n_train", self.n_train, 2)
        if not _distinct(self.xi) or not all(math.isfinite(x) and x >= 0 for x in self.xi):
            raise RunError(f"--xi takes distinct finite exponents >= 0, got {list(self.xi)}")
        if not _distinct(self.ratios) or not all(math.isfinite(r) and r > 0 for r in self.ratios):
            raise RunError(f"--ratios takes distinct finite multiples > 0, got {list(self.ratios)}")
        if not _distinct(self.rope) or not set(self.rope) <= set(ROPES):
            raise RunError(f"--rope takes distinct values among {', '.join(ROPES)}, got {list(self.rope)}")
        if self.text is not None:
            read_text(self.text, "--text")


def _distinct(values: Sequence) -> bool:
    return len(values) > 0 and len(set(values)) == len(values)


def training_length(model, n_train: int | None) -> int:
    """--n-train, else the config's max_position_embeddings."""
    found = n_train or context_length(model)
    if found is None:
        raise RunError("the model's config has no max_position_embeddings; pass --n-train")
    return found


def eval_lengths(ratios: Sequence[float], n_train: int) -> list[int]:
    """n_eval = ratio x n_train, rounded, in the order given; each at least ``MIN_WINDOW`` tokens, all distinct."""
    lengths = [round(r * n_train) for r in ratios]
    short = [f"{r:g}" for r, n in zip(ratios, lengths, strict=True) if n < MIN_WINDOW]
    if short:
        raise RunError(
            f"--ratios {' '.join(short)} x n_train {n_train} give windows shorter than {MIN_WINDOW} tokens; raise them"
        )
    if len(set(lengths)) != len(lengths):
        raise RunError(
            f"--ratios give the window lengths {lengths} at n_train {n_train}, with repeats; pass ratios "
            "that round to distinct lengths"
        )
    return lengths


def back_half_losses(model, windows: Sequence[Sequence[int]], device: str) -> list[dict]:
    """Per window of n_eval tokens: the summed cross-entropy of its back half, the tokens j in (n_eval/2, n_eval]
    (1-based), each predicted from the n_eval // 2 or more tokens before it, and their count (Hayase & Karakida 2026
    App. A.2). The model reads the first n_eval - 1 tokens: the last one is only ever a target."""
    records = []
    with torch.no_grad():
        for i, ids in enumerate(windows):
            x = torch.tensor([list(ids)], device=device)
            scored = len(ids) - len(ids) // 2
            logits = model(input_ids=x[:, :-1], logits_to_keep=scored).logits[0]
            nll = F.cross_entropy(logits.float(), x[0, -scored:], reduction="none")
            records.append({"window": i, "loss_sum": float(nll.double().sum()), "tokens": scored})
    return records


def _setting(n_eval: int, rope: str, xi: float, n_train: int) -> tuple[int, str, float]:
    """What a forward at (n_eval, rope, xi) computes: a window no longer than n_train has m(n; xi) = 1 on every
    row and rho = 1, so every (rope, xi) there is the plain xi = 0 forward."""
    return (n_eval, rope, xi) if n_eval > n_train else (n_eval, "plain", 0.0)


def sweep(
    model,
    windows: Mapping[int, Sequence[Sequence[int]]],
    xis: Sequence[float],
    ropes: Sequence[str],
    n_train: int,
    *,
    device: str = "cpu",
    block: int = DEFAULT_BLOCK,
    progress: bool = False,
) -> pd.DataFrame:
    """One record per (n_eval, rope, xi, window): the back-half loss sum and token count of the window with
    m(n; xi) on every attention layer (and dynamic-NTK RoPE for rope "dynamic"); ``windows`` maps n_eval to
    its token windows."""
    done: dict[tuple[int, str, float], list[dict]] = {}
    cells = [(n_eval, rope, float(xi)) for n_eval in windows for rope in ropes for xi in xis]
    records = []
    for n_eval, rope, xi in progress_of(cells, desc="xi-sweep", unit="cell", enabled=progress):
        setting = _setting(n_eval, rope, xi, n_train)
        if setting not in done:
            scale = hooks.LengthScale(setting[2], n_train)
            positions = (
                hooks.dynamic_ntk(model, n_train, n_eval) if setting[1] == "dynamic" else contextlib.nullcontext()
            )
            with positions, hooks.substituted(model, None, length_scale=scale, block=block):
                done[setting] = back_half_losses(model, windows[n_eval], device)
        records += [{"n_eval": n_eval, "rope": rope, "xi": xi, **r} for r in done[setting]]
    return pd.DataFrame(records)


def sweep_table(per_window: pd.DataFrame) -> pd.DataFrame:
    """Per (n_eval, rope, xi): the back-half loss (the mean over windows of each window's mean cross-entropy,
    Hayase & Karakida 2026 App. A.2), its perplexity exp(loss), the loss's standard error over windows, and the
    windows and scored tokens behind it."""
    nll = per_window.assign(nll=per_window["loss_sum"] / per_window["tokens"])
    table = (
        nll.groupby(["n_eval", "rope", "xi"], sort=False)
        .agg(loss=("nll", "mean"), se=("nll", "sem"), windows=("nll", "size"), tokens=("tokens", "sum"))
        .reset_index()
    )
    table.insert(4, "ppl", np.exp(table["loss"]))
    return table.rename(columns={"loss": "back-half loss", "se": "loss se"})


def parabola_min(xi: np.ndarray, loss: np.ndarray) -> float:
    """xi* of the parabola through the grid argmin and its two neighbours: the minimum between grid points
    (NaN where the argmin is at the grid's edge or every loss ties)."""
    i = int(np.argmin(loss))
    if not 0 < i < len(xi) - 1 or np.ptp(loss) == 0:
        return math.nan
    a, b, _ = np.polyfit(xi[i - 1 : i + 2], loss[i - 1 : i + 2], 2)
    return float(-b / (2 * a))


def best_xi(table: pd.DataFrame) -> pd.DataFrame:
    """Per (n_eval, rope): the grid argmin xi of the back-half loss (none where every xi ties, as in a window
    no longer than n_train), its perplexity over the one at xi = 0, and xi* of ``parabola_min``."""
    lines = []
    for (n_eval, rope), g in table.groupby(["n_eval", "rope"], sort=False):
        g = g.sort_values("xi")
        xi, loss = g["xi"].to_numpy(float), g["back-half loss"].to_numpy(float)
        tied = np.ptp(loss) == 0
        at = g.iloc[int(np.argmin(loss))]
        zero = g.loc[g["xi"] == 0, "ppl"]
        lines.append(
            {
                "n_eval": n_eval,
                "rope": rope,
                "best xi": math.nan if tied else float(at["xi"]),
                "ppl at best": float(at["ppl"]),
                "ppl at best / at xi=0": float(at["ppl"] / zero.iloc[0]) if len(zero) else math.nan,
                "xi* (parabola)": parabola_min(xi, loss),
            }
        )
    return pd.DataFrame(lines)


def summary_lines(best: pd.DataFrame, n_train: int) -> str:
    """One line per (n_eval, rope) past n_train: the best xi and what it gains over xi = 0."""
    lines = [f"n_train = {n_train}: m(n; xi) = 1 and rho = 1 up to it, so windows no longer than it tie every xi"]
    for _, r in best.iterrows():
        if math.isnan(r["best xi"]):
            continue
        gain, vertex = r["ppl at best / at xi=0"], r["xi* (parabola)"]
        lines.append(
            f"n_eval {int(r['n_eval'])} ({r['rope']} RoPE): best xi {r['best xi']:g} on the grid"
            + (" (its edge)" if math.isnan(vertex) else f", xi* {vertex:.2f} (parabola)")
            + f", ppl {r['ppl at best']:.3f}"
            + ("" if math.isnan(gain) else f" = {gain:.4f} x its ppl at xi = 0")
        )
    return "\n".join(lines)


def run(cfg: XiSweepConfig, out: str | Path, *, progress: bool = True, overwrite: bool = False) -> dict:
    """Sweep and write xi_sweep.csv/.md (per n_eval, rope and xi), best_xi.csv/.md (per n_eval and rope),
    windows.parquet (one record per window) and config.json. Returns {"table", "best", "summary", ...}."""
    check_output(out, settings(cfg), overwrite=overwrite, what="attnlab xi-sweep")
    model, tokenizer = load(cfg.model, cfg.device, cfg.dtype)
    n_train = training_length(model, cfg.n_train)
    lengths = eval_lengths(cfg.ratios, n_train)
    if "dynamic" in cfg.rope:
        hooks.rope_tables(model)  # a model without plain RoPE fails here, before any forward
    windows = {n: token_windows(tokenizer, n, cfg.windows, seed=cfg.seed, bos=cfg.bos, text=cfg.text) for n in lengths}
    config = {
        **asdict(cfg),
        "n_train_used": n_train,
        "n_eval": lengths,
        "model_type": model.config.model_type,
        "windows_per_n_eval": {n: len(w) for n, w in windows.items()},
        **model_record(cfg, model),
    }
    with staged_output(out) as stage:
        per_window = sweep(
            model, windows, cfg.xi, cfg.rope, n_train, device=model_device(model), block=cfg.block, progress=progress
        )
        table = sweep_table(per_window)
        best = best_xi(table)
        write_parquet(stage / "windows.parquet", per_window, metadata=json.loads(json.dumps(config, default=str)))
        write_table(stage / "xi_sweep", table)
        write_table(stage / "best_xi", best)
        write_json(stage / "config.json", json.loads(json.dumps(config, default=str)))
    final = Path(out)
    return {
        "table": table,
        "best": best,
        "summary": summary_lines(best, n_train),
        "b_auto": None,
        "paths": {
            k: final / f
            for k, f in (
                ("table", "xi_sweep.csv"),
                ("best", "best_xi.csv"),
                ("windows", "windows.parquet"),
                ("config", "config.json"),
            )
        },
    }


@register("xi-sweep", "xi_sweep.csv", XiSweepConfig)
def report_section(folder: Path, config: dict) -> Section:
    """The back-half perplexity sweep over xi (Hayase & Karakida 2026 §3, Fig. 1a-b, App. A.2)."""
    return Section(
        study="xi-sweep",
        title=f"Inverse-temperature sweep of {config['model']}",
        source="Hayase & Karakida 2026",
        question="Which exponent xi of the length multiplier m(n; xi) = max(1, log n / log n_train)^xi minimizes "
        "back-half perplexity past the training length?",
        command=command_line("xi-sweep", XiSweepConfig, config, str(folder)),
        tables=(
            Table(
                "best_xi",
                "Per n_eval and RoPE: the grid argmin xi, its perplexity against xi = 0's, and "
                "xi* of the parabola through the argmin and its neighbours.",
            ),
            Table(
                "xi_sweep",
                "Per n_eval, RoPE and xi: back-half loss (mean over windows), perplexity, the "
                "loss's standard error over windows, windows and scored tokens.",
            ),
        ),
        notes=(f"n_train = {config['n_train_used']}; windows per n_eval: {config['windows_per_n_eval']}.",),
    )
