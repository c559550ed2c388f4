"""The generic study runner: the registry of studies, and the reading, writing and rendering every study
shares. ``attnlab study NAME`` runs one; ``attnlab demo`` gathers them; ``attnlab report`` re-renders.

The registry is open: each study module declares its entry once, at its bottom
(``STUDY = register(Study(...))``), and a user adds one's own the same way. A study runs in two steps:

- ``compute(cfg, folder, progress)`` does the expensive work (training, forward passes) and writes its raw
  results into the study folder as Parquet, CSV or JSON. It is resumable: training runs resume from
  their checkpoints and finished pieces are kept, so a study interrupted and started again with the
  same folder carries on.
- ``summarize(folder)`` reads only the folder's files (``config.json`` and the raw results), writes
  the derived tables (CSV and Markdown) and figures (PNG and SVG), and returns the report ``Section``.
  ``attnlab report FOLDER`` calls it again: every number of a report is recomputed from the files.

``run`` ties the two together and writes ``section.json`` last, so a folder holding one is complete.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from attnlab import __version__, io, options, papers
from attnlab.devices import Placement
from attnlab.errors import ArgumentTypeError, Error
from attnlab.options import MODEL_HELP, option
from attnlab.registry import Registry
from attnlab.report.readback import ReadBackError, read_object, read_record
from attnlab.report.sections import Section
from attnlab.workers import Launch, world_size

BUDGETS = ("smoke", "full")  # every study has these
DEMO = "demo"  # a reduced budget that attnlab demo runs instead of smoke, for the studies that have one
CONFIG = "config.json"
SECTION = "section.json"


class StudyError(Error, ValueError):
    """Bad input to a study, or a folder that holds another run; the message says what to do."""


@dataclass(frozen=True)
class StudyConfig(Placement, Launch):
    """study: a registry name; budget: smoke (CPU, minutes) or full (the seed's scale, a GPU);
    model: a pretrained checkpoint for the studies that read one (a fetched model's name, a .gguf file or
    a save_pretrained folder): the concentration study audits it instead of its toy model, the sinks and
    temperature studies add a real-model section on it; seed; device and dtype (``attnlab.devices``);
    launcher and submitit: how independent cells run (``workers.Launch``). Where and how a study runs is not
    part of what it is: a study started on one machine resumes on another."""

    study: str = option(help="one of: %(choices)s", positional=True, metavar="NAME", choices=lambda: list(STUDIES))
    budget: str = option(
        "smoke",
        "smoke: minutes on a CPU; full: the paper's scale, for a GPU; demo: the reduced "
        "smoke run attnlab demo makes, for the studies that have one",
        choices=(*BUDGETS, DEMO),
    )
    model: str | None = option(None, f"for the studies that read one: {MODEL_HELP}", metavar="MODEL")
    seed: int = option(0, "seed of data and training", metavar="N", type=options.seed)
    data: str | None = option(
        None,
        "for the studies that train on text: a token-shard folder written by "
        "attnlab prepare (your corpus and tokenizer; default: bytes of the Python "
        "standard library)",
        metavar="SHARDS",
    )

    def __post_init__(self) -> None:
        Placement.__post_init__(self)
        Launch.__post_init__(self)
        if self.study not in STUDIES:
            raise StudyError(f"unknown study {self.study!r}; choose one of {', '.join(STUDIES)}")
        if self.budget not in (*BUDGETS, DEMO):
            raise StudyError(f"--budget must be one of {', '.join((*BUDGETS, DEMO))}, got {self.budget!r}")
        if self.budget == DEMO and not STUDIES[self.study].demo:
            raise StudyError(
                f"study {self.study!r} has no demo budget (its demo runs smoke); the studies with one: "
                f"{', '.join(n for n, s in STUDIES.items() if s.demo) or 'none'}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise StudyError(f"--seed must be an int >= 0, got {self.seed!r}")
        if self.model is not None and not STUDIES[self.study].takes_model:
            raise StudyError(
                f"study {self.study!r} trains its own models and takes no --model; "
                f"--model is for {', '.join(n for n, s in STUDIES.items() if s.takes_model)}"
            )
        if self.model is not None and (not isinstance(self.model, str) or not self.model):
            raise StudyError(f"--model must be a model name or path, got {self.model!r}")
        if self.data is not None and not STUDIES[self.study].takes_data:
            raise StudyError(
                f"study {self.study!r} takes no --data; --data is for "
                f"{', '.join(n for n, s in STUDIES.items() if s.takes_data) or 'no study'}"
            )

    def command(self, folder: Path) -> str:
        """The command line that makes this folder."""
        parts = ["attnlab", "study", self.study, "--budget", self.budget, "--seed", str(self.seed)]
        if self.model is not None:
            parts += ["--model", self.model]
        if self.data is not None:
            parts += ["--data", self.data]
        if self.dtype != "auto":
            parts += ["--dtype", self.dtype]
        return shlex.join([*parts, "--out", str(folder)])

    def identity(self) -> StudyConfig:
        """This config without where and how it runs (device, launcher): what a resumed study must match."""
        return replace(self, device="auto", launcher="local", submitit={})


@dataclass(frozen=True)
class Study:
    """A registry entry. name: what users type; title: the report's heading; source: the keys of the papers
    it re-asks (``attnlab.papers``), comma-separated; compute(cfg, folder, progress) and summarize(folder):
    the two steps; compare(folders, into): optional, a Section across several summarized folders of the
    study (or None), its tables written into ``into``; takes_model: whether ``--model`` applies; takes_data:
    whether ``--data`` (token shards) applies; demo: whether the study has a reduced ``demo`` budget, which
    attnlab demo runs instead of smoke; findings: the names (``Finding.name``) of every finding its summarize can
    give, the ones a paper's claims table cites (``attnlab.studies.claims``)."""

    name: str
    title: str
    source: str
    compute: Callable[[StudyConfig, Path, bool], None]
    summarize: Callable[[Path], Section]
    compare: Callable[[list[Path], Path], Section | None] | None = None
    takes_model: bool = False
    takes_data: bool = False
    demo: bool = False
    findings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.findings, tuple) or not all(isinstance(n, str) and n for n in self.findings):
            raise StudyError(f"study {self.name!r}: findings is a tuple of finding names, got {self.findings!r}")
        unknown = [key for key in self.source.split(", ") if key not in papers.PAPERS]
        if unknown:
            raise StudyError(
                f"study {self.name!r} cites {', '.join(map(repr, unknown))}, not a paper key; "
                "source names papers by their keys (attnlab.papers.register adds one)"
            )
        for step in ("compute", "summarize"):
            if not callable(getattr(self, step)):
                raise StudyError(f"study {self.name!r}: {step} must be a function")
        if self.compare is not None and not callable(self.compare):
            raise StudyError(f"study {self.name!r}: compare must be a function or None")


