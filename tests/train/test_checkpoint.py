"""A checkpoint resumes training bit for bit, is never a pickle, and a corrupt or half-written one fails loudly."""

from __future__ import annotations

import errno
import json
import random

import numpy as np
import pytest
import safetensors.torch
import torch
from torch import nn

from attnlab.train import checkpoint as ck
from attnlab.train.checkpoint import (
    CheckpointError,
    capture_rng,
    check_compatible,
    latest_checkpoint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from hostile_json import hostile, one_line


class Tiny(nn.Module):
    """Embedding, a hidden layer with a norm, and an output head tied to the embedding."""

    def __init__(self, vocab=11, dim=6):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.hidden = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.norm(torch.relu(self.hidden(self.embed(tokens)))))


def _optimizer(model):
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and "norm" not in n]
    rest = [p for n, p in model.named_parameters() if not (n.endswith("weight") and "norm" not in n)]
    return torch.optim.AdamW(
        [
            {"params": decay, "name": "decay", "weight_decay": 0.1},
            {"params": rest, "name": "no_decay", "weight_decay": 0.0},
        ],
        lr=1e-2,
        betas=(0.9, 0.95),
    )


def _train(model, optimizer, steps, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        tokens = torch.randint(0, 11, (4, 5), generator=g)
        loss = nn.functional.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def _save(run_dir, step, meta=None, keep=None, model=None):
    model = model or Tiny()
    optimizer = _optimizer(model)
    return save_checkpoint(
        run_dir,
        step,
        model_state=model.state_dict(),
        optimizer_state=optimizer.state_dict(),
        meta=meta or {"step": step},
        rng=capture_rng(),
        keep=keep,
    )


def test_training_resumes_bit_for_bit(tmp_path):
    torch.manual_seed(0)
    model = Tiny()
    optimizer = _optimizer(model)
    _train(model, optimizer, 3, seed=1)
    save_checkpoint(tmp_path, 3, model_state=model.state_dict(), optimizer_state=optimizer.state_dict())

    ckpt = load_checkpoint(tmp_path)
    restored = Tiny()
    restored.load_state_dict(ckpt.model_state)
    restored_optimizer = _optimizer(restored)
    restored_optimizer.load_state_dict(ckpt.optimizer_state)
    assert [g["name"] for g in restored_optimizer.param_groups] == ["decay", "no_decay"]

    _train(model, optimizer, 3, seed=2)
    _train(restored, restored_optimizer, 3, seed=2)
    for (name, a), b in zip(model.state_dict().items(), restored.state_dict().values()):
        assert torch.equal(a, b), name
    with safetensors.torch.safe_open(ckpt.path / ck.OPTIMIZER_FILE, "pt") as f:
        assert f.get_tensor("state.0.step").item() == 3.0  # Adam's step is stored as a tensor


def test_tied_weights_round_trip_and_stay_tied(tmp_path):
    model = Tiny()
    assert model.state_dict()["head.weight"].data_ptr() == model.state_dict()["embed.weight"].data_ptr()
    ckpt = load_checkpoint(_save(tmp_path, 1, model=model))
    restored = Tiny()
    restored.load_state_dict(ckpt.model_state)
    assert restored.head.weight is restored.embed.weight
    assert torch.equal(restored.embed.weight, model.embed.weight)


def test_rng_streams_continue_exactly(tmp_path):
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    np.random.randn()  # odd draws leave a cached Gaussian in both states; it must survive too
    random.gauss(0, 1)
    save_checkpoint(tmp_path, 7, model_state={}, optimizer_state={"state": {}, "param_groups": []}, rng=capture_rng())
    expected = (torch.rand(4), np.random.randn(3), np.random.rand(3), random.gauss(0, 1), random.random())
    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)

    restore_rng(load_checkpoint(tmp_path).rng)
    got = (torch.rand(4), np.random.randn(3), np.random.rand(3), random.gauss(0, 1), random.random())
    assert torch.equal(got[0], expected[0])
    assert np.array_equal(got[1], expected[1]) and np.array_equal(got[2], expected[2])
    assert got[3:] == expected[3:]


