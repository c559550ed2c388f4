"""GGUF checkpoints (llama.cpp, Ollama, LM Studio) as model inputs: converted once, then loaded as folders.

transformers reads a GGUF file with ``from_pretrained(folder, gguf_file=name)``, dequantizing every
tensor to float, but it takes seconds to minutes and needs the optional ``gguf`` and ``accelerate``
packages. attnlab converts each file once into a ``save_pretrained`` folder (float32 safetensors, the
tokenizer and chat template from the same file) in the cache under ``converted/<sha256 of the file>``,
so a later load of the same bytes is a plain folder load, and an edited file is converted anew.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import struct
from pathlib import Path
from unittest import mock

import torch

from attnlab import io, readback
from attnlab.errors import Error
from attnlab.loading import fetch, validate
from attnlab.loading.common import LoadError, quiet_transformers

EXTRA = "pip install 'attnlab[gguf]'"
SOURCE = "attnlab_source.json"
# The version of the checks a conversion passed (``validate.check_gguf``); a cached folder stamped with another (an
# older attnlab's, converted before any check, possibly with weights transformers filled at random) is checked again
# against its file before it is served, and dropped from the cache when the file fails.
CHECKS = 1
MAGIC = b"GGUF"
STAGE = ".convert-"  # a conversion in progress, beside its cache folder, named with its pid


def gguf_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".gguf" and p.is_file())


def _check_extra() -> None:
    missing = [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        raise LoadError(f"reading a .gguf file needs the optional packages {' and '.join(missing)}: {EXTRA}")


def _check_header(path: Path) -> None:
    with open(path, "rb") as f:
        head = f.read(4)
    if head != MAGIC:
        raise LoadError(f"{path} is not a GGUF file (it starts with {head!r}, not {MAGIC!r})")


def _check_complete(path: Path):
    """The GGUFReader of ``path``; refuse a file whose tensor table cannot be read or whose tensors run past its
    end (a download or copy cut short), before a conversion that would fail minutes later on a reshape."""
    from gguf import GGUFReader

    size = path.stat().st_size
    try:
        reader = GGUFReader(path)
    except (struct.error, ValueError, IndexError, OverflowError) as exc:
        raise LoadError(
            f"{path} is not a complete GGUF file ({size:,} bytes; its tensor table cannot be read: "
            f"{type(exc).__name__}); fetch or copy it again"
        ) from None
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > size:
        raise LoadError(
            f"{path} is cut short: its tensors end at byte {end:,} and the file has {size:,}; fetch or copy it again"
        )
    return reader


def converted(path: str | os.PathLike, *, log=None) -> Path:
    """The ``save_pretrained`` folder of the GGUF file at ``path``, converting it on first use, once its header
    and tensor table describe the model (``validate.check_gguf``): a refused file leaves nothing in the cache."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise LoadError(f"GGUF file {path} does not exist")
    _check_header(path)
    digest = fetch.digest(path)
    out = fetch.cache_dir() / "converted" / digest
    if (out / SOURCE).is_file():
        if _stamp(out) == CHECKS:
            return out
        try:
            _check(path)
        except LoadError:
            io.remove(out, ignore_errors=True)  # the cache's own folder (stamped by SOURCE); a link is unlinked
            raise
        io.write_json(out / SOURCE, _source(path, digest))
        return out
    if out.exists() or out.is_symlink():
        # every folder attnlab converts into lands whole, SOURCE in it (the stage is renamed): this one it did not write
        raise LoadError(
            f"{out} is in attnlab's cache but holds no {SOURCE}, so attnlab did not write it and leaves it as it is; "
            f"move it away to convert {path.name} there"
        )
    _check(path)
    if log is not None:
        log(f"converting {path.name} to a float32 checkpoint in {out} (once per file)")
    out.parent.mkdir(parents=True, exist_ok=True)
    io.remove_stale(out.parent, STAGE)
    stage = io.temp_dir(out.parent, STAGE)
    try:
        _convert(path, stage)
        io.write_json(stage / SOURCE, _source(path, digest))
        try:
            os.replace(stage, out)
        except OSError:
            # another process converting the same file (two runs, two test workers) landed first: its folder is
            # complete once SOURCE is in it, and a folder cannot be renamed over a non-empty one
            if not (out / SOURCE).is_file():
                raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return out


def _check(path: Path) -> None:
    _check_extra()
    validate.check_gguf(path, _check_complete(path))


def _source(path: Path, digest: str) -> dict:
    return {"gguf": str(path.resolve()), "sha256": digest, "checks": CHECKS}


def _stamp(out: Path) -> int | None:
    """The checks version a cached folder was stamped with; None for an older attnlab's folder or an unreadable
    stamp (then it is checked again, never trusted)."""
    try:
        stamp = readback.read_object(out / SOURCE).get("checks")
    except Error:
        return None
    return stamp if isinstance(stamp, int) else None


def _convert(path: Path, stage: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    # Its dequantizing loop draws a bare tqdm bar that transformers' own switch does not reach: in a log it is a
    # screen of redraws for every converted file, where attnlab prints one line per stage.
    silent_bar = functools.partial(gguf_utils.tqdm, disable=True)
    with quiet_transformers(), mock.patch.object(gguf_utils, "tqdm", silent_bar), validate.shared_name_maps():
        try:
            # Mismatched shapes come back in the loading info rather than as transformers' multi-line error.
            model, info = AutoModelForCausalLM.from_pretrained(
                path.parent,
                gguf_file=path.name,
                dtype=torch.float32,
                local_files_only=True,
                output_loading_info=True,
                ignore_mismatched_sizes=True,
            )
            tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True)
        except (OSError, ValueError, KeyError, IndexError, TypeError, RuntimeError, AttributeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise LoadError(f"could not read {path} as a GGUF checkpoint: {first}") from exc
        validate.check_loading_info(info, str(path), type(model).__name__)
        validate.check_finite(model, path)
        # A GGUF-loaded model refuses save_pretrained while it still carries the quantizer; its tensors
        # are already dequantized floats, so dropping it loses nothing.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(stage)
        tokenizer.save_pretrained(stage)
