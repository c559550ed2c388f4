"""main() ends every run with its exit status: 0, 2 for usage errors, 1 for a one-line error, 130 on Ctrl-C."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

import attnlab
from attnlab.cli import COMMANDS, main
from attnlab.errors import Error
from attnlab.rowmaps import FAMILIES


@pytest.fixture
def maps_raising():
    """Make `attnlab maps` raise the given exception."""
    original = COMMANDS["maps"]

    def replace(exc: BaseException) -> None:
        def run() -> int:
            raise exc

        COMMANDS.register("maps", dataclasses.replace(original, run=run), replace=True)

    yield replace
    COMMANDS.register("maps", original, replace=True)


def test_module_entry_point_runs():
    done = subprocess.run([sys.executable, "-m", "attnlab", "maps"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for fam in FAMILIES.values():
        assert fam.example in done.stdout


def test_help_and_bad_input_exit_cleanly(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "maps" in out and "demo" in out
    for argv in (["no-such-command"], ["demo", "--seed", "x"], []):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert "error" in capsys.readouterr().err


def test_version_names_the_package(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"attnlab {attnlab.__version__}\n"


def test_a_reader_that_stops_early_is_not_an_error():
    # `attnlab maps | head -0`: the pipe's reader is gone before the first line is written
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "attnlab", "maps"], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")


class _Refused(Error):
    pass


class _Bug(Exception):
    pass


@pytest.mark.parametrize(
    "exc, code, message",
    [
        (_Refused("no such thing"), 1, "attnlab maps: error: no such thing\n"),
        (
            PermissionError(13, "Permission denied", "/no/where"),
            1,
            "attnlab maps: error: '/no/where' Permission denied\n",
        ),
        (OSError("the disk is gone"), 1, "attnlab maps: error: the disk is gone\n"),
        (KeyboardInterrupt(), 130, "attnlab maps: interrupted\n"),
    ],
)
def test_errors_end_in_one_line_and_a_status(maps_raising, capsys, exc, code, message):
    maps_raising(exc)
    assert main(["maps"]) == code
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", message)


def test_an_error_outside_the_commands_own_is_not_hidden(maps_raising):
    # a bug keeps its traceback: only an attnlab.Error is the user's to fix
    maps_raising(_Bug("a bug"))
    with pytest.raises(_Bug):
        main(["maps"])
