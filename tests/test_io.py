"""Atomic writes leave the old file or the whole new one, no temporary file, and ordinary permissions."""

from __future__ import annotations

import os
import stat

import pytest

from attnlab import io


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
