"""Atomic writes leave the old file or the whole new one with ordinary permissions; leftovers of killed runs are told from live ones, and an output folder is refused when a run would replace files it did not write."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from attnlab import io
from hostile_json import hostile, one_line


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "table.csv"
    io.write_text(path, "old\n")

    def broken(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        io.atomic_write(path, broken)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_new_files_get_the_umask_mode_and_rewrites_keep_the_existing_mode(tmp_path):
    old = os.umask(0o022)
    try:
        path = io.write_text(tmp_path / "index.html", "<p>1</p>")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        path.chmod(0o600)
        io.write_text(path, "<p>2</p>")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == "<p>2</p>"
    finally:
        os.umask(old)


def test_remove_stale_takes_only_the_leftovers_of_dead_processes(tmp_path):
    import subprocess
    import sys

    from attnlab.io import remove_stale, temp_dir

    dead = int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )
    mine = temp_dir(tmp_path, ".staging-")
    assert mine.name.startswith(f".staging-{os.getpid()}-")
    gone = tmp_path / f".staging-{dead}-x"
    gone.mkdir()
    legacy = tmp_path / ".staging-abc123"
    legacy.write_text("partial")
    other = tmp_path / "staging-1-x"  # not hidden: not ours
    other.mkdir()
    assert sorted(p.name for p in remove_stale(tmp_path, ".staging-")) == sorted([legacy.name, gone.name])
    assert mine.is_dir() and other.is_dir() and not gone.exists() and not legacy.exists()


def test_check_output_refuses_other_settings_and_foreign_files(tmp_path):
    import json

    import pytest

    from attnlab.io import OutputError, check_output

    check_output(tmp_path / "new", {"a": 1}, overwrite=False, what="x")
    run = tmp_path / "run"
    run.mkdir()
    (run / ".staging-1-x").mkdir()
    check_output(run, {"a": 1}, overwrite=False, what="x")  # hidden leftovers only
    (run / "config.json").write_text(json.dumps({"a": [1, 2], "b_auto": 0.5}))
    with pytest.raises(OutputError, match=r"holds files that x did not write \(config.json\).* even with --overwrite"):
        check_output(run, {"a": (1, 3)}, overwrite=True, what="x")  # no marker: it may be a user's config.json
    check_output(run, {"a": (1, 2)}, overwrite=False, what="x")  # an older attnlab's run of these settings
    assert io.listed(run) == []  # claimed, its files unlisted: no --overwrite deletes them
    with pytest.raises(OutputError, match=r"other settings \(a: \[1, 2\] there, \[1, 3\] now\)"):
        check_output(run, {"a": (1, 3)}, overwrite=False, what="x")
    check_output(run, {"a": (1, 3)}, overwrite=True, what="x")
    (run / "config.json").unlink()
    (run / "table.csv").write_text("mine")
    with pytest.raises(OutputError, match=r"holds files that x did not write \(table.csv\); pass --overwrite"):
        check_output(run, {"a": 1}, overwrite=False, what="x")
    check_output(run, {"a": 1}, overwrite=True, what="x")
    (run / io.MARKER).unlink()
    with pytest.raises(OutputError, match=r"holds files that x did not write \(table.csv\).* even with --overwrite"):
        check_output(run, {"a": 1}, overwrite=True, what="x")
    with pytest.raises(OutputError, match="is a file"):
        check_output(run / "table.csv", {}, overwrite=True, what="x")


def test_a_failed_write_names_the_users_path_not_the_temporary(tmp_path):
    import errno

    import pytest

    from attnlab.io import atomic_write

    def full(tmp):
        raise OSError(errno.ENOSPC, "No space left on device", tmp)

    with pytest.raises(OSError) as caught:
        atomic_write(tmp_path / "table.csv", full)
    assert caught.value.filename == str(tmp_path / "table.csv") and caught.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_a_key_on_an_npy_file_is_refused_not_ignored(tmp_path):
    np.save(tmp_path / "s.npy", np.zeros((2, 3), dtype=np.float32))
    assert io.load_tensor(tmp_path / "s.npy").shape == (2, 3)
    with pytest.raises(ValueError, match="an .npy file holds one unnamed array, so --key 'scores' names nothing"):
        io.load_tensor(tmp_path / "s.npy", key="scores")


def test_a_locked_folder_refuses_another_live_process_and_is_taken_over_from_a_dead_one(tmp_path):
    """Two runs never share an --out: a live holder is named; a killed one's lock is stale; the holder itself may
    ask again (a study running a command into its own folder)."""
    import subprocess
    import sys

    folder = tmp_path / "out"
    with io.locked(folder):
        child = subprocess.run(
            [sys.executable, "-c", f"from attnlab import io\nwith io.locked({str(folder)!r}): pass"],
            capture_output=True,
            text=True,
        )
        assert child.returncode != 0 and f"is in use by another attnlab run (pid {os.getpid()})" in child.stderr
        with io.locked(folder):
            pass
        assert json.loads((folder / io.LOCK).read_text())["pid"] == os.getpid()
    assert not folder.exists()  # made by the hold, and nothing written into it
    folder.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (folder / io.LOCK).write_text(dead.stdout.strip())
    with io.locked(folder):
        assert json.loads((folder / io.LOCK).read_text())["pid"] == os.getpid()
    assert [p.name for p in folder.iterdir()] == []  # a folder the user made stays, as it was


LOCK_JSON = {"pid": 1, "started": 2}
MARKER_JSON = {"attnlab": "the entries of this folder that attnlab wrote", "wrote": ["table.csv"]}


@pytest.mark.parametrize(("label", "data"), hostile(LOCK_JSON, "pid", "pid"))
def test_a_hostile_lock_is_stale_and_taken_over(tmp_path, label, data):
    """A lock that does not read back names no live run (a live run's lock appears with its content), so it is taken
    over, never a traceback."""
    (tmp_path / io.LOCK).write_bytes(data)
    with io.locked(tmp_path):
        assert json.loads((tmp_path / io.LOCK).read_text())["pid"] == os.getpid()


@pytest.mark.parametrize(("label", "data"), hostile(MARKER_JSON, "wrote", "wrote"))
def test_a_hostile_marker_claims_the_folder_and_lists_nothing(tmp_path, label, data):
    """A marker that does not read back still claims its folder (no command takes it for a user's), but nothing is
    deleted on its word."""
    (tmp_path / io.MARKER).write_bytes(data)
    (tmp_path / "table.csv").write_text("mine")
    assert io.listed(tmp_path) == [] and io.clear(tmp_path, ["table.csv"]) == []
    assert (tmp_path / "table.csv").read_text() == "mine"


@pytest.mark.parametrize(("label", "data"), hostile({"seed": 1}, "seed", "seed"))
def test_a_hostile_config_json_tells_no_run_of_these_settings(tmp_path, label, data):
    """check_output's reading of config.json: one that does not read back, or differs, is refused in one line
    (unless --overwrite), as a folder holding other files."""
    (tmp_path / "config.json").write_bytes(data)
    io.claim(tmp_path, adopt=["config.json"])
    with pytest.raises(io.OutputError) as caught:
        io.check_output(tmp_path, {"seed": 1}, overwrite=False, what="x")
    one_line(caught.value, tmp_path, "--overwrite")
    io.check_output(tmp_path, {"seed": 1}, overwrite=True, what="x")