STUDIES: Registry[Study] = Registry("study")


def register(study: Study, *, replace: bool = False) -> Study:
    """Add ``study`` to the registry under its name and return it; a name already taken raises
    ValueError unless ``replace``."""
    if not isinstance(study, Study):
        raise ArgumentTypeError(f"register takes a Study, got {type(study).__name__}")
    return STUDIES.register(study.name, study, replace=replace)


def demo_plan(names: list[str], models: list[str], out: Path) -> list[tuple[str, str | None, Path]]:
    """(study, model, folder) for the demo: each study once into ``out/<study>``, with the first model
    where the study takes one; the concentration study again on each further model, into
    ``out/<study>-<model>`` (the cross-model table compares them)."""
    first = models[0] if models else None
    plan = []
    for name in names:
        takes = STUDIES[name].takes_model
        plan.append((name, first if takes else None, out / name))
        if name == "concentration":
            plan += [(name, model, out / f"{name}-{Path(model).stem}") for model in models[1:]]
    return plan


def demo_budget(name: str) -> str:
    """The budget attnlab demo runs study ``name`` at: its reduced demo budget where it has one, else smoke."""
    return DEMO if STUDIES[name].demo else "smoke"


WRITTEN = ("study", "budget", "model", "seed")  # the keys of config.json every attnlab that wrote one wrote


def read_config(folder: Path) -> dict[str, Any]:
    """The study config a folder was made with, checked against ``StudyConfig`` (``readback.read_record``: the
    keys of ``WRITTEN`` present, every field of its type); StudyError if it holds none or names no known study."""
    path = Path(folder) / CONFIG
    if not path.is_file():
        raise StudyError(f"{folder} holds no {CONFIG}: it is not a study folder")
    saved = read_record(path, StudyConfig, required=WRITTEN)
    if saved["study"] not in STUDIES:
        raise StudyError(f"{path}: study is {saved['study']!r}; allowed: one of {', '.join(STUDIES)}")
    return saved


