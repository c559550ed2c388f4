"""docs/SYMBOLS.md stays true: its Python paths resolve, C kernels are defined, tests exist, papers are known."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from attnlab import papers

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "SYMBOLS.md"
COLUMNS = ("Symbol", "Paper", "Where", "Python", "C kernel", "C file", "Test")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _names(cell: str) -> list[str]:
    """The code spans of a cell (a cell may list several, comma-separated); [] for '-'."""
    if cell == "-":
        return []
    names = re.findall(r"`([^`]+)`", cell)
    assert names and re.sub(r"`[^`]+`|[,\s]", "", cell) == "", f"cell {cell!r} must be '-' or code spans"
    return names


def _rows() -> list[dict[str, str]]:
    lines = [line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    assert _cells(lines[0]) == list(COLUMNS), _cells(lines[0])
    assert set("".join(_cells(lines[1]))) <= set("-:"), "the second table line must be the separator"
    rows = []
    for line in lines[2:]:
        cells = _cells(line)
        assert len(cells) == len(COLUMNS), line
        rows.append(dict(zip(COLUMNS, cells)))
    return rows


ROWS = _rows()


def _ids(rows):
    return [r["Symbol"][:40] for r in rows]


def _resolve(dotted: str):
    """The object a dotted path names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def _macro_call(text: str, start: int) -> tuple[list[str], int]:
    """The arguments of the macro call whose '(' is at ``start`` and the index after its ')'."""
    depth, args, arg = 0, [], ""
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "(":
            depth += 1
            if depth == 1:
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return [*args, arg.strip()], i + 1
        elif ch == "," and depth == 1:
            args.append(arg.strip())
            arg = ""
            continue
        arg += ch
    raise ValueError("unbalanced macro call")


def _preprocess(source: str) -> str:
    """The C source with its function-like macros expanded (token pasting included), comments dropped.

    The kernels' entry points (``entmax_f64_forward``) exist only after expansion, and a name the
    table cites must be a real definition of the library, so no compiler is needed to check it."""
    text = re.sub(r"/\*.*?\*/", " ", source.replace("\\\n", " "), flags=re.S)
    macros = {}
    kept = []
    for line in text.splitlines():
        m = re.match(r"\s*#define\s+(\w+)\(([^)]*)\)(.*)", line)
        if m:
            macros[m.group(1)] = ([p.strip() for p in m.group(2).split(",")], m.group(3))
        elif not line.lstrip().startswith("#"):
            kept.append(line)
    text = "\n".join(kept)
    call = re.compile(r"\b(" + "|".join(map(re.escape, macros)) + r")\s*\(") if macros else None
    for _ in range(10_000):
        m = call.search(text) if call else None
        if m is None:
            return text
        args, end = _macro_call(text, m.end() - 1)
        params, body = macros[m.group(1)]
        given = dict(zip(params, args))
        body = re.sub(r"\b\w+\b", lambda t, given=given: given.get(t.group(0), t.group(0)), body)
        text = text[: m.start()] + re.sub(r"\s*##\s*", "", body) + text[end:]
    raise AssertionError("macro expansion did not finish")


_C_CACHE: dict[Path, str] = {}


def _c_text(path: Path) -> str:
    if path not in _C_CACHE:
        _C_CACHE[path] = _preprocess(path.read_text(encoding="utf-8"))
    return _C_CACHE[path]


def _defines(text: str, name: str) -> bool:
    """A function definition of ``name``: a return type, the name, a parameter list, then a body."""
    return re.search(rf"\b\w+[\s*]+{re.escape(name)}\s*\([^(){{}};]*\)\s*\{{", text) is not None


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_the_table_covers_every_paper_and_the_symbols_readers_look_up():
    assert len(ROWS) >= 40
    assert {r["Paper"] for r in ROWS} == {
        "Polynomial Concentration",
        "Vasylenko et al. 2025",
        "Zhu et al. 2026",
        "Hayase & Karakida 2026",
        "Attention Sinks Essential",
    }
    text = " ".join(r["Symbol"] for r in ROWS)
    for symbol in (
        "S_p",
        "p*",
        "Lambda_n",
        "alpha_n",
        "Delta_n",
        "b_auto",
        "beta_n",
        "m(n; xi)",
        "xi_hat",
        "entropy",
        "support",
        "sink mass",
        "tau",
        "ReLU^p",
        "delta + beta (log n)^gamma",
        "SSMax",
    ):
        assert symbol in text, symbol
    assert len({r["Symbol"] for r in ROWS}) == len(ROWS), "a symbol is listed twice"


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_paper_key_is_in_the_bibliography_and_a_place_is_given(row):
    papers.get(row["Paper"])
    assert re.search(r"§|App\.|Cor\.|Def\.|eq\.|Thm\.|Alg\.", row["Where"]), row["Where"]


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_python_paths_resolve(row):
    names = _names(row["Python"])
    assert names, "every symbol has a Python function"
    for dotted in names:
        assert dotted.startswith("attnlab."), dotted
        assert callable(_resolve(dotted)), dotted


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_c_kernels_are_defined_in_their_files(row):
    functions, files = _names(row["C kernel"]), _names(row["C file"])
    assert len(functions) == len(files) <= 1, "a kernel and its file come together, or neither"
    for name, rel in zip(functions, files):
        path = ROOT / "src" / rel
        assert path.suffix == ".c" and path.is_file(), rel
        assert _defines(_c_text(path), name), f"no definition of {name} in {rel}"


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_pinning_tests_exist(row):
    for ref in _names(row["Test"]):
        rel, _, name = ref.partition("::")
        path = ROOT / rel
        assert rel.startswith("tests/") and path.is_file(), rel
        assert name.startswith("test_") and name in _test_functions(path), ref


def test_the_checker_sees_macro_made_definitions_and_refuses_calls():
    """The C check must not pass on a name that is only called or declared."""
    text = _preprocess(
        "#define K(T, NAME) \\\n  void NAME##_go(T *x) { helper_##NAME(x); }\n"
        "int helper_f64(double *x);\nK(double, f64)\n"
    )
    assert _defines(text, "f64_go")
    assert not _defines(text, "helper_f64")
