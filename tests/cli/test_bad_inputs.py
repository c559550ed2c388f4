"""Every command given bad input exits non-zero with one line on stderr, no traceback, and no file changed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attnlab import io
from attnlab.cli import main
from checkpoints import save_checkpoint

RECORDED_CARDS = Path(__file__).resolve().parents[2] / "docs" / "records" / "cards"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A folder holding what a user has around: a tiny checkpoint, score files good and bad, configs good
    and bad, a finished rowmaps study with a damaged file, and folders with the user's own files."""
    root = tmp_path_factory.mktemp("world")
    save_checkpoint(root / "model")
    np.save(root / "scores.npy", np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32))
    (root / "bad.safetensors").write_bytes(b"\x10" + b"\x00" * 7 + b"{garbage}" + b"x" * 40)
    (root / "binary.yaml").write_bytes(bytes(range(256)))
    (root / "tiny.yaml").write_text(
        "model: {context: 32, layers: 1, heads: 2, d_model: 16}\n"
        "train: {steps: 2, batch: 4, warmup: 1, tensorboard: false}\n"
    )
    (root / "mine").mkdir()
    shutil.copytree(RECORDED_CARDS / "smollm2", root / "card")  # a real card, for the comparison
    (root / "mine" / "audit.csv").write_text("a user's table\n")
    (root / "mine" / "rows.parquet").write_text("a user's file\n")
    assert main(["study", "rowmaps", "--out", str(root / "study"), "--no-progress"]) == 0
    (root / "study" / "row.json").write_text("{torn")
    (root / "busy").mkdir()  # another live attnlab run writes here (a sleeping Python child stands in for it)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "attnlab"])
    (root / "busy" / ".attnlab.lock").write_text(str(holder.pid))
    (root / "run").mkdir()
    (root / "run" / "metrics.jsonl").write_text('{"kind": "train", "step": 1, "loss": 9.0}\n')
    io.claim(root / "run", adopt=["metrics.jsonl"])  # a run killed before its first checkpoint: its folder is marked
    yield root
    holder.kill()
    holder.wait()


