"""What ``attnlab report`` shows for a folder a command wrote (audit, substitute, ablate, matched, heads):
its tables, and the analyses the paper draws from them, recomputed from the folder's files.

Each command declares its section next to its code with ``register``, naming the table file that marks
its folders; ``section(folder)`` finds the command and builds the section.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..registry import Registry
from ..report.sections import Section

BUILTIN = ("audit", "substitute", "ablate", "matched", "heads")


@dataclass(frozen=True)
class FolderSection:
    """How to report a command's folder: ``marker`` is the file only that command writes there."""

    name: str
    marker: str
    build: Callable[[Path, dict], Section]


SECTIONS: Registry[FolderSection] = Registry("command folder")


def register(name: str, marker: str) -> Callable[[Callable[[Path, dict], Section]], Callable[[Path, dict], Section]]:
    """Declare the decorated ``build(folder, config) -> Section`` as the report of command ``name``'s folders."""
    def add(build: Callable[[Path, dict], Section]) -> Callable[[Path, dict], Section]:
        SECTIONS.register(name, FolderSection(name, marker, build))
        return build

    return add


def _entries() -> list[FolderSection]:
    for name in BUILTIN:  # the built-in commands declare their sections on import
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
        raise ValueError(f"{folder} is not a finished folder of {', '.join(BUILTIN)}")
    return entry.build(folder, json.loads((folder / "config.json").read_text(encoding="utf-8")))
