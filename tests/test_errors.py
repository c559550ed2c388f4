"""Every exception class attnlab defines for what a caller gave wrong derives from attnlab.Error, and the command line prints any of them as one line."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import attnlab
from attnlab.cli import main
from attnlab.cli.base import COMMANDS, command

# Exceptions attnlab defines that are not the caller's to fix: control flow inside a module.
INTERNAL: set[str] = set()


def _defined_exceptions() -> list[type]:
    found = []
    for info in pkgutil.walk_packages(attnlab.__path__, "attnlab."):
        if info.name.endswith("__main__"):  # runs the command line on import
            continue
        module = importlib.import_module(info.name)
        found += [
            obj
            for _, obj in inspect.getmembers(module, inspect.isclass)
            if issubclass(obj, BaseException) and obj.__module__ == info.name
        ]
    return found


def test_every_error_attnlab_defines_derives_from_the_one_base():
    errors = _defined_exceptions()
    assert len(errors) >= 15
    outside = [
        f"{e.__module__}.{e.__qualname__}"
        for e in errors
        if not issubclass(e, attnlab.Error) and e.__qualname__ not in INTERNAL
    ]
    assert outside == []


def test_a_commands_error_from_any_module_is_one_line(capsys):
    class PluginError(attnlab.Error):
        pass

    @command("raise-plugin-error", "a test command", "raises an attnlab.Error subclass")
    def _raise() -> int:
        raise PluginError("the plugin's input is wrong: pass a file")

    try:
        assert main(["raise-plugin-error"]) == 1
    finally:
        COMMANDS.unregister("raise-plugin-error")
    assert capsys.readouterr().err == "attnlab raise-plugin-error: error: the plugin's input is wrong: pass a file\n"


@pytest.mark.parametrize("name", ["LoadError", "RunError", "StudyError", "SuiteError", "ConfigError"])
def test_the_named_errors_keep_the_builtin_callers_caught(name):
    cls = next(e for e in _defined_exceptions() if e.__name__ == name)
    assert issubclass(cls, attnlab.Error) and issubclass(cls, ValueError)
