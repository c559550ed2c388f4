"""What ``attnlab report`` shows for a folder a command wrote (audit, lengths, substitute, ablate, matched, heads,
temperature, xi-sweep, fit-xi): its tables, and the analyses the paper draws from them, recomputed from the
folder's files.

Each command declares its section next to its code with ``register``, naming the table file that marks
its folders; ``section(folder)`` finds the command and builds the section.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnlab.errors import ArgumentError
from attnlab.registry import Registry
from attnlab.report.sections import Section

# the modules of the built-in commands, which declare their sections on import
BUILTIN = ("audit", "lengths", "substitute", "ablate", "matched", "heads", "temperature", "xi_sweep", "fit_xi")


@dataclass(frozen=True)
class FolderSection:
    """How to report a command's folder: ``marker`` is the file only that command writes there; ``compare``
    (optional) builds one section across several of its folders, writing its tables into a given folder."""

    name: str
    marker: str
    build: Callable[[Path, dict], Section]
    compare: Callable[[list[Path], Path], Section] | None = None


SECTIONS: Registry[FolderSection] = Registry("command folder")


def register(name: str, marker: str) -> Callable[[Callable[[Path, dict], Section]], Callable[[Path, dict], Section]]:
    """Declare the decorated ``build(folder, config) -> Section`` as the report of command ``name``'s folders."""

    def add(build: Callable[[Path, dict], Section]) -> Callable[[Path, dict], Section]:
        SECTIONS.register(name, FolderSection(name, marker, build))
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
    ``into/compare_<command>``."""
    by_command: dict[str, list[Path]] = {}
    for folder in folders:
        by_command.setdefault(command_of(folder).name, []).append(folder)
    out = []
    for name, group in by_command.items():
        compare = SECTIONS[name].compare
        if compare is not None and len(group) > 1:
            out.append((compare(group, into / f"compare_{name}"), into / f"compare_{name}"))
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


def section(folder: str | Path) -> Section:
    """The report section of a command's folder, recomputed from its files."""
    folder = Path(folder)
    entry = command_of(folder)
    if entry is None:
        raise ArgumentError(f"{folder} is not a finished folder of {', '.join(e.name for e in _entries())}")
    return entry.build(folder, json.loads((folder / "config.json").read_text(encoding="utf-8")))
