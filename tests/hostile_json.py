"""The hostile contents every JSON reader of attnlab is tested on (test utility): one list, so that each reader's
table meets the same bytes (not UTF-8, a JSON list, a torn object, a depth bomb) and, on the reader's own valid
record, a key of the wrong type and a missing key."""

from __future__ import annotations

import json
from typing import Any

import pytest

import attnlab

BOMB = b"[" * 100_000  # deeper than json's decoder recurses; its closing brackets would change nothing
CONTENTS = {"not UTF-8": b"\xff\xfe", "a JSON list": b"[]", "a torn object": b"{", "a depth bomb": BOMB}


def get_key(data: dict, key: str) -> Any:
    """The value at dotted ``key`` of ``data``."""
    for part in key.split("."):
        data = data[part]
    return data


def set_key(data: dict, key: str, value: Any, *, drop: bool = False) -> dict:
    """A copy of ``data`` with its dotted ``key`` set to ``value`` (``drop``: removed)."""
    data = json.loads(json.dumps(data))
    *path, last = key.split(".")
    inner = data
    for part in path:
        inner = inner[part]
    if drop:
        del inner[last]
    else:
        inner[last] = value
    return data


def hostile(valid: dict[str, Any], wrong: str, missing: str, *, value: Any = None) -> list:
    """pytest params of (label, bytes): ``CONTENTS``, then ``valid`` with its dotted key ``wrong`` given a value of
    another type (``value``, else "abc", or [the string] where it holds one) and its dotted key ``missing`` dropped."""

    def edited(key: str, drop: bool) -> bytes:
        if drop:
            return json.dumps(set_key(valid, key, None, drop=True)).encode()
        old = get_key(valid, key)
        new = value if value is not None else [old] if isinstance(old, str) else "abc"
        return json.dumps(set_key(valid, key, new)).encode()

    cases = {
        **CONTENTS,
        f"{wrong} of the wrong type": edited(wrong, False),
        f"{missing} missing": edited(missing, True),
    }
    return [pytest.param(label, data, id=label) for label, data in cases.items()]


def one_line(error: BaseException, *named: str, kind: type = attnlab.Error) -> str:
    """``error``'s message, held to the rule every reader keeps: an error of ``kind`` (attnlab's user-fixable
    errors), one line, naming each of ``named`` (the file)."""
    message = str(error)
    assert isinstance(error, kind), f"{type(error).__name__}: {message}"
    assert "\n" not in message and message, message
    for name in named:
        assert str(name) in message, message
    return message
