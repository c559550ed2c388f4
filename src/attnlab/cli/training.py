"""Training from the command line: ``prepare`` (a corpus tokenized once into shards), ``train`` (the own
decoder from a config file), ``release-replay`` (the release rule's variants on a run's logged scores) and
``lengthgen`` (one decoder per attention variant, scored at multiples of the training length)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from attnlab import devices, io, options
from attnlab.cli.base import PROGRESS_HELP, UserError, check_writable, command
from attnlab.devices import Placement
from attnlab.errors import ArgumentError
from attnlab.options import option
from attnlab.workers import Launch


@dataclass(frozen=True)
class PrepareOptions:
    out: Path = option(help="the shard folder to write: train.bin, val.bin and meta.json", metavar="SHARDS")
    folder: str | None = option(
        None,
        "corpus folder of text files (default: the Python standard library's .py files on this machine)",
        metavar="DIR",
    )
    tokenizer: str = option("bytes", "'bytes' or a local Hugging Face tokenizer folder; nothing is downloaded")
    patterns: tuple[str, ...] | None = option(
        None, "file-name globs to read (default: *.txt *.md *.py; *.py for the standard library)", metavar="GLOB"
    )
    val_fraction: float = option(
        0.05,
        "share of the files held out for validation, by path hash (a single file: its last share of tokens)",
        metavar="F",
        type=options.finite,
    )
    max_tokens: int | None = option(None, "cap on tokens per split (default: all)", metavar="N", type=options.count)
    overwrite: bool = option(
        False, "replace an existing shard folder at --out (kept intact until the new one is complete)"
    )

    def __post_init__(self) -> None:
        if not 0 < self.val_fraction <= 0.5:  # data.val_fraction's range, so every prepared split can be trained on
            raise ArgumentError(f"val_fraction must be in (0, 0.5], got {self.val_fraction}")


@command(
    "prepare",
    "tokenize a corpus once into memory-mapped shards for data.shards (Zhu et al. 2026 App. J)",
    "Tokenize a folder of text files (default: the Python standard library) once, with exactly the files, "
    "split, document order and eos placement of a run's data table, into --out: train.bin and val.bin (flat "
    "little-endian ids: uint16 for vocabularies up to 65536, else uint32) and meta.json. A run with "
    "data.shards set to that folder maps them instead of tokenizing, on every start, resume and process, and "
    "draws the same batches. Written to a temporary folder and renamed, so a failure leaves no half-written "
    "shards.",
    PrepareOptions,
)
def prepare(opts: PrepareOptions) -> int:
    from attnlab.train.shards import prepare as write

    check_writable(opts.out)
    start = time.perf_counter()
    meta = write(
        opts.out,
        folder=opts.folder,
        tokenizer=opts.tokenizer,
        patterns=opts.patterns,
        val_fraction=opts.val_fraction,
        max_tokens=opts.max_tokens,
        overwrite=opts.overwrite,
    )
    seconds = time.perf_counter() - start
    tokens, files = meta["tokens"], meta["files"]
    print(
        f"{tokens['train']:,} train and {tokens['val']:,} validation tokens ({meta['dtype']}) from "
        f"{files['train']} + {files['val']} files of {meta['corpus']['folder']}, tokenizer "
        f"{meta['tokenizer']['name']}, in {seconds:.1f} s ({sum(tokens.values()) / seconds:,.0f} tokens/s)"
    )
    print(f"wrote: {opts.out}/ (train.bin, val.bin, meta.json); train on it with --set data.shards={opts.out}")
    return 0


@dataclass(frozen=True)
class TrainOptions(Placement):
    config: Path | None = option(
        None, "run config (.yaml/.yml/.toml), e.g. examples/tiny.yaml; omit to give all by --set", positional=True
    )
    set: tuple[str, ...] = option(
        (),
        "override one field, e.g. --set train.steps=50 --set model.rowmap=entmax_a1.5 (repeatable)",
        metavar="SECTION.KEY=VALUE",
        action="append",
        convert=lambda items: tuple(items or ()),
    )
    out: Path | None = option(None, "run folder (default: runs/train/<config name>)", metavar="DIR")
    resume: bool = option(
        False,
        "continue the run in --out from its last checkpoint (from step 0 when it was killed before its first one)",
    )
    overwrite: bool = option(False, "discard an earlier run's files in --out and start clean (other files there stay)")
    no_progress: bool = option(False, PROGRESS_HELP)


@command(
    "train",
    "train the own decoder from a YAML/TOML config (resumable, torchrun-ready)",
    "Train attnlab's decoder: the config's model, data, train and intervention tables, with --set "
    "overrides; checkpoints, metrics and probes go to --out. Under torchrun --nproc_per_node N it trains "
    "with DistributedDataParallel.",
    TrainOptions,
)
def train(opts: TrainOptions) -> int:
    from attnlab.train import config as run_config
    from attnlab.train.trainer import Trainer

    cfg = run_config.load(opts.config, list(opts.set))
    if opts.dtype != "auto":  # the config's train.precision is the user's own choice; an explicit --dtype overrides it
        precision = devices.precision(opts.dtype, opts.device)
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=precision))
    out = opts.out or Path("runs/train") / (opts.config.stem if opts.config else "run")
    if opts.resume and not out.is_dir():
        raise UserError(f"--resume: {out} does not exist; drop --resume to start a new run there")
    if cfg.train.warmup > cfg.train.steps:  # legitimate in a shortened smoke run, but never silently
        print(
            f"note: train.warmup ({cfg.train.warmup}) exceeds train.steps ({cfg.train.steps}): the learning "
            f"rate stays below train.lr ({cfg.train.lr:g}) for the whole run",
            file=sys.stderr,
        )
    # one lock for the run, held by the launching process (torchrun's rank 0): its other ranks write with it
    with io.locked(out) if os.environ.get("RANK", "0") == "0" else contextlib.nullcontext():
        trainer = Trainer(
            cfg, out, resume=opts.resume, overwrite=opts.overwrite, progress=not opts.no_progress, device=opts.device
        )
        if trainer.world.main:
            state = f"resuming at step {trainer.step}" if trainer.step else "starting"
            print(
                f"training {trainer.cfg.model.layers}-layer {trainer.cfg.model.d_model}-wide decoder "
                f"({sum(p.numel() for p in trainer.model.parameters()):,} parameters) for "
                f"{trainer.cfg.train.steps} steps on {trainer.world.size} process(es), {state}; output {out}"
            )
        summary = trainer.run()
    if trainer.world.main:
        shown = {k: v for k, v in summary.items() if v is not None}
        print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()))
        print(f"wrote: {out}/ (metrics.jsonl, train.csv, eval.csv, summary.json, config.json, checkpoints/)")
    return 0


@dataclass(frozen=True)
class ReplayOptions:
    run: Path = option(
        help="a finished or running attnlab train folder (its config.json and eval.csv)", positional=True
    )
    score: str | None = option(
        None,
        "raw or excess: the lower-copy score the rules compare (default: the run's intervention.score)",
        choices=("raw", "excess"),
    )
    out: Path | None = option(None, "also write the table as FILE.csv and FILE.md", metavar="FILE")
    overwrite: bool = option(False, "replace FILE.csv and FILE.md even if release-replay did not write them")


def _check_replay_out(stem: Path, columns: list[str]) -> None:
    """Refuse FILE.csv / FILE.md unless new or an earlier replay's (its CSV header is the replay table's)."""
    import csv

    csv_path, md_path = stem.with_suffix(".csv"), stem.with_suffix(".md")
    try:
        with open(csv_path, newline="", encoding="utf-8") as table:
            ours = next(csv.reader(table), None) == columns
    except (OSError, UnicodeDecodeError):
        ours = False
    taken = [str(p) for p in (csv_path, md_path) if p.exists()]
    if taken and not ours:
        raise UserError(
            f"--out: {' and '.join(taken)} exist and are not a release-replay table; pass --overwrite "
            "to replace them, or choose another --out"
        )


def read_evaluations(path: Path):
    """A run's eval.csv: one row per evaluation, its step a whole number and its scores numbers or empty."""
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:  # not text, no header, torn rows
        raise UserError(f"{path} is not a readable CSV table ({type(exc).__name__}); attnlab train writes it") from None
    for column in ("step", "lower_copy", "lower_copy_chance"):
        if column in frame and not pd.api.types.is_numeric_dtype(frame[column]):
            raise UserError(f"{path}: column {column} holds text; allowed: numbers (empty where not logged)")
    steps = frame["step"] if "step" in frame else None
    if steps is None or steps.isna().any() or not (steps == steps.round()).all():
        raise UserError(f"{path}: column step is missing or not whole numbers; allowed: the step of each evaluation")
    return frame


