"""Every argument that reads a config file or a YAML value, given each hostile content, ends in exit 0 or one line
without a traceback, within SECONDS, and a refused one writes nothing under --out; only a valid config, or 1e300
where a field has no upper bound, ends in exit 0.

The table is generated. The readers come from the parser: an argument whose help names a .yaml file (a config file,
read as YAML and as TOML) and a flag whose metavar ends in =VALUE (its value read as YAML). The contents are each
structural value placed at a key the reader takes (a "billion laughs" of aliases, 100,000-deep lists and mappings, a
self-referencing alias, tags, a date, integers past 64 bits, of 5,000 digits and a sexagesimal of 100,000 parts),
whole files (empty, a list or number at the top, bytes that are not UTF-8, a key or table given twice, keys that are
not text, a missing or unknown key, over 1 MiB), a few whole items of a KEY=VALUE flag and, from the fields of the
config dataclasses, each field given a value of each type it does not take (a string, a list, a mapping) and each
number field NaN, +-inf and 1e300: a new reader or field is covered without a new test. The field values go through
one reader per dataclass (``RunConfig``'s through train's YAML config file, the task's through tasks --param): --set,
a TOML file and lengthgen --param read them into the same values of the same dataclasses.

A config that is valid after all runs, capped: train trains one step of a 1,280-parameter decoder on a 2-file corpus,
tasks prints one example, lengthgen trains one step and scores one row. A --submitit value is refused in any case
without --launcher submitit, which would submit jobs: what it pins there is that the value is read in one line.
No study config has a reader: their fields are flags only (tests/cli/test_hostile_table.py gives those theirs).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import types
import typing
from collections.abc import Mapping
from pathlib import Path

import pytest

from attnlab import plugins
from attnlab.cli import build_parser
from attnlab.model.config import ModelConfig
from attnlab.options import MAX_YAML_BYTES
from attnlab.tasks import TASKS
from attnlab.train.config import SECTIONS
from hostile_run import run_within

DEEP = 100_000
OUT = "{w}/out"
TASK = "mqmtar"  # the task --param sets: lengthgen's default, with parameters of every kind (int, float, optional)
# A valid command line per command that has a reader, as small as one comes (see the module's docstring).
BASE = {
    "train": ["train", "{w}/base.yaml", "--out", OUT, "--no-progress", "--threads", "1"],
    "tasks": ["tasks", TASK, "--threads", "1"],
    "lengthgen": [
        "lengthgen",
        *("--task", TASK, "--maps", "softmax", "--steps", "1", "--samples", "1"),
        *("--eval-mult", "1", "--select-mult", "1", "--out", OUT, "--no-progress", "--threads", "1"),
    ],
    "study": ["study", "rowmaps", "--out", OUT, "--no-progress", "--threads", "1"],
}
# The valid config of train: 1 step of a 1-layer, 4-wide decoder on {w}/corpus, no evaluation to speak of.
TABLES: dict[str, dict[str, object]] = {
    "model": {"context": 8, "layers": 1, "heads": 1, "d_model": 4},
    "data": {"folder": "{w}/corpus", "max_tokens": 400, "val_fraction": 0.5},
    "train": {
        "steps": 1,
        "batch": 1,
        "warmup": 0,
        "eval_every": 1,
        "eval_batches": 1,
        "checkpoint_every": 0,
        "probes": False,
        "tensorboard": False,
    },
}
# The contents a run may take (exit 0): a valid file, and 1e300 where a field has no upper bound; the rest are refused.
TAKEN = ("valid", "1e300 at")
# The keys a structural hostile value is placed at: one per kind of value a config takes (a list, a number, a name).
PLACES = ("model.rowmap", "train.steps", "model.positions")
# The key of a --flag KEY=VALUE reader that no dataclass declares (submitit's executor parameters are free).
FREE_KEY = "timeout_min"


@dataclasses.dataclass(frozen=True)
class Value:
    """A value as YAML and as TOML writes it (None: TOML cannot say it)."""

    yaml: str
    toml: str | None


def _laughs(levels: int = 9) -> str:
    """A flow list of ``levels`` anchored lists, each holding nine aliases of the one before: 9^9 strings expanded."""
    names = "abcdefghi"[:levels]
    first = f"&{names[0]} [{', '.join(['lol'] * 9)}]"
    rest = [f"&{name} [{', '.join([f'*{before}'] * 9)}]" for before, name in zip(names, names[1:])]
    return f"[{', '.join([first, *rest])}]"


DEEP_LIST = "[" * DEEP + "]" * DEEP
# Values of any key: each is refused where a config takes a list, a number or a name.
STRUCTURAL = {
    "billion laughs": Value(_laughs(), None),
    "100,000-deep list": Value(DEEP_LIST, DEEP_LIST),
    "100,000-deep mapping": Value("{a: " * DEEP + "1" + "}" * DEEP, "{a = " * DEEP + "1" + "}" * DEEP),
    "self-referencing alias": Value("&a [*a]", None),
    "!!python/object tag": Value("!!python/object/apply:os.system ['true']", None),
    "!!python/name tag": Value("!!python/name:os.system ''", None),
    "!!binary tag": Value("!!binary aGk=", None),
    "!!set tag": Value("!!set {a, b}", None),
    "local tag": Value("!mine x", None),
    "a date": Value("2001-12-14", "2001-12-14"),
    "2^64": Value(str(2**64), str(2**64)),
    "5,000 digits": Value("9" * 5000, "9" * 5000),
    "sexagesimal of 100,000 parts": Value("1:" * 100_000 + "1", None),
}
# Values of one type each, given to every field whose annotation does not take that type.
WRONG = {
    "a string": (str, Value("'text'", '"text"')),
    "a list": (tuple, Value("[1, 2]", "[1, 2]")),
    "a mapping": (Mapping, Value("{k: 1}", "{k = 1}")),
}
NUMBERS = {
    "NaN": Value(".nan", "nan"),
    "inf": Value(".inf", "inf"),
    "-inf": Value("-.inf", "-inf"),
    "1e300": Value("1.0e+300", "1e300"),
}


def _subparsers() -> dict:
    return build_parser()._subparsers._group_actions[0].choices


def _readers() -> list[tuple[str, str, str]]:
    """(command, flag or positional name, "file" or "value") of every argument that reads a config file or a value
    as YAML."""
    found = []
    for command, parser in _subparsers().items():
        for action in parser._actions:
            name = action.option_strings[0] if action.option_strings else action.dest
            if ".yaml" in (action.help or ""):
                found.append((command, name, "file"))
            elif str(action.metavar or "").endswith("=VALUE"):
                found.append((command, name, "value"))
    return found


READERS = _readers()


def _takes(hint: object) -> set[type]:
    """The types of value (str, tuple, Mapping, int, float, bool, None) a field annotated ``hint`` takes."""
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else ()
    kinds = set()
    for part in args or (hint,):
        origin = typing.get_origin(part) or part
        kinds.add(Mapping if origin in (dict, Mapping) else origin)
    return kinds


def _fields(kind: type) -> list[tuple[str, set[type]]]:
    """(name, the types it takes) of each field of a dataclass."""
    hints = typing.get_type_hints(kind)
    return [(f.name, _takes(hints[f.name])) for f in dataclasses.fields(kind) if f.name != "name"]


def _task_fields() -> list[tuple[str, set[type]]]:
    """The task's parameters (its annotations are strings: ``int | None``)."""
    names = {"int": int, "float": float, "str": str, "None": type(None), "bool": bool}
    task = TASKS[TASK]
    return [
        (f.name, {names[p.strip()] for p in f.type.split("|")}) for f in dataclasses.fields(task) if f.name != "name"
    ]


