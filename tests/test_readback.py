"""Every JSON file attnlab reads back is parsed once (``attnlab.readback``): UTF-8 JSON no deeper than attnlab writes,
an object where one is asked for, each key of its dataclass's type; anything else is one line naming the file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from attnlab.readback import MAX_DEPTH, ReadBackError, check, parse, parse_object, read_record
from hostile_json import CONTENTS, hostile, one_line


@dataclass(frozen=True)
class Entry:
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Record:
    name: str
    flags: list[bool]
    files: dict[str, Entry]
    params: Mapping[str, Any]
    note: str | None = None


RECORD = {"name": "a", "flags": [True], "files": {"x": {"bytes": 1, "sha256": "0"}}, "params": {"k": [1]}}


def test_nesting_to_max_depth_reads_and_one_level_more_is_refused():
    assert parse("[" * MAX_DEPTH + "]" * MAX_DEPTH, "f") == json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    deeper = '{"a": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1)
    with pytest.raises(ReadBackError, match=f"f nests its JSON deeper than {MAX_DEPTH} levels; allowed: JSON"):
        parse(deeper, "f")


@pytest.mark.parametrize(("label", "data"), hostile(RECORD, "files.x.bytes", "params"))
def test_a_hostile_record_is_one_line_naming_the_file_and_what_is_allowed(tmp_path, label, data):
    (tmp_path / "r.json").write_bytes(data)
    with pytest.raises(ReadBackError) as caught:
        read_record(tmp_path / "r.json", Record)
    assert "allowed: " in one_line(caught.value, tmp_path / "r.json")


def test_the_allowed_words_name_short_records_by_their_keys():
    def refusal(data):
        with pytest.raises(ReadBackError) as caught:
            check(data, Record, "f")
        return str(caught.value)

    assert refusal({**RECORD, "files": {"x": 1}}) == "f: files.x is 1; allowed: an object with the keys bytes, sha256"
    assert (
        refusal({**RECORD, "files": []}) == "f: files is []; allowed: an object of objects with the keys bytes, sha256"
    )
    assert refusal({**RECORD, "flags": [1]}) == "f: flags[0] is 1; allowed: true or false"
    assert refusal({**RECORD, "params": 2}) == "f: params is 2; allowed: an object"
    assert check({**RECORD, "note": None, "extra": 1}, Record, "f")["extra"] == 1  # other keys are left alone


def test_every_content_of_the_shared_list_is_refused_by_parse_object():
    for data in CONTENTS.values():
        with pytest.raises(ReadBackError):
            parse_object(data, "f")