@command(
    "release-replay",
    "replay the release rule's variants on a run's logged lower-copy scores",
    "Zhu et al. 2026 App. F, Table 8: recompute the release step of the main lower-copy rule and its "
    "neighbours (threshold 0.003 / 0.007, patience 1 / 5, forced at 8%) from the lower_copy and "
    "lower_copy_chance columns of a run's eval.csv, without training.",
    ReplayOptions,
)
def release_replay(opts: ReplayOptions) -> int:
    import dataclasses

    import pandas as pd

    from attnlab.train.config import read_run_config  # train.steps, which the replay scales its window by, present
    from attnlab.train.release import table8

    files = [opts.run / "config.json", opts.run / "eval.csv"]
    if missing := [str(f) for f in files if not f.is_file()]:
        raise UserError(f"{opts.run} is not a run folder with logged evaluations: {', '.join(missing)} missing")
    cfg = read_run_config(files[0])
    frame = read_evaluations(files[1])
    if "lower_copy" not in frame:
        raise UserError(
            f"{files[1]} has no lower_copy column: the run logged no lower-copy score (a model of "
            "one layer, or probes off without an intervention)"
        )
    chance = frame["lower_copy_chance"] if "lower_copy_chance" in frame else pd.Series(float("nan"), frame.index)
    rule = dataclasses.replace(cfg.intervention, score=opts.score or cfg.intervention.score)
    if rule.score == "excess" and chance.isna().all():
        raise UserError(f"{files[1]} has no lower_copy_chance column (logged before attnlab wrote it); use --score raw")
    rows = pd.DataFrame(table8(rule, cfg.train.steps, zip(frame.step, frame.lower_copy, chance)))
    if opts.out is not None and not opts.out.name:
        raise UserError(f"--out takes a file name (FILE for FILE.csv and FILE.md), got {str(opts.out)!r}")
    if opts.out is not None and not opts.overwrite:
        _check_replay_out(opts.out.with_suffix(""), list(rows.columns))
    print(io.to_markdown(rows))
    if opts.out is not None:
        paths = io.write_table(opts.out.with_suffix(""), rows)
        print(f"wrote: {paths['csv']} and {paths['md']}")
    return 0


