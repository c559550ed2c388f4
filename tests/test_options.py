"""The option parsers accept exactly their ranges and name the range in the error, option() keeps its settings as field
metadata, load_yaml reads a config's values strictly and a repeated value that would run its work twice is refused."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from attnlab import options
from attnlab.cli.studies import DemoOptions, ReportOptions, VerdictOptions
from attnlab.errors import ArgumentError
from attnlab.studies.lengthgen.config import LengthgenConfig


@pytest.mark.parametrize(
    "parse, text, value",
    [
        (options.seed, "0", 0),
        (options.seed, str(2**63 - 1), 2**63 - 1),
        (options.count, "1", 1),
        (options.count, "12", 12),
        (options.finite, "-1e300", -1e300),
        (options.finite, "0", 0.0),
        (options.positive, "1e-300", 1e-300),
        (options.positive, "3", 3.0),
    ],
)
def test_values_in_range_parse(parse, text, value):
    assert parse(text) == value and type(parse(text)) is type(value)


@pytest.mark.parametrize(
    "parse, text, message",
    [
        (options.seed, "-1", "must be in [0, 2^63), got -1"),
        (options.seed, str(2**63), "must be in [0, 2^63)"),
        (options.seed, "1.5", "not an integer: '1.5'"),
        (options.count, "0", "must be an integer >= 1, got '0'"),
        (options.count, "2.0", "must be an integer >= 1"),
        (options.count, "x", "must be an integer >= 1, got 'x'"),
        (options.finite, "nan", "must be finite, got 'nan'"),
        (options.finite, "-inf", "must be finite"),
        (options.finite, "x", "not a number: 'x'"),
        (options.positive, "0", "must be a finite number > 0, got '0'"),
        (options.positive, "nan", "> 0"),
        (options.positive, "inf", "> 0"),
        (options.positive, "-2", "> 0"),
        (options.positive, "y", "> 0"),
    ],
)
def test_values_out_of_range_name_the_range(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
        parse(text)


def test_option_is_a_field_with_its_settings_as_metadata():
    @dataclasses.dataclass(frozen=True)
    class Config:
        every: int = options.option(16, "every K-th row", metavar="K", type=options.count)
        plain: int = 3

    every, plain = dataclasses.fields(Config)
    assert Config().every == 16 and every.metadata[options.OPTION]["metavar"] == "K"
    assert every.metadata[options.OPTION]["type"] is options.count and options.OPTION not in plain.metadata


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{1: a, x: b}", "key 1 is not a name: a config's keys are text (quote it)"),
        ("{null: a}", "key None is not a name"),
        ("{yes: a}", "key True is not a name"),
        ("? [a]\n: b\n", "key a list or mapping is not a name"),
        (f"a: {2**63}", "integer 9223372036854775808 is outside [-2^63, 2^63)"),
        (f"a: -{2**63 + 1}", "is outside [-2^63, 2^63)"),
        ("a: " + "9" * 5000, "an integer of 5,000 characters: not one of 64 bits"),
        ("a: " + "1:" * 100_000 + "1", "an integer of 200,001 characters"),
    ],
)
def test_load_yaml_refuses_keys_that_are_not_text_and_integers_past_64_bits(text, message):
    """In one line, at once: a sexagesimal of 100,000 parts took 4 s to multiply out, 5,000 digits raised ValueError."""
    with pytest.raises(yaml.YAMLError, match=re.escape(message)) as caught:
        options.load_yaml(text)
    assert "\n" not in str(caught.value)


def test_load_yaml_takes_the_64_bit_integers_in_any_spelling():
    text = f"a: {2**63 - 1}\nb: -{2**63}\nc: 0b{'1' * 63}\nd: 1_000\ne: 1:30\nf: 0x10"
    assert options.load_yaml(text) == {"a": 2**63 - 1, "b": -(2**63), "c": 2**63 - 1, "d": 1000, "e": 90, "f": 16}


def test_check_distinct_names_the_first_repeat_as_typed():
    options.check_distinct("maps", ("softmax", "entmax_a1.5"))
    options.check_distinct("models", None)
    with pytest.raises(ArgumentError, match=re.escape("studies names rowmaps twice; name each once")):
        options.check_distinct("studies", ["rowmaps", "sinks", "rowmaps"])
    with pytest.raises(ArgumentError, match=re.escape("only names 'a @ smoke' twice")):
        options.check_distinct("only", ["a @ smoke", "a @ smoke"])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: DemoOptions(studies=("rowmaps", "rowmaps")), "studies names rowmaps twice"),
        (lambda: DemoOptions(models=("none", "none")), "models names none twice"),
        (lambda: LengthgenConfig(maps=("softmax", "softmax")), "maps names softmax twice"),
        (lambda: VerdictOptions(only=("k", "k")), "only names k twice"),
        (lambda: ReportOptions(folders=(Path("runs/a"), Path("runs/a/")), out=Path("r")), "RUN_DIR names runs/a twice"),
    ],
)
def test_a_value_that_would_run_the_same_work_twice_is_refused(make, message):
    """demo's studies and models, lengthgen's variants, verdicts' calibrations and report's folders: each names its
    work, and a repeat would run it twice."""
    with pytest.raises(ArgumentError, match=re.escape(message)):
        make()
