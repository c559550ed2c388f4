"""Config fields that are also command-line options: each is declared once, on its config dataclass.

    >>> @dataclass(frozen=True)
    ... class AuditConfig:
    ...     every: int = option(16, "audit every K-th query and the last one", metavar="K", type=count)

``attnlab.cli`` builds each subcommand's flags, defaults and help from these fields, in the manner of
transformers' ``HfArgumentParser``, and the config from the parsed flags; a field named ``b_auto`` is the
flag ``--b-auto``. The parsers below check a number as it is typed, so that a bad one fails before any
work, naming its range.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from attnlab.errors import ArgumentError, Error

OPTION = "attnlab.option"  # the field-metadata key that makes a field an option
MODEL_HELP = (
    "a fetched model's name (attnlab fetch --list), a .gguf file, a folder written by save_pretrained, "
    "or a Hugging Face Hub id (org/name or org/name@revision) already in the local Hugging Face cache"
)


class AssignmentError(Error, ValueError):
    """A ``key=value`` flag (``--set``, ``--param``, ``--submitit``) that is not one; the message shows one."""


MAX_DEPTH = 32  # nesting a config value may have: attnlab's deepest (a list in a table in a table) needs 3
MAX_YAML_BYTES = 1 << 20
MAX_INT_CHARS = 100  # an integer of 64 bits in any YAML spelling: 0b and 64 digits with _ between them fits
INT_RANGE = "[-2^63, 2^63)"  # a config's integers: TOML's, and wider than any config field takes


def oversize(text: str) -> bool:
    """Whether config text (a YAML or TOML file, a flag's value) is over ``MAX_YAML_BYTES``, as UTF-8."""
    return len(text.encode("utf-8", "surrogatepass")) > MAX_YAML_BYTES


def is_config_int(value: int) -> bool:
    """Whether an integer is one a config may hold: in ``INT_RANGE``, i.e. one of 64 bits."""
    return -(2**63) <= value < 2**63


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, stricter where a config file could mislead or exhaust: a key given twice is refused
    (the safe loader keeps the last silently), and so is a key that is not text (``1:``, ``null:``, ``yes:``: a
    config's keys are names, and a check that sorts them fails on a mix); an alias (``*name``) is refused (shared
    subtrees expand when a check walks them: a few hundred bytes of nested aliases are gigabytes), nesting is bounded
    (a deep value would end in RecursionError) and an integer is one of 64 bits (``construct_yaml_int``)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(
                None,
                None,
                "aliases (*name) are not allowed in a config file: write the value out",
                self.peek_event().start_mark,
            )
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"a value nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                shown = repr(key) if isinstance(key_node, yaml.ScalarNode) else "a list or mapping"
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {shown} is not a name: a config's keys are text (quote it)", key_node.start_mark
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice (the later would silently win)", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node: Any) -> int:
        """An integer in [-2^63, 2^63), the range of TOML's integers and wider than any config field takes (a seed's
        [0, 2^63) is the widest): a longer one is refused before it is built, since past 4,300 digits Python refuses
        to build it (a ValueError, not YAML's error) and a sexagesimal ``1:2:3...`` takes time quadratic in its parts
        to multiply out (300,000 parts, 600 kB: half a minute)."""
        if len(node.value) > MAX_INT_CHARS:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {len(node.value):,} characters: not one of 64 bits", node.start_mark
            )
        value = super().construct_yaml_int(node)
        if not is_config_int(value):
            raise yaml.constructor.ConstructorError(
                None, None, f"integer {value} is outside {INT_RANGE}, a config's integers", node.start_mark
            )
        return value


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


def load_yaml(text: str) -> Any:
    """``text`` as YAML, strictly (``_StrictLoader``): the values of a config file or a flag. Raises yaml.YAMLError,
    its message on one line."""
    if oversize(text):
        raise yaml.YAMLError(f"larger than {MAX_YAML_BYTES >> 20} MiB: not a config")
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise yaml.YAMLError(" ".join(str(exc).split())) from None


def option(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    metavar: str | None = None,
    type: Callable[[str], Any] | None = None,
    choices: tuple[str, ...] | Callable[[], Any] | None = None,
    positional: bool = False,
    flag: str | None = None,
    convert: Callable[[Any], Any] | None = None,
    default_factory: Any = dataclasses.MISSING,
    **extra: Any,
) -> Any:
    """A dataclass field that is also an option: ``help`` its help text (the default is appended),
    ``type`` the parser of one typed value (else the field's annotation decides), ``choices`` the allowed
    values (or a function returning them, read when the parser is built so that registered entries count),
    ``positional`` for an argument without a flag, ``flag`` for a flag other than the field's name,
    ``convert`` to turn the parsed value into the field's (``dict`` for repeated KEY=VALUE pairs);
    ``extra`` goes to argparse as it is (``nargs``, ``action``...)."""
    meta = {
        OPTION: {
            "help": help,
            "metavar": metavar,
            "type": type,
            "choices": choices,
            "positional": positional,
            "flag": flag,
            "convert": convert,
            **extra,
        }
    }
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


def flag(field: dataclasses.Field) -> str:
    """The flag of an option field as a user types it ("" for a positional argument)."""
    meta = field.metadata[OPTION]
    return meta["flag"] or ("" if meta["positional"] else "--" + field.name.replace("_", "-"))


