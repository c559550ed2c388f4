"""Training checkpoints: safetensors plus JSON (never pickles), written atomically and verified on load.

Layout under a run directory::

    checkpoints/step-00000123/model.safetensors      the model's state_dict
                              optimizer.safetensors  every tensor of the optimizer's per-parameter state,
                                                     named ``state.<param index>.<name>`` (Adam's ``step`` too)
                              state.json             param groups, non-tensor optimizer state, meta, RNG
                                                     states, and a manifest (bytes and sha256 of each file)
    checkpoints/latest                               the name of the newest complete step directory

A save writes a hidden sibling (``.step-00000123.tmp-<pid>-XXXXXXXX``), flushes it to disk and renames it into
place before ``latest`` moves, so a crash or an error at any point leaves the previous checkpoint and
``latest`` as they were. A load checks every file against the manifest before it parses anything.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch
from safetensors import SafetensorError

from attnlab.errors import ArgumentError, ArgumentTypeError, Error
from attnlab.io import check_links, fsync_dir, record, remove_stale, swap_in, write_text
from attnlab.readback import ReadBackError, check, parse_object

FORMAT = "attnlab-checkpoint/1"
CHECKPOINTS = "checkpoints"
LATEST = "latest"
TMP = ".tmp-"  # a save in progress: .step-NNNNNNNN.tmp-<pid>-XXXXXXXX
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "state.json"
STEP_DIR = re.compile(r"step-(\d{8,})")
ALLOWED_PATHS = "a run directory with checkpoints/latest or a checkpoints/step-NNNNNNNN directory"
_OPTIMIZER_KEY = re.compile(r"state\.(\d+)\.(.+)")


class CheckpointError(Error, ValueError):
    """A checkpoint that is missing, incomplete, corrupted, or does not fit what loads it."""


@dataclass(frozen=True)
class Checkpoint:
    """One loaded checkpoint, every file verified against its manifest."""

    path: Path  # the step directory
    step: int
    model_state: dict[str, torch.Tensor]  # for ``Module.load_state_dict``
    optimizer_state: dict[str, Any]  # for ``Optimizer.load_state_dict`` (tuples in param groups read back as lists)
    meta: dict[str, Any]  # as it reads back from JSON
    rng: dict[str, Any]  # for ``restore_rng``


@dataclass(frozen=True)
class _File:
    """A manifest entry of state.json (``_describe``)."""

    bytes: int
    sha256: str


@dataclass(frozen=True)
class _Optimizer:
    """state.json's optimizer: the non-tensor state by parameter index, and the param groups."""

    state: dict[str, dict[str, Any]]
    param_groups: list[dict[str, Any]]


@dataclass(frozen=True)
class _State:
    """What state.json holds (``save_checkpoint``), as ``_read_state`` checks it (``readback.check``)."""

    format: str
    step: int
    files: dict[str, _File]
    optimizer: _Optimizer
    meta: dict[str, Any]
    rng: dict[str, Any]  # ``_encode_rng``'s keys; their values are checked as they are decoded (``_decode_rng``)


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def remove_stale_saves(run_dir: str | os.PathLike) -> list[Path]:
    """The half-written saves of a process killed while saving (never a checkpoint: ``latest`` points
    only at complete ones)."""
    return remove_stale(Path(run_dir) / CHECKPOINTS, TMP, f".step-*{TMP}*")


# ---------------------------------------------------------------------------------------------- saving


