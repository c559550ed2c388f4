"""The ``attnlab`` command: row maps, diagnostics, checkpoint audits, training, tasks, studies and the demo.

Each subcommand is an entry of ``base.COMMANDS``, declared in the module of its area (``catalog``,
``studies``, ``checkpoint``, ``training``); its flags, defaults and help are the option fields of its
config dataclasses (``attnlab.options``), so an option changes in one place.

User errors (bad arguments, an output folder that cannot be written) end with a one-line message on
stderr and a nonzero exit status, never a traceback: 2 for usage errors (argparse), 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from collections.abc import Sequence

from attnlab import options, plugins
from attnlab.cli import card, catalog, checkpoint, compare, studies, training  # noqa: F401  (each declares its commands)
from attnlab.cli.base import COMMANDS, Parser, UserError, add_options, build
from attnlab.cli.studies import demo_models
from attnlab.errors import Error
from attnlab.options import OPTION, flag

__all__ = ["COMMANDS", "UserError", "build_parser", "demo_models", "main"]


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``: the first word that is not a flag."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; the flags of the one ``argv`` names (of all, without ``argv``)."""
    from attnlab import __version__

    ap = Parser(
        prog="attnlab",
        description="How concentrated is attention, and what happens when the row "
        "map that turns scores into weights is changed.",
        epilog="Run 'attnlab COMMAND --help' for a command's options.",
    )
    ap.add_argument("--version", action="version", version=f"attnlab {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = None if argv is None else _chosen(argv)
    for cmd in COMMANDS.values():
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.description)
        if argv is None or cmd.name == chosen:
            for config in cmd.config_classes():
                add_options(p, config)
        p.add_argument(
            "--threads",
            type=options.bounded(options.count, "threads"),
            default=None,
            metavar="N",
            help="torch CPU threads (default: the cores other processes leave free, read at start; on "
            "a loaded machine more threads than free cores can run a small model tens of times "
            "slower)",
        )
    return ap


def _configs(cmd, args: argparse.Namespace) -> list:
    """The command's configs from the parsed flags; a refused value becomes a UserError naming its flag."""
    made = []
    for config in cmd.config_classes():
        try:
            made.append(build(config, args))
        except (TypeError, ValueError) as exc:
            raise UserError(_flags_named(str(exc), config)) from None
    return made


def _flags_named(message: str, config: type) -> str:
    """A config's message with its fields named as the flags a user typed (``train_len`` -> ``--train-len``):
    fields of two words anywhere, any field as the message's first word."""
    for field in dataclasses.fields(config):
        if OPTION not in field.metadata or field.metadata[OPTION]["positional"]:
            continue
        pattern = rf"(?<![-\w]){field.name}\b" if "_" in field.name else rf"^{field.name}\b"
        message = re.sub(pattern, flag(field), message)
    return message


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``attnlab`` and ``python -m attnlab``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    plugins.load()  # before the parser: a plugin's studies and tasks are choices of its flags
    args = build_parser(argv).parse_args(argv)
    from attnlab.perf import set_threads, tune_malloc

    tune_malloc()
    cmd = COMMANDS[args.command]
    try:
        try:
            configs = _configs(cmd, args)
            set_threads(args.threads)
            return cmd.run(*configs)
        except Error as exc:  # every user-fixable error, UserError included
            raise UserError(str(exc)) from None
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
