"""The option parsers accept exactly their ranges and name the range in the error, and option() keeps its settings as field metadata."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from attnlab import options


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