def save_checkpoint(
    run_dir: str | os.PathLike,
    step: int,
    *,
    model_state: Mapping[str, torch.Tensor],
    optimizer_state: Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
    rng: Mapping[str, Any] | None = None,
    keep: int | None = None,
) -> Path:
    """Save ``run_dir/checkpoints/step-NNNNNNNN``, point ``checkpoints/latest`` at it, and return its path.

    ``meta`` must be JSON-able; ``rng`` is ``capture_rng()``'s dict (any of its keys). Everything is
    serialised in memory first, so a bad input fails before the disk is touched. Saving a step that exists
    writes the new directory in full, then swaps it in (a crash between the two renames leaves the old one
    at ``.step-NNNNNNNN.old-XXXXXXXX``). ``keep`` then prunes all but the newest ``keep`` step directories
    at or below ``step``; ones above it (a run resumed from an earlier checkpoint) are left for the run to
    replace as it gets there. ``keep=None`` keeps every checkpoint. ``checkpoints`` is listed in the run folder's
    marker before it is made (``io.record``), and refused if it is a symbolic link (``io.check_links``).
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ArgumentError(f"step must be an int >= 0, got {step!r}")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise ArgumentError(f"keep must be an int >= 1 or None (keep all), got {keep!r}")
    optimizer_tensors, optimizer_json = _split_optimizer_state(optimizer_state)
    blobs = {
        MODEL_FILE: safetensors.torch.save(_saveable(model_state, "model_state")),
        OPTIMIZER_FILE: safetensors.torch.save(_saveable(optimizer_tensors, "optimizer_state")),
    }
    state = {
        "format": FORMAT,
        "step": step,
        "files": {name: _describe(data) for name, data in blobs.items()},
        "optimizer": optimizer_json,
        "meta": _as_json(dict(meta or {}), "meta"),
        "rng": _encode_rng(rng or {}),
    }
    blobs[STATE_FILE] = _dump_state(state)

    root = Path(run_dir) / CHECKPOINTS
    check_links(root)
    record(run_dir, CHECKPOINTS)
    root.mkdir(parents=True, exist_ok=True)
    final = root / step_dir_name(step)
    tmp = root / f".{final.name}{TMP}{os.getpid()}-{secrets.token_hex(4)}"  # the pid: io.remove_stale
    tmp.mkdir()
    try:
        for name, data in blobs.items():
            _write_durably(tmp / name, data)
        fsync_dir(tmp)
        swap_in(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    write_text(root / LATEST, final.name + "\n")
    if keep is not None:
        _prune(root, step, keep)
    return final


def _saveable(tensors: Mapping[str, Any], what: str) -> dict[str, torch.Tensor]:
    """``tensors`` detached, on the CPU, contiguous, and none sharing storage with another.

    Tied weights are two names over one storage, which safetensors refuses; a copy of the second name is
    enough, since ``load_state_dict`` copies both into the one tied parameter.
    """
    out, seen = {}, set()
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise ArgumentTypeError(f"{what}[{name!r}] is a {type(tensor).__name__}; allowed: tensors only")
        tensor = tensor.detach().cpu().contiguous()
        storage = tensor.untyped_storage().data_ptr()
        if storage in seen:
            tensor = tensor.clone()
        seen.add(storage)
        out[name] = tensor
    return out


def _split_optimizer_state(optimizer_state: Mapping[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The tensors of ``Optimizer.state_dict()``, as ``state.<index>.<name>``, and everything else as JSON."""
    tensors, plain = {}, {}
    for index, entries in optimizer_state["state"].items():
        if isinstance(index, bool) or not isinstance(index, int):
            raise ArgumentTypeError(
                f"optimizer_state['state'] key {index!r}: allowed: int parameter indices, "
                "as Optimizer.state_dict() gives"
            )
        plain[str(index)] = {}
        for name, value in entries.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{index}.{name}"] = value
            else:
                plain[str(index)][name] = value
    return tensors, {
        "param_groups": _as_json(optimizer_state["param_groups"], "optimizer_state['param_groups']"),
        "state": _as_json(plain, "optimizer_state['state'] (its non-tensor values)"),
    }


def _as_json(value: Any, what: str) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, keys strings), so digests and comparisons
    see what a load will see."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as error:
        raise ArgumentTypeError(f"{what} must be JSON-able (dicts, lists, str, numbers, bool, None): {error}") from None


def _describe(data: bytes) -> dict[str, Any]:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _json_digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _dump_state(state: dict[str, Any]) -> bytes:
    """state.json's bytes, carrying a sha256 of its own canonical form so that a changed byte in it is caught
    too (the manifest it holds covers only the other files)."""
    return (json.dumps({**state, "sha256": _json_digest(state)}, indent=1, sort_keys=True) + "\n").encode()