def test_layout_meta_and_latest(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    meta = {"config": {"dims": (4, 8)}, "scheduler": {"last_epoch": 3}, "step": 12}
    path = _save(tmp_path, 12, meta=meta)
    assert path == tmp_path / "checkpoints" / "step-00000012" == latest_checkpoint(tmp_path)
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step-00000012\n"
    assert sorted(p.name for p in path.iterdir()) == ["model.safetensors", "optimizer.safetensors", "state.json"]
    for ckpt in (load_checkpoint(tmp_path), load_checkpoint(path)):
        assert ckpt.step == 12 and ckpt.path == path
        assert ckpt.meta == {"config": {"dims": [4, 8]}, "scheduler": {"last_epoch": 3}, "step": 12}


def test_no_file_is_a_pickle(tmp_path):
    path = _save(tmp_path, 1)
    for file in path.iterdir():
        data = file.read_bytes()
        assert not data.startswith((b"\x80", b"PK\x03\x04"))  # a pickle (protocol 2+), a torch.save zip
        if file.suffix == ".safetensors":
            safetensors.torch.load(data)
        else:
            assert file.suffix == ".json"
            json.loads(data)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: f.write_bytes(f.read_bytes()[:-3]), r"model\.safetensors: truncated: \d+ of \d+ bytes"),
        (
            lambda f: f.write_bytes(f.read_bytes()[:-1] + bytes([f.read_bytes()[-1] ^ 1])),
            r"model\.safetensors: sha256 mismatch: the file was changed or corrupted",
        ),
        (lambda f: f.unlink(), r"model\.safetensors: missing"),
    ],
)
def test_damaged_model_file_is_named(tmp_path, damage, message):
    path = _save(tmp_path, 4)
    damage(path / ck.MODEL_FILE)
    with pytest.raises(CheckpointError, match=message) as error:
        load_checkpoint(tmp_path)
    assert str(path) in str(error.value)


def test_truncated_message_gives_both_sizes(tmp_path):
    file = _save(tmp_path, 4) / ck.MODEL_FILE
    size = file.stat().st_size
    file.write_bytes(file.read_bytes()[:-3])
    with pytest.raises(CheckpointError, match=f"truncated: {size - 3} of {size} bytes"):
        load_checkpoint(tmp_path)


def test_damaged_state_json_is_caught(tmp_path):
    state = _save(tmp_path, 4, meta={"lr": 0.5}) / ck.STATE_FILE
    state.write_text(state.read_text().replace('"lr": 0.5', '"lr": 0.6'))  # still valid JSON
    with pytest.raises(CheckpointError, match=r"state\.json: sha256 mismatch"):
        load_checkpoint(tmp_path)
    state.write_text(state.read_text()[:100])
    with pytest.raises(CheckpointError, match=r"state\.json is not valid JSON"):
        load_checkpoint(tmp_path)


def test_bad_paths_and_garbage_latest(tmp_path):
    with pytest.raises(CheckpointError, match="not a checkpoint directory.*allowed: a run directory"):
        load_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="missing; allowed"):
        load_checkpoint(tmp_path / "nowhere")
    _save(tmp_path, 2)
    latest = tmp_path / "checkpoints" / "latest"
    latest.write_bytes(b"\x00\xffgarbage")
    for call in (latest_checkpoint, load_checkpoint):
        with pytest.raises(CheckpointError, match="not a step directory name.*step-00000002"):
            call(tmp_path)
    latest.write_text("step-00000009\n")
    with pytest.raises(CheckpointError, match="names step-00000009, which is missing"):
        load_checkpoint(tmp_path)
    latest.unlink()
    with pytest.raises(CheckpointError, match="no checkpoint yet"):
        load_checkpoint(tmp_path)


