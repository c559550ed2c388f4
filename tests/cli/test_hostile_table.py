"""Every flag of every command, given each hostile value of its kind or a value its parser takes but a later rule
refuses (a row map's bias range, a value given twice, a mask that is not one), ends in exit 0 or one clear line, in
time, with every file the user had left as it was and nothing written where the command was started (the table is
generated from the parser and the registries: a new flag or row map is covered)."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from attnlab import rowmaps
from attnlab.cli import build_parser, main
from attnlab.rowmaps.registry import BIAS_RANGE
from checkpoints import save_checkpoint
from hostile_run import run_within

RECORDED_CARDS = Path(__file__).resolve().parents[2] / "docs" / "records" / "cards"

INTS = ("", "abc", "nan", "-1", "0", "99999999999999999999999", "1e23")
FLOATS = ("", "abc", "nan", "inf", "-1e300", "1e300", "0")
TEXTS = ("", "/nonexistent/x", "{w}/user.txt")
OUTS = ("{w}/user.txt", "{w}/mine", "")
CHOICES = ("", "bogus")
MODEL, OUT = "{w}/model", "{w}/out"
# A valid command line per command, small enough that a hostile value which is still legal finishes in seconds.
BASE = {
    "maps": ["maps"],
    "papers": ["papers"],
    "tasks": ["tasks", "copy"],
    "fetch": ["fetch", "--list"],
    "audit": ["audit", "--model", MODEL, "--prompts", "2", "--out", OUT],
    "lengths": ["lengths", "--model", MODEL, "--prompts", "2", "--out", OUT],
    "substitute": ["substitute", "--model", MODEL, "--recipes", "softmax", "--prompts", "2", "--out", OUT],
    "ablate": ["ablate", "--model", MODEL, "--prompts", "2", "--out", OUT],
    "heads": ["heads", "--model", MODEL, "--prompts", "2", "--out", OUT],
    "temperature": ["temperature", "--model", MODEL, "--n", "8", "16", "--docs", "2", "--out", OUT],
    "xi-sweep": ["xi-sweep", "--model", MODEL, "--windows", "1", "--out", OUT],
    "fit-xi": ["fit-xi", "{w}/scores.npy", "{w}/scores2.npy", "--out", OUT],
    "diagnose": ["diagnose", "{w}/scores.npy"],
    "matched": ["matched", "--model", MODEL, "--heads", "0.0", "--prompts", "2", "--out", OUT],
    "card": ["card", MODEL, "--out", OUT],
    "study": ["study", "rowmaps", "--out", OUT],
    "report": ["report", "{w}/study", "--out", OUT],
    "compare": ["compare", "{w}/cards/smollm2", "{w}/cards/gemma3", "--out", OUT],
    "demo": ["demo", "--studies", "rowmaps", "--out", OUT],
    "prepare": ["prepare", "--out", OUT],
    "train": ["train", "{w}/tiny.yaml", "--out", OUT],
    "release-replay": ["release-replay", "{w}/run"],
    "verdicts": ["verdicts", "--calibrate", "--only", "sinks: masking BOS @ smoke", "--draws", "20", "--out", OUT],
    "lengthgen": ["lengthgen", "--steps", "2", "--samples", "4", "--seeds", "1", "--maps", "softmax", "--out", OUT],
}


def _values(action) -> tuple[str, ...]:
    kind = getattr(action.type, "__name__", "str")
    if action.option_strings[0] == "--out":
        return OUTS
    if action.choices is not None:
        return CHOICES
    if kind in ("int", "count", "seed"):
        return INTS
    if kind in ("finite", "positive", "float", "stored_b_auto"):
        return FLOATS
    return TEXTS


def _cases() -> list[tuple[str, str, str]]:
    parsers = build_parser()._subparsers._group_actions[0].choices
    return [
        (name, action.option_strings[0], value)
        for name, parser in parsers.items()
        for action in parser._actions
        if action.option_strings and action.option_strings[0] != "-h" and action.nargs != 0
        for value in _values(action)
    ]


CASES = _cases()

# The values a flag's parser takes but a later rule refuses, one class per rule. A bias just outside the range of
# every row map that has one (test_the_bias_values_lie_just_outside_every_maps_range checks each map).
OUTSIDE = (BIAS_RANGE[0] - 1, BIAS_RANGE[1] + 1)
# Masks that are not one, as .npy files and as tensors of masks.safetensors beside its "scores" (4, 6).
MASKS = {
    "float": np.ones((4, 6), np.float32),
    "int": np.ones((4, 6), np.int64),
    "shape": np.ones((3, 5), bool),  # does not broadcast to the scores
    "larger": np.ones((2, 4, 6), bool),  # broadcasts, but would enlarge the scores
}
# nargs flags whose parser, default and choices name no valid value to repeat; fetch's names would download
REPEATED = {("prepare", "--patterns"): "*.py", ("demo", "--models"): "none"}
UNREPEATED = {("fetch", "names")}


def _subparsers() -> dict:
    return build_parser()._subparsers._group_actions[0].choices


def _name(action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest


def _words(command: str) -> tuple[list[str], list[str]]:
    """BASE's words after the command name: (the positional ones, the rest)."""
    words = BASE[command][1:]
    first = next((i for i, w in enumerate(words) if w.startswith("-")), len(words))
    return words[:first], words[first:]