def _write_durably(path: Path, data: bytes) -> None:
    with open(path, "xb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _step_dirs(root: Path) -> dict[int, Path]:
    found = {}
    for path in root.iterdir():
        match = STEP_DIR.fullmatch(path.name)
        if match and path.is_dir():
            found[int(match[1])] = path
    return found


def step_dirs(run_dir: str | os.PathLike) -> dict[int, Path]:
    """Step -> step directory of every checkpoint kept in ``run_dir`` (empty when there is none)."""
    root = Path(run_dir) / CHECKPOINTS
    return _step_dirs(root) if root.is_dir() else {}


def _prune(root: Path, newest: int, keep: int) -> None:
    older = sorted((step, path) for step, path in _step_dirs(root).items() if step < newest)
    for _, path in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(path)


# --------------------------------------------------------------------------------------------- loading


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The step directory ``run_dir/checkpoints/latest`` names, or None when there is no ``latest`` yet.

    A ``latest`` that exists but is unusable raises CheckpointError rather than returning None: a trainer
    that took it for "no checkpoint" would start over and overwrite the run.
    """
    latest = Path(run_dir) / CHECKPOINTS / LATEST
    try:
        name = latest.read_bytes().decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return None
    if not STEP_DIR.fullmatch(name):
        raise CheckpointError(
            f"{latest}: holds {name[:60]!r}, not a step directory name; allowed: step-NNNNNNNN{_others(latest.parent)}"
        )
    if not (latest.parent / name).is_dir():
        raise CheckpointError(f"{latest}: names {name}, which is missing{_others(latest.parent)}")
    return latest.parent / name


def _others(root: Path) -> str:
    names = sorted(path.name for path in _step_dirs(root).values())
    return f"; step directories here: {', '.join(names)} (load one by its path)" if names else ""


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """The checkpoint at ``path``: a run directory (the step its ``checkpoints/latest`` names) or a step
    directory. Raises CheckpointError naming the checkpoint, the file and what is wrong when anything is
    missing, truncated, changed or unparsable; it never falls back to an older checkpoint by itself."""
    step_dir = _resolve(Path(path))
    state = _read_state(step_dir)
    model, optimizer = (_read_safetensors(step_dir, name, state["files"]) for name in (MODEL_FILE, OPTIMIZER_FILE))
    return Checkpoint(
        path=step_dir,
        step=state["step"],
        model_state=model,
        optimizer_state=_join_optimizer_state(step_dir, optimizer, state["optimizer"]),
        meta=state["meta"],
        rng=_decode_rng(state["rng"], step_dir),
    )


def _resolve(path: Path) -> Path:
    if not path.is_dir():
        raise CheckpointError(f"{path}: missing; allowed: {ALLOWED_PATHS}")
    if STEP_DIR.fullmatch(path.name):
        return path
    found = latest_checkpoint(path)
    if found is not None:
        return found
    if (path / CHECKPOINTS).is_dir():
        raise CheckpointError(
            f"{path}: no checkpoint yet ({CHECKPOINTS}/{LATEST} is missing){_others(path / CHECKPOINTS)}"
        )
    raise CheckpointError(f"{path}: not a checkpoint directory; allowed: {ALLOWED_PATHS}")


def _error(step_dir: Path, name: str, what: str) -> CheckpointError:
    return CheckpointError(f"checkpoint {step_dir}: {name}: {what}")


def _read(step_dir: Path, name: str) -> bytes:
    try:
        return (step_dir / name).read_bytes()
    except FileNotFoundError:
        held = ", ".join(sorted(path.name for path in step_dir.iterdir())) or "nothing"
        raise _error(step_dir, name, f"missing (the directory holds {held})") from None


def _read_state(step_dir: Path) -> dict[str, Any]:
    """state.json of ``step_dir``: a JSON object (``readback.parse_object``) of this format whose sha256 holds,
    every key of ``_State`` present and of its type (``readback.check``); else a CheckpointError naming it."""
    where = f"checkpoint {step_dir}: {STATE_FILE}"
    try:
        state = parse_object(_read(step_dir, STATE_FILE), where, allowed=f"a JSON object of format {FORMAT}")
    except ReadBackError as error:
        raise CheckpointError(f"{error} (the file was truncated or corrupted)") from None
    if state.get("format") != FORMAT:
        found = state.get("format")
        raise _error(step_dir, STATE_FILE, f"not an attnlab checkpoint state (format {found!r}; allowed: {FORMAT!r})")
    if state.pop("sha256", None) != _json_digest(state):
        raise _error(step_dir, STATE_FILE, "sha256 mismatch: the file was changed or corrupted")
    try:
        check(state, _State, where)
    except ReadBackError as error:
        raise CheckpointError(str(error)) from None
    if state["step"] != int(STEP_DIR.fullmatch(step_dir.name)[1]):
        raise _error(
            step_dir, STATE_FILE, f"holds step {state['step']}, not the directory's: the directory was renamed"
        )
    return state


def _read_safetensors(step_dir: Path, name: str, manifest: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    if name not in manifest:
        raise _error(step_dir, STATE_FILE, f"its manifest has no entry for {name}; it lists {sorted(manifest)}")
    data, expected = _read(step_dir, name), manifest[name]
    if len(data) < expected["bytes"]:
        raise _error(step_dir, name, f"truncated: {len(data)} of {expected['bytes']} bytes")
    if len(data) > expected["bytes"]:
        raise _error(step_dir, name, f"{len(data)} bytes, expected {expected['bytes']}: the file was changed")
    if hashlib.sha256(data).hexdigest() != expected["sha256"]:
        raise _error(step_dir, name, "sha256 mismatch: the file was changed or corrupted")
    try:
        return safetensors.torch.load(data)
    except SafetensorError as error:
        raise _error(step_dir, name, f"not a valid safetensors file ({error})") from None


def _join_optimizer_state(step_dir: Path, tensors: Mapping[str, torch.Tensor], plain: Mapping[str, Any]) -> dict:
    if not all(index.isdecimal() for index in plain["state"]):
        shown = sorted(plain["state"])[:4]
        raise _error(step_dir, STATE_FILE, f"optimizer.state has keys {shown}; allowed: parameter indices (0, 1, ...)")
    state = {int(index): dict(entries) for index, entries in plain["state"].items()}
    for key, tensor in tensors.items():
        match = _OPTIMIZER_KEY.fullmatch(key)
        if match is None:
            raise _error(step_dir, OPTIMIZER_FILE, f"tensor {key!r}: allowed names: state.<param index>.<name>")
        state.setdefault(int(match[1]), {})[match[2]] = tensor
    return {"state": state, "param_groups": plain["param_groups"]}


# ------------------------------------------------------------------------------------------------- RNG


def capture_rng() -> dict[str, Any]:
    """The global RNG states a resumed run needs to draw what the original would have: torch's, numpy's
    legacy global one, Python's ``random``, and CUDA's (every device) when this process has used CUDA;
    an unused CUDA is not initialised just to read its default state."""
    rng = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_initialized():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return rng


def restore_rng(rng: Mapping[str, Any]) -> None:
    """Put back the RNG states in ``rng`` (``capture_rng``'s dict, or ``Checkpoint.rng``); absent keys are left."""
    _check_rng_keys(rng)
    if "cuda" in rng and len(rng["cuda"]) > torch.cuda.device_count():
        raise CheckpointError(
            f"rng holds CUDA generator states for {len(rng['cuda'])} devices but this process "
            f"sees {torch.cuda.device_count()}; allowed: at most as many as are visible "
            "(drop rng['cuda'] to restore only the CPU generators)"
        )
    if "torch" in rng:
        torch.set_rng_state(rng["torch"])
    if "cuda" in rng:
        torch.cuda.set_rng_state_all(rng["cuda"])
    if "numpy" in rng:
        np.random.set_state(rng["numpy"])
    if "python" in rng:
        random.setstate(rng["python"])


def _tensor_to_b64(state: torch.Tensor) -> str:
    return base64.b64encode(state.cpu().numpy().tobytes()).decode("ascii")


def _b64_to_tensor(text: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)


def _numpy_to_json(state: tuple) -> dict[str, Any]:
    kind, keys, pos, has_gauss, cached_gaussian = state
    return {
        "kind": kind,
        "keys": np.asarray(keys).tolist(),
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "cached_gaussian": float(cached_gaussian),
    }


def _json_to_numpy(state: Mapping[str, Any]) -> tuple:
    return (
        state["kind"],
        np.array(state["keys"], dtype=np.uint32),
        state["pos"],
        state["has_gauss"],
        state["cached_gaussian"],
    )


def _python_to_json(state: tuple) -> dict[str, Any]:
    version, internal, gauss_next = state
    return {"version": version, "internal": list(internal), "gauss_next": gauss_next}


def _json_to_python(state: Mapping[str, Any]) -> tuple:
    return state["version"], tuple(state["internal"]), state["gauss_next"]


# key -> (to JSON, from JSON); torch's states are uint8 tensors, kept as base64
_RNG_CODECS = {
    "torch": (_tensor_to_b64, _b64_to_tensor),
    "cuda": (lambda states: [_tensor_to_b64(s) for s in states], lambda texts: [_b64_to_tensor(t) for t in texts]),
    "numpy": (_numpy_to_json, _json_to_numpy),
    "python": (_python_to_json, _json_to_python),
}


def _check_rng_keys(rng: Mapping[str, Any]) -> None:
    unknown = set(rng) - set(_RNG_CODECS)
    if unknown:
        raise ArgumentError(f"rng has unknown keys {sorted(unknown)}; allowed: {', '.join(_RNG_CODECS)}")


def _encode_rng(rng: Mapping[str, Any]) -> dict[str, Any]:
    _check_rng_keys(rng)
    return _as_json({key: _RNG_CODECS[key][0](state) for key, state in rng.items()}, "rng")


def _decode_rng(rng: Mapping[str, Any], step_dir: Path) -> dict[str, Any]:
    """state.json's rng as ``capture_rng`` returned it; a CheckpointError where it holds another key or a state
    its codec cannot decode."""
    try:
        return {key: _RNG_CODECS[key][1](state) for key, state in rng.items()}
    except (KeyError, TypeError, ValueError, IndexError) as error:  # binascii.Error is a ValueError
        raise _error(
            step_dir,
            STATE_FILE,
            f"rng is not the generator states attnlab saves ({type(error).__name__}); allowed: the keys "
            f"{', '.join(_RNG_CODECS)}, each as capture_rng's state encodes",
        ) from None


# ------------------------------------------------------------------------------------------ compatibility


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


def check_compatible(saved: Mapping[str, Any], current: Mapping[str, Any], what: str = "model config") -> None:
    """Raise CheckpointError listing every field where ``saved`` and ``current`` differ, saved vs current.

    Both are compared as they read back from JSON (a tuple equals a list); nested mappings field by field
    under dotted names; a key on one side only differs.
    """
    differing = _differences(_as_json(dict(saved), f"saved {what}"), _as_json(dict(current), f"current {what}"))
    if differing:
        lines = "\n".join(f"  {name}: saved {a!r}, current {b!r}" for name, a, b in differing)
        raise CheckpointError(f"{what} differs from the checkpoint's in {len(differing)} field(s):\n{lines}")


def _differences(saved: Mapping[str, Any], current: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any, Any]]:
    found = []
    for key in sorted(set(saved) | set(current)):
        a, b = saved.get(key, _ABSENT), current.get(key, _ABSENT)
        if isinstance(a, dict) and isinstance(b, dict):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a is _ABSENT or b is _ABSENT or _canonical(a) != _canonical(b):
            found.append((f"{prefix}{key}", a, b))
    return found


def _canonical(value: Any) -> str:
    # JSON text, not ==: 1 == 1.0 == True in Python, and nan != nan
    return json.dumps(value, sort_keys=True)
