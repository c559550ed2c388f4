"""The studies from the command line: ``study``, ``report`` and ``demo``."""

from __future__ import annotations

import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from attnlab import options
from attnlab.cli.base import PROGRESS_HELP, UserError, check_writable, command
from attnlab.devices import Placement
from attnlab.options import option


def _print_section(section, folder: Path) -> None:
    print(f"== {section.title} ({folder})")
    for f in section.findings:
        why = f" ({f.verdict}: {f.reason})" if f.reason else ""
        print(textwrap.fill(f"[{f.verdict}] {f.claim}: {f.evidence}{why}", width=110, subsequent_indent="    "))


def _study_names() -> list[str]:
    from attnlab.studies.runner import STUDIES

    return list(STUDIES)


def _run_study(cfg, folder: Path, progress: bool):
    from attnlab import studies

    check_writable(folder)
    started = time.monotonic()
    section = studies.run(cfg, folder, progress=progress)
    _print_section(section, folder)
    print(f"   ({time.monotonic() - started:.0f} s)")
    return section


@dataclass(frozen=True)
class StudyOutput:
    out: Path | None = option(None, "output folder (default: runs/NAME)", metavar="DIR")
    no_progress: bool = option(False, PROGRESS_HELP)


@command(
    "study",
    "run one study (one per paper) and write its tables, figures and report",
    "Run one study into --out: its raw results (Parquet/CSV/JSON), tables (CSV, Markdown), figures (PNG, "
    "SVG), section.json and index.html. Rerunning the same command resumes an interrupted study.",
    "attnlab.studies.runner:StudyConfig",
    StudyOutput,
)
def study(cfg, opts: StudyOutput) -> int:
    from attnlab import studies

    out = opts.out or Path("runs") / cfg.study
    section = _run_study(cfg, out, progress=not opts.no_progress)
    page = studies.write_page([(section, out)], out / "index.html", title=f"attnlab study {cfg.study}")
    print(f"report: {page}")
    return 0


@dataclass(frozen=True)
class ReportOptions:
    folders: tuple[Path, ...] = option(
        help="study or demo folders, folders that audit, substitute, ablate, matched, "
        "heads, lengths, temperature, xi-sweep or fit-xi wrote, or folders "
        "holding them",
        positional=True,
        metavar="RUN_DIR",
    )
    # No default: the report recomputes into copies and writes a page, and none of that may land in a folder it
    # reads (a read-only one, a user's own files beside the runs); a folder of one's choosing says where it goes.
    out: Path = option(
        help="the folder to write: the page DIR/index.html, the copies each section is recomputed in "
        "(DIR/folders/) and the comparisons (DIR/compare_*); new, empty or an earlier report's, apart from RUN_DIR",
        metavar="DIR",
    )

    def __post_init__(self) -> None:
        options.check_distinct("RUN_DIR", self.folders)


@command(
    "report",
    "recompute study sections from copies of their folders and write one HTML page",
    "Copy the files of each study folder (or of each study folder inside a demo folder) and of each folder a "
    "checkpoint command wrote into --out, recompute every section there (its tables, and the analyses Polynomial "
    "Concentration draws from them: an audit's prevalence (Tables 1/10/11) and bound validation (Table 8) and Figs. "
    "1-2, an ablation's curves (Figs. 3-4), a length sweep's Fig. 5, several audits side by side), and write one "
    "self-contained HTML page, DIR/index.html. A table the recomputation does not rewrite is marked on the page as "
    "shown as found. Nothing is written into RUN_DIR.",
    ReportOptions,
)
def report(opts: ReportOptions) -> int:
    from attnlab import studies

    page = studies.report(list(opts.folders), opts.out)
    print(f"report: {page}")
    return 0


@dataclass(frozen=True)
class DemoOptions(Placement):
    out: Path = option(Path("runs/demo"), "output folder", metavar="DIR")
    seed: int = option(0, "seed of data and training", metavar="N", type=options.seed)
    studies: tuple[str, ...] | None = option(
        None, "run only these studies (default: all, in this order: %(choices)s)", metavar="NAME", choices=_study_names
    )
    models: tuple[str, ...] | None = option(
        None,
        "pretrained models for the real-model sections: the first one's in every study that takes one, "
        "the concentration study on each of them (default: every fetched named model; 'none' for none)",
        metavar="MODEL",
    )
    no_progress: bool = option(False, PROGRESS_HELP)

    def __post_init__(self) -> None:
        Placement.__post_init__(self)
        options.check_distinct("studies", self.studies)
        options.check_distinct("models", self.models)