def _fail_in_serialiser(monkeypatch):
    calls = []

    def save(tensors, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom inside safetensors")
        return real(tensors, *args, **kwargs)

    real = safetensors.torch.save
    monkeypatch.setattr(safetensors.torch, "save", save)


def _fail_disk_full(monkeypatch):
    def write(path, data):
        if path.name == ck.OPTIMIZER_FILE:
            path.write_bytes(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    real = ck._write_durably
    monkeypatch.setattr(ck, "_write_durably", write)


@pytest.mark.parametrize("fail", [_fail_in_serialiser, _fail_disk_full])
@pytest.mark.parametrize("step", [5, 6])  # replacing the step that exists, or adding a new one
def test_failed_save_leaves_previous_checkpoint(tmp_path, monkeypatch, fail, step):
    _save(tmp_path, 5, meta={"run": "first"})
    fail(monkeypatch)
    with pytest.raises((RuntimeError, OSError)):
        _save(tmp_path, step, meta={"run": "second"})
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step-00000005"]
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.step == 5 and ckpt.meta == {"run": "first"}


def test_saving_a_step_again_replaces_it(tmp_path):
    _save(tmp_path, 5, meta={"run": "first"})
    _save(tmp_path, 5, meta={"run": "second"})
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step-00000005"]
    assert load_checkpoint(tmp_path).meta == {"run": "second"}


def test_keep_prunes_older_steps_only(tmp_path):
    for step in (1, 2, 3, 4):
        _save(tmp_path, step, keep=2)
    names = lambda: sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*"))  # noqa: E731
    assert names() == ["step-00000003", "step-00000004"]
    _save(tmp_path, 2, keep=1)  # resumed from an earlier step: later ones wait to be replaced
    assert names() == ["step-00000002", "step-00000003", "step-00000004"]
    assert latest_checkpoint(tmp_path).name == "step-00000002"
    with pytest.raises(ValueError, match="keep must be an int >= 1"):
        _save(tmp_path, 9, keep=0)


def test_check_compatible_lists_each_differing_field():
    saved = {"d_model": 64, "heads": 4, "dims": [1, 2], "rope": {"base": 10000}, "old": True}
    check_compatible(saved, {"d_model": 64, "heads": 4, "dims": (1, 2), "rope": {"base": 10000}, "old": True})
    current = {"d_model": 128, "heads": 4, "dims": (1, 2), "rope": {"base": 500}, "new": "x"}
    with pytest.raises(CheckpointError) as error:
        check_compatible(saved, current)
    assert str(error.value).splitlines() == [
        "model config differs from the checkpoint's in 4 field(s):",
        "  d_model: saved 64, current 128",
        "  new: saved (absent), current 'x'",
        "  old: saved True, current (absent)",
        "  rope.base: saved 10000, current 500",
    ]
    assert isinstance(error.value, ValueError)


def test_bad_inputs_fail_before_the_disk(tmp_path):
    with pytest.raises(TypeError, match="meta must be JSON-able"):
        _save(tmp_path, 1, meta={"path": tmp_path})
    with pytest.raises(ValueError, match="unknown keys.*allowed: torch, cuda, numpy, python"):
        save_checkpoint(tmp_path, 1, model_state={}, optimizer_state={"state": {}, "param_groups": []}, rng={"jax": 1})
    assert not (tmp_path / "checkpoints").exists()


STATE = {"format": ck.FORMAT, "step": 4, "files": {}, "optimizer": {"state": {}, "param_groups": []}, "meta": {}}


def _signed(data: bytes) -> bytes:
    """``data``, where it is a JSON object, with the sha256 a state.json carries: a hand-made state, not a damaged one."""
    try:
        state = json.loads(data)
    except (ValueError, RecursionError):
        return data
    return ck._dump_state({k: v for k, v in state.items() if k != "sha256"}) if isinstance(state, dict) else data


@pytest.mark.parametrize(("label", "data"), hostile({**STATE, "rng": {}}, "step", "files"))
def test_a_hostile_state_json_is_one_line(tmp_path, label, data):
    step_dir = _save(tmp_path, 4)
    (step_dir / ck.STATE_FILE).write_bytes(_signed(data))
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(tmp_path)
    one_line(caught.value, step_dir, ck.STATE_FILE)


@pytest.mark.parametrize(
    "edit",
    [{"rng": {"torch": 5}}, {"rng": {"mersenne": "abc"}}, {"rng": {"numpy": {"kind": "MT19937"}}}, {"meta": []}],
    ids=str,
)
def test_a_signed_state_json_whose_parts_do_not_decode_is_one_line(tmp_path, edit):
    step_dir = _save(tmp_path, 4)
    state = json.loads((step_dir / ck.STATE_FILE).read_text())
    (step_dir / ck.STATE_FILE).write_bytes(_signed(json.dumps({**state, **edit}).encode()))
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(tmp_path)
    one_line(caught.value, step_dir, ck.STATE_FILE)
    state["optimizer"]["state"] = {"first": {}}
    (step_dir / ck.STATE_FILE).write_bytes(_signed(json.dumps(state).encode()))
    with pytest.raises(CheckpointError, match=r"optimizer.state has keys \['first'\]; allowed: parameter indices"):
        load_checkpoint(tmp_path)
