"""The peak-memory probe measures what runs after a reset, not what ran before it; the default thread count leaves
the cores other processes use, and the attnlab command sets threads without importing torch for it."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from attnlab import perf

PROBE = """
import torch
from attnlab.perf import peak_rss, reset_peak_rss
big = torch.ones(64 << 20, dtype=torch.float32)  # 256 MiB, touched
del big
reset, before = reset_peak_rss()
after_reset = peak_rss()
again = torch.ones(32 << 20, dtype=torch.float32)  # 128 MiB
print(int(reset), before, after_reset, peak_rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_reset_peak_forgets_earlier_allocations_and_sees_later_ones():
    # A fresh process: in a long test session freed heap pages stay resident and a new tensor can land on
    # them without raising the resident set at all.
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
    reset, before, after_reset, after = (int(v) for v in out[-4:])
    if not reset:
        pytest.skip("this kernel does not reset the high-water mark")
    assert after_reset < before + (128 << 10)
    assert after >= before + (100 << 10)


@pytest.mark.parametrize(("others", "want"), [(0.0, 2), (1.0, 1), (1.4, 1), (5.0, 1)])
def test_default_threads_leaves_the_cores_others_keep_busy(monkeypatch, others, want):
    monkeypatch.setattr(perf.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(perf.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(perf, "_others_running", lambda: others)
    torch.set_num_threads(2)
    assert perf.default_threads() == want
    torch.set_num_threads(1)  # never more than torch's own count
    assert perf.default_threads() == 1
    monkeypatch.setattr(perf.os, "cpu_count", lambda: 8)  # two of eight cores ours: others spread over all
    torch.set_num_threads(2)
    assert perf.default_threads() == (1 if others > 2 else 2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_others_running_counts_a_spinning_process():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert perf._others_running(samples=15) >= 1
    finally:
        spinner.kill()
        spinner.wait()


def test_set_threads_sets_torch_or_the_environment_before_torch_is_imported():
    assert perf.set_threads(1) == 1 and torch.get_num_threads() == 1
    with pytest.raises(ValueError, match="threads must be an int >= 1, got 0"):
        perf.set_threads(0)
    probe = (
        "import os, sys\nfrom attnlab.perf import set_threads\nset_threads(1)\n"
        "assert 'torch' not in sys.modules\nimport torch\nprint(os.environ['OMP_NUM_THREADS'], "
        "torch.get_num_threads())"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out[-2:] == ["1", "1"]


def test_the_command_takes_threads_and_light_commands_do_not_import_torch():
    probe = (
        "import sys\nfrom attnlab.cli import main\nassert main(['papers', '--threads', '2']) == 0\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out[-1] == "False"
    bad = subprocess.run([sys.executable, "-m", "attnlab", "papers", "--threads", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--threads: must be an integer >= 1, got '0'" in bad.stderr
