"""Nothing of a user's is touched: a folder of theirs is refused even with --overwrite, --overwrite deletes only what
a run's marker lists, nothing is written through a symbolic link, a second run on a held folder is refused at once,
and a lock naming no live attnlab run is taken over; every user file is left byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attnlab import io
from attnlab.cli import main

TINY = (
    "model: {context: 16, layers: 1, heads: 1, d_model: 8, ffn_width: 16}\n"
    "data: {max_tokens: 3000}\n"
    "train: {steps: 1, batch: 2, warmup: 0, eval_batches: 1, tensorboard: false, probes: false}\n"
)
LENGTHGEN = ["lengthgen", "--task", "copy", "--train-len", "8", "--maps", "softmax", "--steps", "2", "--samples", "2"]


def _state(root: Path) -> dict[str, str]:
    """Every entry under ``root``, hidden ones included, with the sha256 of each file (a link: where it points)."""
    state = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_symlink():
            state[name] = f"-> {path.readlink()}"
        elif path.is_file():
            state[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            state[name] = "folder"
    return state


def _refused(argv: list[str], capsys) -> str:
    capsys.readouterr()
    assert main([*argv, "--no-progress"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


@pytest.fixture
def tiny(tmp_path) -> str:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return str(path)


def test_train_refuses_a_users_folder_even_with_overwrite(tiny, tmp_path, capsys):
    """The user's case: checkpoints/, tensorboard/ and config.json of their own are neither judged a run's by
    name nor deleted by --overwrite; the folder is left exactly as it was (no lock or marker either)."""
    user = tmp_path / "u"
    (user / "checkpoints").mkdir(parents=True)
    (user / "checkpoints" / "my_model.ckpt").write_text("x\n")
    (user / "tensorboard").mkdir()
    (user / "tensorboard" / "events.out").write_bytes(b"\x00events")
    (user / "config.json").write_text("{}\n")
    before = _state(user)
    for flags in ([], ["--overwrite"], ["--resume"]):
        err = _refused(["train", tiny, "--out", str(user), *flags], capsys)
        assert "did not write" in err or "no attnlab run to continue" in err, err
    assert _state(user) == before


def test_train_overwrite_deletes_only_what_the_run_listed(tiny, tmp_path, capsys):
    """--overwrite clears a run's own files (its marker lists them) and keeps the user's notes beside them; a run
    without the marker (an older attnlab's) is refused, as its files cannot be told from a user's."""
    run = tmp_path / "run"
    assert main(["train", tiny, "--out", str(run), "--no-progress"]) == 0
    assert set(io.listed(run)) == {p.name for p in run.iterdir()} - {io.MARKER}
    (run / "notes.txt").write_text("mine\n")
    notes = _state(run)["notes.txt"]
    assert main(["train", tiny, "--out", str(run), "--overwrite", "--no-progress"]) == 0
    assert _state(run)["notes.txt"] == notes
    (run / io.MARKER).unlink()
    before = _state(run)
    err = _refused(["train", tiny, "--out", str(run), "--overwrite"], capsys)
    assert "run of an older attnlab" in err and "--resume" in err
    assert _state(run) == before


def test_lengthgen_overwrite_never_removes_a_users_runs(tmp_path, capsys):
    """A user's runs/ is never rm -rf'd: refused in a folder no run claimed, --overwrite or not, and in a claimed
    folder whose marker does not list it."""
    out = tmp_path / "d"
    (out / "runs" / "mine").mkdir(parents=True)
    (out / "runs" / "mine" / "weights.bin").write_bytes(b"\x01\x02")
    (out / "notes.txt").write_text("mine\n")
    before = _state(out)
    for flags in ([], ["--overwrite"]):
        assert "did not write (notes.txt, runs)" in _refused([*LENGTHGEN, "--out", str(out), *flags], capsys)
    assert _state(out) == before
    io.claim(out)  # a folder an attnlab run made, into which the user then put their runs/
    before = _state(out)
    err = _refused([*LENGTHGEN, "--out", str(out), "--overwrite"], capsys)
    assert "holds runs, which no attnlab run wrote there" in err
    assert _state(out) == before


def test_nothing_is_written_through_a_symbolic_link(tmp_path):
    """A link as the file written, or as a folder inside the held output folder (the report's compare_audit ->
    ~/results), is refused in one line and the linked files stay as they were; --out itself may be a link."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "prevalence_by_model.csv").write_text("the user's table\n")
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "compare_audit").symlink_to(results)
    (folder / "table.csv").symlink_to(results / "prevalence_by_model.csv")
    before = _state(results)
    table = pd.DataFrame({"a": [1]})
    with pytest.raises(io.OutputError, match="table.csv is a symbolic link; attnlab never writes through one"):
        io.write_text(folder / "table.csv", "x")
    with io.locked(folder):
        inside = "compare_audit is a symbolic link inside the output folder"
        with pytest.raises(io.OutputError, match=inside):
            io.write_table(folder / "compare_audit" / "prevalence_by_model", table)
        with pytest.raises(io.OutputError, match=inside):
            io.temp_dir(folder / "compare_audit", ".staging-")
        with pytest.raises(io.OutputError, match="compare_audit is a symbolic link"):
            io.swap_in(io.temp_dir(folder, ".staging-"), folder / "compare_audit")
    assert _state(results) == before
    mine = tmp_path / "scratch"
    mine.mkdir()
    (tmp_path / "out").symlink_to(mine)
    with io.locked(tmp_path / "out"):
        io.write_table(tmp_path / "out" / "table", table)
    assert (mine / "table.csv").is_file() and io.listed(mine) == ["table.csv", "table.md"]


