"""``attnlab matched``: the matched argmax-concentration diagnostic (Polynomial Concentration §5.5, Tables 4-5,
App. P-R, Tables 12-13).

The head set is fixed once from a group-ablation ranking: the top-K heads of an ``attnlab ablate`` folder
(the paper's causal K = 40), or heads given by hand. The rows are the final-query rows of each prompt, the
ones that answer, read against their argmax. Per ReLU recipe (its p and b), over all heads and over the
head set: the measured-safe share (S_p < 1), the predicted-safe share (p >= p*, Cor. 4.3), the eps-relaxed
measured-safe share (S_p < 1 + eps, App. P) and FN, the rows the bound passes that are measured unsafe
(strict, and under eps), each share with a prompt-level bootstrap interval (App. R). The recipe-matched
head set of App. Q, the K heads with the highest median S_p at each recipe's own (p, b), is an option.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab import hooks, options, rowmaps
from attnlab.analyses.readout import prompt_reading, read_rows
from attnlab.analyses.run import (
    RunError,
    SuiteRun,
    biases,
    calibration_record,
    check_count,
    load,
    model_record,
    prompt_record,
    run_prompts,
    settings,
    staged_output,
)
from attnlab.analyses.sections import register
from attnlab.devices import model_device
from attnlab.diagnostics import RowOptions
from attnlab.diagnostics.rows import SPECIAL
from attnlab.diagnostics.stats import bootstrap_fraction
from attnlab.io import check_output, write_json, write_table
from attnlab.options import command_line, option
from attnlab.report.sections import Section, Table

Head = tuple[int, int]
RECIPES = ("relu_p2_b0", "relu_p2_bauto", "relu_p4_bauto", "relu_p8_bauto")  # Table 5's recipes per model


def relu_cell(name: str) -> tuple[float, str]:
    """(p, b as typed: "0", "auto", "3.5") of a ReLU recipe name; RunError for any other map."""
    try:
        rm = rowmaps.get(name)
    except ValueError as exc:
        raise RunError(str(exc)) from None
    if rm.family != "relu_p":
        raise RunError(f"--recipes takes ReLU recipes relu_p<p>_b<b> (the matched diagnostic reads S_p), got {name!r}")
    return rm.params["p"], name.rsplit("_b", 1)[1]


def parse_heads(specs: tuple[str, ...]) -> list[Head]:
    """LAYER.HEAD strings as (layer, head) pairs."""
    heads = []
    for spec in specs:
        layer, _, head = spec.partition(".")
        if not (layer.isdigit() and head.isdigit()):
            raise RunError(f"--heads takes LAYER.HEAD pairs such as 3.7, got {spec!r}")
        heads.append((int(layer), int(head)))
    if len(set(heads)) != len(heads):
        raise RunError(f"--heads has repeated heads: {list(specs)}")
    return heads


def ranked_heads(folder: str | Path, k: int) -> list[Head]:
    """The top-``k`` heads of an ``attnlab ablate`` folder's ranking.csv (rank 1 first, unranked heads never)."""
    path = Path(folder) / "ranking.csv"
    try:
        ranking = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise RunError(
            f"--ranking {folder}: cannot read its ranking.csv ({exc}); pass an attnlab ablate folder"
        ) from None
    if not {"layer", "head", "rank", "ranked"} <= set(ranking.columns):
        raise RunError(f"--ranking {path} is not an attnlab ablate ranking (needs layer, head, rank, ranked)")
    ranked = ranking[ranking["ranked"].astype(bool)].sort_values("rank")
    if len(ranked) < k:
        raise RunError(f"--k {k} exceeds the {len(ranked)} ranked heads of {path}")
    return [(int(layer), int(head)) for layer, head in zip(ranked["layer"][:k], ranked["head"][:k], strict=True)]


K = 40  # Table 5's head-set size


