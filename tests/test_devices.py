"""--device and --dtype mean the same on every command: auto is CUDA when present, a device that is not here or
not spelled right fails in one line naming what is allowed, and the dtype rules for reading and training hold
on a CPU and (torch.cuda stubbed) on a machine with GPUs."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest
import torch

from attnlab import devices
from attnlab.devices import DeviceError, Placement


@pytest.fixture
def two_gpus(monkeypatch):
    """torch.cuda as a machine with two bf16-capable GPUs shows it: what resolve and the dtype rules read."""
    for name, value in {
        "is_available": lambda: True,
        "device_count": lambda: 2,
        "current_device": lambda: 0,
        "is_bf16_supported": lambda: True,
    }.items():
        monkeypatch.setattr(torch.cuda, name, value)


@pytest.mark.parametrize("typed", ["auto", "cpu", " CPU ", "Auto"])
def test_auto_and_cpu_are_the_cpu_here(typed):
    assert devices.resolve(typed) == torch.device("cpu")
    assert devices.device_option(typed) == typed.strip().lower()


@pytest.mark.parametrize(
    "typed, match",
    [
        ("mps", r"unknown device 'mps'; use auto \(CUDA when present, else the CPU\), cpu, cuda or cuda:N"),
        ("cuda:x", "unknown device 'cuda:x'"),
        ("gpu", "unknown device 'gpu'"),
        ("cuda", "device 'cuda' is not available: this torch sees no CUDA device; use --device cpu or auto"),
        ("cuda:0", "device 'cuda:0' is not available: this torch sees no CUDA device"),
    ],
)
def test_a_device_not_here_or_not_spelled_right_is_one_line(typed, match):
    with pytest.raises(DeviceError, match=match):
        devices.resolve(typed)
    with pytest.raises(argparse.ArgumentTypeError, match=match):
        devices.device_option(typed)
    with pytest.raises(DeviceError, match=match):
        Placement(device=typed)


def test_on_a_machine_with_two_gpus_auto_is_the_current_one_and_a_third_is_refused(two_gpus):
    assert devices.resolve("auto") == torch.device("cuda", 0)
    assert devices.resolve("cuda") == torch.device("cuda", 0)
    assert devices.resolve("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DeviceError, match=r"this machine has 2 CUDA device\(s\), cuda:0 to cuda:1"):
        devices.resolve("cuda:2")
    assert devices.resolve("cpu") == torch.device("cpu")


def test_checkpoints_read_in_float32_on_a_cpu_and_bfloat16_on_a_gpu_unless_named(two_gpus):
    assert devices.checkpoint_dtype("auto", "cpu") == torch.float32
    assert devices.checkpoint_dtype(None, "auto") == torch.bfloat16
    assert devices.checkpoint_dtype("auto", "cuda:1") == torch.bfloat16
    assert devices.checkpoint_dtype("float16", "cpu") == torch.float16
    with pytest.raises(DeviceError, match="unknown dtype 'float64'; use one of auto, float32, bfloat16, float16"):
        devices.checkpoint_dtype("float64", "cpu")


def test_training_takes_float32_on_a_cpu_and_the_budgets_precision_on_a_gpu(two_gpus):
    assert devices.precision("auto", "cpu", "bf16") == "fp32"
    assert devices.precision("auto", "auto", "bf16") == "bf16"
    assert devices.precision("auto", "cuda:0", "fp32") == "fp32"
    assert devices.precision("bfloat16", "cpu", "fp32") == "bf16"
    assert devices.precision("float32", "cuda", "bf16") == "fp32"
    with pytest.raises(DeviceError, match="--dtype float16 cannot train; training takes auto, float32 or bfloat16"):
        devices.precision("float16", "cuda")


def test_training_rewrites_only_the_precision_of_a_run_config():
    from attnlab.train.config import RunConfig

    run = RunConfig.from_dict(
        {"model": {"layers": 1, "d_model": 8, "heads": 2, "context": 8, "vocab": 16}, "train": {"precision": "bf16"}}
    )
    here = devices.training(run, "auto", "cpu")
    assert here.train.precision == "fp32" and here.model == run.model and here.train.steps == run.train.steps
    assert devices.training(run, "bfloat16", "cpu").train.precision == "bf16"


def test_place_moves_and_casts_floats_only():
    scores, mask = torch.randn(2, 3, dtype=torch.float64), torch.ones(2, 3, dtype=torch.bool)
    assert devices.place(scores, "auto").dtype == torch.float64
    assert devices.place(scores, "cpu", "bfloat16").dtype == torch.bfloat16
    assert devices.place(mask, "cpu", "float32").dtype == torch.bool
    with pytest.raises(DeviceError, match="unknown dtype 'half'"):
        devices.place(scores, "cpu", "half")


def test_model_device_is_where_the_inputs_go():
    from attnlab.model.decoder import Decoder
    from attnlab.train.config import RunConfig

    decoder = Decoder(
        RunConfig.from_dict({"model": {"layers": 1, "d_model": 8, "heads": 2, "context": 8, "vocab": 16}}).model
    )
    assert devices.model_device(decoder) == torch.device("cpu")
    embedded = SimpleNamespace(get_input_embeddings=lambda: SimpleNamespace(weight=torch.empty(1, device="meta")))
    assert devices.model_device(embedded) == torch.device("meta")
    assert devices.model_device(torch.nn.Module()) == torch.device("cpu")


def test_placement_refuses_an_unknown_dtype():
    with pytest.raises(DeviceError, match="unknown dtype 'float64'"):
        Placement(dtype="float64")
