"""The extension examples shown in docs/extending.md (a row map, a task and a study, each one file plus one test) pass their own tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXTEND = Path(__file__).resolve().parent.parent / "examples" / "extend"


def test_extension_examples_pass_their_tests(tmp_path):
    # A subprocess: the examples register into the process-wide registries, which the other tests enumerate.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(EXTEND), str(EXTEND)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "3 passed" in run.stdout, run.stdout[-3000:]


def test_extending_page_shows_each_example_file_verbatim():
    page = (EXTEND.parent.parent / "docs" / "extending.md").read_text()
    for path in sorted(EXTEND.glob("*.py")):
        assert path.read_text().strip() in page, f"docs/extending.md does not show {path.name} as it is"
