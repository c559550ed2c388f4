"""Progress of a long loop, readable on a terminal and in a log: tqdm's bar where stderr is a terminal; elsewhere
(output sent to a file, nohup, CI) a plain line when the loop starts, one with the estimated time once the first
item is timed, and one each time about a tenth more of it is done (with the time left), since a bar's redraws reach
a log as noise or not at all and a run that prints nothing for half an hour looks hung.

A long command made of steps (``attnlab card``) names each as it starts (``Steps``), bars or not; inside a step,
a loop whose bar is off still says how far it is whenever HEARTBEAT seconds pass without a line (``ticking``), and
so does a long forward, layer by layer, so that a log never sits silent for long while the command works. All of it
goes to stderr, beside the bars, leaving stdout to results; ``say`` is a line on stdout that counts as one."""

from __future__ import annotations

import contextlib
import contextvars
import math
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")
STEPS = 10  # lines per loop in a log, besides the first
# The longest a log goes without a line while a step's loop runs: half the 10 s a command's log promises at most,
# leaving the other half to the one item (a forward, a generation) a line can only follow.
HEARTBEAT = 5.0
_said = [time.monotonic()]  # when this module last wrote a line, shared by every loop: nested loops take turns
_in_step = contextvars.ContextVar("in_step", default=False)


def progress(items: Iterable[T], *, desc: str, unit: str, enabled: bool = True, leave: bool = True) -> Iterator[T]:
    """``items``, reporting how far the loop is (see the module docstring); not ``enabled``: nothing, except the
    ``ticking`` lines of a loop inside a ``Steps`` step."""
    if not enabled:
        return ticking(items, desc=desc, unit=unit) if _in_step.get() else iter(items)
    if sys.stderr.isatty():
        return _moving(tqdm(items, desc=desc, unit=unit, leave=leave))
    return _lines(items, desc, unit)


def _moving(bar: Iterable[T]) -> Iterator[T]:
    for item in bar:
        yield item
        _said[0] = time.monotonic()  # a bar that moves tells whoever watches it as much as a line


def _say(text: str, file) -> None:
    tqdm.write(text, file=file)  # above any bar drawn on the terminal, which redraws below it
    file.flush()
    _said[0] = time.monotonic()


def _units(unit: str) -> str:
    return unit if unit[-1:].isupper() else f"{unit}s"  # MiB, not MiBs


def _lines(items: Iterable[T], desc: str, unit: str) -> Iterator[T]:
    total = len(items) if hasattr(items, "__len__") else None
    every = max(1, math.ceil(total / STEPS)) if total else None
    start = time.monotonic()
    _say(f"{desc}: started, {total if total is not None else 'an unknown number of'} {_units(unit)}", sys.stderr)
    done = 0
    for done, item in enumerate(items, 1):
        yield item
        now = time.monotonic()
        elapsed = now - start
        if every is not None and (done % every == 0 or done == total or now - _said[0] >= HEARTBEAT):
            left = "" if done == total else f", about {_duration(elapsed * (total - done) / done)} left"
            _say(
                f"{desc}: {done}/{total} {_units(unit)} ({100 * done / total:.0f}%) in {elapsed:.0f} s{left}",
                sys.stderr,
            )
        elif done == 1 and total is not None:
            # the first estimate as soon as one item is timed, not after a tenth of a run that may take hours
            _say(
                f"{desc}: the first {unit} took {elapsed:.1f} s, so all {total} take about "
                f"{_duration(elapsed * total)}",
                sys.stderr,
            )
        elif every is None and now - _said[0] >= HEARTBEAT:
            _say(f"{desc}: {done} {_units(unit)} in {elapsed:.0f} s", sys.stderr)
    if every is None:
        _say(f"{desc}: {done} {_units(unit)} in {time.monotonic() - start:.0f} s", sys.stderr)


def ticking(items: Iterable[T], *, desc: str, unit: str, total: int | None = None) -> Iterator[T]:
    """``items`` (``total`` of them, else ``len(items)`` where it has one), with an indented line on stderr
    ("  desc: 3/8 prompts in 6 s") after an item only when HEARTBEAT seconds have passed since any line of this
    module: a loop that keeps a log alive without drawing a bar, silent while the lines around it come often enough."""
    total = len(items) if total is None and hasattr(items, "__len__") else total
    start = time.monotonic()
    for done, item in enumerate(items, 1):
        yield item
        now = time.monotonic()
        if now - _said[0] >= HEARTBEAT:
            count = f"{done}/{total}" if total is not None else str(done)
            _say(f"  {desc}: {count} {_units(unit)} in {now - start:.0f} s", sys.stderr)


class Steps:
    """The numbered steps of a long command, each named on stderr as it starts ("card 4/11: first-token mass on 4
    documents of 256 tokens"), bars or not; inside one, a loop whose bar is off says how far it is (``ticking``),
    and so does a long forward, layer by layer, through forward hooks on ``layers`` (a model's attention modules:
    a 1024-token forward takes 10 s on a loaded machine). ``total`` is the number of steps the command runs; a step
    past it is a bug of the command's count."""

    def __init__(self, name: str, total: int, layers=()):
        self.name, self.total, self.started, self.layers = name, total, 0, list(layers)

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        if self.started == self.total:
            raise RuntimeError(f"{self.name}: step {self.started + 1} ({what}) past the {self.total} counted")
        self.started += 1
        _say(f"{self.name} {self.started}/{self.total}: {what}", sys.stderr)
        token = _in_step.set(True)
        count, began = len(self.layers), time.monotonic()
        handles = [
            module.register_forward_hook(lambda *_, i=i: _beat(f"a forward is at layer {i}/{count}", began))
            for i, module in enumerate(self.layers, 1)
        ]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
            _in_step.reset(token)


def _beat(text: str, began: float) -> None:
    now = time.monotonic()
    if now - _said[0] >= HEARTBEAT:
        _say(f"  {text}, {now - began:.0f} s into the step", sys.stderr)


def say(text: str) -> None:
    """A line on stdout that counts as the log's latest (``ticking`` waits HEARTBEAT seconds after it)."""
    _say(text, sys.stdout)


def size(n_bytes: int) -> str:
    """A file size in decimal units, as a disk or a download states it: 86.1 MB, 2.52 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes} bytes"


def _duration(seconds: float) -> str:
    """A rough span for an estimate: seconds, minutes or hours."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