def _argv(command: str, extra: tuple[str, ...] = (), positional: list[str] | None = None) -> tuple[str, ...]:
    """BASE's command line with ``extra`` after it, and its positional words replaced by ``positional`` if given."""
    given, rest = _words(command)
    return (command, *(given if positional is None else positional), *rest, *extra)


def _given(command: str, action) -> list[str]:
    """What BASE gives ``action`` (its positional words, or the words after its flag), else []."""
    given, rest = _words(command)
    if not action.option_strings:
        return given
    flag = action.option_strings[0]
    if flag not in rest:
        return []
    after = rest[rest.index(flag) + 1 :]
    return after[: next((i for i, w in enumerate(after) if w.startswith("-")), len(after))]


def _valid(command: str, action) -> str | None:
    """One value ``action`` takes: BASE's, its default's, its first choice, a number for a number, or REPEATED's."""
    default = action.default if isinstance(action.default, (tuple, list)) else (action.default,)
    for source in (_given(command, action), [d for d in default if d is not None], action.choices or []):
        if source:
            return str(source[0])
    if getattr(action.type, "__name__", "str") in ("int", "count", "finite", "positive", "float"):
        return "2"
    return REPEATED.get((command, _name(action)))


def _is_map(value: str | None) -> bool:
    try:
        rowmaps.get(value)
    except (TypeError, ValueError):
        return False
    return True


def _map_flags(command: str, parser) -> list[str]:
    """The flags that take row-map names: those whose default or BASE value names a registered row map."""
    return [a.option_strings[0] for a in parser._actions if a.option_strings and _is_map(_valid(command, a))]


def _bias_stems() -> list[str]:
    """Every registered row-map family with a bias b, as the stem its names put _b<b> after (relu_p4, sigmoid)."""
    maps = [rowmaps.get(f.example) for f in rowmaps.FAMILIES.values()]
    return [m.name.rsplit("_b", 1)[0] for m in maps if "b" in m.params]


def _bias_cases(command: str, parser) -> list[tuple[str, ...]]:
    """Each map flag given a name with b just outside its map's range; --b-auto given such a b, with a b=auto
    name of the map where the command takes one (the b it then resolves to)."""
    maps = _map_flags(command, parser)
    b_auto = any(getattr(a.type, "__name__", "") == "stored_b_auto" for a in parser._actions)
    named = [(maps[0], f"{stem}_bauto") for stem in _bias_stems()] if maps else [()]
    cases = [_argv(command, (flag, f"{stem}_b{b:g}")) for stem in _bias_stems() for b in OUTSIDE for flag in maps]
    return cases + [_argv(command, (*name, "--b-auto", f"{b:g}")) for name in named for b in OUTSIDE if b_auto]


def _repeated_cases(command: str, parser) -> list[tuple[str, ...]]:
    """Each flag (or positional argument) that takes several values given one value twice."""
    cases = []
    for action in parser._actions:
        if action.nargs not in ("+", "*") or (command, _name(action)) in UNREPEATED:
            continue
        value = _valid(command, action)
        if action.option_strings:
            cases.append(_argv(command, (action.option_strings[0], value, value)))
        else:
            cases.append(_argv(command, positional=[value, value]))
    return cases


def _mask_cases(command: str, parser) -> list[tuple[str, ...]]:
    """Each mask flag given each kind of bad mask, with and without --causal where the command has it: a file for
    a path flag, else a tensor's name in masks.safetensors, which then also holds the scores (--key scores) and
    stands for the command's mask file if it takes one."""
    flags = [a for a in parser._actions if "mask" in a.dest and a.option_strings]
    causal = [(), ("--causal",)] if "--causal" in parser._option_string_actions else [()]
    masks = "{w}/masks.safetensors"
    cases = []
    for action, kind, extra in ((a, k, c) for a in flags for k in MASKS for c in causal):
        flag = action.option_strings[0]
        if getattr(action.type, "__name__", "") == "path":
            cases.append(_argv(command, (flag, f"{{w}}/mask_{kind}.npy", *extra)))
            continue
        files = [w for a in flags if a is not action for w in (a.option_strings[0], masks)]
        given = _words(command)[0]
        cases.append(_argv(command, ("--key", "scores", *files, flag, kind, *extra), positional=[masks] * len(given)))
    return cases


