"""``attnlab ablate``: group head ablation, top-K / bottom-K / random-K (Polynomial Concentration §5.4, App. D and V).

Heads are ranked by a per-head median of a row statistic over active-unsaturated rows (median S_p at
degree p and bias b, as the seed ranks them, or median entropy), read in one diagnostic pass over the
ranking suite. Each subset of K heads is then polynomialized with the recipe and the evaluation suite
scored by exact match, as ``attnlab substitute`` does. A cell is "decisive" when the top-K change in
accuracy is strictly worse than that of every random-K draw (App. I: a descriptive flag, not a test).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab import hooks, options
from attnlab.analyses.heads import head_type_table
from attnlab.analyses.readout import QUERIES_HELP, check_queries, prompt_reading, read_rows
from attnlab.analyses.run import (
    RunError,
    SuiteRun,
    biases,
    calibration_record,
    check_count,
    load,
    model_record,
    parse_biases,
    prompt_record,
    recipe_b_auto,
    run_prompts,
    settings,
    staged_output,
    suite_prompts,
)
from attnlab.analyses.sections import register
from attnlab.analyses.substitute import BASELINE, accuracy, as_warning, baseline_warning, check_recipes, score
from attnlab.devices import model_device
from attnlab.diagnostics import RowOptions
from attnlab.diagnostics.heads import TYPES
from attnlab.diagnostics.stats import aggregate
from attnlab.io import check_output, write_json, write_parquet, write_table
from attnlab.options import command_line, option
from attnlab.progress import progress as progress_of
from attnlab.report.plot_concentration import plot_ablation
from attnlab.report.sections import Figure, Section, Table

RANKINGS = ("s_p", "entropy")
Head = tuple[int, int]


@dataclass(frozen=True, kw_only=True)
class AblateConfig(SuiteRun):
    k: tuple[int, ...] = option((5, 10, 20, 40), "subset sizes", metavar="K")
    rank_by: str = option("s_p", "per-head median that orders the heads (s_p at --p and --b)", choices=RANKINGS)
    p: float = option(2, "degree of the ranking S_p", type=options.finite)
    b: str = option("auto", "bias of the ranking S_p: a number or 'auto'")
    recipe: str = option("relu_p2_bauto", "the map the chosen heads get")
    random_draws: int = option(5, "random-K draws, seeds 0..N-1", metavar="N")
    rank_suite: str = option("induction", "suite of the ranking pass")
    rank_prompts: int = option(20, "prompts of the ranking pass", metavar="N")
    rank_length: int | None = option(None, "prompt length of the ranking pass")
    queries: str = option("every:16", f"the ranking pass's {QUERIES_HELP}", metavar="SPEC")
    single: int = option(
        0,
        "also give the recipe to each of the first N ranked heads alone and correlate the "
        "change in accuracy with the heads' ranking statistic (Polynomial Concentration App. "
        "AE, Table 26); 0: none",
        metavar="N",
    )
    types: str | None = option(
        None,
        "an attnlab heads folder of the same model: composition.csv then gives the "
        "head types of the top-K and bottom-K sets (Polynomial Concentration App. U, "
        "Table 16)",
        metavar="DIR",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rank_by not in RANKINGS:
            raise RunError(f"--rank-by takes {' or '.join(RANKINGS)}, got {self.rank_by!r}")
        if not self.k or len(set(self.k)) != len(self.k):
            raise RunError(f"--k takes distinct head counts >= 1, got {list(self.k)}")
        for k in self.k:
            check_count("k", k)
        check_queries(self.queries)
        check_count("single", self.single, 0)
        for name in ("random_draws", "rank_prompts"):
            check_count(name, getattr(self, name))
        if not (math.isfinite(self.p) and self.p > 0):
            raise RunError(f"--p must be a degree > 0, got {self.p!r}")
        parse_biases([self.b])
        check_recipes([self.recipe], self.b_auto)
        if self.recipe == BASELINE:
            raise RunError("--recipe softmax changes nothing; pick the map to ablate with, e.g. relu_p2_bauto")
        if self.types is not None:
            head_type_table(self.types, self.model)


def rank_heads(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per head: the median of ``column`` over active rows, the rank (1 = highest) and ``ranked``;
    heads with no active row have no median (ranked False) and come last, in neither top nor bottom."""
    stats = aggregate(rows, medians=[column])
    stats = stats.rename(columns={f"{column}_median": f"median {column}", "n_used": "active rows"})
    stats = stats[["layer", "head", f"median {column}", "active rows"]]
    ranked = stats.sort_values(
        [f"median {column}", "layer", "head"], ascending=[False, True, True], na_position="last", kind="stable"
    )
    return ranked.assign(rank=np.arange(1, len(ranked) + 1), ranked=ranked[f"median {column}"].notna()).reset_index(
        drop=True
    )


