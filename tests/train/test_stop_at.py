"""train.stop_at ends a run early on the full run's schedule: its steps (learning rates, losses) are the full run's
first ones, it is evaluated and saved at the stop, a resumed stopped run trains no further, and a stop outside
[1, train.steps] (or not an int) is refused naming the field and the range."""

from __future__ import annotations

import pytest

from attnlab.model.config import ConfigError
from attnlab.train.config import load
from attnlab.train.metrics import read_metrics
from attnlab.train.trainer import Trainer, train

TINY = [
    "model.context=32",
    "model.layers=2",
    "model.heads=2",
    "model.d_model=32",
    "model.ffn_width=64",
    "data.max_tokens=20000",
    "train.batch=4",
    "train.warmup=2",
    "train.steps=10",
    "train.eval_every=4",
    "train.eval_batches=1",
    "train.checkpoint_every=0",
    "train.tensorboard=false",
]


def _records(out, kind):
    return [r for r in read_metrics(out) if r["kind"] == kind]


def test_a_stopped_run_is_the_full_run_s_first_steps(tmp_path):
    full = train(load(None, TINY), tmp_path / "full", progress=False)
    summary = train(load(None, [*TINY, "train.stop_at=6"]), tmp_path / "stop", progress=False)
    assert full["steps"] == 10 and summary["steps"] == 6
    whole, early = _records(tmp_path / "full", "train"), _records(tmp_path / "stop", "train")
    assert [r["step"] for r in early] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(whole[:6], early, strict=True):
        # the cosine schedule is the 10-step run's, not a 6-step one's
        assert a["lr"] == b["lr"] and a["loss"] == b["loss"]
    assert early[-1]["lr"] > whole[-1]["lr"]
    # evaluated on the cadence and at the stop, with the same numbers as the full run at the shared step
    assert [r["step"] for r in _records(tmp_path / "stop", "eval")] == [4, 6]
    assert _records(tmp_path / "stop", "eval")[0]["val_loss"] == _records(tmp_path / "full", "eval")[0]["val_loss"]
    trainer = Trainer(load(None, [*TINY, "train.stop_at=6"]), tmp_path / "stop", resume=True, progress=False)
    assert trainer.step == 6 and trainer.run() == summary  # saved at the stop: nothing left to train


@pytest.mark.parametrize("bad", ["0", "11", "true", "2.5", "'6'"])
def test_a_stop_outside_the_run_is_refused(bad):
    with pytest.raises(ConfigError, match=r"train\.stop_at must be unset or an int in \[1, train\.steps = 10\]"):
        load(None, [*TINY, f"train.stop_at={bad}"])
