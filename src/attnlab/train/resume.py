"""The folder a run writes and the checkpoint it resumes: which files a fresh run refuses to mix with, whether a
folder holds a run to continue, and which config may resume a saved one.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from attnlab.model.config import ModelConfig
from attnlab.readback import ReadBackError, parse_object
from attnlab.train import checkpoint as ckpt
from attnlab.train.config import SECTIONS

# Fields that change nothing a step computes, so a resumed run may differ in them.
RESUMABLE_CHANGES = {"train.checkpoint_every", "train.keep", "train.tensorboard", "train.probes"}
# What a run writes into its folder: a fresh run refuses a folder holding any of them, and --overwrite deletes
# those of them that the folder's marker lists (``io.clear``).
RUN_FILES = (
    "config.json",
    "metrics.jsonl",
    "train.csv",
    "eval.csv",
    "copy.csv",
    "summary.json",
    ckpt.CHECKPOINTS,
    "tensorboard",
)


def _is_run(folder: Path) -> bool:
    """Whether ``folder`` holds a run the trainer started: its config.json, which the trainer writes before the
    first step, with the data stream it records. One that does not read back (``readback.parse_object``) tells no
    run: the folder is then refused as a user's, never continued nor cleared on its word."""
    try:
        written = parse_object((folder / "config.json").read_bytes(), folder / "config.json")
    except (OSError, ReadBackError):
        return False
    return isinstance(written.get("data_stream"), dict)


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    return {f"{section}.{key}": value for section, table in config.items() for key, value in table.items()}


def _field_defaults() -> dict[str, Any]:
    """Every run-config field that has a default, flat ("model.readout": "stream")."""
    return {
        f"{section}.{f.name}": f.default
        for section, cls in {"model": ModelConfig, **SECTIONS}.items()
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING
    }


def _check_resumable(saved: dict[str, Any], current: dict[str, Any]) -> None:
    # A checkpoint saved before a field existed ran as that field's default does (a new field's default keeps
    # the old behaviour), so its absence matches the default and nothing else.
    defaults = _field_defaults()
    keep = {k: v for k, v in _flat(saved).items() if k not in RESUMABLE_CHANGES}
    now = {k: v for k, v in _flat(current).items() if k not in RESUMABLE_CHANGES}
    for key, value in now.items():
        if key not in keep and key in defaults and value == defaults[key]:
            keep[key] = value
    ckpt.check_compatible(keep, now, what="run config")
