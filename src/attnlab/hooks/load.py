"""Load a local Hugging Face checkpoint as a user would, with errors that say what to do."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import torch
from safetensors import SafetensorError

from .common import LoadError, quiet_transformers

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")


def resolve_dtype(name: str, device: str) -> torch.dtype:
    if name not in DTYPES:
        raise LoadError(f"unknown dtype {name!r}; use one of {', '.join(DTYPES)}")
    if device != "cpu" and not (device.startswith("cuda") and torch.cuda.is_available()):
        raise LoadError(f"device {device!r} is not available here; use --device cpu")
    return DTYPES[name]


MODEL_HELP = "a fetched model's name (attnlab fetch --list), a .gguf file, or a folder written by save_pretrained"


def resolve_checkpoint(spec: str | os.PathLike, *, log=None) -> Path:
    """The ``save_pretrained`` folder that ``--model`` names: an existing path first (a folder, a
    ``.gguf`` file, or a folder holding one ``.gguf`` and no config.json), else a fetched model's name.
    GGUF files are converted once (``convert.converted``)."""
    from . import convert, fetch

    path = Path(spec).expanduser()
    if not path.exists() and str(spec) in fetch.MODELS:
        try:
            found = fetch.verified(str(spec))
        except fetch.FetchError as exc:
            raise LoadError(str(exc)) from None
        if found is None:
            raise LoadError(f"model {str(spec)!r} is not fetched yet; run: attnlab fetch {spec}")
        return convert.converted(found, log=log)
    if path.is_file() and path.suffix == ".gguf":
        return convert.converted(path, log=log)
    if path.is_dir() and not (path / "config.json").is_file():
        ggufs = convert.gguf_files(path)
        if len(ggufs) == 1:
            return convert.converted(ggufs[0], log=log)
        if ggufs:
            raise LoadError(f"{path} holds {len(ggufs)} .gguf files ({', '.join(p.name for p in ggufs)}); "
                            "pass one of them")
    return check_checkpoint(path)


def provenance(spec: str | os.PathLike) -> dict[str, str]:
    """Where ``--model`` came from, for a run's config.json: the absolute path of what it names (a fetched
    model's GGUF, a .gguf file, or a save_pretrained folder) and its sha256 (of a folder: of its weight and config
    files' digests, name by name). Digests are remembered by file (``fetch.digest``), so this costs a stat once a
    file has been hashed."""
    import hashlib

    from . import fetch

    path = Path(spec).expanduser()
    if not path.exists() and str(spec) in fetch.MODELS:
        path = fetch.model_file(str(spec))
    path = path.resolve()
    if path.is_file():
        return {"model_path": str(path), "model_sha256": fetch.digest(path)}
    files = sorted(p for p in path.iterdir()
                   if p.is_file() and p.suffix in (".safetensors", ".bin", ".gguf", ".json"))
    combined = hashlib.sha256("".join(f"{p.name}:{fetch.digest(p)}\n" for p in files).encode()).hexdigest()
    return {"model_path": str(path), "model_sha256": combined}


def check_checkpoint(path: str | os.PathLike) -> Path:
    folder = Path(path).expanduser()
    if not folder.exists():
        raise LoadError(f"model {str(path)!r} is neither a path nor a known model name; pass {MODEL_HELP}")
    if not folder.is_dir():
        raise LoadError(f"model path {folder} is a file but not a .gguf; pass {MODEL_HELP}")
    if not (folder / "config.json").is_file():
        raise LoadError(f"{folder} has no config.json and no .gguf file; pass {MODEL_HELP}")
    if not any(any(folder.glob(pattern)) for pattern in WEIGHT_FILES):
        raise LoadError(f"{folder} has no weights (model.safetensors or pytorch_model.bin); "
                        "save the model with save_pretrained or download its weight files there")
    return folder


def load_model(path: str | os.PathLike, *, device: str = "cpu", dtype: str = "float32",
               trust_remote_code: bool = False, tokenizer: bool = True, log=None):
    """(model, tokenizer or None) from a local folder, a GGUF file or a fetched model's name
    (``resolve_checkpoint``), in eval mode with eager attention; offline only.

    ``trust_remote_code`` stays off unless asked for: custom modeling code runs only then (and attnlab
    routes only transformers' own architectures anyway).
    """
    torch_dtype = resolve_dtype(dtype, device)
    folder = resolve_checkpoint(path, log=log)
    with quiet_transformers():
        return _load(folder, device, torch_dtype, trust_remote_code, tokenizer)


def _load(folder: Path, device: str, torch_dtype: torch.dtype, trust_remote_code: bool, tokenizer: bool):
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch_dtype, attn_implementation="eager", local_files_only=True,
            trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError, SafetensorError, pickle.UnpicklingError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, pickle.UnpicklingError):
            first = "its weights hold Python objects beyond tensors, which are never unpickled"
        raise LoadError(f"could not load a causal LM from {folder}: {first}") from None
    model.to(device).eval()
    return model, load_tokenizer(folder, trust_remote_code) if tokenizer else None


def load_tokenizer(folder: Path, trust_remote_code: bool = False):
    """The tokenizer saved in a checkpoint folder, or a one-line LoadError."""
    from transformers import AutoTokenizer

    try:
        with quiet_transformers():
            return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LoadError(f"{folder} has no usable tokenizer ({type(exc).__name__}); save one there with "
                        "tokenizer.save_pretrained") from None


def check_model(spec: str | os.PathLike) -> Path:
    """What ``--model`` names, checked without loading the weights: the folder and its tokenizer (a GGUF
    is converted, once). A study calls it before it writes anything."""
    folder = resolve_checkpoint(spec)
    load_tokenizer(folder)
    return folder
