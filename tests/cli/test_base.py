"""Flags, defaults and help come from a config's option fields, the config comes back from the parsed flags, and a config's refusal names the flag."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from attnlab import options
from attnlab.cli import COMMANDS, _flags_named, build_parser, main
from attnlab.cli.base import Parser, add_options, build
from attnlab.options import option

CHOICES = ["a", "b"]


@dataclass(frozen=True)
class Example:
    name: str = option(help="the name", positional=True)
    count: int = option(3, "how many", metavar="N", type=options.count)
    ratio: float | None = option(None, "a ratio")
    degrees: tuple[float, ...] = option((2, 4), "degrees", metavar="P", type=options.finite)
    flag_on: bool = option(False, "switch it on")
    pick: str = option("a", "one of them", choices=lambda: CHOICES)
    pairs: dict = option(
        help="KEY=VALUE (repeatable)",
        action="append",
        default_factory=dict,
        convert=lambda items: dict(i.split("=") for i in items or ()),
    )
    out: Path = option(Path("runs/x"), "folder", metavar="DIR")
    block: int = 512  # not an option: no flag

    def __post_init__(self) -> None:
        if self.count > 100:
            raise ValueError(f"count must be at most 100, got {self.count}")
        if self.flag_on and self.ratio is None:
            raise ValueError("flag_on needs a ratio")


def _parse(*argv: str) -> Example:
    parser = Parser(prog="t")
    add_options(parser, Example)
    return build(Example, parser.parse_args(list(argv)))


def test_defaults_come_from_the_fields():
    assert _parse("x") == Example(name="x")


def test_every_kind_of_field_parses_to_its_type():
    got = _parse(
        "x",
        "--count",
        "7",
        "--ratio",
        "0.5",
        "--degrees",
        "1",
        "2.5",
        "--flag-on",
        "--pick",
        "b",
        "--pairs",
        "k=v",
        "--pairs",
        "j=w",
        "--out",
        "o",
    )
    assert got == Example(
        name="x",
        count=7,
        ratio=0.5,
        degrees=(1.0, 2.5),
        flag_on=True,
        pick="b",
        pairs={"k": "v", "j": "w"},
        out=Path("o"),
    )
    assert isinstance(got.degrees, tuple)


def test_help_shows_defaults_and_no_flag_for_plain_fields(capsys):
    parser = Parser(prog="t")
    add_options(parser, Example)
    text = parser.format_help()
    assert "how many (default: 3)" in text and "degrees (default: 2 4)" in text
    assert "--block" not in text and "--pairs" in text and "(default: {})" not in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["x", "--count", "0"], "must be an integer >= 1"),
        (["x", "--pick", "c"], "invalid choice: 'c'"),
        ([], "the following arguments are required: name"),
    ],
)
def test_bad_flags_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        _parse(*argv)
    assert done.value.code == 2 and message in capsys.readouterr().err


def test_choices_are_read_when_the_parser_is_built():
    CHOICES.append("c")
    try:
        assert _parse("x", "--pick", "c").pick == "c"
    finally:
        CHOICES.remove("c")


def test_a_config_refusal_is_told_with_flags():
    assert _flags_named("flag_on needs a ratio", Example) == "--flag-on needs a ratio"
    assert _flags_named("count must be at most 100, got 200", Example) == "--count must be at most 100, got 200"
    assert _flags_named("--count must be at most 100", Example) == "--count must be at most 100"
    assert _flags_named("the count is wrong", Example) == "the count is wrong"  # one word, not first: left alone


def test_every_command_builds_its_parser_and_help(capsys):
    for name in COMMANDS:
        with pytest.raises(SystemExit) as done:
            build_parser([name, "--help"]).parse_args([name, "--help"])
        assert done.value.code == 0, name
        assert f"usage: attnlab {name}" in capsys.readouterr().out


def test_listing_commands_imports_no_config_module():
    code = (
        "import sys; from attnlab.cli import main; main(['papers']); "
        "print('TORCH' if 'torch' in sys.modules else 'NO TORCH')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("NO TORCH")


def test_a_refused_config_value_ends_in_one_line(capsys):
    assert main(["lengthgen", "--maps", "nosuchmap"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("attnlab lengthgen: error: ") and err.count("\n") == 1


# The commands that compute nothing with tensors: listings, downloads, tokenizing, re-rendering, arithmetic on logs.
NO_TENSORS = {"maps", "papers", "tasks", "fetch", "report", "prepare", "release-replay", "verdicts", "compare"}


def test_every_command_that_computes_takes_device_and_dtype(capsys):
    for name in COMMANDS:
        with pytest.raises(SystemExit):
            build_parser([name, "--help"]).parse_args([name, "--help"])
        text = capsys.readouterr().out
        has = {"--device" in text, "--dtype" in text}
        assert has == {name not in NO_TENSORS}, name
        if name not in NO_TENSORS:
            assert "auto (CUDA when present, else the CPU), cpu, cuda or cuda:N" in " ".join(text.split()), name


def test_a_device_that_is_not_here_is_one_line_before_any_work(capsys):
    with pytest.raises(SystemExit) as done:
        main(["diagnose", "no-such-scores.npy", "--device", "cuda:1"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1
    assert "argument --device: device 'cuda:1' is not available: this torch sees no CUDA device" in err