def _later_rule_cases() -> list[tuple[str, str, tuple[str, ...]]]:
    """(command, class, command line) for every value a later rule refuses."""
    classes = {"bias": _bias_cases, "repeated": _repeated_cases, "mask": _mask_cases}
    return [
        (command, kind, argv)
        for command, parser in _subparsers().items()
        for kind, make in classes.items()
        for argv in make(command, parser)
    ]


LATER = _later_rule_cases()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """What a user has around: a tiny checkpoint, score files, a config, a finished study and run, two cards, and
    files of their own (user.txt, mine/notes.txt) that no case may change."""
    root = tmp_path_factory.mktemp("world")
    save_checkpoint(root / "model")
    np.save(root / "scores.npy", np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32))
    np.save(root / "scores2.npy", np.random.default_rng(1).normal(size=(4, 12)).astype(np.float32))
    for kind, mask in MASKS.items():
        np.save(root / f"mask_{kind}.npy", mask)
    scores = torch.from_numpy(np.load(root / "scores.npy"))
    save_file({"scores": scores, **{k: torch.from_numpy(m) for k, m in MASKS.items()}}, root / "masks.safetensors")
    (root / "tiny.yaml").write_text(
        "model: {context: 32, layers: 1, heads: 2, d_model: 16}\n"
        "train: {steps: 2, batch: 4, warmup: 1, tensorboard: false}\n"
    )
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("mine")
    (root / "user.txt").write_text("a user's file")
    shutil.copytree(RECORDED_CARDS, root / "cards")  # two real cards, for the comparison
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["study", "rowmaps", "--out", str(root / "study"), "--no-progress"]) == 0
        assert main(["train", str(root / "tiny.yaml"), "--out", str(root / "run"), "--no-progress"]) == 0
    return root


def _files(root):
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in ("out", "study", "run")
    }


def test_the_table_covers_every_command_and_its_flags():
    commands = {name for name, _, _ in CASES}
    assert commands == set(BASE) and len(CASES) > 900


def test_the_later_rules_cover_every_command_with_such_a_flag():
    """Every nargs flag has a repeated case, every mask flag its bad masks, every map flag and --b-auto its biases."""
    covered = {(c, k) for c, k, _ in LATER}
    for command, parser in _subparsers().items():
        for action in parser._actions:
            if action.nargs in ("+", "*") and (command, _name(action)) not in UNREPEATED:
                assert (command, "repeated") in covered and _valid(command, action) is not None, (command, action)
            if "mask" in action.dest or getattr(action.type, "__name__", "") == "stored_b_auto":
                assert (command, "mask" if "mask" in action.dest else "bias") in covered, (command, action)
    assert {c for c, k, _ in LATER if k == "bias"} >= {"substitute", "ablate", "diagnose", "lengthgen"}


@pytest.mark.parametrize("stem", _bias_stems())
def test_the_bias_values_lie_just_outside_every_maps_range(stem):
    """OUTSIDE is refused by each map with a bias, and the integers next to it inward are taken."""
    for b in OUTSIDE:
        with pytest.raises(ValueError, match="outside the allowed range"):
            rowmaps.get(f"{stem}_b{b:g}")
        rowmaps.get(f"{stem}_b{b - np.sign(b):g}")


@pytest.mark.parametrize(("command", "kind", "argv"), LATER, ids=[" ".join(a) for _, _, a in LATER])
def test_a_value_a_later_rule_refuses_is_one_line_or_a_finished_run(
    world, command, kind, argv, capsys, tmp_path, monkeypatch
):
    _one_line_or_finished(world, argv, capsys, tmp_path, monkeypatch)


@pytest.mark.parametrize(("command", "flag", "value"), CASES, ids=[f"{c} {f} {v!r}" for c, f, v in CASES])
def test_a_hostile_value_is_one_line_or_a_finished_run(world, command, flag, value, capsys, tmp_path, monkeypatch):
    _one_line_or_finished(world, (*BASE[command], flag, value), capsys, tmp_path, monkeypatch)


def _one_line_or_finished(world, words, capsys, tmp_path, monkeypatch):
    """Run ``words`` ({w} the world) from an empty folder: exit 0 or one line without a traceback, within SECONDS,
    no user's file changed and nothing written where the command was started."""
    shutil.rmtree(world / "out", ignore_errors=True)
    monkeypatch.chdir(tmp_path)  # every case names its folders: nothing may land where the user stands
    argv = [a.replace("{w}", str(world)) for a in words]
    before = _files(world)
    code = run_within(argv)
    err = capsys.readouterr().err
    if code not in (0, None):
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, f"{argv}: {err!r}"
    after = _files(world)
    assert [k for k in before if after.get(k) != before[k]] == [], f"{argv} changed a user's file"
    assert list(tmp_path.iterdir()) == [], f"{argv} wrote into the working directory"
