"""A Section survives to_dict -> JSON -> from_dict unchanged whatever its text, and only the three verdicts exist."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.report.sections import VERDICTS, Figure, Finding, Section, Table

text = st.text(max_size=30)
findings = st.builds(Finding, claim=text, verdict=st.sampled_from(VERDICTS), evidence=text)
sections = st.builds(
    Section, study=text, title=text, source=text, question=text, command=text,
    findings=st.lists(findings, max_size=3).map(tuple),
    tables=st.lists(st.builds(Table, stem=text, caption=text), max_size=3).map(tuple),
    figures=st.lists(st.builds(Figure, stem=text, caption=text), max_size=3).map(tuple),
    notes=st.lists(text, max_size=3).map(tuple), warnings=st.lists(text, max_size=3).map(tuple))


@settings(max_examples=60, deadline=None)
@given(sections)
def test_json_round_trip_gives_the_same_section(section):
    back = Section.from_dict(json.loads(json.dumps(section.to_dict())))
    assert back == section
    assert all(isinstance(getattr(back, f), tuple) for f in ("findings", "tables", "figures", "notes", "warnings"))


def test_to_dict_is_plain_data_under_the_field_names():
    section = Section("sinks", "T", "Attention Sinks Essential", "q", "attnlab study sinks",
                      findings=(Finding("c", "reproduced", "e"),), tables=(Table("t", "cap"),),
                      figures=(Figure("f", "fig"),), notes=("n",), warnings=("w",))
    data = json.loads(json.dumps(section.to_dict()))
    assert data == {"study": "sinks", "title": "T", "source": "Attention Sinks Essential", "question": "q",
                    "command": "attnlab study sinks",
                    "findings": [{"claim": "c", "verdict": "reproduced", "evidence": "e"}],
                    "tables": [{"stem": "t", "caption": "cap"}], "figures": [{"stem": "f", "caption": "fig"}],
                    "notes": ["n"], "warnings": ["w"]}


def test_missing_optional_parts_read_as_empty():
    section = Section.from_dict({"study": "s", "title": "t", "source": "x", "question": "q", "command": "c"})
    assert section.findings == section.tables == section.figures == section.notes == section.warnings == ()


@pytest.mark.parametrize("verdict", ["Reproduced", "not_checked", "", "maybe"])
def test_other_verdicts_are_refused_directly_and_from_json(verdict):
    with pytest.raises(ValueError, match="verdict must be one of reproduced, not reproduced, not checked"):
        Finding("c", verdict, "e")
    data = {"study": "s", "title": "t", "source": "x", "question": "q", "command": "c",
            "findings": [{"claim": "c", "verdict": verdict, "evidence": "e"}]}
    with pytest.raises(ValueError, match=repr(verdict)):
        Section.from_dict(data)


def test_unknown_fields_in_the_json_are_refused():
    with pytest.raises(TypeError, match="colour"):
        Section.from_dict({"study": "s", "title": "t", "source": "x", "question": "q", "command": "c", "colour": 1})