def field_default(field: dataclasses.Field) -> Any:
    """A field's default value (its factory's product), or ``dataclasses.MISSING`` for a required one."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _number(text: str, cast: Callable[[str], Any]) -> Any:
    try:
        return cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {'an integer' if cast is int else 'a number'}: {text!r}") from None


def seed(text: str) -> int:
    """A seed: an integer in [0, 2^63)."""
    value = _number(text, int)
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"must be in [0, 2^63), got {value}")
    return value


def _within(text: str, cast: Callable[[str], Any], ok: Callable[[Any], bool], rule: str) -> Any:
    try:
        value = cast(text)
    except ValueError:
        value = None  # not a number: out of range too
    if value is None or not ok(value):
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
    return value


def path(text: str) -> Path:
    """A file or folder path, not empty: an empty one would be the working directory, which nobody types."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"takes a path, got {text!r}")
    return Path(text)


def count(text: str) -> int:
    """A count: an integer >= 1."""
    return _within(text, int, lambda v: v >= 1, "an integer >= 1")


def finite(text: str) -> float:
    """A finite number."""
    value = _number(text, float)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    return value


def positive(text: str) -> float:
    """A finite number > 0."""
    return _within(text, float, lambda v: 0 < v < math.inf, "a finite number > 0")  # NaN fails both


# The largest value a number option takes, by field name: far past any real use (the papers' full budgets
# included), and below what would exhaust memory or run for days, so that a mistyped 1e23 is refused in one line
# naming the bound instead of running until it is killed.
TOKENS_MAX = 2**20  # context lengths, in tokens
UPPER: dict[str, float] = {
    "prompts": 100_000,
    "rank_prompts": 100_000,
    "pad": 1_000_000,
    "docs": 10_000,
    "windows": 100_000,
    "length": TOKENS_MAX,
    "lengths": TOKENS_MAX,
    "rank_length": TOKENS_MAX,
    "n": TOKENS_MAX,
    "n_train": TOKENS_MAX,
    "sink": TOKENS_MAX,
    "train_len": 65_536,
    "min_train_len": 65_536,
    "n_boot": 100_000,
    "draws": 1_000_000,
    "random_draws": 10_000,
    "k": 100_000,
    "single": 100_000,
    "unit_axes": 32,
    "steps": 10_000_000,
    "samples": 10_000_000,
    "seeds": 1_000,
    "jobs": 1_024,
    "threads": 1_024,
    "max_tokens": 10**13,
    "eval_mult": 4_096,
    "select_mult": 4_096,
    "ratios": 1_024,
    "rope_scaling": 1_024,
    "lr": 10.0,
    "xi": 8.0,
}


def bounded(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """``parse`` refusing a number above ``UPPER[name]`` (as typed, in one line); ``parse`` itself where the name has
    no bound."""
    limit = UPPER.get(name)
    if limit is None:
        return parse

    def check(text: str) -> Any:
        value = parse(text)
        if isinstance(value, (int, float)) and not value <= limit:
            shown = f"{int(limit):,}" if float(limit).is_integer() else f"{limit:g}"
            raise argparse.ArgumentTypeError(f"must be at most {shown}, got {text!r}")
        return value

    check.__name__ = getattr(parse, "__name__", "value")  # argparse names the type in its "invalid ..." message
    return check


def check_distinct(name: str, values: Iterable[Any] | None) -> None:
    """Refuse a value given twice among ``values``, the field ``name`` of several values where each runs its own work
    (a study, a model, a variant trained), so that a repeat would run it twice: an ArgumentError in one line naming
    the value as it is typed."""
    import shlex

    seen = set()
    for value in values or ():
        if value in seen:
            raise ArgumentError(f"{name} names {shlex.quote(str(value))} twice; name each once")
        seen.add(value)


def command_line(command: str, config: type, values: dict[str, Any], out: str | None = None) -> str:
    """The ``attnlab`` command line that makes ``values`` (a config's fields, e.g. from a run's config.json):
    every option field whose value is not its default, as the user would type it."""
    import shlex

    parts = ["attnlab", command]
    for f in dataclasses.fields(config):
        if OPTION not in f.metadata or f.name not in values:
            continue
        value = values[f.name]
        if isinstance(value, list):
            value = tuple(value)
        if value == field_default(f) or value is None or value is False or value == ():
            continue
        typed = [flag(f)] if flag(f) else []
        if value is True:
            parts += typed
        elif isinstance(value, tuple):
            parts += [*typed, *map(str, value)]
        elif isinstance(value, dict):
            parts += [x for k, v in value.items() for x in (*typed, f"{k}={v}")]
        else:
            parts += [*typed, str(value)]
    return shlex.join([*parts, *(["--out", out] if out is not None else [])])


def assignment(item: str, flag: str, example: str) -> tuple[str, Any]:
    """``key=value`` from a command-line ``flag``, the value read as a YAML scalar or list (``3e-4``,
    ``true``, ``null``, ``[softmax, entmax_a1.5]``)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise AssignmentError(f"{flag} {item!r}: expected key=value, e.g. {example}")
    try:
        return key.strip(), load_yaml(raw)
    except yaml.YAMLError as exc:
        raise AssignmentError(f"{flag} {item!r}: the value is not a YAML scalar or list: {exc}") from None
