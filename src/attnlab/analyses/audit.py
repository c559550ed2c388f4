"""``attnlab audit``: prevalence of the polynomial-unsafe regime in a checkpoint (Polynomial Concentration §5.2, Tables
1/10/11), with the gap-counting scale of Hayase & Karakida 2026 alongside.

Rows are read as ``analyses.readout`` does: the attention maps are never stored. ``queries`` chooses the
query rows (``readout.select_queries``); the prompt's last position, the one that answers, is always among
them. With ``target="answer"`` only the chosen rows that have an answer key are read, each against that key
instead of its argmax (Polynomial Concentration App. S), and the table adds the share of rows whose argmax
is the answer.

The report section draws Polynomial Concentration Figs. 1 and 2 from the rows: the p* histogram, p* against the
measured S_p, and the phase plot of per-head medians, coloured by App. H head type when ``--types`` names an
``attnlab heads`` folder of the same model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab import hooks, options, tasks

# percent too, which the studies read as audit.percent beside the tables it fills
from attnlab.analyses.audit_tables import bound_validation, head_medians, percent, prevalence  # noqa: F401
from attnlab.analyses.heads import head_type_table
from attnlab.analyses.readout import FLAGS, QUERIES_HELP, check_queries, prompt_reading, read_tables
from attnlab.analyses.run import (
    Bias,
    RunError,
    SuiteRun,
    biases,
    calibration_record,
    load,
    model_record,
    parse_biases,
    prompt_record,
    run_prompts,
    settings,
    staged_output,
)
from attnlab.analyses.sections import compares, read_config, register
from attnlab.devices import model_device
from attnlab.diagnostics import RowOptions
from attnlab.diagnostics.stream import RowStatsWriter
from attnlab.io import check_output, write_json, write_table
from attnlab.options import command_line, option
from attnlab.report.plot_concentration import MAX_POINTS, bound_quadrants, plot_bound, plot_p_star, plot_phase
from attnlab.report.sections import Figure, Section, Table
from attnlab.site import DEFAULT_BLOCK

GAP_COLUMNS = ("lambda_n", "alpha_n", "contact_gap")
TARGETS = ("argmax", "answer")
Sink = Callable[[str, RowOptions], RowStatsWriter]  # label, row options -> where that label's rows go


@dataclass(frozen=True, kw_only=True)
class AuditOptions(SuiteRun):
    """How rows are read and judged, for every command that audits them (``audit``, ``lengths``)."""

    p: tuple[float, ...] = option((2, 4, 8, 16), "degrees of S_p", metavar="P", type=options.finite)
    b: tuple[str, ...] = option(
        ("0", "auto"),
        "biases: numbers or 'auto' (the 5%%-mass calibration, Polynomial Concentration App. B/J)",
        metavar="B",
    )
    queries: str = option("every:16", QUERIES_HELP, metavar="SPEC")
    target: str = option(
        "argmax",
        "the key S_p is measured for: each row's argmax, or the planted answer key, "
        "reading only the rows that have one (Polynomial Concentration App. S)",
        choices=TARGETS,
    )
    tau: float | None = option(
        None,
        "cap tau of r = clamp(z + b, 0, tau): rows whose target reaches it are "
        "saturated and left out of the unsafe rate (Polynomial Concentration §3; "
        "the check before a logit softcap)",
        type=options.positive,
    )
    sigmoid: bool = option(
        False,
        "also measure S_sigma, the sigmoid's analogue of S_p, per row and as a safe "
        "rate (S_sigma < 1) in the table (Polynomial Concentration App. T)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_queries(self.queries)
        if not self.p or not all(math.isfinite(p) and p > 0 for p in self.p):
            raise RunError(f"--p takes degrees > 0, got {list(self.p)}")
        # the rows' own rules (distinct degrees among them), which would otherwise first run after the model loads
        RowOptions.make(p=self.p, tau=self.tau, sigmoid=self.sigmoid)
        parse_biases(self.b)
        if self.target not in TARGETS:
            raise RunError(f"--target takes {' or '.join(TARGETS)}, got {self.target!r}")


@dataclass(frozen=True, kw_only=True)
class AuditConfig(AuditOptions):
    types: str | None = option(
        None,
        "an attnlab heads folder of the same model: the report's phase plot then "
        "colours each head by its App. H type (Polynomial Concentration Fig. 2)",
        metavar="DIR",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.types is not None:
            head_type_table(self.types, self.model)


def _columns(p: tuple[float, ...], sigmoid: bool = False) -> list[str]:
    return ["prompt", "status", "rho", "a_act", "target_is_max", *GAP_COLUMNS, *(["s_sigmoid"] if sigmoid else [])] + [
        f"{k}_p{q:g}" for q in p for k in ("s", "safe")
    ]


def read_audit(
    model,
    prompts: Sequence[tasks.Prompt],
    bias_list: Sequence[Bias],
    sink: Sink,
    *,
    p: tuple[float, ...],
    queries: str,
    target: str = "argmax",
    tau: float | None = None,
    sigmoid: bool = False,
    device=None,
    block: int = DEFAULT_BLOCK,
    prefix: str = "",
    progress: bool = True,
) -> dict:
    """The audit's one reading path, for ``attnlab audit`` and ``attnlab.audit`` alike: the rows ``queries``
    chooses from each prompt (against ``target``, Polynomial Concentration App. S), diagnosed at every bias of
    ``bias_list`` with degrees ``p``, cap ``tau`` and optionally S_sigma (App. T), into ``sink(label,
    options)`` per label <prefix>b<bias label> (a file writer or an in-memory collector). One forward per
    prompt on ``device`` (default: the model's). Returns label -> what each sink's close returns."""
    readings = [prompt_reading(prompt, queries, target) for prompt in prompts]
    row_options = {f"{prefix}b{b.label}": RowOptions.make(p=p, b=b.value, tau=tau, sigmoid=sigmoid) for b in bias_list}
    return read_tables(
        model,
        readings,
        {label: sink(label, opt) for label, opt in row_options.items()},
        device=device,
        block=block,
        desc=f"audit {prefix.rstrip('_')}".rstrip(),
        progress=progress,
    )


def audit_rows(
    model,
    prompts: list,
    cfg: AuditOptions,
    bias_list: list[Bias],
    stage: Path,
    *,
    config: dict,
    prefix: str = "",
    progress: bool = True,
) -> tuple[dict[str, Path], list[dict]]:
    """Read the rows ``cfg`` chooses from ``prompts`` at every bias into stage/rows_<prefix>b<label>.parquet;
    returns those paths (by <prefix>b<label>) and the prevalence lines of every bias and degree."""

    def sink(label: str, opt: RowOptions) -> RowStatsWriter:
        return RowStatsWriter(Path(stage) / f"rows_{label}.parquet", opt, config=config, flags=FLAGS)

    paths = read_audit(
        model,
        prompts,
        bias_list,
        sink,
        p=cfg.p,
        queries=cfg.queries,
        target=cfg.target,
        tau=cfg.tau,
        sigmoid=cfg.sigmoid,
        device=model_device(model),
        block=cfg.block,
        prefix=prefix,
        progress=progress,
    )
    lines = []
    for b in bias_list:
        rows = pd.read_parquet(paths[f"{prefix}b{b.label}"], columns=_columns(cfg.p, cfg.sigmoid))
        lines.extend(prevalence(rows, cfg.p, b, answer=cfg.target == "answer"))
    return paths, lines


def run(cfg: AuditConfig, out: str | Path, *, progress: bool = True, overwrite: bool = False) -> dict:
    """Audit ``cfg.model`` and write under ``out``: rows_b<label>.parquet (one row per layer, head,
    prompt and sampled query), audit.csv/.md (the prevalence table), with --types head_types.csv/.md (the
    heads folder's table, so that the report needs no other folder) and config.json (with b_auto).
    Returns {"table", "b_auto", "paths"}."""
    check_output(out, settings(cfg), overwrite=overwrite, what="attnlab audit")
    types = None if cfg.types is None else head_type_table(cfg.types, cfg.model)
    model, tokenizer = load(cfg.model, cfg.device, cfg.dtype)
    prompts = run_prompts(model, tokenizer, cfg)
    bias_list, b_auto, config = calibrated(model, tokenizer, cfg)
    config.update(prompt_record(prompts, cfg.suite, cfg.pad, cfg.length))
    with staged_output(out) as stage:
        paths, lines = audit_rows(model, prompts, cfg, bias_list, stage, config=config, progress=progress)
        table = pd.DataFrame(lines)
        write_table(stage / "audit", table)
        if types is not None:
            write_table(stage / "head_types", types)
        write_json(stage / "config.json", json.loads(json.dumps(config, default=str)))
    return {
        "table": table,
        "b_auto": b_auto,
        "paths": written(out, paths, "audit", *(("head_types",) if types is not None else ())),
    }


def calibrated(model, tokenizer, cfg: AuditOptions) -> tuple[list[Bias], float | None, dict]:
    """The run's biases (b_auto calibrated once, or reused) and the config.json of a run that reads rows."""
    bias_list, b_auto = biases(model, tokenizer, cfg.b, model_device(model), cfg.b_auto, cfg.calibration)
    n_layers, n_heads = hooks.num_heads(model)
    config = {
        **asdict(cfg),
        "b_auto": b_auto,
        **calibration_record(model, tokenizer, cfg, b_auto),
        "biases": {b.label: b.value for b in bias_list},
        "layers": n_layers,
        "heads": n_heads,
        "model_type": model.config.model_type,
        **model_record(cfg, model),
    }
    return bias_list, b_auto, config


def written(out: str | Path, rows: dict[str, Path], *tables: str) -> dict[str, Path]:
    """The files a row-reading run leaves in ``out``: its rows by label, each table's .csv and .md (the first
    as "csv" and "md", the others by stem) and config.json."""
    final = Path(out)
    named = {f"rows_{k}": final / v.name for k, v in rows.items()}
    named.update({"csv": final / f"{tables[0]}.csv", "md": final / f"{tables[0]}.md"})
    named.update({stem: final / f"{stem}.csv" for stem in tables[1:]})
    return {**named, "config": final / "config.json"}


def figure_degree(p: tuple[float, ...]) -> float:
    """The degree of Polynomial Concentration Fig. 1b's predicted-vs-measured panel: p = 2 as the paper's,
    else the smallest audited."""
    return 2.0 if 2 in p else min(p)


@dataclass(frozen=True)
class AuditWritten(AuditConfig):
    """An audit folder's config.json (never built, only read back): the audit's settings and what ``run`` adds that
    its report reads, the bias of each label and the model's layers and heads per layer."""

    biases: dict[str, float] = field(default_factory=dict)
    layers: int = 0
    heads: int = 0


@register("audit", "audit.csv", AuditWritten, required=("biases", "p"))
def report_section(folder: Path, config: dict) -> Section:
    """The prevalence table (Polynomial Concentration Tables 1/10/11), the bound validation (App. M, Table 8)
    and Figs. 1-2 (the p* histogram, p* against the measured S_p, the phase plot), recomputed from the
    folder's rows. The prevalence table is recomputed too, with a warning where audit.csv as found differs."""
    p = tuple(config["p"])
    rows = read_rows(
        folder, config, ["layer", "head", "p_star", *(f"{k}_p{q:g}" for q in p for k in ("pred_safe", "safe_eps"))]
    )
    table = prevalence_table(rows, config)
    edited = not _agrees(folder / "audit.csv", table)
    write_table(folder / "audit", table)
    write_table(folder / "bound_validation", bound_validation(rows, p))
    active = {b: r[r["status"] == "active"] for b, r in rows.items()}
    p_star = {b: r["p_star"].to_numpy(dtype=float) for b, r in active.items()}
    degree = figure_degree(p)
    s_p = {b: r[f"s_p{degree:g}"].to_numpy(dtype=float) for b, r in active.items()}
    plot_p_star(p_star, p, folder / "p_star")
    plot_bound(p_star, s_p, degree, folder / "predicted_vs_measured")
    types = _head_types(folder)
    plot_phase(head_medians(active, p), p, folder / "phase", types=types)
    cells = {b: bound_quadrants(p_star[b], s_p[b], degree) for b in active}
    counts = "; ".join(f"b = {b}: " + ", ".join(f"{n} {name}" for name, n in c.items()) for b, c in cells.items())
    colour = (
        "black (pass --types HEADS_DIR to colour the heads by App. H type)"
        if types is None
        else "each head coloured by its App. H type (head_types; 'untyped' where the heads folder lacks it)"
    )
    return Section(
        study="audit",
        title=f"Audit of {config['model']} on {config['suite']}",
        source="Polynomial Concentration",
        question="How many active rows of this checkpoint are polynomial-unsafe (S_p >= 1), and how well does "
        "the degree bound p >= p* predict which?",
        command=command_line("audit", AuditConfig, config, str(folder)),
        warnings=(
            (
                "audit.csv as found differs from the prevalence recomputed from the rows (rows_b*.parquet): it was "
                "edited or written by another attnlab; the table below is the recomputed one",
            )
            if edited
            else ()
        ),
        tables=(
            Table(
                "audit",
                "Prevalence per b and p (Polynomial Concentration Tables 1/10/11): unsafe % of the "
                "active rows with its 95% interval over prompts (bootstrap; the rows' Wilson "
                "interval beside it, descriptive only) and the medians of rho, A_act and S_p.",
            ),
            Table(
                "bound_validation",
                "Bound validation (App. M, Table 8): predicted safe (p >= p*) against "
                "measured safe (S_p < 1); FN = predicted safe but measured unsafe, with "
                "its rate over the unsafe rows and its count under tolerance eps; FP = "
                "predicted unsafe but measured safe.",
            ),
            *(
                (
                    Table(
                        "head_types",
                        "The App. H head types the phase plot colours by, as the --types heads folder gave them.",
                    ),
                )
                if types is not None
                else ()
            ),
        ),
        figures=(
            Figure(
                "p_star",
                "Polynomial Concentration Fig. 1a: per b, the histogram of p* = log A_act / "
                "log(1/(1 - rho)) over the active rows, on a log2 axis; the dashed lines are the "
                "audited degrees, and rows left of a line are predicted safe at that p (Cor. "
                "4.3). Rows at p* = 0 and p* = inf, off a log axis, are counted in the title.",
            ),
            Figure(
                "predicted_vs_measured",
                f"Polynomial Concentration Fig. 1b (App. M): per b, each active row's p* (x) against its "
                f"measured S_{degree:g} (y), both on log axes. The dashed lines x = {degree:g} and y = 1 "
                f"cut four cells: bottom left certified safe (p >= p* and S_p < 1), top left FN "
                f"(predicted safe but measured unsafe: the bound silently passing an unsafe row), bottom "
                f"right FP (predicted unsafe but measured safe: the bound's conservatism), top right "
                f"agree unsafe. Each corner gives its cell's count over every active row ({counts}); at "
                f"most {MAX_POINTS:,} rows per panel are drawn, a uniform sample under a fixed seed, and the "
                f"title counts the rows off the log axes (p* = 0, p* = inf, S_p = 0 or inf).",
            ),
            Figure(
                "phase",
                f"Polynomial Concentration Fig. 2: per b, each head's median (rho, A_act) over "
                f"its active rows, {colour}. The curves are the boundaries A (1 - rho)^p = 1 "
                f"at the audited degrees (Thm. 4.1): a row above the p curve can have S_p >= 1, "
                f"one below it is safe at p. A head's median above a curve marks a head with "
                f"many rows at risk at that p (the paper reads it as >= 50% unsafe), not a "
                f"per-row certificate.",
            ),
        ),
    )


def _head_types(folder: Path) -> dict[tuple[int, int], str] | None:
    """(layer, head) -> App. H type from the head_types table an audit made with --types keeps, else None."""
    if not (folder / "head_types.csv").is_file():
        return None
    table = pd.read_csv(folder / "head_types.csv")
    return {
        (int(layer), int(head)): kind
        for layer, head, kind in zip(table["layer"], table["head"], table["head_type"], strict=True)
    }


def read_rows(folder: Path, config: dict, extra: Sequence[str] = ()) -> dict[str, pd.DataFrame]:
    """An audit folder's rows per bias label (its config.json as ``config``): the columns its prevalence reads and
    ``extra``."""
    columns = list(dict.fromkeys([*_columns(tuple(config["p"]), config.get("sigmoid", False)), *extra]))
    return {label: pd.read_parquet(folder / f"rows_b{label}.parquet", columns=columns) for label in config["biases"]}


def prevalence_table(rows: dict[str, pd.DataFrame], config: dict) -> pd.DataFrame:
    """audit.csv's table (``prevalence`` per bias, in the config's order), recomputed from ``read_rows``. An audit
    written before --sigmoid and --target existed ran without them."""
    answer = config.get("target") == "answer"
    return pd.DataFrame(
        [
            line
            for label, value in config["biases"].items()
            for line in prevalence(rows[label], tuple(config["p"]), Bias(label, float(value)), answer=answer)
        ]
    )


def _agrees(path: Path, table: pd.DataFrame) -> bool:
    """Whether the CSV table at ``path`` holds ``table`` (its columns, and its numbers to 1e-9 relative)."""
    try:
        found = pd.read_csv(path, dtype={"b": str})
    except (OSError, ValueError):  # torn or not text: it holds nothing of the table
        return False
    if list(found.columns) != list(table.columns) or len(found) != len(table):
        return False
    numbers = table.select_dtypes("number").columns
    try:
        close = np.allclose(found[numbers].to_numpy(float), table[numbers].to_numpy(float), rtol=1e-9, equal_nan=True)
    except (TypeError, ValueError):  # a cell that is not a number
        return False
    rest = [c for c in table.columns if c not in numbers]
    return bool(close) and found[rest].astype(str).equals(table[rest].astype(str))


@compares("audit")
def compare_section(folders: list[Path], into: Path) -> Section:
    """Polynomial Concentration Tables 1, 10 and 11 side by side: the prevalence lines of several audits
    (models, suites), one block per model and suite."""
    lines = []
    for folder in folders:
        config = read_config(folder)
        table = pd.read_csv(folder / "audit.csv", dtype={"b": str})
        lines.append(
            table.assign(model=config["model"], suite=config["suite"], folder=str(folder))[
                ["model", "suite", "b", "b value", "p", "active", "unsafe %", "unsafe lo", "unsafe hi", "folder"]
            ]
        )
    into.mkdir(parents=True, exist_ok=True)
    write_table(into / "prevalence_by_model", pd.concat(lines, ignore_index=True))
    return Section(
        study="audit",
        title="Audits side by side",
        source="Polynomial Concentration",
        question="How does the unsafe-row rate compare across the audited models and suites?",
        command="attnlab report " + " ".join(str(f) for f in folders),
        tables=(
            Table(
                "prevalence_by_model",
                "Per model, suite, b and p: unsafe % of the active rows with its "
                "95% interval from a bootstrap over prompts (Polynomial "
                "Concentration Tables 1, 10, 11; App. R).",
            ),
        ),
    )
