"""GGUF checkpoints (llama.cpp, Ollama, LM Studio) as model inputs: converted once, then loaded as folders.

transformers reads a GGUF file with ``from_pretrained(folder, gguf_file=name)``, dequantizing every
tensor to float, but it takes seconds to minutes and needs the optional ``gguf`` and ``accelerate``
packages. attnlab converts each file once per dtype into a ``save_pretrained`` folder (safetensors in the dtype
the run computes in, the tokenizer and chat template from the same file) in the cache under
``converted/<sha256 of the file>-<dtype>``, so a later load of the same bytes in the same dtype is a plain folder
load, an edited file is converted anew, and a float32 conversion is never served to a bfloat16 run or the reverse.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import time
from pathlib import Path
from unittest import mock

import torch

from attnlab import devices, io, progress, readback
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


def converted(path: str | os.PathLike, dtype: torch.dtype = torch.float32, *, why: str | None = None, log=None) -> Path:
    """The ``save_pretrained`` folder of the GGUF file at ``path`` in ``dtype`` (one of ``devices.DTYPES``), converting
    it on first use, once its header and tensor table describe the model (``validate.check_gguf``): a refused file
    leaves nothing in the cache. ``why``: why this dtype (the run's --dtype), for the line ``log`` gets; ``log`` also
    hears of the hashing, the tensors converted and the size written."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise LoadError(f"GGUF file {path} does not exist")
    name = str(dtype).removeprefix("torch.")
    if name not in devices.DTYPES:
        raise LoadError(f"a GGUF file converts to {', '.join(devices.DTYPES)}, got {dtype}")
    _check_header(path)
    digest = fetch.digest(path, log=log)
    out = fetch.cache_dir() / "converted" / f"{digest}-{name}"
    if name == "float32":
        _adopt(out.parent / digest, out)
    if (out / SOURCE).is_file():
        checks, stamped = _stamp(out)
        if stamped == name:
            if checks != CHECKS:
                _say(log, f"checking the cached conversion of {path.name} against its file (an older attnlab's)")
                try:
                    _check(path)
                except LoadError:
                    io.remove(out, ignore_errors=True)  # the cache's own folder (stamped by SOURCE); a link is unlinked
                    raise
                io.write_json(out / SOURCE, _source(path, digest, name))
            _say(log, f"using the {name} conversion of {path.name} cached in {out}, stamped by attnlab's checks")
            return out
        # its stamp names another dtype, or none that reads back: its weights are not known to be in this one
        io.remove(out, ignore_errors=True)
    if out.exists() or out.is_symlink():
        # every folder attnlab converts into lands whole, SOURCE in it (the stage is renamed): this one it did not write
        raise LoadError(
            f"{out} is in attnlab's cache but holds no {SOURCE}, so attnlab did not write it and leaves it as it is; "
            f"move it away to convert {path.name} there"
        )
    started = time.monotonic()
    _say(
        log,
        f"converting {path.name} ({progress.size(path.stat().st_size)}) to {name} in {out}, "
        + (f"the dtype this run computes in ({why})" if why else "the dtype asked for")
        + ": the dequantized weights are cast to it once here, as loading would cast them anyway, so a wider copy "
        "would only cost disk and load time; once per file and dtype",
    )
    _say(log, f"converting {path.name}: reading its header and tensor table")
    reader = _check(path, log)
    out.parent.mkdir(parents=True, exist_ok=True)
    io.remove_stale(out.parent, STAGE)
    stage = io.temp_dir(out.parent, STAGE)
    try:
        _convert(path, stage, dtype, reader, log)
        io.write_json(stage / SOURCE, _source(path, digest, name))
        try:
            os.replace(stage, out)
        except OSError:
            # another process converting the same file (two runs, two test workers) landed first: its folder is
            # complete once SOURCE is in it, and a folder cannot be renamed over a non-empty one
            if not (out / SOURCE).is_file():
                raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    written = progress.size(_bytes(out))
    _say(log, f"converted {path.name} in {time.monotonic() - started:.0f} s: {written} of {name} on disk in {out}")
    return out


def _say(log, text: str) -> None:
    if log is not None:
        log(text)


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def _adopt(legacy: Path, out: Path) -> None:
    """An older attnlab's conversion, cached under the file's sha256 alone and always in float32, moved to its
    float32 entry ``out`` (its stamp, naming no dtype, reads as float32), so an upgrade converts nothing again and
    leaves no orphan of gigabytes behind; a folder there without attnlab's stamp is left as it is."""
    if legacy.is_symlink() or not (legacy / SOURCE).is_file() or out.exists() or out.is_symlink():
        return
    try:
        os.rename(legacy, out)
    except OSError:  # another process moved it first, or converted into ``out`` meanwhile
        pass


def _check(path: Path, log=None):
    """The GGUFReader of ``path`` once the file passes ``validate.check_gguf``."""
    _check_extra()
    reader = _check_complete(path)
    _say(log, f"converting {path.name}: checking its {len(reader.tensors)} tensors against the model its header names")
    validate.check_gguf(path, reader)
    return reader


def _source(path: Path, digest: str, dtype: str) -> dict:
    return {"gguf": str(path.resolve()), "sha256": digest, "dtype": dtype, "checks": CHECKS}


def _stamp(out: Path) -> tuple[int | None, str | None]:
    """(the checks version, the dtype) a cached folder was stamped with. Checks: None for an older attnlab's
    folder (then it is checked again, never trusted). Dtype: float32 where the stamp names none, as every attnlab
    before the dtype was stamped converted to float32. Both None for an unreadable stamp."""
    try:
        stamp = readback.read_object(out / SOURCE)
    except Error:
        return None, None
    checks, dtype = stamp.get("checks"), stamp.get("dtype", "float32")
    return checks if isinstance(checks, int) else None, dtype if isinstance(dtype, str) else None


def _convert(path: Path, stage: Path, dtype: torch.dtype, reader, log=None) -> None:
    """``path`` saved into ``stage`` in ``dtype``, read through ``reader``, its GGUFReader."""
    import gguf
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    # Its dequantizing loop draws a bare tqdm bar that transformers' own switch does not reach: in a log it is a
    # screen of redraws for every converted file; attnlab's ticking says how far it is only while it takes long.
    def tensors(items, *_, **__):
        return progress.ticking(items, desc=f"converting {path.name}", unit="tensor")

    # transformers parses the header anew for the config, the weights and the tokenizer, seconds each for a
    # vocabulary of 50,000 tokens: all three read the one the checks parsed
    with (
        quiet_transformers(),
        mock.patch.object(gguf_utils, "tqdm", tensors),
        mock.patch.object(gguf, "GGUFReader", lambda *_: reader),
        validate.shared_name_maps(),
    ):
        _say(log, f"converting {path.name}: dequantizing its tensors to {str(dtype).removeprefix('torch.')}")
        try:
            # Mismatched shapes come back in the loading info rather than as transformers' multi-line error.
            model, info = AutoModelForCausalLM.from_pretrained(
                path.parent,
                gguf_file=path.name,
                dtype=dtype,
                local_files_only=True,
                output_loading_info=True,
                ignore_mismatched_sizes=True,
            )
            _say(log, f"converting {path.name}: reading its tokenizer")
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
        _say(log, f"converting {path.name}: writing the checkpoint")
        model.save_pretrained(stage)
        tokenizer.save_pretrained(stage)
