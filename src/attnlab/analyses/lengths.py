"""``attnlab lengths``: the unsafe-row rate against context length (Polynomial Concentration App. C, Fig. 5).

One audit per prompt length L, read as ``analyses.audit`` reads its rows, with one model load and one b_auto
calibration for the whole sweep: b = auto means the same bias at every L, so a change with L is the model's,
not the calibration's. Each length keeps its rows in rows_L<L>_b<label>.parquet, and lengths.csv gives one
line per (L, b, p): the unsafe % of the active rows with its 95% interval over prompts (bootstrap) and the medians of
rho and
A_act, beside the rest of the audit's prevalence line. Only ``--lengths`` sizes the prompts: ``--pad`` counts
haystack sentences, not tokens.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab import options, tasks
from attnlab.analyses.audit import AuditOptions, audit_rows, calibrated, written
from attnlab.analyses.run import RunError, check_count, context_length, load, run_prompts, settings, staged_output
from attnlab.analyses.sections import compares, read_config, register
from attnlab.io import check_output, write_json, write_table
from attnlab.options import command_line, option
from attnlab.report.plot_concentration import plot_unsafe_by_length
from attnlab.report.sections import Figure, Section, Table

# what the cross-model table keeps of each sweep's lines
COLUMNS = ["L", "tokens", "b", "b value", "p", "active", "unsafe %", "unsafe lo", "unsafe hi", "med rho", "med a_act"]


@dataclass(frozen=True, kw_only=True)
class LengthsConfig(AuditOptions):
    lengths: tuple[int, ...] = option(
        (256, 512, 1024, 2048, 4096),
        "prompt lengths L in tokens, one audit each (Polynomial Concentration App. C: 256 to 4096)",
        metavar="L",
        type=options.count,
    )
    suite: str = option(
        "induction",
        "prompt suite, each prompt sized by --lengths (attnlab tasks lists the "
        "suites; Polynomial Concentration App. C sweeps induction)",
    )
    p: tuple[float, ...] = option((2,), "degrees of S_p", metavar="P", type=options.finite)
    b: tuple[str, ...] = option(
        ("0",),
        "biases: numbers or 'auto' (the 5%%-mass calibration, Polynomial "
        "Concentration App. B/J), calibrated once for every length",
        metavar="B",
    )
    # --lengths sizes every prompt: these stay flags only to be refused with a message, out of --help
    pad: int | None = option(None, argparse.SUPPRESS)
    length: int | None = option(None, argparse.SUPPRESS)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pad is not None:
            raise RunError(
                "attnlab lengths sizes prompts by --lengths (tokens); --pad counts haystack sentences: drop it"
            )
        if self.length is not None:
            raise RunError("attnlab lengths takes its lengths from --lengths; drop --length")
        if not self.lengths or len(set(self.lengths)) != len(self.lengths):
            raise RunError(f"--lengths takes distinct lengths >= 1, got {list(self.lengths)}")
        for length in self.lengths:
            check_count("lengths", length)
        if self.suite not in tasks.SUITES:
            raise RunError(f"unknown suite {self.suite!r}; choose one of {', '.join(sorted(tasks.SUITES))}")


def run(cfg: LengthsConfig, out: str | Path, *, progress: bool = True, overwrite: bool = False) -> dict:
    """Audit ``cfg.model`` on ``cfg.suite`` at every length and write under ``out``: rows_L<L>_b<label>.parquet,
    lengths.csv/.md (per L, b and p: the prompts' mean length in tokens and the audit's prevalence line) and
    config.json (with b_auto). Returns {"table", "b_auto", "paths"}."""
    check_output(out, settings(cfg), overwrite=overwrite, what="attnlab lengths")
    model, tokenizer = load(cfg.model, cfg.device, cfg.dtype)
    limit = context_length(model)
    if limit is not None and max(cfg.lengths) > limit:
        raise RunError(
            f"--lengths {max(cfg.lengths)} exceeds the model's context of {limit} tokens; pass lengths up to {limit}"
        )
    # every length's prompts before any forward, so that a length the suite cannot build fails first
    prompts = {length: run_prompts(model, tokenizer, cfg, length=length) for length in cfg.lengths}
    bias_list, b_auto, config = calibrated(model, tokenizer, cfg)
    with staged_output(out) as stage:
        paths, lines = {}, []
        for length, chosen in prompts.items():
            read, prevalence = audit_rows(
                model, chosen, cfg, bias_list, stage, config=config, prefix=f"L{length}_", progress=progress
            )
            paths.update(read)
            tokens = float(np.mean([len(prompt.input_ids) for prompt in chosen]))
            lines += [{"L": length, "tokens": tokens, **line} for line in prevalence]
        table = pd.DataFrame(lines)
        write_table(stage / "lengths", table)
        write_json(stage / "config.json", json.loads(json.dumps(config, default=str)))
    return {"table": table, "b_auto": b_auto, "paths": written(out, paths, "lengths")}


FIGURE = (
    "Polynomial Concentration Fig. 5 (App. C): the unsafe % of the active rows (S_p >= 1) against the prompt length L "
    "on a log2 axis, {lines}, with its 95% band over prompts (bootstrap); b = auto is one calibration for every L. A "
    "flat line is a model whose rows keep their regime across lengths; a rise past the training length reads as an "
    "out-of-distribution stress, not as the model's prevalence."
)


@register("lengths", "lengths.csv", LengthsConfig)
def report_section(folder: Path, config: dict) -> Section:
    """The length sweep (Polynomial Concentration App. C): its table and Fig. 5."""
    plot_unsafe_by_length(pd.read_csv(folder / "lengths.csv", dtype={"b": str}), folder / "unsafe_by_length")
    return Section(
        study="lengths",
        title=f"Length sweep of {config['model']} on {config['suite']}",
        source="Polynomial Concentration",
        question="Does the share of polynomial-unsafe rows change with the context length?",
        command=command_line("lengths", LengthsConfig, config, str(folder)),
        tables=(
            Table(
                "lengths",
                "Per length L (and the prompts' mean length in tokens), b and p: the unsafe % of "
                "the active rows with its 95% interval over prompts (bootstrap; the rows' Wilson interval beside it is "
                "descriptive) and the medians of rho, A_act and "
                "S_p (Polynomial Concentration App. C).",
            ),
        ),
        figures=(Figure("unsafe_by_length", FIGURE.format(lines="one line per degree p and bias b")),),
    )


@compares("lengths")
def compare_section(folders: list[Path], into: Path) -> Section:
    """Polynomial Concentration Fig. 5 as the paper draws it: the length sweeps of several models (or suites)
    on one plot."""
    lines = []
    for folder in folders:
        config = read_config(folder)
        table = pd.read_csv(folder / "lengths.csv", dtype={"b": str})
        lines.append(table.assign(model=f"{config['model']} ({config['suite']})", folder=str(folder)))
    into.mkdir(parents=True, exist_ok=True)
    table = pd.concat(lines, ignore_index=True)[["model", *COLUMNS, "folder"]]
    write_table(into / "lengths_by_model", table)
    plot_unsafe_by_length(table, into / "unsafe_by_length")
    return Section(
        study="lengths",
        title="Length sweeps side by side",
        source="Polynomial Concentration",
        question="Which models keep their share of unsafe rows as the context grows, and which drift?",
        command="attnlab report " + " ".join(str(f) for f in folders),
        tables=(
            Table(
                "lengths_by_model",
                "Per model (and suite), L, b and p: the unsafe % of the active rows with "
                "its 95% interval over prompts (Polynomial Concentration App. C, R).",
            ),
        ),
        figures=(Figure("unsafe_by_length", FIGURE.format(lines="one line per model, degree p and bias b")),),
    )
