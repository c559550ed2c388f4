"""Reading back the JSON files attnlab wrote (a run's config.json, a study's section.json, a checkpoint's state.json,
a lock, a folder's marker) and the few it reads from others (a checkpoint folder's config.json): the bytes are parsed
once, here, and a record is checked against the dataclass it was written from, so that a torn, hand-edited or
foreign file ends in one line naming the file, the key and what is allowed, never in a traceback.

``parse`` reads bytes (or text) as UTF-8 JSON no deeper than ``MAX_DEPTH``; ``parse_object`` also requires an
object; ``read_object`` is ``parse_object`` of a file; ``check`` holds a dict against a dataclass's fields (the keys
it requires present, every value of a field's type); ``read_record`` is both. Every refusal is a ReadBackError;
a reader that has its own error class re-raises the message under it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attnlab.errors import Error, MissingFileError

MAX_BYTES = 64 << 20  # far above any config or section attnlab writes; a larger file is no such file
# Nesting a JSON value may have: attnlab's deepest (a cell's per-head table: lengths, length, heads, key, layer,
# head) needs 6; as options.MAX_DEPTH for config files. Deeper values would reach recursive code downstream.
MAX_DEPTH = 32
OBJECT = "a JSON object as attnlab writes it"


class ReadBackError(Error, ValueError):
    """A file attnlab wrote, read back, that is not what it writes: not UTF-8, not a JSON object, a key missing or
    of a type its dataclass does not allow. The message names the file, the key and what is allowed."""


def parse(data: bytes | str, where: str | os.PathLike, *, allowed: str = "JSON as attnlab writes it") -> Any:
    """The JSON value ``data`` holds (bytes are read as UTF-8); a ReadBackError naming ``where`` (the file) and
    ``allowed`` where it is not UTF-8, empty, not JSON, or nested deeper than ``MAX_DEPTH``."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ReadBackError(f"{where} is not UTF-8 text (byte {exc.start}); allowed: {allowed}") from None
    if not data.strip():
        raise ReadBackError(f"{where} is empty; allowed: {allowed}")
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno}, column {exc.colno}" if "\n" in data.strip() else f"column {exc.colno}"
        raise ReadBackError(f"{where} is not valid JSON ({at}: {exc.msg}); allowed: {allowed}") from None
    except RecursionError:  # a depth bomb: json's decoder recurses once per bracket
        value = None
    else:
        if not _deeper(value, MAX_DEPTH):
            return value
    raise ReadBackError(f"{where} nests its JSON deeper than {MAX_DEPTH} levels; allowed: {allowed}")


def parse_object(data: bytes | str, where: str | os.PathLike, *, allowed: str = OBJECT) -> dict[str, Any]:
    """``parse(data, where)``, which must be a JSON object."""
    value = parse(data, where, allowed=allowed)
    if not isinstance(value, dict):
        raise ReadBackError(f"{where} holds a JSON {_json_kind(value)}; allowed: {allowed}")
    return value


def read_object(path: str | os.PathLike, *, allowed: str = OBJECT) -> dict[str, Any]:
    """The JSON object in the file at ``path``; a ReadBackError naming it where its bytes are not UTF-8 JSON of an
    object (``parse_object``; ``allowed`` says what is), a MissingFileError where there is no file."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path} is missing")
    if path.stat().st_size > MAX_BYTES:
        raise ReadBackError(f"{path} holds {path.stat().st_size} bytes; attnlab writes no such file that large")
    return parse_object(path.read_bytes(), path, allowed=allowed)


def _deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((inner, depth + 1) for inner in (item.values() if isinstance(item, dict) else item))
    return False


def read_record(
    path: str | os.PathLike, kind: type, *, required: tuple[str, ...] = (), allowed: str = OBJECT
) -> dict[str, Any]:
    """``read_object(path, allowed=allowed)`` checked against dataclass ``kind`` (``check``)."""
    return check(read_object(path, allowed=allowed), kind, path, required=required)


def check(data: Any, kind: type, path: str | os.PathLike, *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``data`` if it is a dict holding every field of dataclass ``kind`` that has no default, and the keys of
    ``required`` (those attnlab always writes although the field has a default; "train.steps" names a field of the
    dataclass in field train), and every key that is a field of
    ``kind`` holds a value of the field's type (a nested dataclass as a dict, a tuple as a list; other keys are
    left alone); else a ReadBackError naming ``path``, the key and what is allowed."""
    where = _mismatch(data, kind, required)
    if where is not None:
        key, allowed, value = where
        shown = "is missing" if value is _MISSING else f"is {_shown(value)}"
        raise ReadBackError(f"{path}: {key or 'the file'} {shown}; allowed: {allowed}")
    return data


