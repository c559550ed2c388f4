"""A long loop says how far it is in a log (a line at the start, an estimate after the first item, about every tenth), draws a bar on a terminal, and is silent when disabled."""

from __future__ import annotations

import io
import sys

from attnlab.progress import progress


def test_in_a_log_a_line_starts_the_loop_and_one_follows_each_tenth(monkeypatch, capsys):
    assert list(progress(range(25), desc="audit", unit="input")) == list(range(25))
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "audit: started, 25 inputs"
    assert lines[1].startswith("audit: the first input took ") and "s, so all 25 take about " in lines[1]
    done = [int(line.split()[1].split("/")[0]) for line in lines[2:]]
    assert done == [3, 6, 9, 12, 15, 18, 21, 24, 25] and all("/25 inputs (" in line for line in lines[2:])
    assert all("left" in line for line in lines[2:-1]) and "left" not in lines[-1]


def test_estimates_read_in_seconds_minutes_or_hours():
    from attnlab.progress import _duration

    assert [_duration(s) for s in (5, 89, 600, 5399, 7200)] == ["5 s", "89 s", "10 min", "90 min", "2.0 h"]


def test_a_loop_of_unknown_length_reports_its_end_and_a_disabled_one_nothing(capsys):
    assert list(progress(iter("abc"), desc="scan", unit="row")) == ["a", "b", "c"]
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "scan: started, an unknown number of rows" and lines[-1].startswith("scan: 3 rows in ")
    assert list(progress(range(5), desc="quiet", unit="step", enabled=False)) == list(range(5))
    assert capsys.readouterr().err == ""


def test_on_a_terminal_the_bar_is_drawn_instead_of_lines(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    assert list(progress(range(4), desc="bar", unit="cell")) == [0, 1, 2, 3]
    drawn = sys.stderr.getvalue()
    assert "bar" in drawn and "started" not in drawn