def _field_values(fields: list[tuple[str, set[type]]]) -> list[tuple[str, str, Value]]:
    """(key, label, value): each field given each type it does not take, and each number field NaN, inf, 1e300."""
    cases = []
    for name, takes in fields:
        cases += [(name, label, value) for label, (kind, value) in WRONG.items() if kind not in takes]
        if takes & {int, float}:
            cases += [(name, label, value) for label, value in NUMBERS.items()]
    return cases


def _run_fields() -> list[tuple[str, str, Value]]:
    """(section.key, label, value): each field of the run config's tables given its wrong values."""
    tables = {"model": ModelConfig, **SECTIONS}
    return [
        (f"{section}.{key}", label, value)
        for section, kind in tables.items()
        for key, label, value in _field_values(_fields(kind))
    ]


def _values(command: str, reader: str) -> list[tuple[str, str, Value]]:
    """(key, label, value) a reader is given: each structural value at the keys it takes (PLACES for the run config,
    the task's first parameter, FREE_KEY) and, through one reader per dataclass, its fields' wrong values: the run
    config's through train's config file, the task's through tasks --param (--set and lengthgen --param fill the
    same dataclasses with the same values)."""
    fields = {("train", "config"): _run_fields, ("tasks", "--param"): lambda: _field_values(_task_fields())}
    keys = PLACES if command == "train" else (_task_fields()[0][0],) if reader == "--param" else (FREE_KEY,)
    structural = [(key, label, value) for key in keys for label, value in STRUCTURAL.items()]
    return fields.get((command, reader), list)() + structural