def subsets(ranking: pd.DataFrame, k: int, draws: int) -> list[tuple[str, int, list[Head]]]:
    """(subset, draw, heads) for top-K, bottom-K and ``draws`` random-K subsets; random draw d uses
    numpy seed d, as the seed's {0, 1, 2, 3, 4}."""
    every_head = [(int(l), int(h)) for l, h in zip(ranking["layer"], ranking["head"], strict=True)]
    ranked = [head for head, known in zip(every_head, ranking["ranked"], strict=True) if known]
    if k > len(ranked):
        raise RunError(f"--k {k} exceeds the {len(ranked)} heads with a ranking (of {len(every_head)} heads)")
    out = [("top", 0, ranked[:k]), ("bottom", 0, ranked[::-1][:k])]
    for d in range(draws):
        pick = np.random.default_rng(d).choice(len(every_head), size=k, replace=False)
        out.append(("random", d, [every_head[i] for i in sorted(pick)]))
    return out


def composition(ranking: pd.DataFrame, types: pd.DataFrame, ks: Sequence[int]) -> pd.DataFrame:
    """Per K and end of the ranking (top, bottom): how many of its K heads have each App. H type (Polynomial
    Concentration App. U, Table 16); heads the types table lacks count as "untyped"."""
    kind = {(int(l), int(h)): t for l, h, t in zip(types["layer"], types["head"], types["head_type"], strict=True)}
    lines = []
    for k in ks:
        for subset, _, heads in subsets(ranking, k, 0):
            got = pd.Series([kind.get(h, "untyped") for h in heads]).value_counts()
            lines.append({"k": k, "subset": subset, **{t: int(got.get(t, 0)) for t in (*TYPES, "untyped")}})
    return pd.DataFrame(lines)