CASES = {
    # row maps and diagnostics
    "diagnose corrupt safetensors": (["diagnose", "{w}/bad.safetensors"], "not a readable .safetensors"),
    "diagnose missing file": (["diagnose", "{w}/none.npy"], "no such file"),
    "diagnose over a user's file": (
        ["diagnose", "{w}/scores.npy", "--out", "{w}/mine/rows.parquet"],
        "not written by this diagnose command",
    ),
    "diagnose infinite b": (["diagnose", "{w}/scores.npy", "--b", "inf"], "must be finite"),
    # checkpoints
    "audit into a user's folder": (
        ["audit", "--model", "{w}/model", "--prompts", "2", "--pad", "1", "--out", "{w}/mine"],
        "did not write (audit.csv, rows.parquet)",
    ),
    "audit into a folder another run holds": (
        ["audit", "--model", "{w}/model", "--prompts", "2", "--pad", "1", "--out", "{w}/busy"],
        "in use by another attnlab run",
    ),
    "study into a folder another run holds": (
        ["study", "rowmaps", "--out", "{w}/busy"],
        "in use by another attnlab run",
    ),
    "audit missing model": (["audit", "--model", "{w}/nothing", "--out", "{w}/a"], "neither a path nor"),
    "audit zero prompts": (["audit", "--model", "{w}/model", "--prompts", "0", "--out", "{w}/a"], "--prompts"),
    "audit types not a heads folder": (
        ["audit", "--model", "{w}/model", "--types", "{w}/mine", "--out", "{w}/a"],
        "cannot read its heads.csv",
    ),
    "lengths with a pad": (
        ["lengths", "--model", "{w}/model", "--pad", "3", "--out", "{w}/l"],
        "--pad counts haystack sentences",
    ),
    "substitute absurd bias": (
        ["substitute", "--model", "{w}/model", "--recipes", "relu_p4_b1e999", "--pad", "1", "--out", "{w}/s"],
        "relu_p4_b1e999",
    ),
    # training
    "train binary yaml": (["train", "{w}/binary.yaml", "--out", "{w}/t"], "not a text file"),
    "train huge seed": (
        ["train", "{w}/tiny.yaml", "--set", "train.seed=99999999999999999999999", "--out", "{w}/t"],
        "train.seed=99999999999999999999999': the value is not a YAML scalar or list: integer",
    ),
    "train over an earlier run": (
        ["train", "{w}/tiny.yaml", "--out", "{w}/run", "--no-progress"],
        "already holds metrics.jsonl",
    ),
    "train resume nothing": (["train", "{w}/tiny.yaml", "--resume", "--out", "{w}/none"], "does not exist"),
    "release-replay not a run": (["release-replay", "{w}/mine"], "not a run folder with logged evaluations"),
    "prepare over a user's folder": (["prepare", "--out", "{w}/mine"], "already exists"),
    # tasks, lengthgen, studies, report
    "tasks unbounded length": (["tasks", "copy", "--length", "100000000"], "must be at most 1,048,576"),
    "lengthgen unknown positions": (["lengthgen", "--pe", "rotary", "--out", "{w}/l"], "invalid choice: 'rotary'"),
    "lengthgen negative samples": (["lengthgen", "--samples", "-1", "--out", "{w}/l"], "--samples"),
    "lengthgen zero steps": (["lengthgen", "--steps", "0", "--out", "{w}/l"], "--steps"),
    "study bad model": (["study", "concentration", "--model", "{w}/nothing", "--out", "{w}/c"], "neither a path"),
    "report damaged study": (["report", "{w}/study", "--out", "{w}/r"], "row.json is not valid JSON"),
    "report no study": (["report", "{w}/mine", "--out", "{w}/r"], "holds no study folder"),
    "compare one card": (["compare", "{w}/card", "--out", "{w}/c"], "two or more card folders"),
    "compare a folder without a card": (["compare", "{w}/card", "{w}/mine", "--out", "{w}/c"], "card.json"),
    "unknown command": (["poems"], "invalid choice"),
    "maps takes no argument": (["maps", "--all"], "unrecognized arguments: --all"),
    "papers takes no argument": (["papers", "Smith 2020"], "unrecognized arguments: Smith 2020"),
    "demo into a file": (["demo", "--out", "{w}/scores.npy"], "cannot write to output folder"),
    "demo unknown model": (
        ["demo", "--studies", "rowmaps", "--models", "bogus", "--out", "{w}/d"],
        "--models bogus: model 'bogus' is neither a path",
    ),
    "diagnose key on an npy": (["diagnose", "{w}/scores.npy", "--key", "scores"], "names nothing"),
    "fetch unknown model": (["fetch", "llama-9000"], "llama-9000"),
    "heads zero prompts": (["heads", "--model", "{w}/model", "--prompts", "0", "--out", "{w}/h"], "--prompts"),
    "ablate zero k": (["ablate", "--model", "{w}/model", "--k", "0", "--out", "{w}/b"], "--k"),
    "temperature one length": (["temperature", "--model", "{w}/model", "--n", "16", "--out", "{w}/x"], "--n"),
    "xi-sweep negative xi": (["xi-sweep", "--model", "{w}/model", "--xi", "-1", "--out", "{w}/x"], "--xi"),
    "xi-sweep over a user's folder": (["xi-sweep", "--model", "{w}/model", "--out", "{w}/mine"], "did not write"),
    "fit-xi one length": (["fit-xi", "{w}/scores.npy", "--out", "{w}/x"], "at least two lengths"),
    "card into a user's folder": (
        ["card", "{w}/model", "--out", "{w}/mine"],
        "did not write (audit.csv, rows.parquet)",
    ),
    "card missing model": (["card", "{w}/nothing", "--out", "{w}/c"], "neither a path nor"),
    "verdicts unknown calibration": (["verdicts", "--only", "nope @ smoke"], "invalid choice"),
    "verdicts zero draws": (["verdicts", "--calibrate", "--draws", "0", "--out", "{w}/v"], "--draws"),
    "matched without a head set": (["matched", "--model", "{w}/model", "--out", "{w}/m"], "--ranking ABLATE_DIR"),
    "matched ranking not an ablate folder": (
        ["matched", "--model", "{w}/model", "--ranking", "{w}/mine", "--out", "{w}/m"],
        "cannot read its ranking.csv",
    ),
}


def _tree(root):
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
        if "__pycache__" not in p.parts
    }


@pytest.mark.parametrize("what", CASES)
def test_bad_input_is_one_line_and_changes_nothing(world, what, capsys):
    argv, message = CASES[what]
    before = _tree(world)
    capsys.readouterr()
    try:
        code = main([a.replace("{w}", str(world)) for a in argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code not in (0, None), what
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in err, f"{what}: {err!r}"
    after = _tree(world)
    changed = sorted(
        k
        for k in set(before) | set(after)
        if before.get(k, "absent") != after.get(k, "absent") and not k.endswith("section.json")
    )
    assert changed == [], f"{what} changed {changed}"


def test_the_table_covers_every_command():
    from attnlab.cli import build_parser

    commands = set(build_parser()._subparsers._group_actions[0].choices)
    covered = {argv[0] for argv, _ in CASES.values()}
    assert commands <= covered, commands - covered