def _yaml(tables: Mapping[str, Mapping[str, object]], raw: Mapping[str, str] = {}) -> str:
    """``tables`` as a YAML file, the values of ``raw`` (section.key -> text) written as they are."""
    return "".join(
        f"{section}:\n"
        + "".join(f"  {key}: {raw.get(f'{section}.{key}', json.dumps(v))}\n" for key, v in table.items())
        for section, table in tables.items()
    )


def _toml(tables: Mapping[str, Mapping[str, object]], raw: Mapping[str, str] = {}) -> str:
    return "".join(
        f"[{section}]\n"
        + "".join(f"{key} = {raw.get(f'{section}.{key}', json.dumps(v))}\n" for key, v in table.items())
        for section, table in tables.items()
    )


def _with(key: str, value: object = None) -> dict[str, dict[str, object]]:
    """TABLES with ``key`` (section.key) set to ``value`` (None: removed)."""
    section, _, name = key.partition(".")
    tables = {s: dict(t) for s, t in TABLES.items()}
    tables.setdefault(section, {}).pop(name, None)
    if value is not None:
        tables[section][name] = value
    return tables


def _without(section: str) -> dict[str, dict[str, object]]:
    return {s: t for s, t in TABLES.items() if s != section}


def _file_contents(command: str, reader: str) -> list[tuple[str, str, bytes]]:
    """(label, suffix, bytes) of every hostile config file: each value in YAML (the structural ones in TOML too), and
    whole files."""
    values = _values(command, reader)
    cases = [(f"{label} at {key}", ".yaml", _yaml(_with(key, ""), {key: v.yaml}).encode()) for key, label, v in values]
    cases += [
        (f"{label} at {key}", ".toml", _toml(_with(key, ""), {key: v.toml}).encode())
        for key, label, v in values
        if label in STRUCTURAL and v.toml is not None
    ]
    valid_yaml, valid_toml = _yaml(TABLES), _toml(TABLES)
    whole = {
        "valid": (valid_yaml, valid_toml),
        "empty": ("", ""),
        "[] as the file": ("[]", "[]"),
        "42 as the file": ("42", "42"),
        "a key given twice": (valid_yaml + "  steps: 2\n", valid_toml + "steps = 2\n"),
        "a table given twice": (valid_yaml + "train:\n  steps: 2\n", valid_toml + "[train]\nsteps = 2\n"),
        "keys that are not text": (valid_yaml + "  1: 2\n  null: 3\n  bogus: 4\n", None),
        "keys that are not text at the top": (valid_yaml + "1: 2\nnull: 3\nbogus: 4\n", None),
        "no model table": (_yaml(_without("model")), _toml(_without("model"))),
        "no model.context": (_yaml(_with("model.context")), _toml(_with("model.context"))),
        "an unknown table": (valid_yaml + "bogus:\n  a: 1\n", valid_toml + "[bogus]\na = 1\n"),
        "an unknown key": (_yaml(_with("train.bogus", 1)), _toml(_with("train.bogus", 1))),
        "100,000-deep list at the top": (DEEP_LIST, "a = " + DEEP_LIST),
        "100,000-deep table at model.rowmap": (None, valid_toml + f"[model.rowmap.{'.'.join(['a'] * DEEP)}]\nb = 1\n"),
        "100,000-deep dotted key at the top": (None, ".".join(["a"] * DEEP) + " = 1\n"),
        "over 1 MiB": (valid_yaml + "#" + "x" * MAX_YAML_BYTES + "\n", valid_toml + "#" + "x" * MAX_YAML_BYTES + "\n"),
    }
    for label, texts in whole.items():
        cases += [(label, suffix, text.encode()) for suffix, text in zip((".yaml", ".toml"), texts) if text is not None]
    cases += [
        ("bytes \\xff\\xfe", ".yaml", b"\xff\xfe" + valid_yaml.encode()),
        ("only \\xff\\xfe", ".yml", b"\xff\xfe"),
    ]
    cases += [("UTF-16", ".toml", valid_toml.encode("utf-16"))]
    return cases


def _value_items(command: str, flag: str) -> list[tuple[str, str]]:
    """(label, KEY=VALUE) of every hostile value of a KEY=VALUE flag: its values (``_values``), and a few whole items."""
    values = _values(command, flag)
    key = values[-1][0]
    items = [(f"{label} at {k}", f"{k}={value.yaml}") for k, label, value in values]
    return items + [
        ("nothing", f"{key}="),
        ("an empty list", f"{key}=[]"),
        ("no key", "=1"),
        ("no =", key),
        ("bytes \\xff\\xfe", f"{key}=\udcff\udcfe"),
        ("a key given twice", f"{key}={{a: 1, a: 2}}"),
        ("a NUL", f"{key}=\x00"),
        ("over 1 MiB", f"{key}={'x' * (MAX_YAML_BYTES + 1)}"),
    ]