@dataclass(frozen=True)
class LengthgenRun(Placement, Launch):
    """How a lengthgen run is carried out, apart from what it computes."""

    jobs: int = option(
        1,
        "train N variants at once in separate processes, splitting the CPU threads between "
        "them (on CPU, one per core is fastest for the smoke models)",
        metavar="N",
        type=options.count,
    )
    no_progress: bool = option(False, PROGRESS_HELP)
    out: Path = option(Path("runs/lengthgen"), "output folder", metavar="DIR")
    overwrite: bool = option(
        False,
        "start clean: remove what an earlier lengthgen run wrote in --out (other "
        "files stay); without it, a run trained under other settings there is refused",
    )

    def __post_init__(self) -> None:
        from attnlab.studies.lengthgen.experiment import check_jobs

        Placement.__post_init__(self)
        Launch.__post_init__(self)
        check_jobs(self.jobs)


@command(
    "lengthgen",
    "length generalization per attention variant (Vasylenko et al. 2025 Table 1)",
    "Train one decoder per variant on a synthetic task at --train-len, score exact match at each multiple "
    "of it, and record attention entropy and support per layer; finished cells are reused on a rerun, "
    "which may change only the variants, --eval-mult and --samples.",
    "attnlab.studies.lengthgen.config:LengthgenConfig",
    LengthgenRun,
)
def lengthgen(cfg, opts: LengthgenRun) -> int:
    from attnlab.studies.lengthgen import experiment as lg

    result = lg.run(
        cfg,
        opts.out,
        progress=not opts.no_progress,
        jobs=opts.jobs,
        overwrite=opts.overwrite,
        device=opts.device,
        dtype=opts.dtype,
        launch=Launch(launcher=opts.launcher, submitit=opts.submitit),
    )
    print(
        f"{lg.metric(cfg.task_def)[0]} (%) on {cfg.task}, trained at {cfg.trained_at} tokens with {cfg.pe}, "
        f"{cfg.plan.samples} samples per length ({cfg.budget} budget, {cfg.plan.steps} steps)"
    )
    print(result["table"].round(1).to_string())
    if failed := lg.not_learned(result["table"]):
        print(
            f"warning: not learned in distribution (1x < {100 * lg.LEARNED:.0f}%): "
            + ", ".join(f"{v} {score:.1f}%" for v, score in failed.items())
            + "; their longer lengths do not measure length generalization"
        )
    dispersion = lg.dispersion_table(result["cells"])
    print("attention of the answer rows by length, mean over layers and heads: entropy (nats), support (keys)")
    summary = dispersion.pivot_table(index="variant", columns="length", values=["answer_entropy", "answer_support"])
    print(summary.reindex(list(cfg.maps)).round(2).to_string())
    print("wrote:")
    for path in result["paths"].values():
        print(f"  {path}")
    return 0
