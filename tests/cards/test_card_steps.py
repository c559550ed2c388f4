"""``attnlab card --no-progress`` names each step of the card in order (on stderr, after the loading lines on stdout),
with its size, then the writing of its files, and within every step the work says how far it is once HEARTBEAT
seconds pass without a line (structure, never timing)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re

import pytest

from attnlab import progress
from attnlab.cards import build as cards
from attnlab.cli import main
from cards.test_card import TINY
from checkpoints import save_checkpoint

ORDER = [
    "trained-model check",
    "b_auto",
    "audit niah",
    "audit induction",
    "substitution",
    "heads",
    "first-token mass",
    "ablation",
    "length",
    "temperature inside the window",
    "temperature past the window",
]
STEP = re.compile(r"card (\d+)/(\d+): ([^:]+): (.+)")


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> list[str]:
    """stdout and stderr, as one log, of a tiny card under --no-progress, with every heartbeat due at once
    (HEARTBEAT = 0)."""
    folder = tmp_path_factory.mktemp("card_steps")
    checkpoint = save_checkpoint(folder / "ckpt")
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        mp.setitem(cards.PLANS, "quick", dataclasses.replace(cards.PLANS["quick"], **TINY))
        mp.setattr(progress, "HEARTBEAT", 0.0)
        assert main(["card", str(checkpoint), "--out", str(folder / "out"), "--no-progress"]) == 0
    return out.getvalue().splitlines()


def _steps(log: list[str]) -> list[tuple[int, re.Match]]:
    return [(i, m) for i, line in enumerate(log) if (m := STEP.fullmatch(line))]


def test_each_step_is_named_once_in_order_after_the_load_and_before_the_summary(log):
    steps = _steps(log)
    assert [m[3] for _, m in steps] == ORDER
    assert [int(m[1]) for _, m in steps] == list(range(1, cards.STEPS + 1))
    assert {int(m[2]) for _, m in steps} == {cards.STEPS} == {len(ORDER)}
    first, last = steps[0][0], steps[-1][0]
    loading = log[:first]
    assert len(loading) == 3 and all(line.startswith("loading ") for line in loading)
    assert " of weights) on cpu in float32; importing transformers' model code" in loading[0]
    assert loading[1].endswith("checking its config and tensor shapes against its architecture")
    assert log[last + 1 :] and not any(STEP.fullmatch(line) for line in log[last + 1 :])
    after = [line for line in log[last + 1 :] if not line.startswith(" ")]
    assert after[0].startswith("writing the card's page, card.json and card.md into ")
    assert after[1].startswith("card of ")


def test_each_step_line_says_what_it_will_read_and_how_much(log):
    said = {m[3]: m[4] for _, m in _steps(log)}
    assert "on the bundled novel's first 256 tokens" in said["trained-model check"]
    assert "512 tokens of generated text, 2 forwards" in said["b_auto"]  # App. B's 1024, cut to the window
    assert said["audit niah"].startswith("2 prompts (pad 2), rows every:16 of 2 x 4 heads")
    assert said["audit induction"].startswith("2 prompts of 64 tokens")
    assert "softmax and 4 recipes" in said["substitution"] and "2 NIAH prompts" in said["substitution"]
    assert said["heads"] == "types of 2 x 4 heads from 2 induction prompts of 64 tokens"
    assert said["first-token mass"] == "2 documents of 64 tokens"
    assert said["ablation"].endswith("K = 2, 4: 8 subsets x 2 NIAH prompts")
    assert "L = 32, 64, past the window at L = 1024" in said["length"]
    assert "2 windows of 64 tokens" in said["temperature inside the window"]
    assert "dynamic-NTK" in said["temperature past the window"]  # 1.25 x the 512-token window is within budget


def test_within_every_step_the_work_says_how_far_it_is(log):
    """With the heartbeat due at once, every step's loops and forwards leave indented lines before the next step:
    none of them runs without a way to speak."""
    bounds = [i for i, _ in _steps(log)]
    ends = [*bounds[1:], next(i for i in range(bounds[-1] + 1, len(log)) if log[i].startswith("writing the card"))]
    for start, end in zip(bounds, ends, strict=True):
        inside = log[start + 1 : end]
        assert inside and all(line.startswith("  ") for line in inside), log[start]
        assert any(" is at layer " in line or re.search(r": \d+/\d+ \w+ in \d+ s$", line) for line in inside)
