"""What ``attnlab report`` shows for a folder a command wrote (audit, lengths, substitute, ablate, matched, heads,
temperature, xi-sweep, fit-xi): its tables, and the analyses the paper draws from them, recomputed from the
folder's files.

Each command declares its section next to its code with ``register``, naming the table file that marks
its folders; ``section(folder)`` finds the command and builds the section.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnlab.errors import ArgumentError, Error
from attnlab.io import check_links, record
from attnlab.registry import Registry
from attnlab.report.readback import ReadBackError, read_record
from attnlab.report.sections import Section

# the modules of the built-in commands, which declare their sections on import
BUILTIN = ("audit", "lengths", "substitute", "ablate", "matched", "heads", "temperature", "xi_sweep", "fit_xi")


@dataclass(frozen=True)
class FolderSection:
    """How to report a command's folder: ``marker`` is the file only that command writes there; ``config`` the
    dataclass its config.json is written from (``read_config`` holds the file against it); ``compare`` (optional)
    builds one section across several of its folders, writing its tables into a given folder."""

    name: str
    marker: str
    build: Callable[[Path, dict], Section]
    config: type
    compare: Callable[[list[Path], Path], Section] | None = None
    required: tuple[str, ...] = ()


SECTIONS: Registry[FolderSection] = Registry("command folder")


def register(
    name: str, marker: str, config: type, *, required: tuple[str, ...] = ()
) -> Callable[[Callable[[Path, dict], Section]], Callable[[Path, dict], Section]]:
    """Declare the decorated ``build(folder, config) -> Section`` as the report of command ``name``'s folders, whose
    config.json is dataclass ``config``'s (``required``: its fields with a default that the command always writes
    and the build reads)."""

    def add(build: Callable[[Path, dict], Section]) -> Callable[[Path, dict], Section]:
        SECTIONS.register(name, FolderSection(name, marker, build, config, required=required))
        return build

    return add


def compares(name: str) -> Callable[[Callable[[list[Path], Path], Section]], Callable[[list[Path], Path], Section]]:
    """Declare the decorated ``compare(folders, into) -> Section`` as the cross-folder section of ``name``."""

    def add(compare: Callable[[list[Path], Path], Section]) -> Callable[[list[Path], Path], Section]:
        SECTIONS.register(name, dataclasses.replace(SECTIONS.find(name), compare=compare), replace=True)
        return compare

    return add


def comparisons(folders: list[Path], into: Path) -> list[tuple[Section, Path]]:
    """The cross-folder sections of every command given more than one folder, written into
    ``into/compare_<command>`` (a link there is refused: the tables would land wherever it points)."""
    by_command: dict[str, list[Path]] = {}
    for folder in folders:
        by_command.setdefault(command_of(folder).name, []).append(folder)
    out = []
    for name, group in by_command.items():
        compare = SECTIONS[name].compare
        if compare is not None and len(group) > 1:
            target = into / f"compare_{name}"
            check_links(target)
            record(into, target.name)  # listed before it is made, as the folder's own
            out.append((_rebuilt(name, target, functools.partial(compare, group, target)), target))
    return out


def _entries() -> list[FolderSection]:
    for name in BUILTIN:
        importlib.import_module(f".{name}", __package__)
    return list(SECTIONS.values())


def command_of(folder: str | Path) -> FolderSection | None:
    """The command whose finished folder this is (its marker file and config.json are there), or None."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        return None
    return next((entry for entry in _entries() if (folder / entry.marker).is_file()), None)


def read_config(folder: str | Path) -> dict:
    """The config.json of a command's folder, checked against the command's config dataclass and its ``required``
    keys (``readback.read_record``): a ReadBackError naming the file, the key and what is allowed where it is not
    one that command wrote."""
    folder = Path(folder)
    entry = command_of(folder)
    if entry is None:
        raise ArgumentError(f"{folder} is not a finished folder of {', '.join(e.name for e in _entries())}")
    return read_record(folder / "config.json", entry.config, required=entry.required)


def section(folder: str | Path) -> Section:
    """The report section of a command's folder, recomputed from its files."""
    folder = Path(folder)
    config = read_config(folder)
    name = command_of(folder).name
    return _rebuilt(name, folder, functools.partial(SECTIONS[name].build, folder, config))


def _rebuilt(name: str, folder: Path, build: Callable[[], Section]) -> Section:
    """``build()``; a file of ``folder`` that is missing, torn or edited beyond what its config's dataclass checks
    (a table's column, a key the command adds to its config) ends in one line naming the folder."""
    try:
        return build()
    except ReadBackError:  # it names the file and what is allowed already
        raise
    except (Error, OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
        detail = (str(exc).strip().splitlines() or [""])[0][:300]
        raise ReadBackError(
            f"{folder}: cannot rebuild the {name} section from its files ({type(exc).__name__}: {detail}); one of "
            "them is missing, torn or edited: rerun the command that wrote it"
        ) from None