@dataclass(frozen=True, kw_only=True)
class MatchedConfig(SuiteRun):
    ranking: str | None = option(
        None, "an attnlab ablate folder whose ranking fixes the head set: its top --k heads", metavar="DIR"
    )
    heads: tuple[str, ...] = option(
        (), "the head set by hand, as LAYER.HEAD pairs, instead of --ranking", metavar="L.H"
    )
    k: int | None = option(
        None, f"K, the size of the head set taken from --ranking (default {K}); not with --heads", metavar="K"
    )
    recipes: tuple[str, ...] = option(RECIPES, "ReLU recipes relu_p<p>_b<b>, one (p, b) cell each", metavar="NAME")
    substitution: str | None = option(
        None,
        "an attnlab substitute folder on the same model and suite: each recipe's accuracy and delta go beside its cell",
        metavar="DIR",
    )
    recipe_matched: bool = option(
        False,
        "add App. Q's recipe-matched head set: the K heads with the highest "
        "median S_p at each recipe's own (p, b) on these rows",
    )
    target: str = option(
        "argmax",
        "the key S_p is measured for: each row's argmax (Table 5), or the planted answer "
        "(App. S, Table 14: rows then split into all, argmax-only and top-K "
        "argmax-only, beside the answer's top-1 and dead shares)",
        choices=("argmax", "answer"),
    )
    eps: float = option(1e-6, "tolerance of the eps-relaxed columns (App. P)", type=options.finite)
    n_boot: int = option(1000, "prompt-level bootstrap resamples (App. R)", metavar="B")

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.ranking is None) == (not self.heads):
            raise RunError("give the head set by --ranking ABLATE_DIR or by --heads L.H ..., one of them")
        if self.heads and self.k is not None:
            raise RunError(
                f"--k {self.k} sizes the head set taken from --ranking; with --heads the set is the "
                f"{len(self.heads)} pairs given: drop --k"
            )
        if self.k is None and self.ranking is not None:
            object.__setattr__(self, "k", K)
        if self.k is not None:
            check_count("k", self.k)
        check_count("n_boot", self.n_boot)
        if not self.recipes or len(set(self.recipes)) != len(self.recipes):
            raise RunError(f"--recipes takes distinct ReLU recipes, got {list(self.recipes)}")
        for name in self.recipes:
            relu_cell(name)
        parse_heads(self.heads)
        if not (self.eps >= 0):
            raise RunError(f"--eps must be >= 0, got {self.eps!r}")
        if self.target not in ("argmax", "answer"):
            raise RunError(f"--target takes argmax or answer, got {self.target!r}")


def shares(rows: pd.DataFrame, p: float, n_boot: int, seed: int) -> dict:
    """Measured-safe, predicted-safe and eps-safe % with prompt-bootstrap intervals, and the FN counts."""
    d = f"{p:g}"
    line: dict = {"n": len(rows)}
    for label, column in (("meas", f"safe_p{d}"), ("pred", f"pred_safe_p{d}"), ("eps", f"safe_eps_p{d}")):
        point, lo, hi = bootstrap_fraction(rows, column, unit="prompt", n_boot=n_boot, seed=seed)
        line.update({f"{label} %": 100 * point, f"{label} lo": 100 * lo, f"{label} hi": 100 * hi})
    pred = rows[f"pred_safe_p{d}"].astype("boolean")
    line["FN"] = int((pred & ~rows[f"safe_p{d}"].astype("boolean")).sum())
    line["FN eps"] = int((pred & ~rows[f"safe_eps_p{d}"].astype("boolean")).sum())
    return line


def top_by_median(rows: pd.DataFrame, p: float, k: int) -> list[Head]:
    """App. Q's recipe-matched set: the ``k`` heads with the highest median S_p at (p, b) on ``rows``."""
    med = rows.groupby(["layer", "head"])[f"s_p{p:g}"].median().sort_values(ascending=False, kind="stable")
    return [(int(layer), int(head)) for layer, head in med.index[:k]]


def in_heads(rows: pd.DataFrame, heads: list[Head]) -> np.ndarray:
    """Which rows belong to one of ``heads``."""
    return pd.MultiIndex.from_frame(rows[["layer", "head"]]).isin(pd.MultiIndex.from_tuples(heads))


def matched_table(
    rows: dict[str, pd.DataFrame],
    recipes: tuple[str, ...],
    heads: list[Head],
    *,
    n_boot: int,
    seed: int = 0,
    recipe_matched: bool = False,
    answer: bool = False,
) -> pd.DataFrame:
    """One line per recipe and row set over the final-query rows of each bias label in ``rows`` (readable
    rows; the shares count the active ones). Read against the argmax: "all", "top-K" and, on request, App.
    Q's "recipe-matched top-K". Read against the answer (``answer``, App. S, Table 14): "all", "argmax-only"
    (the answer is the row's argmax, so the bound's Delta >= 0 premise holds) and "top-K argmax-only", each
    line with the share of rows whose argmax is the answer ("top-1 %") and whose answer key is dead at b."""
    lines = []
    for name in recipes:
        p, b = relu_cell(name)
        readable = rows[b][~rows[b]["status"].isin(SPECIAL)]
        r = readable[readable["status"] == "active"]
        if answer:
            top1 = r[r["target_is_max"].astype(bool)]
            sets = [("all", r), ("argmax-only", top1), (f"top-{len(heads)} argmax-only", top1[in_heads(top1, heads)])]
            extra = {
                "top-1 %": 100 * float(readable["target_is_max"].astype(bool).mean()),
                "ans-dead %": 100 * float((readable["status"] == "dead").mean()),
            }
        else:
            sets = [("all", r), (f"top-{len(heads)}", r[in_heads(r, heads)])]
            if recipe_matched:
                sets.append((f"recipe-matched top-{len(heads)}", r[in_heads(r, top_by_median(r, p, len(heads)))]))
            extra = {}
        lines += [
            {"recipe": name, "p": p, "b": b, "rows": label, **extra, **shares(sub, p, n_boot, seed)}
            for label, sub in sets
        ]
    return pd.DataFrame(lines)


