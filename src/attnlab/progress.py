"""Progress of a long loop, readable on a terminal and in a log: tqdm's bar where stderr is a terminal; elsewhere
(output sent to a file, nohup, CI) a plain line when the loop starts, one with the estimated time once the first
item is timed, and one each time about a tenth more of it is done (with the time left), since a bar's redraws reach
a log as noise or not at all and a run that prints nothing for half an hour looks hung."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")
STEPS = 10  # lines per loop in a log, besides the first


def progress(items: Iterable[T], *, desc: str, unit: str, enabled: bool = True, leave: bool = True) -> Iterator[T]:
    """``items``, reporting how far the loop is (see the module docstring); nothing at all unless ``enabled``."""
    if not enabled:
        return iter(items)
    if sys.stderr.isatty():
        return iter(tqdm(items, desc=desc, unit=unit, leave=leave))
    return _lines(items, desc, unit)


def _lines(items: Iterable[T], desc: str, unit: str) -> Iterator[T]:
    total = len(items) if hasattr(items, "__len__") else None
    every = max(1, math.ceil(total / STEPS)) if total else None
    start = time.monotonic()
    print(
        f"{desc}: started, {total if total is not None else 'an unknown number of'} {unit}s",
        file=sys.stderr,
        flush=True,
    )
    done = 0
    for done, item in enumerate(items, 1):
        yield item
        elapsed = time.monotonic() - start
        if every is not None and (done % every == 0 or done == total):
            left = "" if done == total else f", about {_duration(elapsed * (total - done) / done)} left"
            print(
                f"{desc}: {done}/{total} {unit}s ({100 * done / total:.0f}%) in {elapsed:.0f} s{left}",
                file=sys.stderr,
                flush=True,
            )
        elif done == 1 and total is not None:
            # the first estimate as soon as one item is timed, not after a tenth of a run that may take hours
            print(
                f"{desc}: the first {unit} took {elapsed:.1f} s, so all {total} take about "
                f"{_duration(elapsed * total)}",
                file=sys.stderr,
                flush=True,
            )
    if every is None:
        print(f"{desc}: {done} {unit}s in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    """A rough span for an estimate: seconds, minutes or hours."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
