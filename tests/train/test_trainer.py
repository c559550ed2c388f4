"""A run trains and logs, a SIGKILLed run (and one resumed inside the release window, with its lower-copy readings)
resumes to the uninterrupted run's weights bit for bit, two
torchrun processes match one, the CSV logs give back the summary, and bad runs (existing output, changed
config, corrupt checkpoint, empty data) stop with clear errors that leave the last good checkpoint intact; a
vector run stops at the first batch under stop_linf without updating on it, and a resumed stopped run trains no
further."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from attnlab import io
from attnlab.model.config import ConfigError
from attnlab.train import checkpoint as ckpt
from attnlab.train.config import load
from attnlab.train.data import DataError
from attnlab.train.metrics import outcome, read_metrics
from attnlab.train.trainer import Trainer, TrainError, train
from hostile_json import hostile, one_line

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "model.context=32",
    "model.layers=2",
    "model.heads=2",
    "model.d_model=32",
    "model.ffn_width=64",
    "data.max_tokens=60000",
    "train.batch=8",
    "train.warmup=2",
    "train.tensorboard=false",
]


def _cfg(*more):
    return load(None, [*TINY, *more])


def _final_weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(ckpt.latest_checkpoint(out) / "model.safetensors")


def _losses(out: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in read_metrics(out) if r["kind"] == "train"]


def test_a_run_learns_and_writes_metrics_probes_and_checkpoints(tmp_path):
    summary = train(
        _cfg("train.steps=40", "train.eval_every=20", "train.checkpoint_every=20", "train.lr=1e-2"),
        tmp_path,
        progress=False,
    )
    losses = [loss for _, loss in _losses(tmp_path)]
    assert len(losses) == 40 and summary["steps"] == 40
    assert sum(losses[-5:]) / 5 < 0.75 * sum(losses[:5]) / 5
    evals = [r for r in read_metrics(tmp_path) if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [20, 40]
    for key in ("val_loss", "val_ppl", "upper_entropy", "lower_copy", "dppl_zero_qk", "ffn_write_rms/1"):
        assert key in evals[-1], key
    for name in ("train.csv", "eval.csv", "summary.json", "config.json"):
        assert (tmp_path / name).is_file()
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*")) == ["step-00000020", "step-00000040"]
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model"]["vocab"] == 257 and saved["data_stream"]["folder"] == "stdlib"


def test_accumulation_and_bf16_train_the_same_batch(tmp_path):
    losses = {}
    for name, more in {"plain": [], "accum": ["train.accum=2"], "bf16": ["train.precision=bf16"]}.items():
        trainer = Trainer(_cfg("train.steps=3", "train.probes=false", *more), tmp_path / name, progress=False)
        losses[name] = [trainer.train_step(s)["loss"] for s in range(3)]
    assert losses["accum"] == pytest.approx(losses["plain"], rel=1e-5)
    assert losses["bf16"] == pytest.approx(losses["plain"], rel=3e-2)
    assert losses["bf16"] != losses["plain"]


def test_the_intervention_slows_upper_qk_until_release(tmp_path):
    train(
        _cfg(
            "train.steps=50",
            "train.eval_every=2",
            "train.probes=false",
            "train.checkpoint_every=0",
            "intervention.upper_qk_lr=0.25",
            "intervention.entropy_floor=0.1",
            "intervention.ramp=0.1",
        ),
        tmp_path,
        progress=False,
    )
    records = [r for r in read_metrics(tmp_path) if r["kind"] == "train"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    released = summary["released_at"]
    assert summary["release_reason"] in ("rule", "forced") and 2 <= released <= 6  # earliest 3%, forced 12% of 50
    before = [r for r in records if r["step"] <= released]
    assert all(r["upper_qk_lr_multiplier"] == 0.25 and r["entropy_floor"] == 0.1 for r in before)
    assert all(0 < r["upper_entropy"] <= 1 for r in before)
    assert records[-1]["upper_qk_lr_multiplier"] == 1.0 and "entropy_floor" not in records[-1]
    assert outcome(tmp_path) == {k: summary[k] for k in ("steps", "loss", "val_loss", "val_ppl", "released_at")}


def _cli(out: Path, *more: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "attnlab",
        "train",
        "--no-progress",
        "--out",
        str(out),
        *(f"--set={s}" for s in [*TINY, *more]),
    ]


KILL = [
    "train.steps=400",
    "train.eval_every=50",
    "train.probes=false",
    "train.checkpoint_every=20",
    "model.d_model=16",
    "model.ffn_width=32",
    "model.dropout=0.1",
]


def test_resuming_a_finished_run_keeps_its_summary(tmp_path):
    cfg = _cfg("train.steps=4", "train.eval_every=2", "train.checkpoint_every=2")
    first = train(cfg, tmp_path, progress=False)
    assert first["val_loss"] is not None
    again = Trainer(cfg, tmp_path, resume=True, progress=False).run()
    assert again == first == json.loads((tmp_path / "summary.json").read_text())
    assert outcome(tmp_path) == {**{k: first[k] for k in ("steps", "loss", "val_loss", "val_ppl")}, "released_at": None}
    assert len(_losses(tmp_path)) == 4


def test_a_killed_run_resumes_to_the_uninterrupted_weights_bit_for_bit(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    subprocess.run(_cli(whole, *KILL), check=True, env=env, capture_output=True)
    proc = subprocess.Popen(_cli(killed, *KILL), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latest = killed / "checkpoints" / "latest"
    deadline = time.time() + 120
    while time.time() < deadline and not (latest.is_file() and latest.read_text().strip() >= "step-00000040"):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run ended before it could be killed"
    stopped = ckpt.load_checkpoint(killed).step
    assert 40 <= stopped < 400
    subprocess.run([*_cli(killed, *KILL), "--resume"], check=True, env=env, capture_output=True)
    a, b = _final_weights(whole), _final_weights(killed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert _losses(killed) == _losses(whole)


def test_two_torchrun_processes_match_one(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = ["train.steps=6", "train.eval_every=6", "train.probes=false", "train.checkpoint_every=0"]
    subprocess.run(_cli(tmp_path / "one", *run), check=True, env=env, capture_output=True)
    two = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "attnlab",
        *_cli(tmp_path / "two", *run)[3:],
    ]
    done = subprocess.run(two, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    one, pair = _losses(tmp_path / "one"), _losses(tmp_path / "two")
    assert [s for s, _ in one] == [s for s, _ in pair] == list(range(1, 7))
    assert [v for _, v in pair] == pytest.approx([v for _, v in one], rel=1e-4)
    assert json.loads((tmp_path / "two" / "summary.json").read_text())["world_size"] == 2


def test_an_existing_run_is_never_overwritten_without_resume(tmp_path):
    train(_cfg("train.steps=2", "train.probes=false"), tmp_path, progress=False)
    with pytest.raises(TrainError, match="already holds a run .* pass --resume"):
        Trainer(_cfg("train.steps=2", "train.probes=false"), tmp_path, progress=False)


def test_a_fresh_run_refuses_an_earlier_runs_files_unless_told_to_start_clean(tmp_path):
    """A run killed before its first checkpoint left metrics.jsonl (listed in its folder's marker); a user's
    notes.txt beside it is no run at all: the folder is refused, and --overwrite clears only the run's own files.
    Without the marker nothing tells the two apart, and the folder is refused even with --overwrite."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"kind": "train", "step": 1, "loss": 9.0}\n')
    (out / "notes.txt").write_text("mine\n")
    with pytest.raises(io.OutputError, match=r"holds files that train did not write \(metrics.jsonl, notes.txt\)"):
        Trainer(_cfg("train.steps=2"), out, overwrite=True)
    (out / "metrics.jsonl").unlink()
    io.claim(out)
    io.record(out, "metrics.jsonl")
    (out / "metrics.jsonl").write_text('{"kind": "train", "step": 1, "loss": 9.0}\n')
    with pytest.raises(TrainError, match=r"already holds metrics.jsonl; pass --resume to continue it, --overwrite"):
        Trainer(_cfg("train.steps=2"), out)
    summary = train(_cfg("train.steps=2", "train.checkpoint_every=2"), out, overwrite=True)
    assert summary["steps"] == 2 and [r["step"] for r in read_metrics(out) if r["kind"] == "train"] == [1, 2]
    assert (out / "notes.txt").read_text() == "mine\n"
    with pytest.raises(TrainError, match="--resume continues the run in --out and --overwrite discards it"):
        Trainer(_cfg("train.steps=2"), out, resume=True, overwrite=True)


def test_a_torn_last_metrics_line_is_dropped_and_a_bad_inner_line_named(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    good = '{"kind": "train", "step": 1, "loss": 9.0}\n'
    (out / "metrics.jsonl").write_text(good + '{"kind": "train", "st')
    assert [r["step"] for r in read_metrics(out)] == [1]
    (out / "metrics.jsonl").write_text(good + "garbage\n" + good)
    with pytest.raises(TrainError, match=r"metrics.jsonl, line 2 is not valid JSON"):
        read_metrics(out)


def test_a_killed_saves_half_written_checkpoint_is_removed_on_the_next_start(tmp_path):
    out = tmp_path / "run"
    cfg = _cfg("train.steps=2", "train.checkpoint_every=2")
    train(cfg, out)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = out / "checkpoints" / f".step-00000004.tmp-{int(dead.stdout)}-0a1b2c3d"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"half")
    train(cfg, out, resume=True)
    assert not stale.exists() and ckpt.latest_checkpoint(out).name == "step-00000002"


def test_resuming_with_another_config_names_the_fields(tmp_path):
    train(_cfg("train.steps=2", "train.probes=false"), tmp_path, progress=False)
    with pytest.raises(ckpt.CheckpointError, match=r"model.d_model.*32.*48"):
        Trainer(_cfg("train.steps=4", "train.probes=false", "model.d_model=48"), tmp_path, resume=True, progress=False)


def test_a_checkpoint_saved_before_a_field_existed_resumes_under_its_default_only():
    from attnlab.train.resume import _check_resumable

    now = _cfg("train.steps=2").to_dict()
    older = json.loads(json.dumps(now))
    del older["model"]["rope_type"], older["model"]["readout"]
    _check_resumable(older, now)
    changed = _cfg("train.steps=2", "model.rope_type=llama3", "model.rope_scaling=4").to_dict()
    with pytest.raises(ckpt.CheckpointError, match=r"model.rope_type: saved \(absent\), current 'llama3'"):
        _check_resumable(older, changed)


def test_a_corrupt_checkpoint_stops_the_resume_and_stays_for_inspection(tmp_path):
    train(_cfg("train.steps=2", "train.probes=false"), tmp_path, progress=False)
    weights = ckpt.latest_checkpoint(tmp_path) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-10])
    with pytest.raises(ckpt.CheckpointError, match="model.safetensors: truncated"):
        Trainer(_cfg("train.steps=4", "train.probes=false"), tmp_path, resume=True, progress=False)


