"""The peak-memory probe measures what runs after a reset, not what ran before it."""

from __future__ import annotations

import sys

import pytest
import torch

from attnlab.perf import peak_rss, reset_peak_rss


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_reset_peak_forgets_earlier_allocations_and_sees_later_ones():
    big = torch.ones(64 << 20, dtype=torch.float32)  # 256 MiB, touched
    del big
    reset, before = reset_peak_rss()
    if not reset:
        pytest.skip("this kernel does not reset the high-water mark")
    assert peak_rss() < before + (128 << 10)
    again = torch.ones(32 << 20, dtype=torch.float32)  # 128 MiB
    assert peak_rss() >= before + (100 << 10)
    del again
