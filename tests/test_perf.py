"""The peak-memory probe measures what runs after a reset, not what ran before it."""

from __future__ import annotations

import subprocess
import sys

import pytest


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
