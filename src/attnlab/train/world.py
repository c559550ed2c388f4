"""The processes a run trains on: the world torchrun describes (or a world of one), and the reductions of a
step's numbers over it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from attnlab import devices
from attnlab.workers import world_size


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_world(device: str = "auto") -> World:
    """The process group torchrun describes in the environment (gloo on CPU, nccl on CUDA), or a world of
    one when run directly, on ``device`` (``attnlab.devices``): under torchrun a CUDA device is the GPU of
    the process's LOCAL_RANK, so only auto, cpu and cuda are allowed there."""
    size = world_size()
    place = devices.resolve(device)
    if place.type == "cuda":
        if size > 1:
            if str(device).strip().lower() not in ("auto", "cuda"):
                raise devices.DeviceError(
                    f"--device {device} under torchrun: each process trains on the GPU of its LOCAL_RANK; "
                    "use --device auto, cuda or cpu"
                )
            place = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(place)
    if size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if place.type == "cuda" else "gloo")
    return World(int(os.environ.get("RANK", "0")), size, place)


def _max(value: float, world: World) -> float:
    if world.size == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=world.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def _mean(value: float, world: World) -> float:
    if world.size == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=world.device)
    dist.all_reduce(t)
    return float(t) / world.size