def load_config(folder: Path) -> StudyConfig:
    """The config a study folder was made with, as far as it decides the results (``StudyConfig.identity``);
    a folder written before --data or --dtype existed made them with their defaults."""
    saved = read_config(folder)
    given = {k: saved[k] for k in WRITTEN}
    try:
        return StudyConfig(**given, **{k: saved[k] for k in ("data", "dtype") if saved.get(k) is not None})
    except Error as exc:  # a value of the right type that no study takes (a budget of another study)
        raise StudyError(f"{Path(folder) / CONFIG}: {exc}") from None


def _claim(cfg: StudyConfig, folder: Path) -> None:
    """Write the config, or check that the folder's own config is this one (resume)."""
    if (folder / CONFIG).is_file():
        saved = load_config(folder)
        if saved != cfg.identity():
            raise StudyError(
                f"{folder} holds a run made with {saved.command(folder)}; resume with that "
                "command, or pass another --out"
            )
        io.claim(folder)  # a study of an older attnlab, resumed: marked from now on (a new one is, by io.locked)
        return
    if folder.exists() and any(not e.name.startswith(".") for e in folder.iterdir()):  # hidden: locks, leftovers
        raise StudyError(f"{folder} is not empty and holds no study; pass an empty or new --out")
    model = {}
    if cfg.model is not None:  # where --model came from: its absolute path and sha256, beside the name as typed
        from attnlab.loading.load import provenance

        model = provenance(cfg.model)
    io.write_json(folder / CONFIG, {**asdict(cfg), **model, "attnlab": __version__, "command": cfg.command(folder)})


def section(name: str, folder: Path, **fields: Any) -> Section:
    """Study ``name``'s section with the registry's title and source and the command that made ``folder``."""
    study = STUDIES[name]
    return Section(
        study=name, title=study.title, source=study.source, command=load_config(folder).command(folder), **fields
    )


