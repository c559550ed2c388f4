"""One hostile case of the command line run in this process (test utility): its exit code, or the test's failure
when it still runs after ``SECONDS``, so that a case that never ends is a named failure, not a stuck suite."""

from __future__ import annotations

import signal

import pytest

from attnlab.cli import main

SECONDS = 60  # a case still running after this is a run that never ends without a word


class _Hang(BaseException):
    pass


def _alarm(*_):
    raise _Hang


def run_within(argv: list[str], what: str | None = None) -> int | str | None:
    """``main(argv)``'s exit code (argparse's own errors: its SystemExit code); the test fails naming ``what``
    (default: the command line) when the case still runs after ``SECONDS``."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS)
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code
    except _Hang:
        pytest.fail(f"{what or ' '.join(argv)} still ran after {SECONDS} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
