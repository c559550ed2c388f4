"""A Section survives to_dict -> JSON -> from_dict unchanged whatever its text, only the six labels exist, and a claim's
label must agree with its null control and MDE."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.findings.finding import MDE, Finding, Null
from attnlab.report.sections import Figure, Section, Table

text = st.text(max_size=30)
nulls = st.builds(
    Null, control=st.text(min_size=1, max_size=20), passes=st.sampled_from([True, False, None]), outcome=text
)
mdes = st.builds(
    MDE,
    value=st.none() | st.floats(0, 10),
    effect=st.none() | st.floats(-10, 10),
    unit=text,
    how=st.text(min_size=1, max_size=20),
)
findings = st.one_of(
    st.builds(Finding, claim=text, verdict=st.sampled_from(("check passed", "check failed")), evidence=text),
    st.builds(
        Finding,
        claim=text,
        verdict=st.sampled_from(("not reproduced", "not checked")),
        evidence=text,
        rule=st.text(min_size=1),
        null=nulls,
        mde=mdes,
        reason=st.text(min_size=1, max_size=20),
    ),
    st.builds(
        Finding,
        claim=text,
        verdict=st.just("reproduced"),
        evidence=text,
        rule=st.text(min_size=1),
        null=st.builds(Null, control=st.text(min_size=1, max_size=20), passes=st.just(False), outcome=text),
        mde=mdes,
    ),
    st.builds(
        Finding,
        claim=text,
        verdict=st.just("underpowered"),
        evidence=text,
        rule=st.text(min_size=1),
        null=nulls,
        mde=st.builds(MDE, value=st.just(1.0), effect=st.floats(-0.5, 0.5), unit=text, how=st.just("closed form")),
        reason=st.text(min_size=1, max_size=20),
    ),
)
sections = st.builds(
    Section,
    study=text,
    title=text,
    source=text,
    question=text,
    command=text,
    findings=st.lists(findings, max_size=3).map(tuple),
    tables=st.lists(st.builds(Table, stem=text, caption=text), max_size=3).map(tuple),
    figures=st.lists(st.builds(Figure, stem=text, caption=text), max_size=3).map(tuple),
    notes=st.lists(text, max_size=3).map(tuple),
    warnings=st.lists(text, max_size=3).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(sections)
def test_json_round_trip_gives_the_same_section(section):
    back = Section.from_dict(json.loads(json.dumps(section.to_dict())))
    assert back == section
    assert all(isinstance(getattr(back, f), tuple) for f in ("findings", "tables", "figures", "notes", "warnings"))


def test_to_dict_is_plain_data_under_the_field_names():
    section = Section(
        "sinks",
        "T",
        "Attention Sinks Essential",
        "q",
        "attnlab study sinks",
        findings=(Finding("c", "check passed", "e"),),
        tables=(Table("t", "cap"),),
        figures=(Figure("f", "fig"),),
        notes=("n",),
        warnings=("w",),
    )
    data = json.loads(json.dumps(section.to_dict()))
    assert data == {
        "study": "sinks",
        "title": "T",
        "source": "Attention Sinks Essential",
        "question": "q",
        "command": "attnlab study sinks",
        "findings": [
            {
                "claim": "c",
                "verdict": "check passed",
                "evidence": "e",
                "rule": "",
                "null": None,
                "mde": None,
                "reason": "",
                "name": "",
            }
        ],
        "tables": [{"stem": "t", "caption": "cap", "found": False}],
        "figures": [{"stem": "f", "caption": "fig"}],
        "notes": ["n"],
        "warnings": ["w"],
    }


def test_missing_optional_parts_read_as_empty():
    section = Section.from_dict({"study": "s", "title": "t", "source": "x", "question": "q", "command": "c"})
    assert section.findings == section.tables == section.figures == section.notes == section.warnings == ()


@pytest.mark.parametrize("verdict", ["Reproduced", "not_checked", "", "maybe"])
def test_other_verdicts_are_refused_directly_and_from_json(verdict):
    with pytest.raises(
        ValueError, match="verdict must be one of reproduced, not reproduced, underpowered, not checked"
    ):
        Finding("c", verdict, "e")
    data = {
        "study": "s",
        "title": "t",
        "source": "x",
        "question": "q",
        "command": "c",
        "findings": [{"claim": "c", "verdict": verdict, "evidence": "e"}],
    }
    with pytest.raises(ValueError, match=repr(verdict)):
        Section.from_dict(data)


def test_unknown_fields_in_the_json_are_refused():
    with pytest.raises(TypeError, match="colour"):
        Section.from_dict({"study": "s", "title": "t", "source": "x", "question": "q", "command": "c", "colour": 1})


def test_null_and_mde_survive_the_json_round_trip():
    finding = Finding(
        "c",
        "underpowered",
        "e",
        rule="interval excludes 0",
        reason="too few pairs",
        null=Null("the other arm", False, "0.01"),
        mde=MDE(0.17, 0.07, "ppl", "paired t, 3 pairs"),
    )
    back = Finding.from_dict(
        json.loads(json.dumps(Section("s", "t", "x", "q", "c", findings=(finding,)).to_dict()))["findings"][0]
    )
    assert back == finding and back.mde.adequate is False and back.null.result == "fails the rule"


def test_a_label_that_contradicts_its_parts_is_refused():
    rule = "interval excludes 0"
    with pytest.raises(ValueError, match="null control to fail the rule"):
        Finding("c", "reproduced", "e", rule=rule, null=Null("untrained", True, "0.7"), mde=MDE(None, None, "", "x"))
    with pytest.raises(ValueError, match="null control to fail the rule"):
        Finding("c", "reproduced", "e", rule=rule, null=Null("untrained", None, ""), mde=MDE(None, None, "", "x"))
    with pytest.raises(ValueError, match="underpowered needs a power below 80% or an MDE larger"):
        Finding(
            "c", "underpowered", "e", rule=rule, null=Null("n", False, ""), mde=MDE(0.1, 0.5, "ppl", "t"), reason="r"
        )
    with pytest.raises(ValueError, match="states its reason"):
        Finding("c", "not checked", "e", rule=rule, null=Null("n", False, ""), mde=MDE(None, None, "", "x"))
    with pytest.raises(ValueError, match="states its rule, null control and MDE"):
        Finding("c", "reproduced", "e")
    with pytest.raises(ValueError, match="how it was obtained"):
        MDE(0.1, 0.2, "ppl", "")
    with pytest.raises(ValueError, match="True, False or None"):
        Null("n", "yes", "")