def test_a_second_run_on_a_held_folder_is_refused_at_once(tiny, tmp_path, capsys):
    """Two runs, one folder: while another attnlab process holds it, card, an analysis (fit-xi), train, lengthgen
    and a study are each refused in one line naming its pid before any model loads or any step runs; once it is
    killed, its lock is stale and taken over."""
    out = tmp_path / "x"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    for name, width in (("s1.npy", 6), ("s2.npy", 12)):
        np.save(tmp_path / name, np.random.default_rng(width).normal(size=(4, width)).astype(np.float32))
    hold = "import sys, time\nfrom attnlab import io\nwith io.locked(sys.argv[1]):\n    print('held', flush=True)\n"
    child = subprocess.Popen(
        [sys.executable, "-c", hold + "    time.sleep(60)\n", str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "held"
        before = _state(out)
        for argv in (
            ["card", "no/such/model", "--seed", "1"],  # the lock comes first: the model is never looked for
            ["fit-xi", str(tmp_path / "s1.npy"), str(tmp_path / "s2.npy")],
            ["train", tiny],
            LENGTHGEN,
            ["study", "rowmaps"],
        ):
            started = time.monotonic()
            err = _refused([*argv, "--out", str(out)], capsys)
            assert f"is in use by another attnlab run (pid {child.pid})" in err, err
            assert time.monotonic() - started < 5, argv
        assert _state(out) == before
    finally:
        child.kill()
        child.wait()
    with io.locked(out):
        assert json.loads((out / io.LOCK).read_text())["pid"] != child.pid
    assert _state(out) == {k: v for k, v in before.items() if k != io.LOCK}


def _runs_python(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().lower()
    except OSError:
        return False
    return b"python" in command or b"attnlab" in command


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="start times and command lines are read in /proc")
def test_a_lock_naming_no_live_attnlab_run_is_taken_over(tmp_path):
    """`echo 1 > OUT/.attnlab.lock` blocks nothing: a lock naming a live process that is no Python (attnlab) process,
    or a live one started after the lock was written (its pid reused), is stale and the run goes on; a lock naming
    the live process that wrote it is not."""
    out = tmp_path / "out"
    out.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    python = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = int(Path(f"/proc/{python.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        for text in (str(sleeper.pid), json.dumps({"pid": python.pid, "started": started - 1})):
            (out / io.LOCK).write_text(text)
            with io.locked(out):
                assert json.loads((out / io.LOCK).read_text())["pid"] not in (sleeper.pid, python.pid)
        (out / io.LOCK).write_text(json.dumps({"pid": python.pid, "started": started}))
        with pytest.raises(io.OutputError, match=f"in use by another attnlab run \\(pid {python.pid}\\)"):
            with io.locked(out):
                pass
    finally:
        for process in (sleeper, python):
            process.kill()
            process.wait()
    if _runs_python(1):  # pid 1 is a Python process here (a container's entry point): then it could be a run
        return
    (out / io.LOCK).write_text("1\n")
    for name, width in (("s1.npy", 6), ("s2.npy", 12)):
        np.save(tmp_path / name, np.random.default_rng(width).normal(size=(4, width)).astype(np.float32))
    assert main(["fit-xi", str(tmp_path / "s1.npy"), str(tmp_path / "s2.npy"), "--out", str(out)]) == 0
    assert (out / "config.json").is_file() and not (out / io.LOCK).exists()