def _cases() -> list[tuple[str, str, str, str | bytes, str]]:
    """(command, reader, label, content, suffix): a file's bytes for a file reader, a KEY=VALUE for a value reader."""
    cases = []
    for command, reader, kind in READERS:
        if kind == "file":
            cases += [(command, reader, label, data, suffix) for label, suffix, data in _file_contents(command, reader)]
        else:
            cases += [(command, reader, label, item, "") for label, item in _value_items(command, reader)]
    return cases


CASES = _cases()


def _id(command: str, reader: str, label: str, suffix: str) -> str:
    return f"{command} {reader}{suffix} {label}"


def _params() -> list:
    """CASES as pytest parameters."""
    return [pytest.param(*case, id=_id(case[0], case[1], case[2], case[4])) for case in CASES]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A 2-file corpus and the valid config of train."""
    root = tmp_path_factory.mktemp("world")
    (root / "corpus").mkdir()
    (root / "corpus" / "a.txt").write_text("hello world, some text. " * 40)
    (root / "corpus" / "b.txt").write_text("other words here. " * 40)
    (root / "base.yaml").write_text(_yaml(TABLES).replace("{w}", str(root)))
    plugins.load()
    return root


def _files(world: Path) -> dict[Path, bytes]:
    """The world's files but the output folder's."""
    return {p: p.read_bytes() for p in world.rglob("*") if p.is_file() and "out" not in p.relative_to(world).parts}


def _argv(command: str, reader: str, content: str | bytes, suffix: str, world: Path) -> list[str]:
    """BASE's command line with the reader given ``content``: a file written into the world, or a KEY=VALUE."""
    words = [w.replace("{w}", str(world)) for w in BASE[command]]
    if isinstance(content, bytes):
        path = world / f"hostile{suffix}"
        path.write_bytes(content.replace(b"{w}", str(world).encode()))
        if reader.startswith("-"):
            return [*words, reader, str(path)]
        return [command, str(path), *words[2:]]  # the positional file in place of BASE's
    return [*words, reader, content]


def test_the_readers_are_found_from_the_parser():
    """Every config file and KEY=VALUE flag is found, and each reader has cases."""
    found = {(c, r) for c, r, _ in READERS}
    assert found >= {("train", "config"), ("train", "--set"), ("tasks", "--param"), ("lengthgen", "--param")}
    assert found >= {("study", "--submitit"), ("lengthgen", "--submitit")}
    assert set(BASE) == {c for c, _ in found} and {(c, r) for c, r, *_ in CASES} == found


def test_every_field_of_the_run_config_and_the_task_has_wrong_values():
    def keys(command: str, reader: str) -> set[str]:
        labels = [label.split(" at ") for c, r, label, *_ in CASES if (c, r) == (command, reader)]
        return {label[-1] for label in labels if label[0] in WRONG}

    tables = {"model": ModelConfig, **SECTIONS}
    assert keys("train", "config") == {f"{s}.{f.name}" for s, kind in tables.items() for f in dataclasses.fields(kind)}
    assert keys("tasks", "--param") == {name for name, _ in _task_fields()}


@pytest.mark.parametrize(("command", "reader", "label", "content", "suffix"), _params())
def test_a_hostile_config_is_one_line_or_a_finished_run(
    world, command, reader, label, content, suffix, capsys, tmp_path, monkeypatch
):
    """Run from an empty folder: exit 0 only for a valid config or 1e300 (TAKEN), else one line without a traceback
    and nothing under --out; within SECONDS, no file but --out's written."""
    shutil.rmtree(world / "out", ignore_errors=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plugins, "load", lambda: [])  # loaded once by the world: the entry points are read once
    argv = _argv(command, reader, content, suffix, world)
    before = _files(world)
    code = run_within(argv, f"{command} {reader} {label}")
    err = capsys.readouterr().err
    assert code not in (0, None) or label.startswith(TAKEN), f"{label} was taken"
    if code not in (0, None):
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, f"{label}: {err[:2000]!r}"
        assert not (world / "out").exists(), f"{label}: a refused config wrote {world / 'out'}"
    assert _files(world) == before, f"{label} changed a file it read"
    assert list(tmp_path.iterdir()) == [], f"{label} wrote into the working directory"