def with_substitution(table: pd.DataFrame, folder: str | Path) -> pd.DataFrame:
    """The table with each recipe's accuracy % and delta pp from a substitute folder (Table 5's NIAH delta)."""
    path = Path(folder) / "substitute.csv"
    try:
        sub = pd.read_csv(path).set_index("recipe")
    except (OSError, ValueError, KeyError) as exc:
        raise RunError(f"--substitution {folder}: cannot read its substitute.csv ({exc})") from None
    missing = sorted(set(table["recipe"]) - set(sub.index))
    if missing:
        raise RunError(f"--substitution {path} has no line for {', '.join(missing)}; run substitute with them")
    return table.assign(
        **{"accuracy %": table["recipe"].map(sub["accuracy %"]), "delta pp": table["recipe"].map(sub["delta pp"])}
    )


def run(cfg: MatchedConfig, out: str | Path, *, progress: bool = True, overwrite: bool = False) -> dict:
    """Read the final-query rows of the suite and write matched.csv/.md (one line per recipe and head set),
    rows_b<label>.parquet and config.json. Returns {"table", "b_auto", "paths"}."""
    heads = parse_heads(cfg.heads) if cfg.heads else ranked_heads(cfg.ranking, cfg.k)
    check_output(out, settings(cfg), overwrite=overwrite, what="attnlab matched")
    model, tokenizer = load(cfg.model, cfg.device, cfg.dtype)
    n_layers, n_heads = hooks.num_heads(model)
    if stray := [h for h in heads if not (h[0] < n_layers and h[1] < n_heads)]:
        raise RunError(f"heads {stray[:3]} are not in the model's {n_layers} layers x {n_heads} heads")
    prompts = run_prompts(model, tokenizer, cfg)
    labels = list(dict.fromkeys(relu_cell(name)[1] for name in cfg.recipes))
    bias_list, b_auto = biases(model, tokenizer, labels, model_device(model), cfg.b_auto, cfg.calibration)
    degrees = tuple(sorted({relu_cell(name)[0] for name in cfg.recipes}))
    config = {
        **asdict(cfg),
        "b_auto": b_auto,
        **calibration_record(model, tokenizer, cfg, b_auto),
        "biases": {b.label: b.value for b in bias_list},
        "head set": [f"{l}.{h}" for l, h in heads],
        "layers": n_layers,
        "heads per layer": n_heads,
        "model_type": model.config.model_type,
        **model_record(cfg, model),
        **prompt_record(prompts, cfg.suite, cfg.pad, cfg.length),
    }
    with staged_output(out) as stage:
        readings = [prompt_reading(prompt, "last", cfg.target) for prompt in prompts]
        options_by_b = {f"b{b.label}": RowOptions.make(p=degrees, b=b.value, eps=cfg.eps) for b in bias_list}
        paths = read_rows(
            model,
            readings,
            options_by_b,
            stage,
            config=config,
            device=model_device(model),
            block=cfg.block,
            desc="matched",
            progress=progress,
        )
        rows = {b.label: pd.read_parquet(paths[f"b{b.label}"]) for b in bias_list}
        table = matched_table(
            rows,
            cfg.recipes,
            heads,
            n_boot=cfg.n_boot,
            seed=cfg.seed,
            recipe_matched=cfg.recipe_matched,
            answer=cfg.target == "answer",
        )
        if cfg.substitution is not None:
            table = with_substitution(table, cfg.substitution)
        write_table(stage / "matched", table)
        write_json(stage / "config.json", json.loads(json.dumps(config, default=str)))
    final = Path(out)
    return {
        "table": table,
        "b_auto": b_auto,
        "paths": {
            **{f"rows_{k}": final / v.name for k, v in paths.items()},
            **{k: final / f for k, f in (("csv", "matched.csv"), ("md", "matched.md"), ("config", "config.json"))},
        },
    }


@register("matched", "matched.csv", MatchedConfig)
def report_section(folder: Path, config: dict) -> Section:
    """The matched diagnostic (Polynomial Concentration Tables 4-5, 12-13)."""
    return Section(
        study="matched",
        title=f"Matched diagnostic of {config['model']} on {config['suite']}",
        source="Polynomial Concentration",
        question="On the rows that answer, how many are measured safe over all heads and over the causal head "
        "set, and does the bound pass any unsafe one?",
        command=command_line("matched", MatchedConfig, config, str(folder)),
        tables=(
            Table(
                "matched",
                "Per recipe and head set: measured-safe, predicted-safe (p >= p*) and eps-safe % "
                "with prompt-bootstrap intervals, and FN (predicted safe, S_p >= 1).",
            ),
        ),
    )
