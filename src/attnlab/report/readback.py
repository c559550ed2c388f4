"""Reading back the JSON files attnlab wrote (a run's config.json, a study's section.json): one function per kind
checks the file against the dataclass it was written from, so that a torn, hand-edited or foreign file ends in one
line naming the file, the key and what is allowed, never in a TypeError deep inside a report.

``read_object`` reads the bytes as UTF-8 JSON holding an object; ``check`` holds a dict against a dataclass's
fields (the keys it requires present, every value of a field's type); ``read_record`` is both.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import types
import typing
from pathlib import Path
from typing import Any

from attnlab.errors import Error, MissingFileError

MAX_BYTES = 64 << 20  # far above any config or section attnlab writes; a larger file is no such file


class ReadBackError(Error, ValueError):
    """A file attnlab wrote, read back, that is not what it writes: not UTF-8, not a JSON object, a key missing or
    of a type its dataclass does not allow. The message names the file, the key and what is allowed."""


def read_object(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON object in the file at ``path``; a ReadBackError naming it where its bytes are not UTF-8 JSON of an
    object (a MissingFileError where there is no file)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path} is missing")
    if path.stat().st_size > MAX_BYTES:
        raise ReadBackError(f"{path} holds {path.stat().st_size} bytes; attnlab writes no such file that large")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReadBackError(f"{path} is not UTF-8 text (byte {exc.start}); attnlab writes it as UTF-8 JSON") from None
    if not text.strip():
        raise ReadBackError(f"{path} is empty; attnlab writes it as a JSON object")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReadBackError(f"{path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:  # a depth bomb: json's decoder recurses once per bracket
        raise ReadBackError(f"{path} nests its JSON deeper than attnlab writes") from None
    if not isinstance(data, dict):
        raise ReadBackError(f"{path} holds a JSON {_json_kind(data)}; attnlab writes it as a JSON object")
    return data


def read_record(path: str | os.PathLike, kind: type, *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``read_object(path)`` checked against dataclass ``kind`` (``check``)."""
    return check(read_object(path), kind, path, required=required)


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
    if origin is dict or hint is dict:
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
        return f"an object with the keys of {hint.__name__}"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_allowed(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if origin in (tuple, list) or hint in (tuple, list):
        if not args:
            return "a list"
        if origin is tuple and args[-1] is not Ellipsis:
            return f"a list of {len(args)}: " + ", ".join(_allowed(a) for a in args)
        return f"a list of {_plural(_allowed(args[0]))}"
    if origin is dict or hint is dict:
        return f"an object of {_plural(_allowed(args[1]))}" if args else "an object"
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string", Path: "a path (a string)"}
    if hint is type(None) or hint is None:
        return "null"
    return words.get(hint, "anything" if hint in (Any, object) else f"a {getattr(hint, '__name__', hint)}")


def _plural(words: str) -> str:
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
