"""A long command's steps are named in order on stderr, bars or not; inside a step a loop whose bar is off, and a
long forward layer by layer, say how far they are once HEARTBEAT seconds pass without a line, and not before."""

from __future__ import annotations

import pytest
import torch

from attnlab import progress
from attnlab.progress import Steps


def test_each_step_is_named_with_its_number_and_a_step_past_the_count_is_refused(capsys):
    steps = Steps("card", 2)
    for what in ("first", "second"):
        with steps.step(what):
            pass
    assert capsys.readouterr().err.splitlines() == ["card 1/2: first", "card 2/2: second"]
    with pytest.raises(RuntimeError, match="step 3"), steps.step("third"):
        pass


def test_inside_a_step_a_loop_without_a_bar_ticks_only_after_heartbeat_seconds_of_silence(monkeypatch, capsys):
    steps = Steps("run", 2)
    monkeypatch.setattr(progress, "HEARTBEAT", float("inf"))
    with steps.step("quiet"):
        assert list(progress.progress(range(3), desc="rows", unit="input", enabled=False)) == [0, 1, 2]
    assert capsys.readouterr().err.splitlines() == ["run 1/2: quiet"]  # lines come often enough: no tick
    monkeypatch.setattr(progress, "HEARTBEAT", 0.0)
    with steps.step("slow"):
        list(progress.progress(range(3), desc="rows", unit="input", enabled=False))
    out = capsys.readouterr().err.splitlines()
    assert out[0] == "run 2/2: slow" and [line.split(" in ")[0] for line in out[1:]] == [
        f"  rows: {i}/3 inputs" for i in (1, 2, 3)
    ]
    # outside a step a disabled loop stays silent, as every other command's --no-progress
    list(progress.progress(range(3), desc="rows", unit="input", enabled=False))
    assert capsys.readouterr() == ("", "")


def test_a_long_forward_says_which_layer_it_is_at_and_its_hooks_leave_with_the_step(monkeypatch, capsys):
    layers = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    monkeypatch.setattr(progress, "HEARTBEAT", 0.0)
    steps = Steps("run", 1, list(layers))
    with steps.step("forward"):
        layers(torch.zeros(1, 2))
    out = capsys.readouterr().err.splitlines()
    assert out[0] == "run 1/1: forward"
    assert [line.split(",")[0] for line in out[1:]] == ["  a forward is at layer 1/2", "  a forward is at layer 2/2"]
    assert all(not layer._forward_hooks for layer in layers)
    layers(torch.zeros(1, 2))
    assert capsys.readouterr().err == ""


def test_sizes_read_in_decimal_units():
    assert [progress.size(n) for n in (512, 98_400_000, 2_520_000_000)] == ["512 bytes", "98.4 MB", "2.52 GB"]
