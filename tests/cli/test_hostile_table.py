"""Every flag of every command, given each hostile value of its kind, ends in exit 0 or one clear line, in time,
with every file the user had left as it was and nothing written where the command was started (the table is
generated from the parser: a new flag is covered)."""

from __future__ import annotations

import contextlib
import io
import shutil
import signal

import numpy as np
import pytest

from attnlab.cli import build_parser, main
from checkpoints import save_checkpoint

INTS = ("", "abc", "nan", "-1", "0", "99999999999999999999999", "1e23")
FLOATS = ("", "abc", "nan", "inf", "-1e300", "1e300", "0")
TEXTS = ("", "/nonexistent/x", "{w}/user.txt")
OUTS = ("{w}/user.txt", "{w}/mine", "")
CHOICES = ("", "bogus")
SECONDS = 60  # a case still running after this is a run that never ends without a word
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
    "report": ["report", "{w}/study"],
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


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """What a user has around: a tiny checkpoint, score files, a config, a finished study and run, and files of
    their own (user.txt, mine/notes.txt) that no case may change."""
    root = tmp_path_factory.mktemp("world")
    save_checkpoint(root / "model")
    np.save(root / "scores.npy", np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32))
    np.save(root / "scores2.npy", np.random.default_rng(1).normal(size=(4, 12)).astype(np.float32))
    (root / "tiny.yaml").write_text(
        "model: {context: 32, layers: 1, heads: 2, d_model: 16}\n"
        "train: {steps: 2, batch: 4, warmup: 1, tensorboard: false}\n"
    )
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("mine")
    (root / "user.txt").write_text("a user's file")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["study", "rowmaps", "--out", str(root / "study"), "--no-progress"]) == 0
        assert main(["train", str(root / "tiny.yaml"), "--out", str(root / "run"), "--no-progress"]) == 0
    return root


class _Hang(BaseException):
    pass


def _alarm(*_):
    raise _Hang


def _files(root):
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in ("out", "study", "run")
    }


def test_the_table_covers_every_command_and_its_flags():
    commands = {name for name, _, _ in CASES}
    assert commands == set(BASE) and len(CASES) > 900


@pytest.mark.parametrize(("command", "flag", "value"), CASES, ids=[f"{c} {f} {v!r}" for c, f, v in CASES])
def test_a_hostile_value_is_one_line_or_a_finished_run(world, command, flag, value, capsys, tmp_path, monkeypatch):
    shutil.rmtree(world / "out", ignore_errors=True)
    monkeypatch.chdir(tmp_path)  # every case names its folders: nothing may land where the user stands
    argv = [a.replace("{w}", str(world)) for a in (*BASE[command], flag, value)]
    before = _files(world)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    except _Hang:
        pytest.fail(f"{' '.join(argv)} still ran after {SECONDS} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    err = capsys.readouterr().err
    if code not in (0, None):
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, f"{argv}: {err!r}"
    after = _files(world)
    assert [k for k in before if after.get(k) != before[k]] == [], f"{argv} changed a user's file"
    assert list(tmp_path.iterdir()) == [], f"{argv} wrote into the working directory"