def single_heads(cell_table: pd.DataFrame, ranking: pd.DataFrame, column: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Polynomial Concentration App. AE, Table 26: per head given the recipe alone (single draw i = the i-th
    ranked head), its accuracy and delta beside its ranking statistic; and one summary line: heads tested,
    how many changed accuracy, and the Pearson and Spearman correlations of delta with the statistic (NaN,
    "undefined" in the paper, when every delta is the same)."""
    single = cell_table[cell_table["subset"] == "single"].sort_values("draw")
    ranked = ranking[ranking["ranked"].astype(bool)].iloc[single["draw"].to_numpy()]
    table = pd.DataFrame(
        {
            "layer": ranked["layer"].to_numpy(),
            "head": ranked["head"].to_numpy(),
            "rank": ranked["rank"].to_numpy(),
            f"median {column}": ranked[f"median {column}"].to_numpy(),
            "accuracy %": single["accuracy %"].to_numpy(),
            "delta pp": single["delta pp"].to_numpy(),
        }
    )
    delta, stat = table["delta pp"], table[f"median {column}"]
    varies = delta.nunique() > 1 and stat.nunique() > 1
    summary = pd.DataFrame(
        [
            {
                "heads tested": len(table),
                "nonzero delta": int((delta != 0).sum()),
                "pearson r": float(delta.corr(stat)) if varies else np.nan,
                "spearman rho": float(delta.rank().corr(stat.rank())) if varies else np.nan,
            }
        ]
    )
    return table, summary


def cells(answers: pd.DataFrame) -> pd.DataFrame:
    """One line per (K, subset, draw): correct/n, accuracy % with Wilson 95% interval, delta pp."""
    base = answers[answers["subset"] == BASELINE]["correct"].mean() * 100
    return pd.DataFrame(
        [
            {"k": k, "subset": subset, "draw": draw, **accuracy(ok, base)}
            for (k, subset, draw), ok in answers.groupby(["k", "subset", "draw"], sort=False)["correct"]
        ]
    )


def decisive_table(cell_table: pd.DataFrame) -> pd.DataFrame:
    """One line per K: top, bottom and random deltas (mean, sd, worst), how many random draws score above
    top-K, and the decisive flag (none of them does, App. I)."""
    lines = []
    groups = cell_table[cell_table["subset"].isin(("top", "bottom", "random"))]
    for k, group in groups.groupby("k", sort=False):
        delta = {s: group[group["subset"] == s]["delta pp"] for s in ("top", "bottom", "random")}
        top = float(delta["top"].iloc[0])
        lines.append(
            {
                "k": int(k),
                "top pp": top,
                "bottom pp": float(delta["bottom"].iloc[0]),
                "random mean pp": float(delta["random"].mean()),
                "random sd pp": float(delta["random"].std(ddof=0)),
                "random worst pp": float(delta["random"].min()),
                "draws": len(delta["random"]),
                "draws above top": int((delta["random"] > top).sum()),
                "decisive": bool((top < delta["random"]).all()),
            }
        )
    return pd.DataFrame(lines)


def run(cfg: AblateConfig, out: str | Path, *, progress: bool = True, overwrite: bool = False) -> dict:
    """Rank, ablate and score; write ablate.csv/.md (per K, with the decisive flag), cells.csv/.md (per
    subset and draw), ranking.csv/.md (per head), rows_rank.parquet, answers.parquet and config.json."""
    types = None if cfg.types is None else head_type_table(cfg.types, cfg.model)
    check_output(out, settings(cfg), overwrite=overwrite, what="attnlab ablate")
    model, tokenizer = load(cfg.model, cfg.device, cfg.dtype)
    rank_prompts = suite_prompts(
        model,
        tokenizer,
        cfg.rank_suite,
        cfg.rank_prompts,
        seed=cfg.seed,
        length=cfg.rank_length,
        bos=cfg.bos,
        chat=cfg.chat,
    )
    prompts = run_prompts(model, tokenizer, cfg)
    (bias,), b_auto = biases(model, tokenizer, [cfg.b], model_device(model), cfg.b_auto, cfg.calibration)
    b_auto = recipe_b_auto(model, tokenizer, [cfg.recipe], model_device(model), b_auto, cfg.calibration)
    n_layers, n_heads = hooks.num_heads(model)
    if max(cfg.k) > n_layers * n_heads:
        raise RunError(f"--k {max(cfg.k)} exceeds the model's {n_layers * n_heads} heads")
    column = f"s_p{cfg.p:g}" if cfg.rank_by == "s_p" else "entropy"
    config = {
        **asdict(cfg),
        "b_auto": b_auto,
        **calibration_record(model, tokenizer, cfg, b_auto),
        "b value": bias.value,
        "rank column": column,
        "recipe resolved": hooks.resolve(cfg.recipe, b_auto).name,
        "layers": n_layers,
        "heads": n_heads,
        "model_type": model.config.model_type,
        **model_record(cfg, model),
        **prompt_record(prompts, cfg.suite, cfg.pad, cfg.length),
    }
    with staged_output(out) as stage:
        readings = [prompt_reading(p, cfg.queries) for p in rank_prompts]
        paths = read_rows(
            model,
            readings,
            {"rank": RowOptions.make(p=cfg.p, b=bias.value)},
            stage,
            config=config,
            device=model_device(model),
            block=cfg.block,
            desc="rank",
            progress=progress,
        )
        ranking = rank_heads(pd.read_parquet(paths["rank"], columns=["layer", "head", "status", column]), column)
        plan = [(k, *s) for k in cfg.k for s in subsets(ranking, k, cfg.random_draws)]
        if cfg.single > int(ranking["ranked"].sum()):
            raise RunError(f"--single {cfg.single} exceeds the {int(ranking['ranked'].sum())} heads with a ranking")
        ranked = subsets(ranking, cfg.single, 0)[0][2] if cfg.single else []
        plan += [(1, "single", i, [head]) for i, head in enumerate(ranked)]
        records = [
            {**r, "k": 0, "subset": BASELINE, "draw": 0, "heads": ""}
            for r in score(model, tokenizer, prompts, cfg.suite, model_device(model), BASELINE, progress)
        ]
        for k, subset, draw, chosen in progress_of(plan, desc="ablate", unit="subset", enabled=progress):
            with hooks.substituted(model, cfg.recipe, heads=chosen, b_auto=b_auto, block=cfg.block):
                label = f"{subset}-{k}" + (f"#{draw}" if subset in ("random", "single") else "")
                records += [
                    {**r, "k": k, "subset": subset, "draw": draw, "heads": _heads_text(chosen)}
                    for r in score(model, tokenizer, prompts, cfg.suite, model_device(model), label, progress)
                ]
        answers = pd.DataFrame(records)
        cell_table = cells(answers)
        table = decisive_table(cell_table)
        if types is not None:
            write_table(stage / "composition", composition(ranking, types, cfg.k))
        if cfg.single:
            per_head, correlation = single_heads(cell_table, ranking, column)
            write_table(stage / "single", per_head)
            write_table(stage / "single_summary", correlation)
        write_table(stage / "ablate", table)
        write_table(stage / "cells", cell_table)
        write_table(stage / "ranking", ranking)
        write_parquet(stage / "answers.parquet", answers, metadata=config)
        write_json(stage / "config.json", json.loads(json.dumps(config, default=str)))
    final = Path(out)
    base = float(cell_table.loc[cell_table["subset"] == BASELINE, "accuracy %"].iloc[0])
    return {
        "table": table,
        "cells": cell_table,
        "ranking": ranking,
        "b_auto": b_auto,
        "summary": as_warning(baseline_warning(base, cfg.suite)),
        "paths": {
            k: final / f
            for k, f in (
                ("ablate", "ablate.csv"),
                ("cells", "cells.csv"),
                ("ranking", "ranking.csv"),
                ("rows", paths["rank"].name),
                ("answers", "answers.parquet"),
                ("config", "config.json"),
                *((("composition", "composition.csv"),) if types is not None else ()),
                *((("single", "single.csv"), ("single_summary", "single_summary.csv")) if cfg.single else ()),
            )
        },
    }


def _heads_text(heads: Sequence[Head]) -> str:
    return " ".join(f"{layer}.{head}" for layer, head in heads)


@register("ablate", "ablate.csv", AblateConfig)
def report_section(folder: Path, config: dict) -> Section:
    """The group ablation (Polynomial Concentration §5.4, Table 9) and, with --types, Table 16."""
    cells_table = pd.read_csv(folder / "cells.csv")
    base = float(cells_table.loc[cells_table["subset"] == BASELINE, "accuracy %"].iloc[0])
    warning = baseline_warning(base, config["suite"])
    tables = [
        Table(
            "ablate",
            "Per K: the change in accuracy (pp from softmax) when the top-K, bottom-K and "
            "random-K heads by the ranking get the recipe; decisive = top below every draw.",
        ),
        Table("cells", "Every subset and draw: accuracy % with its Wilson 95% interval."),
        Table("ranking", "Every head's rank by its median statistic over the ranking pass's active rows."),
    ]
    if (folder / "composition.csv").is_file():
        tables.append(Table("composition", "Head types of the top-K and bottom-K heads (App. U, Table 16)."))
    if (folder / "single.csv").is_file():
        tables += [
            Table(
                "single_summary",
                "Heads given the recipe one at a time (App. AE, Table 26): how many "
                "changed accuracy, and the correlations of the change with the "
                "ranking statistic.",
            ),
            Table("single", "Every head given the recipe alone: its rank, statistic, accuracy and delta."),
        ]
    plot_ablation(pd.read_csv(folder / "ablate.csv"), folder / "ablation")
    return Section(
        study="ablate",
        title=f"Group ablation on {config['model']}",
        source="Polynomial Concentration",
        question="Does substituting the heads the diagnostic ranks highest hurt more than substituting random heads?",
        command=command_line("ablate", AblateConfig, config, str(folder)),
        tables=tuple(tables),
        figures=(
            Figure(
                "ablation",
                "Accuracy change against K for the top-K, bottom-K and random-K heads (mean "
                "+- sd band, worst draw dotted); Polynomial Concentration Figs. 3-4.",
            ),
        ),
        warnings=() if warning is None else (warning,),
    )
