"""No module of attnlab raises a bare ValueError, TypeError, KeyError, LookupError or FileNotFoundError, except for the few invariants listed here: every error a caller can fix derives from attnlab.Error (attnlab.errors states the rule)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import attnlab
from attnlab.errors import ArgumentError, ArgumentTypeError, MissingFileError, UnknownNameError

SOURCE = Path(attnlab.__file__).parent
BARE = ("ValueError", "TypeError", "KeyError", "LookupError", "FileNotFoundError")

# (module, function) pairs whose bare ValueError/TypeError is an invariant of attnlab itself, not something a
# caller gave: each raises only if attnlab's own code is wrong, so it keeps its traceback. Keep this short.
INVARIANTS = {
    # The decoder hands its beta_n vector to every layer whose scaler is beta_n (Decoder.forward): a scaler
    # called without it means the decoder's wiring is broken, which no config or input can cause.
    ("attnlab.model.scaling", "BetaNScale.forward")
}


def _module(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _bare_raises(tree: ast.AST) -> list[tuple[str, int, str]]:
    """(qualified function, line, builtin) of every ``raise ValueError(...)``/``raise TypeError(...)`` in ``tree``."""
    found = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = f"{scope}.{child.name}" if scope else child.name
            if isinstance(child, ast.Raise) and child.exc is not None:
                exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                if isinstance(exc, ast.Name) and exc.id in BARE:
                    found.append((scope or "<module>", child.lineno, exc.id))
            visit(child, inner)

    visit(tree, "")
    return found


def _scan() -> dict[tuple[str, str], list[str]]:
    """(module, function) -> ["path:line Builtin", ...] over every scanned module of attnlab."""
    sites: dict[tuple[str, str], list[str]] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        module = _module(path)
        for function, line, builtin in _bare_raises(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            sites.setdefault((module, function), []).append(f"{path.relative_to(SOURCE.parent)}:{line} {builtin}")
    return sites


def test_no_bare_value_or_type_error_outside_the_invariants():
    outside = [site for key, where in _scan().items() if key not in INVARIANTS for site in where]
    assert outside == [], (
        "raise the module's domain error, or attnlab.errors.ArgumentError / ArgumentTypeError, for what a "
        "caller gave; a bug of attnlab stays a bare exception only when listed in INVARIANTS"
    )


def test_every_listed_invariant_still_raises_bare():
    assert sorted(INVARIANTS - set(_scan())) == []


def test_the_scan_finds_a_bare_raise():
    tree = ast.parse("class A:\n    def f(self):\n        raise TypeError('x')\n\ndef g():\n    raise ValueError\n")
    assert _bare_raises(tree) == [("A.f", 3, "TypeError"), ("g", 6, "ValueError")]


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (ArgumentError, ValueError),
        (ArgumentTypeError, TypeError),
        (UnknownNameError, KeyError),
        (MissingFileError, OSError),
    ],
)
def test_the_general_argument_errors_keep_the_builtin(cls, builtin):
    assert issubclass(cls, attnlab.Error) and issubclass(cls, builtin)