_MISSING = object()


def _mismatch(value: Any, hint: Any, required: tuple[str, ...] = ()) -> tuple[str, str, Any] | None:
    """(the key path, what is allowed there, the value found) of the first place ``value`` does not fit ``hint``,
    or None if it fits."""
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            return "", _allowed(hint), value
        hints = _hints(hint)
        needed = [f.name for f in dataclasses.fields(hint) if _no_default(f)] + [r for r in required if "." not in r]
        for name in needed:
            if name not in value:
                return name, _allowed(hints[name]), _MISSING
        for name, field_hint in hints.items():
            if name in value:
                below = tuple(r.split(".", 1)[1] for r in required if r.startswith(f"{name}."))
                inner = _mismatch(value[name], field_hint, below)
                if inner is not None:
                    return _join(name, inner[0]), inner[1], inner[2]
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        fits = [a for a in args if _mismatch(value, a) is None]
        return None if fits else ("", _allowed(hint), value)
    if origin is typing.Literal:
        return None if value in args else ("", _allowed(hint), value)
    if origin in (tuple, list) or hint in (tuple, list):
        if not isinstance(value, list):
            return "", _allowed(hint), value
        items = args[:1] if origin is list or (len(args) == 2 and args[1] is Ellipsis) else args
        if items and origin is tuple and args[-1] is not Ellipsis and len(value) != len(items):
            return "", _allowed(hint), value
        for i, item in enumerate(value):
            inner = _mismatch(item, items[i] if len(items) > 1 else items[0]) if items else None
            if inner is not None:
                return _join(f"[{i}]", inner[0]), inner[1], inner[2]
        return None
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        if not isinstance(value, dict):
            return "", _allowed(hint), value
        inner_hint = args[1] if args else Any
        for key, item in value.items():
            inner = _mismatch(item, inner_hint)
            if inner is not None:
                return _join(str(key), inner[0]), inner[1], inner[2]
        return None
    return None if _scalar_fits(value, hint) else ("", _allowed(hint), value)


def _scalar_fits(value: Any, hint: Any) -> bool:
    if hint is Any or hint is object:
        return True
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:  # JSON writes 2.0 as 2 where a float happened to be whole
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (str, Path) or (isinstance(hint, type) and issubclass(hint, os.PathLike)):
        return isinstance(value, str)  # a path is written as its text
    return isinstance(hint, type) and isinstance(value, hint)


def _allowed(hint: Any) -> str:
    """What ``hint`` allows, in words."""
    if dataclasses.is_dataclass(hint):
        names = [f.name for f in dataclasses.fields(hint)]  # a short record's keys, a long one's class
        return f"an object with the keys {', '.join(names) if len(names) <= 6 else 'of ' + hint.__name__}"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_allowed(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if origin in (tuple, list) or hint in (tuple, list):
        if not args or args[0] in (Any, object):
            return "a list"
        if origin is tuple and args[-1] is not Ellipsis:
            return f"a list of {len(args)}: " + ", ".join(_allowed(a) for a in args)
        return f"a list of {_plural(_allowed(args[0]))}"
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return f"an object of {_plural(_allowed(args[1]))}" if args and args[1] not in (Any, object) else "an object"
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string", Path: "a path (a string)"}
    if hint is type(None) or hint is None:
        return "null"
    return words.get(hint, "anything" if hint in (Any, object) else f"a {getattr(hint, '__name__', hint)}")


def _plural(words: str) -> str:
    if words == "true or false":
        return "true or false values"
    if words.startswith("an object with"):
        return "objects with" + words.removeprefix("an object with")
    return words.removeprefix("an ").removeprefix("a ") + ("" if words.endswith("s") else "s")


def _join(head: str, tail: str) -> str:
    if not tail:
        return head
    return f"{head}{tail}" if tail.startswith("[") else f"{head}.{tail}"


def _no_default(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    """The field types of dataclass ``kind``, resolved (its module may write them as strings)."""
    hints = typing.get_type_hints(kind)
    return {f.name: hints[f.name] for f in dataclasses.fields(kind)}


def _json_kind(value: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _shown(value: Any) -> str:
    """A value as the message quotes it: JSON, cut short."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