def summarize(folder: Path) -> Section:
    """The folder's section, recomputed from its files (written to ``section.json``)."""
    folder = Path(folder)
    name, command = read_config(folder)["study"], load_config(folder).command(folder)
    try:
        section = STUDIES[name].summarize(folder)
    except (ReadBackError, StudyError):  # it names the file, or the folder and what to do, already
        raise
    except (Error, OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
        # A file of the folder is missing, torn or edited: say which folder and how to rebuild it, in one line.
        detail = (str(exc).strip().splitlines() or [""])[0][:300]
        raise StudyError(
            f"{folder}: cannot rebuild the {name} section from its files ({type(exc).__name__}: {detail}); one of "
            f"them is missing, torn or edited: rerun {command} to write it again"
        ) from None
    io.write_json(folder / SECTION, section.to_dict())
    return section


def run(cfg: StudyConfig, folder: str | Path, progress: bool = False) -> Section:
    """Run (or resume) a study into ``folder`` and return its section; with ``progress``, one line on
    stderr as it starts and one as it ends."""
    folder = Path(folder)
    if world_size() > 1:  # every rank would claim the folder and train every cell
        raise StudyError(
            "a study spreads its cells over the GPUs itself (one process each); start it without torchrun, "
            "which is for attnlab train"
        )
    if folder.exists() and not folder.is_dir():
        raise StudyError(f"--out {folder} is a file; pass a folder")
    if cfg.model is not None:
        from attnlab.loading.load import LoadError, check_model

        try:
            check_model(cfg.model, cfg.device, cfg.dtype)
        except LoadError as exc:  # before _claim: a corrected command must not meet this one's config
            raise StudyError(str(exc)) from None
    if cfg.data is not None:
        from attnlab.batches import DataError
        from attnlab.train.shards import read_meta

        try:
            read_meta(cfg.data)
        except DataError as exc:  # likewise
            raise StudyError(f"--data: {exc}") from None
    with io.locked(folder):
        _claim(cfg, folder)
        # Plain lines, not a bar: progress bars are drawn only on a terminal, and a captured log (a demo run
        # under nohup, CI) still needs to show which study is running and when each one ended.
        started = time.monotonic()
        if progress:
            print(f"study {cfg.study}: started, into {folder}", file=sys.stderr, flush=True)
        STUDIES[cfg.study].compute(cfg, folder, progress)
        section = summarize(folder)
    if progress:
        print(f"study {cfg.study}: finished in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return section


def _is_study(folder: Path) -> bool:
    """Whether ``folder`` holds a study's config: a command's config.json has no "study"; a torn one counts,
    so that ``read_config`` names it rather than the report leaving the folder out unsaid."""
    path = folder / CONFIG
    if not (folder.is_dir() and path.is_file()):
        return False
    try:
        return "study" in read_object(path)
    except ReadBackError:  # torn: a study's unless a command's table marks the folder as that command's
        from attnlab.analyses.sections import command_of

        return command_of(folder) is None


def study_folders(path: str | Path, *, required: bool = True) -> list[Path]:
    """The study folders a path names: itself if it is one, else its subfolders that are (a demo's
    folder), in registry order; none is a StudyError unless not ``required``."""
    path = Path(path)
    if not path.is_dir():
        raise StudyError(f"{path} is not a folder")
    if _is_study(path):
        return [path]
    found = [(read_config(sub)["study"], sub) for sub in sorted(path.iterdir()) if _is_study(sub)]
    if not found and required:
        raise StudyError(f"{path} holds no study folder (a folder with the {CONFIG} that attnlab study writes)")
    order = list(STUDIES)
    return [sub for _, sub in sorted(found, key=lambda pair: order.index(pair[0]))]


def write_page(
    sections: list[tuple[Section, Path]], out: str | Path, title: str, *, sources: dict[Path, Path] | None = None
) -> Path:
    """One HTML page of (section, its folder) pairs, written to ``out``: a new file, or a page attnlab wrote
    before; any other file there is refused (StudyError). ``sources``: the folder a report's copy was made from, by
    copy (``report.html.render``)."""
    from attnlab.report.html import render

    check_page(out)
    return io.write_text(out, render(sections, title, sources=sources))


def check_page(out: str | Path) -> None:
    """Refuse (StudyError) a page path that is a folder, or a file attnlab did not render."""
    from attnlab.report.html import is_ours

    out = Path(out)
    if out.is_dir():
        raise StudyError(f"{out} is a folder where attnlab writes its page; move it away, or choose another --out")
    if out.exists() and not is_ours(out):
        raise StudyError(f"{out} is a file attnlab did not write; move it away, or choose another --out")


def check_demo_folder(out: str | Path, plan: list[tuple[str, str | None, Path]]) -> None:
    """Refuse (StudyError) a demo folder that holds anything but what attnlab writes there: the demo's study folders
    (``demo_plan``), cross-model comparisons (compare_*) and pages attnlab rendered. A new or empty folder passes,
    and so does an earlier demo's, which the demo resumes."""
    from attnlab.report.html import is_ours

    out = Path(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise StudyError(f"--out {out} is a file; pass a folder")
    if _is_study(out):
        raise StudyError(
            f"{out} is the folder of one study; the demo writes one folder per study inside its --out: "
            "choose another --out"
        )
    planned = {folder.name for _, _, folder in plan}
    foreign = []
    for entry in sorted(out.iterdir()):
        if entry.is_dir():
            ours = entry.name.startswith("compare_") or (
                entry.name in planned and (_is_study(entry) or not any(entry.iterdir()))
            )
        else:
            ours = is_ours(entry)  # its page, or another that attnlab report rendered there
        if not (ours or entry.name.startswith(".")):
            foreign.append(entry.name)
    if foreign:
        more = ", ..." if len(foreign) > 4 else ""
        raise StudyError(
            f"{out} holds files the demo did not write ({', '.join(foreign[:4])}{more}); choose "
            "another --out (a new folder, or an earlier demo's to resume it)"
        )


def comparisons(folders: list[Path], into: Path) -> list[tuple[Section, Path]]:
    """The cross-folder sections (e.g. one row per model) of every study given more than one folder."""
    by_study: dict[str, list[Path]] = {}
    for folder in folders:
        by_study.setdefault(read_config(folder)["study"], []).append(folder)
    out = []
    for name, group in by_study.items():
        compare = STUDIES[name].compare
        if compare is not None and len(group) > 1:
            target = into / f"compare_{name}"
            io.check_links(target)  # a link planted there would take the tables to wherever it points
            io.record(into, target.name)  # listed before it is made, as the folder's own
            found = compare(group, target)
            if found is not None:
                out.append((found, target))
    return out


def command_folders(path: str | Path) -> list[Path]:
    """The folders of checkpoint commands (audit, lengths, substitute, ...) a path names: itself if
    it is one, else its subfolders that are, by name. A study folder is never one, though it may hold a
    command's marker file (a study that reads a checkpoint writes tables of the same names)."""
    from attnlab.analyses.sections import command_of

    def command(folder: Path) -> bool:
        return not _is_study(folder) and command_of(folder) is not None

    path = Path(path)
    if command(path):
        return [path]
    return [sub for sub in sorted(path.iterdir()) if sub.is_dir() and command(sub)] if path.is_dir() else []


PAGE = "index.html"
REPORT = ".attnlab-report"  # marks a folder attnlab report wrote, which a later report into it replaces
COPIES = "folders"  # under --out: one copy per folder reported, where its section is recomputed
# Model and optimizer weights: no summary reads them, and a study's checkpoints would make a copy heavy.
WEIGHTS = frozenset({".safetensors", ".pt", ".pth", ".bin", ".ckpt", ".gguf"})


def check_report_out(out: str | Path, paths: list[str | Path]) -> None:
    """Refuse (StudyError) a report folder that is a file or a link, that would hold or lie inside a folder it
    reads, or that holds anything but an earlier report: the report writes only there and never into its inputs."""
    out = Path(out)
    if out.suffix.lower() in (".html", ".htm"):
        raise StudyError(f"--out {out}: give a folder; attnlab report writes its page there as {PAGE}")
    if out.is_symlink():
        raise StudyError(f"--out {out} is a symbolic link; attnlab never writes through one: choose another --out")
    if out.exists() and not out.is_dir():
        raise StudyError(f"--out {out} is a file; pass a folder")
    mine = out.resolve()
    for path in map(Path, paths):
        given = path.resolve()
        if mine == given or given in mine.parents or mine in given.parents:
            raise StudyError(
                f"--out {out} {'is' if mine == given else 'lies inside' if given in mine.parents else 'holds'} "
                f"{path}, which the report reads; it writes only under --out: choose a folder apart from it"
            )
    if out.is_dir() and not (out / REPORT).is_file() and any(not e.name.startswith(".") for e in out.iterdir()):
        raise StudyError(
            f"--out {out} holds files attnlab report did not write; choose a new or empty folder, or an earlier "
            "report's"
        )


def _copy_folder(src: Path, dst: Path) -> None:
    """Copy the plain files of ``src`` that a summary may read into the new folder ``dst``: hidden entries (locks,
    markers, temporary folders) and ``WEIGHTS`` are left out, and so are linked folders (a link may loop); a linked
    file is copied as its content, so nothing in ``dst`` leads out of it."""
    for root, folders, files in os.walk(src):
        folders[:] = sorted(f for f in folders if not f.startswith(".") and not os.path.islink(os.path.join(root, f)))
        here = dst / Path(root).relative_to(src)
        here.mkdir(parents=True, exist_ok=True)
        for name in sorted(files):
            path = Path(root, name)
            if not name.startswith(".") and path.suffix not in WEIGHTS and path.is_file():  # no fifo, no dangling link
                shutil.copyfile(path, here / name)


def _tables(folder: Path) -> dict[Path, int]:
    """The CSV tables under ``folder``, by path, with their inode: a table the summary rewrote gets a new one
    (``io.atomic_write`` renames a new file over it), one it only showed keeps its own."""
    return {path: path.stat().st_ino for path in folder.rglob("*.csv") if path.is_file()}


def _marked(section: Section, folder: Path, before: dict[Path, int]) -> Section:
    """``section`` with each table the summary did not rewrite marked ``found``: shown as its command wrote it."""
    tables = []
    for table in section.tables:
        path = folder / f"{table.stem}.csv"
        kept = path in before and path.is_file() and path.stat().st_ino == before[path]
        tables.append(replace(table, found=kept))
    return replace(section, tables=tuple(tables))


def _as_given(section: Section, copies: dict[Path, Path]) -> Section:
    """``section`` with each copy's path in its command line and notes put back as the folder the user gave: the page
    names the folders the copies were made from."""

    def given(text: str) -> str:
        for copy, source in copies.items():
            text = text.replace(shlex.quote(str(copy)), shlex.quote(str(source))).replace(str(copy), str(source))
        return text

    return replace(section, command=given(section.command), notes=tuple(map(given, section.notes)))


def _slug(folder: Path, taken: set[str]) -> str:
    """A name for ``folder``'s copy, unique among ``taken`` (case aside): its own name, -2, -3 after a second."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.resolve().name).strip(".-") or "folder"
    name, k = base, 1
    while name.lower() in taken:
        k += 1
        name = f"{base}-{k}"
    taken.add(name.lower())
    return name


def report(paths: list[str | Path], out: str | Path, title: str = "attnlab report") -> Path:
    """Recompute every section from a copy of its folder's files and write one HTML page, ``out/index.html``, with
    the cross-folder comparisons (in ``out/compare_<study>/``) first. A path may name study folders or the folders
    of checkpoint commands (``analyses.sections``), or a folder holding either. Everything is written under
    ``out`` (the copies in ``out/folders/``), never into the folders read; an earlier report in ``out`` is
    replaced. A table the summary did not rewrite is marked as shown as found."""
    from attnlab.analyses.sections import read_config as read_command_config

    out = Path(out)
    check_report_out(out, paths)
    studies, commands = [], []
    for path in map(Path, paths):
        found = [] if _is_study(path) else command_folders(path)  # a study reports its own command folders
        commands += found
        studies += study_folders(path, required=not found)
    for folder in studies:  # a torn config is named, as the folder given, before anything is written
        load_config(folder)
    for folder in commands:
        read_command_config(folder)
    with io.locked(out):
        check_report_out(out, paths)  # again, under the lock: another report may have written there meanwhile
        _clear(out)
        io.write_text(out / REPORT, "attnlab report writes this folder; a later report into it replaces it\n")
        try:
            return _write_report(out, studies, commands, title)
        except BaseException:  # a half report must not pass for one: what this report wrote goes
            io.clear(out, _ours(out))
            io.remove(out / REPORT)
            raise


def _ours(out: Path) -> list[str]:
    """The names a report writes in ``out`` that are there now: the page, the copies, the comparisons."""
    return [
        name for name in (PAGE, COPIES, *sorted(e.name for e in out.glob("compare_*"))) if os.path.lexists(out / name)
    ]


def _clear(out: Path) -> None:
    """Delete what an earlier report listed in ``out``'s marker (``io.clear``); refuse (StudyError) a file of one of
    its names that no report wrote, a user's own put into a report's folder, which a report would write into."""
    io.clear(out, _ours(out))
    if left := _ours(out):
        raise StudyError(
            f"--out {out} holds {', '.join(left)}, which attnlab report did not write and would write into; move "
            "them away, or choose another --out"
        )


def _write_report(out: Path, studies: list[Path], commands: list[Path], title: str) -> Path:
    """``report``'s work inside the held folder ``out``, cleared of an earlier report: each folder copied to
    ``out/folders/`` and its section recomputed there, the comparisons, the page."""
    from attnlab.analyses.sections import comparisons as command_comparisons
    from attnlab.analyses.sections import section as command_section

    io.record(out, COPIES)
    taken: set[str] = set()
    copies = {out / COPIES / _slug(folder, taken): folder for folder in [*studies, *commands]}
    builds = [summarize] * len(studies) + [command_section] * len(commands)
    sections = []
    for (copy, folder), build in zip(copies.items(), builds):
        _copy_folder(folder, copy)
        before = _tables(copy)
        try:
            built = build(copy)
        except Error as exc:  # named as the folder given, not as its copy
            raise StudyError(str(exc).replace(str(copy), str(folder))) from None
        sections.append((_as_given(_marked(built, copy, before), copies), copy))
    study_copies, command_copies = list(copies)[: len(studies)], list(copies)[len(studies) :]
    compared = [*comparisons(study_copies, out), *command_comparisons(command_copies, out)]
    compared = [(_as_given(section, copies), target) for section, target in compared]
    return write_page([*compared, *sections], out / PAGE, title, sources=copies)
