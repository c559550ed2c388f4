"""Load a local Hugging Face checkpoint as a user would, with errors that say what to do."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import torch

from attnlab import devices, progress
from attnlab.loading import validate
from attnlab.loading.common import LoadError, quiet_transformers, refusing
from attnlab.options import MODEL_HELP

WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")


def placement(device: str, dtype: str | None) -> tuple[torch.device, torch.dtype, str | None]:
    """(device, dtype, device_map) a checkpoint is loaded with: ``auto`` on a CUDA machine spreads the model
    with accelerate's ``device_map="auto"`` (whole on the first GPU when it fits there, else over every GPU,
    then the CPU), a named device takes the whole model. LoadError for a device or dtype that is not allowed
    or not present."""
    try:
        place = devices.resolve(device)
        torch_dtype = devices.checkpoint_dtype(dtype, place)
    except devices.DeviceError as exc:
        raise LoadError(str(exc)) from None
    spread = str(device).strip().lower() == "auto" and place.type == "cuda"
    return place, torch_dtype, "auto" if spread else None


def dtype_reason(place: torch.device, dtype: str | None) -> str:
    """How a run chose the dtype it computes in (and a GGUF is converted in), in words."""
    if dtype in (None, "auto"):
        return f"--dtype auto on {'a CUDA device' if place.type == 'cuda' else 'the CPU'}"
    return f"--dtype {dtype}"


def resolve_for(spec: str | os.PathLike, device: str, dtype: str | None, log=None) -> Path:
    """``resolve_checkpoint`` of ``spec`` in the dtype a run on ``device`` with ``--dtype dtype`` computes in: what a
    command that checks its models before loading them resolves, so a GGUF is converted once, in that dtype."""
    place, torch_dtype, _ = placement(device, dtype)
    return resolve_checkpoint(spec, dtype=torch_dtype, why=dtype_reason(place, dtype), log=log)


# ``org/name`` or ``org/name@revision``: what a Hub id looks like (huggingface_hub's own check runs as well)
HUB_ID = re.compile(
    r"(?P<repo>[A-Za-z0-9_](?:[\w.-]{0,94}[\w])?/[A-Za-z0-9_](?:[\w.-]{0,94}[\w])?)"
    r"(?:@(?P<revision>[^\s@]+))?"
)


def hub_cache() -> Path:
    """The Hugging Face Hub cache, found as huggingface_hub finds it but read when called (so a changed
    environment counts): ``$HF_HUB_CACHE``, else ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``."""
    env = os.environ
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    folder = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(os.path.expandvars(os.path.expanduser(folder)))


def _hub_cli() -> str:
    """The command the installed huggingface_hub provides for downloads: ``hf`` (huggingface_hub >= 0.34), else
    the older ``huggingface-cli``. Read from its metadata: importing ``huggingface_hub.cli`` may go online."""
    from importlib import metadata

    try:
        scripts = {
            ep.name for ep in metadata.distribution("huggingface_hub").entry_points if ep.group == "console_scripts"
        }
    except metadata.PackageNotFoundError:
        return "hf"
    return "huggingface-cli" if "hf" not in scripts and "huggingface-cli" in scripts else "hf"


def hub_snapshot(spec: str | os.PathLike) -> Path | None:
    """The cached snapshot folder a Hub id (``org/name`` or ``org/name@revision``) names, found in the local
    Hugging Face cache only (``local_files_only``: nothing is downloaded, nothing is asked of the network);
    None for a ``spec`` not shaped like a Hub id; a one-line LoadError, naming the cache and the download
    command, for an id the cache does not hold."""
    match = HUB_ID.fullmatch(spec) if isinstance(spec, str) else None
    if match is None or match["repo"].endswith(".gguf") or "--" in match["repo"] or ".." in match["repo"]:
        return None
    try:
        import huggingface_hub
        from huggingface_hub import errors
    except ImportError:
        return None
    repo, revision = match["repo"], match["revision"]
    cache = hub_cache()
    try:
        found = huggingface_hub.snapshot_download(repo, revision=revision, cache_dir=cache, local_files_only=True)
    except errors.HFValidationError:
        return None
    except errors.LocalEntryNotFoundError as exc:
        import shlex

        command = f"{_hub_cli()} download {shlex.quote(repo)}" + (
            f" --revision {shlex.quote(revision)}" if revision else ""
        )
        incomplete = isinstance(exc, getattr(errors, "IncompleteSnapshotError", ()))
        where = "is incomplete in" if incomplete else "is neither a local path nor in"
        raise LoadError(
            f"model {spec!r} {where} the Hugging Face cache ({cache}); download it with: {command}"
        ) from None
    return Path(found)


def resolve_checkpoint(
    spec: str | os.PathLike, *, dtype: torch.dtype | None = None, why: str | None = None, log=None
) -> Path:
    """The ``save_pretrained`` folder that ``--model`` names: an existing path first (a folder, a
    ``.gguf`` file, or a folder holding one ``.gguf`` and no config.json), else a fetched model's name, else
    a Hub id (``org/name[@revision]``) in the local Hugging Face cache, whose snapshot folder is then read
    as a path is (``hub_snapshot``). GGUF files are converted once per dtype (``convert.converted``), into
    ``dtype``, the one the run computes in (None: what ``--dtype auto`` gives on this machine), ``why`` saying
    how the run chose it; ``log`` hears of hashing and conversion."""
    from attnlab.loading import convert, fetch

    if dtype is None:
        dtype, why = devices.checkpoint_dtype("auto", "auto"), "--dtype auto on this machine"
    path = Path(spec).expanduser()
    if not path.exists() and str(spec) in fetch.MODELS:
        try:
            found = fetch.verified(str(spec), log=log)
        except fetch.FetchError as exc:
            raise LoadError(str(exc)) from None
        if found is None:
            raise LoadError(f"model {str(spec)!r} is not fetched yet; run: attnlab fetch {spec}")
        return convert.converted(found, dtype, why=why, log=log)
    if not path.exists() and (snapshot := hub_snapshot(spec)) is not None:
        return resolve_checkpoint(snapshot, dtype=dtype, why=why, log=log)
    if path.is_file() and path.suffix == ".gguf":
        return convert.converted(path, dtype, why=why, log=log)
    if path.is_dir() and not (path / "config.json").is_file():
        ggufs = convert.gguf_files(path)
        if len(ggufs) == 1:
            return convert.converted(ggufs[0], dtype, why=why, log=log)
        if ggufs:
            raise LoadError(
                f"{path} holds {len(ggufs)} .gguf files ({', '.join(p.name for p in ggufs)}); pass one of them"
            )
    return check_checkpoint(path)


def provenance(spec: str | os.PathLike, *, log=None) -> dict[str, str]:
    """Where ``--model`` came from, for a run's config.json: the absolute path of what it names (a fetched
    model's GGUF, a .gguf file, a save_pretrained folder, or a Hub id's cached snapshot folder) and its sha256 (of
    a folder: of its weight and config files' digests, name by name). Digests are remembered by file
    (``fetch.digest``), so this costs a stat once a file has been hashed; ``log`` hears of a large file hashed."""
    import hashlib

    from attnlab.loading import fetch

    path = Path(spec).expanduser()
    if not path.exists() and str(spec) in fetch.MODELS:
        path = fetch.model_file(str(spec))
    elif not path.exists() and (snapshot := hub_snapshot(spec)) is not None:
        path = snapshot
    path = path.resolve()
    if path.is_file():
        return {"model_path": str(path), "model_sha256": fetch.digest(path, log=log)}
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".safetensors", ".bin", ".gguf", ".json"))
    combined = hashlib.sha256("".join(f"{p.name}:{fetch.digest(p, log=log)}\n" for p in files).encode()).hexdigest()
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
        raise LoadError(
            f"{folder} has no weights (model.safetensors or pytorch_model.bin); "
            "save the model with save_pretrained or download its weight files there"
        )
    return folder


def load_model(
    path: str | os.PathLike,
    *,
    device: str = "cpu",
    dtype: str | None = "float32",
    trust_remote_code: bool = False,
    tokenizer: bool = True,
    log=None,
):
    """(model, tokenizer or None) from a local folder, a GGUF file, a fetched model's name or a Hub id in the
    local Hugging Face cache (``resolve_checkpoint``), in eval mode with eager attention; offline only. Its config
    and weights are checked against its architecture first (``validate.check_folder``): a checkpoint with tensors
    missing, left over or misshapen is refused, never loaded with random values. A GGUF is converted in the dtype
    the model is loaded in; ``log`` hears of hashing, conversion and loading, each with its size.

    ``trust_remote_code`` stays off unless asked for: custom modeling code runs only then (and attnlab
    routes only transformers' own architectures anyway).
    """
    place, torch_dtype, device_map = placement(device, dtype)
    folder = resolve_checkpoint(path, dtype=torch_dtype, why=dtype_reason(place, dtype), log=log)
    if log is not None:
        weights = sum(p.stat().st_size for pattern in WEIGHT_FILES for p in folder.glob(pattern))
        name = str(torch_dtype).removeprefix("torch.")
        size = progress.size(weights)
        log(f"loading {folder} ({size} of weights) on {place} in {name}; importing transformers' model code")
    with quiet_transformers():
        return _load(folder, place, torch_dtype, trust_remote_code, tokenizer, device_map, log)


def _load(
    folder: Path,
    device: torch.device,
    torch_dtype: torch.dtype,
    trust_remote_code: bool,
    tokenizer: bool,
    device_map: str | None = None,
    log=None,
):
    from transformers import AutoModelForCausalLM

    if device_map is not None and importlib.util.find_spec("accelerate") is None:
        raise LoadError(
            "--device auto spreads a model over the GPUs with accelerate, which is not installed; "
            "pip install accelerate, or pass --device cuda:N to load the whole model on one GPU"
        )
    if log is not None:  # on a cold disk the import and the check take seconds each: a line between them
        log(f"loading {folder.name}: checking its config and tensor shapes against its architecture")
    validate.check_folder(folder, trust_remote_code)
    if log is not None:
        log(f"loading {folder.name}: reading its weights (each checked finite) and its tokenizer")
    with refusing(f"could not load a causal LM from {folder}"):
        # Mismatched shapes come back in the loading info rather than as transformers' multi-line error.
        model, info = AutoModelForCausalLM.from_pretrained(
            folder,
            dtype=torch_dtype,
            attn_implementation="eager",
            local_files_only=True,
            trust_remote_code=trust_remote_code,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            **({"device_map": device_map} if device_map is not None else {}),
        )
    validate.check_loading_info(info, str(folder), type(model).__name__)
    if device_map is None:
        model.to(device)
    model.eval()
    validate.check_finite(model, folder)
    return model, load_tokenizer(folder, trust_remote_code) if tokenizer else None


def load_tokenizer(folder: Path, trust_remote_code: bool = False):
    """The tokenizer saved in a checkpoint folder, or a one-line LoadError."""
    from transformers import AutoTokenizer

    try:
        with quiet_transformers():
            return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LoadError(
            f"{folder} has no usable tokenizer ({type(exc).__name__}); save one there with tokenizer.save_pretrained"
        ) from None


def check_model(spec: str | os.PathLike, device: str = "auto", dtype: str | None = None) -> Path:
    """What ``--model`` names, checked without loading the weights: the folder, its config and its weights'
    names and shapes (``validate.check_folder``), and its tokenizer (a GGUF is converted, once, in the dtype a run
    on ``device`` with ``--dtype dtype`` computes in). A study calls it before it writes anything."""
    folder = resolve_for(spec, device, dtype)
    validate.check_folder(folder)
    load_tokenizer(folder)
    return folder