def demo_models(given: tuple[str, ...] | list[str] | None) -> list[str]:
    """The pretrained models of the demo's real-model sections: the ones given, else every named model
    that is fetched."""
    from attnlab.loading import fetch

    if given is not None:
        from attnlab.loading.load import LoadError, check_model

        chosen = [m for m in given if m != "none"]
        for model in chosen:  # before any study runs: a typo must not cost the studies that take no model
            try:
                check_model(model)
            except LoadError as exc:
                raise UserError(f"--models {model}: {exc}") from None
        return chosen
    models = [name for name in fetch.MODELS if fetch.fetched(name) is not None]
    if not models:
        print("no real model fetched: the real-model sections are left out (attnlab fetch smollm2 adds them)")
    return models


@command(
    "demo",
    "run every study at the smoke budget and write one HTML report",
    "Run every study (attnlab study NAME) at --budget smoke (--budget demo, a reduced smoke run, for the "
    "studies that have one) on this machine, each into DIR/<study>/, and "
    "write the report DIR/index.html. Rerunning the same command resumes unfinished studies and reuses "
    "finished ones.",
    DemoOptions,
)
def demo(opts: DemoOptions) -> int:
    from attnlab import studies

    check_writable(opts.out)
    models = demo_models(opts.models)
    plan = studies.demo_plan(list(opts.studies or studies.STUDIES), models, opts.out)
    try:
        studies.check_demo_folder(opts.out, plan)
    except studies.StudyError as exc:
        raise UserError(str(exc)) from None
    started, failed, done = time.monotonic(), [], []
    for name, model, folder in plan:
        try:
            cfg = studies.StudyConfig(
                study=name,
                budget=studies.demo_budget(name),
                seed=opts.seed,
                model=model,
                device=opts.device,
                dtype=opts.dtype,
            )
            done.append((_run_study(cfg, folder, progress=not opts.no_progress), folder))
        except studies.StudyError as exc:
            raise UserError(str(exc)) from None
        except Exception as exc:  # one study's failure must not cost the others their report
            failed.append(folder.name)
            print(f"== study {folder.name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    if done:
        compared = studies.comparisons([folder for _, folder in done], opts.out)
        page = studies.write_page([*compared, *done], opts.out / "index.html", title="attnlab demo")
        print(f"demo finished in {(time.monotonic() - started) / 60:.1f} min; report: {page}")
    if failed:
        raise UserError(f"studies failed: {', '.join(failed)}; rerun the same command to resume them")
    return 0


def _calibration_keys() -> list[str]:
    from attnlab.findings.calibrate import CALIBRATIONS

    _register_calibrations()
    return list(CALIBRATIONS)


def _register_calibrations() -> None:
    # each study's and the card's findings register their calibrations when their packages are imported
    import attnlab.cards
    import attnlab.studies  # noqa: F401


@dataclass(frozen=True)
class VerdictOptions:
    calibrate: bool = option(False, "simulate every listed rule's worlds and write the calibration table")
    only: tuple[str, ...] | None = option(
        None,
        "only these calibrations, 'finding @ budget' (default: all: %(choices)s)",
        metavar="KEY",
        choices=_calibration_keys,
    )
    draws: int = option(2000, "simulated data sets per world", metavar="N", type=options.count)
    seed: int = option(0, "seed of the simulations", metavar="N", type=options.seed)
    out: Path = option(Path("runs/calibration"), "output folder of calibration.csv and calibration.md", metavar="DIR")

    def __post_init__(self) -> None:
        options.check_distinct("only", self.only)


@command(
    "verdicts",
    "list each finding's decision rule per budget; --calibrate measures its error rates by simulation",
    "List every finding of the studies and the card with its rule and the sample sizes of each budget. With "
    "--calibrate, draw --draws data sets from each finding's worlds without the paper's effect and with it, at "
    "the budget's sample sizes, and write how often the rule fires (false-positive rate, power) and how often "
    "each printed 95% interval covers its truth, to --out/calibration.csv and calibration.md.",
    VerdictOptions,
)
def verdicts(opts: VerdictOptions) -> int:
    import pandas as pd

    from attnlab import io
    from attnlab.findings import calibrate

    _register_calibrations()
    keys = list(opts.only or calibrate.CALIBRATIONS)
    if not opts.calibrate:
        for key in keys:
            cal = calibrate.CALIBRATIONS.find(key)
            print(textwrap.fill(f"{key}: {cal.rule_text} [{cal.sizes}]", width=110, subsequent_indent="    "))
        return 0
    check_writable(opts.out)
    found = []
    for key in keys:
        started = time.monotonic()
        rates = calibrate.rates(calibrate.CALIBRATIONS.find(key), opts.draws, opts.seed)
        found += rates
        worst = ", ".join(f"{r.measure} {100 * r.rate:.1f}% ({r.world})" for r in rates if not r.meets)
        print(
            f"{key}: {calibrate.status(rates)[key]}{': ' + worst if worst else ''} ({time.monotonic() - started:.0f} s)"
        )
    table = pd.DataFrame([r.record() for r in found])
    paths = io.write_table(opts.out / "calibration", table)
    print(f"calibration: {paths['csv']} and {paths['md']}")
    return 0
