"""Where tensors live and in what precision: ``--device`` and ``--dtype`` as every computing command takes them.

A device is typed as ``auto`` (CUDA when this torch sees a CUDA device, else the CPU), ``cpu``, ``cuda`` (the
current CUDA device) or ``cuda:N``. The typed word is what a run records as asked for; ``resolve`` turns it into
the device the tensors go to, so that the same command line runs on a laptop and on a GPU node. A dtype is
``auto``, ``float32``, ``bfloat16`` or ``float16``; ``auto`` reads a checkpoint in bfloat16 on a GPU that
supports it (as Polynomial Concentration loads its models) and in float32 elsewhere, and trains in float32 on
a CPU and in the budget's own precision on a GPU (bf16 autocast for the papers' full budgets).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attnlab.errors import Error
from attnlab.options import option

if TYPE_CHECKING:
    import torch

DEVICE_HELP = "auto (CUDA when present, else the CPU), cpu, cuda or cuda:N"
DTYPES = ("float32", "bfloat16", "float16")  # torch's names; torch itself is imported when a device is resolved
DTYPE_CHOICES = ("auto", *DTYPES)
PRECISION = {"float32": "fp32", "bfloat16": "bf16"}  # the trainer's autocast names of the dtypes it trains in
_FORM = re.compile(r"auto|cpu|cuda(?::(\d+))?")


class DeviceError(Error, ValueError):
    """A device or dtype that is malformed or not present on this machine; the message says what is."""


def resolve(device: str | torch.device = "auto") -> torch.device:
    """The device ``device`` names on this machine: ``auto`` is the current CUDA device when one is present,
    else the CPU; ``cuda`` and ``cuda:N`` must be present. DeviceError names what is allowed otherwise."""
    import torch

    text = str(device).strip().lower()
    found = _FORM.fullmatch(text)
    if found is None:
        raise DeviceError(f"unknown device {str(device)!r}; use {DEVICE_HELP}")
    if text == "cpu" or (text == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise DeviceError(f"device {text!r} is not available: this torch sees no CUDA device; use --device cpu or auto")
    count = torch.cuda.device_count()
    index = torch.cuda.current_device() if found.group(1) is None else int(found.group(1))
    if index >= count:
        raise DeviceError(
            f"device {text!r} is not available: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}"
        )
    return torch.device("cuda", index)


def device_option(text: str) -> str:
    """``--device`` as typed, checked against this machine before any work; the word is kept (``auto`` stays
    ``auto``, so that a run's recorded command line runs anywhere)."""
    try:
        resolve(text)
    except DeviceError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip().lower()


def checkpoint_dtype(name: str | None, device: str | torch.device) -> torch.dtype:
    """The dtype a checkpoint's weights are read in: ``name``, or for ``auto``/None bfloat16 on a CUDA device
    that supports it and float32 elsewhere."""
    import torch

    if name in (None, "auto"):
        place = resolve(device)
        return torch.bfloat16 if place.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    if name not in DTYPES:
        raise DeviceError(f"unknown dtype {name!r}; use one of {', '.join(DTYPE_CHOICES)}")
    return getattr(torch, name)


def precision(name: str | None, device: str | torch.device, budget: str = "fp32") -> str:
    """The trainer's precision (``fp32`` or ``bf16`` autocast) for ``--dtype name`` on ``device``: float32 on a
    CPU for ``auto``/None, where bf16 autocast is slower and not what the papers ran, and the budget's own
    precision (``budget``) on a GPU; float16 is refused (no loss scaling)."""
    if name in (None, "auto"):
        return budget if resolve(device).type == "cuda" else "fp32"
    if name not in PRECISION:
        raise DeviceError(f"--dtype {name} cannot train; training takes auto, float32 or bfloat16")
    return PRECISION[name]


def model_device(model: torch.nn.Module) -> torch.device:
    """Where a model's inputs go: its input embeddings' device (the first GPU of a model that
    ``device_map="auto"`` spread over several), else its first parameter's."""
    import torch

    try:
        embed = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):  # not a transformers model, or one without token embeddings
        embed = None
    if isinstance(getattr(embed, "weight", None), torch.Tensor):
        return embed.weight.device
    return next(model.parameters(), torch.empty(0)).device


@dataclass(frozen=True, kw_only=True)
class Placement:
    """``--device`` and ``--dtype``, as every computing command and study takes them."""

    device: str = option(
        "auto", DEVICE_HELP + "; auto spreads a checkpoint too large for one GPU over all of them", type=device_option
    )
    dtype: str = option(
        "auto",
        "auto: float32 on a CPU; on a GPU, checkpoints in bfloat16 where supported and training in its budget's "
        "precision (bf16 autocast for the full budgets)",
        choices=DTYPE_CHOICES,
    )

    def __post_init__(self) -> None:
        resolve(self.device)
        if self.dtype not in DTYPE_CHOICES:
            raise DeviceError(f"unknown dtype {self.dtype!r}; use one of {', '.join(DTYPE_CHOICES)}")


def training(run: Any, dtype: str | None, device: str | torch.device) -> Any:
    """The run config ``run`` (``train.config.RunConfig``) in the precision ``--dtype`` gives on ``device``
    (``precision``; the budget's own is the one ``run`` holds)."""
    from dataclasses import replace

    return replace(run, train=replace(run.train, precision=precision(dtype, device, run.train.precision)))


def place(tensor: torch.Tensor, device: str | torch.device, dtype: str | None = "auto") -> torch.Tensor:
    """``tensor`` on ``device``, cast to ``dtype`` when one is named (``auto`` keeps its own): how a command
    moves a score tensor it read from a file to where ``--device`` and ``--dtype`` say."""
    import torch

    if dtype not in (None, "auto") and dtype not in DTYPES:
        raise DeviceError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPE_CHOICES)}")
    cast = tensor.dtype if dtype in (None, "auto") or not tensor.is_floating_point() else getattr(torch, dtype)
    return tensor.to(resolve(device), dtype=cast)
