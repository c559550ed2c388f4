"""The command-line reference as Markdown, rendered from the parser ``attnlab`` itself runs.

The docs site's CLI page is this function's output at build time (``docs/hooks.py``), so every flag, choice
and help line there comes from the option dataclasses (``attnlab.options``) and cannot drift from the command.
"""

from __future__ import annotations

import argparse
import re

from attnlab.cli import build_parser

# Markdown would read these as emphasis, code, links, HTML or a table's cell border inside a help line.
_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def _text(text: str) -> str:
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _option(action: argparse.Action) -> str:
    """The flag as typed: its names, then what it takes (choices, a metavar, or nothing for a switch)."""
    names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.nargs == 0:
        return names
    if action.choices is not None:
        takes = "{" + ", ".join(str(c) for c in action.choices) + "}"
    else:
        takes = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    if action.nargs in ("+", "*"):
        takes += " ..."
    return f"{names} `{takes}`" if action.option_strings else names


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    # argparse's own expansion, so a help line's %(default)s reads as it does under --help
    return _text(parser._get_formatter()._expand_help(action))


def command(name: str, parser: argparse.ArgumentParser, summary: str) -> str:
    """One subcommand's section: its summary and description, usage and a table of its options."""
    lines = [f"## `attnlab {name}`", "", _text(summary) + ".", ""]
    if parser.description:
        lines += [_text(parser.description), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    rows = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    if rows:
        lines += ["| option | meaning |", "|---|---|"]
        lines += [f"| {_option(a)} | {_help(parser, a)} |" for a in rows]
        lines.append("")
    return "\n".join(lines)


def markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """Every subcommand of ``parser`` (default: ``attnlab``'s own, all flags) as Markdown sections."""
    parser = parser or build_parser()
    sub = _subcommands(parser)
    summaries = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    index = ["| command | what it does |", "|---|---|"]
    index += [f"| [`{name}`](#attnlab-{name}) | {_text(summaries[name])} |" for name in sub.choices]
    sections = [command(name, p, summaries[name]) for name, p in sub.choices.items()]
    return "\n".join(["```text", parser.format_usage().strip(), "```", "", *index, "", *sections])
