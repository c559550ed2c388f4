"""`attnlab maps` and `attnlab tasks` list every row-map family and every task; a task shows one example."""

from __future__ import annotations

from attnlab.cli import main
from attnlab.rowmaps import FAMILIES


def test_maps_lists_every_family(capsys):
    assert main(["maps"]) == 0
    out = capsys.readouterr().out
    for fam in FAMILIES.values():
        assert fam.example in out
        assert fam.source.split()[0] in out
    assert "C kernel (row maps, diagnostics, fused attention): o" in out


def test_tasks_lists_every_task_and_shows_one(capsys):
    from attnlab.tasks import SUITES, TASKS

    assert main(["tasks"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in TASKS)
    suites = listed.split("prompt suites")[1].splitlines()[1:]
    assert [line.split()[0] for line in suites] == list(SUITES)
    assert any(line.startswith("literary") and "App. B" in line and "--pad" in line for line in suites)
    assert main(["tasks", "copy", "--length", "12"]) == 0
    assert "<sep>" in capsys.readouterr().out
    assert main(["tasks", "nope"]) == 1
    assert "unknown task 'nope'; known tasks: 2back" in capsys.readouterr().err
