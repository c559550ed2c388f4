"""The machinery of the ``attnlab`` command: one table of subcommands, each with the config dataclasses
whose ``attnlab.options.option`` fields are its flags.

A subcommand's handler receives its configs, built from the parsed flags; a config that refuses a value
(a ValueError naming the flag) ends the command with that one line, as every user error does.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import textwrap
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from attnlab.errors import Error
from attnlab.options import OPTION, bounded, field_default, flag, path
from attnlab.registry import Registry


class UserError(Error):
    """An error the user can fix; printed without a traceback."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line like every other error of the command (the usage it would
    print first is one --help away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


PROGRESS_HELP = (
    "no progress bars (they are drawn only on a terminal anyway); attnlab card still names its steps and prints a "
    "line at least every 5 s within one"
)
Config = type | str  # a dataclass, or "module:Name" imported only when its command runs


@dataclasses.dataclass(frozen=True)
class Command:
    """A subcommand: ``run(*configs)`` gets one instance of each of ``configs`` (dataclasses whose option
    fields are the flags, in this order) and returns the exit status; an ``attnlab.errors.Error`` it raises,
    whichever module raised it, is the user's to fix and is printed as one line. A config given as
    "module:Name" is imported only for its own command, so that ``attnlab papers`` does not wait for torch."""

    name: str
    help: str
    description: str
    configs: tuple[Config, ...]
    run: Callable[..., int]

    def config_classes(self) -> tuple[type, ...]:
        return tuple(_resolve(c) for c in self.configs)


def _resolve(config: Config) -> type:
    if isinstance(config, type):
        return config
    module, _, name = config.partition(":")
    return getattr(importlib.import_module(module), name)


COMMANDS: Registry[Command] = Registry("command")


def command(name: str, help: str, description: str, *configs: Config) -> Callable:
    """Declare the decorated handler as subcommand ``name`` taking ``configs``."""

    def add(run: Callable[..., int]) -> Callable[..., int]:
        COMMANDS.register(name, Command(name, help, description, configs, run))
        return run

    return add


def _option_fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if OPTION in f.metadata]


def _unwrap(hint: Any) -> tuple[Any, bool]:
    """(the type a typed value has, whether the field takes several): ``int | None`` -> (int, False),
    ``tuple[float, ...]`` -> (float, True)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0], True
    return hint, False


def _shown(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


_OWN = ("help", "type", "choices", "positional", "flag", "convert")  # option() keys argparse does not take as they are


def add_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add one flag (or positional argument) per option field of ``cls``."""
    for field, hint in _option_fields(cls):
        meta = dict(field.metadata[OPTION])
        kind, several = _unwrap(hint)
        default = field_default(field)
        kw: dict[str, Any] = {k: v for k, v in meta.items() if k not in _OWN and v is not None}
        help_text = meta["help"]
        if kind is bool and not meta["positional"]:
            kw["action"] = "store_true"
        else:
            kw["type"] = bounded(
                meta["type"] or (path if kind is Path else kind if kind in (int, float) else str), field.name
            )
            if several and kw.get("action") != "append":
                kw.setdefault("nargs", "+")
            choices = meta["choices"]
            if choices is not None:
                kw["choices"] = list(choices() if callable(choices) else choices)
            empty = isinstance(default, (tuple, list, dict)) and not default
            if default not in (dataclasses.MISSING, None) and not empty and "(default" not in help_text:
                help_text += f" (default: {_shown(default)})"
        if meta["positional"]:
            if default is not dataclasses.MISSING and "nargs" not in kw:
                kw["nargs"] = "?"
            parser.add_argument(
                field.name, help=help_text, default=None if default is dataclasses.MISSING else default, **kw
            )
        else:
            if default is dataclasses.MISSING:
                kw["required"] = True
            else:  # a repeated flag starts from nothing; its field's convert makes the default of it
                kw["default"] = None if kw.get("action") == "append" else default
            parser.add_argument(flag(field), dest=field.name, help=help_text, **kw)


def build(cls: type, args: argparse.Namespace) -> Any:
    """An instance of ``cls`` from the parsed flags (lists become the fields' tuples)."""
    values = {}
    for field, hint in _option_fields(cls):
        value, convert = getattr(args, field.name), field.metadata[OPTION]["convert"]
        if convert is not None:
            value = convert(value)
        elif _unwrap(hint)[1] and isinstance(value, list):
            value = tuple(value)
        values[field.name] = value
    return cls(**values)


def check_writable(out: Path) -> None:
    """``io.check_writable`` as a one-line UserError."""
    from attnlab.io import OutputError
    from attnlab.io import check_writable as check

    try:
        check(out)
    except OutputError as exc:
        raise UserError(str(exc)) from None


def aligned(head: Sequence[str], rows: Sequence[Sequence[str]], wrap: Sequence[int | None]) -> str:
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


def print_table(table) -> None:
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 50, "display.max_rows", 200):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}", na_rep="-"))