def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    trainer = Trainer(_cfg("train.steps=4", "train.probes=false", "train.checkpoint_every=2"), tmp_path, progress=False)
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        return saver(*args, **kwargs)

    saver = ckpt.save_checkpoint
    monkeypatch.setattr(ckpt, "save_checkpoint", failing)
    with pytest.raises(OSError, match="No space left"):
        trainer.run()
    assert ckpt.load_checkpoint(tmp_path).step == 2


def test_an_empty_data_folder_is_a_clear_error(tmp_path):
    (tmp_path / "data").mkdir()
    with pytest.raises(DataError, match="has no regular files matching"):
        Trainer(_cfg(f"data.folder={tmp_path / 'data'}"), tmp_path / "run", progress=False)


def test_a_vocab_smaller_than_the_stream_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"model.vocab \(100\) is smaller than the stream's vocabulary \(257\)"):
        Trainer(_cfg("model.vocab=100"), tmp_path, progress=False)


def test_batch_must_split_over_accumulation_and_processes():
    with pytest.raises(ConfigError, match=r"train.batch \(8\) must be a multiple of train.accum \(3\)"):
        _cfg("train.accum=3")


def test_the_cli_trains_the_tiny_example_and_reports_bad_configs(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnlab",
            "train",
            str(REPO / "examples" / "tiny.yaml"),
            "--set",
            "train.steps=3",
            "--set",
            "train.eval_every=3",
            "--no-progress",
            "--out",
            str(tmp_path / "tiny"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "training 4-layer 128-wide decoder" in out.stdout and "val_ppl=" in out.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnlab",
            "train",
            str(REPO / "examples" / "tiny.yaml"),
            "--set",
            "train.precision=fp8",
            "--out",
            str(tmp_path / "bad"),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1
    assert "train.precision must be one of fp32, bf16, got 'fp8'" in bad.stderr and "Traceback" not in bad.stderr


class _Averaging:
    """Seed 004's trigger-conditional averaging task in miniature (§3.2): BOS, a trigger at a random
    position j >= 3, and at the trigger the mean of the tokens before it as target."""

    vocab_size = 0

    def __init__(self, dim: int, length: int, seed: int = 0) -> None:
        self.dim, self.length, self.seed = dim, length, seed

    def _batch(self, rows: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        x = torch.rand(rows, self.length, self.dim, generator=g) * 2 - 1
        x[..., :2], x[..., -1] = 0.0, 1.0
        x[:, 0] = torch.nn.functional.one_hot(torch.tensor(0), self.dim).float()
        y = torch.zeros_like(x)
        for r in range(rows):
            j = int(torch.randint(2, self.length, (1,), generator=g))
            x[r, j] = torch.nn.functional.one_hot(torch.tensor(1), self.dim).float()
            y[r, j] = x[r, 1:j].mean(0)
        return x, y

    def train_batch(self, step, batch, rank=0, world=1):
        x, y = self._batch(batch, self.seed * 100_003 + step)
        rows = slice(rank * batch // world, (rank + 1) * batch // world)
        return x[rows], y[rows]

    def val_batches(self, batch, n_batches=None, rank=0, world=1):
        return [self._batch(batch, -1 - i) for i in range(n_batches or 1)]

    def describe(self):
        return {"task": "trigger averaging", "dim": self.dim, "length": self.length}


VECTORS = [
    "model.inputs=vectors",
    "model.context=12",
    "model.d_model=8",
    "model.layers=1",
    "model.heads=1",
    "model.positions=none",
    "model.ffn=none",
    "model.norm=none",
    "model.residual=false",
    "model.bias=false",
    "model.rowmap=reluattn",
    "train.lr=3e-2",
    "train.warmup=1",
    "train.tensorboard=false",
]


def test_a_vector_stream_trains_the_seed_004_model_with_eval_hooks(tmp_path):
    cfg = load(None, [*VECTORS, "train.steps=100", "train.eval_every=50"])
    seen = lambda trainer: {"steps_seen": float(trainer.step)}  # noqa: E731
    summary = Trainer(cfg, tmp_path, stream=_Averaging(8, 12), eval_hooks=[seen], progress=False).run()
    losses = [loss for _, loss in _losses(tmp_path)]
    assert summary["val_loss"] < 0.6 * losses[0]
    evals = [r for r in read_metrics(tmp_path) if r["kind"] == "eval"]
    assert [r["steps_seen"] for r in evals] == [50.0, 100.0] and "val_ppl" not in evals[0]
    with pytest.raises(ConfigError, match="needs model.inputs tokens"):
        Trainer(
            load(None, [*VECTORS, "intervention.upper_qk_lr=0.25"]),
            tmp_path / "x",
            stream=_Averaging(8, 12),
            progress=False,
        )


def _batch_linf(model, x, y) -> float:
    """The l-inf loss by hand: the largest per-position l2 error, in plain loops."""
    with torch.no_grad():
        out = model(x)
    return max(
        float(torch.sqrt(((out[r, i] - y[r, i]) ** 2).sum())) for r in range(x.shape[0]) for i in range(x.shape[1])
    )


def test_stop_linf_stops_at_the_first_batch_under_it_without_updating(tmp_path):
    # a constant lr, so that a shorter plain run takes the same steps
    const = [*VECTORS, "train.min_lr=3e-2", "train.eval_every=40", "train.batch=16"]
    cfg = load(None, [*const, "train.steps=120", "train.checkpoint_every=25"])
    stream = _Averaging(8, 12)
    Trainer(cfg, tmp_path / "ref", stream=stream, progress=False).run()
    ref = [r for r in read_metrics(tmp_path / "ref") if r["kind"] == "train"]
    # a threshold the reference run's batches first pass somewhere in the middle of the run
    threshold = min(r["linf"] for r in ref[30:60]) * (1 + 1e-6)
    first = next(i for i, r in enumerate(ref) if r["linf"] < threshold)  # 0-based index of the batch
    assert 30 <= first < 60

    summary = Trainer(cfg, tmp_path / "stop", stream=stream, progress=False, stop_linf=threshold).run()
    assert summary["stopped"] and summary["steps"] == first and summary["stop_linf"] == threshold
    assert summary["stop_batch_linf"] == pytest.approx(ref[first]["linf"])
    assert [r["step"] for r in read_metrics(tmp_path / "stop") if r["kind"] == "train"] == list(range(1, first + 1))
    # the saved model met the rule on batch `first` and is the plain run of exactly `first` updates
    plain = Trainer(load(None, [*const, f"train.steps={first}"]), tmp_path / "plain", stream=stream, progress=False)
    plain.run()
    stopped = _final_weights(tmp_path / "stop")
    assert all(torch.equal(stopped[k], v) for k, v in plain.model.state_dict().items())
    assert _batch_linf(plain.model, *stream.train_batch(first, 16)) < threshold

    # resumed, with or without its summary (a kill after the last save), the run trains no further
    again = Trainer(cfg, tmp_path / "stop", resume=True, stream=stream, progress=False, stop_linf=threshold).run()
    assert again == summary
    (tmp_path / "stop" / "summary.json").unlink()
    resumed = Trainer(cfg, tmp_path / "stop", resume=True, stream=stream, progress=False, stop_linf=threshold)
    assert resumed.run()["steps"] == first and resumed.stopped["step"] == first
    assert len([r for r in read_metrics(tmp_path / "stop") if r["kind"] == "train"]) == first
    with pytest.raises(TrainError, match=r"trained with stop_linf .* and this run asks None"):
        Trainer(cfg, tmp_path / "stop", resume=True, stream=stream, progress=False)


@pytest.mark.parametrize("value", [0.0, -1.0, float("inf"), True, "0.01"])
def test_a_bad_stop_linf_is_named(tmp_path, value):
    with pytest.raises(ConfigError, match="stop_linf must be None or a finite number > 0"):
        Trainer(load(None, VECTORS), tmp_path, stream=_Averaging(8, 12), progress=False, stop_linf=value)


def test_stop_linf_needs_a_vector_stream(tmp_path):
    with pytest.raises(ConfigError, match="with inputs 'tokens'"):
        Trainer(_cfg(), tmp_path, progress=False, stop_linf=1e-2)


def test_a_run_resumed_inside_the_release_window_reads_and_releases_as_the_uninterrupted_one(tmp_path):
    # readings every 2 steps up to the forced 12; the run resumes from step 4, before its release
    more = (
        "train.steps=100",
        "train.eval_every=50",
        "train.probes=false",
        "train.checkpoint_every=4",
        "train.keep=100",
        "intervention.upper_qk_lr=0.25",
        "intervention.score=excess",
        "intervention.score_every=0.02",
    )
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    first = train(_cfg(*more), whole, progress=False)
    train(_cfg(*more), cut, progress=False)
    for step, folder in ckpt.step_dirs(cut).items():
        if step > 4:
            io.remove(folder)
    (cut / ckpt.CHECKPOINTS / ckpt.LATEST).write_text(ckpt.step_dir_name(4))
    again = Trainer(_cfg(*more), cut, resume=True, progress=False).run()
    readings = [r for r in read_metrics(whole) if r["kind"] == "copy"]
    assert [r["step"] for r in readings] == list(range(2, 13, 2))
    assert readings == [r for r in read_metrics(cut) if r["kind"] == "copy"]
    assert again["released_at"] == first["released_at"] and first["release_reason"] in ("rule", "forced")
    a, b = _final_weights(whole), _final_weights(cut)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert _losses(cut) == _losses(whole)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished two-step run: its config and folder."""
    cfg = _cfg(
        "train.steps=2", "train.eval_every=2", "train.eval_batches=1", "train.probes=false", "data.max_tokens=8000"
    )
    out = tmp_path_factory.mktemp("finished") / "run"
    train(cfg, out, progress=False)
    return cfg, out


@pytest.mark.parametrize(("label", "data"), hostile({"steps": 2, "loss": 1.0, "warnings": []}, "steps", "steps"))
def test_a_hostile_summary_of_a_finished_run_is_written_anew(finished, tmp_path, label, data):
    """A resumed run with no step left keeps its summary.json; one that does not read back is written anew, as after
    a kill between the last save and the summary (the run's own file: its marker lists it)."""
    cfg, run = finished
    out = tmp_path / "run"
    shutil.copytree(run, out)
    (out / "summary.json").write_bytes(data)
    summary = Trainer(cfg, out, resume=True, progress=False).run()
    assert summary["steps"] == 2 and json.loads((out / "summary.json").read_text()) == summary


@pytest.mark.parametrize(("label", "data"), hostile({"kind": "train", "step": 2, "loss": 1.0}, "step", "kind"))
def test_a_hostile_metrics_line_is_one_line_naming_it(tmp_path, label, data):
    (tmp_path / "metrics.jsonl").write_bytes(b'{"kind": "train", "step": 1}\n' + data + b"\n")
    with pytest.raises(TrainError) as caught:
        read_metrics(tmp_path)
    one_line(caught.value, tmp_path / "metrics.jsonl", "line 2")
